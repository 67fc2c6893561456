"""One VQA question's answers scored: the profile's rule (:mod:`~medimg_bench.metrics.text.
vqa_profiles`) on each CircularEval rotation, an LLM judge's letter where the rule left a
closed / multiple-choice answer unparsed (:mod:`~medimg_bench.metrics.text.judge`), and an
open-answer rubric's verdicts. The ``vqa`` task builds prompts and asks the models; this module
turns their replies into the scored dict the ``vqa`` metric and the run's records both read, so
each answer is scored once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["VQAScorer", "rotated_question", "judge_shown_options"]


def rotated_question(options: Sequence[str] | None, answer: Any, shift: int) -> tuple[Any, Any]:
    """``(options, answer)`` of a question as CircularEval's rotation ``shift`` shows them (the
    answer a letter; None stays None)."""
    from medimg_bench.metrics.text.vqa import rotate_options

    if shift and options:
        opts, gt = rotate_options(options, str(answer).strip().upper() if answer is not None else "A", shift)
        return opts, (gt if answer is not None else None)
    return options, answer


def judge_shown_options(kind: str, scored: Mapping[str, Any], options: Sequence[str] | None) -> list[str] | None:
    """The options a judge is shown for an answer the rule left unparsed, or None when the
    question is not one a judge may settle (open questions, closed ones with a non-yes/no
    reference, answers the rule parsed)."""
    from medimg_bench.metrics.text.judge import YES_NO_OPTIONS

    if not scored.get("unparsed"):
        return None
    if kind == "mcq" and options:
        return list(options)
    if kind == "closed" and scored.get("rule") == "yes_no":
        return list(YES_NO_OPTIONS)
    return None


class VQAScorer:
    """Scores answers under the profile ``profile`` (a name of ``vqa_profiles.PROFILES``) with
    its ``options`` (``candidates``, ``variant``)."""

    def __init__(self, profile: str, *, options: Mapping[str, Any] | None = None) -> None:
        from medimg_bench.metrics.text.vqa_profiles import PROFILES

        if profile not in PROFILES:
            raise ValueError(f"vqa: unknown scoring profile {profile!r}; available: {list(PROFILES)}")
        self.profile = profile
        self.options = dict(options or {})

    def rule(self, text: str, *, answer: Any, kind: str, options: Sequence[str] | None) -> dict[str, Any]:
        """One answer scored by the profile's rule alone (``parsed``, ``correct``, ``unparsed``,
        ``rule``, ``harness`` …, see ``score_vqa_answer``)."""
        from medimg_bench.metrics.text.vqa_profiles import PROFILES

        return PROFILES[self.profile].score(text, answer=answer, answer_type=kind, options=options, **self.options)

    def first_pass(self, text: str, *, answer: Any, kind: str, options: Sequence[str] | None,
                   shift: int = 0) -> tuple[dict[str, Any], list[str] | None]:
        """The rule's score of rotation ``shift`` and the options to show a judge (None: no
        judge needed)."""
        opts, gt = rotated_question(options, answer, shift)
        scored = self.rule(text, answer=gt, kind=kind, options=opts)
        return scored, judge_shown_options(kind, scored, opts)

    def rotation(self, text: str, *, answer: Any, kind: str, options: Sequence[str] | None, shift: int = 0,
                 judge_reply: str | None = None, first: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Rotation ``shift``'s answer scored by the rule (``first``: that score, already made),
        then — where the rule left it unparsed and a judge replied — by the judge's letter (a
        reply that is not an option leaves it unparsed). ``parsed_by``: "cascade", "judge" or None."""
        from medimg_bench.metrics.text.judge import parse_judge_reply
        from medimg_bench.metrics.text.vqa import normalize_answer

        opts, gt = rotated_question(options, answer, shift)
        scored = dict(first) if first is not None else self.rule(text, answer=gt, kind=kind, options=opts)
        scored["parsed_by"] = None if scored.get("unparsed") else "cascade"
        shown = judge_shown_options(kind, scored, opts) if judge_reply is not None else None
        if shown is None:
            return scored
        scored["judge_response"] = judge_reply
        letter = parse_judge_reply(judge_reply, len(shown))
        if letter is None:
            return scored
        if kind == "mcq":
            parsed, hit = letter, gt is not None and letter == str(gt).strip().upper()
        else:
            parsed = shown[ord(letter) - ord("A")]
            hit = gt is not None and parsed == normalize_answer(gt)
        scored.update(parsed=parsed, unparsed=0.0, rule="judge", parsed_by="judge")
        if gt is not None:
            scored["correct"] = float(hit)
            # VLMEvalKit asks its judge where exact matching fails: its figure takes the verdict
            scored["harness"] = {k: float(hit) for k in scored.get("harness", {})}
        return scored

    def question(self, rotations: Sequence[tuple[int, str]], *, answer: Any, kind: str,
                 options: Sequence[str] | None, judge_replies: Mapping[int, str] | None = None,
                 first: Mapping[int, Mapping[str, Any]] | None = None, graded: Mapping[str, Any] | None = None,
                 rubric: Any = None) -> dict[str, Any]:
        """The scored dict of one question: its first rotation's score (:meth:`rotation`), the
        open-answer rubric's score and verdicts (``graded`` by ``rubric``: ``judge_score``,
        ``judge_labels`` as category indices, ``judge2_*``) and, with several rotations of a
        multiple-choice question, ``circular_correct`` (every rotation right). ``rotations``:
        ``(shift, text)``; ``judge_replies`` / ``first``: per shift."""
        judge_replies, first = judge_replies or {}, first or {}

        def one(shift: int, text: str) -> dict[str, Any]:
            return self.rotation(text, answer=answer, kind=kind, options=options, shift=shift,
                                 judge_reply=judge_replies.get(shift), first=first.get(shift))

        scored = one(*rotations[0])
        if graded is not None and graded.get("labels") is not None:
            cats = rubric.categories
            scored["judge_score"] = graded["score"]
            scored["judge_labels"] = [cats.index(lab) for lab in graded["labels"]]
            if "second_label" in graded:
                scored["judge2_label"] = cats.index(graded["second_label"])
                scored["judge2_score"] = rubric.score(graded["second_label"])
        if len(rotations) > 1 and answer is not None and kind == "mcq":
            ok = scored["correct"] == 1.0 and all(one(shift, text)["correct"] == 1.0 for shift, text in rotations[1:])
            scored["circular_correct"] = float(ok)
        return scored
