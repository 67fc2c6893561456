"""Optional LLM-judge answer extraction for VQA: where the strict cascade (or VLMEvalKit's
``can_infer``) cannot read which option a closed or multiple-choice answer chose, a judge model
— any generative adapter — is shown the question, the options and the raw answer and asked for
one option letter, or ``Z`` when the answer picks none.

The prompt is fixed (:data:`JUDGE_PROMPT`), written for medimg_bench after the shape of
VLMEvalKit's choice-extraction prompt (``build_prompt`` in
``vlmeval/dataset/utils/multiple_choice.py``, open-compass/VLMEvalKit): an instruction, two worked
examples (one match, one "none"), then the case. The judge's reply is read strictly
(:func:`parse_judge_reply`): it must be one valid option letter (surrounding spaces, quotes,
brackets and a final period allowed), nothing else. ``Z``, a letter that is not an option, or any
other text leaves the question **unparsed** (wrong, counted in ``unparsed_rate``) — there is no
retry with a different prompt and never a random letter. Judge requests go through the judge
adapter's response cache like any other call (key: judge identity + prompt + settings), so a
re-run asks the judge nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["JUDGE_PROMPT", "judge_prompt", "parse_judge_reply", "build_judge", "YES_NO_OPTIONS"]

JUDGE_PROMPT = (
    "You are grading how a model answered a single-choice question. You are given the question, "
    "its options and the model's answer. Decide which one option the answer chose or clearly "
    "means. If the answer chooses no option, several options, or means something that matches "
    "none of them, reply Z. Reply with one uppercase letter only: one of {letters}, or Z.\n"
    "Example 1:\n"
    "Question: Which organ is shown?\n"
    "Options: A. liver B. lung C. heart\n"
    "Answer: this looks like the right lung to me\n"
    "Reply: B\n"
    "Example 2:\n"
    "Question: Which organ is shown?\n"
    "Options: A. liver B. lung C. heart\n"
    "Answer: a kidney\n"
    "Reply: Z\n"
    "Now the case to grade:\n"
    "Question: {question}\n"
    "Options: {options}\n"
    "Answer: {answer}\n"
    "Reply:"
)

#: the options shown to the judge for a closed yes/no question (A → yes, B → no)
YES_NO_OPTIONS = ("yes", "no")

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def judge_prompt(question: str, options: Sequence[str], answer: str) -> str:
    """The judge's prompt for one answer (options listed "A. … B. …" on one line)."""
    letters = _LETTERS[: len(options)]
    listed = " ".join(f"{letters[i]}. {o}" for i, o in enumerate(options))
    return JUDGE_PROMPT.format(letters=", ".join(letters), question=str(question).strip(),
                               options=listed, answer=str(answer or "").strip())


def parse_judge_reply(text: str | None, n_options: int) -> str | None:
    """The option letter of a judge's reply, or None (unparsed) for ``Z``, a letter that is not
    one of the ``n_options`` options, or anything that is not a single letter."""
    m = re.fullmatch(r"""\s*["'`*(\[]*\s*([A-Z])\s*[)\]"'`*]*\s*\.?\s*""", text or "")
    if not m:
        return None
    letter = m.group(1).upper()
    return letter if letter in _LETTERS[:n_options] and letter != "Z" else None


def build_judge(spec: Any) -> Any:
    """A judge adapter from ``spec``: None / a mapping without ``model`` → no judge; an object with
    ``generate`` (or ``{model: adapter}``) → itself; ``{model: NAME, options: {...}}`` →
    ``create_model(NAME, **options)``
    (options set to None are dropped, as the run pipeline does for models)."""
    if spec is None:
        return None
    if hasattr(spec, "generate"):
        return spec
    if not isinstance(spec, Mapping):
        raise TypeError(f"vqa judge: expected a generative adapter or {{model, options}}, got {type(spec).__name__}")
    unknown = set(spec) - {"model", "options"}
    if unknown:
        raise ValueError(f"vqa judge: unknown key(s) {sorted(unknown)}; allowed: model, options")
    name = spec.get("model")
    if not name:
        return None
    if hasattr(name, "generate"):  # an adapter object given as the model
        return name
    from medimg_bench.registry import create_model

    options = {str(k): v for k, v in dict(spec.get("options") or {}).items() if v is not None}
    try:
        judge = create_model(str(name), **options)
    except (TypeError, ValueError) as exc:  # the adapter names its own options: say where they live
        raise type(exc)(str(exc).replace("model.options.", "scoring.judge.options.")
                        + " (the judge's options are set under scoring.judge.options)") from exc
    if not hasattr(judge, "generate"):
        raise TypeError(f"vqa judge: model {name!r} is not a generative adapter (no generate)")
    return judge
