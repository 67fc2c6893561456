"""``medimg-bench compare RUN_A RUN_B``: two runs on the same samples, per metric and class: each
run's value, the difference ``a − b`` with a paired bootstrap CI clustered by patient, and a
p-value — DeLong's test for AUROC, McNemar's for accuracy at a threshold, the paired bootstrap
(with a Wilcoxon signed-rank or McNemar test beside it) for per-sample metrics (Dice, HD95, VQA
accuracy, report scores) and for the summary figures a task's records allow recomputing
(``compare_figures``: 3DReasonKnee's micro grade accuracy, CXReasonBench's printed scores).
``--holm`` adjusts the p-values for the number of comparisons.

Each run is scored against **its own** labels, read from its ``samples.parquet``; runs whose labels
differ for the same sample are refused, naming the rows, unless ``--allow-label-mismatch``. Runs
over different sample sets are refused, naming the difference, unless ``--intersection``. Runs
scored against different label releases (the manifests' ``label_release``: NIH ChestX-ray14's 2017
and v2020 files) are refused, naming both, unless ``--different-label-release``."""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["compare_runs", "data_differences", "cli_main", "Comparison", "LabelMismatchError", "LABEL_COLUMNS"]

#: columns holding a sample's reference — what a run was scored against — in each task's table:
#: classification and phase recognition ``label``, VQA ``answer`` (+ type, options), reports
#: ``reference`` (+ its ``ref_*`` findings), segmentation the reference mask's ``target_voxels`` /
#: ``target_ml``, reconstruction the target volume's ``target_max`` / ``target_norm``;
#: ``patient_id`` too, since it decides how the bootstrap clusters
LABEL_COLUMNS = ("label", "answer", "answer_type", "options", "reference", "target_voxels", "target_ml",
                 "target_max", "target_norm", "patient_id")
_LABEL_PREFIXES = ("ref_",)
_KEYS = ("id", "class")
#: a run's task from its columns, first match wins (phase frames also hold ``score`` and ``label``);
#: else the manifest's ``task``
_TASKS = {"phase_recognition": ("video_id", "frame_index", "pred"), "classification": ("score", "label"),
          "segmentation": ("target_voxels",), "vqa": ("answer", "correct"),
          "report_generation": ("generated", "reference"), "reconstruction": ("slices", "target_max")}


#: manifest fields that decide how a generative run's replies were scored (the task's notes): the
#: judge (rubrics, judge identity, settings) and the reply's parse rule; compared, and told
_SCORING_FIELDS = ("judge", "parse", "option_files")  # option_files: content of scoring models, prompts
#: task figures a run's summary keeps beside its metrics that compare does not recompute (those it
#: does are in ``compare_figures``)
_SUMMARY_FIGURES = {
    "cxreasonbench": "the harness's per-task figures (Wilson intervals per stage, stage scores) and group "
                     "means are not compared; its printed scores (path1 / guidance Completion, Depth, "
                     "Consistency, Alignment) are, recomputed from the per-case records",
}


class LabelMismatchError(ValueError):
    """The two runs hold different labels for the same sample (see ``--allow-label-mismatch``)."""


class Comparison(list):
    """The rows of :func:`compare_runs` (a list of dicts), with ``labels`` (what was checked and
    how many rows differ) and ``notes`` (what the reader must know: samples left out, metrics not
    compared)."""

    def __init__(self, rows: list[dict[str, Any]], labels: dict[str, Any], notes: list[str]) -> None:
        super().__init__(rows)
        self.labels, self.notes = labels, notes


@dataclass
class _Run:
    path: Path
    samples: Any  # the ok rows
    summary: dict[str, Any]
    task: str
    n_failed: int = 0
    whole: bool = True  # the compared rows are all the run's ok rows (its summary describes them)
    name: str = "A"
    notes: list[str] = field(default_factory=list)


# -- loading ----------------------------------------------------------------------------------------
def _load(run: str | Path, name: str, run_seed: int | None) -> _Run:
    import pandas as pd

    path = Path(run)
    if not (path / "samples.parquet").exists() or not (path / "summary.json").exists():
        raise FileNotFoundError(f"compare: {str(run)!r} is not a run directory (samples.parquet and summary.json "
                                "needed)")
    samples = pd.read_parquet(path / "samples.parquet")
    summary = json.loads((path / "summary.json").read_text())
    manifest = json.loads((path / "manifest.json").read_text()) if (path / "manifest.json").exists() else {}
    if "seed" in samples.columns and samples["seed"].nunique() > 1 or run_seed is not None:
        samples, summary = _one_seed(path, samples, summary, run_seed)
    failed = samples["status"] != "ok" if "status" in samples.columns else np.zeros(len(samples), bool)
    n_failed = int(samples.loc[failed, "id"].nunique()) if failed.any() else 0
    ok = samples[~failed].copy()
    ok["id"] = ok["id"].astype(str)
    keys = [k for k in _KEYS if k in ok.columns]
    dup = ok[ok.duplicated(keys, keep=False)]
    if len(dup):
        raise ValueError(f"compare: run {name} ({path}) holds {len(dup)} rows with a repeated {'/'.join(keys)} "
                         f"(e.g. {dup[keys].head(3).astype(str).agg('/'.join, axis=1).tolist()}); one row per "
                         "sample (and class) is needed")
    task = next((t for t, cols in _TASKS.items() if all(c in ok.columns for c in cols)),
                str(manifest.get("task") or "per_sample"))
    return _Run(path, ok, summary, task, n_failed=n_failed, name=name)


def _one_seed(path: Path, samples: Any, summary: dict[str, Any], run_seed: int | None) -> tuple[Any, dict]:
    seeds = sorted(int(s) for s in samples["seed"].unique()) if "seed" in samples.columns else []
    if run_seed is None:
        raise ValueError(f"compare: {path} holds the seeds {seeds} of a protocol run; pass --run-seed S to compare "
                         "that seed of both runs")
    if run_seed not in seeds:
        raise ValueError(f"compare: {path} has no seed {run_seed} (seeds: {seeds or 'no seed column'})")
    own = path / "seeds" / str(run_seed) / "summary.json"
    summary = json.loads(own.read_text()) if own.exists() else summary
    return samples[samples["seed"] == run_seed].drop(columns=["seed"]), summary


# -- pairing and the label check --------------------------------------------------------------------
def _pair(a: _Run, b: _Run, intersection: bool) -> Any:
    """The rows of both runs side by side (suffixes ``_a``/``_b``), on the samples both scored."""
    if a.task != b.task:
        raise ValueError(f"compare: run A ({a.path}) is a {a.task} run and run B ({b.path}) a {b.task} run")
    ids_a, ids_b = set(a.samples["id"]), set(b.samples["id"])
    if ids_a != ids_b:
        only_a, only_b = sorted(ids_a - ids_b), sorted(ids_b - ids_a)
        if not intersection:
            raise ValueError(
                f"compare: the runs scored different samples: {len(only_a)} only in {str(a.path)!r} "
                f"(e.g. {only_a[:3]}), {len(only_b)} only in {str(b.path)!r} (e.g. {only_b[:3]}); a sample that "
                "failed in one run is missing there; pass --intersection to compare the common samples"
            )
        for run, only in ((a, only_a), (b, only_b)):
            if only:
                run.whole = False
                run.notes.append(f"{len(only)} sample(s) of run {run.name} left out (not scored by the other run)")
    keys = [k for k in _KEYS if k in a.samples.columns and k in b.samples.columns]
    if "class" in a.samples.columns and "class" in b.samples.columns:
        ca, cb = set(a.samples["class"].astype(str)), set(b.samples["class"].astype(str))
        if ca != cb:
            raise ValueError(f"compare: the runs have different classes: only in A {sorted(ca - cb)}, only in B "
                             f"{sorted(cb - ca)}")
    common = ids_a & ids_b
    return a.samples[a.samples["id"].isin(common)].merge(
        b.samples[b.samples["id"].isin(common)], on=keys, how="inner", suffixes=("_a", "_b"), validate="one_to_one"
    ).sort_values(keys, kind="stable").reset_index(drop=True)


def _label_columns(a: _Run, b: _Run) -> list[str]:
    cols = set(a.samples.columns) | set(b.samples.columns)
    named = [c for c in LABEL_COLUMNS if c in cols]
    return named + sorted(c for c in cols if c.startswith(_LABEL_PREFIXES))


def _same(va: Any, vb: Any) -> np.ndarray:
    """Row-wise equality, NaN equal to NaN; text compared as text."""
    x, y = np.asarray(va), np.asarray(vb)
    if x.dtype.kind in "biuf" and y.dtype.kind in "biuf":
        x, y = x.astype(float), y.astype(float)
        return (x == y) | (np.isnan(x) & np.isnan(y))
    return np.asarray([str(p) == str(q) for p, q in zip(x, y)], dtype=bool)


def _shown(value: Any) -> str:
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return f"{float(value):g}"
    return repr(str(value)) if len(str(value)) <= 60 else repr(str(value)[:57] + "...")


def _check_labels(a: _Run, b: _Run, merged: Any, allow: bool) -> dict[str, Any]:
    """Compare each run's labels row by row; raise :class:`LabelMismatchError` when they differ
    (unless ``allow``). Returns what was checked and the count of differing rows."""
    checked, differ = _label_columns(a, b), np.zeros(len(merged), dtype=bool)
    per_column, examples = {}, []
    keys = [k for k in _KEYS if k in merged.columns]
    for col in checked:
        if col in keys:
            continue
        if f"{col}_a" not in merged or f"{col}_b" not in merged:
            where = "A" if f"{col}_a" in merged else "B"
            per_column[col] = len(merged)
            examples.append(f"column {col!r} only in run {where}")
            differ[:] = True
            continue
        bad = ~_same(merged[f"{col}_a"], merged[f"{col}_b"])
        if bad.any():
            per_column[col] = int(bad.sum())
            differ |= bad
            for i in np.flatnonzero(bad)[:3]:
                row = merged.iloc[i]
                where = "/".join(str(row[k]) for k in keys)
                examples.append(f"{where} {col}: A={_shown(row[f'{col}_a'])}, B={_shown(row[f'{col}_b'])}")
    info = {"checked": [c for c in checked if c not in keys], "rows": len(merged), "differ": int(differ.sum()),
            "per_column": per_column, "examples": examples[:5]}
    if info["differ"] and not allow:
        raise LabelMismatchError(
            f"compare: the runs' labels differ in {info['differ']} of {len(merged)} rows "
            f"({', '.join(f'{c}: {n}' for c, n in per_column.items())}), e.g. {'; '.join(examples[:3])}. Each run's "
            "metrics were computed against its own labels, so a difference would mix the models with the labels. "
            "Pass --allow-label-mismatch to compare anyway (each run scored against its own labels; DeLong, "
            "which needs one set of labels, is replaced by the paired bootstrap)")
    if not info["checked"]:
        info["note"] = "no label column stored for this task: only sample ids were checked"
    return info


# -- the data check (dataset identity in the manifests) ----------------------------------------------
def data_differences(run_a: str | Path, run_b: str | Path) -> tuple[list[str], list[str]]:
    """``(data, options)``: the dataset-identity fields of two run directories' manifests that
    differ, as ``"field: A …, B …"`` — the manifest or the content of its files (``data``), the
    loader options (``options``). Runs written before the identity existed are compared by
    their fingerprint alone."""
    import logging

    from medimg_bench.engine.checkpoint import flatten

    def identity(run: Path) -> dict[str, Any]:
        path = Path(run) / "manifest.json"
        if not path.exists():
            logging.getLogger(__name__).warning("compare: %s has no manifest.json; its data is not checked", run)
            return {}
        ds = json.loads(path.read_text()).get("dataset") or {}
        return ds.get("identity") or {"fingerprint": ds.get("fingerprint")}

    def diff(a: Any, b: Any) -> list[str]:
        fa, fb = flatten(a), flatten(b)
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


def _scoring_differences(run_a: str | Path, run_b: str | Path) -> list[str]:
    """The scoring fields (:data:`_SCORING_FIELDS`) of two runs' manifests that differ, as
    ``"field: A …, B …"``: each run was scored its own way, so a difference also measures that."""
    from medimg_bench.engine.checkpoint import flatten

    def fields(run: str | Path) -> dict[str, Any]:
        path = Path(run) / "manifest.json"
        manifest = json.loads(path.read_text()) if path.exists() else {}
        return flatten({k: manifest.get(k) for k in _SCORING_FIELDS})

    fa, fb = fields(run_a), fields(run_b)
    return [f"{k}: A {_shown(fa.get(k))}, B {_shown(fb.get(k))}" for k in sorted(set(fa) | set(fb))
            if fa.get(k) != fb.get(k)]


def label_releases(run_a: str | Path, run_b: str | Path) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The ``label_release`` each run's manifest records (``None`` where its loader reads no
    release: all but ``nih_cxr14``, or a run written before releases were recorded)."""
    def one(run: Path) -> dict[str, Any] | None:
        p = run / "manifest.json"
        if not p.is_file():
            return None
        return (json.loads(p.read_text()).get("dataset") or {}).get("label_release")

    return one(Path(run_a)), one(Path(run_b))


def _check_label_release(run_a: str | Path, run_b: str | Path, *, allow: bool) -> str | None:
    """Refuse runs scored against different label releases (unless ``allow``); returns a note
    naming both when they differ and it is allowed, else ``None``."""
    ra, rb = label_releases(run_a, run_b)
    if not ra or not rb or ra.get("release") == rb.get("release"):
        return None
    said = (f"run A is scored against label release {ra.get('release')!r} ({ra.get('file')}), run B against "
            f"{rb.get('release')!r} ({rb.get('file')})")
    if not allow:
        raise ValueError(f"compare: {said}; the releases label some images differently, so the runs measure "
                         "different things; pass --different-label-release to compare them anyway (each run "
                         "scored against its own labels)")
    return said + ": each run scored against its own labels (--different-label-release)"


def _check_same_data(run_a: str | Path, run_b: str | Path, *, allow: bool, labels_allowed: bool) -> None:
    """Refuse runs whose data differ (unless ``allow``); warn when only the options do. With
    ``labels_allowed`` (``--allow-label-mismatch`` and labels that do differ) a manifest that differs
    is expected — the labels live in it — so only other bytes in the files are refused."""
    import logging

    data, options = data_differences(run_a, run_b)
    if labels_allowed:
        data = [d for d in data if not d.startswith("manifest_sha256")]
    if data and not allow:
        raise ValueError(
            f"compare: {str(run_a)!r} and {str(run_b)!r} read different data (dataset fields that "
            f"differ: {'; '.join(data[:4])}); a paired comparison needs the same samples with the "
            "same labels and bytes; pass --different-data to compare them anyway")
    if options:
        logging.getLogger(__name__).warning("compare: the runs read the data with other options: %s",
                                            "; ".join(options[:4]))


# -- rows -------------------------------------------------------------------------------------------
def _row(metric: str, cname: Any, est_a: float, est_b: float, boot: Any = None, *, p: float = math.nan,
         test: str, at: int = 0, **extra: Any) -> dict[str, Any]:
    """One table row; ``boot`` a paired bootstrap whose entry ``at`` is this row's."""
    first = (lambda v: float(np.asarray(v).reshape(-1)[at])) if boot is not None else (lambda v: math.nan)
    return {"metric": metric, "class": cname, "estimate_a": float(est_a), "estimate_b": float(est_b),
            "difference": float(est_a - est_b) if boot is None else first(boot.difference),
            "ci_low": first(boot.low) if boot is not None else math.nan,
            "ci_high": first(boot.high) if boot is not None else math.nan, "p_value": float(p), "test": test,
            **extra}


def _untested(metric: str, cname: Any, why: str, est_a: float = math.nan, est_b: float = math.nan) -> dict[str, Any]:
    return _row(metric, cname, est_a, est_b, test=f"not tested: {why}")


def _groups(part: Any) -> np.ndarray | None:
    return part["patient_id_a"].astype(str).to_numpy() if "patient_id_a" in part else None


def _classification_rows(a: _Run, b: _Run, merged: Any, *, labels_equal: bool, threshold: float,
                         n_resamples: int, seed: int) -> list[dict[str, Any]]:
    """AUROC (DeLong when both runs hold the same labels, else the paired bootstrap) and accuracy
    at ``threshold`` (McNemar) per class, each run against its own labels; a macro-AUROC row."""
    from medimg_bench.metrics.classification import auroc
    from medimg_bench.metrics.paired import mcnemar_test
    from medimg_bench.metrics.stats import delong_test, paired_bootstrap

    rows, macro = [], []
    classes = list(dict.fromkeys(merged["class"])) if "class" in merged else [None]
    for cname in classes:
        part = merged[merged["class"] == cname] if cname is not None else merged
        ya, yb = part["label_a"].to_numpy(float), part["label_b"].to_numpy(float)
        keep = ~(np.isnan(ya) | np.isnan(yb))
        dropped = int((np.isnan(ya) != np.isnan(yb)).sum())  # labelled in one run only
        pa, pb, ya, yb = part["score_a"].to_numpy(float)[keep], part["score_b"].to_numpy(float)[keep], ya[keep], yb[keep]
        g = _groups(part)
        g = g[keep] if g is not None else None
        counts = [(int((y == 1).sum()), int((y == 0).sum())) for y in (ya, yb)]
        if min(min(c) for c in counts) < 2:  # DeLong and a bootstrap need 2 of each: say so
            rows.append(_untested("auroc", cname, f"{counts[0][0]} positives, {counts[0][1]} negatives"))
        else:
            sa, sb = np.column_stack([pa, ya]), np.column_stack([pb, yb])
            boot = paired_bootstrap(lambda m: auroc(m[:, 0], m[:, 1]), sa, sb, None, n_resamples=n_resamples,
                                    groups=g, seed=seed)
            if labels_equal:
                d = delong_test(pa, pb, ya)
                rows.append(_row("auroc", cname, d.auc_a, d.auc_b, boot, p=d.p_value,
                                 test="DeLong (CI: paired patient bootstrap)", n_dropped=dropped))
            else:
                rows.append(_row("auroc", cname, float(boot.estimate_a.reshape(-1)[0]),
                                 float(boot.estimate_b.reshape(-1)[0]), boot,
                                 p=float(np.asarray(boot.p_value).reshape(-1)[0]),
                                 test="paired patient bootstrap, each run against its own labels",
                                 n_dropped=dropped))
            macro.append((pa, ya, pb, yb))
        ca, cb = (pa >= threshold) == (ya == 1), (pb >= threshold) == (yb == 1)
        if len(ca) >= 2:
            m = mcnemar_test(ca, cb)
            boot = paired_bootstrap("mean", ca.astype(float), cb.astype(float), None, n_resamples=n_resamples,
                                    groups=g, seed=seed)
            rows.append(_row(f"accuracy@{threshold}", cname, ca.mean(), cb.mean(), boot, p=m["p_value"],
                             test="McNemar exact (CI: paired patient bootstrap)"))
    if len(classes) > 1 and len(macro) == len(classes):
        rows.append(_macro_auroc(merged, classes, n_resamples=n_resamples, seed=seed))
    return rows


def _macro_auroc(merged: Any, classes: list[Any], *, n_resamples: int, seed: int) -> dict[str, Any]:
    """Mean over classes of the AUROC (each run against its own labels; unlabelled entries left
    out per class), with its paired patient bootstrap."""
    from medimg_bench.metrics.classification import auroc
    from medimg_bench.metrics.stats import paired_bootstrap

    wide = merged.pivot(index="id", columns="class")
    k = len(classes)

    def stack(run: str) -> np.ndarray:
        return np.column_stack([wide[(f"score_{run}", c)].to_numpy(float) for c in classes] +
                               [wide[(f"label_{run}", c)].to_numpy(float) for c in classes])

    def macro(m: np.ndarray) -> float:
        vals = []
        for j in range(k):
            y = m[:, k + j]
            ok = ~np.isnan(y)
            if ok.any() and 0 < np.nansum(y[ok]) < ok.sum():
                vals.append(float(auroc(m[ok, j], y[ok])))
        return float(np.mean(vals)) if len(vals) == k else math.nan

    pid = merged.drop_duplicates("id").set_index("id")
    g = pid.loc[wide.index, "patient_id_a"].astype(str).to_numpy() if "patient_id_a" in pid else None
    boot = paired_bootstrap(macro, stack("a"), stack("b"), None, n_resamples=n_resamples, groups=g, seed=seed)
    return _row("auroc", "macro", float(np.asarray(boot.estimate_a).reshape(-1)[0]),
                float(np.asarray(boot.estimate_b).reshape(-1)[0]), boot,
                p=float(np.asarray(boot.p_value).reshape(-1)[0]), test="paired patient bootstrap (mean over classes)")


def _per_sample_metrics(a: _Run, b: _Run) -> tuple[list[str], list[str]]:
    """Per-sample metrics both runs hold (summary kind ``per_sample`` with a column), and the
    ones only one run holds."""
    def held(run: _Run) -> list[str]:
        return [k for k, v in run.summary.get("metrics", {}).items()
                if v.get("kind") == "per_sample" and k in run.samples.columns]

    ha, hb = held(a), held(b)
    return [m for m in ha if m in hb], [m for m in dict.fromkeys(ha + hb) if m not in ha or m not in hb]


def _paired_test(va: np.ndarray, vb: np.ndarray, g: np.ndarray | None) -> tuple[float, str]:
    """The test beside the bootstrap: McNemar's exact test when every value is 0 or 1 (VQA
    correctness), else Wilcoxon's signed-rank test on per-patient mean differences (patients are
    the independent units; zero differences dropped, as scipy's default)."""
    from scipy.stats import wilcoxon

    from medimg_bench.metrics.paired import mcnemar_test

    if np.isin(va, (0.0, 1.0)).all() and np.isin(vb, (0.0, 1.0)).all():
        return mcnemar_test(va == 1, vb == 1)["p_value"], "McNemar exact on the 0/1 values"
    d = va - vb
    if g is not None:
        _, inv = np.unique(g, return_inverse=True)
        d = np.bincount(inv, weights=d) / np.bincount(inv)
    if not np.any(d != 0):
        return 1.0, "Wilcoxon signed-rank on per-patient mean differences"
    return float(wilcoxon(d).pvalue), "Wilcoxon signed-rank on per-patient mean differences"


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _per_sample_rows(a: _Run, b: _Run, merged: Any, metric: str, *, n_resamples: int,
                     seed: int) -> list[dict[str, Any]]:
    """The paired patient bootstrap of the mean difference of one per-sample metric, per class."""
    from medimg_bench.metrics.stats import paired_bootstrap

    rows = []
    # rows without a class hold no per-sample metric where others have one (phase recognition's
    # frames beside its per-video rows): only the classes named are compared
    named = [c for c in dict.fromkeys(merged["class"]) if not _missing(c)] if "class" in merged else []
    classes = named or [None]
    for cname in classes:
        part = merged[merged["class"] == cname] if cname is not None else merged
        va, vb = part[f"{metric}_a"].to_numpy(float), part[f"{metric}_b"].to_numpy(float)
        keep = ~(np.isnan(va) | np.isnan(vb))
        est = (float(np.nanmean(va)) if (~np.isnan(va)).any() else math.nan,
               float(np.nanmean(vb)) if (~np.isnan(vb)).any() else math.nan)
        g = _groups(part)
        va, vb, g = va[keep], vb[keep], (g[keep] if g is not None else None)
        if not (np.isfinite(va).all() and np.isfinite(vb).all()):
            n_inf = int((~np.isfinite(va) | ~np.isfinite(vb)).sum())
            rows.append(_untested(metric, cname, f"{n_inf} pair(s) hold an infinite value (the mean is infinite)",
                                  *est))
            continue
        if len(va) < 2 or (g is not None and len(set(g)) < 2):
            rows.append(_untested(metric, cname, f"{len(va)} pair(s) with a value in both runs", *est))
            continue
        boot = paired_bootstrap("mean", va, vb, None, n_resamples=n_resamples, groups=g, seed=seed)
        p2, name = _paired_test(va, vb, g)
        dropped = int((~keep).sum())
        note = f"; {dropped} pair(s) undefined in one run left out" if dropped else ""
        rows.append(_row(metric, cname, float(np.mean(va)), float(np.mean(vb)), boot,
                         p=float(np.asarray(boot.p_value).reshape(-1)[0]),
                         test=f"paired patient bootstrap of the mean (p); {name} (p_paired){note}",
                         p_paired=p2, n_dropped=dropped, run_estimate_a=est[0], run_estimate_b=est[1]))
    return rows


def _figure_rows(a: _Run, b: _Run, merged: Any, *, n_resamples: int, seed: int) -> list[dict[str, Any]]:
    """The task's summary figures (``compare_figures``) recomputed from both runs' paired records,
    with the paired patient bootstrap; each row's ``summary_key`` names the figure in the summary."""
    from medimg_bench.baselines.compare_figures import saved_value, task_figures
    from medimg_bench.metrics.stats import paired_bootstrap

    spec = task_figures(a.task)
    if spec is None:
        return []
    missing = [c for c in spec.columns if f"{c}_a" not in merged or f"{c}_b" not in merged]
    if missing:
        held = [p for _, p in spec.names for run in (a, b) if saved_value(run.summary, p) is not None]
        if held:  # else no run has the figures (3DReasonKnee without references): nothing to say
            a.notes.append(f"{spec.block}: figures not compared: the records of a run lack {missing} (an older run?)")
        return []
    g = _groups(merged)
    if len(merged) < 2 or (g is not None and len(set(g)) < 2):
        return [{**_untested(name, None, f"{len(merged)} paired row(s)"), "summary_key": path}
                for name, path in spec.names]
    boot = paired_bootstrap(spec.statistic, spec.stack(merged, "a"), spec.stack(merged, "b"), None,
                            n_resamples=n_resamples, groups=g, seed=seed)
    rows = []
    for j, (name, path) in enumerate(spec.names):
        est_a, est_b = float(np.asarray(boot.estimate_a)[j]), float(np.asarray(boot.estimate_b)[j])
        if not (math.isfinite(est_a) and math.isfinite(est_b)):
            rows.append({**_untested(name, None, "undefined in a run (no case reached it)", est_a, est_b),
                         "summary_key": path})
            continue
        rows.append(_row(name, None, est_a, est_b, boot, p=float(np.asarray(boot.p_value)[j]), at=j,
                         test=f"paired patient bootstrap of the summary figure {path} (from the records)",
                         summary_key=path))
    for run, key in ((a, "estimate_a"), (b, "estimate_b")):
        for r in rows:
            saved = saved_value(run.summary, r.get("summary_key", "")) if run.whole else None
            if saved is not None and math.isfinite(r[key]) and abs(saved - r[key]) > 2e-6:
                run.notes.append(f"run {run.name}'s {r['summary_key']} recomputed from samples.parquet is "
                                 f"{r[key]:.6f} but its summary.json says {saved}; the run directory is inconsistent")
    return rows


def _check_summaries(rows: list[dict[str, Any]], a: _Run, b: _Run, tol: float = 2e-6) -> None:
    """What compare computed for a run must be what the run's own summary says (when all of the
    run's rows were compared): a mismatch means compare read other labels or values than the run
    was scored on, and nothing is reported."""
    for run, key in ((a, "estimate_a"), (b, "estimate_b")):
        if not run.whole:
            continue
        for r in rows:
            entry = run.summary.get("metrics", {}).get(r["metric"])
            own = r.get(f"run_{key}")  # per-sample metrics: the run's mean over all its rows
            if own is None and r.get("n_dropped"):
                continue  # rows left out for the pairing: not the run's own set
            ours = r[key] if own is None else own
            if not entry or r["class"] == "macro" or entry.get("over") == "seeds" or not math.isfinite(ours):
                continue
            per_class = entry.get("per_class") or {}
            per = per_class.get(str(r["class"])) if r["class"] is not None else None
            if per is None and len(per_class) <= 1:
                per = entry.get("mean")
            saved = None if per is None else per.get("value", per.get("mean"))
            if saved is not None and abs(saved - ours) > tol:
                raise ValueError(f"compare: run {run.name}'s {r['metric']} ({r['class']}) recomputed from "
                                 f"samples.parquet is {ours:.6f} but its summary.json says {saved}; the run directory "
                                 "is inconsistent (edited after the run?); the table is computed from samples.parquet")


def compare_runs(
    run_a: str | Path, run_b: str | Path, *, intersection: bool = False, allow_label_mismatch: bool = False,
    n_resamples: int = 1000, seed: int = 0, threshold: float = 0.5, holm_correction: bool = False,
    run_seed: int | None = None, different_data: bool = False, different_label_release: bool = False,
) -> Comparison:
    """One row per (metric, class): ``estimate_a``, ``estimate_b`` (each run against its own
    labels), ``difference`` (a − b), ``ci_low``/``ci_high`` (paired patient bootstrap), ``p_value``
    and the ``test`` used (per-sample metrics also ``p_paired``). Raises
    :class:`LabelMismatchError` when the runs' labels differ (``allow_label_mismatch``), a
    ``ValueError`` for different sample sets (``intersection``), tasks, classes or seeds, and for
    runs whose manifests say they read other data (other bytes, or another manifest with the same
    labels: ``different_data``, or ``intersection`` where the sample sets differ by design), and
    for runs scored against different label releases (``different_label_release``, which also
    lets their labels differ)."""
    from medimg_bench.metrics.paired import holm

    release_note = _check_label_release(run_a, run_b, allow=different_label_release)
    a, b = _load(run_a, "A", run_seed), _load(run_b, "B", run_seed)
    merged = _pair(a, b, intersection)
    labels = _check_labels(a, b, merged, allow_label_mismatch or release_note is not None)
    _check_same_data(run_a, run_b, allow=different_data or intersection, labels_allowed=labels["differ"] > 0)
    rows: list[dict[str, Any]] = []
    if a.task == "classification":
        rows += _classification_rows(a, b, merged, labels_equal=labels["differ"] == 0, threshold=threshold,
                                     n_resamples=n_resamples, seed=seed)
    shared, lonely = _per_sample_metrics(a, b)
    for metric in shared:
        rows += _per_sample_rows(a, b, merged, metric, n_resamples=n_resamples, seed=seed)
    rows += _figure_rows(a, b, merged, n_resamples=n_resamples, seed=seed)
    try:  # a stale summary (run directory edited after the run): said, not hidden
        _check_summaries(rows, a, b)
    except ValueError as exc:
        a.notes.append(str(exc).removeprefix("compare: "))
    notes = a.notes + b.notes + [f"{m}: in one run only, not compared" for m in lonely]
    if release_note:
        notes.append(release_note)
    done = {r["metric"] for r in rows} | {"auroc"} if a.task == "classification" else {r["metric"] for r in rows}
    for m, entry in a.summary.get("metrics", {}).items():
        if entry.get("kind") == "dataset" and m not in done:
            notes.append(f"{m}: a dataset-level metric compare does not recompute from samples.parquet, not compared")
    notes += [f"{block}: {what}" for block, what in _SUMMARY_FIGURES.items() if block in a.summary]
    scoring = _scoring_differences(run_a, run_b)
    if scoring:
        notes.append(f"the runs were scored differently ({'; '.join(scoring[:4])}): each difference also measures "
                     "the scoring")
    if labels["differ"]:
        notes.append(f"labels differ in {labels['differ']} of {labels['rows']} rows: each run scored against its own "
                     "(--allow-label-mismatch)")
    if holm_correction:
        for row, p in zip(rows, holm([r["p_value"] for r in rows])):
            row["p_holm"] = p
    return Comparison(rows, labels, notes)


def cli_main(argv: list[str]) -> int:
    """``medimg-bench compare RUN_A RUN_B [--intersection] [--allow-label-mismatch] [--different-data]
    [--different-label-release] [--holm]
    [--run-seed S] [--out FILE] [--html FILE]``; exit 0 compared, 2 refused."""
    ap = argparse.ArgumentParser(prog="medimg-bench compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("run_a")
    ap.add_argument("run_b")
    ap.add_argument("--intersection", action="store_true", help="compare the samples both runs scored")
    ap.add_argument("--allow-label-mismatch", action="store_true",
                    help="compare runs whose labels differ for the same sample (refused by default): each run "
                    "is scored against its own labels, with the paired bootstrap instead of DeLong")
    ap.add_argument("--different-data", action="store_true",
                    help="compare runs whose dataset fingerprints say they read different data")
    ap.add_argument("--different-label-release", action="store_true",
                    help="compare runs scored against different label releases (NIH ChestX-ray14 2017 vs v2020; "
                    "refused by default): each run against its own labels")
    ap.add_argument("--holm", action="store_true", help="Holm-adjusted p-values (column p_holm)")
    ap.add_argument("--n-resamples", type=int, default=1000)
    ap.add_argument("--threshold", type=float, default=0.5, help="for accuracy / McNemar")
    ap.add_argument("--seed", type=int, default=0, help="of the bootstrap")
    ap.add_argument("--run-seed", type=int, default=None, help="the seed to compare in protocol runs over seeds")
    ap.add_argument("--out", default=None, help="also write the table as JSON here")
    ap.add_argument("--html", default=None, help="also write a report.html here: this table above both runs side by side")
    args = ap.parse_args(argv)
    try:
        rows = compare_runs(args.run_a, args.run_b, intersection=args.intersection,
                            allow_label_mismatch=args.allow_label_mismatch, n_resamples=args.n_resamples,
                            seed=args.seed, threshold=args.threshold, holm_correction=args.holm,
                            run_seed=args.run_seed, different_data=args.different_data,
                            different_label_release=args.different_label_release)
    except (ValueError, FileNotFoundError) as exc:
        print(f"medimg-bench compare: {exc}", file=sys.stderr)
        return 2
    _print(rows, args.holm)
    if args.out:  # a list of rows, as `medimg-bench report --paired` reads it
        Path(args.out).write_text(json.dumps(list(rows), indent=2, default=float))
    if args.html:
        from medimg_bench.report import write_report

        print(f"wrote {write_report([args.run_a, args.run_b], out=args.html, paired=list(rows))}")
    return 0


def _print(rows: Comparison, holm: bool) -> None:
    lab = rows.labels
    checked = ", ".join(lab["checked"]) or "none stored"
    state = "identical" if not lab["differ"] else f"DIFFER in {lab['differ']}"
    print(f"labels ({checked}): {state} over {lab['rows']} rows")
    width = max([18, *(len(r["metric"]) + 2 for r in rows)])  # summary figures have long names
    head = f"{'metric':<{width}}{'class':<16}{'A':>9}{'B':>9}{'A-B':>9}{'95% CI':>22}{'p':>10}"
    print(head + ("  p_holm" if holm else "") + "  test")
    for r in rows:
        ci = f"[{r['ci_low']:.4f}, {r['ci_high']:.4f}]"
        cname = "" if r["class"] is None else str(r["class"])
        line = (f"{r['metric']:<{width}}{cname:<16}{r['estimate_a']:>9.4f}{r['estimate_b']:>9.4f}"
                f"{r['difference']:>9.4f}{ci:>22}{r['p_value']:>10.4g}")
        print(line + (f"  {r['p_holm']:.4g}" if holm else "") + f"  {r['test']}")
    for note in rows.notes:
        print(f"note: {note}")
