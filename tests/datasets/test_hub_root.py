"""``dataset.root=hf://OWNER/NAME@REVISION`` against a loopback Hugging Face Hub
(tests/models/hub_server.py): a PathVQA parquet release downloaded through huggingface_hub into
its cache, the resolved commit and every file's SHA-256 in the identity and the run's manifest,
offline mode, a resume across revisions refused, a dropped connection and a corrupted file.

One client process runs every phase (huggingface_hub reads ``HF_ENDPOINT`` at import); the
server's request log, split at the client's phase markers, says what went over the network."""

from __future__ import annotations

import hashlib
import io

import pytest

from tests.models.hub_server import HubServer, run_client

pytest.importorskip("huggingface_hub")
pytest.importorskip("pyarrow")

CLIENT = """
import os
from pathlib import Path
import medimg_bench as mb
from medimg_bench.datasets.base import dataset_identity
from medimg_bench.engine.checkpoint import key_differences
from medimg_bench.hub import HubError
from medimg_bench.models.vlm.base import GenerationResponse, GenerativeAdapter

class Fixed(GenerativeAdapter):
    backend = "fixed"
    def identity(self):
        return {"text": "yes"}
    def _generate(self, requests):
        return [GenerationResponse(text="yes", prompt=r.user) for r in requests]

def attempt(key, fn):
    try:
        out[key] = {"ok": fn()}
    except HubError as exc:
        out[key] = {"error": str(exc), "kind": exc.kind}

def load(rev):
    return mb.create_dataset("pathvqa", root=f"hf://org/pvqa@{rev}", split="test")

mark("first")
ds = load("main")
out["ids"] = ds.ids
out["answers"] = [ds[i]["answer"] for i in range(len(ds))]
out["source"] = ds.hub_source
out["identity"] = dataset_identity(ds)
res = mb.evaluate(Fixed(), ds, task="vqa", progress=False, checkpoint=os.environ["CKPT"], checkpoint_every=1)
out["parts"] = sorted(p.name for p in Path(os.environ["CKPT"]).rglob("part-*"))
res.save(os.environ["RUN"])
out["accuracy"] = res.summary["metrics"]["accuracy"]["mean"]["value"]
mark("again")
out["again_commit"] = load("main").hub_source["commit"]
mark("pinned_old")
old = load(os.environ["C1"])
out["old"] = {"ids": old.ids, "commit": old.hub_source["commit"], "fingerprint": dataset_identity(old)["fingerprint"]}
mark("same_bytes_other_commit")
same = load(os.environ["C3"])
out["same"] = dataset_identity(same)
out["diffs"] = key_differences({"dataset": out["identity"]}, {"dataset": out["same"]})
try:
    mb.evaluate(Fixed(), same, task="vqa", progress=False, checkpoint=os.environ["CKPT"], checkpoint_every=1)
    out["resume_other_revision"] = "accepted"
except Exception as exc:
    out["resume_other_revision"] = f"{type(exc).__name__}: {exc}"
os.environ["HF_HUB_OFFLINE"] = "1"
mark("offline")
out["offline_commit"] = load(os.environ["C2"]).hub_source["commit"]
attempt("offline_missing", lambda: load("v9"))
del os.environ["HF_HUB_OFFLINE"]
mark("errors")
attempt("unknown_revision", lambda: load("v9"))
attempt("unknown_repo", lambda: mb.create_dataset("pathvqa", root="hf://org/nope", split="test").ids)
attempt("bad_folder", lambda: mb.create_dataset("pathvqa", root="hf://org/pvqa@main/nothing", split="test").ids)
try:
    mb.create_dataset("pathvqa", root="hf://org", split="test")
except ValueError as exc:
    out["malformed"] = str(exc)
mark("drop")
attempt("drop", lambda: mb.create_dataset("pathvqa", root="hf://org/dropped", split="test").ids)
mark("corrupt")
attempt("corrupt", lambda: mb.create_dataset("pathvqa", root="hf://org/corrupt", split="test").ids)
"""


def _png(value: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 6), (value, value, value)).save(buf, format="PNG")
    return buf.getvalue()


def _parquet(questions: list[str], answers: list[str]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"image": [{"bytes": _png(40 * (i + 1)), "path": None} for i in range(len(questions))],
                      "question": questions, "answer": answers})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hubroot")
    old = {"data/test-00000-of-00001.parquet": _parquet(["is it?", "what?"], ["yes", "necrosis"]),
           "README.md": b"v1\n"}
    new = {"data/test-00000-of-00001.parquet": _parquet(["is it?", "what?", "is there fibrosis?"],
                                                        ["yes", "necrosis", "no"]),
           "README.md": b"v2\n"}
    with HubServer() as hub:
        c1 = hub.add_commit("org/pvqa", old, ref=None, repo_type="dataset")
        c2 = hub.add_commit("org/pvqa", new, ref="main", repo_type="dataset")
        c3 = hub.add_commit("org/pvqa", new, ref=None, repo_type="dataset")  # same bytes, another commit
        hub.add_commit("org/dropped", new, repo_type="dataset")
        hub.drop_after[("datasets/org/dropped", "data/test-00000-of-00001.parquet")] = 100
        hub.add_commit("org/corrupt", {"README.md": b"announced\n"}, repo_type="dataset")
        hub.corrupt[("datasets/org/corrupt", "README.md")] = b"something else\n"
        out = run_client(CLIENT, hub.endpoint, tmp, C1=c1, C2=c2, C3=c3,
                         CKPT=str(tmp / "ckpt"), RUN=str(tmp / "run"))
        yield {"out": out, "phases": hub.phases(), "c1": c1, "c2": c2, "c3": c3, "new": new, "tmp": tmp}


def test_downloads_pins_commit_and_every_file_digest(session):
    out, new = session["out"], session["new"]
    assert out["ids"] == ["test_000000", "test_000001", "test_000002"]
    assert out["answers"] == ["yes", "necrosis", "no"]
    src = out["source"]
    assert src["repo_id"] == "org/pvqa" and src["revision"] == "main" and src["commit"] == session["c2"]
    assert src["repo_type"] == "dataset" and src["root"] == "hf://org/pvqa@main"
    assert src["files"] == {name: hashlib.sha256(data).hexdigest() for name, data in new.items()}
    assert out["identity"]["hub"]["commit"] == session["c2"]
    assert out["accuracy"] == pytest.approx(1 / 3, abs=1e-6)  # "yes" to all: right on the first of three


def test_run_manifest_records_the_source(session):
    import json

    manifest = json.loads((session["tmp"] / "run" / "manifest.json").read_text())
    source = manifest["dataset"]["source"]
    assert source["commit"] == session["c2"]
    assert source["files"]["data/test-00000-of-00001.parquet"] == hashlib.sha256(
        session["new"]["data/test-00000-of-00001.parquet"]).hexdigest()
    assert manifest["dataset"]["identity"]["hub"]["commit"] == session["c2"]


def test_cache_reused_and_revisions_pinned(session):
    out, phases = session["out"], session["phases"]
    assert out["again_commit"] == session["c2"]
    # a branch is resolved again (one info call) but no file is downloaded twice
    assert not any("/resolve/" in p for _, p in phases["again"])
    assert out["old"]["commit"] == session["c1"] and out["old"]["ids"] == ["test_000000", "test_000001"]
    assert out["old"]["fingerprint"] != out["identity"]["fingerprint"]


def test_resume_across_revisions_is_refused(session):
    out = session["out"]
    # same bytes under another commit: the data fingerprint agrees, the key does not
    assert out["same"]["fingerprint"] == out["identity"]["fingerprint"]
    assert any(d.startswith("dataset.hub.commit") for d in out["diffs"]), out["diffs"]
    assert out["parts"], "the first run saved no checkpoint part"
    assert out["resume_other_revision"] != "accepted"
    assert "hub.commit" in out["resume_other_revision"]


def test_offline_reads_the_cache_only(session):
    out, phases = session["out"], session["phases"]
    assert out["offline_commit"] == session["c2"]
    assert phases["offline"] == []
    assert out["offline_missing"]["kind"] == "offline"
    assert "HF_HUB_OFFLINE=1" in out["offline_missing"]["error"]


def test_errors_name_the_repository(session):
    out = session["out"]
    assert out["unknown_revision"]["kind"] == "unknown_revision" and "'v9'" in out["unknown_revision"]["error"]
    assert out["unknown_repo"]["kind"] == "unknown_repo"
    assert "no such dataset" in out["unknown_repo"]["error"] and "org/nope" in out["unknown_repo"]["error"]
    assert out["bad_folder"]["kind"] == "missing_file" and "nothing" in out["bad_folder"]["error"]
    assert "hf://OWNER/NAME" in out["malformed"]


def test_dropped_connection_and_corrupt_file_are_refused(session):
    out = session["out"]
    assert "error" in out["drop"] and "org/dropped" in out["drop"]["error"]
    assert out["corrupt"]["kind"] == "corrupt" and "README.md" in out["corrupt"]["error"]
