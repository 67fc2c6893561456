import pytest

from medimg_bench.registry import DATASETS, METRICS, MODELS, TASKS, Registry


def test_register_create_list_and_defaults():
    reg = Registry("widget")

    @reg.register("square", tags=("shape",), side=2)
    def make(side: int, color: str = "red"):
        return (side, color)

    reg.register("cube", side=3)(make)
    assert reg.create("square") == (2, "red")
    assert reg.create("square", side=5, color="blue") == (5, "blue")
    assert reg.create("cube") == (3, "red")
    assert reg.list() == ["cube", "square"]
    assert reg.list("sq*") == ["square"]
    assert reg.list(tag="shape") == ["square"]
    assert "cube" in reg and len(reg) == 2


def test_unknown_name_suggests_close_matches():
    reg = Registry("widget")
    reg.register("segmentation")(lambda: 1)
    with pytest.raises(KeyError, match="did you mean 'segmentation'"):
        reg.create("segmentaton")


def test_duplicate_registration_is_an_error():
    reg = Registry("widget")
    reg.register("a")(lambda: 1)
    with pytest.raises(ValueError, match="already registered"):
        reg.register("a")(lambda: 2)
    reg.register("a", overwrite=True)(lambda: 3)
    assert reg.create("a") == 3


def test_package_registries_discover_their_modules():
    assert "synthetic_cxr" in DATASETS.list()
    assert {"timm", "monai_unet"} <= set(MODELS.list())
    assert {"dice", "auroc"} <= set(METRICS.list())
    assert {"classification", "segmentation"} <= set(TASKS.list())
