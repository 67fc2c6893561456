"""Fixture: HEST-Benchmark's own fold loop (PCA → ridge → Pearson per gene → fold merge) on
generated spots, embeddings and counts.

HEST at commit afd42c3143092c51e6bcc0f1df65bbf58a467e5e (mahmoodlab/HEST, 2025-09-01). Re-run::

    git --git-dir=<mirror of mahmoodlab/HEST> archive afd42c31 src/hest/bench | tar -x -C /tmp/hest
    python tools/hest_bench_reference.py /tmp/hest/src

HEST's ``benchmark.predict_folds`` runs unchanged on a generated HEST-Benchmark task folder
(``splits/``, embeddings written with HEST's ``save_hdf5``). Only modules it imports but this
computation does not use are stubbed (loguru, hestcore, huggingface_hub, the encoder zoo — the
embeddings are already on disk, so no encoder runs), and ``st_dataset.load_adata`` (scanpy, not
installed) is replaced by a look-up of the generated counts with HEST's subsetting
(``adata[barcodes][:, genes]``) and its ``normalize`` (``np.log1p``). Writes
``tests/protocols/fixtures/hest_bench.npz``: the inputs (per sample: barcodes, counts of every
gene, embeddings; gene list; folds) and HEST's outputs per setting.
"""

from __future__ import annotations

import json
import sys
import tempfile
import types
from argparse import Namespace
from pathlib import Path

import numpy as np
import pandas as pd

OUT = Path(__file__).resolve().parents[1] / "tests" / "protocols" / "fixtures" / "hest_bench.npz"
COMMIT = "afd42c3143092c51e6bcc0f1df65bbf58a467e5e"
SETTINGS = {"pca8": {"dimreduce": "PCA", "latent_dim": 8}, "none": {"dimreduce": None, "latent_dim": 8}}
PATIENTS = {"P1": ["S1", "S2"], "P2": ["S3"], "P3": ["S4", "S5"]}


def _generate(seed: int = 7) -> dict:
    rng = np.random.default_rng(seed)
    all_genes = [f"G{i}" for i in range(15)]
    genes = ["G3", "G0", "G7", "G11", "G5", "G14", "G9", "G1", "G12", "G6"]  # not in var order
    w = rng.normal(size=(24, len(all_genes)))
    data = {}
    for samples in PATIENTS.values():
        for s in samples:
            n = int(rng.integers(30, 60))
            emb = rng.normal(size=(n, 24)).astype(np.float32) + rng.normal(size=24).astype(np.float32)
            rate = np.exp(0.4 * emb @ w / 5 + 1.0)
            counts = rng.poisson(rate).astype(np.float32)
            data[s] = {"barcodes": np.array([f"{s}-bc{j:03d}" for j in rng.permutation(n)]), "counts": counts,
                       "embeddings": emb}
    return {"all_genes": all_genes, "genes": genes, "samples": data}


def _stub_modules(src: Path, gen: dict) -> None:
    sys.path.insert(0, str(src))
    log = types.SimpleNamespace(info=lambda *a, **k: None, warning=lambda *a, **k: None)
    stubs = {"loguru": {"logger": log}, "hestcore": {}, "hestcore.segmentation": {
        "get_path_relative": lambda f, p: str(Path(f).parent / p)},
        "hestcore.datasets": {"H5HESTDataset": None}, "huggingface_hub": {"snapshot_download": None},
        "hest.bench.cpath_model_zoo": {}, "hest.bench.cpath_model_zoo.inference_models": {
            "CustomInferenceEncoder": object, "InferenceEncoder": object,
            "inf_encoder_factory": lambda name: (lambda path: types.SimpleNamespace(precision=None))}}

    def load_adata(expr_path, genes=None, barcodes=None, normalize=False):
        s = Path(expr_path).stem
        d = gen["samples"][s]
        df = pd.DataFrame(d["counts"].astype(np.float64), index=d["barcodes"], columns=gen["all_genes"])
        df = df.loc[barcodes, genes]
        return np.log1p(df) if normalize else df

    stubs["hest.bench.st_dataset"] = {"load_adata": load_adata}
    for name, attrs in stubs.items():
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        sys.modules[name] = mod


def main(src: str) -> None:
    gen = _generate()
    _stub_modules(Path(src), gen)
    import importlib

    benchmark = importlib.import_module("hest.bench.benchmark")  # HEST's own module
    save_hdf5 = importlib.import_module("hest.bench.utils.file_utils").save_hdf5

    groups = list(PATIENTS.values())
    arrays: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory() as tmp:
        bench, emb_root = Path(tmp) / "bench" / "TASK", Path(tmp) / "emb"
        (bench / "splits").mkdir(parents=True)
        (bench / "patches").mkdir()
        (bench / "var_50genes.json").write_text(json.dumps({"genes": gen["genes"]}))
        for i, test in enumerate(groups):  # HEST's create_splits: one fold per patient group
            train = [s for j, g in enumerate(groups) if j != i for s in g]
            for part, ids in (("train", train), ("test", test)):
                pd.DataFrame({"sample_id": ids, "patches_path": [f"patches/{s}.h5" for s in ids],
                              "expr_path": [f"adata/{s}.h5ad" for s in ids]}).to_csv(
                    bench / "splits" / f"{part}_{i}.csv", index=False)
        for s, d in gen["samples"].items():
            (bench / "patches" / f"{s}.h5").write_bytes(b"")
            out = emb_root / "TASK" / "resnet50"
            out.mkdir(parents=True, exist_ok=True)
            save_hdf5(str(out / f"{s}.h5"), {"embeddings": d["embeddings"],
                                             "barcodes": d["barcodes"].astype(object)}, mode="w")
            arrays[f"in.{s}.barcodes"] = d["barcodes"].astype("U")
            arrays[f"in.{s}.counts"] = d["counts"]
            arrays[f"in.{s}.embeddings"] = d["embeddings"]
        for key, setting in SETTINGS.items():
            args = Namespace(**{**benchmark.BenchmarkConfig().__dict__, **setting, "seed": 1,
                                "bench_data_root": str(bench.parent), "embed_dataroot": str(emb_root),
                                "overwrite": False})
            save = Path(tmp) / "results" / key
            save.mkdir(parents=True)
            res = benchmark.predict_folds(args, str(save), "resnet50", "TASK", "cpu", str(bench), None)
            per_gene = {d["name"]: d for d in res["pearson_corrs"]}
            arrays[f"out.{key}.fold_gene"] = np.array([per_gene[g]["pearson_corrs"] for g in gen["genes"]]).T
            arrays[f"out.{key}.pearson_mean"] = np.array(res["pearson_mean"])
            arrays[f"out.{key}.pearson_std"] = np.array(res["pearson_std"])
            arrays[f"out.{key}.gene_mean"] = np.array([per_gene[g]["mean"] for g in gen["genes"]])
    arrays["in.genes"] = np.array(gen["genes"])
    arrays["in.all_genes"] = np.array(gen["all_genes"])
    arrays["in.groups"] = np.array(json.dumps(groups))
    arrays["commit"] = np.array(COMMIT)
    np.savez(OUT, **arrays)
    print(f"wrote {OUT}: " + ", ".join(f"{k}={float(arrays[f'out.{k}.pearson_mean']):.6f}" for k in SETTINGS))


if __name__ == "__main__":
    main(sys.argv[1])
