"""The ``infnet_covid_semiseg`` card run on the real COVID-SemiSeg folder: every published cell of
the Inf-Net paper's two tables (the authors' printouts) reproduced from the authors' maps."""

from __future__ import annotations

from pathlib import Path

import pytest

from medimg_bench.baselines.cards import CardError, load_card
from medimg_bench.baselines.reproduce import reproduce

REAL = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "infnet_covid_semiseg"


def test_card_schema_and_variants(tmp_path):
    card = load_card("infnet_covid_semiseg")
    assert card["status"] == "ready" and len(card["variants"]) == 14
    assert sum(len(v["published"]) for v in card["variants"]) == 84  # 14 rows x 6 columns
    for f in card["dataset"]["expected"]["files"]:
        (tmp_path / f).mkdir(parents=True)
    with pytest.raises(CardError, match="unknown variant"):
        reproduce(card, [f"dataset.root={tmp_path}", "variant=VGG"], run_dir=tmp_path / "run")
    bad = {**card, "variants": [{**card["variants"][0], "published": {"dice": 0.5}}]}
    from medimg_bench.baselines.cards import validate_card

    with pytest.raises(CardError, match="not in the card's metrics"):
        validate_card(bad)


@pytest.mark.skipif(not REAL.exists(), reason=f"real data {REAL} is absent (a fresh clone has no ../shared)")
def test_reproduce_every_published_cell(tmp_path):
    out = reproduce("infnet_covid_semiseg", [f"dataset.root={REAL}", "bootstrap.n_resamples=0",
                                            "progress=false"], run_dir=tmp_path)
    rows = out["rows"]
    assert len(rows) == 84
    bad = [(r["variant"], r["metric"], r["published"], r["measured"]) for r in rows if r["verdict"] != "reproduced"]
    assert not bad, bad
    assert out["reproduced"] is True


def _layout(root: Path, *, n: int = 4, good: tuple[str, ...] = ("UNet",), bad: tuple[str, ...] = ("UNet++",)) -> None:
    """A COVID-SemiSeg folder of ``n`` 16x16 test slices with the card's mask folders, maps for
    the ``good`` variants and unreadable files for the ``bad`` ones."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    test = root / "Dataset" / "TestingSet"
    dirs = {"img": test / "LungInfection-Test" / "Imgs", "gt": test / "LungInfection-Test" / "GT",
            "mc": test / "MultiClassInfection-Test" / "GT", "g1": test / "MultiClassInfection-Test" / "GT-1",
            "g2": test / "MultiClassInfection-Test" / "GT-2"}
    results = root / "Results" / "Lung infection segmentation"
    for d in [*dirs.values(), results, root / "Results" / "Multi-class lung infection segmentation"]:
        d.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        mask = np.zeros((16, 16), np.uint8)
        mask[4:10, 3 + i:9 + i] = 255
        Image.fromarray(rng.integers(0, 255, (16, 16), dtype=np.uint8)).convert("RGB").save(dirs["img"] / f"{i}.jpg")
        for key in ("gt", "g1", "g2"):
            Image.fromarray(mask).save(dirs[key] / f"{i}.png")
        Image.fromarray((mask > 0).astype(np.uint8)).save(dirs["mc"] / f"{i}.png")
        for v in good:
            (results / v).mkdir(exist_ok=True)
            Image.fromarray(np.clip(mask.astype(int) + rng.integers(0, 40, (16, 16)), 0, 255).astype(np.uint8)).save(
                results / v / f"{i}.png")
        for v in bad:  # the files are there but cannot be read: every sample of the variant fails
            (results / v).mkdir(exist_ok=True)
            (results / v / f"{i}.png").write_bytes(b"not a png")


def test_a_variant_whose_samples_all_fail_gets_no_verdict_and_the_exit_is_not_zero(tmp_path, monkeypatch, capsys):
    """Issue 36: the documented command failed all samples of every variant, printed "not
    measured" for each cell and exited 0. A run that scored nothing now gives its cells no
    verdict, the command exits 3, and the last line counts the samples scored. Run from the
    folder above the data with the relative root, as docs/baselines.md writes it."""
    import json

    from medimg_bench.baselines.reproduce import FAILED_SAMPLES, cli_main

    _layout(tmp_path / "data" / "covid")
    monkeypatch.chdir(tmp_path)
    code = cli_main(["infnet_covid_semiseg", "dataset.root=data/covid", "variant=UNet,UNet++",
                     "bootstrap.n_resamples=0", "progress=false", "--run-dir", "out"])
    captured = capsys.readouterr()
    assert code == 3, captured.out + captured.err
    out = json.loads((tmp_path / "out" / "reproduce.json").read_text())
    by_variant = {v: {r["verdict"] for r in out["rows"] if r["variant"] == v} for v in ("UNet", "UNet++")}
    assert by_variant["UNet++"] == {FAILED_SAMPLES}
    assert by_variant["UNet"] <= {"reproduced", "not reproduced"}  # scored: judged
    assert out["failed_runs"] == ["UNet++"]
    assert out["samples"] == {"UNet": {"n_samples": 4, "n_failed": 0}, "UNet++": {"n_samples": 4, "n_failed": 4}}
    assert all(r["scored"] == ("4 of 4" if r["variant"] == "UNet" else "0 of 4") for r in out["rows"])
    assert captured.err.strip().splitlines()[-1] == (
        "scored 4 of 8 samples (4 failed) in 2 run(s); 1 run(s) failed (UNet++): no verdict for their cells (exit 3)")
