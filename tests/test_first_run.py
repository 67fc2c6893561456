"""Issue #22 item 4: what stops a new user's first run (composition, aliases, messages)."""

from __future__ import annotations

import pytest

from medimg_bench.cli import main
from medimg_bench.runs.compose import ConfigError, compose_config, resolve_aliases


def test_task_segmentation_alone_chooses_its_metrics_model_and_dataset():
    cfg = compose_config(["task=segmentation"])
    assert list(cfg.metrics) == ["scores"] and cfg.metrics.scores.metric == "segmentation"
    assert cfg.model.name == "monai_unet" and cfg.dataset.name == "synthetic_ct"


def test_command_line_groups_win_over_the_task_defaults():
    cfg = compose_config(["metrics=dice", "task=segmentation", "model=predictions", "dataset=nifti_pairs"])
    assert list(cfg.metrics) == ["dice"]
    assert (cfg.model.name, cfg.dataset.name) == ("predictions", "nifti_pairs")


def test_default_model_with_segmentation_task_resolves_multilabel():
    cfg = compose_config(["task=segmentation", "model=timm_resnet10t", "metrics=segmentation"])
    assert cfg.model.options.multilabel is True  # was InterpolationKeyError task.options.multilabel


def test_registry_name_is_accepted_for_a_config_group():
    overrides, notes = resolve_aliases(["model=timm"])
    assert overrides == ["model=timm_resnet10t"] and "timm_resnet10t" in notes[0]
    assert compose_config(["model=timm"]).model.options.model_name == "resnet10t"


def test_mistyped_option_offers_the_close_key():
    with pytest.raises(ConfigError, match=r"did you mean 'model\.options\.model_name'"):
        compose_config(["model.options.model_nam=resnet18"])


def test_option_of_an_unselected_group_names_the_group():
    with pytest.raises(ConfigError, match=r"add scoring=NAME"):
        compose_config(["scoring.judge.options.model=gpt"])


def test_unknown_group_choice_lists_close_choices():
    with pytest.raises(ConfigError, match=r"no model config 'monai_unt'.*monai_unet"):
        compose_config(["model=monai_unt"])


def test_cli_mistyped_option_exits_2_with_the_advice(capsys, tmp_path):
    assert main(["run", "model.options.model_nam=x", f"output_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert "model.options.model_name" in err and "+model.options.model_nam" not in err


def test_api_key_env_null_and_none_both_send_no_key(monkeypatch):
    from medimg_bench.builders import build_model

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for value in (None, "none", "null"):
        model = build_model({"name": "openai_vlm", "options": {"model": "m", "api_key_env": value,
                                                               "base_url": "http://127.0.0.1:9/v1"}}, [])
        assert model.api_key_env is None


def test_datasets_check_takes_dataset_root_like_run(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    a = main(["datasets", "check", "nih_cxr14", f"root={missing}", "--no-pixels"])
    b = main(["datasets", "check", "nih_cxr14", f"dataset.root={missing}", "--no-pixels"])
    assert a == b != 0
    out = capsys.readouterr()
    assert (out.out + out.err).count(str(missing)) >= 2
