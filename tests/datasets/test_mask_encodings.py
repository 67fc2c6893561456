"""Issue 35, item 2: one decoder for masks and maps, proved over everything registered.

Every registered dataset that reads 2D masks from a folder (tags ``segmentation`` + ``2d``; a new
one fails :func:`test_every_mask_loader_has_a_layout_here` until it is given a layout below) and
the predictions maps reader get the same mask in every encoding: each decodes to that mask, or
is refused with the file named. Item 4 for the same loaders: an image without its mask, or with
a mask named in another case, is a sample that fails with a ``[target]`` reason, and ``check``
lists it."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from medimg_bench.registry import DATASETS, create_dataset
from medimg_bench.sample import SampleError

H, W = 20, 24
yy, xx = np.mgrid[0:H, 0:W]
MASK = (yy - 9) ** 2 + (xx - 11) ** 2 < 30  # the one mask every file below stores
OTHER = (yy > 15) & (xx > 18)  # a second region, outside MASK


def _save(a: np.ndarray, path: Path, mode: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    im = Image.fromarray(a) if mode is None else Image.fromarray(a).convert(mode)
    im.save(path)
    return path


def _palette01(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    im = Image.new("P", (W, H))
    im.putpalette([0, 0, 0, 200, 30, 30] + [0] * 762)  # index 1 is a dark red, not white
    im.putdata(MASK.astype(np.uint8).ravel().tolist())
    im.save(path)
    return path


def _rgb(colours: dict[tuple[int, int, int], np.ndarray], path: Path) -> Path:
    a = np.zeros((H, W, 3), np.uint8)
    for c, region in colours.items():
        a[region] = c
    return _save(a, path)


#: the same mask in each encoding a hospital or a toolbox writes (PNG files)
ENCODINGS: dict[str, Callable[[Path], Path]] = {
    "png 0/1": lambda p: _save(MASK.astype(np.uint8), p),
    "png 0/255": lambda p: _save(np.where(MASK, 255, 0).astype(np.uint8), p),
    "png16 0/255": lambda p: _save(np.where(MASK, 255, 0).astype(np.uint16), p),
    "png16 0/1": lambda p: _save(MASK.astype(np.uint16), p),
    "png16 0/65535": lambda p: _save(np.where(MASK, 65535, 0).astype(np.uint16), p),
    "png 1-bit": lambda p: _save(MASK, p, "1"),
    "palette 0/1": _palette01,
    "rgb red on black": lambda p: _rgb({(255, 0, 0): MASK}, p),
}
#: files that are not this binary mask: refused, never decoded to something else
REFUSED: dict[str, Callable[[Path], Path]] = {
    "label map 0/1/2 under 2 classes": lambda p: _save(np.where(OTHER, 2, MASK).astype(np.uint8), p),
    "rgb two colours": lambda p: _rgb({(255, 0, 0): MASK, (0, 200, 0): OTHER}, p),
}


def _image(path: Path) -> None:
    _save((np.arange(H * W).reshape(H, W) % 251).astype(np.uint8), path)


# -- one layout per registered loader: (root, [(stem, mask writer or None, mask stem)]) -> options
Item = tuple[str, Callable[[Path], Path] | None, str]


def _pairs(root: Path, items: list[Item], image_of: Callable[[str], Path],
           mask_of: Callable[[str], Path]) -> None:
    for stem, writer, mask_stem in items:
        _image(image_of(stem))
        if writer is not None:
            writer(mask_of(mask_stem))


def _seg2d_folder(root: Path, items: list[Item]) -> dict[str, Any]:
    _pairs(root, items, lambda s: root / "images" / f"{s}.png", lambda s: root / "masks" / f"{s}.png")
    return {}


def _isic(root: Path, items: list[Item]) -> dict[str, Any]:
    _pairs(root, items, lambda s: root / "ISIC2018_Task1-2_Training_Input" / f"{s}.jpg",
           lambda s: root / "ISIC2018_Task1_Training_GroundTruth" / f"{s}_segmentation.png")
    return {"split": "train"}


def _pranet(root: Path, items: list[Item]) -> dict[str, Any]:
    base = root / "TestDataset" / "CVC-300"
    _pairs(root, items, lambda s: base / "images" / f"{s}.png", lambda s: base / "masks" / f"{s}.png")
    return {"subset": "CVC-300"}


def _kvasir(root: Path, items: list[Item]) -> dict[str, Any]:
    base = root / "Kvasir-SEG"
    _pairs(root, items, lambda s: base / "images" / f"{s}.jpg", lambda s: base / "masks" / f"{s}.png")
    return {}


def _busi(root: Path, items: list[Item]) -> dict[str, Any]:
    base = root / "Dataset_BUSI_with_GT" / "benign"
    _pairs(root, items, lambda s: base / f"{s}.png", lambda s: base / f"{s}_mask.png")
    return {}


def _covid(root: Path, items: list[Item]) -> dict[str, Any]:
    base = root / "Dataset" / "TestingSet" / "LungInfection-Test"
    _pairs(root, items, lambda s: base / "Imgs" / f"{s}.jpg", lambda s: base / "GT" / f"{s}.png")
    return {"split": "test"}


def _ubench(root: Path, items: list[Item]) -> dict[str, Any]:
    _pairs(root, items, lambda s: root / "images" / f"{s}.png", lambda s: root / "masks" / "0" / f"{s}.png")
    (root / "train.txt").write_text("")
    (root / "val.txt").write_text("".join(f"{s}\n" for s, _, _ in items))
    return {"name": "busi"}


LAYOUTS: dict[str, Callable[[Path, list[Item]], dict[str, Any]]] = {
    "seg2d_folder": _seg2d_folder, "isic2018_task1": _isic, "pranet_polyp": _pranet, "kvasir_seg": _kvasir,
    "busi": _busi, "covid_semiseg": _covid, "ubench": _ubench,
}
def _declares_encoding(name: str) -> bool:
    params = inspect.signature(DATASETS.get(name)).parameters
    return "mask_encoding" in params or "mask_rule" in params  # U-Bench's rules are its encodings


# tagged 2D segmentation, or declaring a mask encoding: either way held to the contract below
MASK_LOADERS = sorted((set(DATASETS.list(tag="segmentation")) & set(DATASETS.list(tag="2d")))
                      | {n for n in DATASETS.list() if _declares_encoding(n)})


def test_every_mask_loader_has_a_layout_here():
    assert MASK_LOADERS, "no registered 2D mask loader found"
    silent = [n for n in MASK_LOADERS if not _declares_encoding(n)]
    assert not silent, f"{silent} read masks without declaring their encoding (a mask_encoding option)"
    assert set(MASK_LOADERS) <= set(LAYOUTS), (
        f"give {sorted(set(MASK_LOADERS) - set(LAYOUTS))} a layout in LAYOUTS: every loader of 2D masks is "
        "held to the one decoder's contract here")


def _one(name: str, root: Path, writer: Callable[[Path], Path]) -> tuple[Any, str]:
    """The loader over one image (stem ``case``) and its mask; returns (dataset, mask file name)."""
    stem = "case 1" if name == "busi" else "case1"
    options = LAYOUTS[name](root, [(stem, writer, stem)])
    ds = create_dataset(name, root=root, **options)
    mask = ds.manifest["mask"].iat[0]
    return ds, Path(mask if isinstance(mask, str) else mask[0]).name


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
@pytest.mark.parametrize("name", MASK_LOADERS)
def test_each_encoding_decodes_to_the_mask_or_is_refused_naming_the_file(tmp_path, name, encoding):
    ds, mask_file = _one(name, tmp_path, ENCODINGS[encoding])
    try:
        got = ds[0]["mask"].numpy()
    except ValueError as exc:  # a refusal must name the mask file
        assert mask_file in str(exc), exc
        assert name == "ubench" and encoding == "png16 0/1", f"{name} refused {encoding}: {exc}"
        return
    np.testing.assert_array_equal(got, MASK.astype(np.int64), err_msg=f"{name}: {encoding}")


@pytest.mark.parametrize("encoding", sorted(REFUSED))
@pytest.mark.parametrize("name", MASK_LOADERS)
def test_files_that_are_not_the_binary_mask_are_refused_naming_the_file(tmp_path, name, encoding):
    ds, mask_file = _one(name, tmp_path, REFUSED[encoding])
    with pytest.raises(ValueError) as info:
        ds[0]
    assert mask_file in str(info.value) and getattr(info.value, "stage", None) == "target"


def test_a_non_empty_file_that_decodes_empty_names_the_values(tmp_path):
    """The old failure: a 0/1 mask under the toolbox's ``> 128`` became an empty mask, silently."""
    ds, _ = _one("isic2018_task1", tmp_path, ENCODINGS["png 0/1"])
    ds.mask_foreground = 255  # a declared foreground the file does not use
    with pytest.raises(SampleError, match=r"segmentation\.png.*values 0, 1.*empty mask"):
        ds[0]


# -- item 4: an image without its mask is a failing sample ----------------------------------------
@pytest.mark.parametrize("name", MASK_LOADERS)
def test_an_image_without_its_mask_fails_and_is_listed(tmp_path, name):
    good, missing, cased = (("case 1", "case 2", "case 3") if name == "busi" else ("c1", "c2", "c3"))
    write = ENCODINGS["png 0/255"]
    options = LAYOUTS[name](tmp_path, [(good, write, good), (missing, None, missing), (cased, write, cased.upper())])
    ds = create_dataset(name, root=tmp_path, **options)
    assert sorted(ds.ids) == sorted([good, missing, cased]), "an image without its mask must stay a sample"
    np.testing.assert_array_equal(ds[ds.ids.index(good)]["mask"].numpy(), MASK.astype(np.int64))
    for sid, needle in ((missing, "no mask"), (cased, "only in case")):
        with pytest.raises(SampleError) as info:
            ds[ds.ids.index(sid)]
        msg = str(info.value)
        assert info.value.stage == "target" and needle in msg and sid in msg, msg
    listed = {p["id"]: p["problem"] for p in ds.check()}
    assert missing in listed and "only in case" in listed[cased], listed
    from medimg_bench.datasets.check import check_dataset

    report = check_dataset(ds)  # what `medimg-bench datasets check` prints: both listed, exit code 1
    found = {p["id"] for split in report.splits.values() for p in split.missing}
    assert {missing, cased} <= found and report.exit_code == 1


def test_a_run_counts_the_image_without_a_mask_as_failed(tmp_path):
    from medimg_bench.engine.runner import evaluate
    from medimg_bench.models.predictions import MapsFromFolder

    write = ENCODINGS["png 0/255"]
    _seg2d_folder(tmp_path, [("a", write, "a"), ("b", None, "b")])
    preds = tmp_path / "preds"
    for s in ("a", "b"):
        write(preds / f"{s}.png")
    res = evaluate(MapsFromFolder(preds), create_dataset("seg2d_folder", root=tmp_path), task="segmentation",
                   metrics={"dice": {"metric": "dice"}}, device="cpu", progress=False, n_resamples=10)
    assert res.summary["n_failed"] == 1
    err = str(res.samples.set_index("id").loc["b", "error"])
    assert err.startswith("[target]") and "b.png" in err and "no mask 'b.*'" in err


# -- the predictions maps reader ---------------------------------------------------------------------
_rng = np.random.default_rng(0)
SOFT = np.where(MASK, 0.7, 0.2) + _rng.uniform(-0.15, 0.15, MASK.shape)  # probabilities, either side of 0.5
MAP_FILES: dict[str, tuple[str, Callable[[Path], Path], dict[str, Any]]] = {
    # name: (suffix, writer, the declaration that makes a refused file readable)
    **{k: (".png", w, {}) for k, w in ENCODINGS.items()},
    "npy probability": (".npy", lambda p: np.save(p, SOFT) or p, {}),
    "npy bool": (".npy", lambda p: np.save(p, MASK) or p, {}),
    "npy 0-255": (".npy", lambda p: np.save(p, SOFT * 255) or p, {"scale": 255}),
    "npy percent": (".npy", lambda p: np.save(p, SOFT * 100) or p, {"scale": "percent"}),
    "npy logits": (".npy", lambda p: np.save(p, np.log(SOFT / (1 - SOFT))) or p, {"encoding": "logits"}),
    "png grey levels": (".png", lambda p: _save(np.rint(SOFT * 255).astype(np.uint8), p), {}),
}
MAP_REFUSED = {"label map 0/1/2": (".png", REFUSED["label map 0/1/2 under 2 classes"]),
               "rgb two colours": (".png", REFUSED["rgb two colours"]),
               "npy 0/1/2": (".npy", lambda p: np.save(p, np.where(OTHER, 2, MASK).astype(np.int64)) or p)}


def _maps_setup(tmp_path: Path, suffix: str, writer: Callable[[Path], Any]) -> tuple[Any, Path, dict]:
    from medimg_bench.sample import collate

    _seg2d_folder(tmp_path, [("s", ENCODINGS["png 0/255"], "s")])
    preds = tmp_path / "preds"
    preds.mkdir()
    path = preds / f"s{suffix}"
    writer(path)
    return preds, path, collate([create_dataset("seg2d_folder", root=tmp_path)[0]])


@pytest.mark.parametrize("file", sorted(MAP_FILES))
def test_each_map_encoding_decodes_to_the_mask_or_is_refused_until_declared(tmp_path, file):
    from medimg_bench.models.predictions import predictions

    suffix, writer, declared = MAP_FILES[file]
    preds, path, batch = _maps_setup(tmp_path, suffix, writer)
    try:
        out = predictions(root=str(preds), kind="maps").predict(batch)
    except ValueError as exc:
        assert declared and path.name in str(exc) and "declare" in str(exc), exc
        out = predictions(root=str(preds), kind="maps", **declared).predict(batch)
    np.testing.assert_array_equal(out["labels"][0].numpy(), MASK.astype(np.int64), err_msg=file)
    assert 0 <= float(out["maps"].min()) and float(out["maps"].max()) <= 1


@pytest.mark.parametrize("file", sorted(MAP_REFUSED))
def test_maps_that_are_labels_are_refused_naming_the_file(tmp_path, file):
    from medimg_bench.models.predictions import predictions

    preds, path, batch = _maps_setup(tmp_path, *MAP_REFUSED[file])
    with pytest.raises(ValueError, match=path.name.replace(".", r"\.")):
        predictions(root=str(preds), kind="maps").predict(batch)
