"""model=predictions score tables: columns matched to the dataset's classes by name (issue #18
item 4, #19 item 3), values checked when loaded (#19 item 13: logits, blanks, text, sums)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

import medimg_bench as mb
from medimg_bench.builders import build_model
from medimg_bench.models.predictions import ScoresFromFile


@pytest.fixture(scope="module")
def cxr(tmp_path_factory):
    return mb.create_dataset("synthetic_cxr", cache_dir=tmp_path_factory.mktemp("cxr"), split="test", n=60, size=16)


def _scores(ds, seed=0):
    """Scores that rank the labels well but not perfectly, one column per class."""
    rng = np.random.default_rng(seed)
    labels = ds.manifest[list(ds.classes)].to_numpy(dtype=float)
    return pd.DataFrame({c: np.clip(0.3 * labels[:, j] + 0.7 * rng.random(len(ds)), 0, 1)
                         for j, c in enumerate(ds.classes)}), labels


def _auroc(model, ds, **kw):
    res = mb.evaluate(model, ds, task="classification", metrics={"auroc": {}}, progress=False, n_resamples=10, **kw)
    assert res.summary["n_failed"] == 0
    return {c: res.summary["metrics"]["auroc"]["per_class"][c]["value"] for c in ds.classes}


def test_columns_in_another_order_are_used_by_name(cxr, tmp_path):
    scores, labels = _scores(cxr)
    expected = {c: roc_auc_score(labels[:, j], scores[c]) for j, c in enumerate(cxr.classes)}
    table = scores[sorted(cxr.classes)]  # alphabetical, as DataFrame.pivot writes them
    assert list(table.columns) != list(cxr.classes)
    table.insert(0, "id", cxr.ids)
    table.to_csv(tmp_path / "predictions.csv", index=False)
    cfg = {"name": "predictions", "options": {"root": str(tmp_path), "multilabel": True}}
    built = build_model(cfg, cxr)  # the configuration layer's path: bound to the dataset when built
    assert built.columns == list(cxr.classes)
    got = _auroc(built, cxr)
    assert got == pytest.approx(expected, abs=1e-6)
    # the Python API path: evaluate() binds the model to the dataset it scores
    assert _auroc(mb.create_model("predictions", root=tmp_path), cxr) == pytest.approx(expected, abs=1e-6)


def test_names_equal_up_to_case_and_punctuation_match(cxr, tmp_path):
    scores, labels = _scores(cxr, seed=1)
    table = scores.rename(columns={c: c.upper() + " " for c in cxr.classes})[[c.upper() + " " for c in reversed(cxr.classes)]]
    table.insert(0, "id", cxr.ids)
    table.to_csv(tmp_path / "p.csv", index=False)
    model = ScoresFromFile(tmp_path / "p.csv", dataset_classes=cxr.classes)
    assert model.columns == [c.upper() + " " for c in cxr.classes]
    got = _auroc(model, cxr)
    assert got == pytest.approx({c: roc_auc_score(labels[:, j], scores[c]) for j, c in enumerate(cxr.classes)})


def test_a_missing_class_with_an_extra_numeric_column_is_refused(cxr, tmp_path):
    scores, _ = _scores(cxr)
    table = scores.drop(columns=["effusion"])
    table.insert(0, "id", cxr.ids)
    table["fold"] = np.arange(len(cxr)) % 5  # was scored as 'effusion' (AUROC 0.5), silently
    table.to_csv(tmp_path / "predictions.csv", index=False)
    with pytest.raises(ValueError, match=r"no column for class\(es\) \['effusion'\].*\['fold'\] are not classes") as e:
        build_model({"name": "predictions", "options": {"root": str(tmp_path)}}, cxr)
    assert "predictions.csv" in str(e.value) and str(list(cxr.classes)) in str(e.value)


def test_an_extra_column_is_refused_even_with_every_class(cxr, tmp_path):
    scores, _ = _scores(cxr)
    scores.insert(0, "id", cxr.ids)
    scores["Unnamed: 0"] = np.arange(len(cxr))  # DataFrame.to_csv's index
    scores.to_csv(tmp_path / "p.csv", index=False)
    with pytest.raises(ValueError, match=r"\['Unnamed: 0'\] are not classes.*model.options.classes"):
        ScoresFromFile(tmp_path / "p.csv", dataset_classes=cxr.classes)
    # `classes` picks the columns to use; they carry the class names, so the order does not matter
    model = ScoresFromFile(tmp_path / "p.csv", classes=list(reversed(cxr.classes)), dataset_classes=cxr.classes)
    assert model.columns == list(cxr.classes)


def test_unnamed_columns_are_taken_in_order_only_when_listed(cxr, tmp_path):
    scores, labels = _scores(cxr, seed=2)
    table = pd.DataFrame({"id": cxr.ids, **{f"score_{j}": scores[c] for j, c in enumerate(cxr.classes)}})
    table.to_csv(tmp_path / "p.csv", index=False)
    with pytest.raises(ValueError, match=r"no column for class.*score_0.*taken in order only when model.options.classes"):
        ScoresFromFile(tmp_path / "p.csv", dataset_classes=cxr.classes)
    model = ScoresFromFile(tmp_path / "p.csv", classes=["score_0", "score_1", "score_2"], dataset_classes=cxr.classes)
    got = _auroc(model, cxr)
    assert got == pytest.approx({c: roc_auc_score(labels[:, j], scores[c]) for j, c in enumerate(cxr.classes)})
    with pytest.raises(ValueError, match="2 score columns for 3 classes"):
        ScoresFromFile(tmp_path / "p.csv", classes=["score_0", "score_1"], dataset_classes=cxr.classes)
    # names that are partly class names are ambiguous: neither by name nor in order
    table.rename(columns={"score_1": "effusion"}).to_csv(tmp_path / "q.csv", index=False)
    with pytest.raises(ValueError, match="do not match the classes by name"):
        ScoresFromFile(tmp_path / "q.csv", classes=["score_0", "effusion", "score_2"], dataset_classes=cxr.classes)


def test_an_unbound_table_without_classes_is_refused_not_guessed(cxr, tmp_path):
    scores, _ = _scores(cxr)
    scores.insert(0, "id", cxr.ids)
    scores.to_csv(tmp_path / "p.csv", index=False)
    model = ScoresFromFile(tmp_path / "p.csv")
    with pytest.raises(ValueError, match="class names are not known.*bind_dataset"):
        model.predict({"id": cxr.ids[:2]})


def test_logits_are_refused_at_load_naming_file_column_and_row(cxr, tmp_path):
    scores, labels = _scores(cxr, seed=3)
    logits = np.log(scores.clip(1e-3, 1 - 1e-3) / (1 - scores.clip(1e-3, 1 - 1e-3)))
    logits.insert(0, "id", cxr.ids)
    logits.to_csv(tmp_path / "predictions.csv", index=False)
    bad = int(np.flatnonzero((logits[cxr.classes[0]] < 0) | (logits[cxr.classes[0]] > 1))[0])
    with pytest.raises(ValueError) as e:
        build_model({"name": "predictions", "options": {"root": str(tmp_path), "multilabel": True}}, cxr)
    msg = str(e.value)
    assert "predictions.csv" in msg and f"line {bad + 2}" in msg and repr(cxr.classes[0]) in msg
    assert "outside [0, 1]" in msg and "model.options.scores=logits" in msg
    # scores=logits: sigmoid per class for a multi-label task; ECE (needs probabilities) works
    model = build_model({"name": "predictions", "options": {"root": str(tmp_path), "scores": "logits",
                                                             "multilabel": True}}, cxr)
    res = mb.evaluate(model, cxr, task="classification", metrics={"auroc": {}, "ece": {}}, progress=False,
                      n_resamples=20)
    assert res.summary["n_failed"] == 0
    for j, c in enumerate(cxr.classes):
        assert res.summary["metrics"]["auroc"]["per_class"][c]["value"] == pytest.approx(
            roc_auc_score(labels[:, j], logits[c]), abs=1e-6)
    probs = model.predict({"id": cxr.ids[:4]})["probs"].numpy()
    want = 1 / (1 + np.exp(-logits[list(cxr.classes)].to_numpy()[:4]))
    np.testing.assert_allclose(probs, want, rtol=1e-6)


def test_logits_without_the_multilabel_flag_are_refused(cxr, tmp_path):
    pd.DataFrame({"id": cxr.ids, **{c: 2.0 for c in cxr.classes}}).to_csv(tmp_path / "p.csv", index=False)
    with pytest.raises(ValueError, match="multilabel"):
        ScoresFromFile(tmp_path / "p.csv", scores="logits", dataset_classes=cxr.classes)
    with pytest.raises(ValueError, match="scores must be one of"):
        ScoresFromFile(tmp_path / "p.csv", scores="probs", dataset_classes=cxr.classes)


def test_multiclass_logits_get_a_softmax_and_probabilities_must_sum_to_one(tmp_path):
    classes = ["a", "b", "c"]
    x = np.random.default_rng(0).normal(size=(5, 3)) * 3
    ids = [f"s{i}" for i in range(5)]
    pd.DataFrame({"id": ids, **{c: x[:, j] for j, c in enumerate(classes)}}).to_csv(tmp_path / "l.csv", index=False)
    model = ScoresFromFile(tmp_path / "l.csv", scores="logits", multilabel=False, dataset_classes=classes)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(model.predict({"id": ids})["probs"].numpy(), e / e.sum(1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(model.predict({"id": ids})["logits"].numpy(), x, rtol=1e-6)
    p = np.full((5, 3), 0.3)
    pd.DataFrame({"id": ids, **{c: p[:, j] for j, c in enumerate(classes)}}).to_csv(tmp_path / "p.csv", index=False)
    with pytest.raises(ValueError, match=r"line 2 \(id 's0'\): the class probabilities sum to 0.9 \(5 row"):
        ScoresFromFile(tmp_path / "p.csv", multilabel=False, dataset_classes=classes)
    ScoresFromFile(tmp_path / "p.csv", multilabel=True, dataset_classes=classes)  # multi-label: no sum rule


@pytest.mark.parametrize(("cell", "problem"), [("", "blank is not a finite number"),
                                               ("abc", "'abc' is not a finite number"),
                                               ("inf", "inf is not a finite number")])
def test_bad_cells_are_named(tmp_path, cell, problem):
    (tmp_path / "p.csv").write_text(f"id,a,b\nx,0.1,0.2\ny,{cell},0.3\n")
    with pytest.raises(ValueError, match=rf"p.csv' line 3 \(id 'y'\), column 'a': {problem}"):
        ScoresFromFile(tmp_path / "p.csv", dataset_classes=["a", "b"])


@pytest.mark.parametrize(("text", "problem"), [("id,a\nx,0.1\nx,0.2\n", r"line 3: duplicate id 'x' \(first on line 2\)"),
                                               ("id,a\nx,0.1\n,0.2\n", r"line 3: blank id"),
                                               ("id,a\n", "no rows")])
def test_bad_ids_are_named(tmp_path, text, problem):
    (tmp_path / "p.csv").write_text(text)
    with pytest.raises(ValueError, match=problem):
        ScoresFromFile(tmp_path / "p.csv", dataset_classes=["a"])


def test_parquet_rows_are_named_by_index(tmp_path):
    pd.DataFrame({"id": [1, 2], "a": [0.2, 1.5]}).to_parquet(tmp_path / "p.parquet")
    with pytest.raises(ValueError, match=r"row 1 \(id '2'\), column 'a': 1.5 is outside"):
        ScoresFromFile(tmp_path / "p.parquet", dataset_classes=["a"])


def test_the_reading_options_are_part_of_the_fingerprint(cxr, tmp_path):
    scores, _ = _scores(cxr)
    scores.insert(0, "id", cxr.ids)
    scores.to_csv(tmp_path / "p.csv", index=False)
    a = ScoresFromFile(tmp_path / "p.csv", multilabel=True, dataset_classes=cxr.classes)
    b = ScoresFromFile(tmp_path / "p.csv", scores="logits", multilabel=True, dataset_classes=cxr.classes)
    assert a.fingerprint() != b.fingerprint()
