"""Patient-level splits and leakage checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medimg_bench.datasets.base import TableDataset
from medimg_bench.datasets.splits import (
    assert_no_leakage,
    assign_groups,
    file_sha1,
    kfold_patient_split,
    leakage_report,
    patient_split,
)


def _manifest(n_patients: int, max_rows: int, seed: int, *, n_labels: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, max_rows + 1, n_patients)
    pids = np.repeat([f"p{i:04d}" for i in range(n_patients)], sizes)
    df = pd.DataFrame({"id": [f"s{i}" for i in range(len(pids))], "patient_id": pids})
    for k in range(n_labels):
        df[f"L{k}"] = (rng.random(len(df)) < 0.05 + 0.1 * k).astype(int)
    return df


fractions_st = st.lists(st.integers(1, 10), min_size=2, max_size=4).map(
    lambda w: {f"s{i}": v / sum(w) for i, v in enumerate(w)}
)


@settings(max_examples=40, deadline=None)
@given(
    n_patients=st.integers(1, 120),
    max_rows=st.integers(1, 5),
    seed=st.integers(0, 2**31 - 1),
    fractions=fractions_st,
    stratified=st.booleans(),
)
def test_no_patient_in_two_splits_and_fractions_respected(n_patients, max_rows, seed, fractions, stratified):
    df = _manifest(n_patients, max_rows, seed % 1000, n_labels=3)
    strat = ["L0", "L1", "L2"] if stratified else None
    parts = patient_split(df, fractions=fractions, seed=seed, stratify=strat)
    assert set(parts) == set(fractions)
    # a partition of the rows
    all_ids = pd.concat([p["id"] for p in parts.values()])
    assert sorted(all_ids) == sorted(df["id"]) and all_ids.is_unique
    # no patient straddles two parts
    owners = pd.concat([p[["patient_id"]].assign(part=k) for k, p in parts.items()])
    assert (owners.groupby("patient_id")["part"].nunique() == 1).all()
    if not stratified:
        # greedy fill to the most under-filled part: each part is within (k-1) * largest group
        slack = (len(fractions) - 1) * df.groupby("patient_id").size().max()
        for k, p in parts.items():
            assert abs(len(p) - fractions[k] * len(df)) <= slack + 1e-9
    # the same seed gives the same split
    again = patient_split(df, fractions=fractions, seed=seed, stratify=strat)
    for k in parts:
        assert parts[k]["id"].tolist() == again[k]["id"].tolist()


def test_stratified_split_balances_rare_labels_and_sizes():
    df = _manifest(600, 3, 7, n_labels=4)
    parts = patient_split(df, seed=3, stratify=["L0", "L1", "L2", "L3"])
    for k, frac in {"train": 0.7, "val": 0.1, "test": 0.2}.items():
        assert len(parts[k]) / len(df) == pytest.approx(frac, abs=0.02)
        for col in ["L0", "L1", "L2", "L3"]:
            share = parts[k][col].sum() / df[col].sum()
            assert share == pytest.approx(frac, abs=0.03), (k, col)
    # the unstratified split of the same data is allowed to drift; the stratified one must not
    assert_no_leakage(parts["train"], parts["test"])


def test_categorical_and_list_stratification():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"id": range(300), "patient_id": rng.integers(0, 150, 300)})
    df["finding"] = rng.choice(["none", "effusion", "nodule"], size=300, p=[0.8, 0.15, 0.05])
    df["findings"] = [["a", "b"] if i % 7 == 0 else (["a"] if i % 3 else []) for i in range(300)]
    a = assign_groups(df, fractions={"train": 0.5, "test": 0.5}, stratify="finding", seed=1)
    for value in ["none", "effusion", "nodule"]:
        counts = a[df["finding"] == value].value_counts()
        assert abs(counts.get("train", 0) - counts.get("test", 0)) <= 4, value
    b = assign_groups(df, fractions={"train": 0.5, "test": 0.5}, stratify="findings", seed=1)
    has_b = df["findings"].map(lambda x: "b" in x)
    assert abs((b[has_b] == "train").sum() - (b[has_b] == "test").sum()) <= 3


def test_different_seeds_give_different_splits():
    df = _manifest(200, 2, 0)
    a = patient_split(df, seed=0)["test"]["id"].tolist()
    b = patient_split(df, seed=1)["test"]["id"].tolist()
    assert a != b


def test_zero_fraction_part_is_empty():
    df = _manifest(50, 3, 1)
    parts = patient_split(df, fractions={"train": 0.8, "val": 0.0, "test": 0.2}, seed=0)
    assert len(parts["val"]) == 0 and len(parts["train"]) + len(parts["test"]) == len(df)


def test_kfold_each_row_tested_once():
    df = _manifest(40, 4, 2, n_labels=2)
    folds = kfold_patient_split(df, n_folds=4, seed=5, stratify=["L0", "L1"])
    assert len(folds) == 4
    tested = pd.concat([f["test"]["id"] for f in folds])
    assert sorted(tested) == sorted(df["id"]) and tested.is_unique
    for f in folds:
        assert len(f["train"]) + len(f["test"]) == len(df)
        assert not set(f["train"]["patient_id"]) & set(f["test"]["patient_id"])
    # int fractions name the folds
    assert set(patient_split(df, fractions=3)) == {"fold0", "fold1", "fold2"}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"fractions": {"train": 0.5, "test": 0.4}}, "sum to 1"),
        ({"fractions": {"train": 1.2, "test": -0.2}}, ">= 0"),
        ({"fractions": 1}, "at least 2 folds"),
        ({"group_column": "subject"}, "no group column 'subject'"),
        ({"stratify": "nope"}, "stratify column 'nope'"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        patient_split(_manifest(10, 2, 0), **kwargs)


def test_missing_patient_id_is_an_error():
    df = _manifest(10, 2, 0)
    df.loc[3, "patient_id"] = None
    with pytest.raises(ValueError, match="1 rows have no 'patient_id'"):
        assign_groups(df)


def _png_dataset(tmp_path: Path, rows: list[tuple[str, str, int]], name: str) -> TableDataset:
    from PIL import Image

    records = []
    for sid, pid, seed in rows:
        img = np.random.default_rng(seed).integers(0, 255, (8, 8), dtype=np.uint8)
        path = tmp_path / f"{name}_{sid}.png"
        Image.fromarray(img).save(path)
        records.append({"id": sid, "patient_id": pid, "image": path.name})
    return TableDataset(pd.DataFrame(records), root=tmp_path, name=name)


def test_split_of_a_dataset_keeps_its_type_and_root(tmp_path):
    ds = _png_dataset(tmp_path, [(f"s{i}", f"p{i // 2}", i) for i in range(20)], "all")
    parts = patient_split(ds, fractions={"train": 0.5, "test": 0.5}, seed=0)
    assert all(isinstance(p, TableDataset) for p in parts.values())
    assert len(parts["train"]) + len(parts["test"]) == 20
    assert parts["test"][0]["image"].shape == (1, 8, 8)
    assert leakage_report(parts["train"], parts["test"], hash_images=True).ok


def test_leakage_by_patient_and_by_image_hash(tmp_path):
    a = _png_dataset(tmp_path, [("a1", "p1", 1), ("a2", "p2", 2), ("a3", "p3", 3)], "train")
    # b2 has another patient id but the same pixels file content as a2 (same seed → same bytes)
    b = _png_dataset(tmp_path, [("b1", "p3", 10), ("b2", "p9", 2)], "test")
    report = leakage_report(a, b)
    assert report.shared == {"patient_id": ["p3"]} and not report.ok
    assert report.duplicates == []
    hashed = leakage_report(a, b, hash_images=True)
    assert [(d["id_a"], d["id_b"]) for d in hashed.duplicates] == [("a2", "b2")]
    text = hashed.format()
    assert "1 patient_id value(s) in both: p3" in text and "a2" in text and "b2" in text
    assert hashed.to_dict()["duplicates"][0]["sha1"] == file_sha1(tmp_path / "train_a2.png")
    with pytest.raises(ValueError, match="p3"):
        assert_no_leakage(a, b)
    clean = _png_dataset(tmp_path, [("c1", "p7", 70)], "val")
    assert_no_leakage(a, clean, hash_images=True)
    with pytest.raises(ValueError, match="has no column 'site'"):
        leakage_report(a, b, by=("site",))


def test_file_sha1_matches_hashlib_and_hashes_directories(tmp_path):
    import hashlib

    f = tmp_path / "x.bin"
    f.write_bytes(b"abc" * 1000)
    assert file_sha1(f) == hashlib.sha1(b"abc" * 1000).hexdigest()
    d1, d2 = tmp_path / "series1", tmp_path / "series2"
    for d in (d1, d2):
        d.mkdir()
        (d / "1.dcm").write_bytes(b"one")
        (d / "2.dcm").write_bytes(b"two")
    assert file_sha1(d1) == file_sha1(d2)
    (d2 / "2.dcm").write_bytes(b"TWO!")  # a changed file inside a series changes the digest
    assert file_sha1(d1) != file_sha1(d2)
