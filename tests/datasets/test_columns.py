"""Columns matched to classes by name (issue #18 item 4): the shared rule, and the label columns of
``dataset=csv``."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from medimg_bench.datasets import create
from medimg_bench.datasets.columns import match_class_columns

CLASSES = ["nodule", "effusion", "cardiomegaly"]


@pytest.mark.parametrize(("columns", "expected"), [
    (["nodule", "effusion", "cardiomegaly"], ["nodule", "effusion", "cardiomegaly"]),
    (["cardiomegaly", "effusion", "nodule"], ["nodule", "effusion", "cardiomegaly"]),
    (["Cardiomegaly", "Effusion ", "NODULE"], ["NODULE", "Effusion ", "Cardiomegaly"]),
])
def test_by_name_in_any_order(columns, expected):
    assert match_class_columns(columns, CLASSES, where="t") == expected
    assert match_class_columns(columns, CLASSES, where="t", positional=True) == expected


@pytest.mark.parametrize(("columns", "positional", "problem"), [
    (["nodule", "effusion"], False, r"no column for class\(es\) \['cardiomegaly'\]"),
    (["nodule", "effusion", "fold"], False, r"no column for class\(es\) \['cardiomegaly'\]; columns \['fold'\] are not"),
    (["nodule", "effusion", "cardiomegaly", "fold"], True, r"columns \['fold'\] are not classes"),
    (["s0", "s1", "s2"], False, r"no column for class.*\['s0', 's1', 's2'\] are not classes"),
    (["s0", "s1"], True, "2 columns for 3 classes"),
    (["s0", "effusion", "s2"], True, r"do not match the classes by name"),
    (["a", "a", "b"], True, r"duplicate column name\(s\) \['a'\]"),
    (["Nodule", "nodule", "effusion", "cardiomegaly"], False,
     r"ambiguous columns \(class 'nodule' could be any of \['Nodule', 'nodule'\]\)"),
    (["nodule", "prob_nodule", "effusion", "cardiomegaly"], False,
     r"class 'nodule' could be any of \['nodule', 'prob_nodule'\]"),
])
def test_refusals_list_both_sets(columns, positional, problem):
    with pytest.raises(ValueError, match=problem) as e:
        match_class_columns(columns, CLASSES, where="t.csv", positional=positional)
    assert str(e.value).startswith("t.csv: ") and str(CLASSES) in str(e.value)


def test_unnamed_columns_in_order_when_positional():
    assert match_class_columns(["s0", "s1", "s2"], CLASSES, where="t", positional=True) == ["s0", "s1", "s2"]


def _layout(root, header, rows):
    (root / "img").mkdir(parents=True)
    lines = [",".join(["path", *header])]
    for i, row in enumerate(rows):
        Image.fromarray(np.full((8, 8), 40 * i, np.uint8)).save(root / "img" / f"{i}.png")
        lines.append(",".join([f"img/{i}.png", *map(str, row)]))
    (root / "labels.csv").write_text("\n".join(lines) + "\n")


def test_csv_label_columns_follow_the_classes_by_name(tmp_path):
    rows = [(1, 0, 0), (0, 1, 0), (0, 0, 1)]
    _layout(tmp_path, ["cardiomegaly", "effusion", "nodule"], rows)
    ds = create("csv", tmp_path, label_columns=["cardiomegaly", "effusion", "nodule"], classes=CLASSES)
    assert ds.classes == CLASSES
    assert ds[0]["label"].tolist() == [0.0, 0.0, 1.0]  # image 0 is cardiomegaly, the third class
    assert ds[2]["label"].tolist() == [1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match=r"labels.csv'.*no column for class\(es\) \['pneumonia'\]"):
        create("csv", tmp_path, label_columns=["cardiomegaly", "effusion", "nodule"],
               classes=["nodule", "effusion", "pneumonia"])
    # without classes, the label columns are the classes, in the order given
    ds = create("csv", tmp_path, label_columns=["nodule", "cardiomegaly", "effusion"])
    assert ds.classes == ["nodule", "cardiomegaly", "effusion"] and ds[0]["label"].tolist() == [0.0, 1.0, 0.0]


def test_csv_label_columns_without_class_names_in_order(tmp_path):
    _layout(tmp_path, ["y0", "y1", "y2"], [(1, 0, 0), (0, 1, 0)])
    ds = create("csv", tmp_path, label_columns=["y0", "y1", "y2"], classes=CLASSES)
    assert ds.classes == CLASSES and ds[1]["label"].tolist() == [0.0, 1.0, 0.0]
    assert list(ds.label_counts().index) == CLASSES
