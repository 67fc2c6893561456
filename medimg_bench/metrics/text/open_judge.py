"""Open answers graded by an LLM judge under a named rubric, and how far the grades agree.

A :class:`Rubric` is a prompt template (``{question}``, ``{answer}`` = the reference,
``{response}`` = the model's answer), the role it is sent in (user text, or system text with a
fixed query layout), the verdicts it can give and the rule that reads the judge's reply. The
prompts are written for medimg_bench; each rubric names the harness whose judging it follows,
and ``prompt_file=`` swaps in that harness's own prompt text (same placeholders) so its numbers
can be reproduced exactly:

* ``correctness`` (ours): the reply must be ``CORRECT`` or ``INCORRECT`` (a final
  ``Verdict: X`` line also counts); anything else is *unparsed* and scores 0.
* ``medevalkit`` — follows MedEvalKit's open-answer judge as OmniBrainBench runs it
  (``get_compare_messages`` and ``extract(result, "judge")`` in ``utils/utils.py``,
  CUHK-AIM-Group/OmniBrainBench commit 88427de): one user message; the reply's
  ``<judge>…</judge>`` contents (every such span, joined by a space; the whole reply when there
  is none) equal to ``0`` is correct, anything else incorrect. We additionally mark a reply that
  is neither ``0`` nor ``1`` as *unparsed* (still incorrect, as there).
* ``cxreasonbench_init`` — follows CXReasonBench's stage judge (``return_scoring_result`` in
  ``evaluation/scoring.py``, ttumyche/CXReasonBench commit 72357fe): the instructions are the
  system text, the user text is ``- Question: …- Answer 1: <reference> - Answer 2: <response>``;
  ``true`` anywhere in the lower-cased reply is correct, else ``idk`` → IDK, else ``n/a`` →
  N/A, else incorrect (the order of its checks).

Scores: correct = 1, every other verdict 0. With ``repeats = k`` each answer is judged ``k``
times (temperature 0; each repeat is its own cache entry) and its score is the mean of its k
verdict scores. Agreement (:func:`judge_agreement`): between repeats the share of answers whose
k verdicts are all equal, the mean pairwise agreement and Fleiss' kappa; with a second judge,
the share of answers where its verdict equals the first judge's first repeat and Cohen's kappa —
each with a percentile bootstrap CI over answers (1,000 resamples, seed 0). Fleiss' kappa equals
``statsmodels.stats.inter_rater.fleiss_kappa`` and Cohen's kappa ``sklearn.metrics.
cohen_kappa_score`` (``tests/metrics/text/test_open_judge.py``).
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Rubric", "RUBRICS", "load_rubric", "judge_agreement", "fleiss_kappa", "cohen_kappa",
           "medevalkit_extract"]

_FIELDS = {"question", "answer", "response"}


@dataclass(frozen=True)
class Rubric:
    """A named judging rule (see the module docstring). ``labels``: the verdicts, the first is
    "correct"; ``parse(reply) -> label`` returns one of them or ``"unparsed"``."""

    name: str
    follows: str
    template: str
    role: str  # "user": the template is the user text; "system": the instructions (query fixed)
    labels: tuple[str, ...]
    parse: Callable[[str | None], str]
    max_new_tokens: int = 512
    query: str | None = None  # the user text when role == "system"
    source: str = "builtin"  # "builtin" or the prompt file's path

    @property
    def categories(self) -> tuple[str, ...]:
        """Every label a verdict can take (the rubric's, then ``unparsed``)."""
        return (*self.labels, "unparsed")

    def score(self, label: str) -> float:
        return 1.0 if label == self.labels[0] else 0.0

    def messages(self, question: str, answer: str, response: str) -> tuple[str | None, str]:
        """``(system, user)`` texts of the judge request for one answer."""
        values = {"question": str(question).strip(), "answer": str(answer).strip(),
                  "response": str(response or "").strip()}
        if self.role == "system":
            return self.template, (self.query or "").format(**values)
        return None, self.template.format(**values)

    def identity(self) -> dict[str, Any]:
        """What the manifest pins: name, harness followed, source and the SHA-256 of the text."""
        text = f"{self.role}\n{self.template}\n{self.query or ''}"
        return {"rubric": self.name, "follows": self.follows, "source": self.source,
                "prompt_sha256": hashlib.sha256(text.encode()).hexdigest()}


def _check_template(name: str, template: str, where: str) -> str:
    try:
        names = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as exc:
        raise ValueError(f"judge rubric {name}: {where} is not a valid template ({exc}); "
                         "write literal braces as {{ and }}") from exc
    unknown = names - _FIELDS
    if unknown:
        raise ValueError(f"judge rubric {name}: {where} has unknown placeholder(s) {sorted(unknown)}; "
                         f"allowed: {sorted(_FIELDS)}")
    return template


# -- reply readers -----------------------------------------------------------------------------
def _parse_correctness(reply: str | None) -> str:
    text = str(reply or "").strip()
    m = re.search(r"verdict\s*:\s*\**\s*(correct|incorrect)\b", text, re.I)
    word = m.group(1) if m else re.sub(r"^[\s*\"'`]+|[\s*\"'`.!]+$", "", text)
    word = word.lower()
    return word if word in ("correct", "incorrect") else "unparsed"


def medevalkit_extract(text: str | None, tag: str = "judge") -> str:
    """MedEvalKit's ``extract(text, tag)``: the contents of every ``<tag>…</tag>`` joined by a
    space and stripped; the whole text when there is none; ``""`` for an empty reply."""
    if not text:
        return ""
    start_tag, end_tag = f"<{tag}>", f"</{tag}>"
    out, start = "", text.find(start_tag)
    while start != -1:
        end = text.find(end_tag, start + len(start_tag))
        if end == -1:
            break
        out += text[start + len(start_tag):end] + " "
        start = text.find(start_tag, end + len(end_tag))
    return out.strip() or text


def _parse_medevalkit(reply: str | None) -> str:
    value = medevalkit_extract(reply, "judge")
    return "correct" if value == "0" else "incorrect" if value == "1" else "unparsed"


def parse_cxreasonbench(reply: str | None) -> str:
    low = str(reply or "").lower()
    if "true" in low:
        return "true"
    if "idk" in low:
        return "idk"
    if "n/a" in low:
        return "n/a"
    return "false"


_CORRECTNESS = (
    "You grade a model's answer to a medical question against the reference answer written by "
    "an expert. The answer is CORRECT when it gives the same finding, diagnosis or value as the "
    "reference, in any wording, or an equivalent clinical interpretation of it; it is INCORRECT "
    "when it contradicts the reference, gives a different or additional conclusion that changes "
    "the meaning, hedges between options, or does not answer.\n\n"
    "Question: {question}\nReference answer: {answer}\nModel's answer: {response}\n\n"
    "Reply with one word: CORRECT or INCORRECT."
)
_MEDEVALKIT = (
    "Decide whether the user's answer to the question is correct, judged against the standard "
    "answer. It is correct when it means the same as the standard answer or is an accepted "
    "interpretation of it, even if it is worded differently; otherwise it is incorrect.\n\n"
    "Question: {question}\n\nStandard answer: {answer}\n\nUser's answer: {response}\n\n"
    "Answer in exactly this format, with 0 for correct and 1 for incorrect:\n"
    "<think>a short justification</think>\n<judge>0 or 1</judge>\n\n"
    "Example:\n<think>The standard answer is the left temporal lobe and the user names the left "
    "temporal lobe as well, so they agree.</think>\n<judge>0</judge>"
)
_CXREASONBENCH_INIT = (
    "You compare two answers to a multiple-choice question about a chest X-ray. Answer 1 is the "
    "reference option (for example \"(a) Yes\"); Answer 2 is a model's reply, which may explain "
    "itself and end with \"FINAL ANSWER: ...\" (if it does not, take the option it states as its "
    "answer, e.g. after \"The answer is\"). Reply IDK if Answer 2 chooses \"I don't know\". Reply "
    "True if Answer 2 chooses the same option as Answer 1 — the same letter in any case, or the "
    "same option without its letter or in slightly different words, or an answer whose meaning "
    "matches the question's intent and Answer 1. Otherwise reply False. Output IDK, True or False "
    "and nothing else."
)

RUBRICS: dict[str, Rubric] = {
    "correctness": Rubric("correctness", "medimg_bench (ours)", _CORRECTNESS, "user",
                          ("correct", "incorrect"), _parse_correctness, max_new_tokens=16),
    "medevalkit": Rubric(
        "medevalkit",
        "MedEvalKit get_compare_messages + extract(<judge>) as run by OmniBrainBench "
        "(CUHK-AIM-Group/OmniBrainBench 88427de, utils/utils.py)",
        _MEDEVALKIT, "user", ("correct", "incorrect"), _parse_medevalkit, max_new_tokens=512),
    "cxreasonbench_init": Rubric(
        "cxreasonbench_init",
        "CXReasonBench return_scoring_result, init-stage judge (ttumyche/CXReasonBench 72357fe, "
        "evaluation/scoring.py, prompt.py)",
        _CXREASONBENCH_INIT, "system", ("true", "false", "idk", "n/a"), parse_cxreasonbench,
        max_new_tokens=500, query="- Question: {question}- Answer 1: {answer} - Answer 2: {response}"),
}


def load_rubric(name: str, *, prompt_file: str | Path | None = None) -> Rubric:
    """The rubric ``name``; with ``prompt_file`` its prompt text is read from that file (UTF-8,
    the rubric's placeholders; for a system-role rubric the file holds the instructions)."""
    if name not in RUBRICS:
        raise ValueError(f"unknown judge rubric {name!r}; available: {sorted(RUBRICS)}")
    rubric = RUBRICS[name]
    if prompt_file is None:
        return rubric
    path = Path(prompt_file)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"judge rubric {name}: cannot read the prompt file {str(path)!r}: {exc}") from exc
    if not text.strip():
        raise ValueError(f"judge rubric {name}: the prompt file {str(path)!r} is empty")
    template = text if rubric.role == "system" else _check_template(name, text, f"prompt file {str(path)!r}")
    from dataclasses import replace

    return replace(rubric, template=template, source=str(path))


# -- agreement ---------------------------------------------------------------------------------
def _counts(labels: np.ndarray, n_categories: int) -> np.ndarray:
    """``(N, C)`` counts of each category among each answer's ratings (``labels`` ``(N, k)`` ints)."""
    out = np.zeros((labels.shape[0], n_categories), dtype=np.float64)
    for j in range(labels.shape[1]):
        np.add.at(out, (np.arange(labels.shape[0]), labels[:, j]), 1.0)
    return out


def fleiss_kappa(labels: Any, n_categories: int | None = None) -> float:
    """Fleiss' kappa of ``labels`` ``(N answers, k ratings)`` (category ints, k >= 2 equal for all
    answers). NaN when every rating is one category (chance agreement is 1)."""
    lab = np.asarray(labels, dtype=np.int64)
    if lab.ndim != 2 or lab.shape[1] < 2 or lab.shape[0] == 0:
        raise ValueError(f"fleiss_kappa needs (N >= 1, k >= 2) ratings, got shape {lab.shape}")
    return float(_fleiss_from_counts(_counts(lab, int(n_categories or lab.max() + 1))[None])[0])


def _fleiss_from_counts(counts: np.ndarray) -> np.ndarray:
    """Fleiss' kappa for a batch of ``(B, N, C)`` count tables (each row sums to k)."""
    k = counts.sum(-1, keepdims=True)[..., :1, :]  # (B, 1, 1)
    n = counts.shape[1]
    p_i = ((counts * (counts - 1)).sum(-1) / (k[..., 0] * (k[..., 0] - 1)))  # (B, N)
    p_bar = p_i.mean(-1)
    p_j = counts.sum(1) / (n * k[:, 0, :])  # (B, C)
    p_e = (p_j ** 2).sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(p_e < 1, (p_bar - p_e) / (1 - p_e), np.nan)


def cohen_kappa(a: Any, b: Any) -> float:
    """Cohen's kappa of two raters' category ints over the same answers (NaN when chance
    agreement is 1)."""
    x, y = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if x.shape != y.shape or x.ndim != 1 or x.size == 0:
        raise ValueError(f"cohen_kappa needs two equal-length non-empty rating vectors, got {x.shape}, {y.shape}")
    return float(_cohen_batch(x[None], y[None], int(max(x.max(), y.max()) + 1))[0])


def _cohen_batch(x: np.ndarray, y: np.ndarray, c: int) -> np.ndarray:
    po = (x == y).mean(-1)
    px = np.stack([(x == j).mean(-1) for j in range(c)], -1)
    py = np.stack([(y == j).mean(-1) for j in range(c)], -1)
    pe = (px * py).sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(pe < 1, (po - pe) / (1 - pe), np.nan)


def _ci(values: np.ndarray, confidence: float = 0.95) -> list[float | None]:
    v = values[np.isfinite(values)]
    if v.size == 0:
        return [None, None]
    a = (1 - confidence) / 2
    return [round(float(np.quantile(v, a)), 6), round(float(np.quantile(v, 1 - a)), 6)]


def _r(x: float) -> float | None:
    return None if not np.isfinite(x) else round(float(x), 6)


def judge_agreement(
    labels: Any, categories: Sequence[str], *, second: Any = None, n_resamples: int = 1000, seed: int = 0,
) -> dict[str, Any]:
    """Agreement of the judge's verdicts: ``labels`` ``(N, k)`` category ints (k repeats of one
    judge), ``second`` ``(N,)`` a second judge's verdicts (optional). Returns the summary block
    (see the module docstring); statistics that need k >= 2 (or a second judge) are None then."""
    lab = np.asarray(labels, dtype=np.int64)
    n, k = lab.shape
    c = len(categories)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, (n_resamples, n)) if n else np.zeros((0, 0), dtype=np.int64)
    out: dict[str, Any] = {"n_answers": int(n), "repeats": int(k), "categories": list(categories),
                           "verdicts": {cat: int((lab == j).sum()) for j, cat in enumerate(categories)}}
    if k >= 2 and n:
        counts = _counts(lab, c)
        all_same = (counts.max(1) == k).astype(np.float64)
        pairwise = (counts * (counts - 1)).sum(1) / (k * (k - 1))
        boot = _fleiss_from_counts(counts[idx])
        out["between_repeats"] = {
            "percent_agreement": _r(all_same.mean()), "percent_agreement_ci": _ci(all_same[idx].mean(1)),
            "mean_pairwise_agreement": _r(pairwise.mean()),
            "fleiss_kappa": _r(_fleiss_from_counts(counts[None])[0]), "fleiss_kappa_ci": _ci(boot),
            "n_disagreeing": int(n - all_same.sum()),
        }
    else:
        out["between_repeats"] = None
    if second is not None and n:
        y = np.asarray(second, dtype=np.int64)
        x = lab[:, 0]
        same = (x == y).astype(np.float64)
        out["second_judge"] = {
            "percent_agreement": _r(same.mean()), "percent_agreement_ci": _ci(same[idx].mean(1)),
            "cohen_kappa": _r(_cohen_batch(x[None], y[None], c)[0]),
            "cohen_kappa_ci": _ci(_cohen_batch(x[idx], y[idx], c)),
            "verdicts": {cat: int((y == j).sum()) for j, cat in enumerate(categories)},
        }
    else:
        out["second_judge"] = None
    out["ci"] = f"percentile bootstrap over answers, {n_resamples} resamples, 95 %, seed {seed}"
    if out["between_repeats"] is None and out["second_judge"] is None:
        out["note"] = ("one judgment per answer and no second judge: set scoring.judge.repeats=k (k >= 2) "
                       "or scoring.judge.second to measure how far the judged score can be trusted")
    return out


def rubric_spec(spec: Mapping[str, Any] | None) -> tuple[Rubric | None, int]:
    """The rubric and repeats a judge config asks for (``rubric`` / ``rubric_file`` / ``repeats``)."""
    spec = dict(spec or {})
    name = spec.get("rubric")
    repeats = int(spec.get("repeats") or 1)
    if repeats < 1:
        raise ValueError(f"scoring.judge.repeats must be >= 1, got {repeats}")
    if not name:
        if spec.get("rubric_file"):
            raise ValueError("scoring.judge.rubric_file needs scoring.judge.rubric (the rule that reads the replies)")
        return None, repeats
    return load_rubric(str(name), prompt_file=spec.get("rubric_file")), repeats
