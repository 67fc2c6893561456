"""VQA datasets on tiny copies of each released layout (real file names and columns)."""

from __future__ import annotations

import base64
import io
import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from medimg_bench.datasets import vqa as _module
from medimg_bench.datasets.vqa import decode_image
from medimg_bench.sample import SampleError, collate
from tests.datasets._helpers import edit_json_item, family_tests, vqa_sample

_NAMES = ["vqa_rad", "slake", "pathvqa", "pmc_vqa", "omnimedvqa", "gmai_mmbench", "medxpertqa_mm", "medframeqa"]


create, test_registered, test_configs_match_factories = family_tests(_module, _NAMES)



def _img_bytes(value: int, fmt: str = "PNG", mode: str = "RGB", size=(8, 6)) -> bytes:
    arr = np.full((size[1], size[0], 3) if mode == "RGB" else size[::-1], value, np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr, mode=mode).save(buf, format=fmt)
    return buf.getvalue()


def _write_img(path: Path, value: int, mode: str = "RGB") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fmt = "JPEG" if path.suffix.lower() in (".jpg", ".jpeg") else "PNG"
    path.write_bytes(_img_bytes(value, fmt, mode))


def test_decode_image_modes(tmp_path):
    grey16 = tmp_path / "g16.png"
    Image.fromarray(np.full((4, 5), 65535, np.uint16)).save(grey16)
    t = decode_image(grey16)
    assert t.shape == (1, 4, 5) and t.dtype == torch.float32 and float(t.max()) == pytest.approx(1.0)
    pal = Image.fromarray(np.zeros((4, 5), np.uint8), mode="L").convert("P")
    pal.save(tmp_path / "p.png")
    assert decode_image(tmp_path / "p.png").shape == (3, 4, 5)
    assert torch.allclose(decode_image(_img_bytes(51)), torch.full((3, 6, 8), 0.2))
    with pytest.raises(ValueError, match="not a readable image"):
        decode_image(b"not an image", where="x.tsv row 3")
    with pytest.raises(FileNotFoundError):
        decode_image(tmp_path / "missing.png")


def _vqa_rad(root: Path) -> None:
    items = [
        {"qid": 1, "phrase_type": "freeform", "qid_linked_id": "03f451ca", "image_name": "synpic54610.jpg",
         "image_organ": "HEAD", "answer": "Yes", "answer_type": "CLOSED", "question_type": "PRES",
         "question": "Are regions of the brain infarcted?"},
        {"qid": 2, "phrase_type": "test_freeform", "qid_linked_id": "06e26b2c", "image_name": "synpic29265.jpg",
         "image_organ": "CHEST", "answer": 2, "answer_type": "OPEN", "question_type": "COUNT",
         "question": "How many lesions are there?"},
        {"qid": 3, "phrase_type": "test_para", "qid_linked_id": "06e26b2c", "image_name": "synpic29265.jpg",
         "image_organ": "CHEST", "answer": "no", "answer_type": "CLOSED ", "question_type": "ABN",
         "question": "Is this normal?"},
    ]
    (root / "VQA_RAD Dataset Public.json").write_text(json.dumps(items))
    _write_img(root / "VQA_RAD Image Folder" / "synpic54610.jpg", 100, "L")
    _write_img(root / "VQA_RAD Image Folder" / "synpic29265.jpg", 200, "L")


def test_vqa_rad(tmp_path):
    _vqa_rad(tmp_path)
    ds = create("vqa_rad", tmp_path)
    assert ds.ids == ["2", "3"]
    s = vqa_sample(ds)
    assert s["question"] == "How many lesions are there?" and s["answer"] == "2"
    assert s["answer_type"] == "open" and s["options"] is None
    assert s["meta"]["answer_type_original"] == "OPEN" and s["meta"]["phrase_type"] == "test_freeform"
    assert s["meta"]["patient_id"] == "synpic29265.jpg" and s["meta"]["organ"] == "CHEST"
    assert s["image"].shape == (1, 6, 8)
    assert float(s["image"].mean()) == pytest.approx(200 / 255, abs=0.02)
    assert ds[1]["answer_type"] == "closed" and ds[1]["meta"]["answer_type_original"] == "CLOSED"
    assert create("vqa_rad", tmp_path, split="train").ids == ["1"]
    assert len(create("vqa_rad", tmp_path, split="all")) == 3
    batch = collate([ds[0], ds[1]])
    assert batch["image"].shape == (2, 1, 6, 8) and batch["answer"] == ["2", "no"]
    (tmp_path / "VQA_RAD Image Folder" / "synpic29265.jpg").unlink()
    assert {p["id"] for p in ds.check()} == {"2", "3"}
    with pytest.raises(SampleError, match="sample '2'.*synpic29265.jpg"):
        ds[0]


def test_vqa_rad_bad_row(tmp_path, caplog):
    _vqa_rad(tmp_path)
    edit_json_item(tmp_path / "VQA_RAD Dataset Public.json", 1, answer_type="MAYBE")
    with pytest.raises(ValueError, match=r"VQA_RAD Dataset Public.json' row 1 \(qid 2\).*MAYBE"):
        create("vqa_rad", tmp_path)
    with caplog.at_level(logging.WARNING):
        assert create("vqa_rad", tmp_path, on_error="skip").ids == ["3"]
    assert "skipped 1 bad row" in caplog.text


def test_slake(tmp_path):
    def q(qid, lang, img, question, answer, atype, modality="CT"):
        return {"img_id": 102, "img_name": img, "question": question, "answer": answer, "q_lang": lang,
                "location": "Abdomen", "modality": modality, "answer_type": atype, "base_type": "vqa",
                "content_type": "Modality", "triple": ["vhead", "_", "_"], "qid": qid}
    test = [
        q(11934, "en", "xmlab102/source.jpg", "Which modality is used to take this image?", "CT", "CLOSED"),
        q(11935, "zh", "xmlab102/source.jpg", "这张图片是用什么方式拍摄的?", "CT", "CLOSED"),
        q(11936, "en", "xmlab5/source.jpg", "Where is the abnormality?", "Left Lung, Right", "OPEN", "X-Ray"),
    ]
    (tmp_path / "test.json").write_text(json.dumps(test, ensure_ascii=False))
    (tmp_path / "validate.json").write_text(json.dumps(test[:1]))
    _write_img(tmp_path / "imgs" / "xmlab102" / "source.jpg", 60)
    _write_img(tmp_path / "imgs" / "xmlab5" / "source.jpg", 90)
    ds = create("slake", tmp_path)
    assert ds.ids == ["11934", "11936"]
    s = vqa_sample(ds)
    # SLAKE's CLOSED is kept even though the answer is not yes/no
    assert s["answer"] == "CT" and s["answer_type"] == "closed"
    assert s["meta"]["modality"] == "CT" and s["meta"]["patient_id"] == "xmlab102"
    assert s["image"].shape == (3, 6, 8)
    assert ds[1]["answer_type"] == "open" and ds[1]["meta"]["modality"] == "X-Ray"
    assert len(create("slake", tmp_path, language=None)) == 3
    xray = ds.filter(modality="X-Ray")  # manifest filter before any pixel is read
    assert xray.ids == ["11936"] and xray[0]["answer"] == "Left Lung, Right"
    assert create("slake", tmp_path, split="val").ids == ["11934"]
    with pytest.raises(FileNotFoundError, match="train.json"):
        create("slake", tmp_path, split="train")


def _parquet(path: Path, table: dict, row_group_size: int = 2) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(table), path, row_group_size=row_group_size)


def test_pathvqa_parquet_and_csv(tmp_path):
    values = [10, 20, 30]
    _parquet(
        tmp_path / "data" / "test-00000-of-00001.parquet",
        {
            "image": [{"bytes": _img_bytes(v, "JPEG"), "path": None} for v in values],
            "question": ["where are liver stem cells?", "is there fibrosis?", "what is present?"],
            "answer": ["in the canals of hering", "yes", "necrosis"],
        },
    )
    ds = create("pathvqa", tmp_path)
    assert ds.ids == ["test_000000", "test_000001", "test_000002"]
    assert [ds[i]["answer_type"] for i in range(3)] == ["open", "closed", "open"]
    s = vqa_sample(ds, 2)  # second row group
    assert s["answer"] == "necrosis"
    assert float(s["image"].mean()) == pytest.approx(30 / 255, abs=0.02)
    assert float(ds[0]["image"].mean()) == pytest.approx(10 / 255, abs=0.02)
    # the CSV release layout
    _write_img(tmp_path / "csvroot" / "images" / "test" / "test_0001.jpg", 77)
    (tmp_path / "csvroot" / "test.csv").write_text("image,question,answer\nimages/test/test_0001.jpg,is it?,no\n")
    s = create("pathvqa", tmp_path / "csvroot")[0]
    assert s["answer"] == "no" and s["answer_type"] == "closed" and s["image"].shape == (3, 6, 8)
    with pytest.raises(FileNotFoundError, match="parquet"):
        create("pathvqa", tmp_path, split="train")


def test_pmc_vqa(tmp_path):
    (tmp_path / "test_2.csv").write_text(
        "Figure_path,Question,Answer,Choice A,Choice B,Choice C,Choice D,Answer_label\n"
        "PMC8253867_Fig1_41.jpg,What imaging modality was used?, CT scan,A: MRI ,B: CT scan ,C: PET ,D: US ,B\n"
        "PMC8253868_Fig2_3.jpg,Which organ is shown?,Liver,A:Liver,B:Kidney,C:Spleen,D:Heart,A\n"
    )
    _write_img(tmp_path / "images" / "PMC8253867_Fig1_41.jpg", 40)
    _write_img(tmp_path / "images" / "PMC8253868_Fig2_3.jpg", 80)
    ds = create("pmc_vqa", tmp_path)
    s = vqa_sample(ds)
    assert s["options"] == ["MRI", "CT scan", "PET", "US"]
    assert s["answer"] == "B" and s["answer_type"] == "mcq" and s["meta"]["answer_text"] == "CT scan"
    assert s["meta"]["patient_id"] == "PMC8253867_Fig1_41.jpg"
    assert ds[1]["answer"] == "A" and ds[1]["options"][0] == "Liver"
    text = (tmp_path / "test_2.csv").read_text().replace(",A\n", ",E\n")
    (tmp_path / "test_2.csv").write_text(text)
    with pytest.raises(ValueError, match=r"test_2.csv' row line 3: Answer_label 'E'"):
        create("pmc_vqa", tmp_path)
    assert len(create("pmc_vqa", tmp_path, on_error="skip")) == 1


def test_omnimedvqa(tmp_path):
    qa = [
        {"dataset": "ACRIMA", "question_id": "ACRIMA_0000", "question_type": "Disease Diagnosis",
         "question": "What is the diagnosis?", "gt_answer": "Glaucoma", "image_path": "Images/ACRIMA/Im001.png",
         "option_A": "Normal", "option_B": "Glaucoma", "modality_type": "Fundus Photography"},
        {"dataset": "ACRIMA", "question_id": "ACRIMA_0001", "question_type": "Modality Recognition",
         "question": "What modality?", "gt_answer": "fundus photography", "image_path": "Images/ACRIMA/Im002.png",
         "option_A": "CT", "option_B": "MRI", "option_C": "Fundus photography", "option_D": "X-ray",
         "modality_type": "Fundus Photography"},
    ]
    folder = tmp_path / "QA_information" / "Open-access"
    folder.mkdir(parents=True)
    (folder / "ACRIMA.json").write_text(json.dumps(qa))
    _write_img(tmp_path / "Images" / "ACRIMA" / "Im001.png", 10)
    _write_img(tmp_path / "Images" / "ACRIMA" / "Im002.png", 20)
    ds = create("omnimedvqa", tmp_path)
    assert ds.ids == ["ACRIMA_0000", "ACRIMA_0001"]
    s = vqa_sample(ds)
    assert s["options"] == ["Normal", "Glaucoma"] and s["answer"] == "B"
    assert s["meta"]["modality"] == "Fundus Photography" and s["meta"]["source_dataset"] == "ACRIMA"
    assert ds[1]["answer"] == "C" and ds[1]["meta"]["answer_text"] == "fundus photography"
    qa[1]["gt_answer"] = "Ultrasound"
    (folder / "ACRIMA.json").write_text(json.dumps(qa))
    with pytest.raises(ValueError, match=r"ACRIMA.json' row 1 \(question_id ACRIMA_0001\).*Ultrasound"):
        create("omnimedvqa", tmp_path)


def _gmai_tsv(path: Path, rows: list[dict]) -> None:
    cols = list(rows[0])
    lines = ["\t".join(cols)] + ["\t".join(str(r.get(c, "")) for c in cols) for r in rows]
    path.write_text("\n".join(lines) + "\n")


def test_gmai_mmbench(tmp_path, caplog):
    b64 = base64.b64encode(_img_bytes(120)).decode()
    val = [
        {"index": 0, "question": "What is the modality?", "A": "CT", "B": "MRI", "C": "X-ray", "D": "",
         "E": "", "answer": "B", "image": b64, "category": "Modality", "modality": "MR",
         "clinical vqa task": "Modality Recognition"},
        {"index": 1, "question": "Which organ?", "A": "Brain", "B": "Liver", "C": "", "D": "", "E": "",
         "answer": "A", "image": "0", "category": "Organ", "modality": "MR",
         "clinical vqa task": "Organ Recognition"},
    ]
    _gmai_tsv(tmp_path / "GMAI-MMBench_VAL.tsv", val)
    ds = create("gmai_mmbench", tmp_path)
    s = vqa_sample(ds)
    assert s["options"] == ["CT", "MRI", "X-ray"] and s["answer"] == "B" and s["answer_type"] == "mcq"
    assert s["meta"]["modality"] == "MR" and s["meta"]["category"] == "Modality"
    assert s["meta"]["clinical vqa task"] == "Modality Recognition"
    assert torch.allclose(s["image"], torch.full((3, 6, 8), 120 / 255))
    s1 = ds[1]  # image stored as a reference to row 0
    assert torch.equal(s1["image"], s["image"]) and s1["meta"]["patient_id"] == "0"
    test = [{k: v for k, v in r.items() if k != "answer"} for r in val]
    _gmai_tsv(tmp_path / "GMAI-MMBench_TEST.tsv", test)
    with caplog.at_level(logging.WARNING):
        ds = create("gmai_mmbench", tmp_path, split="test")
    assert "has no answers" in caplog.text
    assert ds[0]["answer"] is None and ds[0]["options"] == ["CT", "MRI", "X-ray"]
    # bad base64 -> error naming the sample and the file
    val[0]["image"] = "%%%not-base64%%%"
    val[1]["image"] = b64
    _gmai_tsv(tmp_path / "GMAI-MMBench_VAL.tsv", val)
    ds = create("gmai_mmbench", tmp_path)
    with pytest.raises(SampleError, match=r"sample '0'.*GMAI-MMBench_VAL.tsv index 0.*base64"):
        ds[0]
    assert ds[1]["image"].shape == (3, 6, 8)
    val[1]["answer"] = "D"
    _gmai_tsv(tmp_path / "GMAI-MMBench_VAL.tsv", val)
    with pytest.raises(ValueError, match=r"GMAI-MMBench_VAL.tsv' row 1 \(index 1\): answer 'D'"):
        create("gmai_mmbench", tmp_path)


def test_medxpertqa_mm(tmp_path):
    item = {
        "id": "MM-0",
        "question": "A 45-year-old man presents with chest pain. What is the diagnosis?\n"
        "Answer Choices: (A) Pneumothorax (B) Pneumonia (C) Effusion (D) Normal (E) Edema",
        "options": {"A": "Pneumothorax", "B": "Pneumonia", "C": "Effusion", "D": "Normal", "E": "Edema"},
        "label": "C",
        "images": ["MM-0-a.jpeg", "MM-0-b.jpeg"],
        "medical_task": "Diagnosis",
        "body_system": "Respiratory",
        "question_type": "Reasoning",
    }
    (tmp_path / "MM").mkdir()
    (tmp_path / "MM" / "test.jsonl").write_text(json.dumps(item) + "\n")
    _write_img(tmp_path / "images" / "MM-0-a.jpeg", 50)
    _write_img(tmp_path / "images" / "MM-0-b.jpeg", 150, "L")
    ds = create("medxpertqa_mm", tmp_path)
    s = vqa_sample(ds)
    assert s["id"] == "MM-0" and s["answer"] == "C" and s["meta"]["answer_text"] == "Effusion"
    assert s["question"] == "A 45-year-old man presents with chest pain. What is the diagnosis?"
    assert s["meta"]["question_original"].endswith("(E) Edema")
    assert s["options"] == ["Pneumothorax", "Pneumonia", "Effusion", "Normal", "Edema"]
    assert isinstance(s["image"], list) and [t.shape[0] for t in s["image"]] == [3, 1]
    assert create("medxpertqa_mm", tmp_path, strip_choices=False)[0]["question"].endswith("(E) Edema")
    item["label"] = "F"
    (tmp_path / "MM" / "test.jsonl").write_text(json.dumps(item) + "\n")
    with pytest.raises(ValueError, match=r"test.jsonl' row 0 \(id MM-0\): label 'F'"):
        create("medxpertqa_mm", tmp_path)


def test_medframeqa(tmp_path):
    _parquet(
        tmp_path / "data" / "test-00000-of-00001.parquet",
        {
            "question_id": ["q0", "q1", "q2"],
            "system": ["Respiratory", "Nervous", "Digestive"],
            "organ": ["Lung", "Brain", "Liver"],
            "keyword": ["k", "k", "k"],
            "modality": ["CT", "MRI", "Ultrasound"],
            "video_id": ["vidA", "vidB", "vidA"],
            "question": ["Across the frames, what changes?", "What is seen?", "Which finding?"],
            "options": [["A. Growth", "B. Shrinkage", "C. None", "D. Both"], ["Edema", "Bleed"],
                        ["A) x", "B) y", "C) z"]],
            "image": [
                [{"bytes": _img_bytes(10 * k), "path": f"f{k}.png"} for k in range(1, n + 1)]
                for n in (2, 5, 3)
            ],
            "answer": ["B", "Bleed", "C"],
        },
    )
    ds = create("medframeqa", tmp_path)
    assert ds.ids == ["q0", "q1", "q2"]
    s = vqa_sample(ds)
    assert s["options"] == ["Growth", "Shrinkage", "None", "Both"] and s["answer"] == "B"
    assert len(s["image"]) == 2 and float(s["image"][1].mean()) == pytest.approx(20 / 255)
    s = ds[2]  # second row group
    assert len(s["image"]) == 3 and s["answer"] == "C" and s["options"] == ["x", "y", "z"]
    assert ds[1]["answer"] == "B" and len(ds[1]["image"]) == 5 and ds[1]["meta"]["patient_id"] == "vidB"
    assert ds[0]["meta"]["patient_id"] == ds[2]["meta"]["patient_id"] == "vidA"


def _miccai19_layout(folder: Path, *, test: list[dict], train: list[dict]) -> None:
    """The MICCAI19-MedVQA layout: ``testset.json``, ``trainset.json``, each item's image in ``images/``."""
    folder.mkdir(parents=True)
    (folder / "testset.json").write_text(json.dumps(test))
    (folder / "trainset.json").write_text(json.dumps(train))
    for image in sorted({item["image_name"] for item in test + train}):
        _write_img(folder / "images" / image, 120, "L")


def test_vqa_rad_miccai19_layout_chosen_automatically(tmp_path):
    rad = tmp_path / "data_RAD"
    item = {"qid": "0", "image_name": "synpic1.jpg", "image_organ": "CHEST", "answer": "Yes",
            "answer_type": "CLOSED", "question_type": "PRES", "question": "Is there a mass?",
            "phrase_type": "freeform"}
    second = {**item, "qid": "1", "answer": "two", "answer_type": "OPEN", "question": "How many?"}
    _miccai19_layout(rad, test=[item, second], train=[{**item, "qid": "9"}])
    test = create("vqa_rad", tmp_path, split="test")
    assert test.ids == ["0", "1"] and [test[i]["answer_type"] for i in range(2)] == ["closed", "open"]
    assert test[0]["meta"]["question_type"] == "PRES" and test[0]["meta"]["organ"] == "CHEST"
    assert create("vqa_rad", tmp_path, split="train").ids == ["9"]
    assert len(create("vqa_rad", rad, split="all")) == 3  # root may be data_RAD itself


def test_slake_miccai19_layout_chosen_automatically(tmp_path):
    sl = tmp_path / "data_SLAKE"
    item = {"qid": "5", "image_name": "xmlab1.jpg", "image_organ": "LUNG", "answer": "Left Lung",
            "answer_type": "OPEN", "question_type": "Position", "question": "Where is the mass?",
            "phrase_type": "freeform"}
    _miccai19_layout(sl, test=[item], train=[{**item, "qid": "6", "answer_type": "CLOSED", "answer": "Yes"}])
    test = create("slake", tmp_path, split="test")
    assert test.ids == ["5"] and test[0]["answer_type"] == "open"
    assert test[0]["meta"]["question_type"] == "Position"
    assert create("slake", sl, split="train").ids == ["6"]
