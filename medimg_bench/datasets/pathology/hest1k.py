"""The ``hest1k`` dataset: spot patches and gene expression of HEST-1k (mahmoodlab/HEST), one
sample per spatial-transcriptomics spot, for ``protocol=regression_probe``.

Two released layouts are read (HEST repository, ``src/hest/HESTData.py``,
``create_benchmark_data`` / ``create_splits``, and ``src/hest/bench/benchmark.py``):

* a **HEST-Benchmark task** folder (``bench_data/<TASK>``, e.g. ``IDC``): ``splits/train_<i>.csv``
  and ``splits/test_<i>.csv`` (``sample_id, patches_path, expr_path``: one fold per patient group),
  ``patches/<id>.h5``, ``adata/<id>.h5ad`` and the gene list ``var_50genes.json``
  (``{"genes": [...]}``);
* the **HEST-1k release**: ``HEST_v1_1_0.csv`` (one row per sample: ``id``, ``dataset_title``,
  ``patient``, ``oncotree_code``, ...), ``st/<id>.h5ad``, ``patches/<id>.h5``,
  ``metadata/<id>.json``; folds are then one per (dataset_title, patient) — leave one patient
  out, as ``create_benchmark_data`` groups them — and ``genes`` must be given.

A patches file holds ``img`` (N, H, W, 3) uint8 and ``barcode`` (N, 1) strings (and ``coords``);
the ``.h5ad`` is read with h5py following anndata's on-disk format (``X`` dense or CSR/CSC,
``obs``/``var`` indices), so anndata is not needed. ``label`` is the expression of the gene list
at the spot, ``log1p`` of the counts as HEST-Benchmark's ``normalize=True`` does
(``st_dataset.normalize_adata``: ``sc.pp.log1p`` only).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.datasets.base import ManifestDataset, dataset_root
from medimg_bench.registry import register_dataset

__all__ = ["HESTDataset", "hest1k", "read_h5ad_expression", "hest_folds"]


def _strings(a: Any) -> list[str]:
    return [v.decode() if isinstance(v, bytes) else str(v) for v in np.asarray(a).reshape(-1)]


def _index(f: Any, key: str, path: Path) -> list[str]:
    g = f.get(key)
    if g is None or not hasattr(g, "keys"):
        raise ValueError(f"hest1k: {str(path)!r}: no {key!r} group (not an AnnData .h5ad of anndata ≥ 0.7)")
    name = g.attrs.get("_index", "_index")
    name = name.decode() if isinstance(name, bytes) else str(name)
    if name not in g:
        raise ValueError(f"hest1k: {str(path)!r}: {key}/{name} (the {key} index) is missing")
    return _strings(g[name][()])


def _columns(f: Any, cols: np.ndarray, path: Path) -> np.ndarray:
    """Columns ``cols`` of ``X`` (all rows) as float64, from a dense or CSR/CSC ``X``."""
    x = f.get("X")
    if x is None:
        raise ValueError(f"hest1k: {str(path)!r}: no X (expression matrix)")
    if hasattr(x, "keys"):  # sparse group
        import scipy.sparse as sp

        enc = x.attrs.get("encoding-type", x.attrs.get("h5sparse_format", ""))
        enc = enc.decode() if isinstance(enc, bytes) else str(enc)
        shape = tuple(int(v) for v in x.attrs["shape"])
        kind = {"csr_matrix": sp.csr_matrix, "csr": sp.csr_matrix, "csc_matrix": sp.csc_matrix, "csc": sp.csc_matrix}
        if enc not in kind:
            raise ValueError(f"hest1k: {str(path)!r}: X has encoding {enc!r}; csr_matrix, csc_matrix or dense")
        m = kind[enc]((x["data"][()], x["indices"][()], x["indptr"][()]), shape=shape)
        return np.asarray(m[:, cols].toarray(), dtype=np.float64)
    order = np.argsort(cols)
    uniq, inv = np.unique(cols[order], return_inverse=True)
    block = np.asarray(x[:, uniq.tolist()], dtype=np.float64)[:, inv]
    out = np.empty_like(block)
    out[:, order] = block
    return out


def read_h5ad_expression(path: str | Path, genes: Sequence[str], barcodes: Sequence[str] | None = None,
                         *, log1p: bool = True) -> np.ndarray:
    """Expression ``(n_barcodes, n_genes)`` float64 of ``genes`` at ``barcodes`` (all spots when
    None) from an ``.h5ad``; ``log1p`` as HEST-Benchmark. A missing gene or barcode is an
    error naming the file and the first ones missing."""
    import h5py

    p = Path(path)
    try:
        f = h5py.File(p, "r")
    except OSError as exc:
        raise ValueError(f"hest1k: cannot read {str(p)!r} as HDF5 ({exc})") from exc
    with f:
        var = {g: i for i, g in enumerate(_index(f, "var", p))}
        missing = [g for g in genes if g not in var]
        if missing:
            raise ValueError(f"hest1k: {str(p)!r}: {len(missing)} genes of the gene list are not in var "
                             f"({missing[:5]})")
        obs = _index(f, "obs", p)
        x = _columns(f, np.asarray([var[g] for g in genes], dtype=np.int64), p)
    if barcodes is not None:
        pos = {b: i for i, b in enumerate(obs)}
        lost = [b for b in barcodes if b not in pos]
        if lost:
            raise ValueError(f"hest1k: {str(p)!r}: {len(lost)} patch barcodes are not spots of obs ({lost[:5]})")
        x = x[[pos[b] for b in barcodes]]
    return np.log1p(x) if log1p else x


class HESTDataset(ManifestDataset):
    """Spots of HEST-1k samples: ``image`` ``3×H×W`` float32 in [0, 1] (the spot patch),
    ``label`` the log-expression of the gene list (float32, one value per gene)."""

    task = "regression"

    def __init__(self, manifest: pd.DataFrame, *, root: Path, genes: Sequence[str], expression: np.ndarray,
                 folds: list[tuple[list[str], list[str]]], transform: Callable | None = None) -> None:
        super().__init__(manifest, root=root, path_columns=("path", "expr_path"), classes=list(genes),
                         transform=transform, name="hest1k")
        self.genes = list(genes)
        self._expr = expression.astype(np.float32)
        self._folds = folds
        self._files: dict[str, Any] = {}
        self._pid: int | None = None

    def __getstate__(self) -> dict[str, Any]:  # HDF5 handles are per process
        return {**self.__dict__, "_files": {}, "_pid": None}

    def folds(self) -> list[tuple[list[str], list[str]]]:
        """``[(train sample ids, test sample ids), ...]``: HEST-Benchmark's patient-level folds."""
        return [(list(a), list(b)) for a, b in self._folds]

    def _h5(self, rel: str) -> Any:
        import h5py

        if self._pid != os.getpid():
            self._files, self._pid = {}, os.getpid()
        if rel not in self._files:
            try:
                self._files[rel] = h5py.File(self.resolve(rel), "r")
            except OSError as exc:
                raise ValueError(f"hest1k: cannot read patches {str(self.resolve(rel))!r} ({exc})") from exc
        return self._files[rel]

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        img = np.asarray(self._h5(str(row["path"]))["img"][int(row["index"])])
        if img.ndim != 3 or img.shape[-1] != 3:
            raise ValueError(f"hest1k: {self.resolve(row['path'])}: img[{row['index']}] has shape {img.shape}, "
                             f"expected (H, W, 3)")
        image = torch.from_numpy(np.ascontiguousarray(img, dtype=np.float32) / np.float32(255.0)).permute(2, 0, 1)
        meta = self.meta_for(row)
        meta.update(modality="pathology", sample_id=str(row["sample_id"]), barcode=str(row["barcode"]))
        return {"id": str(row["id"]), "image": image.contiguous(),
                "label": torch.from_numpy(self._expr[int(row["expr_row"])].copy()), "meta": meta}


def _read_genes(root: Path, genes: str | Sequence[str] | None) -> list[str]:
    if genes is None:
        raise ValueError("hest1k: set genes= (a gene-list JSON such as var_50genes.json, or a list of genes)")
    if isinstance(genes, str):
        p = Path(genes) if Path(genes).is_absolute() else root / genes
        if not p.exists():
            raise FileNotFoundError(f"hest1k: gene list {str(p)!r} does not exist")
        data = json.loads(p.read_text())
        out = data.get("genes") if isinstance(data, dict) else data
        if not isinstance(out, list) or not out:
            raise ValueError(f"hest1k: {str(p)!r} holds no gene list ({{'genes': [...]}})")
        return [str(g) for g in out]
    return [str(g) for g in genes]


def hest_folds(root: Path) -> tuple[list[str], list[tuple[list[str], list[str]]], str]:
    """Sample ids, folds and layout name of a HEST-Benchmark task folder or a HEST-1k release."""
    split_dir = root / "splits"
    if split_dir.is_dir():
        folds = []
        for i in range(len(list(split_dir.glob("test_*.csv")))):
            pair = []
            for part in ("train", "test"):
                f = split_dir / f"{part}_{i}.csv"
                if not f.exists():
                    raise FileNotFoundError(f"hest1k: {str(f)!r} is missing (folds are train_<i>/test_<i>.csv)")
                df = pd.read_csv(f, dtype=str)
                if "sample_id" not in df.columns:
                    raise ValueError(f"hest1k: {str(f)!r} has no sample_id column")
                pair.append(df["sample_id"].tolist())
            folds.append((pair[0], pair[1]))
        if not folds:
            raise ValueError(f"hest1k: {str(split_dir)!r} holds no test_<i>.csv")
        ids = list(dict.fromkeys(s for tr, te in folds for s in te + tr))
        return ids, folds, "bench"
    meta = root / "HEST_v1_1_0.csv"
    if not meta.exists():
        raise FileNotFoundError(f"hest1k: {str(root)!r} has neither splits/ (a HEST-Benchmark task) nor "
                                f"HEST_v1_1_0.csv (the HEST-1k release)")
    df = pd.read_csv(meta, dtype=str, encoding="utf-8-sig")
    for col in ("id", "dataset_title"):
        if col not in df.columns:
            raise ValueError(f"hest1k: {str(meta)!r} has no {col!r} column")
    df = df[[(root / "st" / f"{i}.h5ad").exists() for i in df["id"]]]
    df["patient"] = df.get("patient", pd.Series(index=df.index, dtype=str)).fillna("Patient 1")
    groups = df.groupby(["dataset_title", "patient"], sort=True)["id"].agg(list).tolist()
    folds = [([s for j, g in enumerate(groups) if j != i for s in g], list(groups[i])) for i in range(len(groups))]
    return df["id"].tolist(), folds, "release"


def _patch_barcodes(path: Path) -> list[str]:
    import h5py

    try:
        with h5py.File(path, "r") as f:
            for key in ("barcode", "img"):
                if key not in f:
                    raise ValueError(f"hest1k: {str(path)!r} has no {key!r} dataset (a HEST patches .h5)")
            bc, n = _strings(f["barcode"][()]), int(f["img"].shape[0])
    except OSError as exc:
        raise ValueError(f"hest1k: cannot read {str(path)!r} as HDF5 ({exc})") from exc
    if len(bc) != n:
        raise ValueError(f"hest1k: {str(path)!r}: {len(bc)} barcodes for {n} patches")
    return bc


@register_dataset("hest1k", tags=("pathology", "regression", "spatial_transcriptomics"))
def hest1k(
    root: str | Path,
    split: str = "all",
    *,
    task: str | None = None,
    genes: str | Sequence[str] | None = "var_50genes.json",
    ids: Sequence[str] | None = None,
    normalize: bool = True,
    transform: Callable | None = None,
) -> HESTDataset:
    """Spots of a HEST-Benchmark task (``root`` = ``bench_data/<TASK>``, or ``root`` =
    ``bench_data`` with ``task=``) or of the HEST-1k release (``root`` holding
    ``HEST_v1_1_0.csv``; ``ids`` picks samples). ``split``: ``all``, or ``train<i>`` /
    ``test<i>`` for fold i. ``genes``: a JSON gene list relative to ``root`` (HEST-Benchmark's
    ``var_50genes.json``) or a list; ``normalize``: log1p of the counts (HEST-Benchmark's default)."""
    r = dataset_root(root, "hest1k")
    if task:
        r = dataset_root(r / task, "hest1k")
    sample_ids, folds, layout = hest_folds(r)
    if ids is not None:
        unknown = sorted(set(map(str, ids)) - set(sample_ids))
        if unknown:
            raise ValueError(f"hest1k: ids {unknown[:5]} are not samples of {str(r)!r}")
        keep = set(map(str, ids))
        sample_ids = [s for s in sample_ids if s in keep]
        folds = [([s for s in a if s in keep], [s for s in b if s in keep]) for a, b in folds]
        folds = [f for f in folds if f[0] and f[1]]
    if split != "all":
        m = re.fullmatch(r"(train|test)(\d+)", str(split))
        if m is None or int(m.group(2)) >= len(folds):
            raise ValueError(f"hest1k: split={split!r}; 'all', or train<i> / test<i> with i < {len(folds)}")
        sample_ids = folds[int(m.group(2))][0 if m.group(1) == "train" else 1]
    gene_list = _read_genes(r, genes)
    expr_dir = "adata" if layout == "bench" else "st"
    rows, blocks, n = [], [], 0
    for s, fold_of in zip(sample_ids, _test_fold(sample_ids, folds)):
        patches = r / "patches" / f"{s}.h5"
        expr = r / expr_dir / f"{s}.h5ad"
        for f in (patches, expr):
            if not f.exists():
                raise FileNotFoundError(f"hest1k: sample {s!r}: {str(f)!r} does not exist")
        bc = _patch_barcodes(patches)
        blocks.append(read_h5ad_expression(expr, gene_list, bc, log1p=normalize))
        rows.append(pd.DataFrame({"id": [f"{s}/{b}" for b in bc], "sample_id": s, "barcode": bc,
                                  "index": np.arange(len(bc)), "expr_row": np.arange(n, n + len(bc)),
                                  "path": f"patches/{s}.h5", "expr_path": f"{expr_dir}/{s}.h5ad",
                                  "patient_id": fold_of}))
        n += len(bc)
    if not rows:
        raise ValueError(f"hest1k: no samples of split {split!r} under {str(r)!r}")
    ds = HESTDataset(pd.concat(rows, ignore_index=True), root=r, genes=gene_list,
                     expression=np.concatenate(blocks), folds=folds, transform=transform)
    if layout == "release" and ids is None:  # listed by the release table, not downloaded: counted
        for s in _absent_release_samples(r, sample_ids):
            ds.exclude(s, file=f"st/{s}.h5ad", reason="listed in HEST_v1_1_0.csv, not on disk (st/<id>.h5ad)")
    return ds


def _absent_release_samples(root: Path, present: Sequence[str]) -> list[str]:
    """The ids of ``HEST_v1_1_0.csv`` without an ``st/<id>.h5ad`` (a partial download)."""
    listed = pd.read_csv(root / "HEST_v1_1_0.csv", dtype=str, usecols=["id"], encoding="utf-8-sig")["id"]
    have = set(present)
    return [s for s in listed if not (root / "st" / f"{s}.h5ad").exists() and s not in have]


def _test_fold(sample_ids: Sequence[str], folds: Sequence[tuple[list[str], list[str]]]) -> list[str]:
    """Each sample's patient group: the fold that tests it (HEST's folds are patient groups)."""
    where = {s: f"fold{i}" for i, (_, te) in enumerate(folds) for s in te}
    return [where.get(s, str(s)) for s in sample_ids]
