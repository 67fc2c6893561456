"""Identity from declared parameters, over everything registered (issue 35, item 1).

For every registered dataset, model adapter, task and metric: its factory records the declared
parameters of every call; changing a non-neutral parameter changes the identity, changing a
neutral one does not; a dataset copied byte for byte into another folder keeps its identity.
Components the test cannot build are listed in :data:`NOT_BUILT`, each with the reason."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from medimg_bench.engine.plan import metric_settings, object_settings
from medimg_bench.identity import (
    IdentityError,
    declared_params,
    declaring,
    neutral_params,
    param_identity,
)
from medimg_bench.registry import DATASETS, METRICS, MODELS, TASKS
from tests.engine.test_key_options import (
    _Judge,  # the judge stand-in both key tests build tasks with
)

OLD = 1_600_000_000  # file times in the past: digests are cached (not "racily clean")

#: registered components this test does not build, and why
NOT_BUILT = {
    ("model", "clip"): "needs open_clip weights (a download)",
    ("model", "monai_bundle"): "needs a MONAI bundle (a download)",
    ("model", "vllm_vlm"): "needs vLLM and a CUDA GPU",
    ("model", "monai_net"): "the same adapter and factory discipline as monai_unet, built in tests/models",
    **{("dataset", n): "its layout is written inline in a test or a pytest fixture of "
                       f"tests/datasets/{where}, not a reusable writer; the factory is checked structurally "
                       "(test_every_registered_factory_records_its_declared_parameters)"
       for where, names in (("test_cxr.py", ("chexpert", "mimic_cxr", "rsna_pneumonia", "siim_pneumothorax",
                                             "vindr_cxr")),
                            ("test_vqa.py", ("slake", "pathvqa", "pmc_vqa", "omnimedvqa", "gmai_mmbench",
                                             "medxpertqa_mm", "medframeqa")),
                            ("test_pathology.py", ("pcam", "mhist")), ("test_mri_recon.py", ("fastmri",)),
                            ("test_touchstone.py", ("touchstone",)), ("test_volumetric.py", ("verse",)),
                            ("test_video.py", ("video_frames",)))
       for n in names},
    ("dataset", "builtin_real"): "reads the sample files shipped inside pydicom/nibabel: nothing to move or vary",
    ("dataset", "hest1k"): "the HEST-Benchmark layout needs the fixture tests/protocols/fixtures/hest_bench.npz "
                           "(built once per module in test_pathology_hest1k)",
}


def _all_entries():
    for reg in (DATASETS, MODELS, METRICS, TASKS):
        for name in reg.list():
            yield reg, name


@pytest.mark.parametrize(("reg", "name"), list(_all_entries()), ids=lambda v: v if isinstance(v, str) else v.kind)
def test_every_registered_factory_records_its_declared_parameters(reg, name):
    factory = reg.get(name)
    if inspect.isclass(factory):
        assert getattr(factory.__init__, "__declared_for__", None) is not None, name
    else:
        assert getattr(factory, "__declared__", False), name
    reasons = dict(getattr(factory, "NEUTRAL_PARAMS", None) or {})  # None: not neutral here
    assert all(r is None or isinstance(r, str) and r.strip() for r in reasons.values()), name


# -- the mechanism ----------------------------------------------------------------------------------
def test_a_parameter_not_stored_under_its_name_is_refused():
    class Forgets:
        def __init__(self, *, threshold: float = 0.5, num_workers: int = 0) -> None:
            self._t = threshold  # not under its own name

    class Keeps:
        NEUTRAL_PARAMS = {"num_workers": "does not change any value"}  # noqa: RUF012

        def __init__(self, *, threshold: float = 0.5, num_workers: int = 0) -> None:
            self.threshold = threshold

    with pytest.raises(IdentityError, match=r"\['threshold', 'num_workers'\] are not stored"):
        declared_params(Forgets())
    assert declared_params(Keeps(threshold=0.3, num_workers=4)) == {"threshold": 0.3}
    # the same class declared: the call is recorded, whatever it stores
    Declared = declaring(type("Declared", (Forgets,), {}))
    assert declared_params(Declared(threshold=0.3)) == {"threshold": 0.3, "num_workers": 0}


def test_a_neutral_parameter_needs_a_reason():
    with pytest.raises(IdentityError, match="without a reason"):
        declaring(lambda *, a=1: None, neutral={"a": " "})

    class Bad:
        NEUTRAL_PARAMS = {"a": ""}  # noqa: RUF012

        def __init__(self, a=1):
            self.a = a

    with pytest.raises(IdentityError, match="without a reason"):
        neutral_params(Bad())


def test_the_outermost_call_is_recorded_and_secrets_are_not():
    @declaring
    def inner(*, token: str = "", size: int = 1):
        return type("Obj", (), {})()

    def outer(*, size: int = 2, api_key: str = "sk-abcdefabcdefabcdefabcdef"):
        return inner(size=size)

    outer = declaring(outer)
    got = declared_params(outer(size=5))
    assert got == {"size": 5, "api_key": "***"}


# -- metrics and tasks -----------------------------------------------------------------------------


def _build(registry, name: str, **changed):
    for options in ({}, {"num_classes": 3}, {"generate": lambda prompts: prompts}, {"judge": _Judge()}):
        try:
            return registry.create(name, **{**options, **changed})
        except (TypeError, ValueError, KeyError, FileNotFoundError, OSError, ImportError):
            continue
    return None


def _alternatives(value: Any) -> list[Any]:
    """Other values of the same kind, tried in turn until the factory accepts one."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, value * 2, max(value - 1, 0)]
    if isinstance(value, float):
        return [value / 2, value + 0.25, value * 1.5]
    if value is None:
        return [0.5, 1, True, 2]
    if isinstance(value, (list, tuple)) and len(value) > 1:
        return [list(value)[:-1]]
    return []


def _check_options(build, identity, obj, extra: dict[str, list[Any]] | None = None) -> tuple[int, list[str]]:
    """Change each declared parameter (one at a time) to a value the factory accepts (``extra``:
    values to try first, by name): a non-neutral one must change ``identity``, a neutral one must
    not. Returns (checked, failures)."""
    base = identity(obj)
    neutral = neutral_params(obj)
    params = {**obj.__dict__["_declared"]["params"]}
    checked, bad = 0, []
    for p, value in params.items():
        tries = [*(extra or {}).get(p, []), *_alternatives(value)]
        for alt in [a for a in tries if a != value or type(a) is not type(value)]:
            other = build(**{p: alt})
            if other is None or other.__dict__.get("_declared", {}).get("params", {}).get(p) != alt:
                continue
            try:
                same = identity(other) == base
            except (TypeError, ValueError, OSError):  # a value of the right type the object cannot use
                continue
            checked += 1
            if same != (p in neutral):
                bad.append(f"{p}={alt!r} ({'neutral' if p in neutral else 'not neutral'}): "
                           f"identity {'unchanged' if same else 'changed'}")
            break
    return checked, bad


def _settings(obj):
    return json.dumps(object_settings(obj), sort_keys=True)


@pytest.mark.parametrize(("registry", "name"), [(METRICS, n) for n in METRICS.list()] + [(TASKS, n) for n in TASKS.list()],
                         ids=lambda v: v if isinstance(v, str) else v.kind)
def test_every_option_of_every_metric_and_task_is_in_its_identity(registry, name):
    obj = _build(registry, name)
    assert obj is not None, f"{name}: not built with default options"
    checked, bad = _check_options(lambda **kw: _build(registry, name, **kw), _settings, obj)
    assert not bad, f"{name}: {bad}"
    # every declared parameter is in the key, by value or (a declared file) by content
    assert set(object_settings(obj)["params"]) == set(declared_params(obj)), name


def test_metric_settings_are_stable_across_processes():
    assert " at 0x" not in json.dumps(metric_settings(METRICS.create("radgraph_f1", annotator=lambda t: t)))


# -- model adapters -------------------------------------------------------------------------------
def _maps_root(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(3):
        np.save(root / f"c{i}.npy", rng.random((8, 8)).astype(np.float32))
    return root


@pytest.fixture(scope="module")
def model_builders(tmp_path_factory, tiny_vlm_path):
    import torch

    maps = _maps_root(tmp_path_factory.mktemp("maps") / "preds")

    def seeded(name, **kw):
        torch.manual_seed(0)  # the same random weights: only the options differ
        try:
            return MODELS.create(name, **kw)
        except (TypeError, ValueError, KeyError, RuntimeError, OSError, AttributeError):
            return None

    return {
        "timm": lambda **kw: seeded("timm", **{"model_name": "resnet10t", "num_classes": 2, **kw}),
        "monai_unet": lambda **kw: seeded("monai_unet", **{"num_classes": 2, "spatial_dims": 2,
                                                           "channels": (4, 8), "strides": (2,), **kw}),
        "zero_filled": lambda **kw: seeded("zero_filled", **kw),
        "predictions": lambda **kw: seeded("predictions", **{"root": maps, "kind": "maps", **kw}),
        "tiny_vlm": lambda **kw: seeded("tiny_vlm", **{"cache": False, **kw}),
        "hf_vlm": lambda **kw: seeded("hf_vlm", **{"path": str(tiny_vlm_path), "cache": False, **kw}),
        "openai_vlm": lambda **kw: seeded("openai_vlm", **{"model": "m", "base_url": "http://127.0.0.1:9/v1",
                                                           "api_key_env": None, "cache": False,
                                                           "verify_server": False, **kw}),
    }


@pytest.fixture(scope="module")
def tiny_vlm_path(tmp_path_factory):
    from medimg_bench.models.vlm.tiny import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny_vlm") / "m")


def _model_identity(m):
    fp = getattr(m, "cache_identity", None)  # generative: the response-cache key part
    return json.dumps(fp() if callable(fp) else m.fingerprint(), sort_keys=True, default=str)


@pytest.mark.parametrize("name", [n for n in MODELS.list() if ("model", n) not in NOT_BUILT])
def test_every_option_of_every_model_adapter_is_in_its_identity(name, model_builders):
    build = model_builders[name]
    obj = build()
    assert obj is not None, name
    checked, bad = _check_options(build, _model_identity, obj)
    assert not bad, f"{name}: {bad}"
    assert checked, f"{name}: no option could be changed"


def test_maps_threshold_and_resize_are_in_the_identity(model_builders):
    """Issue 35: a resumed maps run accepted another threshold / resize (fingerprint = the files)."""
    build = model_builders["predictions"]
    a, b, c = build(), build(threshold=0.3), build(resize=True)
    assert len({_model_identity(m) for m in (a, b, c)}) == 3
    assert a.fingerprint()["params"]["threshold"] == 0.5


def test_predictions_in_another_folder_are_the_same_model(model_builders, tmp_path):
    build = model_builders["predictions"]
    a = build()
    copy = tmp_path / "elsewhere"
    shutil.copytree(a.source, copy)
    assert MODELS.create("predictions", root=copy, kind="maps").fingerprint() == a.fingerprint()


def test_hf_attn_implementation_is_in_the_identity(model_builders):
    """Issue 35: switching ``attn_implementation`` was served from the response cache."""
    build = model_builders["hf_vlm"]
    eager, sdpa = build(attn_implementation="eager"), build(attn_implementation="sdpa")
    assert eager.cache_identity()["attn_implementation"] == "eager"
    assert eager.cache_identity() != sdpa.cache_identity()
    assert eager.cache_identity() == build(attn_implementation="eager", batch_size=3).cache_identity()


# -- datasets -------------------------------------------------------------------------------------
def _png(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)
    os.utime(path, (OLD, OLD))


def _seg2d(root: Path) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    for i in range(3):
        _png(root / "images" / f"c{i}.png", rng.integers(0, 255, (12, 10), dtype=np.uint8))
        _png(root / "masks" / f"c{i}.png", (rng.random((12, 10)) > 0.5).astype(np.uint8) * 255)
    return {}


def _csv(root: Path) -> dict[str, Any]:
    lines = ["path,label"]
    for i in range(4):
        _png(root / f"img{i}.png", np.random.default_rng(i).integers(0, 255, (8, 8), dtype=np.uint8))
        lines.append(f"img{i}.png,{'a' if i % 2 else 'b'}")
    (root / "labels.csv").write_text("\n".join(lines) + "\n")
    return {}


def _image_folder(root: Path) -> dict[str, Any]:
    for c in ("a", "b"):
        for i in range(2):
            _png(root / "test" / c / f"{c}{i}.png", np.full((8, 8, 3), 40 * i + (c == "b") * 100, np.uint8))
    return {}


def _medmnist(root: Path) -> dict[str, Any]:
    rng = np.random.default_rng(1)
    arrs = {}
    for split, n in (("train", 6), ("val", 4), ("test", 6)):
        arrs[f"{split}_images"] = rng.integers(0, 255, (n, 28, 28)).astype(np.uint8)
        arrs[f"{split}_labels"] = rng.integers(0, 2, (n, 1)).astype(np.uint8)
    root.mkdir(parents=True, exist_ok=True)
    np.savez(root / "breastmnist.npz", **arrs)
    return {"flag": "breastmnist"}


def _covid(root: Path) -> dict[str, Any]:
    from tests.datasets.test_seg2d import _covid as layout

    layout(root)
    return {}


def _synthetic(kw):
    return lambda root: {**kw, "cache_dir": root}  # generated under cache_dir; root only reads one back


def _built(module: str, writer: str) -> Callable[[Path], dict[str, Any]]:
    """A layout writer of another test module that builds the dataset itself (returns it first):
    the options are the ones its call declared (``root`` included when it is a subfolder)."""
    def write(root: Path) -> dict[str, Any]:
        ds = getattr(importlib.import_module(module), writer)(root)[0]
        return {k: v for k, v in ds.__dict__["_declared"]["params"].items() if not (k == "root" and v == root)}
    return write


def _plain(module: str, writer: str, **options: Any) -> Callable[[Path], dict[str, Any]]:
    """A layout writer of another test module that only writes files under ``root``."""
    def write(root: Path) -> dict[str, Any]:
        getattr(importlib.import_module(module), writer)(root)
        return dict(options)
    return write


def _masks(name: str) -> Callable[[Path], dict[str, Any]]:
    """The 2D mask loaders' layouts of tests/datasets/test_mask_encodings.py, two cases each."""
    def write(root: Path) -> dict[str, Any]:
        from tests.datasets import test_mask_encodings as enc

        mask = lambda p: enc._save(enc.MASK, p)  # noqa: E731
        return enc.LAYOUTS[name](root, [(s, mask, s) for s in ("case1", "case2")])
    return write


def _two_roots(module: str, writer: str, second: str, sub: tuple[str, str], **options: Any):
    """A layout writer that takes the dataset's root and a second root (``second``, e.g. the
    images of another release): both are written under ``root``, so both move with it."""
    def write(root: Path) -> dict[str, Any]:
        first, other = root / sub[0], root / sub[1]
        getattr(importlib.import_module(module), writer)(first, other)
        return {"root": first, second: other, **options}
    return write


_BAD, _GRID, _ACC = "tests.robustness.test_dataset_bad_input", "tests.datasets.test_grid", "tests.datasets.test_accounting"
DATASET_LAYOUTS = {
    "seg2d_folder": _seg2d, "csv": _csv, "image_folder": _image_folder, "medmnist": _medmnist,
    "covid_semiseg": _covid, "synthetic_cxr": _synthetic({"n": 4, "size": 16}),
    "synthetic_ct": _synthetic({"n": 2, "shape": (8, 8, 4)}), "synthetic_vqa": _synthetic({"n": 4, "size": 16}),
    **{n: _built(_BAD, w) for n, w in (("3dreasonknee", "_reasonknee"), ("skm_tea", "_skm_tea"),
                                       ("ubench", "_ubench"), ("nih_cxr14", "_nih"), ("nifti_pairs", "_nifti_pairs"),
                                       ("msd", "_msd"), ("brats", "_brats"))},
    **{n: _built(_GRID, f"_{n}") for n in ("kits23", "totalsegmentator", "abdomenatlas")},
    **{n: _built(_ACC, f"_{n}") for n in ("camelyon16", "wsi_tiles", "phase_eval_files")},
    **{n: _masks(n) for n in ("isic2018_task1", "pranet_polyp", "kvasir_seg", "busi")},
    "vqa_rad": _plain("tests.datasets.test_vqa", "_vqa_rad"),
    "omnibrainbench": _plain("tests.datasets.test_vqa_seed", "_omnibrain"),
    "iu_xray": _plain("tests.datasets.test_reports", "_iu_openi", split="all"),
    "rexgradient": _plain("tests.datasets.test_rexgradient", "_release"),
    "cholec80": _plain("tests.datasets.test_video", "_cholec80", split="test", videos=[41]),
    "pitvis": _plain("tests.datasets.test_video", "_pitvis"),
    "spinebench": _plain("tests.datasets.vqa.test_spinebench", "_bench"),
    "mimic_cxr_reports": _two_roots("tests.datasets.test_reports", "_mimic", "jpg_root",
                                    ("mimic-cxr-reports", "mimic-cxr-jpg"), split="train"),
    "cxreasonbench": _two_roots("tests.datasets.test_vqa_seed", "_cxreason", "mimic_root",
                                ("CXReasonBench", "mimic/files")),
}


def test_every_registered_dataset_is_built_here_or_excused_with_its_reason():
    excused = {n for kind, n in NOT_BUILT if kind == "dataset"}
    assert not excused & set(DATASET_LAYOUTS), sorted(excused & set(DATASET_LAYOUTS))
    assert set(DATASETS.list()) == excused | set(DATASET_LAYOUTS), sorted(set(DATASETS.list()) ^ (excused | set(DATASET_LAYOUTS)))


#: values to try for options whose type has no generic alternative (names, lists of names)
STRING_OPTIONS = {"structures": [["liver"]], "task": ["Task09_Spleen"], "split": ["all", "test", "training", None]}


def _relocated(options: dict[str, Any], root: Path, copy: Path) -> dict[str, Any]:
    """``options`` with every path under ``root`` moved under ``copy``."""
    def move(v: Any) -> Any:
        if isinstance(v, (str, Path)) and Path(v).is_absolute() and Path(v).is_relative_to(root):
            return type(v)(copy / Path(v).relative_to(root)) if isinstance(v, Path) else str(copy / Path(v).relative_to(root))
        return v
    return {k: move(v) for k, v in options.items()}


def _dataset(name: str, at: Path, /, **kw):
    root = kw.pop("root", at)  # a layout whose dataset root is a subfolder of the written one
    if name.startswith("synthetic_"):
        kw.setdefault("cache_dir", root)
        root = None
    try:
        return DATASETS.create(name, root=root, **kw)
    except (TypeError, ValueError, KeyError, FileNotFoundError, OSError, AttributeError):
        return None  # AttributeError: a guessed value of another type (a float for a template)


@pytest.mark.parametrize("name", sorted(DATASET_LAYOUTS))
def test_every_option_of_a_dataset_is_in_its_identity_and_a_copy_elsewhere_is_the_same(name, tmp_path):
    root = tmp_path / "data" / name
    root.mkdir(parents=True)
    options = DATASET_LAYOUTS[name](root)
    ds = _dataset(name, root, **options)
    assert ds is not None, name
    checked, bad = _check_options(lambda **kw: _dataset(name, root, **{**options, **{k: v for k, v in kw.items()
                                                                                  if k != "root"}}),
                                  lambda d: d.fingerprint(), ds, STRING_OPTIONS)
    assert not bad, f"{name}: {bad}"
    assert checked, f"{name}: no option could be changed"
    copy = tmp_path / "moved" / "elsewhere" / name
    shutil.copytree(root, copy)
    for p in copy.rglob("*"):
        os.utime(p, (OLD, OLD))
    moved = _dataset(name, copy, **_relocated(options, root, copy))  # a "root" option moves too
    assert moved is not None, name
    assert moved.identity() == ds.identity(), name
    assert str(root) not in json.dumps(ds.identity(), default=str)


def test_a_2d_folder_copied_elsewhere_passes_compares_data_check(tmp_path):
    """Issue 35: 2D folder datasets put absolute paths in their identity, so ``compare`` refused a
    byte-identical copy as "different bytes"."""
    from medimg_bench.baselines.compare import data_differences

    a, b = tmp_path / "a" / "data", tmp_path / "b" / "copy"
    _seg2d(a)
    shutil.copytree(a, b)
    runs = []
    for root in (a, b):
        run = root.parent / "run"
        run.mkdir()
        ident = DATASETS.create("seg2d_folder", root=root).identity()
        (run / "manifest.json").write_text(json.dumps({"dataset": {"fingerprint": ident["fingerprint"],
                                                                   "identity": ident}}, default=str))
        runs.append(run)
    assert data_differences(*runs) == ([], [])
    other = tmp_path / "c" / "data"
    shutil.copytree(a, other)
    _png(other / "masks" / "c0.png", np.zeros((12, 10), np.uint8))
    run = other.parent / "run"
    run.mkdir()
    ident = DATASETS.create("seg2d_folder", root=other).identity()
    (run / "manifest.json").write_text(json.dumps({"dataset": {"fingerprint": ident["fingerprint"],
                                                               "identity": ident}}, default=str))
    data, _ = data_differences(runs[0], run)
    assert any(d.startswith("content_sha256") for d in data)


def test_param_identity_replaces_declared_file_paths_by_content(tmp_path):
    f = tmp_path / "prompt.txt"
    f.write_text("x")

    class Reader:
        def __init__(self, *, prompt_file: str, k: int = 1) -> None:
            self.prompt_file, self.k = prompt_file, k

        def key_files(self):
            return {"prompt_file": self.prompt_file}

    assert param_identity(Reader(prompt_file=str(f))) == {"k": 1, "prompt_file": "<content: files>"}
