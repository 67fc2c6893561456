"""``protocol=...`` runs: build the pieces from the composed config, run every seed, write the
run directory (``summary.json`` in the engine's shape, ``manifest.json``, ``samples.parquet``,
and ``seeds/<seed>/summary.json`` per seed)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

__all__ = ["run_protocol", "aggregate_seeds", "PROTOCOLS"]

PROTOCOLS = ("linear_probe", "knn", "few_shot", "fine_tune", "zero_shot", "retrieval", "mil", "regression_probe")


def run_protocol(cfg: Mapping[str, Any], run_dir: str | Path) -> Any:
    """Run the protocol ``cfg["protocol"]["name"]`` into ``run_dir``; returns the
    :class:`~medimg_bench.engine.results.Results` written there (the summary over seeds)."""
    from medimg_bench.engine.run_dir import check_run_dir

    c = dict(cfg)
    p = dict(c["protocol"])
    name = p.get("name")
    if name not in PROTOCOLS:
        raise ValueError(f"protocol.name={name!r}; known protocols: {list(PROTOCOLS)}")
    run_dir = Path(run_dir)
    from medimg_bench.engine.distributed import maybe_init_distributed

    _, world = maybe_init_distributed()  # under torchrun: DDP fine-tuning, rank 0 writes
    if world > 1:
        import torch.distributed as dist

        box = [str(run_dir)]
        dist.broadcast_object_list(box, src=0)
        run_dir = Path(box[0])
    unfinished = (run_dir / "seeds").is_dir() and not (run_dir / "summary.json").exists()
    if not (c.get("resume") and unfinished):  # else: fine-tune states under seeds/<seed>/train resume
        finished = check_run_dir(run_dir, resume=c.get("resume"), overwrite=bool(c.get("overwrite")))
        if finished is not None:
            return finished
    seeds = [int(s) for s in (p.get("seeds") or [c["seed"]])]
    c = _with_resolved_multilabel(c)
    start = time.perf_counter()
    fn = {"linear_probe": _probe, "knn": _probe, "few_shot": _probe, "fine_tune": _fine_tune,
          "zero_shot": _zero_shot, "retrieval": _retrieval, "mil": _mil, "regression_probe": _regression}[name]
    per_seed: dict[int, Any] = {}
    extra: dict[str, Any] = {}
    for seed in seeds:
        torch.manual_seed(seed)
        np.random.seed(seed)
        per_seed[seed] = fn(c, p, seed, run_dir, extra)
    return _write(c, p, run_dir, per_seed, extra, time.perf_counter() - start)


# -- shared pieces --------------------------------------------------------------------------------
def _datasets(c: Mapping[str, Any], p: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """(train, val, test) datasets; val is ``protocol.val_split`` or ``val_fraction`` of the
    training patients (drawn with a fixed seed, the same for every run seed)."""
    from medimg_bench.builders import build_dataset
    from medimg_bench.protocols.sampling import split_patients

    d = c["dataset"]
    test = build_dataset(d, d.get("split"))
    if not d.get("train_split"):
        raise ValueError(f"protocol {p['name']!r} needs dataset.train_split (dataset {d['name']!r} has none)")
    train = build_dataset(d, d["train_split"])
    if p.get("val_split"):
        return train, build_dataset(d, p["val_split"]), test
    rest, held = split_patients(list(train.manifest["patient_id"].astype(str)),
                                fraction=float(p.get("val_fraction", 0.2)), seed=0)
    ids = train.manifest["id"].astype(str).to_numpy()
    return train.subset(ids[rest]), train.subset(ids[held]), test


def _multilabel(c: Mapping[str, Any]) -> bool:
    return bool((c["task"].get("options") or {}).get("multilabel", True))


def _with_resolved_multilabel(c: Mapping[str, Any]) -> Mapping[str, Any]:
    """``c`` with ``task.options.multilabel`` left unset (null: the dataset decides, as
    ``ClassificationTask.bind_dataset`` does for a run) taken from the test dataset's
    ``multilabel`` (multi-label when the dataset does not say)."""
    opts = dict(c["task"].get("options") or {})
    if "multilabel" not in opts or opts["multilabel"] is not None:
        return c
    from medimg_bench.builders import build_dataset

    known = getattr(build_dataset(c["dataset"], c["dataset"].get("split")), "multilabel", None)
    opts["multilabel"] = True if known is None else bool(known)
    return {**c, "task": {**c["task"], "options": opts}}


def _device(c: Mapping[str, Any]) -> torch.device:
    from medimg_bench.engine.distributed import world
    from medimg_bench.engine.runner import resolve_device

    dev = torch.device(resolve_device(c.get("device")))
    if world()[1] > 1 and dev.type == "cuda" and dev.index is None:  # one GPU per rank
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def _score(c: Mapping[str, Any], probs: torch.Tensor, y: torch.Tensor, ids: Sequence[str],
           patients: Sequence[str], classes: Sequence[str], seed: int) -> tuple[dict[str, Any], pd.DataFrame]:
    """Summary (engine shape) and per-sample table of test-set probabilities."""
    from medimg_bench.engine.summary import summarize
    from medimg_bench.registry import create_task

    task = create_task(c["task"]["name"], **dict(c["task"].get("options") or {}))
    metrics = task.build_metrics(c.get("metrics"), classes)
    target = y if _multilabel(c) else y.long()
    for m in metrics.values():
        m.update(probs, target, None, ids=list(ids))
    batch = {"id": list(ids), "label": target}
    rec = task.sample_records(batch, {"probs": probs}, classes)
    samples = pd.DataFrame(rec) if isinstance(rec, dict) else pd.DataFrame(list(rec))
    pmap = dict(zip(ids, patients))
    samples["patient_id"] = samples["id"].map(pmap)
    samples["status"] = "ok"
    b = c.get("bootstrap") or {}
    summary = summarize(metrics, samples, patients=pmap, n_resamples=int(b.get("n_resamples", 1000)),
                        confidence=float(b.get("confidence", 0.95)), seed=seed)
    return summary, samples


def _encoder(c: Mapping[str, Any], dataset: Any) -> Any:
    from medimg_bench.builders import infer_channels as _infer_channels
    from medimg_bench.models.encoders import build_encoder

    with torch.random.fork_rng():  # a randomly initialised backbone is the same for every run seed
        torch.manual_seed(0)
        return build_encoder(c["model"], in_channels=_infer_channels(dataset)).to(_device(c))


def _model_key(c: Mapping[str, Any]) -> str:
    m = c["model"]
    opt = m.get("options") or {}
    return str(opt.get("model_name") or opt.get("network") or opt.get("path") or m["name"])


# -- probes ---------------------------------------------------------------------------------------
def _probe(c: Mapping[str, Any], p: Mapping[str, Any], seed: int, run_dir: Path, extra: dict[str, Any]) -> Any:
    from medimg_bench.protocols.embeddings import cached_embeddings
    from medimg_bench.protocols.probes import diagnose_probe, knn_predict, select_metric
    from medimg_bench.protocols.sampling import few_shot_indices

    if "emb" not in extra:  # once per run, shared by every seed
        train, val, test = _datasets(c, p)
        extra["test_exclusions"] = getattr(test, "exclusions", [])  # counted in summary.json
        enc = _encoder(c, test)
        e = dict(p.get("embeddings") or {})
        kw = {"model_name": _model_key(c), "cache_dir": e.get("cache_dir"), "batch_size": int(e.get("batch_size", 64)),
              "num_workers": int(e.get("num_workers", 0)), "amp": bool(c.get("amp"))}
        tr_split = f"{c['dataset']['train_split']}-train"
        va_split = p.get("val_split") or f"{c['dataset']['train_split']}-val"
        extra["emb"] = {
            "train": cached_embeddings(enc, train, split=tr_split, **kw),
            "val": cached_embeddings(enc, val, split=va_split, **kw),
            "test": cached_embeddings(enc, test, split=c["dataset"].get("split"), **kw),
        }
        extra["classes"] = list(test.classes)
        extra["embeddings"] = {k: {"n": len(v.ids), "dim": int(v.x.shape[1]), "source": v.source,
                                   "refused": v.refused, "failed": v.failed[:20], "seconds": round(v.seconds, 3)}
                               for k, v in extra["emb"].items()}
    emb, classes = extra["emb"], extra["classes"]
    ml = _multilabel(c)
    tr, va, te = emb["train"], emb["val"], emb["test"]
    yv = va.y if ml else va.y.reshape(-1)
    info: dict[str, Any] = {}
    if p["name"] == "few_shot":
        k = int(p["options"]["k"])
        idx = few_shot_indices(tr.y.numpy() if ml else tr.y.reshape(-1).numpy(), tr.patients, k=k,
                               classes=classes, seed=seed)
        tr = tr.take(idx)
        info["train_ids"] = tr.ids
    ytr = tr.y if ml else tr.y.reshape(-1)
    o = dict(p.get("options") or {})
    if p["name"] in ("linear_probe", "few_shot"):
        probe = _linear_probe(o, tr.x, ytr, va.x, yv, len(classes), ml, seed, _device(c))
        probs = probe.predict_proba(te.x)
        info.update(best_step=probe.best_step, best_val=probe.best_val, steps=probe.steps)
        if probe.kind == "clip_lbfgs":
            info.update(probe="clip_lbfgs", chosen_c=probe.chosen_c, sweep=probe.sweep)
        info["probe_check"] = diagnose_probe(probe, va.x, yv)
    else:  # knn: k picked on validation when a list is given
        ks = o.get("k", 20)
        ks = list(ks) if isinstance(ks, (list, tuple)) else [int(ks)]
        temp = float(o.get("temperature", 0.07))

        def run(k: int, x: torch.Tensor) -> torch.Tensor:
            return knn_predict(tr.x, ytr, x, num_classes=len(classes), multilabel=ml, k=k, temperature=temp)

        if len(ks) > 1:
            scores = {k: select_metric(run(k, va.x), yv, multilabel=ml) for k in ks}
            best_k = max(ks, key=lambda k: scores[k])
            info["val_by_k"] = scores
        else:
            best_k = ks[0]
        info["k"] = best_k
        probs = run(best_k, te.x)
    summary, samples = _score(c, probs, te.y if ml else te.y.reshape(-1), te.ids, te.patients, classes, seed)
    return {"summary": summary, "samples": samples, "info": info}


def _linear_probe(o: Mapping[str, Any], x: torch.Tensor, y: torch.Tensor, xv: torch.Tensor, yv: torch.Tensor,
                  k: int, ml: bool, seed: int, device: torch.device) -> Any:
    """The probe ``protocol.options.probe`` names: ``eva`` (SGD, the default) or ``clip_lbfgs``."""
    from medimg_bench.protocols.probes import PROBES, train_lbfgs_probe, train_linear_probe

    kind = o.get("probe") or "eva"
    if kind not in PROBES:
        raise ValueError(f"protocol.options.probe={kind!r}; known probes: {list(PROBES)}")
    if kind == "clip_lbfgs":
        opts = dict(o.get("clip_lbfgs") or {})
        return train_lbfgs_probe(x, y, xv, yv, num_classes=k, multilabel=ml, device=device,
                                 max_iter=int(opts.get("max_iter", 1000)),
                                 lambda_range=tuple(opts.get("lambda_range", (1e-6, 1e6))),
                                 steps_per_decade=int(opts.get("steps_per_decade", 8)),
                                 refit_on_train_val=bool(opts.get("refit_on_train_val", True)))
    lp = {n: o[n] for n in ("max_steps", "batch_size", "lr", "momentum", "weight_decay", "patience", "val_every")
          if o.get(n) is not None}
    return train_linear_probe(x, y, xv, yv, num_classes=k, multilabel=ml, seed=seed, device=device, **lp)


def _mil(c: Mapping[str, Any], p: Mapping[str, Any], seed: int, run_dir: Path, extra: dict[str, Any]) -> Any:
    from medimg_bench.protocols.mil import run_mil

    return run_mil(c, p, seed, extra, shared=_shared())


def _regression(c: Mapping[str, Any], p: Mapping[str, Any], seed: int, run_dir: Path, extra: dict[str, Any]) -> Any:
    from medimg_bench.protocols.regression import run_regression_probe

    return run_regression_probe(c, p, seed, extra, shared=_shared())


def _shared() -> dict[str, Any]:
    """The pieces protocol modules reuse (passed in: they must not import this module back)."""
    return {"datasets": _datasets, "encoder": _encoder, "model_key": _model_key, "device": _device,
            "score": _score}


# -- fine-tune ------------------------------------------------------------------------------------
def _fine_tune(c: Mapping[str, Any], p: Mapping[str, Any], seed: int, run_dir: Path, extra: dict[str, Any]) -> Any:
    from medimg_bench.builders import build_model as _build_model
    from medimg_bench.engine.distributed import is_main_process
    from medimg_bench.engine.runner import evaluate
    from medimg_bench.models.training import fit
    from medimg_bench.protocols.probes import select_metric
    from medimg_bench.protocols.sampling import fraction_indices
    from medimg_bench.registry import create_task

    train, val, test = _datasets(c, p)
    o = dict(p.get("options") or {})
    ml = _multilabel(c)
    classes = list(test.classes)
    labels = _manifest_labels(train, classes, ml)
    idx = fraction_indices(labels, list(train.manifest["patient_id"].astype(str)),
                           fraction=float(o.get("label_fraction", 1.0)), classes=classes, seed=seed)
    sub = train.subset(train.manifest["id"].astype(str).to_numpy()[idx])
    task = create_task(c["task"]["name"], **dict(c["task"].get("options") or {}))
    torch.manual_seed(seed)
    model = _build_model(c["model"], test).to(_device(c))
    bs = int(c.get("batch_size", 16))

    def val_fn(m: Any) -> float:
        from medimg_bench.datasets.check import SkipErrors, skip_collate

        loader = torch.utils.data.DataLoader(SkipErrors(val), batch_size=bs, collate_fn=skip_collate)
        ps, ys = [], []
        for b in loader:
            if b is None:  # unreadable validation samples are skipped (logged)
                continue
            ps.append(m.predict(b)["probs"].float().cpu())
            ys.append(torch.as_tensor(b["label"]).float())
        y = torch.cat(ys)
        return select_metric(torch.cat(ps), y if ml else y.reshape(-1), multilabel=ml)

    seed_dir = run_dir / "seeds" / str(seed)
    tr = fit(model, sub, loss_fn=task.loss, max_steps=int(o.get("max_steps", 200)), lr=float(o.get("lr", 1e-3)),
             weight_decay=float(o.get("weight_decay", 0.05)), batch_size=int(o.get("batch_size", 16)), seed=seed,
             warmup_steps=o.get("warmup_steps"), encoder_lr_scale=float(o.get("encoder_lr_scale", 0.1)),
             grad_clip=o.get("grad_clip", 1.0), val_fn=val_fn, val_every=int(o.get("val_every", 20)),
             patience=o.get("patience"), amp=bool(o.get("amp", c.get("amp", False))),
             deterministic=bool(o.get("deterministic", True)), checkpoint_dir=seed_dir / "train",
             checkpoint_every=int(o.get("checkpoint_every", 20)), progress=False,
             max_seconds=o.get("max_seconds"))
    if is_main_process():
        from safetensors.torch import save_file

        seed_dir.mkdir(parents=True, exist_ok=True)
        save_file({k: v.detach().cpu().contiguous() for k, v in model.module.state_dict().items()},
                  str(seed_dir / "model.safetensors"))
    b = c.get("bootstrap") or {}
    res = evaluate(model, test, task=task, metrics=c.get("metrics"), batch_size=bs, device=_device(c),
                   progress=False, n_resamples=int(b.get("n_resamples", 1000)),
                   confidence=float(b.get("confidence", 0.95)), seed=seed)
    info = {"label_fraction": float(o.get("label_fraction", 1.0)), "n_train": len(sub), "steps": tr.steps,
            "best_step": tr.best_step, "best_val": tr.best_val, "final_loss": tr.final_loss}
    return {"summary": res.summary, "samples": res.samples, "info": info}


def _manifest_labels(ds: Any, classes: Sequence[str], multilabel: bool) -> np.ndarray:
    """Labels from the manifest (no pixels read): class columns (multi-hot) or a ``label`` column."""
    m = ds.manifest
    if all(str(k) in m.columns for k in classes):
        return m[[str(k) for k in classes]].to_numpy(dtype=float)
    if "label" in m.columns:
        return pd.to_numeric(m["label"], errors="coerce").to_numpy(dtype=float)
    return np.stack([torch.as_tensor(ds[i]["label"]).float().numpy() for i in range(len(ds))])


# -- zero-shot ------------------------------------------------------------------------------------
def _zero_shot(c: Mapping[str, Any], p: Mapping[str, Any], seed: int, run_dir: Path, extra: dict[str, Any]) -> Any:
    from medimg_bench.builders import build_dataset
    from medimg_bench.engine.runner import evaluate
    from medimg_bench.registry import create_model, create_task

    d = c["dataset"]
    test = build_dataset(d, d.get("split"))
    opts = {k: v for k, v in dict(c["model"].get("options") or {}).items() if v is not None}
    if c["model"]["name"] != "clip":
        raise ValueError(f"protocol=zero_shot needs a vision-language model (model=clip_*), got {c['model']['name']!r}")
    opts.setdefault("classes", list(test.classes))
    opts["multilabel"] = _multilabel(c)
    model = create_model("clip", **opts)
    task = create_task(c["task"]["name"], **dict(c["task"].get("options") or {}))
    b = c.get("bootstrap") or {}
    res = evaluate(model, test, task=task, metrics=c.get("metrics"), batch_size=int(c.get("batch_size", 16)),
                   device=_device(c), progress=False, n_resamples=int(b.get("n_resamples", 1000)),
                   confidence=float(b.get("confidence", 0.95)), seed=seed)
    return {"summary": res.summary, "samples": res.samples, "info": {"templates": model.templates}}


# -- retrieval ------------------------------------------------------------------------------------
def _retrieval(c: Mapping[str, Any], p: Mapping[str, Any], seed: int, run_dir: Path, extra: dict[str, Any]) -> Any:
    from medimg_bench.builders import build_dataset
    from medimg_bench.registry import create_model

    d = c["dataset"]
    ds = build_dataset(d, d.get("split"))
    extra["test_exclusions"] = getattr(ds, "exclusions", [])  # counted in summary.json
    opts = {k: v for k, v in dict(c["model"].get("options") or {}).items()
            if v is not None and k not in ("num_classes", "in_channels", "multilabel")}
    model = create_model("clip", **opts).to(_device(c))
    b = c.get("bootstrap") or {}
    summary, samples = retrieval_scores(model, ds, ks=tuple(p.get("options", {}).get("ks", (1, 5, 10))),
                                        n_resamples=int(b.get("n_resamples", 1000)),
                                        confidence=float(b.get("confidence", 0.95)), seed=seed,
                                        text_key=str((p.get("options") or {}).get("text_key", "report")))
    return {"summary": summary, "samples": samples, "info": {}}


@torch.inference_mode()
def retrieval_scores(
    model: Any, dataset: Any, *, ks: Sequence[int] = (1, 5, 10), n_resamples: int = 1000, confidence: float = 0.95,
    seed: int = 0, text_key: str = "report", batch_size: int = 32,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """Image→text and text→image Recall@k (fraction of queries whose paired item ranks within k)
    and mean rank (1 = first; ties with the paired item count against it) over paired
    (image, report) samples, each with a bootstrap CI
    clustered by patient. Returns the summary (engine shape) and a per-query table."""
    from medimg_bench.metrics.stats import bootstrap_ci
    from medimg_bench.models.encoders import prepare_images

    info = model.info
    img, txt, ids, pats = [], [], [], []
    pmap = dict(zip(dataset.manifest["id"].astype(str), dataset.manifest["patient_id"].astype(str))) \
        if "patient_id" in dataset.manifest.columns else {}
    for i in range(len(dataset)):
        s = dataset[i]
        image = s["image"][0] if isinstance(s["image"], list) else s["image"]
        x = prepare_images(torch.as_tensor(image)[None].to(model.device), size=info["image_size"], mean=info["mean"],
                           std=info["std"], channels=3)
        img.append(model.module.encode_image(x).float().cpu())
        txt.append(str(s[text_key]))
        ids.append(str(s["id"]))
        pats.append(pmap.get(str(s["id"]), str(s["id"])))
    image_emb = torch.nn.functional.normalize(torch.cat(img), dim=1)
    text_emb = torch.cat([model._embed_texts(txt[j:j + batch_size]).cpu() for j in range(0, len(txt), batch_size)])
    sim = image_emb @ text_emb.T  # (N images, N texts); pair i ↔ i

    def ranks(s: torch.Tensor) -> torch.Tensor:
        # 1-based rank of the paired (diagonal) item in each row; ties count against it, so a
        # model scoring everything alike ranks last, not first
        return (s >= s.diagonal()[:, None]).sum(1)

    r = {"i2t": ranks(sim).double(), "t2i": ranks(sim.T).double()}
    cols: dict[str, torch.Tensor] = {}
    for d, rr in r.items():
        for k in ks:
            cols[f"{d}_R@{k}"] = (rr <= k).double()
        cols[f"{d}_mean_rank"] = rr
    out: dict[str, Any] = {"confidence": confidence, "n_resamples": n_resamples, "metrics": {}}
    for name, v in cols.items():
        ci = bootstrap_ci("mean", v[:, None], None, n_resamples=n_resamples, confidence=confidence,
                          groups=pats, seed=seed)
        val, lo, hi = (float(np.atleast_1d(t)[0]) for t in (ci.estimate, ci.low, ci.high))
        rank = name.endswith("mean_rank")
        out["metrics"][name] = {"kind": "per_sample", "higher_is_better": not rank,
                                "range": [1.0, None] if rank else [0.0, 1.0], "per_class": {},
                                "mean": {"value": round(val, 6), "ci_low": _r(lo), "ci_high": _r(hi)}}
    out.update(n_samples=len(ids), n_failed=0, failed_ids=[])
    samples = pd.DataFrame({"id": ids, "patient_id": pats, "status": "ok",
                            **{k: v.numpy() for k, v in cols.items()}})
    return out, samples


def _r(x: float) -> float | None:
    return None if math.isnan(x) else round(x, 6)


# -- writing and aggregating ----------------------------------------------------------------------
def _seed_stats(values: Sequence[float], confidence: float,
                bounds: Sequence[float | None] | None = None) -> dict[str, Any]:
    """Mean, standard deviation (ddof=1) and a Student-t CI of the mean over seeds, the interval
    clipped to the metric's range ``bounds`` (``[low, high]``, None = unbounded): a bounded metric
    (AUROC, accuracy, Dice…) never gets an interval outside [0, 1]; ``ci_clipped`` says when a
    bound was cut."""
    v = np.asarray([x for x in values if x is not None and not math.isnan(x)], dtype=float)
    if len(v) == 0:
        return {"value": None, "std": None, "ci_low": None, "ci_high": None, "n_seeds": 0}
    mean = float(v.mean())
    if len(v) < 2:
        return {"value": round(mean, 6), "std": None, "ci_low": None, "ci_high": None, "n_seeds": 1}
    from scipy import stats

    sd = float(v.std(ddof=1))
    half = float(stats.t.ppf(0.5 + confidence / 2, len(v) - 1)) * sd / math.sqrt(len(v))
    low, high = mean - half, mean + half
    lo, hi = (bounds if bounds is not None else (None, None))
    clipped = (lo is not None and low < lo) or (hi is not None and high > hi)
    low = max(low, lo) if lo is not None else low
    high = min(high, hi) if hi is not None else high
    return {"value": round(mean, 6), "std": round(sd, 6), "ci_low": round(low, 6),
            "ci_high": round(high, 6), "n_seeds": int(len(v)), "ci_clipped": bool(clipped)}


def metric_bounds(name: str, entry: Mapping[str, Any] | None = None,
                  class_name: str | None = None) -> list[float | None] | None:
    """``[low, high]`` of a summary metric's values: the ``range`` its summary entry holds (per
    class where the class is a statistic of its own), else the registered metric or column of
    that name (summaries written before ranges were recorded); None when unknown."""
    entry = entry or {}
    per_class = (entry.get("per_class") or {}).get(class_name) if class_name is not None else None
    if isinstance(per_class, Mapping) and per_class.get("range") is not None:
        return list(per_class["range"])
    if entry.get("range") is not None:
        return list(entry["range"])
    from medimg_bench.registry import METRICS

    for candidate in METRICS.list():
        cls = METRICS.get(candidate)
        cls = cls if isinstance(cls, type) else getattr(cls, "fn", cls)
        if candidate == name or name in getattr(cls, "value_ranges", {}) or name in getattr(cls, "metric_names", ()):
            bare = cls.__new__(cls)
            lo, hi = bare.range_of(name)
            return [None if math.isinf(lo) else lo, None if math.isinf(hi) else hi]
    return None


def _write(c: Mapping[str, Any], p: Mapping[str, Any], run_dir: Path, per_seed: Mapping[int, Any],
           extra: Mapping[str, Any], seconds: float) -> Any:
    from medimg_bench.engine.distributed import is_main_process
    from medimg_bench.engine.results import Results, redact_secrets
    from medimg_bench.engine.summary import exclusion_summary

    seeds = list(per_seed)
    for r in per_seed.values():  # the test set's items that are not samples (evaluate and mil add their own)
        if "n_excluded" not in r["summary"]:
            r["summary"].update(exclusion_summary(  # regression_probe keeps its one dataset in extra
                extra.get("test_exclusions", getattr(extra.get("dataset"), "exclusions", None))))
    conf = float((c.get("bootstrap") or {}).get("confidence", 0.95))
    if len(seeds) == 1:
        summary = dict(per_seed[seeds[0]]["summary"])
    else:  # the mean over seeds; each seed's own CI stays in seeds/<seed>/summary.json
        first = per_seed[seeds[0]]["summary"]
        summary = {"confidence": conf, "n_resamples": first.get("n_resamples"), "metrics": {},
                   "n_samples": first.get("n_samples"), "n_failed": first.get("n_failed"),
                   "failed_ids": first.get("failed_ids", []),
                   "n_excluded": first.get("n_excluded", 0), "exclusions": first.get("exclusions", [])}
        for name, m in first["metrics"].items():
            vals = [per_seed[s]["summary"]["metrics"][name].get("mean", {}).get("value") for s in seeds]
            bounds = metric_bounds(name, m)
            entry = {"kind": m.get("kind"), "higher_is_better": m.get("higher_is_better"), "range": bounds,
                     "per_class": {}, "mean": _seed_stats(vals, conf, bounds), "over": "seeds"}
            for cname in m.get("per_class", {}):
                key = "value" if "value" in m["per_class"][cname] else "mean"
                cv = [per_seed[s]["summary"]["metrics"][name]["per_class"][cname].get(key) for s in seeds]
                st = _seed_stats(cv, conf, metric_bounds(name, m, cname))
                entry["per_class"][cname] = {key: st["value"], "ci_low": st["ci_low"], "ci_high": st["ci_high"],
                                             "std": st["std"], "ci_clipped": st.get("ci_clipped", False)}
            summary["metrics"][name] = entry
    summary["protocol"] = {"name": p["name"], "seeds": seeds, "options": dict(p.get("options") or {}),
                           "per_seed": {str(s): {n: m.get("mean", {}).get("value")
                                                 for n, m in r["summary"]["metrics"].items()}
                                        for s, r in per_seed.items()},
                           "info": {str(s): jsonable(r["info"]) for s, r in per_seed.items()}}
    if extra.get("embeddings"):
        summary["protocol"]["embeddings"] = extra["embeddings"]
    _probe_warnings(summary, per_seed)
    samples = pd.concat([r["samples"].assign(seed=s) for s, r in per_seed.items()], ignore_index=True)
    manifest = {"name": f"{p['name']}/{c['dataset']['name']}", "protocol": p["name"], "seeds": seeds,
                "wall_time_s": round(seconds, 3), "world_size": _world_size()}
    results = Results(name=manifest["name"], task=None, samples=samples, summary=summary, manifest=manifest)
    if is_main_process():
        config = redact_secrets(dict(c))
        results.save(run_dir, config=config, plots=False, overwrite=bool(c.get("overwrite") or c.get("resume")))
        for s, r in per_seed.items():
            d = run_dir / "seeds" / str(s)
            d.mkdir(parents=True, exist_ok=True)
            (d / "summary.json").write_text(json.dumps(jsonable({**r["summary"], "info": r["info"]}), indent=2))
        _print(results)
    return results


def _probe_warnings(summary: dict[str, Any], per_seed: Mapping[int, Any]) -> None:
    """``summary["protocol"]["probe_learned"]`` and a ``summary["warnings"]`` line (also logged)
    for every seed whose linear probe did not learn (see :func:`~medimg_bench.protocols.probes.diagnose_probe`)."""
    import logging

    checks = {s: r["info"]["probe_check"] for s, r in per_seed.items() if "probe_check" in r["info"]}
    if not checks:
        return
    summary["protocol"]["probe_learned"] = all(ch["learned"] for ch in checks.values())
    lines = []
    for s, ch in checks.items():
        if not ch["learned"]:
            lines.append(f"seed {s}: the {ch['probe']} linear probe did not learn: " + "; ".join(ch["reasons"]) +
                         " — its test metrics describe an untrained head, not the embeddings")
        lines += [f"seed {s}: {w}" for w in ch["warnings"]]
    if lines:
        summary.setdefault("warnings", []).extend(lines)
        for line in lines:
            logging.getLogger("medimg_bench.protocols").warning(line)


def _print(results: Any) -> None:
    p = results.summary["protocol"]
    print(f"protocol {p['name']} seeds {p['seeds']} ({results.name})")
    for name, m in results.summary["metrics"].items():
        mean = m.get("mean") or {}
        extra = f" ± {mean['std']:.4f} (sd over {m.get('over', 'seeds')})" if mean.get("std") is not None else ""
        print(f"  {name:24s} {mean.get('value')}{extra}  CI [{mean.get('ci_low')}, {mean.get('ci_high')}]")
    for line in results.summary.get("warnings", []):
        print(f"  WARNING {line}")
    s = results.summary
    if s.get("n_failed") or s.get("n_excluded"):  # nothing leaves the test set unseen
        print(f"  {s.get('n_samples')} samples, {s.get('n_failed') or 0} failed {s.get('failed_ids') or ''}, "
              f"{s.get('n_excluded') or 0} excluded")
        for e in (s.get("exclusions") or [])[:10]:
            print(f"  excluded {e['id']} ({e['file']}): {e['reason']}")


def jsonable(o: Any) -> Any:
    from medimg_bench.engine.results import jsonable as j

    return j(o)


def aggregate_seeds(run_dirs: Sequence[str | Path]) -> pd.DataFrame:
    """One row per (configuration minus seed) × metric over protocol run directories: ``mean``,
    ``std`` (ddof=1), Student-t ``ci_low``/``ci_high`` over seeds clipped to the metric's range
    (``ci_clipped``), ``n_seeds``, ``seeds``,
    plus ``protocol``, ``model``, ``dataset`` and ``config`` (the JSON the runs were grouped by).
    A run holding several seeds itself contributes each of its seeds."""
    rows: dict[str, dict[str, Any]] = {}
    for d in map(Path, run_dirs):
        summary_path, manifest_path = d / "summary.json", d / "manifest.json"
        if not summary_path.exists() or not manifest_path.exists():
            raise ValueError(f"{d}: not a run directory (summary.json and manifest.json needed)")
        summary = json.loads(summary_path.read_text())
        manifest = json.loads(manifest_path.read_text())
        config = dict(manifest.get("config") or {})
        for k in ("seed", "output_dir", "run_name", "resume", "overwrite", "progress"):
            config.pop(k, None)
        if isinstance(config.get("protocol"), dict):
            config["protocol"] = {k: v for k, v in config["protocol"].items() if k != "seeds"}
        key = json.dumps(config, sort_keys=True, default=str)
        per_seed = (summary.get("protocol") or {}).get("per_seed")
        if not per_seed:
            per_seed = {str((manifest.get("config") or {}).get("seed", 0)):
                        {n: m.get("mean", {}).get("value") for n, m in summary.get("metrics", {}).items()}}
        g = rows.setdefault(key, {"config": config, "values": {}, "bounds": {}})
        for s, metrics in per_seed.items():
            for n, v in metrics.items():
                g["values"].setdefault(n, {})[int(s)] = v
                g["bounds"].setdefault(n, metric_bounds(n, summary.get("metrics", {}).get(n)))
    out = []
    conf = 0.95
    for key, g in rows.items():
        cfg = g["config"]
        for metric, by_seed in g["values"].items():
            st = _seed_stats(list(by_seed.values()), conf, g["bounds"].get(metric))
            out.append({"protocol": (cfg.get("protocol") or {}).get("name"),
                        "model": _model_key(cfg) if cfg.get("model") else None,
                        "dataset": (cfg.get("dataset") or {}).get("name"), "metric": metric,
                        "mean": st["value"], "std": st["std"], "ci_low": st["ci_low"], "ci_high": st["ci_high"],
                        "ci_clipped": bool(st.get("ci_clipped", False)),
                        "n_seeds": st["n_seeds"], "seeds": ",".join(str(s) for s in sorted(by_seed)),
                        "config": key})
    return pd.DataFrame(out, columns=["protocol", "model", "dataset", "metric", "mean", "std", "ci_low", "ci_high",
                                      "ci_clipped", "n_seeds", "seeds", "config"])


def write_seed_table(multirun_dir: str | Path) -> Path:
    """``aggregate_seeds`` over every protocol run below ``multirun_dir``, written as
    ``seeds.parquet`` and ``seeds.md`` there; returns the Markdown path."""
    root = Path(multirun_dir)
    dirs = sorted({q.parent for q in root.rglob("summary.json") if (q.parent / "manifest.json").exists()})
    table = aggregate_seeds(dirs)
    table.to_parquet(root / "seeds.parquet", index=False)
    shown = table.drop(columns=["config"])
    lines = ["| " + " | ".join(shown.columns) + " |", "|" + "---|" * len(shown.columns)]
    for _, r in shown.iterrows():
        lines.append("| " + " | ".join("" if v is None or (isinstance(v, float) and math.isnan(v))
                                       else (f"{v:.4f}" if isinstance(v, float) else str(v)) for v in r) + " |")
    md = root / "seeds.md"
    md.write_text(f"# Seeds of {root}\n\n" + "\n".join(lines) + "\n")
    return md


def _world_size() -> int:
    from medimg_bench.engine.distributed import world

    return world()[1]
