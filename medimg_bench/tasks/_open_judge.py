"""Open answers graded by an LLM judge (``scoring.judge.rubric``): the requests a generative task
sends to the judge (and to an optional second judge) and what it keeps of the replies. The rubrics,
the reply readers and the agreement statistics are in :mod:`medimg_bench.metrics.text.open_judge`.

Every judgment is a request to a generative adapter at temperature 0 (the judge's other settings
kept, ``max_new_tokens`` from the rubric), so it goes through the adapter's response cache: a
finished run re-runs with no judge call. Repeat ``r > 0`` of a judgment carries
``key_extra={"judge_repeat": r}``: each repeat is its own cache entry and is really asked (a
served judge is not always deterministic at temperature 0 — batching, kernels — and repeats are
how that shows); repeat 0 has no extra key, so a run with ``repeats=1`` shares its judgments
with any earlier one.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from medimg_bench.metrics.text.judge import build_judge
from medimg_bench.metrics.text.open_judge import Rubric, rubric_spec

__all__ = ["OpenAnswerGrader", "split_judge_spec"]

log = logging.getLogger(__name__)

_OPEN_KEYS = ("rubric", "rubric_file", "repeats", "second")


def split_judge_spec(spec: Any) -> tuple[Any, dict[str, Any]]:
    """``(letter-judge spec, open-grading spec)`` from a ``scoring.judge`` value: the first is what
    :func:`~medimg_bench.metrics.text.judge.build_judge` takes (``{model, options}`` or an
    adapter); the second the rubric keys (empty when none is set)."""
    if spec is None or hasattr(spec, "generate") or not isinstance(spec, Mapping):
        return spec, {}
    spec = dict(spec)
    open_part = {k: spec.pop(k) for k in _OPEN_KEYS if k in spec}
    return spec, open_part


class OpenAnswerGrader:
    """Grades open answers with ``judge`` under ``rubric``, ``repeats`` times each, and with
    ``second`` (another judge, once each) when given."""

    def __init__(self, judge: Any, rubric: Rubric, *, repeats: int = 1, second: Any = None) -> None:
        if judge is None:
            raise ValueError("scoring.judge.rubric needs a judge: set scoring.judge.model (and its options)")
        self.judge, self.rubric, self.repeats, self.second = judge, rubric, int(repeats), second
        for who, adapter in (("judge", judge), ("second judge", second)):
            if adapter is not None and float(adapter.settings.temperature) != 0.0:
                log.warning("open-answer %s: temperature %s forced to 0", who, adapter.settings.temperature)

    @classmethod
    def from_spec(cls, judge: Any, spec: Mapping[str, Any]) -> OpenAnswerGrader | None:
        """A grader from the open-grading keys of ``scoring.judge`` (None when no rubric is set)."""
        rubric, repeats = rubric_spec(spec)
        if rubric is None:
            if spec.get("second") and (spec["second"] if hasattr(spec["second"], "generate")
                                       else dict(spec["second"]).get("model")):
                raise ValueError("scoring.judge.second needs scoring.judge.rubric")
            return None
        return cls(judge, rubric, repeats=repeats, second=build_judge(spec.get("second")))

    def _settings(self, adapter: Any) -> Any:
        return dataclasses.replace(adapter.settings, temperature=0.0, max_new_tokens=self.rubric.max_new_tokens)

    def _requests(self, items: Sequence[tuple[str, str, str, str]], repeats: int, adapter: Any) -> list[Any]:
        from medimg_bench.models.vlm.base import GenerationRequest

        settings = self._settings(adapter)
        out = []
        for sid, question, reference, response in items:
            system, user = self.rubric.messages(question, reference, response)
            for r in range(repeats):
                out.append(GenerationRequest(
                    images=[], user=user, system=system, settings=settings,
                    sample_id=f"{sid}#grade" if r == 0 else f"{sid}#grade{r}",
                    key_extra={"judge_repeat": r} if r else None))
        return out

    def grade(self, items: Sequence[tuple[str, str, str, str]]) -> list[dict[str, Any]]:
        """One dict per ``(sample_id, question, reference, response)``: ``labels`` (k verdicts),
        ``replies`` (k raw replies), ``score`` (mean verdict score), ``error`` (a failed judge
        request, else None) and, with a second judge, ``second_label`` / ``second_reply``. All
        requests of a batch go in one ``generate`` call per judge."""
        if not items:
            return []
        k = self.repeats
        first = self.judge.generate(self._requests(items, k, self.judge))
        second = self.second.generate(self._requests(items, 1, self.second)) if self.second is not None else None
        out = []
        for i, (sid, *_rest) in enumerate(items):
            resps = first[i * k:(i + 1) * k]
            errors = [r.error for r in resps if r.error]
            one: dict[str, Any] = {"replies": [r.text for r in resps], "error": None}
            if second is not None and second[i].error:
                errors.append(f"second judge: {second[i].error}")
            if errors:
                one["error"] = f"sample {sid!r}: the open-answer judge's request failed: {errors[0]}"
                out.append(one)
                continue
            one["labels"] = [self.rubric.parse(r.text) for r in resps]
            one["score"] = sum(self.rubric.score(lab) for lab in one["labels"]) / k
            if second is not None:
                one["second_reply"] = second[i].text
                one["second_label"] = self.rubric.parse(second[i].text)
            out.append(one)
        return out

    def identity(self) -> dict[str, Any]:
        """What ``manifest.json["judge"]`` pins: rubric, prompt hash, judge fingerprints, settings."""
        out: dict[str, Any] = {**self.rubric.identity(), "repeats": self.repeats,
                               "judge": self.judge.fingerprint(),
                               "settings": self._settings(self.judge).to_dict()}
        if self.second is not None:
            out["second_judge"] = self.second.fingerprint()
            out["second_settings"] = self._settings(self.second).to_dict()
        return out
