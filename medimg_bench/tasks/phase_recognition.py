"""Surgical phase recognition over video datasets (``task=phase_recognition``).

Frames are the samples (``cholec80``, ``pitvis``, ``video_frames`` with ``clip_length: null``):
any classifier predicts one frame at a time (``probs`` ``(B, K)``), or ``model=predictions``
serves per-frame predictions from a table (:mod:`medimg_bench.models.predictions.frames`). The
phase metrics (:mod:`medimg_bench.metrics.phase_frames`) assemble each video's sequence from the
frames' ``meta`` (``video_id``, ``frame_index``, ``timestamp``), score videos as the challenge
does and report one row per video, so the engine's CIs resample videos.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from medimg_bench.metrics.base import Metric
from medimg_bench.registry import METRICS, create_metric, register_task
from medimg_bench.tasks.base import Task

__all__ = ["PhaseRecognitionTask"]


def _stage(err: Exception, stage: str) -> Exception:
    err.stage = stage  # type: ignore[attr-defined]  # the runner tags the failure with it
    return err


@register_task("phase_recognition", tags=("video", "phase"))
class PhaseRecognitionTask(Task):
    """One phase per frame; metrics per video. ``class_names`` and ``num_classes`` of the
    dataset go to every metric tagged ``phase`` (the others get ``class_names`` only)."""

    name = "phase_recognition"
    default_metrics = {"phase_frames": {}}
    #: metric inputs and records are per frame: the engine may score blocks of batches at once
    rowwise = True

    def __init__(self, *, multilabel: bool = False) -> None:
        if multilabel:
            raise ValueError("phase_recognition: one phase per frame (multilabel must be false)")

    def loss(self, logits: torch.Tensor, batch: dict[str, Any]) -> torch.Tensor:
        target = torch.as_tensor(batch["label"]).to(logits.device).long()
        return torch.nn.functional.cross_entropy(logits, target)

    def build_metric(
        self, name: str, registry_name: str, options: dict[str, Any], classes: Sequence[str] | None
    ) -> Metric:
        base: dict[str, Any] = {"class_names": list(classes)} if classes else {}
        if classes and "phase" in METRICS.entry(registry_name).tags:
            base["num_classes"] = len(classes)
        return create_metric(registry_name, **{**base, **options})

    def metric_inputs(self, batch: dict[str, Any], outputs: dict[str, Any]) -> tuple[Any, Any]:
        target = torch.as_tensor(batch["label"])
        if target.ndim != 1:
            raise _stage(ValueError(
                f"phase_recognition scores single frames, got labels of shape {tuple(target.shape)} "
                "(a clip dataset: set dataset.options.clip_length=null)"), "target")
        if "probs" in outputs:
            preds = outputs["probs"]
            if not bool(torch.isfinite(preds).all()):
                raise _stage(ValueError("model returned NaN or inf scores"), "predict")
        elif "labels" in outputs:
            preds = torch.as_tensor(outputs["labels"])
        else:
            raise _stage(ValueError(f"model outputs have neither 'probs' nor 'labels': {sorted(outputs)}"), "predict")
        return preds, target.to(preds.device)

    def sample_records(
        self, batch: dict[str, Any], outputs: dict[str, Any], classes: Sequence[str] | None
    ) -> dict[str, Any]:
        """Columns, one row per frame: ``id``, ``video_id``, ``frame_index``, ``timestamp``,
        ``label``, ``pred`` (phase indices) and ``score`` (the predicted phase's probability;
        NaN for stored labels)."""
        meta = batch.get("meta") or [{}] * len(batch["id"])
        if "probs" in outputs:
            probs = outputs["probs"].detach().float().cpu()
            score, pred = probs.max(1)
            score_np = score.double().numpy()
        else:
            pred = torch.as_tensor(outputs["labels"]).cpu()
            score_np = np.full(pred.shape[0], np.nan)
        ids = np.empty(len(batch["id"]), dtype=object)
        ids[:] = list(batch["id"])
        videos = np.empty(len(meta), dtype=object)
        videos[:] = [str(m.get("video_id", "")) for m in meta]
        return {
            "id": ids,
            "video_id": videos,
            "frame_index": np.asarray([int(m.get("frame_index", -1)) for m in meta], dtype=np.int64),
            "timestamp": np.asarray([float(m.get("timestamp", np.nan)) for m in meta], dtype=np.float64),
            "label": torch.as_tensor(batch["label"]).cpu().numpy().astype(np.int64),
            "pred": pred.numpy().astype(np.int64),
            "score": score_np,
        }

    def plots(self, results: Any, out_dir: Path) -> list[Path]:
        path = plot_phase_ribbons(results.samples, out_dir / "phase_ribbons.png", title=results.name)
        return [path] if path else []


def plot_phase_ribbons(samples: Any, path: Path, *, title: str = "", max_videos: int = 12) -> Path | None:
    """Ground truth above prediction, one pair of colour ribbons per video (the first
    ``max_videos`` by id), frames in order; returns the PNG path (None without frame rows)."""
    need = {"video_id", "frame_index", "timestamp", "label", "pred", "status"}
    if not need <= set(samples.columns):
        return None
    ok = samples[samples["status"] == "ok"]
    videos = sorted(ok["video_id"].dropna().unique())[:max_videos]
    if not videos:
        return None
    from medimg_bench.tasks.plots import pyplot

    plt = pyplot()
    fig, axes = plt.subplots(len(videos), 1, figsize=(8, 0.7 * len(videos) + 0.6), dpi=100, squeeze=False)
    k = int(max(ok["label"].max(), ok["pred"].max())) + 1
    for ax, vid in zip(axes[:, 0], videos):
        v = ok[ok["video_id"] == vid].sort_values(["frame_index", "timestamp"])
        rows = np.stack([v["label"].to_numpy(), v["pred"].to_numpy()]).astype(float)
        ax.imshow(rows, aspect="auto", interpolation="nearest", cmap="tab20", vmin=0, vmax=max(k - 1, 1))
        ax.set_yticks([0, 1], ["truth", "pred"], fontsize=7)
        ax.set_xticks([])
        ax.set_ylabel(str(vid), rotation=0, ha="right", va="center", fontsize=7)
    axes[0, 0].set_title(f"phases per frame {title}".strip(), fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
