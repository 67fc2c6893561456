"""Fixtures for fastMRI's masks and evaluation metrics, from fastMRI's own code.

Runs ``fastmri/data/subsample.py`` (RandomMaskFunc, EquiSpacedMaskFunc,
EquispacedMaskFractionFunc) and ``fastmri/evaluate.py`` (psnr, ssim, nmse, and
``transforms.center_crop`` as ``evaluate`` applies it) of ``facebookresearch/fastMRI`` at
commit 91f2df4711adbb6d643df1810f234e4abcf5881b on generated shapes / volumes, and stores the
numbers in ``tests/metrics/data/fastmri_eval.npz`` and ``tests/datasets/data/fastmri_masks.npz``.

Re-run::

    git --git-dir=<mirror of facebookresearch/fastMRI> archive 91f2df47 fastmri | tar -x -C /tmp/fastmri
    PYTHONPATH=. python tools/fastmri_fixtures.py /tmp/fastmri

``evaluate.py`` imports ``runstats`` (its running mean, not used by the functions called here):
a stand-in module is put in ``sys.modules`` when the package is absent.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
COMMIT = "91f2df4711adbb6d643df1810f234e4abcf5881b"


def _import(root: str):
    sys.path.insert(0, root)
    if "runstats" not in sys.modules:
        try:
            import runstats  # noqa: F401
        except ImportError:
            sys.modules["runstats"] = types.SimpleNamespace(Statistics=object)  # type: ignore[assignment]
    import fastmri.evaluate as ev
    from fastmri.data import subsample, transforms

    return ev, subsample, transforms


def masks(subsample) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    kinds = {"random": subsample.RandomMaskFunc, "equispaced": subsample.EquiSpacedMaskFunc,
             "equispaced_fraction": subsample.EquispacedMaskFractionFunc}
    rows, out = [], []
    for i in range(240):
        kind = list(kinds)[i % 3]
        cols = int(rng.integers(32, 400))
        cfs, accs = ([0.08, 0.04], [4, 8]) if i % 2 else ([0.08], [4])
        if i % 5 == 0:
            cfs, accs = [0.04], [8]
        seed = i if i % 4 else tuple(map(ord, f"file{1000 + i}.h5"))
        m, n_low = kinds[kind](cfs, accs)([1, 640, cols, 2], seed=seed)
        rows.append((i, kind, cols, tuple(cfs), tuple(accs), seed, n_low))
        out.append(m.numpy().reshape(-1) > 0)
    return {
        "kind": np.array([r[1] for r in rows]), "cols": np.array([r[2] for r in rows]),
        "cfs": np.array([r[3] + (np.nan,) * (2 - len(r[3])) for r in rows]),
        "accs": np.array([r[4] + (np.nan,) * (2 - len(r[4])) for r in rows]),
        "seed_is_file": np.array([isinstance(r[5], tuple) for r in rows]),
        "seed": np.array([r[0] for r in rows]), "num_low": np.array([r[6] for r in rows]),
        "mask": np.array([np.pad(m, (0, 400 - m.size)) for m in out]),  # (n, 400) bool, first `cols` used
    }


def volumes(ev, transforms) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    targets, preds, res = [], [], []
    for i in range(24):
        s, h, w = int(rng.integers(1, 4)), int(rng.integers(12, 34)), int(rng.integers(12, 30))
        yy, xx = np.mgrid[0:h, 0:w]
        base = np.exp(-((yy - h / 2) ** 2 + (xx - w / 2) ** 2) / (2 * (h / 4) ** 2))
        t = (base[None] * rng.uniform(0.5, 3, (s, 1, 1)) + rng.uniform(0, 0.2, (s, h, w))) * 10 ** rng.uniform(-5, 2)
        p = t + rng.normal(0, rng.uniform(0.01, 0.3) * t.max(), t.shape)
        dtype = np.float32 if i % 2 else np.float64
        t, p = t.astype(dtype), p.astype(dtype)
        import torch

        size = (min(h, w), min(h, w))
        tc = transforms.center_crop(torch.from_numpy(t), size).numpy() if i % 3 == 0 else t
        pc = transforms.center_crop(torch.from_numpy(p), size).numpy() if i % 3 == 0 else p
        res.append([float(np.asarray(f(tc, pc)).reshape(-1)[0]) for f in (ev.psnr, ev.ssim, ev.nmse)])
        targets.append(t)
        preds.append(p)
    # flat float64 values + shapes and dtypes (no object arrays: loading needs no pickle)
    return {"target": np.concatenate([t.astype(np.float64).ravel() for t in targets]),
            "pred": np.concatenate([p.astype(np.float64).ravel() for p in preds]),
            "shape": np.array([t.shape for t in targets]), "float32": np.array([t.dtype == np.float32 for t in targets]),
            "cropped": np.array([i % 3 == 0 for i in range(24)]), "psnr_ssim_nmse": np.array(res)}


def main(root: str) -> None:
    ev, subsample, transforms = _import(root)
    m = masks(subsample)
    out = REPO / "tests" / "datasets" / "data" / "fastmri_masks.npz"
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, commit=np.array(COMMIT), **m)
    v = volumes(ev, transforms)
    out2 = REPO / "tests" / "metrics" / "data" / "fastmri_eval.npz"
    np.savez_compressed(out2, commit=np.array(COMMIT), **v)
    print(f"wrote {out} ({len(m['kind'])} masks) and {out2} ({len(v['target'])} volume pairs)")


if __name__ == "__main__":
    main(sys.argv[1])
