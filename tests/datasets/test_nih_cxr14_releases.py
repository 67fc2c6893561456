"""``nih_cxr14``: both label releases (plain and gzipped), ``release`` / ``label_file``, a user's
split list, and the ``label_release`` record (release, file, digests) a run's manifest keeps."""

from __future__ import annotations

import gzip
import hashlib
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from medimg_bench.datasets import create
from medimg_bench.datasets.cxr.labels import NIH_PATHOLOGIES

ROWS = [
    ("00000001_000.png", "Cardiomegaly", 0, 1, 58, "M", "PA"),
    ("00000001_001.png", "Cardiomegaly|Effusion", 1, 1, 58, "M", "PA"),
    ("00000002_000.png", "No Finding", 0, 2, 81, "F", "AP"),
    ("00000003_000.png", "Hernia|Pleural_Thickening", 0, 3, 74, "F", "PA"),
]
COLUMNS = ["Image Index", "Finding Labels", "Follow-up #", "Patient ID", "Patient Age", "Patient Gender",
           "View Position"]


def nih_layout(root: Path, *, releases=("2017",), gz: bool = False) -> Path:
    """Images, official lists and the label file of each release; the v2020 file relabels
    00000002_000 (No Finding -> Nodule) so the two releases differ on one image."""
    root.mkdir(parents=True, exist_ok=True)
    for rel in releases:
        df = pd.DataFrame(ROWS, columns=COLUMNS)
        if rel == "v2020":
            df.loc[2, "Finding Labels"] = "Nodule"
        name = "Data_Entry_2017.csv" if rel == "2017" else "Data_Entry_2017_v2020.csv"
        text = df.to_csv(index=False).encode()
        if gz:
            (root / f"{name}.gz").write_bytes(gzip.compress(text, mtime=0))
        else:
            (root / name).write_bytes(text)
    (root / "train_val_list.txt").write_text("00000001_000.png\n00000001_001.png\n")
    (root / "test_list.txt").write_text("00000002_000.png\n00000003_000.png\n")
    for i, row in enumerate(ROWS):
        p = root / "images" / row[0]
        p.parent.mkdir(exist_ok=True)
        Image.fromarray(np.full((8, 8), 40 * i, np.uint8)).save(p)
    return root


@pytest.mark.parametrize("gz", [False, True], ids=["csv", "gz"])
def test_each_release_plain_or_gzipped(tmp_path, gz):
    root = nih_layout(tmp_path, releases=("2017", "v2020"), gz=gz)
    nodule = NIH_PATHOLOGIES.index("Nodule")
    auto = create("nih_cxr14", root, split="test")  # the newest release found
    old = create("nih_cxr14", root, split="test", release="2017")
    assert auto.label_release["release"] == "v2020" and old.label_release["release"] == "2017"
    assert auto[0]["label"][nodule] == 1 and old[0]["label"][nodule] == 0
    f = root / ("Data_Entry_2017.csv" + (".gz" if gz else ""))
    raw = f.read_bytes()
    assert old.label_release == {
        "release": "2017", "file": f.name, "sha256": hashlib.sha256(raw).hexdigest(),
        "content_sha256": hashlib.sha256(gzip.decompress(raw) if gz else raw).hexdigest()}


def test_gzipped_and_plain_files_of_one_release_have_one_content_digest(tmp_path):
    a = create("nih_cxr14", nih_layout(tmp_path / "a"), split="all").label_release
    b = create("nih_cxr14", nih_layout(tmp_path / "b", gz=True), split="all").label_release
    assert a["content_sha256"] == b["content_sha256"] and a["sha256"] != b["sha256"]


def test_label_file_and_release_checks(tmp_path):
    root = nih_layout(tmp_path, releases=("2017",))
    shutil.copy(root / "Data_Entry_2017.csv", root / "labels.csv")
    with pytest.raises(ValueError, match="cannot tell the release of 'labels.csv'"):
        create("nih_cxr14", root, label_file="labels.csv")
    assert create("nih_cxr14", root, label_file="labels.csv", release="2017").label_release["release"] == "2017"
    with pytest.raises(ValueError, match="is NIH's 2017 release, not 'v2020'"):
        create("nih_cxr14", root, label_file="Data_Entry_2017.csv", release="v2020")
    with pytest.raises(FileNotFoundError, match="Data_Entry_2017_v2020.csv"):
        create("nih_cxr14", root, release="v2020")
    with pytest.raises(FileNotFoundError, match="label_file"):
        create("nih_cxr14", root, label_file="nope.csv")
    with pytest.raises(ValueError, match="release must be"):
        create("nih_cxr14", root, release="2019")


@pytest.mark.parametrize("form", ["lines", "lines_no_png", "csv"])
def test_user_split_list(tmp_path, form):
    root = nih_layout(tmp_path)
    names = ["00000001_001.png", "00000003_000.png"]
    if form == "csv":  # e.g. a predictions table with an Image Index column
        pd.DataFrame({"Image Index": names, "prob_Hernia": [0.1, 0.9]}).to_csv(root / "mine.csv", index=False)
        split_list = "mine.csv"
    else:
        shown = names if form == "lines" else [n.removesuffix(".png") for n in names]
        (root / "mine.txt").write_text("\n".join(shown) + "\n")
        split_list = str(root / "mine.txt")  # absolute works too
    ds = create("nih_cxr14", root, split="test", split_list=split_list)
    assert ds.ids == ["00000001_001", "00000003_000"]


def test_user_split_list_naming_unknown_images(tmp_path):
    root = nih_layout(tmp_path)
    (root / "mine.txt").write_text("00000001_001.png\n99999999_000.png\n")
    with pytest.raises(ValueError, match=r"names 1 image\(s\) not in .*99999999_000.png"):
        create("nih_cxr14", root, split_list="mine.txt")
    with pytest.raises(FileNotFoundError, match="split_list"):
        create("nih_cxr14", root, split_list="absent.txt")


def test_run_manifest_records_the_release(tmp_path):
    import json

    import medimg_bench as mb

    root = nih_layout(tmp_path / "data", releases=("v2020",), gz=True)
    ds = create("nih_cxr14", root, split="all")
    table = pd.DataFrame({"id": ds.ids, **{c: np.linspace(0, 1, len(ds)) for c in ds.classes}})
    table.to_csv(tmp_path / "p.csv", index=False)
    model = mb.create_model("predictions", root=tmp_path / "p.csv", num_classes=len(ds.classes))
    out = mb.evaluate(model, ds, task="classification", progress=False, n_resamples=0).save(tmp_path / "run", plots=False)
    manifest = json.loads((Path(out) / "manifest.json").read_text())
    assert manifest["dataset"]["label_release"] == ds.label_release
    assert manifest["dataset"]["label_release"]["file"] == "Data_Entry_2017_v2020.csv.gz"
