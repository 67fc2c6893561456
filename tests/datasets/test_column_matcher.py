"""One column matcher for every table the toolkit reads (issue #35 item 3): every reader of tables
— class scores, per-frame phases, stored reports / answers, label CSVs — gives the same values
for permuted and renamed (case, punctuation, score affixes) columns and refuses decoys and
ambiguity listing the candidates; then each example of the issue."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from medimg_bench.datasets.columns import (
    column_key,
    equals_reference,
    index_base,
    match_class_columns,
    match_id_column,
    match_text_column,
)
from medimg_bench.datasets.cxr.labels import NIH_PATHOLOGIES
from medimg_bench.models.predictions import AnswersFromFile, FramePredictions, ScoresFromFile
from tests.conftest import SHARED_DATA

CLASSES = ["nodule", "effusion", "cardiomegaly"]
IDS = ["a1", "b2", "c3", "d4"]
RNG = np.random.default_rng(3)
SCORES = RNG.random((len(IDS), len(CLASSES))).round(4)


class _Data:
    """What a predictions reader is bound to: class names, ids, a manifest."""

    def __init__(self, classes: list[str], ids: list[str], **columns: list[Any]) -> None:
        self.classes, self.ids, self.multilabel = classes, ids, True
        self.manifest = pd.DataFrame({"id": ids, **columns})
        self.pixels = True

    def skip_pixels(self) -> None:
        self.pixels = False


# -- readers: each writes a table with the given column names and returns what it read ----------------
def _scores(tmp: Path, names: dict[str, str], order: list[str], extra: dict[str, list] | None = None) -> Any:
    table = {names["id"]: IDS, **{names[c]: SCORES[:, j] for j, c in enumerate(CLASSES)}, **(extra or {})}
    path = tmp / "scores.csv"
    pd.DataFrame(table)[[names.get(k, k) for k in order]].to_csv(path, index=False)
    model = ScoresFromFile(path)
    model.bind_dataset(_Data(CLASSES, IDS))
    return np.stack([model.scores[i] for i in IDS])


def _frames(tmp: Path, names: dict[str, str], order: list[str], extra: dict[str, list] | None = None) -> Any:
    table = {names["video"]: ["v1"] * 4, names["frame"]: [0, 25, 50, 75],
             **{names[c]: SCORES[:, j] for j, c in enumerate(CLASSES)}, **(extra or {})}
    path = tmp / "frames.csv"
    pd.DataFrame(table)[[names.get(k, k) for k in order]].to_csv(path, index=False)
    model = FramePredictions(path)
    model.bind_dataset(_Data(CLASSES, IDS))
    return np.stack([model.scores[("v1", f)] for f in (0, 25, 50, 75)])


TEXTS = ["the heart is normal in size", "small left effusion", "no acute disease", "a nodule in the right apex"]
REFS = ["heart size is normal and the lungs are clear", "there is a small effusion on the left side",
        "no acute cardiopulmonary process is seen", "there is a nodule in the right upper lobe"]


def _answers(tmp: Path, names: dict[str, str], order: list[str], extra: dict[str, list] | None = None) -> Any:
    table = {names["id"]: IDS, names["text"]: TEXTS, names["reference"]: REFS, **(extra or {})}
    path = tmp / "answers.csv"
    pd.DataFrame(table)[[names.get(k, k) for k in order]].to_csv(path, index=False)
    model = AnswersFromFile(path)
    model.bind_dataset(_Data([], IDS, report=REFS))
    return [model.answers[i] for i in IDS]


LABELS = np.array([[1, 0, 0], [0, 1, 1], [0, 0, 1], [1, 1, 0]])


def _label_csv(tmp: Path, names: dict[str, str], order: list[str], extra: dict[str, list] | None = None) -> Any:
    from PIL import Image

    from medimg_bench.datasets import create

    (tmp / "img").mkdir(exist_ok=True)
    for i in range(len(IDS)):
        Image.fromarray(np.full((4, 4), 50 * i, np.uint8)).save(tmp / "img" / f"{i}.png")
    table = {"path": [f"img/{i}.png" for i in range(len(IDS))],
             **{names[c]: LABELS[:, j] for j, c in enumerate(CLASSES)}, **(extra or {})}
    pd.DataFrame(table)[["path", *[names.get(k, k) for k in order]]].to_csv(tmp / "labels.csv", index=False)
    label_columns = [names[c] for c in order if c in CLASSES] + list(extra or {})
    ds = create("csv", tmp, label_columns=label_columns, classes=CLASSES)
    return np.stack([ds[i]["label"].numpy() for i in range(len(IDS))])


def _reference_reports(tmp: Path, names: dict[str, str], order: list[str], extra: dict[str, list] | None = None
                       ) -> Any:
    from medimg_bench.datasets import create

    ids = [f"CXR{i}_IM-{i}" for i in range(len(IDS))]
    table = {names["id"]: ids, names["text"]: REFS, **(extra or {})}
    pd.DataFrame(table)[[names.get(k, k) for k in order]].to_csv(tmp / "gts.csv", index=False)
    ds = create("iu_xray", tmp, split="test", layout="reports_csv")
    return [ds.manifest.set_index("id").loc[i, "report"] for i in ids]


@dataclass
class Reader:
    read: Callable[..., Any]
    base: dict[str, str]  # role -> column name as a plain table names it
    renamed: dict[str, str]  # the same roles, named otherwise (case, punctuation, affixes)
    decoy: dict[str, list]  # an extra column that makes the set ambiguous
    candidates: list[str]  # the names the refusal must list


_CLS = {c: c for c in CLASSES}
READERS = {
    "class_scores": Reader(
        _scores, {"id": "id", **_CLS},
        {"id": "Image Index", "nodule": "prob_Nodule", "effusion": "Effusion_prob", "cardiomegaly": "SCORE-cardiomegaly"},
        {"nodule_score": [0.1] * 4}, ["nodule", "nodule_score"]),
    "phase_frames": Reader(
        _frames, {"video": "video", "frame": "frame", **_CLS},
        {"video": "Video_ID", "frame": "Frame Index", "nodule": "p_nodule", "effusion": "EFFUSION",
         "cardiomegaly": "cardiomegaly_logit"},
        {"frame_index": [0, 25, 50, 75]}, ["frame", "frame_index"]),
    "reports_answers": Reader(
        _answers, {"id": "id", "text": "generated", "reference": "report"},
        {"id": "Sample-ID", "text": "Prediction", "reference": "Ground Truth"},
        {"output": ["x"] * 4}, ["generated", "output"]),
    "reference_reports": Reader(
        _reference_reports, {"id": "study_id", "text": "report"}, {"id": "Study ID", "text": "Reference"},
        {"REPORT": ["x"] * 4}, ["report", "REPORT"]),
    "label_csv": Reader(
        _label_csv, {**_CLS},
        {"nodule": "Nodule", "effusion": "effusion_label", "cardiomegaly": "CARDIOMEGALY"},
        {"NODULE": [0] * 4}, ["nodule", "NODULE"]),
}
READERS["label_csv"].renamed["effusion"] = "Effusion"


def _orders(reader: Reader) -> list[list[str]]:
    roles = list(reader.base)
    shuffled = roles[:]
    random.Random(7).shuffle(shuffled)
    return [roles, roles[::-1], shuffled]


@pytest.mark.parametrize("name", sorted(READERS))
def test_permuted_and_renamed_columns_read_the_same(tmp_path, name):
    reader = READERS[name]
    want = reader.read(tmp_path, reader.base, list(reader.base))
    for order in _orders(reader):
        for names in (reader.base, reader.renamed):
            got = reader.read(tmp_path, names, order)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=f"{name} {names} {order}")


@pytest.mark.parametrize("name", sorted(READERS))
def test_decoy_columns_are_refused_listing_the_candidates(tmp_path, name):
    reader = READERS[name]
    order = [*reader.base, *reader.decoy]
    with pytest.raises(ValueError, match="ambiguous") as err:
        reader.read(tmp_path, reader.base, order, reader.decoy)
    for candidate in reader.candidates:
        assert repr(candidate) in str(err.value), (candidate, str(err.value))


def test_values_are_what_was_written(tmp_path):
    """The readers' values are the table's, not merely equal to each other."""
    np.testing.assert_allclose(_scores(tmp_path, READERS["class_scores"].renamed, list(READERS["class_scores"].base)),
                               SCORES.astype(np.float32))
    assert _answers(tmp_path, READERS["reports_answers"].base, ["id", "reference", "text"]) == TEXTS
    np.testing.assert_array_equal(_label_csv(tmp_path, _CLS, CLASSES[::-1]), LABELS)


# -- the rule itself ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("column", "key"), [("Image Index", "image_index"), ("Pleural_Thickening", "pleural_thickening"),
                                             ("  Prob-Nodule ", "prob_nodule")])
def test_column_key(column, key):
    assert column_key(column) == key


@pytest.mark.parametrize("affixed", ["prob_nodule", "nodule_prob", "score_nodule", "pred_nodule", "p_nodule",
                                     "Nodule_Probability", "logit_nodule", "nodule_score"])
def test_score_affixes(affixed):
    assert match_class_columns([affixed, "effusion"], ["nodule", "effusion"], where="t") == [affixed, "effusion"]


def test_ids_by_name_never_by_position():
    assert match_id_column(["prob_a", "Image Index"], where="t") == "Image Index"
    assert match_id_column(["study_id", "dicom_id", "report"], where="t") == "dicom_id"
    with pytest.raises(ValueError, match=r"no id column found.*columns are \['case', 'a'\]"):
        match_id_column(["case", "a"], where="t")  # the first column is not taken because it is first
    with pytest.raises(ValueError, match=r"several id columns \['ID', 'id'\]"):
        match_id_column(["ID", "id", "a"], where="t")


@pytest.mark.parametrize(("columns", "text"), [
    (["id", "report", "generated"], "generated"),
    (["id", "generated", "report"], "generated"),
    (["id", "report"], "report"),
    (["id", "answer", "gt_answer"], "answer"),
    (["id", "Reference", "Model Output"], "Model Output"),
])
def test_text_column_by_name(columns, text):
    assert match_text_column(columns, where="t", exclude=("id",)) == text


@pytest.mark.parametrize(("columns", "listed"), [
    (["id", "generated", "prediction"], ["generated", "prediction"]),
    (["id", "text", "report"], ["text", "report"]),
])
def test_two_candidate_text_columns_are_refused(columns, listed):
    with pytest.raises(ValueError, match="ambiguous") as err:
        match_text_column(columns, where="t", exclude=("id",))
    assert str(listed) in str(err.value)


def test_equals_reference_counts_long_references_only():
    refs = {"a": "yes", "b": "a nodule in the right apex", "c": "small left pleural effusion seen"}
    assert equals_reference({"a": "yes", "b": "A nodule in  the right apex", "c": "no"}, refs) == (1, 2)


@pytest.mark.parametrize(("values", "k", "base"), [
    ([0, 1, 2], 7, 0), ([1, 2, 7], 7, 1), ([0, 6], 7, 0), ([7], 7, 1), ([], 7, 0),
])
def test_index_base_detected(values, k, base):
    assert index_base(values, k, where="t") == base


@pytest.mark.parametrize(("values", "k", "given", "problem"), [
    ([1, 2, 6], 7, "auto", r"fit both 0..6 and 1..7.*index_base=0 or .*index_base=1"),
    ([0, 7], 7, "auto", "fit neither"),
    ([-1, 2], 7, "auto", "fit neither"),
    ([0, 3], 7, 1, r"outside 1..7"),
    ([7], 7, 0, r"outside 0..6"),
    ([1], 7, "two", "must be 0, 1 or auto"),
])
def test_index_base_refused(values, k, given, problem):
    with pytest.raises(ValueError, match=problem):
        index_base(values, k, where="t", given=given)


# -- the examples -------------------------------------------------------------------------------
def test_reports_id_report_generated_scores_generated(tmp_path):
    """Issue #35: ``id, report, generated`` was scored on ``report`` (BLEU 1.000)."""
    from medimg_bench.metrics.text.nlg import bleu_scores

    path = tmp_path / "reports.csv"
    pd.DataFrame({"id": IDS, "report": REFS, "generated": TEXTS}).to_csv(path, index=False)
    model = AnswersFromFile(path)
    model.bind_dataset(_Data([], IDS, report=REFS))
    assert model.text_column == "generated"
    hyps = [model.answers[i] for i in IDS]
    assert hyps == TEXTS
    assert bleu_scores(hyps, REFS)[0][3] < 0.5 and bleu_scores(REFS, REFS)[0][3] == pytest.approx(1.0)


def test_a_text_column_equal_to_the_reference_is_refused(tmp_path):
    path = tmp_path / "reports.csv"
    pd.DataFrame({"id": IDS, "report": REFS}).to_csv(path, index=False)
    model = AnswersFromFile(path)
    with pytest.raises(ValueError, match=r"'report' equals the dataset's reference 'report' for 4 of 4 .*"
                                         r"model.options.text_column"):
        model.bind_dataset(_Data([], IDS, report=REFS))
    named = AnswersFromFile(path, text_column="report")  # named explicitly: the user's choice
    named.bind_dataset(_Data([], IDS, report=REFS))
    assert named.answers["a1"] == REFS[0]


def _phase_table(pred: np.ndarray, classes: list[str]) -> dict[str, Any]:
    scores = np.eye(len(classes))[pred] * 0.8 + 0.2 / len(classes)
    return {"video": ["video41"] * len(pred), "frame": 25 * np.arange(len(pred)),
            **{c: scores[:, k] for k, c in enumerate(classes)}}


def test_phase_score_columns_permuted_and_recased_give_the_same_jaccard(tmp_path):
    """Issue #35: columns in another order and case fell back to file order (Jaccard 0.360, not 0.557)."""
    from medimg_bench.datasets.video.cholec80 import CHOLEC80_PHASES
    from medimg_bench.metrics.phase_challenges import cholec80_matlab_eval
    from tests.metrics._phase_corpus import cholec80_corpus

    classes = list(CHOLEC80_PHASES)
    gt, pred = cholec80_corpus(1, seed=8)[0]
    want = cholec80_matlab_eval([pred], [gt], fps=1.0).jaccard
    table = pd.DataFrame(_phase_table(pred, classes))
    shuffled = ["frame", *[c for c in classes[::-1]], "video"]
    table = table[shuffled].rename(columns={c: c.upper() for c in classes})
    table.to_csv(tmp_path / "p.csv", index=False)
    model = FramePredictions(tmp_path / "p.csv", num_classes=len(classes))
    model.bind_dataset(_Data(classes, []))
    got = np.array([int(np.argmax(model.scores[("video41", 25 * s)])) for s in range(len(pred))])
    np.testing.assert_array_equal(got, pred)
    assert cholec80_matlab_eval([got], [gt], fps=1.0).jaccard == pytest.approx(want, abs=1e-12)


def _phase_numbers(tmp_path: Path, numbers: list[int], **kw: Any) -> FramePredictions:
    path = tmp_path / "phases.csv"
    pd.DataFrame({"video": ["v"] * len(numbers), "frame": range(len(numbers)), "phase": numbers}).to_csv(path, index=False)
    return FramePredictions(path, num_classes=7, **kw)


def test_one_based_phases_without_the_last_phase_are_read_right_or_refused(tmp_path):
    """Issue #35: 1-based numbers were read as 0-based whenever the last phase never occurs."""
    one_based = [1, 1, 2, 3, 3, 4, 5, 6]  # phase 7 never occurs
    with pytest.raises(ValueError, match=r"phases.csv.*neither 0 nor 7 occurs.*model.options.index_base=0 or "
                                         r"model.options.index_base=1"):
        _phase_numbers(tmp_path, one_based)
    model = _phase_numbers(tmp_path, one_based, index_base=1)
    assert [int(model.scores[("v", f)]) for f in range(8)] == [n - 1 for n in one_based]
    model = _phase_numbers(tmp_path, [*one_based, 7])  # 7 present, 0 absent: 1-based
    assert [int(model.scores[("v", f)]) for f in range(9)] == [n - 1 for n in one_based] + [6]
    model = _phase_numbers(tmp_path, [0, *one_based])  # 0 present: 0-based
    assert [int(model.scores[("v", f)]) for f in range(9)] == [0, *one_based]


def test_prob_columns_of_the_chexnet_layout_are_matched(tmp_path):
    """Issue #35 / #37: ``Image Index`` (file names) + ``prob_<Finding>`` columns."""
    ids = ["00000010_000", "00000015_000"]
    scores = RNG.random((2, len(NIH_PATHOLOGIES))).round(5)
    header = {"Image Index": [f"{i}.png" for i in ids],
              **{f"prob_{c.replace(' ', '_')}": scores[:, k] for k, c in enumerate(NIH_PATHOLOGIES)}}
    table = pd.DataFrame(header)
    table = table[["Image Index", *list(table.columns[1:])[::-1]]]
    table.to_csv(tmp_path / "preds.csv", index=False)
    model = ScoresFromFile(tmp_path / "preds.csv")
    model.bind_dataset(_Data(list(NIH_PATHOLOGIES), ids))
    assert model.id_column == "Image Index"
    for n, sid in enumerate(ids):
        np.testing.assert_allclose(model.scores[sid], scores[n].astype(np.float32))
    assert model.check_ids(ids) == 0


def test_the_chexnet_reproduction_file_is_matched():
    """The published file itself (``../shared/data/nih_cxr14_chexnet/preds.csv``), columns as shipped."""
    path = SHARED_DATA / "nih_cxr14_chexnet" / "preds.csv"
    if not path.exists():
        pytest.skip(f"{path} is absent (a fresh clone has no ../shared)")
    raw = pd.read_csv(path, dtype={"Image Index": str})
    ids = raw["Image Index"].str.removesuffix(".png").tolist()
    model = ScoresFromFile(path)
    model.bind_dataset(_Data(list(NIH_PATHOLOGIES), ids))
    assert len(model.scores) == len(raw) == 22433
    by_class = dict(zip(model.classes, model.columns))
    assert by_class["Effusion"] == "prob_Effusion" and by_class["Pleural_Thickening"] == "prob_Pleural_Thickening"
    k = model.classes.index("Hernia")
    np.testing.assert_allclose([model.scores[i][k] for i in ids[:50]], raw["prob_Hernia"].to_numpy()[:50], rtol=1e-6)


def test_label_csv_option_columns_found_up_to_case(tmp_path):
    """``dataset=csv``: the columns the options name are found in the CSV's own spelling."""
    from PIL import Image

    from medimg_bench.datasets import create

    (tmp_path / "img").mkdir()
    for i in range(3):
        Image.fromarray(np.full((4, 4), 60 * i, np.uint8)).save(tmp_path / "img" / f"{i}.png")
    pd.DataFrame({"Image Path": [f"img/{i}.png" for i in range(3)], "Patient-ID": ["p1", "p1", "p2"],
                  "Nodule": [1, 0, 0], "EFFUSION": [0, 1, 1]}).to_csv(tmp_path / "labels.csv", index=False)
    ds = create("csv", tmp_path, image_column="image_path", patient_column="patient_id",
                label_columns=["effusion", "nodule"])
    assert ds.classes == ["effusion", "nodule"]
    assert ds.manifest["patient_id"].tolist() == ["p1", "p1", "p2"]
    np.testing.assert_array_equal(np.stack([ds[i]["label"].numpy() for i in range(3)]), [[0, 1], [1, 0], [1, 0]])
    pd.DataFrame({"path": ["img/0.png"], "Nodule": [1], "nodule": [0]}).to_csv(tmp_path / "two.csv", index=False)
    with pytest.raises(ValueError, match=r"several 'NODULE' columns \['Nodule', 'nodule'\]"):
        create("csv", tmp_path, csv="two.csv", label_columns=["NODULE", "effusion"])
