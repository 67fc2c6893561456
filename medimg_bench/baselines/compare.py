"""``medimg-bench compare RUN_A RUN_B``: two runs on the same samples, per metric: the difference
``a − b`` with a paired bootstrap CI clustered by patient, DeLong's test for AUROC, McNemar's test
for accuracy at a threshold, per-sample metrics (Dice, HD95…) by their paired mean difference;
``--holm`` adjusts the p-values for the number of comparisons. Runs over different sample sets
are refused, naming the difference, unless ``--intersection``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["compare_runs", "data_differences", "cli_main"]

_KEYS = {"id", "patient_id", "class", "status", "error"}


def _load(run: Path) -> Any:
    import pandas as pd

    path = Path(run) / "samples.parquet"
    if not path.exists():
        raise FileNotFoundError(f"compare: {str(run)!r} is not a run directory (no samples.parquet)")
    return pd.read_parquet(path)


def _ok(samples: Any) -> Any:
    return samples[samples["status"] == "ok"] if "status" in samples else samples


def data_differences(run_a: str | Path, run_b: str | Path) -> tuple[list[str], list[str]]:
    """``(data, options)``: the dataset-identity fields of two run directories' manifests that
    differ, as ``"field: A …, B …"`` — the manifest or the content of its files (``data``), the
    loader options (``options``). Runs written before the identity existed are compared by
    their fingerprint alone."""
    import logging

    from medimg_bench.engine.checkpoint import _flatten

    def identity(run: Path) -> dict[str, Any]:
        path = Path(run) / "manifest.json"
        if not path.exists():
            logging.getLogger(__name__).warning("compare: %s has no manifest.json; its data is not checked", run)
            return {}
        ds = json.loads(path.read_text()).get("dataset") or {}
        return ds.get("identity") or {"fingerprint": ds.get("fingerprint")}

    def diff(a: Any, b: Any) -> list[str]:
        fa, fb = _flatten(a), _flatten(b)
        return [f"{k}: A {fa.get(k, '<absent>')!r}, B {fb.get(k, '<absent>')!r}"
                for k in sorted(set(fa) | set(fb)) if fa.get(k, "<absent>") != fb.get(k, "<absent>")]

    ia, ib = identity(Path(run_a)), identity(Path(run_b))
    if not ia or not ib or ia.get("fingerprint") == ib.get("fingerprint"):
        return [], []
    if "manifest_sha256" not in ia or "manifest_sha256" not in ib:  # an older run: fingerprints only
        return diff({"fingerprint": ia.get("fingerprint")}, {"fingerprint": ib.get("fingerprint")}), []
    parts = ("manifest_sha256", "content_sha256", "n_files", "n_missing")
    data = diff({k: ia.get(k) for k in parts}, {k: ib.get(k) for k in parts})
    return data, diff({"options": ia.get("options")}, {"options": ib.get("options")})


def _check_same_data(run_a: str | Path, run_b: str | Path, *, allow: bool) -> None:
    """Refuse runs whose data differ (unless ``allow``); warn when only the options do."""
    import logging

    data, options = data_differences(run_a, run_b)
    if data and not allow:
        raise ValueError(
            f"compare: {str(run_a)!r} and {str(run_b)!r} read different data (dataset fields that "
            f"differ: {'; '.join(data[:4])}); a paired comparison needs the same samples with the "
            "same labels and bytes; pass --different-data to compare them anyway")
    if options:
        logging.getLogger(__name__).warning("compare: the runs read the data with other options: %s",
                                            "; ".join(options[:4]))


def compare_runs(
    run_a: str | Path, run_b: str | Path, *, intersection: bool = False, n_resamples: int = 1000,
    seed: int = 0, threshold: float = 0.5, holm_correction: bool = False, different_data: bool = False,
) -> list[dict[str, Any]]:
    """One row per (metric, class): ``estimate_a``, ``estimate_b``, ``difference`` (a − b),
    ``ci_low``/``ci_high`` (paired patient bootstrap), ``p_value`` and the ``test`` used.

    Runs whose data differ — another manifest (labels, ids) or other bytes in its files, by the
    dataset fingerprint of their manifests — are refused unless ``different_data`` (or
    ``intersection``, where the sample sets differ by design); runs that read the same files with
    other loader options are compared, with a warning naming the options."""
    from medimg_bench.metrics.classification import auroc
    from medimg_bench.metrics.paired import holm, mcnemar_test
    from medimg_bench.metrics.stats import delong_test, paired_bootstrap

    _check_same_data(run_a, run_b, allow=different_data or intersection)
    a, b = _ok(_load(Path(run_a))), _ok(_load(Path(run_b)))
    ids_a, ids_b = set(a["id"].astype(str)), set(b["id"].astype(str))
    if ids_a != ids_b:
        only_a, only_b = sorted(ids_a - ids_b), sorted(ids_b - ids_a)
        if not intersection:
            raise ValueError(
                f"compare: the runs scored different samples: {len(only_a)} only in {str(run_a)!r} "
                f"(e.g. {only_a[:3]}), {len(only_b)} only in {str(run_b)!r} (e.g. {only_b[:3]}); "
                "pass --intersection to compare the common samples"
            )
        keep = ids_a & ids_b
        a, b = a[a["id"].astype(str).isin(keep)], b[b["id"].astype(str).isin(keep)]
    rows: list[dict[str, Any]] = []
    classes = sorted(set(a["class"])) if "class" in a else [None]
    for cname in classes:
        sa = a[a["class"] == cname] if cname is not None else a
        sb = b[b["class"] == cname] if cname is not None else b
        sa, sb = sa.sort_values("id"), sb.sort_values("id")
        groups = sa["patient_id"].astype(str).to_numpy() if "patient_id" in sa else None
        if "score" in sa and "label" in sa:  # classification rows
            y = sa["label"].to_numpy(dtype=float)
            keep = ~np.isnan(y)
            pa, pb, y = sa["score"].to_numpy(float)[keep], sb["score"].to_numpy(float)[keep], y[keep]
            g = groups[keep] if groups is not None else None
            n_pos, n_neg = int((y == 1).sum()), int((y == 0).sum())
            if min(n_pos, n_neg) < 2:  # DeLong needs 2 of each: say so instead of a number
                rows.append({"metric": "auroc", "class": cname, "estimate_a": float("nan"),
                             "estimate_b": float("nan"), "difference": float("nan"),
                             "ci_low": float("nan"), "ci_high": float("nan"), "p_value": float("nan"),
                             "test": f"not tested: {n_pos} positives, {n_neg} negatives"})
            else:
                d = delong_test(pa, pb, y)
                boot = paired_bootstrap(lambda p, t: auroc(p, t), pa, pb, y, n_resamples=n_resamples,
                                        groups=g, seed=seed)
                rows.append({"metric": "auroc", "class": cname, "estimate_a": d.auc_a, "estimate_b": d.auc_b,
                             "difference": d.difference, "ci_low": float(np.asarray(boot.low).reshape(-1)[0]),
                             "ci_high": float(np.asarray(boot.high).reshape(-1)[0]), "p_value": d.p_value,
                             "test": "DeLong (CI: paired patient bootstrap)"})
            ca, cb = (pa >= threshold) == (y == 1), (pb >= threshold) == (y == 1)
            m = mcnemar_test(ca, cb)
            boot = paired_bootstrap(lambda p, t: np.mean(p == t), (pa >= threshold).astype(float),
                                    (pb >= threshold).astype(float), y, n_resamples=n_resamples,
                                    groups=g, seed=seed)
            rows.append({"metric": f"accuracy@{threshold}", "class": cname, "estimate_a": float(ca.mean()),
                         "estimate_b": float(cb.mean()), "difference": m["difference"],
                         "ci_low": float(np.asarray(boot.low).reshape(-1)[0]),
                         "ci_high": float(np.asarray(boot.high).reshape(-1)[0]), "p_value": m["p_value"],
                         "test": "McNemar exact (CI: paired patient bootstrap)"})
            continue
        for col in sorted(set(sa.columns) - _KEYS):
            va, vb = sa[col].to_numpy(dtype=float), sb[col].to_numpy(dtype=float)
            keep = ~(np.isnan(va) | np.isnan(vb))
            if keep.sum() < 2 or col.endswith(("_voxels", "_ml")):
                continue
            g = groups[keep] if groups is not None else None
            boot = paired_bootstrap(lambda p, t: np.mean(p), va[keep], vb[keep], None,
                                    n_resamples=n_resamples, groups=g, seed=seed)
            rows.append({"metric": col, "class": cname, "estimate_a": float(np.mean(va[keep])),
                         "estimate_b": float(np.mean(vb[keep])),
                         "difference": float(np.asarray(boot.difference).reshape(-1)[0]),
                         "ci_low": float(np.asarray(boot.low).reshape(-1)[0]),
                         "ci_high": float(np.asarray(boot.high).reshape(-1)[0]),
                         "p_value": float(np.asarray(boot.p_value).reshape(-1)[0]),
                         "test": "paired patient bootstrap of the mean"})
    if holm_correction:
        for row, p in zip(rows, holm([r["p_value"] for r in rows])):
            row["p_holm"] = p
    return rows


def cli_main(argv: list[str]) -> int:
    """``medimg-bench compare RUN_A RUN_B [--intersection] [--holm] [--out FILE]``."""
    ap = argparse.ArgumentParser(prog="medimg-bench compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("run_a")
    ap.add_argument("run_b")
    ap.add_argument("--intersection", action="store_true", help="compare the samples both runs scored")
    ap.add_argument("--different-data", action="store_true",
                    help="compare runs whose dataset fingerprints say they read different data")
    ap.add_argument("--holm", action="store_true", help="Holm-adjusted p-values (column p_holm)")
    ap.add_argument("--n-resamples", type=int, default=1000)
    ap.add_argument("--threshold", type=float, default=0.5, help="for accuracy / McNemar")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="also write the table as JSON here")
    ap.add_argument("--html", default=None, help="also write a report.html here: this table above both runs side by side")
    args = ap.parse_args(argv)
    try:
        rows = compare_runs(args.run_a, args.run_b, intersection=args.intersection,
                            n_resamples=args.n_resamples, seed=args.seed, threshold=args.threshold,
                            holm_correction=args.holm, different_data=args.different_data)
    except (ValueError, FileNotFoundError) as exc:
        print(f"medimg-bench compare: {exc}", file=sys.stderr)
        return 2
    head = f"{'metric':<18}{'class':<16}{'A':>9}{'B':>9}{'A-B':>9}{'95% CI':>22}{'p':>10}"
    print(head + ("  p_holm" if args.holm else ""))
    for r in rows:
        ci = f"[{r['ci_low']:.4f}, {r['ci_high']:.4f}]"
        line = (f"{r['metric']:<18}{str(r['class']):<16}{r['estimate_a']:>9.4f}{r['estimate_b']:>9.4f}"
                f"{r['difference']:>9.4f}{ci:>22}{r['p_value']:>10.4g}")
        print(line + (f"  {r['p_holm']:.4g}" if args.holm else ""))
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2, default=float))
    if args.html:
        from medimg_bench.report import write_report

        print(f"wrote {write_report([args.run_a, args.run_b], out=args.html, paired=rows)}")
    return 0
