"""Volumes as VLM input (tasks/volume_prompts.py): which slices, which grey levels, which plane,
the montage, and the sampling recorded in the request and in the response-cache key."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from medimg_bench.models.vlm.base import GenerationRequest, GenerationResponse, GenerativeAdapter
from medimg_bench.models.vlm.cache import request_key
from medimg_bench.tasks.volume_prompts import (
    SAMPLINGS,
    VolumeSampling,
    resolve_sampling,
    sample_volume,
)


def _ramp(shape=(4, 5, 6)) -> np.ndarray:
    return np.arange(np.prod(shape), dtype=np.float64).reshape(shape)


def test_slice_indices_linspace_spacing_and_range():
    v = _ramp((3, 3, 20))
    _, idx = sample_volume(v, VolumeSampling(axis=2, n_slices=4, normalize="minmax_slice"))
    assert idx == np.linspace(0, 19, 4).astype(int).tolist() == [0, 6, 12, 19]
    _, idx = sample_volume(v, VolumeSampling(axis=2, n_slices=3, start=5, stop=-5, normalize="minmax_slice"))
    assert idx == [5, 10, 15]
    # one slice every 5 mm at 2 mm spacing (offsets 0, 2, ..., 38 mm): the slice nearest to each
    # multiple of 5 mm that some offset rounds to (0, 5, ..., 40), the first on ties
    _, idx = sample_volume(v, VolumeSampling(axis=2, n_slices=None, spacing_mm=5.0, normalize="minmax_slice"),
                           spacing=(1.0, 1.0, 2.0))
    assert idx == [0, 2, 5, 7, 10, 12, 15, 17, 19]
    _, idx = sample_volume(v, VolumeSampling(axis=2, n_slices=None, normalize="minmax_slice"))
    assert idx == list(range(20))
    with pytest.raises(ValueError, match="voxel spacing"):
        sample_volume(v, VolumeSampling(axis=2, n_slices=None, spacing_mm=5.0, normalize="minmax_slice"))
    with pytest.raises(ValueError, match="after stop"):
        sample_volume(v, VolumeSampling(axis=2, start=10, stop=3, normalize="minmax_slice"))


def test_grey_levels_window_minmax_and_clip():
    v = np.zeros((2, 2, 1))
    v[:, :, 0] = [[-1000.0, 0.0], [40.0, 500.0]]
    (img,), _ = sample_volume(v, VolumeSampling(axis=2, n_slices=1, normalize="window", window="brain"))
    # brain window 40 / 80: [0, 80] -> [0, 255], truncated to uint8
    assert img.tolist() == [[0, 0], [127, 255]]
    (img,), _ = sample_volume(v, VolumeSampling(axis=2, n_slices=1, normalize="window", window=(0.0, 200.0)))
    assert img.tolist() == [[0, 127], [178, 255]]  # level 0 width 200: [-100, 100]; 140 / 200 * 255
    (img,), _ = sample_volume(v, VolumeSampling(axis=2, n_slices=1, normalize="minmax_slice", clip=(0.0, 400.0)))
    assert img.tolist() == [[0, 0], [25, 255]]  # 40 / 400 * 255 = 25.5 -> 25
    flat = np.full((3, 3, 2), 7.0)
    imgs, _ = sample_volume(flat, VolumeSampling(axis=2, n_slices=2, normalize="minmax_slice"))
    assert all(int(im.max()) == 0 for im in imgs)  # a constant slice is black


def test_reasonknee3d_o1_preset_as_its_code():
    """o1.py: slices np.linspace(32, 128, 32, dtype=int) along axis 0, np.clip(slice, 0, 400),
    then (x - volume.min()) / (volume.max() - volume.min()) * 255 -> uint8."""
    rng = np.random.default_rng(0)
    vol = rng.uniform(-50, 900, (160, 6, 5))
    imgs, idx = sample_volume(vol, "reasonknee3d_o1")
    want_idx = np.linspace(32, 128, 32, dtype=int)
    assert idx == want_idx.tolist()
    lo, hi = vol.min(), vol.max()
    for im, k in zip(imgs, want_idx):
        ref = ((np.clip(vol[k], 0, 400) - lo) / (hi - lo) * 255).astype(np.uint8)
        np.testing.assert_array_equal(im, ref)


def test_reasonknee3d_video_preset_as_its_code():
    """qwen2vl.py: every slice along axis 0, np.clip(slice, 0, 400), then min-max of that slice
    -> uint8 (a constant slice, which divides by zero there, is black here)."""
    rng = np.random.default_rng(1)
    vol = rng.uniform(-100, 700, (12, 7, 6))
    imgs, idx = sample_volume(vol, "reasonknee3d_video")
    assert idx == list(range(12))
    for im, k in zip(imgs, idx):
        s = np.clip(vol[k], 0, 400)
        np.testing.assert_array_equal(im, ((s - s.min()) / (s.max() - s.min()) * 255).astype(np.uint8))


def test_anatomical_plane_reorients_from_the_affine():
    ras = _ramp((4, 5, 6))
    lps = ras[::-1, ::-1, :]  # the same voxels stored left-to-right / posterior-to-anterior flipped
    lps_affine = np.diag([-1.0, -1.0, 1.0, 1.0])
    spec = VolumeSampling(axis="axial", n_slices=3, normalize="minmax_volume")
    a, ia = sample_volume(ras, spec, affine=np.eye(4))
    b, ib = sample_volume(lps, spec, affine=lps_affine)
    assert ia == ib
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert a[0].shape == (5, 4)  # rows: anterior..posterior, columns: patient right..left
    with pytest.raises(ValueError, match="affine"):
        sample_volume(ras, spec)


def test_montage_and_tensor_input():
    vol = torch.rand(1, 6, 7, 9)
    (m,), idx = sample_volume(vol, VolumeSampling(axis=2, n_slices=5, normalize="minmax_volume", layout="montage"))
    assert m.shape == (2 * 6, 3 * 7) and len(idx) == 5
    assert int(m[6:, 14:].max()) == 0  # the sixth tile is empty


def test_resolve_and_bad_specs():
    assert resolve_sampling("axial8_mr") is SAMPLINGS["axial8_mr"]
    s = resolve_sampling({"preset": "axial8_ct_abdomen", "n_slices": 4})
    assert (s.n_slices, s.window, s.name) == (4, "abdomen", "axial8_ct_abdomen+custom")
    with pytest.raises(ValueError, match="unknown volume sampling"):
        resolve_sampling("nope")
    with pytest.raises(ValueError, match="unknown field"):
        resolve_sampling({"slices": 3})
    with pytest.raises(ValueError, match="needs a window"):
        VolumeSampling(normalize="window")
    with pytest.raises(ValueError, match="NaN"):
        sample_volume(np.full((2, 2, 2), np.nan), "axial8_mr", affine=np.eye(4))


def test_sampling_joins_the_cache_key():
    fp = {"model": "m"}
    base = GenerationRequest(images=[], user="q")
    a = GenerationRequest(images=[], user="q", key_extra={"volume_sampling": SAMPLINGS["axial8_mr"].to_dict()})
    b = GenerationRequest(images=[], user="q", key_extra={"volume_sampling": SAMPLINGS["axial16_ct_abdomen"].to_dict()})
    assert len({request_key(fp, base), request_key(fp, a), request_key(fp, b)}) == 3
    # requests without a sampling keep the key they always had
    assert request_key(fp, base) == request_key(fp, GenerationRequest(images=[], user="q", key_extra=None))


class _Counts(GenerativeAdapter):
    backend = "counts"

    def __init__(self):
        super().__init__(name="counts")
        self.seen = []

    def identity(self):
        return {"counts": 1}

    def _generate(self, requests):
        self.seen.extend(requests)
        return [GenerationResponse(text=f"{len(r.images)} images", prompt=r.user) for r in requests]


def test_vqa_task_sends_sampled_volumes_and_records_the_sampling():
    from medimg_bench.tasks.vqa import VQATask

    vol = torch.rand(1, 8, 9, 10)
    batch = {"id": ["v1"], "image": [vol], "question": ["Is there a lesion?"], "options": [None],
             "answer": ["no"], "answer_type": ["closed"], "meta": [{"affine": np.eye(4)}]}
    with pytest.raises(ValueError, match="needs task.options.volume_sampling"):
        VQATask().predict(_Counts(), batch)
    model = _Counts()
    task = VQATask(volume_sampling="axial8_mr")
    out = task.predict(model, batch)
    req = model.seen[0]
    assert len(req.images) == 8 and req.key_extra["volume_sampling"]["name"] == "axial8_mr"
    assert req.key_extra["volume_sampling"]["slices"] == np.linspace(0, 9, 8).astype(int).tolist()
    rows = task.sample_records(batch, out, None)
    assert rows[0]["volume_sampling"] == "axial8_mr"
    assert pd.notna(rows[0]["volume_slices"])
