"""Run directories: resume rules, overwrite, stage tags of failures, secrets never written."""

import json

import pandas as pd
import pytest
import torch

from medimg_bench.datasets import create
from medimg_bench.engine.results import is_secret_key, redact_secrets
from medimg_bench.engine.runner import evaluate
from medimg_bench.runs import run

TINY = ["dataset.options.n=12", "dataset.options.size=16", "progress=false", "bootstrap.n_resamples=20",
        "model.options.model_name=resnet10t", "batch_size=4"]


def test_resume_and_overwrite_rules(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    with pytest.raises(FileNotFoundError, match=r"resume=.*nowhere: nothing to resume.*does not exist"):
        run([*TINY, f"resume={tmp_path / 'nowhere'}"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"empty: nothing to resume"):
        run([*TINY, f"resume={tmp_path / 'empty'}"])
    first = run(TINY, run_dir=tmp_path / "run")
    stamp = (tmp_path / "run" / "samples.parquet").stat().st_mtime_ns
    with pytest.raises(FileExistsError, match=r"already holds results.*overwrite=true"):
        run(TINY, run_dir=tmp_path / "run")
    again = run([*TINY, f"resume={tmp_path / 'run'}"])  # finished: nothing recomputed
    assert again.summary == json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (tmp_path / "run" / "samples.parquet").stat().st_mtime_ns == stamp
    replaced = run([*TINY, "overwrite=true", "seed=3"], run_dir=tmp_path / "run")
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["config"]["seed"] == 3
    assert replaced.summary["n_samples"] == first.summary["n_samples"]


def test_resume_reuses_trained_weights_and_gives_the_same_numbers(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    train = [*TINY, "train.enabled=true", "train.max_steps=3", "train.batch_size=4"]
    first = run(train, run_dir=tmp_path / "run")
    assert (tmp_path / "run" / "model.safetensors").exists() and not (tmp_path / "run" / "checkpoint").exists()
    # a run killed after training, before its results: only the weights are there
    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / "model.safetensors").write_bytes((tmp_path / "run" / "model.safetensors").read_bytes())
    again = run([*train, f"resume={killed}"])
    assert again.run_dir == killed
    assert again.manifest["training"] == {"resumed_from": str(killed / "model.safetensors")}
    assert again.summary["metrics"] == first.summary["metrics"]


def test_a_training_killed_halfway_goes_on_from_its_last_state(tmp_path, monkeypatch):
    """train.checkpoint_every: a killed training resumes (resume=RUN_DIR) from its last state
    to the numbers of a training never interrupted; another config is refused, naming it."""
    from medimg_bench.models.training import loop

    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    train = [*TINY, "train.enabled=true", "train.max_steps=6", "train.batch_size=4", "train.checkpoint_every=2"]
    whole = run(train, run_dir=tmp_path / "whole")
    assert not (tmp_path / "whole" / "train").exists()  # removed once the weights are written

    real = loop.save_state

    def save_then_die(path, *args, **kwargs):
        real(path, *args, **kwargs)
        if args[3].steps == 4:
            raise KeyboardInterrupt("killed at step 4")

    monkeypatch.setattr(loop, "save_state", save_then_die)
    killed = tmp_path / "killed"
    with pytest.raises(KeyboardInterrupt):
        run(train, run_dir=killed)
    monkeypatch.setattr(loop, "save_state", real)
    assert (killed / "train" / "train_state.pt").is_file() and not (killed / "model.safetensors").exists()
    with pytest.raises(FileExistsError, match=r"unfinished training's train/train_state.pt.*resume="):
        run(train, run_dir=killed)
    with pytest.raises(ValueError, match=r"training state is of another config.*train.lr"):
        run([*train, "train.lr=0.01", f"resume={killed}"])
    saved_steps: list[int] = []
    monkeypatch.setattr(loop, "save_state", lambda path, *a, **k: (saved_steps.append(a[3].steps), real(path, *a, **k)))
    resumed = run([*train, f"resume={killed}"])
    assert saved_steps == [6]  # steps 5 and 6 only: on from step 4, not from the start
    assert resumed.manifest["training"]["resumed_training"] is True
    assert resumed.manifest["training"]["steps"] == 6
    assert resumed.summary["metrics"] == whole.summary["metrics"]
    assert (killed / "model.safetensors").read_bytes() == (tmp_path / "whole" / "model.safetensors").read_bytes()
    assert not (killed / "train").exists()


def test_secrets_are_never_written(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    run([*TINY, "+api_key=sk-test-123", "+train.hf_token=hf-secret-456", "+dataset.label_key=finding"],
        run_dir=tmp_path / "run")
    for f in (tmp_path / "run").rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert b"sk-test-123" not in data and b"hf-secret-456" not in data, f
    config = json.loads((tmp_path / "run" / "manifest.json").read_text())["config"]
    assert config["api_key"] == "***" and config["train"]["hf_token"] == "***"
    assert config["dataset"]["label_key"] == "finding"  # not every key containing "key"


def test_secret_key_rule():
    for k in ("api_key", "OPENAI_API_KEY", "hf_token", "token", "client_secret", "password", "Authorization"):
        assert is_secret_key(k), k
    for k in ("label_key", "api_key_env", "max_new_tokens", "tokenizer", "key", "monkey"):
        assert not is_secret_key(k), k
    assert redact_secrets({"a": ["+model.options.api_key=sk-1234", "x=1"], "token": None}) == {
        "a": ["+model.options.api_key=***", "x=1"], "token": None}


class _Model:
    task, name = "classification", "stages"

    def to(self, device):
        return self

    def eval(self):
        return self

    def predict(self, batch):
        if "cxr_00002" in batch["id"]:
            raise RuntimeError("model crashed")
        m = batch["image"].mean(dim=(1, 2, 3))
        p = torch.stack([m, 1 - m, m * m], dim=1)
        if "cxr_00003" in batch["id"]:
            p[batch["id"].index("cxr_00003")] = float("nan")
        return {"probs": p}


def test_failures_are_tagged_with_the_stage(tmp_path):
    ds = create("synthetic_cxr", cache_dir=tmp_path / "d", split="all", n=8, size=16)
    (ds.root / ds.manifest["image"][0]).write_bytes(b"broken")
    bad_label = ds.sample_id(5)
    real_load = ds.load

    def load(row):
        s = real_load(row)
        if s["id"] == bad_label:
            s["label"] = "not a label"  # unreadable target: fails in the task's metric inputs
        return s

    ds.load = load
    res = evaluate(_Model(), ds, task="classification", batch_size=4, progress=False, n_resamples=5)
    errors = res.failures.set_index("id")["error"]
    assert errors[ds.sample_id(0)].startswith("[load]")
    assert errors["cxr_00002"].startswith("[predict]") and "model crashed" in errors["cxr_00002"]
    assert errors["cxr_00003"].startswith("[predict]") and "NaN" in errors["cxr_00003"]
    assert errors[bad_label].startswith("[target]")
    assert list(res.failures["id"]) == sorted(res.failures["id"])  # dataset order


def test_out_of_memory_in_a_metric_names_the_case_and_the_chunk_option(tmp_path, synthetic_root):
    from medimg_bench.registry import create_model

    ds = create("synthetic_ct", cache_dir=synthetic_root / "ct_oom", split="all", n=3, shape=(16, 16, 8))
    model = create_model("monai_unet", num_classes=5, channels=(4, 8), strides=(2,), num_res_units=0)
    from medimg_bench.metrics.segmentation import Dice

    class OOMDice(Dice):
        def update(self, preds, targets, meta=None, *, ids=None):
            if ids and ds.sample_id(1) in ids:
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 9.00 GiB")
            super().update(preds, targets, meta, ids=ids)

    dice = OOMDice(num_classes=5, class_names=["liver", "kidney", "spleen", "spine"])
    res = evaluate(model, ds, task="segmentation", metrics={"dice": dice}, progress=False, n_resamples=5)
    err = res.failures.set_index("id")["error"][ds.sample_id(1)]
    assert err.startswith("[metric] out of memory while scoring sample") and ds.sample_id(1) in err
    assert "chunk_mb" in err
    assert res.summary["n_failed"] == 1 and len(res.metrics["dice"].ids) == 2


def _image_file(overrides, index):
    """The image file of sample ``index`` of the run's dataset (the synthetic phantoms' cache)."""
    from omegaconf import OmegaConf

    from medimg_bench.builders import build_dataset
    from medimg_bench.runs import compose_config

    dcfg = OmegaConf.to_container(compose_config(overrides).dataset, resolve=True)
    ds = build_dataset(dcfg, dcfg["split"])
    return ds.sample_id(index), ds.resolve(ds.manifest["image"].iloc[index])


def test_resume_of_a_finished_run_with_failures_predicts_exactly_them_again(tmp_path, monkeypatch, capsys):
    """The model (a server) was down for one sample: a resume predicts exactly that one again.
    The data must be the same: a repaired file changes the dataset's identity, and the
    checkpoint of the run is refused (tests/robustness/test_resume_changed_inputs.py)."""
    from medimg_bench.models.classification import ClassifierAdapter

    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    clean = run(TINY, run_dir=tmp_path / "clean")
    sid, _ = _image_file(TINY, 2)
    real, asked = ClassifierAdapter.predict, []

    def down_for_one(self, batch):
        asked.extend(batch["id"])
        if sid in batch["id"]:
            raise ConnectionError("server down")
        return real(self, batch)

    monkeypatch.setattr(ClassifierAdapter, "predict", down_for_one)
    broken = run(TINY, run_dir=tmp_path / "run")
    assert broken.summary["failed_ids"] == [sid]
    assert "[predict] ConnectionError: server down" in broken.failures.set_index("id")["error"][sid]
    assert (tmp_path / "run" / "checkpoint").is_dir()  # kept: what a resume needs
    assert f"resume={tmp_path / 'run'} predicts exactly them again" in capsys.readouterr().out
    monkeypatch.setattr(ClassifierAdapter, "predict", lambda self, batch: asked.extend(batch["id"]) or real(self, batch))
    asked.clear()
    again = run([*TINY, f"resume={tmp_path / 'run'}"])
    assert asked == [sid]  # only the failed sample was predicted again
    assert "predicting exactly those again" in capsys.readouterr().out
    assert again.summary == clean.summary
    assert json.loads((tmp_path / "run" / "summary.json").read_text()) == json.loads(
        (tmp_path / "clean" / "summary.json").read_text())
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "run" / "samples.parquet"),
                                  pd.read_parquet(tmp_path / "clean" / "samples.parquet"), check_exact=True)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["retried"] == {"n": 1, "recovered": 1} and len(manifest["segments"]) == 2
    assert not (tmp_path / "run" / "checkpoint").exists()  # nothing failed: removed
    stamp = (tmp_path / "run" / "samples.parquet").stat().st_mtime_ns
    run([*TINY, f"resume={tmp_path / 'run'}"])  # finished, nothing failed: only shown
    assert (tmp_path / "run" / "samples.parquet").stat().st_mtime_ns == stamp


def test_resume_of_a_finished_run_without_its_checkpoint_says_how_to_retry(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    _, image = _image_file(TINY, 1)
    image.write_bytes(b"broken")
    run(TINY, run_dir=tmp_path / "run")
    import shutil

    shutil.rmtree(tmp_path / "run" / "checkpoint")  # as a run of an older version left it
    capsys.readouterr()
    again = run([*TINY, f"resume={tmp_path / 'run'}"])
    out = capsys.readouterr().out
    assert "nothing was recomputed" in out and "1 failed sample(s) cannot be predicted again" in out
    assert "overwrite=true" in out and again.summary["n_failed"] == 1


def test_resume_of_a_run_killed_before_its_first_checkpoint_starts_it_again(tmp_path, monkeypatch, capsys):
    """Issue 36 item 4: a run killed before its first checkpoint left only its saved config
    (``.hydra/``, ``cli.log``); ``resume=DIR`` refused it ("nothing to resume there") although
    the README says resume continues a killed run. It now starts the run again in DIR with its
    saved options, saying so."""
    import shutil

    from medimg_bench.cli import main

    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    killed = tmp_path / "killed"
    assert main(["run", *TINY, "seed=5", f"hydra.run.dir={killed}"]) == 0
    reference = json.loads((killed / "summary.json").read_text())
    for p in killed.iterdir():  # what a kill before the first checkpoint leaves
        if p.name not in (".hydra", "cli.log"):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    capsys.readouterr()
    assert main(["run", f"resume={killed}"]) == 0
    out = capsys.readouterr().out
    assert "stopped before its first checkpoint; it starts again from the beginning in this directory" in out
    again = json.loads((killed / "summary.json").read_text())
    assert again["metrics"] == reference["metrics"]  # the saved options (seed=5) came back
    assert json.loads((killed / "manifest.json").read_text())["config"]["seed"] == 5
