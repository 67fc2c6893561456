"""The seed table's intervals stay inside each metric's range (issue #19: a Student-t interval
over seeds gave specificity [-0.034, 1.034])."""

from __future__ import annotations

import json
import math

import pytest
from scipy import stats

from medimg_bench.protocols.run import _seed_stats, aggregate_seeds, metric_bounds


def _run_dir(root, seed, values, *, ranges=True):
    d = root / f"seed{seed}"
    d.mkdir(parents=True)
    metrics = {}
    for name, (value, bounds) in values.items():
        metrics[name] = {"kind": "dataset", "higher_is_better": True, "per_class": {},
                         "mean": {"value": value, "ci_low": None, "ci_high": None}}
        if ranges:
            metrics[name]["range"] = bounds
    (d / "summary.json").write_text(json.dumps({"metrics": metrics}))
    config = {"seed": seed, "protocol": {"name": "linear_probe"}, "dataset": {"name": "synthetic_cxr"},
              "model": {"name": "timm", "options": {"model_name": "resnet10t"}}}
    (d / "manifest.json").write_text(json.dumps({"config": config}))
    return d


def test_student_t_interval_is_clipped_to_the_metric_range():
    # three seeds whose specificity swings from 0.1 to 0.95: the plain t interval leaves [0, 1]
    values = [0.1, 0.95, 0.9]
    mean, sd = sum(values) / 3, float(__import__("numpy").std(values, ddof=1))
    half = stats.t.ppf(0.975, 2) * sd / math.sqrt(3)
    assert mean - half < 0 and mean + half > 1  # the issue, reproduced
    st = _seed_stats(values, 0.95, [0.0, 1.0])
    assert st["ci_low"] == 0.0 and st["ci_high"] == 1.0 and st["ci_clipped"] is True
    assert st["value"] == pytest.approx(mean, abs=1e-6) and st["std"] == pytest.approx(sd, abs=1e-6)
    free = _seed_stats(values, 0.95, None)  # unbounded: the plain interval
    assert free["ci_low"] == pytest.approx(mean - half, abs=1e-6) and free["ci_clipped"] is False
    inside = _seed_stats([0.80, 0.82, 0.81], 0.95, [0.0, 1.0])  # nothing to clip: unchanged
    assert inside["ci_clipped"] is False and 0.7 < inside["ci_low"] < inside["ci_high"] < 0.9
    one_sided = _seed_stats([1.0, 9.0, 2.0], 0.95, [0.0, None])  # a distance: only the low end
    assert one_sided["ci_low"] == 0.0 and one_sided["ci_high"] > 9.0 and one_sided["ci_clipped"]


def test_aggregate_seeds_clips_bounded_metrics_only(tmp_path):
    dirs = [_run_dir(tmp_path, s, {"specificity": (v, [0.0, 1.0]), "hd95": (h, [0.0, None])})
            for s, v, h in ((0, 0.1, 3.0), (1, 0.95, 30.0), (2, 0.9, 4.0))]
    table = aggregate_seeds(dirs).set_index("metric")
    assert table.loc["specificity", "ci_low"] == 0.0 and table.loc["specificity", "ci_high"] == 1.0
    assert bool(table.loc["specificity", "ci_clipped"])
    assert table.loc["hd95", "ci_low"] == 0.0 and table.loc["hd95", "ci_high"] > 30.0


def test_summaries_without_ranges_fall_back_to_the_registered_metric(tmp_path):
    dirs = [_run_dir(tmp_path, s, {"auroc": (v, None)}, ranges=False) for s, v in ((0, 0.2), (1, 0.99), (2, 0.95))]
    row = aggregate_seeds(dirs).iloc[0]
    assert row["ci_high"] == 1.0 and bool(row["ci_clipped"])
    assert metric_bounds("auroc") == [0.0, 1.0]
    assert metric_bounds("hd95") == [0.0, None]
    assert metric_bounds("cider_d") == [0.0, None]
    assert metric_bounds("not_a_metric") is None


def test_protocol_summary_over_seeds_records_range_and_clip(tmp_path, monkeypatch, synthetic_root):
    from medimg_bench.protocols import run_protocol
    from medimg_bench.runs import compose_config

    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(synthetic_root / "cache"))
    cfg = compose_config(["protocol=knn", "protocol.seeds=[0,1]", "dataset.options.n=48", "dataset.options.size=32",
                          "bootstrap.n_resamples=20", "progress=false"])
    res = run_protocol(cfg, tmp_path / "run")
    auroc = res.summary["metrics"]["auroc"]
    assert auroc["range"] == [0.0, 1.0]
    assert 0.0 <= auroc["mean"]["ci_low"] <= auroc["mean"]["ci_high"] <= 1.0
