"""A credential planted in every place a user can put one never reaches a file the toolkit
writes (issue #19 items 10, 11): a secret-named override, nested ``extra_body`` keys, URL user
info, a provider-token value under a harmless key. Searched: the run directories (samples,
summary, manifest, shard state, plots), Hydra's ``.hydra/*.yaml`` and ``multirun.yaml``,
``cli.log``, the sweep table, the response cache (database and WAL) and ``cache export``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

PASSWORD = "pw-url-0123456789"
BODY_KEY = "xb-body-key-424242"
BODY_TOKEN = "tok-body-98765432"
OVERRIDE = "sk-test-override-1234"
LOOKALIKE = "sk-proj-" + "Zq9Xw8Yv" * 3  # a token format under a key that names nothing


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MEDIMG_BENCH_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "medimg_bench.cli", *args], capture_output=True, text=True,
                          env=env, timeout=600)


def _text(path: Path) -> str:
    """Everything a file holds, decoded where it is compressed (Parquet) or packed (torch)."""
    if path.suffix == ".parquet":
        return pd.read_parquet(path).to_csv()
    if path.suffix == ".pt":
        import torch

        return json.dumps(torch.load(path, weights_only=True), default=str)
    return path.read_bytes().decode("latin-1")


def test_a_credential_in_each_place_is_written_nowhere(tmp_path, chat_server):
    port = chat_server.split(":")[2].split("/")[0]
    cache = tmp_path / "responses.sqlite"
    out = _cli(tmp_path, "run", "-m", f"output_dir={tmp_path}/runs", "task=vqa", "dataset=synthetic_vqa",
               "dataset.options.n=8", "dataset.options.size=16", "model=openai_vlm",
               "model.options.model=loopback", "model.options.api_key_env=none",
               f"model.options.base_url=http://alice:{PASSWORD}@127.0.0.1:{port}/v1",
               f"model.options.extra_body={{api_key:{BODY_KEY},access_token:{BODY_TOKEN},top_k:1}}",
               f"model.options.cache_path={cache}", "model.options.max_retries=0",
               f"+api_key={OVERRIDE}", f"+notes={LOOKALIKE}", "shard=0/1", "progress=false",
               "bootstrap.n_resamples=10", "seed=0,1")
    assert out.returncode == 0, out.stderr[-3000:]
    sweep = _cli(tmp_path, "sweep", str(next((tmp_path / "runs").rglob("multirun.yaml")).parent))
    assert sweep.returncode == 0, sweep.stderr
    export = _cli(tmp_path, "cache", "export", "--path", str(cache), "--out", str(tmp_path / "export.jsonl"))
    assert export.returncode == 0, export.stderr
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    # every place was written
    assert {"manifest.json", "summary.json", "samples.parquet", "shard_state.pt", "config.yaml",
            "overrides.yaml", "hydra.yaml", "multirun.yaml", "cli.log", "sweep.md", "sweep.parquet",
            "responses.sqlite", "export.jsonl"} <= names, sorted(names)
    manifest = json.loads(next((tmp_path / "runs").rglob("manifest.json")).read_text())
    assert manifest["n_answers"] > 0  # the model answered: the run did go through the server
    for p in files:
        text = _text(p)
        for secret in (PASSWORD, BODY_KEY, BODY_TOKEN, OVERRIDE, LOOKALIKE):
            assert secret not in text, f"{secret} in {p}"
    options = manifest["config"]["model"]["options"]
    assert options["base_url"] == f"http://***@127.0.0.1:{port}/v1"
    assert options["extra_body"] == {"api_key": "***", "access_token": "***", "top_k": 1}
    assert manifest["config"]["api_key"] == "***" and manifest["config"]["notes"] == "***"
    row = json.loads((tmp_path / "export.jsonl").read_text().splitlines()[0])
    assert row["fingerprint"]["extra_body"] == {"access_token": "***", "api_key": "***", "top_k": 1}
