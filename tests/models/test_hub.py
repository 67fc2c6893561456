"""medimg_bench.hub against a loopback Hugging Face Hub (tests/models/hub_server.py): download,
cache reuse, revision pinning, offline mode and the errors, through huggingface_hub's own client.

One client process runs every phase (huggingface_hub reads ``HF_ENDPOINT`` at import, and each
process costs seconds); the server's request log, split at the client's phase markers, says
what went over the network in each phase."""

from __future__ import annotations

import hashlib

import pytest

from tests.models.hub_server import HubServer, run_client

pytest.importorskip("huggingface_hub")

CLIENT = """
import os
from pathlib import Path
from medimg_bench.hub import HubError, resolve_snapshot, resolve_file, resolve_transformers_snapshot

def attempt(key, fn):
    try:
        out[key] = {"ok": fn()}
    except HubError as exc:
        out[key] = {"error": str(exc), "kind": exc.kind}

mark("first")
s = resolve_snapshot("org/m")
out["first"] = s.record()
out["first_path"] = str(s.path)
mark("again_branch")
out["again_branch"] = resolve_snapshot("org/m").commit
mark("pinned_old")
out["pinned_old"] = resolve_snapshot("org/m", revision=os.environ["C1"]).record()
mark("pinned_old_again")
out["pinned_old_again"] = resolve_snapshot("org/m", revision=os.environ["C1"]).commit
mark("transformers")
out["tf_files"] = sorted(resolve_transformers_snapshot("org/tf").files)
out["bin_files"] = sorted(resolve_transformers_snapshot("org/binonly").files)
mark("tag")
out["tag"] = resolve_snapshot("org/m", revision="v1").commit
mark("offline_flag")
out["offline_flag"] = resolve_snapshot("org/m", offline=True).commit
os.environ["HF_HUB_OFFLINE"] = "1"
mark("offline_env")
out["offline_env"] = resolve_snapshot("org/m", revision="v1").commit
attempt("offline_missing", lambda: resolve_snapshot("org/other"))
del os.environ["HF_HUB_OFFLINE"]
mark("errors")
attempt("unknown_id", lambda: resolve_snapshot("org/nope"))
attempt("unknown_revision", lambda: resolve_snapshot("org/m", revision="v9"))
attempt("unknown_file", lambda: resolve_file("org/m", "nope.bin"))
mark("drop")
attempt("drop", lambda: resolve_snapshot("org/dropped"))
blobs = Path(os.environ["HF_HUB_CACHE"]) / "models--org--dropped" / "blobs"
out["drop_blobs"] = sorted(p.name for p in blobs.iterdir()) if blobs.exists() else []
attempt("drop_offline", lambda: resolve_snapshot("org/dropped", offline=True))
mark("corrupt")
attempt("corrupt", lambda: resolve_snapshot("org/corrupt"))
# a file changed on disk after a good download is refused too
f = Path(out["first_path"]) / "model.safetensors"
data = f.read_bytes()
os.chmod(os.path.realpath(f), 0o644)
Path(os.path.realpath(f)).write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
mark("tampered")
attempt("tampered", lambda: resolve_snapshot("org/m", offline=True))
"""


def test_snapshots_download_pin_reuse_offline_and_errors(tmp_path):
    old = {"config.json": b'{"v": 1}', "model.safetensors": bytes(range(256)) * 40}
    new = {"config.json": b'{"v": 2}', "model.safetensors": bytes(range(255, -1, -1)) * 40,
           "sub/extra.json": b"{}"}
    with HubServer() as hub:
        c1 = hub.add_commit("org/m", old, ref="v1")
        c2 = hub.add_commit("org/m", new, ref="main")
        hub.add_commit("org/dropped", {"config.json": b"{}", "model.safetensors": b"w" * 200_000})
        hub.drop_after[("org/dropped", "model.safetensors")] = 10_000
        hub.add_commit("org/corrupt", {"config.json": b"{}", "model.safetensors": b"a" * 5000})
        hub.corrupt[("org/corrupt", "model.safetensors")] = b"b" * 5000
        hub.add_commit("org/tf", {"config.json": b"{}", "model.safetensors": b"s" * 10, "model.onnx": b"o",
                                  "flax_model.msgpack": b"f", "tokenizer.json": b"{}", "chat_template.jinja": b"t"})
        hub.add_commit("org/binonly", {"config.json": b"{}", "pytorch_model.bin": b"b" * 10, "tf_model.h5": b"h"})
        out = run_client(CLIENT, hub.endpoint, tmp_path, C1=c1)
        phases = hub.phases()

    # download: the branch resolved to its commit, every file's SHA-256 recorded
    assert out["first"]["commit"] == c2 and out["first"]["revision"] is None
    assert out["first"]["files"] == {k: hashlib.sha256(v).hexdigest() for k, v in new.items()}
    assert out["first_path"].endswith(f"snapshots/{c2}")
    gets = [p for m, p in phases["first"] if m == "GET" and "/resolve/" in p]
    assert len(gets) == 3
    # cache reuse: a branch costs one look-up of its commit and no file; a commit nothing at all
    assert out["again_branch"] == c2
    assert all("/resolve/" not in p or m == "HEAD" for m, p in phases["again_branch"])
    assert not [p for m, p in phases["again_branch"] if m == "GET" and "/resolve/" in p]
    # revision pinning: the old commit's files, and then no request
    assert out["pinned_old"]["commit"] == c1
    assert out["pinned_old"]["files"]["config.json"] == hashlib.sha256(b'{"v": 1}').hexdigest()
    assert phases["pinned_old_again"] == []
    # a transformers folder: configs, tokenizer, template and safetensors, not the ONNX/Flax copies;
    # .bin weights only where there are no safetensors
    assert out["tf_files"] == ["chat_template.jinja", "config.json", "model.safetensors", "tokenizer.json"]
    assert out["bin_files"] == ["config.json", "pytorch_model.bin"]
    assert out["tag"] == c1
    # offline (flag and HF_HUB_OFFLINE=1): the cache only, never the network
    assert out["offline_flag"] == c2 and phases["offline_flag"] == []
    assert out["offline_env"] == c1 and phases["offline_env"] == []
    err = out["offline_missing"]
    assert err["kind"] == "offline" and "org/other" in err["error"] and "offline mode" in err["error"]
    assert str(tmp_path / "hf") in err["error"]
    # errors name the id, the revision, the file
    assert out["unknown_id"]["kind"] == "unknown_repo" and "'org/nope'" in out["unknown_id"]["error"]
    assert out["unknown_revision"]["kind"] == "unknown_revision" and "'v9'" in out["unknown_revision"]["error"]
    assert out["unknown_file"]["kind"] == "missing_file" and "nope.bin" in out["unknown_file"]["error"]
    # network down mid-download: a clear error, no half file kept as a blob, nothing usable offline
    assert out["drop"]["kind"] == "network" and "org/dropped" in out["drop"]["error"]
    assert not [b for b in out["drop_blobs"] if not b.endswith(".incomplete")
                and b == hashlib.sha256(b"w" * 200_000).hexdigest()]
    assert out["drop_offline"]["kind"] == "offline"
    # corrupted download and a file changed on disk: refused, naming the file
    assert out["corrupt"]["kind"] == "corrupt" and "model.safetensors" in out["corrupt"]["error"]
    assert out["tampered"]["kind"] == "corrupt" and "model.safetensors" in out["tampered"]["error"]


def test_looks_like_hub_id_and_hf_paths(tmp_path):
    from medimg_bench.hub import looks_like_hub_id, split_hf_path

    assert looks_like_hub_id("microsoft/BiomedCLIP-PubMedBERT_256-vit_base_patch16_224")
    assert looks_like_hub_id("hf-hub:org/name") and looks_like_hub_id("bert-base-uncased")
    assert not looks_like_hub_id(str(tmp_path)) and not looks_like_hub_id("./models/x")
    assert not looks_like_hub_id("weights/model.safetensors") and not looks_like_hub_id("a/b/c")
    assert split_hf_path("hf://org/name@v2/sub/chexbert.pth") == ("org/name", "v2", "sub/chexbert.pth")
    assert split_hf_path("hf://org/name/chexbert.pth") == ("org/name", None, "chexbert.pth")
    with pytest.raises(ValueError, match="hf://org/name"):
        split_hf_path("hf://org/name")
