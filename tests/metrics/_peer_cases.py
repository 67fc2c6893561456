"""Read the peer-library test cases of ``tests/metrics/data/peer_cases/*.json`` and run them.

Each case holds the inputs and expected values transcribed from one peer library's own test
file (``source``: repository, path, commit, test), the convention and options it maps to, and
the tolerance the peer's test uses. Masks are stored as recipes (:func:`build_mask`):

* ``{"array": [...]}`` — the literal array;
* ``{"zeros": shape, "fill": [{"box": [[start, stop], ...], "value": v}, ...]}`` — boxes set on
  a zero array (``null`` bounds are open, as in a Python slice);
* ``{"runs": [[value, count], ...]}`` — a 1-D ``np.concatenate`` of constant runs;
* ``{"sphere": {"radius", "centre", "shape", "spacing"}}`` — MONAI's ``create_spherical_seg_3d``:
  voxels whose ``index * spacing - centre`` lies within ``radius``;
* ``{"stack": [spec, ...]}`` — a new first axis (channels or batch);
* ``{"bits": base64, "shape": [...]}`` — ``np.packbits`` of a boolean mask (generated corpora).

A spec may carry ``"as_2d": "column"``: a 1-D array becomes an ``(n, 1)`` image (our metrics
take 2-D or 3-D masks); such cases only use quantities that do not depend on the embedding.
"""

from __future__ import annotations

import base64
import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).resolve().parent / "data" / "peer_cases"


def _decode(value: Any) -> Any:
    """JSON strings ``"nan"``, ``"inf"``, ``"-inf"`` → floats, recursively."""
    if isinstance(value, str) and value in ("nan", "inf", "-inf"):
        return float(value)
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        return {k: _decode(v) for k, v in value.items()}
    return value


def load_cases(name: str) -> list[dict]:
    """The cases of ``data/peer_cases/<name>.json``."""
    with open(DATA / f"{name}.json") as fh:
        doc = json.load(fh)
    return [_decode(c) for c in doc["cases"]]


def load_doc(name: str) -> dict:
    """The whole fixture document (header and cases)."""
    with open(DATA / f"{name}.json") as fh:
        return _decode(json.load(fh))


@lru_cache(maxsize=64)
def _build_cached(spec_json: str) -> np.ndarray:
    spec = json.loads(spec_json)
    arr = _build(spec)
    if spec.get("as_2d") == "column" and arr.ndim == 1:
        arr = arr[:, None]
    arr.setflags(write=False)
    return arr


def _build(spec: dict) -> np.ndarray:
    dtype = np.dtype(spec.get("dtype", "int64"))
    if "array" in spec:
        return np.asarray(spec["array"], dtype=dtype)
    if "zeros" in spec:
        out = np.zeros(spec["zeros"], dtype=dtype)
        for part in spec.get("fill", []):
            out[tuple(slice(a, b) for a, b in part["box"])] = part["value"]
        return out
    if "runs" in spec:
        return np.concatenate([np.full(n, v, dtype=dtype) for v, n in spec["runs"]])
    if "sphere" in spec:
        s = spec["sphere"]
        grid = np.ogrid[tuple(slice(0, n) for n in s["shape"])]
        d2 = sum((g.astype(float) * sp - c) ** 2 for g, sp, c in zip(grid, s["spacing"], s["centre"]))
        return (d2 <= s["radius"] * s["radius"]).astype(dtype)
    if "stack" in spec:
        return np.stack([build_mask(p) for p in spec["stack"]])
    if "bits" in spec:
        shape = spec["shape"]
        raw = np.unpackbits(np.frombuffer(base64.b64decode(spec["bits"]), dtype=np.uint8))
        return raw[: math.prod(shape)].reshape(shape).astype(dtype)
    raise ValueError(f"unknown mask recipe {sorted(spec)}")


def build_mask(spec: dict) -> np.ndarray:
    """The (read-only) array a recipe describes."""
    return _build_cached(json.dumps(spec, sort_keys=True))


def pack_mask(mask: np.ndarray) -> dict:
    """A ``bits`` recipe for a boolean mask."""
    m = np.asarray(mask, dtype=bool)
    return {"bits": base64.b64encode(np.packbits(m.ravel())).decode(), "shape": list(m.shape)}


def monai_reduce(values: np.ndarray, reduction: str) -> tuple[np.ndarray, np.ndarray]:
    """MONAI's ``do_metric_reduction`` on a ``(B, C)`` array: NaN entries count as absent."""
    f = np.array(values, dtype=np.float64)
    ok = ~np.isnan(f)
    f[~ok] = 0.0
    if reduction == "none":
        return np.where(ok, f, np.nan), ok.astype(float)
    if reduction == "mean":
        per_b = ok.sum(1)
        chan = np.where(per_b > 0, f.sum(1) / np.maximum(per_b, 1), 0.0)
        n_b = (per_b > 0).sum()
        return np.asarray(chan.sum() / n_b if n_b else 0.0), np.asarray(float(n_b))
    if reduction == "mean_batch":
        n = ok.sum(0)
        return np.where(n > 0, f.sum(0) / np.maximum(n, 1), 0.0), n.astype(float)
    if reduction == "sum_batch":
        return f.sum(0), ok.sum(0).astype(float)
    raise ValueError(f"reduction {reduction!r} not transcribed")


def close(actual: Any, expected: Any, rtol: float, atol: float) -> bool:
    """``|a - e| <= atol + rtol |e|`` elementwise; NaN equals NaN, ±inf equal themselves."""
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if a.shape != e.shape:
        a = a.reshape(e.shape) if a.size == e.size else a
        if a.shape != e.shape:
            return False
    same_nan = np.isnan(a) & np.isnan(e)
    same_inf = np.isinf(a) & np.isinf(e) & (np.sign(a) == np.sign(e))
    with np.errstate(invalid="ignore"):
        near = np.isfinite(a) & np.isfinite(e) & (np.abs(a - e) <= atol + rtol * np.abs(e))
    return bool(np.all(same_nan | same_inf | near))
