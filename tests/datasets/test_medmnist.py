"""MedMNIST loader on tiny .npz files with the official keys, stored and compressed."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from medimg_bench.datasets import create
from medimg_bench.datasets.medmnist import MEDMNIST_INFO, npz_member
from medimg_bench.sample import validate_sample

SPLITS = {"train": 4, "val": 2, "test": 3}


def write_npz(
    root: Path, flag: str, *, size: int | None = None, compressed: bool = False, seed: int = 0
) -> dict:
    task, channels, is3d, classes = MEDMNIST_INFO[flag]
    side = size or 28
    rng = np.random.default_rng(seed)
    arrays = {}
    for split, n in SPLITS.items():
        shape = (n, side, side, side) if is3d else (n, side, side) + ((3,) if channels == 3 else ())
        arrays[f"{split}_images"] = rng.integers(0, 256, shape, dtype=np.uint8)
        if task == "multi-label":
            arrays[f"{split}_labels"] = rng.integers(0, 2, (n, len(classes)), dtype=np.uint8)
        else:
            arrays[f"{split}_labels"] = (np.arange(n) % len(classes)).astype(np.uint8).reshape(n, 1)
    name = f"{flag}.npz" if size in (None, 28) else f"{flag}_{size}.npz"
    (np.savez_compressed if compressed else np.savez)(root / name, **arrays)
    return arrays


def test_info_covers_all_18_flags() -> None:
    assert len(MEDMNIST_INFO) == 18
    assert sum(v[2] for v in MEDMNIST_INFO.values()) == 6
    assert (
        len(MEDMNIST_INFO["chestmnist"][3]) == 14 and MEDMNIST_INFO["organmnist3d"][3][0] == "liver"
    )


@pytest.mark.parametrize("flag", sorted(MEDMNIST_INFO))
def test_every_flag_shapes_and_labels(tmp_path: Path, flag: str) -> None:
    arrays = write_npz(tmp_path, flag, size=None if not MEDMNIST_INFO[flag][2] else 28)
    ds = create("medmnist", tmp_path, split="test", flag=flag)
    task, channels, is3d, classes = MEDMNIST_INFO[flag]
    assert len(ds) == 3 and ds.classes == list(classes) and ds.ids[2] == f"{flag}_test_000002"
    s = ds[2]
    validate_sample(s, task="classification")
    raw = arrays["test_images"][2]
    if is3d:
        assert s["image"].shape == (1, 28, 28, 28)
        ref = raw[None]
    elif channels == 3:
        assert s["image"].shape == (3, 28, 28)
        ref = np.moveaxis(raw, -1, 0)
    else:
        assert s["image"].shape == (1, 28, 28)
        ref = raw[None]
    assert torch.allclose(s["image"], torch.from_numpy(ref / 255.0).float())
    if task == "multi-label":
        assert (
            s["label"].dtype == torch.float32
            and s["label"].tolist() == arrays["test_labels"][2].tolist()
        )
    else:
        assert s["label"] == int(arrays["test_labels"][2, 0])


def test_mmap_stored_member_is_zero_copy(tmp_path: Path) -> None:
    arrays = write_npz(tmp_path, "pathmnist", size=64)
    img = npz_member(tmp_path / "pathmnist_64.npz", "val_images")
    assert isinstance(img, np.memmap) and np.array_equal(img, arrays["val_images"])
    ds = create(
        "medmnist", tmp_path, split="val", flag="pathmnist", size=64, cache_dir=tmp_path / "cache"
    )
    assert not (tmp_path / "cache").exists()  # stored member: mapped in place, nothing extracted
    clone = pickle.loads(pickle.dumps(ds))  # workers re-map instead of receiving a copy
    assert clone.images is None and torch.equal(clone[1]["image"], ds[1]["image"])
    assert len(pickle.dumps(ds)) < arrays["val_images"].nbytes


def test_compressed_npz_extracted_once_to_cache(tmp_path: Path) -> None:
    arrays = write_npz(tmp_path, "organmnist3d", size=64, compressed=True)
    cache = tmp_path / "cache"
    ds = create("medmnist", tmp_path, split="train", flag="organmnist3d", size=64, cache_dir=cache)
    files = list(cache.rglob("*.npy"))
    assert [f.name for f in files] == ["train_images.npy"]
    assert isinstance(ds.images, np.memmap) and np.array_equal(ds.images, arrays["train_images"])
    assert ds[3]["image"].shape == (1, 64, 64, 64) and ds[3]["label"] == 3
    mtime = files[0].stat().st_mtime_ns
    create("medmnist", tmp_path, split="train", flag="organmnist3d", size=64, cache_dir=cache)
    assert files[0].stat().st_mtime_ns == mtime
    mem = create("medmnist", tmp_path, split="train", flag="organmnist3d", size=64, mmap=False)
    assert not isinstance(mem.images, np.memmap) and torch.equal(mem[3]["image"], ds[3]["image"])


def test_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"dermamnist_128\.npz"):
        create("medmnist", tmp_path, flag="dermamnist", size=128)
    with pytest.raises(ValueError, match="size 128 not available"):
        create("medmnist", tmp_path, flag="nodulemnist3d", size=128)
    with pytest.raises(ValueError, match="unknown flag"):
        create("medmnist", tmp_path, flag="cifar10")
    arrays = write_npz(tmp_path, "bloodmnist")
    arrays["test_labels"][1, 0] = 8
    np.savez(tmp_path / "bloodmnist.npz", **arrays)
    with pytest.raises(ValueError, match=r"test_labels\[1\] = \[8\] is not a class index in 0..7"):
        create("medmnist", tmp_path, flag="bloodmnist")
    np.savez(
        tmp_path / "octmnist.npz",
        test_images=np.array([object()] * 2, dtype=object),
        test_labels=np.zeros((2, 1), np.uint8),
    )
    with pytest.raises(ValueError, match="refusing to unpickle"):
        create("medmnist", tmp_path, flag="octmnist")


def test_upsample_repeats_each_pixel_like_pil_nearest(tmp_path: Path) -> None:
    """MedMNIST v2's "(224)" protocol: the 28x28 images resized to 224 by nearest neighbour."""
    from PIL import Image

    arrays = write_npz(tmp_path, "pneumoniamnist")
    ds = create("medmnist", tmp_path, split="test", flag="pneumoniamnist", upsample=224)
    img = ds[1]["image"]
    assert img.shape == (1, 224, 224)
    pil = np.asarray(Image.fromarray(arrays["test_images"][1]).resize((224, 224), Image.NEAREST))
    assert torch.equal(img[0], torch.from_numpy(pil / 255.0).float())
    rgb = write_npz(tmp_path, "bloodmnist")
    x = create("medmnist", tmp_path, split="test", flag="bloodmnist", upsample=56)[0]["image"]
    assert x.shape == (3, 56, 56) and torch.equal(x[:, ::2, ::2], torch.from_numpy(np.moveaxis(rgb["test_images"][0], -1, 0) / 255.0).float())
    write_npz(tmp_path, "organmnist3d", size=28)
    with pytest.raises(ValueError, match="upsample=224 needs a 2D flag"):
        create("medmnist", tmp_path, split="test", flag="organmnist3d", upsample=224)
