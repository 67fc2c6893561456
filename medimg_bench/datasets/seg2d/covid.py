"""COVID-SemiSeg (Fan et al., Inf-Net, IEEE TMI 2020) as the Inf-Net repository lays it out:
``dataset=covid_semiseg``."""

from __future__ import annotations

from pathlib import Path

from medimg_bench.datasets.seg2d.folder import Seg2DFolder, build
from medimg_bench.registry import register_dataset

__all__ = ["covid_semiseg", "COVID_CLASSES"]

#: label values of the multi-class masks (palette PNG)
COVID_CLASSES = ("background", "ggo", "consolidation")
_SPLITS = {
    # split: (image folder, binary mask folder, multi-class mask folder) under Dataset/
    "test": ("TestingSet/LungInfection-Test/Imgs", "TestingSet/LungInfection-Test/GT",
             "TestingSet/MultiClassInfection-Test/GT"),
    "train": ("TrainingSet/LungInfection-Train/Doctor-label/Imgs",
              "TrainingSet/LungInfection-Train/Doctor-label/GT", "TrainingSet/MultiClassInfection-Train/GT"),
}


def _root(root: str | Path) -> Path:
    """``root`` may be the folder holding ``Dataset/`` or ``Dataset/`` itself."""
    root = Path(root)
    return root / "Dataset" if (root / "Dataset").is_dir() else root


@register_dataset("covid_semiseg", tags=("segmentation", "2d", "ct"))
def covid_semiseg(*, root: str | Path, split: str | None = "test", subset: str = "binary",
                  class_name: str | None = None, mask_encoding: str | None = None,
                  mask_foreground: float | None = None) -> Seg2DFolder:
    """The 48 test (or 50 doctor-labelled training) CT slices: ``subset="binary"`` (lung
    infection, the default) or ``"multiclass"`` (ground-glass opacity / consolidation; ``class_name``
    ``"ggo"`` or ``"consolidation"`` keeps one class as the foreground, the way the paper scores
    each). Test masks: ``GT`` (0/255), ``MultiClassInfection-Test/GT`` (palette 0/1/2).
    ``mask_encoding`` None: ``binary`` for the binary masks (``GT``, ``GT-1`` / ``GT-2``; each
    file's own foreground value unless ``mask_foreground``), ``label_map`` for the palette ones."""
    split = split or "test"
    if split not in _SPLITS:
        raise ValueError(f"covid_semiseg: split must be one of {sorted(_SPLITS)}, got {split!r}")
    if subset not in ("binary", "multiclass"):
        raise ValueError(f"covid_semiseg: subset must be 'binary' or 'multiclass', got {subset!r}")
    images, binary, multi = _SPLITS[split]
    opts = {"mask_foreground": mask_foreground}
    if subset == "binary":
        if class_name is not None:
            raise ValueError("covid_semiseg: `class_name` selects a class of subset=multiclass")
        return build(_root(root), images, binary, classes=["background", "infection"], name="covid_semiseg",
                     mask_encoding=mask_encoding or "binary", **opts)
    if class_name is None:
        return build(_root(root), images, multi, classes=list(COVID_CLASSES), name="covid_semiseg",
                     mask_encoding=mask_encoding or "label_map", **opts)
    if class_name not in COVID_CLASSES[1:]:
        raise ValueError(f"covid_semiseg: class_name must be one of {COVID_CLASSES[1:]}, got {class_name!r}")
    if split == "test":
        # the 1-bit GT-1 / GT-2 masks the paper's evaluation reads (equal to GT == 1 / GT == 2)
        sub = "TestingSet/MultiClassInfection-Test/GT-" + str(COVID_CLASSES.index(class_name))
        return build(_root(root), images, sub, classes=["background", class_name], name="covid_semiseg",
                     mask_encoding=mask_encoding or "binary", **opts)
    return build(_root(root), images, multi, classes=["background", class_name], name="covid_semiseg",
                 mask_encoding=mask_encoding or "label_map", **opts, select_class=COVID_CLASSES.index(class_name))
