"""hest1k: HEST-Benchmark task folders and the HEST-1k release layout, written in the tests
(patches .h5 as HEST's patcher writes them, .h5ad in anndata's on-disk format: CSR or dense X,
obs/var dataframes with an ``_index``), read back spot by spot; bad input names the file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from medimg_bench.registry import create_dataset

h5py = pytest.importorskip("h5py")
FIXTURE = Path(__file__).resolve().parents[1] / "protocols" / "fixtures" / "hest_bench.npz"


def _strings(group, name: str, values) -> None:
    group.create_dataset(name, data=np.asarray(values, dtype=object), dtype=h5py.string_dtype("utf-8"))


def _frame(f, key: str, index) -> None:
    g = f.create_group(key)
    g.attrs.update({"encoding-type": "dataframe", "encoding-version": "0.2.0", "_index": "_index",
                    "column-order": np.array([], dtype=object).astype(h5py.string_dtype())})
    _strings(g, "_index", index)


def write_h5ad(path: Path, counts: np.ndarray, obs: list[str], var: list[str], *, sparse: bool = True) -> None:
    """An AnnData file as anndata ≥ 0.8 writes it (``X`` CSR group or dense dataset)."""
    import scipy.sparse as sp

    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as f:
        f.attrs.update({"encoding-type": "anndata", "encoding-version": "0.1.0"})
        if sparse:
            m = sp.csr_matrix(counts)
            g = f.create_group("X")
            g.attrs.update({"encoding-type": "csr_matrix", "encoding-version": "0.1.0", "shape": m.shape})
            for k in ("data", "indices", "indptr"):
                g.create_dataset(k, data=getattr(m, k))
        else:
            f.create_dataset("X", data=counts).attrs.update({"encoding-type": "array", "encoding-version": "0.2.0"})
        _frame(f, "obs", obs)
        _frame(f, "var", var)


def write_patches(path: Path, barcodes, seed: int, size: int = 16) -> np.ndarray:
    """HEST's patches .h5: ``img`` (N, H, W, 3) uint8, ``barcode`` (N, 1) strings, ``coords``."""
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 256, (len(barcodes), size, size, 3), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as f:
        f.create_dataset("img", data=img)
        f.create_dataset("barcode", data=np.asarray(barcodes, dtype=object)[:, None], dtype=h5py.string_dtype())
        f.create_dataset("coords", data=rng.integers(0, 5000, (len(barcodes), 2)))
    return img


def fixture_inputs() -> dict:
    z = np.load(FIXTURE)
    samples = sorted({k.split(".")[1] for k in z.files if k.startswith("in.S")})
    return {"genes": [str(g) for g in z["in.genes"]], "all_genes": [str(g) for g in z["in.all_genes"]],
            "groups": json.loads(str(z["in.groups"])),
            "samples": {s: {k: z[f"in.{s}.{k}"] for k in ("barcodes", "counts", "embeddings")} for s in samples}}


def make_hest_bench(root: Path) -> dict:
    """A HEST-Benchmark task folder (splits, patches, adata, var_50genes.json) of the fixture's
    samples; the .h5ad spots are stored in another order than the patches."""
    inp = fixture_inputs()
    (root / "splits").mkdir(parents=True)
    (root / "var_50genes.json").write_text(json.dumps({"genes": inp["genes"]}))
    groups = inp["groups"]
    for i, test in enumerate(groups):
        train = [s for j, g in enumerate(groups) if j != i for s in g]
        for part, ids in (("train", train), ("test", test)):
            pd.DataFrame({"sample_id": ids, "patches_path": [f"patches/{s}.h5" for s in ids],
                          "expr_path": [f"adata/{s}.h5ad" for s in ids]}).to_csv(root / "splits" / f"{part}_{i}.csv",
                                                                                 index=False)
    for k, (s, d) in enumerate(inp["samples"].items()):
        write_patches(root / "patches" / f"{s}.h5", list(d["barcodes"]), k)
        order = np.random.default_rng(k).permutation(len(d["barcodes"]))
        write_h5ad(root / "adata" / f"{s}.h5ad", d["counts"][order], list(d["barcodes"][order]), inp["all_genes"],
                   sparse=k % 2 == 0)
    return inp


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("hest") / "IDC"
    return root, make_hest_bench(root)


def test_bench_layout_spots_and_expression(bench):
    root, inp = bench
    ds = create_dataset("hest1k", root=root)
    assert ds.genes == inp["genes"] and len(ds.folds()) == 3
    assert ds.folds()[1] == (["S1", "S2", "S4", "S5"], ["S3"])
    n = sum(len(d["barcodes"]) for d in inp["samples"].values())
    assert len(ds) == n
    cols = [inp["all_genes"].index(g) for g in inp["genes"]]
    s1 = inp["samples"]["S1"]
    for i in (0, 7):
        sample = ds[i]
        assert sample["id"] == f"S1/{s1['barcodes'][i]}"
        np.testing.assert_allclose(sample["label"].numpy(), np.log1p(s1["counts"][i, cols]), rtol=1e-6)
        assert sample["image"].shape == (3, 16, 16) and float(sample["image"].max()) <= 1.0
        with h5py.File(root / "patches" / "S1.h5") as f:
            np.testing.assert_allclose(sample["image"].permute(1, 2, 0).numpy() * 255, f["img"][i], atol=1e-3)
    # the patient group of a spot is the fold that tests its sample (HEST's folds are patient-level)
    assert set(ds.manifest.loc[ds.manifest["sample_id"] == "S4", "patient_id"]) == {"fold2"}
    raw = create_dataset("hest1k", root=root.parent, task="IDC", split="test2", normalize=False)
    assert set(raw.manifest["sample_id"]) == {"S4", "S5"}
    s4 = inp["samples"]["S4"]
    np.testing.assert_allclose(raw[0]["label"].numpy(), s4["counts"][0, cols])
    train0 = create_dataset("hest1k", root=root, split="train0")
    assert set(train0.manifest["sample_id"]) == {"S3", "S4", "S5"}


def test_release_layout(tmp_path):
    inp = fixture_inputs()
    rows = []
    for k, (s, d) in enumerate(inp["samples"].items()):
        write_patches(tmp_path / "patches" / f"{s}.h5", list(d["barcodes"]), k)
        write_h5ad(tmp_path / "st" / f"{s}.h5ad", d["counts"], list(d["barcodes"]), inp["all_genes"], sparse=False)
        (tmp_path / "metadata").mkdir(exist_ok=True)
        (tmp_path / "metadata" / f"{s}.json").write_text(json.dumps({"pixel_size_um_estimated": 0.5}))
        patient = {"S1": "A", "S2": "A", "S3": "B", "S4": "", "S5": ""}[s]
        rows.append({"dataset_title": "Study X" if s != "S5" else "Study Y", "id": s, "patient": patient,
                     "oncotree_code": "IDC"})
    pd.DataFrame(rows).to_csv(tmp_path / "HEST_v1_1_0.csv", index=False, encoding="utf-8-sig")
    with pytest.raises(FileNotFoundError, match="gene list"):
        create_dataset("hest1k", root=tmp_path)  # the release has no var_50genes.json
    ds = create_dataset("hest1k", root=tmp_path, genes=inp["genes"][:4])
    # groups (dataset_title, patient; a missing patient is 'Patient 1'): (X, A) (X, B) (X, P1) (Y, P1)
    assert [sorted(te) for _, te in ds.folds()] == [["S1", "S2"], ["S3"], ["S4"], ["S5"]]
    sub = create_dataset("hest1k", root=tmp_path, genes=inp["genes"][:4], ids=["S1", "S3", "S4"])
    assert set(sub.manifest["sample_id"]) == {"S1", "S3", "S4"} and len(sub.folds()) == 3
    assert ds.exclusions == [] and sub.exclusions == []
    # a partial download: the table lists S6, whose files are not there — an exclusion, counted
    pd.DataFrame([*rows, {"dataset_title": "Study Y", "id": "S6", "patient": "", "oncotree_code": "IDC"}]).to_csv(
        tmp_path / "HEST_v1_1_0.csv", index=False)
    part = create_dataset("hest1k", root=tmp_path, genes=inp["genes"][:4])
    assert set(part.manifest["sample_id"]) == {"S1", "S2", "S3", "S4", "S5"}
    assert [(e["id"], e["file"]) for e in part.exclusions] == [("S6", "st/S6.h5ad")]


def test_bad_input_names_the_file(tmp_path, bench):
    import shutil

    root, inp = bench
    bad = tmp_path / "IDC"
    shutil.copytree(root, bad)
    with pytest.raises(ValueError, match=r"S1.h5ad'.*genes of the gene list are not in var \(\['NOPE'\]\)"):
        create_dataset("hest1k", root=bad, genes=[inp["genes"][0], "NOPE"])
    d = inp["samples"]["S3"]
    write_h5ad(bad / "adata" / "S3.h5ad", d["counts"][1:], list(d["barcodes"][1:]), inp["all_genes"])
    with pytest.raises(ValueError, match=r"S3.h5ad'.*1 patch barcodes are not spots of obs"):
        create_dataset("hest1k", root=bad)
    (bad / "adata" / "S3.h5ad").write_bytes(b"garbage")
    with pytest.raises(ValueError, match=r"cannot read .*S3.h5ad' as HDF5"):
        create_dataset("hest1k", root=bad)
    (bad / "adata" / "S3.h5ad").unlink()
    with pytest.raises(FileNotFoundError, match=r"sample 'S3'.*S3.h5ad' does not exist"):
        create_dataset("hest1k", root=bad)
    moved = tmp_path / "S3_patches"
    shutil.copytree(root, moved)
    ok = create_dataset("hest1k", root=moved, split="test1")
    (moved / "patches" / "S3.h5").write_bytes(b"truncated")  # corrupted after the dataset was built
    with pytest.raises(ValueError, match=r"cannot read patches .*S3.h5'"):
        ok[0]
    with pytest.raises(ValueError, match="split='test9'"):
        create_dataset("hest1k", root=root, split="test9")
    with pytest.raises(FileNotFoundError, match="neither splits/"):
        create_dataset("hest1k", root=tmp_path / "IDC" / "patches")


def test_datasets_check_understands_it(bench):
    from medimg_bench.datasets.check import check_from_config

    root, _ = bench
    report = check_from_config({"name": "hest1k", "root": str(root), "split": "all", "options": {}})
    assert report.ok, report.format()
