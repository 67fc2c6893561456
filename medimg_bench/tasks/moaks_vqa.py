"""Questions answered with a JSON object and graded item by item (3DReasonKnee's MOAKS questions):
the volume becomes images under ``volume_sampling``, the question goes verbatim as the user text
after them, the reply is parsed under a named rule and scored by
:func:`~medimg_bench.metrics.text.moaks.score_answer` (docs/vlm.md, "3DReasonKnee")."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from medimg_bench.registry import register_task
from medimg_bench.tasks._generative import generation_settings, own_metric_spec
from medimg_bench.tasks.base import Task, TaskScores

__all__ = ["MOAKSTask", "REASONKNEE_SYSTEM"]

#: the system prompt of rajpurkarlab/3DReasonKnee bcc32ba ``code/zero_shot/qwen2vl.py``
REASONKNEE_SYSTEM = ("You are a radiologist. You are given a question and a series of knee MRI images "
                     "presented as a video. Please provide your answer in JSON format.")


class ReferenceAnswerError(ValueError):
    """A sample's reference answer is not a JSON object (a ``[target]`` failure)."""

    stage = "target"


@register_task("moaks_vqa", tags=("vqa", "generative", "structured", "3d"))
class MOAKSTask(Task):
    """Options: ``parse`` (a rule of :data:`~medimg_bench.metrics.text.moaks.PARSE_RULES`;
    ``qwen2vl`` by default), ``system`` (default :data:`REASONKNEE_SYSTEM`), ``volume_sampling``
    (default ``reasonknee3d_video``), ``max_new_tokens`` (1024, as the authors' scripts),
    ``box_inclusive`` (integer voxel-index boxes whose last index is inside)."""

    name = "moaks_vqa"
    default_metrics = {"moaks": {}}

    def __init__(self, *, parse: str = "qwen2vl", system: str | None = REASONKNEE_SYSTEM,
                 volume_sampling: str | Mapping[str, Any] | None = "reasonknee3d_video",
                 max_new_tokens: int | None = 1024, box_inclusive: bool = False) -> None:
        from medimg_bench.metrics.text.moaks import PARSE_RULES
        from medimg_bench.tasks.volume_prompts import resolve_sampling

        if parse not in PARSE_RULES:
            raise ValueError(f"moaks_vqa: parse must be one of {list(PARSE_RULES)}, got {parse!r}")
        self.parse, self.system = parse, system
        self.volume_sampling = resolve_sampling(volume_sampling)
        self.max_new_tokens, self.box_inclusive = max_new_tokens, bool(box_inclusive)

    def manifest_notes(self) -> dict[str, Any]:
        out: dict[str, Any] = {"parse": self.parse, "system": self.system}
        if self.volume_sampling is not None:
            out["volume_sampling"] = self.volume_sampling.to_dict()
        return out

    def build_metrics(self, spec: Any, classes: Sequence[str] | None) -> dict[str, Any]:
        return super().build_metrics(own_metric_spec(spec, "moaks"), classes)

    def _images(self, batch: dict[str, Any], i: int) -> tuple[list[Any], dict[str, Any] | None]:
        from medimg_bench.tasks._generative import sample_images
        from medimg_bench.tasks.volume_prompts import volume_images

        raw = batch["image"][i]
        if getattr(raw, "ndim", 0) != 4:
            return sample_images(batch, i), None
        if self.volume_sampling is None:
            raise ValueError(f"sample {batch['id'][i]!r}: a 3D volume needs task.options.volume_sampling")
        meta = (batch.get("meta") or [{}] * len(batch["id"]))[i] or {}
        return volume_images(raw, meta, self.volume_sampling, sample_id=str(batch["id"][i]))

    def predict(self, model: Any, batch: dict[str, Any]) -> dict[str, Any]:
        from medimg_bench.models.vlm.base import GenerationRequest

        settings = generation_settings("moaks_vqa", model, self.max_new_tokens)
        requests, sampled = [], []
        for i, sid in enumerate(batch["id"]):
            images, extra = self._images(batch, i)
            sampled.append(extra)
            requests.append(GenerationRequest(images=images, user=str(batch["question"][i]), system=self.system,
                                              settings=settings, sample_id=str(sid), key_extra=extra))
        return {"responses": model.generate(requests), "volume_sampling": sampled}

    def _reference(self, batch: dict[str, Any], i: int) -> dict[str, Any] | None:
        from medimg_bench.metrics.text.moaks import grade_items, parse_answer

        text = batch["answer"][i]
        if text is None:
            return None
        ref = parse_answer(text, rule="qwen2vl")
        if not ref.ok:
            raise ReferenceAnswerError(f"sample {batch['id'][i]!r}: the reference answer is not a JSON object "
                                       f"({ref.error}): {str(text)[:200]!r}")
        grades, boxes = grade_items(ref.obj)
        if not boxes and not any(isinstance(v, int) and not isinstance(v, bool) for v in grades.values()):
            raise ReferenceAnswerError(f"sample {batch['id'][i]!r}: the reference answer holds no integer grade "
                                       f"and no box: {str(text)[:200]!r}")
        return ref.obj

    def _score(self, batch: dict[str, Any], i: int, resp: Any) -> dict[str, Any]:
        from medimg_bench.metrics.text.moaks import answer_template, score_answer

        return score_answer(resp.text, self._reference(batch, i), rule=self.parse,
                            template=answer_template(str(batch["question"][i])), inclusive=self.box_inclusive)

    def _scored(self, batch: dict[str, Any], outputs: dict[str, Any]) -> list[dict[str, Any]]:
        """Each sample's reply graded once (:func:`~medimg_bench.metrics.text.moaks.score_answer`)."""
        from medimg_bench.models.vlm.requests import GenerationFailed  # tagged [predict]

        scored = []
        for i, (sid, resp) in enumerate(zip(batch["id"], outputs["responses"])):
            if resp.error:  # a failed request fails its sample, so a resumed run asks again
                raise GenerationFailed(f"sample {sid!r}: generation failed: {resp.error}")
            scored.append(self._score(batch, i, resp))
        return scored

    def score(self, batch: dict[str, Any], outputs: dict[str, Any], *,
              classes: Sequence[str] | None = None) -> TaskScores:
        """The graded replies and their item counts for the ``moaks`` metric, and the records,
        from one grading of each reply."""
        scored = self._scored(batch, outputs)
        counts = [int(one.get("n_items", 0)) for one in scored]
        return TaskScores(scored, counts, self._records(batch, outputs, scored))

    def metric_inputs(self, batch: dict[str, Any], outputs: dict[str, Any]) -> tuple[Any, Any]:
        preds, targets, _ = self.score(batch, outputs)
        return preds, targets

    def sample_records(self, batch: dict[str, Any], outputs: dict[str, Any], classes: Any) -> list[dict[str, Any]]:
        return self.score(batch, outputs, classes=classes).records

    def _records(self, batch: dict[str, Any], outputs: dict[str, Any],
                 scored: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The reply, its parse and graded items, the reference; the numbers (``grade_accuracy``,
        ``parse_failed`` ...) are the ``moaks`` metric's columns, which the run table adds: a
        record column of the same name would split both into ``_x``/``_y`` copies."""
        rows = []
        sampled = outputs.get("volume_sampling") or [None] * len(batch["id"])
        for i, (sid, resp) in enumerate(zip(batch["id"], outputs["responses"])):
            s = scored[i]
            meta = (batch.get("meta") or [{}] * len(batch["id"]))[i] or {}
            row = {"id": sid, "question_id": meta.get("question_id"), "finding": meta.get("finding"),
                   "response": resp.text, "prompt": resp.prompt, "cached": bool(resp.cached),
                   "parse_rule": self.parse, "parse_error": s["parse_error"],
                   "grades": json.dumps(s["items"], default=str), "reference": batch["answer"][i]}
            if "correct" in s:
                row["correct_items"] = json.dumps(s["correct"])
            if sampled[i]:
                row["volume_sampling"] = sampled[i]["volume_sampling"]["name"]
                row["volume_slices"] = json.dumps(sampled[i]["volume_sampling"]["slices"])
            rows.append(row)
        return rows
