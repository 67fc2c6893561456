"""A UTF-8 byte-order mark (what Windows editors and Excel put first) is read, not refused
(issue #35 item 6: a BOM in JSONL was refused as "not a JSON object"): every JSON / JSONL reader
of the datasets and of stored predictions reads the same records with and without one."""

from __future__ import annotations

import json

import pytest

from medimg_bench.datasets.base import read_manifest
from medimg_bench.datasets.vqa.readers import json_list, load_json, load_jsonl
from medimg_bench.models.predictions.checks import check_csv_header, read_jsonl_objects

ROWS = [{"id": "a", "answer": "yes"}, {"id": "b", "answer": "no"}]
BOM = b"\xef\xbb\xbf"


def _jsonl() -> bytes:
    return "\n".join(json.dumps(r) for r in ROWS).encode() + b"\n"


READERS = {
    "read_manifest.jsonl": (".jsonl", _jsonl, lambda p: read_manifest(p).to_dict("records")),
    "read_manifest.json": (".json", lambda: json.dumps(ROWS).encode(), lambda p: read_manifest(p).to_dict("records")),
    "vqa load_jsonl": (".jsonl", _jsonl, load_jsonl),
    "vqa json_list": (".json", lambda: json.dumps(ROWS).encode(), lambda p: json_list(p, "test", "items")),
    "vqa load_json": (".json", lambda: json.dumps(ROWS).encode(), load_json),
    "predictions read_jsonl_objects": (".jsonl", _jsonl, lambda p: [r for _, r in read_jsonl_objects(p)]),
}


@pytest.mark.parametrize("name", sorted(READERS))
def test_a_bom_is_read(tmp_path, name):
    suffix, content, read = READERS[name]
    plain, marked = tmp_path / f"plain{suffix}", tmp_path / f"bom{suffix}"
    plain.write_bytes(content())
    marked.write_bytes(BOM + content())
    assert read(marked) == read(plain) == ROWS


def test_a_bom_is_not_part_of_the_first_csv_column(tmp_path):
    p = tmp_path / "scores.csv"
    p.write_bytes(BOM + b"id,id\na,b\n")
    with pytest.raises(ValueError, match=r"\['id'\] named twice"):  # the first name is "id", not "\ufeffid"
        check_csv_header(p)
