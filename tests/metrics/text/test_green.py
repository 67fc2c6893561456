"""green against the GREEN authors' own parsing and score (fixtures from
tools/green_reference.py: Stanford-AIMI/GREEN d72c195 run on the five model outputs its
tests/test_repro.py ships and on 400 generated outputs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from medimg_bench.metrics.text.green import (
    GREEN_COLUMNS,
    GREEN_PROMPT,
    Green,
    clean_green_reply,
    green_prompt,
    green_scores,
    load_green_template,
    parse_green,
)
from medimg_bench.registry import create_metric, list_metrics

DATA = json.loads((Path(__file__).parent / "data/green_reference.json").read_text())
CASES = DATA["cases"]


def test_parsing_and_score_equal_the_authors_code() -> None:
    for i, c in enumerate(CASES):
        assert clean_green_reply(c["raw"]) == c["cleaned"], i
        p = parse_green(c["raw"])
        assert [*p["significant"], p["matched"]] == c["counts"], i
        assert p["insignificant"] == c["insignificant"], i
        from medimg_bench.metrics.text.green import green_score

        assert green_score(p) == pytest.approx(c["green"], abs=1e-15), i


def test_shipped_examples_scores() -> None:
    # the five GREEN-radllama2-7b analyses of test_repro.py: counts read by their code
    shipped = CASES[: DATA["meta"]["shipped"]]
    assert [round(c["green"], 6) for c in shipped] == [0.0, round(1 / 6, 6), round(2 / 6, 6), 0.5, 0.25]


def test_error_free_share_equals_compute_accuracy() -> None:
    m = create_metric("green", replies=True)
    m.update([c["raw"] for c in CASES], [""] * len(CASES))
    assert m.error_free_share().tolist() == pytest.approx(DATA["accuracy"], abs=1e-12)


def test_authors_prompt_file_reproduces_make_prompt(tmp_path: Path) -> None:
    refs, hyps, prompts = DATA["refs"], DATA["hyps"], DATA["prompts"]
    r0, h0 = " ".join(refs[0].split()[:300]), " ".join(hyps[0].split()[:300])
    template = prompts[0].replace(r0, "{text1}").replace(h0, "{text2}")
    f = tmp_path / "green_prompt.txt"
    f.write_text(template)
    t = load_green_template(f)
    for r, h, want in zip(refs, hyps, prompts):
        assert green_prompt(r, h, template=t) == want


def test_default_prompt_is_ours_and_bad_prompt_files_fail(tmp_path: Path) -> None:
    assert "{reference}" in GREEN_PROMPT and "{candidate}" in GREEN_PROMPT
    assert "Objective: Evaluate the accuracy" not in GREEN_PROMPT  # our wording, not the authors'
    with pytest.raises(FileNotFoundError, match="prompt_file"):
        Green(replies=True, prompt_file=str(tmp_path / "none.txt"))
    (tmp_path / "p.txt").write_text("no placeholders")
    with pytest.raises(ValueError, match="reference"):
        load_green_template(tmp_path / "p.txt")


def test_scripted_green_model_end_to_end() -> None:
    assert "green" in list_metrics()
    shipped = CASES[: DATA["meta"]["shipped"]]
    seen: list[str] = []

    def generate(prompts: list[str]) -> list[str]:
        seen.extend(prompts)
        return [shipped[DATA["hyps"].index(next(h for h in DATA["hyps"] if " ".join(h.split()[:300]) in p))]["raw"]
                for p in prompts]

    m = Green(generate=generate)
    m.update(DATA["hyps"][:3], DATA["refs"][:3], ids=["a", "b", "c"])
    m.update(DATA["hyps"][3:], DATA["refs"][3:], ids=["d", "e"])
    ids, vals = m.values()
    assert ids == ["a", "b", "c", "d", "e"] and vals.shape == (5, len(GREEN_COLUMNS))
    assert vals[:, 0].tolist() == pytest.approx([c["green"] for c in shipped])
    assert vals[:, 1:8].tolist() == [c["counts"] for c in shipped]
    assert len(seen) == 5 and all(DATA["refs"][i].split()[0] in seen[i] for i in range(5))
    assert m.compute()[0].item() == pytest.approx(sum(c["green"] for c in shipped) / 5)
    rows, replies = green_scores(DATA["refs"], DATA["hyps"], generate=generate)
    assert torch.equal(rows, vals) and len(replies) == 5


def test_model_reply_count_mismatch_and_missing_model() -> None:
    with pytest.raises(ValueError, match="replies"):
        green_scores(["a"], ["b"], generate=lambda p: [])
    with pytest.raises(ValueError, match="GREEN model"):
        Green()


def test_error_counts_are_lower_is_better() -> None:
    m = Green(replies=True)
    assert m.higher_is_better_of("green") is True and m.higher_is_better_of("matched") is True
    assert m.higher_is_better_of("sig_a") is False and m.higher_is_better_of("insig_f") is False
    assert m.range_of("green") == (0.0, 1.0)
