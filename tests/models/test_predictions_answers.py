"""model=predictions answer files: every line checked before it is scored (issue #19 item 5),
CircularEval over stored answers refused unless every rotation is stored (#19 item 6)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import medimg_bench as mb
from medimg_bench.builders import build_model
from medimg_bench.engine.results import EvaluationFailed
from medimg_bench.models.predictions import AnswersFromFile
from medimg_bench.runs import compose_config
from medimg_bench.runs.compose import plain
from medimg_bench.tasks.vqa import VQATask

OPTIONS = [["Normal", "Glaucoma"], ["CT", "MRI", "Fundus photography", "X-ray"], ["AP", "PA", "Lateral"]]
ANSWERS = ["Glaucoma", "Fundus photography", "PA"]


@pytest.fixture(scope="module")
def mcq(tmp_path_factory):
    """A three-question multiple-choice set in OmniMedVQA's layout (answers B, C, B)."""
    root = tmp_path_factory.mktemp("omni")
    qa = []
    for k, (opts, answer) in enumerate(zip(OPTIONS, ANSWERS)):
        rec = {"dataset": "ACRIMA", "question_id": f"Q{k}", "question_type": "Disease Diagnosis",
               "question": f"Question {k}?", "gt_answer": answer, "image_path": f"Images/ACRIMA/{k}.png",
               "modality_type": "Fundus Photography"}
        rec.update({f"option_{chr(65 + i)}": o for i, o in enumerate(opts)})
        qa.append(rec)
        (root / "Images" / "ACRIMA").mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((6, 8, 3), 20 * k, np.uint8)).save(root / "Images" / "ACRIMA" / f"{k}.png")
    (root / "QA_information" / "Open-access").mkdir(parents=True)
    (root / "QA_information" / "Open-access" / "ACRIMA.json").write_text(json.dumps(qa))
    return mb.create_dataset("omnimedvqa", root=root)


def _jsonl(path: Path, records: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def _vqa(model, ds, **task):
    return mb.evaluate(model, ds, task=VQATask(**task), progress=False, n_resamples=10)


@pytest.mark.parametrize(("records", "problem"), [
    ([{"id": "a", "text": "yes"}, {"id": "a", "text": "no"}], r"line 2: duplicate id 'a' \(first on line 1\)"),
    ([{"id": 7, "text": "yes"}, {"id": "7", "text": "no"}], r"line 2: duplicate id '7'"),
    ([{"id": "a", "text": None}], r"line 1: the answer is null"),
    ([{"id": "a", "text": ["yes"]}], r"line 1: the answer must be a string, got list \['yes'\]"),
    ([{"id": "a", "text": 1}], r"line 1: the answer must be a string, got int 1"),
    ([{"id": "a", "text": True}], r"line 1: the answer must be a string, got bool"),
    ([{"id": "a", "text": "  "}], r"line 1: the answer '  ' is blank"),
    ([{"id": "a", "text": "None"}], r"line 1: the answer 'None' is blank or a missing value"),
    ([{"id": "a", "text": "nan"}], r"line 1: the answer 'nan' is blank"),
    ([{"id": None, "text": "yes"}], r"line 1: the id must be a string or an integer, got NoneType"),
    ([{"id": 1.5, "text": "yes"}], r"line 1: the id must be a string or an integer, got float"),
    ([{"id": True, "text": "yes"}], r"line 1: the id must be a string or an integer, got bool"),
    ([{"id": " ", "text": "yes"}], r"line 1: the id is empty"),
    ([{"id": "b", "text": "no"}, {"id": "a"}], r"line 2: no \['text'\] key"),
    ([{"id": "a"}], r"no column holding the model.s text"),
    (['{"id": "a", "text": "yes", "text": "no"}'], r"line 1: not a JSON object .*\['text'\] given twice"),
    (['["a", "yes"]'], r"line 1: expected a JSON object, got list"),
    (['{"id": "a", "text": "yes"'], r"line 1: not a JSON object"),
    ([{"id": "a", "text": "yes"}, "", '{"id": "b", "text": NaN}'], r"line 3: the answer must be a string, got float"),
    ([], r"no answers in the file"),
])
def test_bad_answer_lines_are_refused_naming_the_line(tmp_path, records, problem):
    path = _jsonl(tmp_path / "answers.jsonl", records)
    with pytest.raises(ValueError, match=problem) as e:
        mb.create_model("predictions", root=path)
    assert "answers.jsonl" in str(e.value)


def test_invalid_utf8_names_the_line(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"id": "a", "text": "yes"}\n{"id": "b", "text": "\xff"}\n')
    with pytest.raises(ValueError, match=r"a.jsonl' line 2: not UTF-8"):
        AnswersFromFile(path)


def test_blank_answers_kept_on_request_are_scored_as_wrong(tmp_path):
    """A file whose answers are all null: refused by default (lmms_eval read str(None) as "no":
    closed accuracy 0.786 from a file with no answers); kept, they are unparsed and wrong."""
    ds = mb.create_dataset("synthetic_vqa", cache_dir=tmp_path / "vqa", n=4, size=16)
    path = _jsonl(tmp_path / "a.jsonl", [{"id": sid, "text": None} for sid in ds.ids])
    with pytest.raises(ValueError, match="line 1: the answer is null"):
        mb.create_model("predictions", root=path)
    model = mb.create_model("predictions", root=path, on_blank="keep")
    for scoring in ("lmms_eval", "medimg_bench"):
        res = _vqa(model, ds, scoring=scoring)
        m = res.summary["metrics"]
        assert res.summary["n_failed"] == 0
        assert m["accuracy_closed"]["mean"]["value"] == 0.0
    with pytest.raises(ValueError, match="on_blank must be"):
        mb.create_model("predictions", root=path, on_blank="skip")


def test_circular_eval_over_one_stored_answer_is_refused(mcq, tmp_path):
    path = _jsonl(tmp_path / "a.jsonl", [{"id": f"Q{k}", "text": "B" if k != 1 else "C"} for k in range(3)])
    # the configuration layer passes the task's flag: refused when the model is built
    cfg = plain(compose_config(["task=vqa", "model=predictions", f"model.options.root={path}",
                                "task.options.circular=true"]))
    assert cfg["model"]["options"]["circular"] is True
    with pytest.raises(ValueError, match="stored answers cannot be rotated.*#rot"):
        build_model(cfg["model"], mcq)
    # the Python API: the rotations fail, each naming the reason (never the same letter served again)
    with pytest.raises(EvaluationFailed) as failed:  # no sample scored: the run failed
        _vqa(AnswersFromFile(path), mcq, circular=True)
    res = failed.value.results
    assert res.summary["n_failed"] == 3
    assert all("stored answers cannot be rotated" in e for e in res.samples["error"].dropna())
    # without CircularEval the stored answers are scored as they are
    res = _vqa(AnswersFromFile(path), mcq)
    assert res.summary["metrics"]["accuracy"]["mean"]["value"] == pytest.approx(1.0)


def _rotated_answer(options: list[str], answer_text: str, shift: int, wrong_at: int | None) -> str:
    """The letter of ``answer_text`` when the options are listed from ``options[shift]`` on."""
    rotated = [options[(i + shift) % len(options)] for i in range(len(options))]
    k = rotated.index(answer_text)
    if shift == wrong_at:
        k = (k + 1) % len(options)
    return chr(65 + k)


def test_circular_eval_with_one_stored_answer_per_rotation(mcq, tmp_path, caplog):
    records = []
    for q, (opts, answer) in enumerate(zip(OPTIONS, ANSWERS)):
        for shift in range(len(opts)):
            sid = f"Q{q}" if shift == 0 else f"Q{q}#rot{shift}"
            if q == 2 and shift == 0:
                sid = "Q2#rot0"  # the same as Q2
            records.append({"id": sid, "text": _rotated_answer(opts, answer, shift, wrong_at=1 if q == 1 else None)})
    path = _jsonl(tmp_path / "a.jsonl", records)
    cfg = {"name": "predictions", "options": {"root": str(path), "circular": True}}
    model = build_model(cfg, mcq)
    res = _vqa(model, mcq, circular=True)
    m = res.summary["metrics"]
    assert res.summary["n_failed"] == 0
    assert m["accuracy"]["mean"]["value"] == pytest.approx(1.0)  # rotation 0 right everywhere
    assert m["accuracy_circular"]["mean"]["value"] == pytest.approx(2 / 3)  # Q1 wrong at rotation 1
    # a rotation missing from the file fails its question, naming the rotation
    _jsonl(path, [r for r in records if r["id"] != "Q0#rot1"])
    res = _vqa(AnswersFromFile(path, circular=True), mcq, circular=True)
    assert res.summary["n_failed"] == 1
    assert "no stored answer for rotation 1 of sample 'Q0'" in res.samples["error"].dropna().iloc[0]
    # rotation answers without CircularEval: not used, said once
    with caplog.at_level(logging.WARNING, logger="medimg_bench.models.predictions"):
        model = AnswersFromFile(path)
        assert model.check_ids(list(mcq.ids)) == 0  # '<id>#rot<k>' is not an unknown id
    assert any("for option rotations" in r.getMessage() for r in caplog.records)
