"""Chest X-ray loaders on tiny copies of each official layout written by the tests."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from medimg_bench.datasets import create
from medimg_bench.datasets.cxr.labels import (
    CHEXPERT_PATHOLOGIES,
    NIH_PATHOLOGIES,
    apply_uncertainty,
    canonical_name,
    harmonize_labels,
)
from medimg_bench.datasets.cxr.pixels import decode_siim_rle, encode_siim_rle, load_cxr_image
from medimg_bench.sample import SampleError, validate_sample

PIL = pytest.importorskip("PIL.Image")


def write_png(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    PIL.fromarray(array).save(path)


def write_dicom(
    path: Path, array: np.ndarray, *, photometric: str = "MONOCHROME2", bits: int = 8, **tags
) -> None:
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.file_meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.1.1"
    ds.file_meta.MediaStorageSOPInstanceUID = generate_uid()
    ds.SOPClassUID = ds.file_meta.MediaStorageSOPClassUID
    ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID
    ds.Modality = "DX"
    ds.set_pixel_data(array, photometric_interpretation=photometric, bits_stored=bits)
    for k, v in tags.items():
        setattr(ds, k, v)
    path.parent.mkdir(parents=True, exist_ok=True)
    ds.save_as(path, enforce_file_format=True)


def grey(seed: int, shape=(8, 8), dtype=np.uint8) -> np.ndarray:
    hi = 255 if dtype == np.uint8 else 65535
    return np.random.default_rng(seed).integers(0, hi + 1, shape).astype(dtype)


# -- NIH ChestX-ray14 ------------------------------------------------------------------------------


@pytest.fixture()
def nih_root(tmp_path: Path) -> Path:
    rows = [
        ("00000001_000.png", "Cardiomegaly", 0, 1, 58, "M", "PA"),
        ("00000001_001.png", "Cardiomegaly|Effusion", 1, 1, 58, "M", "PA"),
        ("00000002_000.png", "No Finding", 0, 2, 81, "F", "AP"),
        ("00000003_000.png", "Hernia|Pleural_Thickening", 0, 3, 74, "F", "PA"),
    ]
    df = pd.DataFrame(
        rows,
        columns=[
            "Image Index",
            "Finding Labels",
            "Follow-up #",
            "Patient ID",
            "Patient Age",
            "Patient Gender",
            "View Position",
        ],
    )
    df["OriginalImage[Width"] = 2500
    df["Height]"] = 2048
    df.to_csv(tmp_path / "Data_Entry_2017.csv", index=False)
    (tmp_path / "train_val_list.txt").write_text("00000001_000.png\n00000001_001.png\n")
    (tmp_path / "test_list.txt").write_text("00000002_000.png\n00000003_000.png\n")
    # Kaggle layout: images_001/images/ and images_002/images/
    write_png(tmp_path / "images_001" / "images" / "00000001_000.png", grey(0))
    write_png(tmp_path / "images_001" / "images" / "00000001_001.png", grey(1))
    rgba = np.dstack([grey(2)] * 3 + [np.full((8, 8), 255, np.uint8)])  # some NIH PNGs are RGBA
    write_png(tmp_path / "images_002" / "images" / "00000002_000.png", rgba)
    write_png(tmp_path / "images_002" / "images" / "00000003_000.png", grey(3))
    return tmp_path


def test_nih_cxr14_splits_labels_meta(nih_root: Path) -> None:
    test = create("nih_cxr14", nih_root, split="test")
    assert test.ids == ["00000002_000", "00000003_000"]
    assert test.classes == list(NIH_PATHOLOGIES)
    s = test[1]
    validate_sample(s, task="classification")
    expected = torch.zeros(14)
    expected[NIH_PATHOLOGIES.index("Hernia")] = 1
    expected[NIH_PATHOLOGIES.index("Pleural_Thickening")] = 1
    assert torch.equal(s["label"], expected)
    assert s["image"].shape == (1, 8, 8)
    assert torch.allclose(s["image"][0], torch.from_numpy(grey(3) / 255.0).float())
    assert s["meta"]["patient_id"] == "3" and s["meta"]["view"] == "PA" and s["meta"]["sex"] == "F"
    assert s["meta"]["age"] == 74
    nf = test[0]  # "No Finding" → all zero; RGBA → grey
    assert torch.equal(nf["label"], torch.zeros(14))
    assert torch.allclose(nf["image"][0], torch.from_numpy(grey(2) / 255.0).float())
    train = create("nih_cxr14", nih_root, split="train")
    assert set(train.manifest["patient_id"]) == {"1"}
    assert train.manifest["study_id"].tolist() == ["1_0", "1_1"]
    assert len(create("nih_cxr14", nih_root, split="all")) == 4
    assert len(create("nih_cxr14", nih_root, split="all", views=["AP"])) == 1
    assert create("nih_cxr14", nih_root, split="test", channels=3)[0]["image"].shape == (3, 8, 8)
    # v2020 file (preferred when present) renames "Patient Gender" to "Patient Sex"
    df = pd.read_csv(nih_root / "Data_Entry_2017.csv").rename(
        columns={"Patient Gender": "Patient Sex"}
    )
    df.loc[3, "Patient Sex"] = "M"
    df.to_csv(nih_root / "Data_Entry_2017_v2020.csv", index=False)
    assert create("nih_cxr14", nih_root, split="test")[1]["meta"]["sex"] == "M"


def test_nih_cxr14_bad_rows(nih_root: Path) -> None:
    (nih_root / "images_002" / "images" / "00000003_000.png").unlink()
    with pytest.raises(FileNotFoundError, match=r"line 5.*00000003_000"):
        create("nih_cxr14", nih_root, split="test")
    assert create("nih_cxr14", nih_root, split="test", on_missing="skip").ids == ["00000002_000"]
    lazy = create("nih_cxr14", nih_root, split="test", on_missing="lazy")
    assert lazy.ids == ["00000002_000", "00000003_000"]
    assert lazy.check()[0]["path"].endswith("images/00000003_000.png")
    with pytest.raises(SampleError, match=r"sample '00000003_000'.*images/00000003_000\.png"):
        lazy[1]
    df = pd.read_csv(nih_root / "Data_Entry_2017.csv")
    df.loc[2, "Finding Labels"] = "Cardiomegaly|Covid"
    df.to_csv(nih_root / "Data_Entry_2017.csv", index=False)
    with pytest.raises(ValueError, match=r"line 4 \(image '00000002_000.png'\).*'Covid'"):
        create("nih_cxr14", nih_root, split="test", on_missing="skip")


def test_unreadable_image_names_sample_and_file(nih_root: Path) -> None:
    (nih_root / "images_002" / "images" / "00000003_000.png").write_bytes(b"not a png")
    ds = create("nih_cxr14", nih_root, split="test")
    with pytest.raises(SampleError, match=r"00000003_000.*00000003_000\.png"):
        ds[1]


# -- CheXpert --------------------------------------------------------------------------------------


@pytest.fixture()
def chexpert_root(tmp_path: Path) -> Path:
    d = tmp_path / "CheXpert-v1.0-small"
    header = ["Path", "Sex", "Age", "Frontal/Lateral", "AP/PA", *CHEXPERT_PATHOLOGIES]
    lab = [np.nan] * 14
    r1 = list(lab)
    r1[CHEXPERT_PATHOLOGIES.index("Cardiomegaly")] = -1.0
    r1[CHEXPERT_PATHOLOGIES.index("Edema")] = 1.0
    r1[CHEXPERT_PATHOLOGIES.index("Pneumonia")] = 0.0
    train = [
        [
            "CheXpert-v1.0-small/train/patient00001/study1/view1_frontal.jpg",
            "Female",
            68,
            "Frontal",
            "AP",
            *r1,
        ],
        [
            "CheXpert-v1.0-small/train/patient00002/study2/view2_lateral.jpg",
            "Male",
            87,
            "Lateral",
            np.nan,
            *lab,
        ],
    ]
    valid = [
        [
            "CheXpert-v1.0-small/valid/patient64541/study1/view1_frontal.jpg",
            "Male",
            73,
            "Frontal",
            "PA",
            *([0.0] * 13 + [1.0]),
        ]
    ]
    d.mkdir()
    pd.DataFrame(train, columns=header).to_csv(d / "train.csv", index=False)
    pd.DataFrame(valid, columns=header).to_csv(d / "valid.csv", index=False)
    for row in train + valid:
        p = tmp_path / row[0]
        p.parent.mkdir(parents=True, exist_ok=True)
        PIL.fromarray(grey(len(row[0]))).save(p, quality=95)
    return tmp_path


@pytest.mark.parametrize(
    "policy,expected", [("u_ones", 1.0), ("u_zeros", 0.0), ("ignore", math.nan)]
)
def test_chexpert_uncertainty_policies(chexpert_root: Path, policy: str, expected: float) -> None:
    ds = create("chexpert", chexpert_root, split="train", uncertainty=policy)
    s = ds[0]
    validate_sample(s, task="classification")
    y = s["label"]
    card = y[CHEXPERT_PATHOLOGIES.index("Cardiomegaly")].item()
    assert (math.isnan(card) and math.isnan(expected)) or card == expected
    assert y[CHEXPERT_PATHOLOGIES.index("Edema")].item() == 1.0
    assert y[CHEXPERT_PATHOLOGIES.index("Pneumonia")].item() == 0.0
    assert math.isnan(y[CHEXPERT_PATHOLOGIES.index("Fracture")].item())  # blank = unlabelled
    assert (
        s["meta"]["patient_id"] == "patient00001" and s["meta"]["study_id"] == "patient00001/study1"
    )
    assert (
        s["meta"]["view"] == "AP"
        and s["meta"]["frontal_lateral"] == "Frontal"
        and s["meta"]["sex"] == "Female"
    )
    assert s["image"].shape == (1, 8, 8) and 0.0 <= s["image"].min() and s["image"].max() <= 1.0


def test_chexpert_views_blank_and_root_forms(chexpert_root: Path) -> None:
    ds = create("chexpert", chexpert_root, split="train")
    assert ds.manifest["view"].tolist() == ["AP", "LATERAL"]
    assert ds.ids == [
        "train/patient00001/study1/view1_frontal",
        "train/patient00002/study2/view2_lateral",
    ]
    assert len(create("chexpert", chexpert_root, split="train", views=["AP", "PA"])) == 1
    zero = create("chexpert", chexpert_root, split="train", blank="zero")[1]["label"]
    assert torch.equal(zero, torch.zeros(14))
    # root may be the dataset folder itself
    v = create("chexpert", chexpert_root / "CheXpert-v1.0-small", split="valid")
    assert v.ids == ["valid/patient64541/study1/view1_frontal"]
    assert v[0]["label"][-1].item() == 1.0 and v[0]["meta"]["view"] == "PA"


def test_chexpert_bad_value_names_row(chexpert_root: Path) -> None:
    csv = chexpert_root / "CheXpert-v1.0-small" / "valid.csv"
    df = pd.read_csv(csv)
    df.loc[0, "Edema"] = 2.0
    df.to_csv(csv, index=False)
    with pytest.raises(
        ValueError, match=r"valid\.csv: label column 'Edema' has value '2\.0' at line 2"
    ):
        create("chexpert", chexpert_root, split="valid")


# -- MIMIC-CXR-JPG ---------------------------------------------------------------------------------


@pytest.fixture()
def mimic_root(tmp_path: Path) -> Path:
    meta = pd.DataFrame(
        {
            "dicom_id": [
                "02aa804e-bde0afdd-112c0b34-7bc16630-4e384014",
                "174413ec-4ec4c1f7-34ea26b7-c5f994f8-79ef1962",
                "abc",
            ],
            "subject_id": [10000032, 10000032, 11000011],
            "study_id": [50414267, 50414267, 53000000],
            "ViewPosition": ["PA", "LATERAL", "AP"],
            "Rows": [8, 8, 8],
            "Columns": [8, 8, 8],
        }
    )
    meta.to_csv(tmp_path / "mimic-cxr-2.0.0-metadata.csv.gz", index=False)
    split = meta[["dicom_id", "study_id", "subject_id"]].assign(split=["test", "test", "train"])
    split.to_csv(tmp_path / "mimic-cxr-2.0.0-split.csv.gz", index=False)
    lab = {c: [np.nan] for c in CHEXPERT_PATHOLOGIES}
    lab["Pleural Effusion"] = [-1.0]
    lab["Atelectasis"] = [1.0]
    pd.DataFrame({"subject_id": [10000032], "study_id": [50414267], **lab}).to_csv(
        tmp_path / "mimic-cxr-2.0.0-chexpert.csv.gz", index=False
    )
    negbio = dict(lab, **{"Pleural Effusion": [0.0]})
    pd.DataFrame({"subject_id": [10000032], "study_id": [50414267], **negbio}).to_csv(
        tmp_path / "mimic-cxr-2.0.0-negbio.csv.gz", index=False
    )
    for d, s, st_ in zip(meta["dicom_id"], meta["subject_id"], meta["study_id"]):
        p = tmp_path / "files" / f"p{str(s)[:2]}" / f"p{s}" / f"s{st_}" / f"{d}.jpg"
        p.parent.mkdir(parents=True, exist_ok=True)
        PIL.fromarray(grey(s % 7)).save(p)
    return tmp_path


def test_mimic_cxr(mimic_root: Path) -> None:
    ds = create("mimic_cxr", mimic_root, split="test", uncertainty="u_ones")
    assert len(ds) == 2
    assert (
        ds.manifest["path"][0]
        == "files/p10/p10000032/s50414267/02aa804e-bde0afdd-112c0b34-7bc16630-4e384014.jpg"
    )
    s = ds[0]
    validate_sample(s, task="classification")
    assert s["meta"]["patient_id"] == "10000032" and s["meta"]["study_id"] == "50414267"
    assert s["meta"]["view"] == "PA" and s["meta"]["split"] == "test"
    assert s["label"][CHEXPERT_PATHOLOGIES.index("Pleural Effusion")].item() == 1.0
    assert s["label"][CHEXPERT_PATHOLOGIES.index("Atelectasis")].item() == 1.0
    assert ds.label_counts().loc["Atelectasis", "positive"] == 2
    nb = create("mimic_cxr", mimic_root, split="test", labeler="negbio")
    assert nb[0]["label"][CHEXPERT_PATHOLOGIES.index("Pleural Effusion")].item() == 0.0
    tr = create("mimic_cxr", mimic_root, split="train")  # study without label row → all NaN
    assert tr.ids == ["abc"] and torch.isnan(tr[0]["label"]).all()
    assert len(create("mimic_cxr", mimic_root, split="test", views=["LATERAL"])) == 1
    (mimic_root / ds.manifest["path"][1]).unlink()
    with pytest.raises(FileNotFoundError, match=r"line 3 \(id '174413ec.*does not exist"):
        create("mimic_cxr", mimic_root, split="test")


# -- RSNA Pneumonia --------------------------------------------------------------------------------


@pytest.fixture()
def rsna_root(tmp_path: Path) -> Path:
    ids = [
        "0004cfab-14fd-4e49-80ba-63a80b6bddd6",
        "00436515-870c-4b36-a041-de91049b9ab4",
        "003d8fa0-6bf1-40ed-b54c-ac657f8495c5",
    ]
    labels = pd.DataFrame(
        {
            "patientId": [ids[0], ids[1], ids[1], ids[2]],
            "x": [np.nan, 264.0, 562.0, np.nan],
            "y": [np.nan, 152.0, 152.0, np.nan],
            "width": [np.nan, 213.0, 256.0, np.nan],
            "height": [np.nan, 379.0, 453.0, np.nan],
            "Target": [0, 1, 1, 0],
        }
    )
    labels.to_csv(tmp_path / "stage_2_train_labels.csv", index=False)
    pd.DataFrame(
        {"patientId": ids, "class": ["No Lung Opacity / Not Normal", "Lung Opacity", "Normal"]}
    ).to_csv(tmp_path / "stage_2_detailed_class_info.csv", index=False)
    for i, pid in enumerate(ids):
        write_dicom(
            tmp_path / "stage_2_train_images" / f"{pid}.dcm",
            grey(i),
            ViewPosition="PA" if i else "AP",
            PatientSex="M",
            PatientAge="051Y",
        )
    return tmp_path


def test_rsna_pneumonia(rsna_root: Path) -> None:
    ds = create("rsna_pneumonia", rsna_root)
    assert len(ds) == 3 and ds.classes == ["No Pneumonia", "Pneumonia"]
    s = ds[1]
    validate_sample(s, task="classification")
    assert s["label"] == 1
    assert s["meta"]["boxes"] == [[264.0, 152.0, 213.0, 379.0], [562.0, 152.0, 256.0, 453.0]]
    assert s["meta"]["view"] == "PA" and s["meta"]["sex"] == "M" and s["meta"]["age"] == 51
    assert torch.allclose(s["image"][0], torch.from_numpy(grey(1) / 255.0).float())
    assert ds[0]["label"] == 0 and ds[0]["meta"]["boxes"] == [] and ds[0]["meta"]["view"] == "AP"
    cls = create("rsna_pneumonia", rsna_root, target="class")
    assert [cls[i]["label"] for i in range(3)] == [1, 2, 0]


# -- SIIM-ACR Pneumothorax -------------------------------------------------------------------------


def test_siim_rle_hand_made_mask() -> None:
    # 4×3 image (H=4, W=3); pixels numbered down columns: index = x*H + y
    mask = np.array([[0, 1, 0], [1, 1, 0], [1, 0, 0], [0, 0, 1]], dtype=np.uint8)
    # column 0: rows 1-2 → flat 1..2; column 1: rows 0-1 → flat 4..5; column 2: row 3 → flat 11
    # runs (begin, len): (1,2) (4,2) (11,1) → relative gaps: 1, 4-3=1, 11-6=5
    assert encode_siim_rle(mask) == "1 2 1 2 5 1"
    assert np.array_equal(decode_siim_rle("1 2 1 2 5 1", 4, 3), mask)
    assert encode_siim_rle(mask, fmt="absolute") == "2 2 5 2 12 1"
    assert np.array_equal(decode_siim_rle("2 2 5 2 12 1", 4, 3, fmt="absolute"), mask)
    assert not decode_siim_rle("-1", 4, 3).any()
    with pytest.raises(ValueError, match="runs to pixel"):
        decode_siim_rle("10 5", 4, 3)


@settings(max_examples=30, deadline=None)
@given(
    st.integers(1, 9),
    st.integers(1, 9),
    st.integers(0, 2**31 - 1),
    st.sampled_from(["relative", "absolute"]),
)
def test_siim_rle_roundtrip(h: int, w: int, seed: int, fmt: str) -> None:
    mask = (np.random.default_rng(seed).random((h, w)) < 0.4).astype(np.uint8)
    assert np.array_equal(decode_siim_rle(encode_siim_rle(mask, fmt=fmt), h, w, fmt=fmt), mask)


def test_siim_pneumothorax(tmp_path: Path) -> None:
    a = np.zeros((8, 8), np.uint8)
    a[1:3, 2] = 1
    b = np.zeros((8, 8), np.uint8)
    b[5, 5:7] = 1
    ids = [
        "1.2.276.0.7230010.3.1.4.8323329.5597.1517875188.959090",
        "1.2.276.0.7230010.3.1.4.8323329.12515.1517875239.501137",
    ]
    # Kaggle header has a leading space: "ImageId, EncodedPixels"
    text = (
        "ImageId, EncodedPixels\n"
        + f"{ids[0]}, {encode_siim_rle(a)}\n{ids[0]}, {encode_siim_rle(b)}\n{ids[1]}, -1\n"
    )
    (tmp_path / "train-rle.csv").write_text(text)
    for i, uid in enumerate(ids):
        write_dicom(
            tmp_path / "dicom-images-train" / f"1.2.{i}" / f"1.3.{i}" / f"{uid}.dcm",
            grey(i),
            ViewPosition="PA",
        )
    ds = create("siim_pneumothorax", tmp_path)
    assert ds.ids == ids
    s = ds[0]
    validate_sample(s, task="segmentation")
    assert s["label"] == 1 and s["mask"].dtype == torch.int64
    assert torch.equal(s["mask"], torch.from_numpy((a | b).astype(np.int64)))  # union of the rows
    assert ds[1]["label"] == 0 and int(ds[1]["mask"].sum()) == 0
    assert "mask" not in create("siim_pneumothorax", tmp_path, masks=False)[0]


# -- VinDr-CXR -------------------------------------------------------------------------------------


def test_vindr_cxr(tmp_path: Path) -> None:
    cols = ["Aortic enlargement", "Cardiomegaly", "Pleural effusion", "No finding"]
    train = pd.DataFrame(
        [
            ["000434271f63a053c4128a0ba6352c7f", "R2", 1, 1, 0, 0],
            ["000434271f63a053c4128a0ba6352c7f", "R3", 1, 0, 0, 0],
            ["000434271f63a053c4128a0ba6352c7f", "R6", 0, 0, 1, 0],
            ["00053190460d56c53cc3e57321387478", "R11", 0, 0, 0, 1],
        ],
        columns=["image_id", "rad_ID", *cols],
    )
    (tmp_path / "annotations").mkdir()
    train.to_csv(tmp_path / "annotations" / "image_labels_train.csv", index=False)
    ann = pd.DataFrame(
        {
            "image_id": ["000434271f63a053c4128a0ba6352c7f", "00053190460d56c53cc3e57321387478"],
            "rad_id": ["R2", "R11"],
            "class_name": ["Cardiomegaly", "No finding"],
            "x_min": [691.0, np.nan],
            "y_min": [1375.0, np.nan],
            "x_max": [1653.0, np.nan],
            "y_max": [1831.0, np.nan],
        }
    )
    ann.to_csv(tmp_path / "annotations" / "annotations_train.csv", index=False)
    # VinDr has MONOCHROME1 12-bit DICOMs (suffix .dicom)
    px = (np.arange(64).reshape(8, 8) * 64).astype(np.uint16)
    write_dicom(
        tmp_path / "train" / "000434271f63a053c4128a0ba6352c7f.dicom",
        px,
        photometric="MONOCHROME1",
        bits=12,
    )
    write_dicom(tmp_path / "train" / "00053190460d56c53cc3e57321387478.dicom", px, bits=12)
    ds = create("vindr_cxr", tmp_path, split="train")
    assert ds.classes == cols and len(ds) == 2
    s = ds[0]
    validate_sample(s, task="classification")
    assert s["label"].tolist() == [1.0, 0.0, 0.0, 0.0]  # majority of 3 readers
    assert s["meta"]["n_readers"] == 3
    assert s["meta"]["boxes"] == [
        {
            "class_name": "Cardiomegaly",
            "x_min": 691.0,
            "y_min": 1375.0,
            "x_max": 1653.0,
            "y_max": 1831.0,
            "rad_id": "R2",
        }
    ]
    assert torch.allclose(s["image"][0], torch.from_numpy(1.0 - px / 4095.0).float())  # inverted
    assert torch.allclose(ds[1]["image"][0], torch.from_numpy(px / 4095.0).float())
    assert ds[1]["meta"]["boxes"] == []
    anyv = create("vindr_cxr", tmp_path, split="train", aggregate="any")
    assert anyv[0]["label"].tolist() == [1.0, 1.0, 1.0, 0.0]
    raw = create("vindr_cxr", tmp_path, split="train", normalize="none")[0]["image"]
    assert raw.max().item() == 63 * 64  # stored values, no inversion


# -- generic CSV -----------------------------------------------------------------------------------


def test_csv_multiclass_and_multilabel(tmp_path: Path) -> None:
    for i in range(3):
        write_png(tmp_path / "imgs" / f"{i}.png", grey(i, dtype=np.uint16))
    df = pd.DataFrame(
        {
            "file": ["imgs/0.png", "imgs/1.png", "imgs/2.png"],
            "dx": ["covid", "normal", "covid"],
            "Edema": [1, -1, np.nan],
            "Effusion": [0, 1, 1],
            "pid": ["a", "a", "b"],
            "proj": ["PA", "AP", "PA"],
            "fold": ["train", "test", "test"],
        }
    )
    df.to_csv(tmp_path / "labels.csv", index=False)
    mc = create(
        "csv",
        tmp_path,
        split="test",
        image_column="file",
        label_columns="dx",
        patient_column="pid",
        view_column="proj",
        split_column="fold",
    )
    assert mc.ids == ["imgs/1", "imgs/2"] and mc.classes == ["covid", "normal"]
    s = mc[0]
    validate_sample(s, task="classification")
    assert s["label"] == 1 and s["meta"]["patient_id"] == "a" and s["meta"]["view"] == "AP"
    assert torch.allclose(
        s["image"][0], torch.from_numpy(grey(1, dtype=np.uint16) / 65535.0).float()
    )  # 16-bit
    ml = create(
        "csv",
        tmp_path,
        image_column="file",
        label_columns=["Edema", "Effusion"],
        uncertainty="u_zeros",
    )
    assert ml[1]["label"].tolist() == [0.0, 1.0] and math.isnan(ml[2]["label"][0].item())
    with pytest.raises(
        ValueError,
        match=r"line 3 \(image 'imgs/1.png'\): label 'normal' is not one of the classes \['covid', 'pneumonia'\]",
    ):
        create(
            "csv", tmp_path, image_column="file", label_columns="dx", classes=["covid", "pneumonia"]
        )


# -- labels ----------------------------------------------------------------------------------------


def test_canonical_names_and_harmonize(nih_root: Path, chexpert_root: Path) -> None:
    assert canonical_name("Effusion") == canonical_name("Pleural Effusion") == "Pleural Effusion"
    assert (
        canonical_name("Pleural_Thickening")
        == canonical_name("Pleural thickening")
        == "Pleural Thickening"
    )
    assert canonical_name("Aortic enlargement") == "Aortic enlargement"
    nih = create("nih_cxr14", nih_root, split="all")
    chx = create("chexpert", chexpert_root, split="train", uncertainty="u_ones")
    a, b = harmonize_labels(
        [nih, chx], names=["Cardiomegaly", "Effusion", "Hernia", "Pneumonia", "Fracture"]
    )
    assert (
        a.classes
        == b.classes
        == ["Cardiomegaly", "Pleural Effusion", "Hernia", "Pneumonia", "Fracture"]
    )
    assert a[1]["label"].tolist()[:4] == [1.0, 1.0, 0.0, 0.0] and math.isnan(
        a[1]["label"][4].item()
    )  # NIH: no Fracture
    y = b[0]["label"]  # CheXpert: no Hernia → NaN; blank Effusion → NaN
    assert (
        y[0].item() == 1.0
        and math.isnan(y[1].item())
        and math.isnan(y[2].item())
        and y[3].item() == 0.0
    )
    f1, f2 = harmonize_labels(
        [
            pd.DataFrame({"Effusion": [1.0]}),
            pd.DataFrame({"Pleural Effusion": [0.0], "Fracture": [1.0]}),
        ]
    )
    assert list(f1.columns) == list(f2.columns) == ["Pleural Effusion", "Fracture"]
    assert math.isnan(f1["Fracture"][0])
    with pytest.raises(ValueError, match="both mean"):
        harmonize_labels([pd.DataFrame({"Effusion": [1.0], "Pleural Effusion": [0.0]})])


def test_apply_uncertainty_table() -> None:
    raw = pd.DataFrame({"a": [1.0, 0.0, -1.0, np.nan]})
    assert apply_uncertainty(raw, "u_ones")["a"].tolist()[:3] == [1.0, 0.0, 1.0]
    assert apply_uncertainty(raw, "u_zeros", blank="zero")["a"].tolist() == [1.0, 0.0, 0.0, 0.0]
    out = apply_uncertainty(raw, "ignore", blank="zero")["a"].tolist()
    assert out[:2] == [1.0, 0.0] and math.isnan(out[2]) and out[3] == 0.0
    with pytest.raises(ValueError, match="'maybe'"):
        apply_uncertainty(pd.DataFrame({"a": ["maybe"]}), "u_ones", source="x.csv")


def test_normalize_modes(tmp_path: Path) -> None:
    a = np.array([[10, 20], [30, 40]], np.uint8)
    write_png(tmp_path / "a.png", a)
    auto, _ = load_cxr_image(tmp_path / "a.png")
    assert torch.allclose(auto[0], torch.from_numpy(a / 255.0).float())
    mm, _ = load_cxr_image(tmp_path / "a.png", normalize="minmax")
    assert torch.allclose(mm[0], torch.tensor([[0.0, 1 / 3], [2 / 3, 1.0]]))
    none, _ = load_cxr_image(tmp_path / "a.png", normalize="none")
    assert torch.equal(none[0], torch.from_numpy(a.astype(np.float32)))
    with pytest.raises(ValueError, match="normalize must be"):
        load_cxr_image(tmp_path / "a.png", normalize="zscore")


@pytest.mark.parametrize(
    "config",
    [
        "nih_cxr14",
        "chexpert",
        "mimic_cxr",
        "rsna_pneumonia",
        "siim_pneumothorax",
        "vindr_cxr",
        "csv",
        "pcam",
        "image_folder",
        "mhist",
        "wsi_tiles",
        "medmnist",
    ],
)
def test_dataset_configs_match_factories(config: str) -> None:
    import inspect

    yaml = pytest.importorskip("yaml")
    from medimg_bench.registry import DATASETS

    path = Path(__file__).resolve().parents[2] / "configs" / "dataset" / f"{config}.yaml"
    cfg = yaml.safe_load(path.read_text())
    assert set(cfg) == {"name", "root", "split", "train_split", "options"} and cfg["root"] == "???"
    params = inspect.signature(DATASETS.get(cfg["name"])).parameters
    assert set(cfg["options"] or {}) <= set(params), (
        f"{config}.yaml has options the factory does not take"
    )


@pytest.mark.parametrize(
    "name", ["chexpert", "mimic_cxr", "nih_cxr14", "rsna_pneumonia", "siim_pneumothorax", "vindr_cxr"]
)
def test_official_loaders_list_and_check_the_shared_options(name: str, tmp_path: Path) -> None:
    """``cxr_loader`` keeps each loader's signature whole (``datasets.create`` and the run manifest
    read it) and refuses what the written-out signature refused, naming the loader."""
    import inspect

    from medimg_bench.registry import DATASETS

    loader = DATASETS.get(name)
    params = inspect.signature(loader).parameters
    shared = {"normalize": "auto", "channels": 1, "views": None, "on_missing": "error", "transform": None}
    assert list(params)[:2] == ["root", "split"] and list(params)[-6:] == [*shared, "options"]
    assert {k: (params[k].default, params[k].kind) for k in shared} == {
        k: (v, inspect.Parameter.KEYWORD_ONLY) for k, v in shared.items()
    }
    assert "opts" not in params and loader.__name__ == name
    with pytest.raises(TypeError, match=rf"{name}: unknown option\(s\) \['bogus'\]"):
        create(name, tmp_path, bogus=1)
    with pytest.raises(TypeError, match=f"{name}: too many positional arguments"):
        loader(tmp_path, "test", "third")
