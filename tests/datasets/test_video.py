"""Video datasets on tiny mp4s written with PyAV in the official layouts.

Frame ``i`` of every test video is a flat grey of value ``4 * i`` (``GREY``), so the decoded
intensity tells which frame was read and checks frames and labels stay aligned.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from medimg_bench.datasets import video as _module
from medimg_bench.datasets.video import CHOLEC80_PHASES, read_video_frames, video_info
from medimg_bench.sample import SampleError, collate, validate_sample
from tests.datasets._helpers import family_tests
from tests.datasets._video_layouts import (
    write_cholec80_annotations,
    write_pitvis_annotations,
    write_pitvis_map_steps,
)

av = pytest.importorskip("av")
H, W = 24, 32

_NAMES = ["cholec80", "pitvis", "video_frames"]


create, test_registered, test_configs_match_factories = family_tests(_module, _NAMES)



def GREY(i: int) -> float:
    return (4 * i % 250) / 255


def _write_mp4(path: Path, n: int, fps: int = 25) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = W, H, "yuv420p"
        stream.options = {"g": "10", "crf": "0"}  # short GOP: seeking is exercised
        for i in range(n):
            frame = av.VideoFrame.from_ndarray(np.full((H, W, 3), 4 * i % 250, np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def _mean(t: torch.Tensor) -> float:
    return float(t.float().mean())


def test_read_video_frames(tmp_path):
    p = tmp_path / "v.mp4"
    _write_mp4(p, 40)
    assert video_info(p)["fps"] == 25.0
    frames, fps = read_video_frames(p, [33, 0, 12, 33])
    assert frames.shape == (4, H, W, 3) and frames.dtype == np.uint8 and fps == 25.0
    assert frames.reshape(4, -1).mean(1) / 255 == pytest.approx([GREY(33), 0, GREY(12), GREY(33)], abs=2 / 255)
    with pytest.raises(ValueError, match=r"v.mp4.*frame\(s\) \[40\]"):
        read_video_frames(p, [39, 40])
    (tmp_path / "bad.mp4").write_bytes(b"\x00" * 100)
    with pytest.raises(ValueError, match="bad.mp4"):
        read_video_frames(tmp_path / "bad.mp4", [0])


N = 60  # frames per Cholec80 test video (2.4 s at 25 fps)


def _cholec80(root: Path, videos=(1, 41)) -> None:
    phases = ["Preparation"] * 30 + ["CalotTriangleDissection"] * 20 + ["ClippingCutting"] * 10
    tools = {0: (1, 0, 0, 0, 0, 0, 0), 25: (1, 0, 1, 0, 0, 0, 0), 50: (0, 0, 0, 0, 1, 0, 0)}
    for v in videos:
        _write_mp4(root / "videos" / f"video{v:02d}.mp4", N)
        write_cholec80_annotations(root, v, phases, tools)


@pytest.fixture(scope="module")
def cholec_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("cholec80")
    _cholec80(root)
    return root


def test_cholec80_frames_1fps(cholec_root):
    ds = create("cholec80", cholec_root, split="test", videos=[41])
    assert ds.ids == ["video41_000000", "video41_000025", "video41_000050"]
    assert ds.classes == list(CHOLEC80_PHASES)
    assert ds.manifest["label"].tolist() == [0, 0, 2]  # frames 0, 25 Preparation; 50 ClippingCutting
    s = ds[2]
    validate_sample(s, task="classification")
    assert s["image"].shape == (3, H, W) and s["label"] == 2
    assert _mean(s["image"]) == pytest.approx(GREY(50), abs=2 / 255)
    assert s["meta"]["patient_id"] == "video41" and s["meta"]["video_id"] == "video41"
    assert s["meta"]["frame_index"] == 50 and s["meta"]["timestamp"] == 2.0 and s["meta"]["fps"] == 25.0
    assert s["tools"].tolist() == [0, 0, 0, 0, 1, 0, 0]
    assert create("cholec80", cholec_root, split="train", videos=[1]).ids[0] == "video01_000000"
    # the official split needs all its videos: the first missing one is named
    with pytest.raises(FileNotFoundError, match="video42.mp4"):
        create("cholec80", cholec_root, split="test")
    with pytest.raises(FileNotFoundError, match="video02.mp4"):
        create("cholec80", cholec_root, split="train", split_scheme="tecno")
    with pytest.raises(ValueError, match="split 'val' not in scheme 'official'"):
        create("cholec80", cholec_root, split="val")


def test_cholec80_subsampled_and_clips(cholec_root):
    ds = create("cholec80", cholec_root, videos=[41], fps=5)
    assert ds.manifest["frame_index"].tolist() == list(range(0, N, 5))
    s = ds[1]  # frame 5: no tool annotation at this frame
    assert torch.isnan(s["tools"]).all() and s["meta"]["timestamp"] == pytest.approx(0.2)
    assert _mean(s["image"]) == pytest.approx(GREY(5), abs=2 / 255)
    clips = create("cholec80", cholec_root, videos=[41], fps=5, clip_length=4, clip_stride=2)
    # 12 sampled frames -> windows starting at sampled positions 0, 2, 4, 6, 8
    assert len(clips) == 5
    c = clips[3]
    validate_sample(c)
    assert c["image"].shape == (4, 3, H, W)
    assert c["meta"]["frame_index"] == [30, 35, 40, 45]
    assert c["label"].tolist() == [1, 1, 1, 1] and c["label"].dtype == torch.long
    means = [_mean(f) for f in c["image"]]
    assert means == pytest.approx([GREY(i) for i in (30, 35, 40, 45)], abs=2 / 255)
    assert c["tools"].shape == (4, 7) and torch.isnan(c["tools"][1]).all()
    assert c["meta"]["timestamp"] == pytest.approx([1.2, 1.4, 1.6, 1.8])
    batch = collate([clips[0], clips[1]])
    assert batch["image"].shape == (2, 4, 3, H, W) and batch["label"].shape == (2, 4)
    last = create("cholec80", cholec_root, videos=[41], fps=25, clip_length=8)
    assert len(last) == N // 8 and last[len(last) - 1]["meta"]["frame_index"][-1] == 55
    with pytest.raises(ValueError, match="fps must be in"):
        create("cholec80", cholec_root, fps=50)


def test_cholec80_frame_template(tmp_path):
    _cholec80(tmp_path, videos=(41,))
    (tmp_path / "videos" / "video41.mp4").unlink()  # frames only
    for f in (0, 25, 50):
        p = tmp_path / "frames" / "video41" / f"{f:06d}.png"
        p.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((H, W, 3), 4 * f % 250, np.uint8)).save(p)
    ds = create("cholec80", tmp_path, videos=[41], frame_template="frames/video{video:02d}/{frame:06d}.png")
    s = ds[1]
    assert s["label"] == 0 and s["meta"]["frame_index"] == 25 and s["meta"]["timestamp"] == 1.0
    assert _mean(s["image"]) == pytest.approx(GREY(25))
    assert ds.check() == []
    assert len(create("cholec80", tmp_path, videos=[41], fps=5, frame_template="frames/video{video:02d}/{frame:06d}.png").check()) == 9


def _create_41(name, root, **kw):
    return create(name, root, videos=[41], **kw)


def test_cholec80_bad_annotations(tmp_path):
    _cholec80(tmp_path, videos=(41,))
    path = tmp_path / "phase_annotations" / "video41-phase.txt"
    create = _create_41
    lines = path.read_text().splitlines()
    lines[4] = "3\tGallbladderRemoval"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"video41-phase.txt' line 5: unknown phase 'GallbladderRemoval'"):
        create("cholec80", tmp_path)
    # an annotation longer than the video: the sample error names the sample and the video
    lines[4] = "3\tPreparation"
    lines += [f"{i}\tClippingCutting" for i in range(N, N + 30)]
    path.write_text("\n".join(lines) + "\n")
    ds = create("cholec80", tmp_path)
    with pytest.raises(SampleError, match=r"video41_000075.*video41.mp4.*not in the video"):
        ds[3]


def _pitvis(root: Path) -> None:
    fps, seconds = 24, 4
    _write_mp4(root / "video_01.mp4", fps * seconds, fps=fps)
    write_pitvis_annotations(root, 1, [(0, -1, -1, -2), (1, 1, 0, -2), (2, 1, 16, -2), (3, 2, 8, 16)])
    write_pitvis_map_steps(root, [(-1, "operation_not_started"), (-1, "out_of_patient"), (-1, "operation_ended"),
                                  (1, "nasal corridor creation "), (2, "anterior sphenoidotomy"),
                                  (3, "septum displacement")])
    (root / "map_instruments.csv").write_text(
        "int_instrument,str_instrument\n-2,no_secondary_instrument\n-1,out_of_patient\n"
        "0,no_visible_instrument\n" + "".join(f"{i},instrument_{i}\n" for i in range(1, 20))
    )


def test_pitvis_video(tmp_path):
    _pitvis(tmp_path)
    ds = create("pitvis", tmp_path)
    assert ds.classes == ["background", "nasal corridor creation", "anterior sphenoidotomy", "septum displacement"]
    assert ds.ids == [f"video_01_{24 * t:06d}" for t in range(4)]
    s = ds[3]
    validate_sample(s, task="classification")
    assert s["label"] == 2 and s["meta"]["fps"] == 24.0 and s["meta"]["timestamp"] == 3.0
    assert s["meta"]["frame_index"] == 72 and s["meta"]["patient_id"] == "video_01"
    assert _mean(s["image"]) == pytest.approx(GREY(72), abs=2 / 255)
    assert s["tools"].shape == (19,) and torch.nonzero(s["tools"]).flatten().tolist() == [7, 15]
    assert ds[0]["label"] == 0 and ds[0]["tools"].sum() == 0
    clips = create("pitvis", tmp_path, clip_length=2, clip_stride=1)
    assert len(clips) == 3 and clips[1]["label"].tolist() == [1, 1]
    write_pitvis_annotations(tmp_path, 1, [(0, 15, 0, -2)])
    with pytest.raises(ValueError, match=r"annotations_01.csv' row 2: step 15"):
        create("pitvis", tmp_path)


def test_pitvis_frames(tmp_path):
    write_pitvis_annotations(tmp_path, 2, [(0, 3, 13, -2), (1, 3, 13, -2)])
    for t in range(2):
        p = tmp_path / "frames" / "video_02" / f"{t:05d}.png"
        p.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((H, W, 3), 50 + 100 * t, np.uint8)).save(p)
    ds = create("pitvis", tmp_path, frame_template="frames/video_{video:02d}/{time:05d}.png")
    s = ds[1]
    assert s["label"] == 3 and _mean(s["image"]) == pytest.approx(150 / 255)
    assert s["meta"]["timestamp"] == 1.0 and s["tools"][12] == 1
    assert ds.classes[0] == "background" and len(ds.classes) == 15  # no map_steps.csv: 14 steps


def test_video_frames(tmp_path):
    rows = ["video,frame,label,time,split"]
    for v, split in (("case1", "train"), ("case2", "test")):
        for t in (2, 0, 1):  # out of order in the CSV; sorted by time
            rel = f"{v}/{t:04d}.jpg"
            p = tmp_path / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(np.full((H, W), 40 * (t + 1), np.uint8), mode="L").save(p)
            rows.append(f"{v},{rel},{'cut' if t < 2 else 'suture'},{t * 0.5},{split}")
    (tmp_path / "labels.csv").write_text("\n".join(rows) + "\n")
    ds = create("video_frames", tmp_path, split="test", time_column="time", fps=2)
    assert ds.ids == ["case2_000000", "case2_000001", "case2_000002"]
    assert ds.classes == ["cut", "suture"]
    s = ds[2]
    assert s["image"].shape == (3, H, W) and s["label"] == 1 and s["meta"]["timestamp"] == 1.0
    assert _mean(s["image"]) == pytest.approx(120 / 255, abs=2 / 255)
    clips = create("video_frames", tmp_path, time_column="time", clip_length=3)
    assert len(clips) == 2 and clips[0]["image"].shape == (3, 3, H, W)
    assert clips[0]["label"].tolist() == [0, 0, 1] and clips[0]["meta"]["patient_id"] == "case1"
    (tmp_path / "labels.csv").write_text("\n".join(rows[:2] + ["case1,case1/x.jpg,knot,0,train"]) + "\n")
    with pytest.raises(ValueError, match=r"labels.csv' line 3: label 'knot'"):
        create("video_frames", tmp_path, classes=["cut", "suture"])
    kept = create("video_frames", tmp_path, classes=["cut", "suture"], on_error="skip")
    assert kept.ids == ["case1_000000"] and kept.manifest["label"].tolist() == [1]
    ds = create("video_frames", tmp_path)
    with pytest.raises(SampleError, match=r"x.jpg"):
        ds[1]
    assert not math.isnan(ds.manifest["timestamp"].iloc[0])


def test_seek_reader_agrees_with_sequential_reader(tmp_path):
    """read_video_frames (seek + decode) returns the same pixels as io.read_video (decode all)."""
    from medimg_bench.datasets import io as mio

    if not hasattr(mio, "read_video"):
        pytest.skip("medimg_bench.datasets.io.read_video not available")
    p = tmp_path / "v.mp4"
    _write_mp4(p, 45)
    every, _ = mio.read_video(p)
    picked, _ = read_video_frames(p, [44, 3, 20, 21])
    assert every.shape[0] == 45
    np.testing.assert_array_equal(picked, every[[44, 3, 20, 21]])
