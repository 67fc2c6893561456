"""Bad input for stored predictions (``model=predictions``): generated corruptions of a valid
answer file (JSONL) and of a valid score table (CSV / Parquet), each put on the first, a middle
and the last line. Every corruption must be refused when the file is loaded, by a ``ValueError``
that names the file and the line (score tables: the line, or Parquet row, and the column); a
missing prediction must fail its sample only, naming it; harmless variants (blank lines, CRLF,
extra keys, columns in another order) must give the clean file's numbers.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

import medimg_bench as mb
from medimg_bench.models.predictions import AnswersFromFile, ScoresFromFile

N = 8  # synthetic_vqa n=4: 8 questions (2 test images x 4); synthetic_cxr: 8 images
POSITIONS = {"first": 0, "middle": N // 2, "last": N - 1}


@pytest.fixture(scope="module")
def vqa(tmp_path_factory):
    ds = mb.create_dataset("synthetic_vqa", cache_dir=tmp_path_factory.mktemp("vqa"), n=4, size=16)
    assert len(ds) == N
    return ds


@pytest.fixture(scope="module")
def cxr(tmp_path_factory):
    ds = mb.create_dataset("synthetic_cxr", cache_dir=tmp_path_factory.mktemp("cxr"), split=None, n=N, size=16)
    assert len(ds) == N
    return ds


def _records(ds) -> list[dict]:
    return [{"id": sid, "text": str(ds[i]["answer"]).capitalize() + "."} for i, sid in enumerate(ds.ids)]


# -- answer files: one corrupted line ------------------------------------------------------------------
def _set(key: str, value) -> Callable[[dict, list[dict]], str]:
    return lambda rec, _all: json.dumps({**rec, key: value})


def _drop(key: str) -> Callable[[dict, list[dict]], str]:
    return lambda rec, _all: json.dumps({k: v for k, v in rec.items() if k != key})


LINE_CORRUPTIONS: dict[str, tuple[Callable[[dict, list[dict]], str], str]] = {
    "text_null": (_set("text", None), "null"),
    "text_list": (_set("text", ["yes"]), "must be a string"),
    "text_object": (_set("text", {"answer": "yes"}), "must be a string"),
    "text_number": (_set("text", 1), "must be a string"),
    "text_bool": (_set("text", True), "must be a string"),
    "text_empty": (_set("text", ""), "blank"),
    "text_spaces": (_set("text", " \t "), "blank"),
    "text_None_string": (_set("text", "None"), "blank"),
    "text_nan_string": (_set("text", "NaN"), "blank"),
    "text_null_string": (_set("text", "null"), "blank"),
    "text_nan_literal": (lambda rec, _a: json.dumps(rec).replace(json.dumps(rec["text"]), "NaN"), "must be a string"),
    "text_missing": (_drop("text"), "no ['text'] key"),
    "id_missing": (_drop("id"), "no ['id'] key"),
    "id_null": (_set("id", None), "the id must be"),
    "id_float": (_set("id", 3.0), "the id must be"),
    "id_bool": (_set("id", False), "the id must be"),
    "id_list": (_set("id", ["a"]), "the id must be"),
    "id_empty": (_set("id", ""), "the id is empty"),
    "id_duplicate": (lambda rec, all_: json.dumps({**rec, "id": all_[1 if rec is all_[0] else 0]["id"]}), "duplicate id"),
    "key_twice": (lambda rec, _a: json.dumps(rec)[:-1] + f', "id": {json.dumps(rec["id"])}}}', "given twice"),
    "truncated_json": (lambda rec, _a: json.dumps(rec)[:-3], "not a JSON object"),
    "json_array": (lambda rec, _a: json.dumps([rec["id"], rec["text"]]), "expected a JSON object"),
    "json_string": (lambda rec, _a: json.dumps(rec["text"]), "expected a JSON object"),
    "json_number": (lambda rec, _a: "12", "expected a JSON object"),
    "invalid_utf8": (lambda rec, _a: json.dumps(rec)[:-1] + ', "note": "\udcff"}', "not UTF-8"),
}


@pytest.mark.parametrize("position", list(POSITIONS))
@pytest.mark.parametrize("kind", list(LINE_CORRUPTIONS))
def test_corrupt_answer_line_is_refused_naming_file_and_line(vqa, tmp_path, kind, position):
    corrupt, problem = LINE_CORRUPTIONS[kind]
    records = _records(vqa)
    k = POSITIONS[position]
    lines = [json.dumps(r) for r in records]
    lines[k] = corrupt(records[k], records)
    path = tmp_path / "predictions.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode("utf-8", errors="surrogateescape"))
    with pytest.raises(ValueError) as e:
        mb.create_model("predictions", root=path)
    msg = str(e.value)
    assert str(path) in msg and f"line {k + 1}" in msg and problem in msg, msg


def test_missing_answer_fails_only_its_sample(vqa, tmp_path):
    records = _records(vqa)
    path = tmp_path / "a.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records[:3] + records[4:]))
    res = mb.evaluate(mb.create_model("predictions", root=path), vqa, task="vqa", progress=False, n_resamples=10)
    assert res.summary["n_failed"] == 1
    err = res.samples.set_index("id").loc[records[3]["id"], "error"]
    err = err if isinstance(err, str) else err.dropna().iloc[0]
    assert records[3]["id"] in err and str(path) in err


HARMLESS: dict[str, Callable[[list[dict]], str]] = {
    "blank_lines": lambda rs: "\n\n".join(json.dumps(r) for r in rs) + "\n\n",
    "crlf": lambda rs: "".join(json.dumps(r) + "\r\n" for r in rs),
    "extra_keys": lambda rs: "".join(json.dumps({**r, "question": "?", "score": 0.5}) + "\n" for r in rs),
    "no_final_newline": lambda rs: "\n".join(json.dumps(r) for r in rs),
    "rot0_alias": lambda rs: "".join(json.dumps({**r, "id": r["id"] + "#rot0"}) + "\n" for r in rs),
    "shuffled": lambda rs: "".join(json.dumps(r) + "\n" for r in rs[::-1]),
}


@pytest.mark.parametrize("kind", list(HARMLESS))
def test_harmless_variants_give_the_clean_numbers(vqa, tmp_path, kind):
    records = _records(vqa)
    path = tmp_path / "a.jsonl"
    path.write_text(HARMLESS[kind](records))
    model = AnswersFromFile(path)
    assert model.answers == {r["id"]: r["text"] for r in records}
    res = mb.evaluate(model, vqa, task="vqa", progress=False, n_resamples=10)
    assert res.summary["n_failed"] == 0
    assert res.summary["metrics"]["accuracy"]["mean"]["value"] == pytest.approx(1.0)


# -- answer tables (CSV / Parquet, e.g. generated reports): one corrupted row ------------------------
ANSWER_ROW_CORRUPTIONS: dict[str, tuple[Callable[[list[dict], int], None], str]] = {
    "text_empty": (lambda rs, k: rs[k].update(text=""), "blank"),
    "text_None_string": (lambda rs, k: rs[k].update(text="None"), "blank"),
    "text_null": (lambda rs, k: rs[k].update(text=None), "null"),
    "id_empty": (lambda rs, k: rs[k].update(id=""), "the id is empty"),
    "id_duplicate": (lambda rs, k: rs[k].update(id=rs[1 if k == 0 else 0]["id"]), "duplicate id"),
}


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("position", list(POSITIONS))
@pytest.mark.parametrize("kind", list(ANSWER_ROW_CORRUPTIONS))
def test_corrupt_answer_table_row_is_refused_naming_the_line(vqa, tmp_path, kind, position, fmt):
    corrupt, problem = ANSWER_ROW_CORRUPTIONS[kind]
    records = _records(vqa)
    k = POSITIONS[position]
    corrupt(records, k)
    path = tmp_path / f"predictions.{fmt}"
    table = pd.DataFrame(records)
    if fmt == "csv":
        table.to_csv(path, index=False)  # a null is written as an empty cell
    else:
        table.to_parquet(path)
    where = {"csv": f"line {k + 2}", "parquet": f"row {k}"}[fmt]
    if kind == "id_duplicate" and k == 0:
        where = {"csv": "line 3", "parquet": "row 1"}[fmt]  # the second occurrence
    with pytest.raises(ValueError) as e:
        mb.create_model("predictions", root=path, kind="answers")
    msg = str(e.value)
    assert str(path) in msg and where in msg and (problem in msg or (fmt == "csv" and "blank" in msg)), msg


# -- score tables: one corrupted cell or row -----------------------------------------------------------
def _table(ds) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"id": list(ds.ids), **{c: rng.random(N) for c in ds.classes}})


CELL_CORRUPTIONS: dict[str, tuple[object, str]] = {
    "blank": (np.nan, "blank is not a finite number"),
    "text": ("high", "'high' is not a finite number"),
    "inf": (np.inf, "inf is not a finite number"),
    "logit": (2.5, "2.5 is outside [0, 1]"),
    "negative": (-0.25, "-0.25 is outside [0, 1]"),
    "percent": (87.0, "87.0 is outside [0, 1]"),
}


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("position", list(POSITIONS))
@pytest.mark.parametrize("kind", list(CELL_CORRUPTIONS))
def test_corrupt_score_cell_is_refused_naming_line_and_column(cxr, tmp_path, kind, position, fmt):
    value, problem = CELL_CORRUPTIONS[kind]
    table = _table(cxr).astype({c: object for c in cxr.classes})
    k, col = POSITIONS[position], cxr.classes[1]
    table.loc[k, col] = value
    path = tmp_path / f"predictions.{fmt}"
    if fmt == "csv":
        table.to_csv(path, index=False)
    else:
        numeric = [c for c in cxr.classes if kind != "text" or c != col]  # a word makes a string column
        table.astype({c: float for c in numeric}).astype({c: str for c in cxr.classes if c not in numeric}).to_parquet(path)
    where = f"line {k + 2}" if fmt == "csv" else f"row {k}"
    with pytest.raises(ValueError) as e:
        ScoresFromFile(path, dataset_classes=cxr.classes, multilabel=True)
    msg = str(e.value)
    assert str(path) in msg and f"{where} (id {cxr.ids[k]!r})" in msg and repr(col) in msg and problem in msg, msg


def _dup_id(t: pd.DataFrame, k: int) -> tuple[pd.DataFrame, int]:
    """Row ``k`` given the id of another row; the line where the id comes the second time."""
    ids = list(t["id"])
    other = 1 if k == 0 else 0
    ids[k] = ids[other]
    return t.assign(id=ids), max(k, other) + 2


def _blank_id(t: pd.DataFrame, k: int) -> tuple[pd.DataFrame, int]:
    return t.assign(id=[None if i == k else v for i, v in enumerate(t["id"])]), k + 2


ROW_CORRUPTIONS: dict[str, tuple[Callable[[pd.DataFrame, int], tuple[pd.DataFrame, int]], str]] = {
    "duplicate_id": (_dup_id, "duplicate id"),
    "blank_id": (_blank_id, "blank id"),
}


@pytest.mark.parametrize("position", list(POSITIONS))
@pytest.mark.parametrize("kind", list(ROW_CORRUPTIONS))
def test_corrupt_score_row_is_refused_naming_the_line(cxr, tmp_path, kind, position):
    corrupt, problem = ROW_CORRUPTIONS[kind]
    table, line = corrupt(_table(cxr), POSITIONS[position])
    path = tmp_path / "predictions.csv"
    table.to_csv(path, index=False)
    with pytest.raises(ValueError) as e:
        ScoresFromFile(path, dataset_classes=cxr.classes)
    msg = str(e.value)
    assert str(path) in msg and f"line {line}" in msg and problem in msg, msg


COLUMN_CORRUPTIONS: dict[str, tuple[Callable[[pd.DataFrame, list[str]], pd.DataFrame], str]] = {
    "class_missing": (lambda t, cs: t.drop(columns=[cs[1]]), "no column for class(es)"),
    "class_missing_fold_added": (lambda t, cs: t.drop(columns=[cs[1]]).assign(fold=np.arange(N) % 2),
                                 "['fold'] are not classes"),
    "index_column": (lambda t, cs: t.assign(**{"Unnamed: 0": np.arange(N)}), "['Unnamed: 0'] are not classes"),
    "positional_names": (lambda t, cs: t.rename(columns={c: f"score_{j}" for j, c in enumerate(cs)}),
                         "taken in order only when model.options.classes"),
    "duplicate_class": (lambda t, cs: t.rename(columns={cs[1]: cs[0]}), "named twice"),
}


@pytest.mark.parametrize("kind", list(COLUMN_CORRUPTIONS))
def test_columns_that_do_not_name_the_classes_are_refused(cxr, tmp_path, kind):
    corrupt, problem = COLUMN_CORRUPTIONS[kind]
    path = tmp_path / "predictions.csv"
    corrupt(_table(cxr), list(cxr.classes)).to_csv(path, index=False)
    with pytest.raises(ValueError) as e:
        ScoresFromFile(path, dataset_classes=cxr.classes)
    msg = str(e.value)
    assert str(path) in msg and problem in msg, msg
    assert kind == "duplicate_class" or str(list(cxr.classes)) in msg, msg  # both sets listed


@pytest.mark.parametrize("order", ["reversed", "alphabetical", "id_last"])
def test_columns_in_another_order_give_the_same_numbers(cxr, tmp_path, order):
    table = _table(cxr)
    table.to_csv(tmp_path / "clean.csv", index=False)
    cols = {"reversed": ["id", *cxr.classes[::-1]], "alphabetical": ["id", *sorted(cxr.classes)],
            "id_last": [*cxr.classes, "id"]}[order]
    table[cols].to_csv(tmp_path / "moved.csv", index=False)
    clean = ScoresFromFile(tmp_path / "clean.csv", dataset_classes=cxr.classes)
    moved = ScoresFromFile(tmp_path / "moved.csv", dataset_classes=cxr.classes)
    ids = list(cxr.ids)
    assert np.array_equal(clean.predict({"id": ids})["probs"].numpy(), moved.predict({"id": ids})["probs"].numpy())

