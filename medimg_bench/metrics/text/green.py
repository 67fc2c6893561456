"""GREEN (Ostmeier et al. 2024, "GREEN: Generative Radiology Report Evaluation and Error
Notation"): a language model compares a candidate report with the reference and lists

* clinically significant errors in six categories — (a) false report of a finding, (b) missing a
  finding, (c) wrong anatomic location, (d) wrong severity, (e) a comparison not in the
  reference, (f) omitting a comparison describing change from a prior study;
* the same six as clinically insignificant errors;
* the number of matched findings;

and ``GREEN = matched / (matched + Σ significant errors)``, 0 when nothing matched.

The reading of the model's reply follows the authors' code (Stanford-AIMI/GREEN d72c195,
``GREEN.parse_error_counts`` / ``compute_green`` / ``clean_responses``): a section runs from its
``[Name]:`` header to the first blank line; a section that begins with "No" counts zero; each
sub-category line "(a) …: N." (or "(1) …" when no lettered line is present) gives the first
"N." that follows ": "; matched findings are the "N." that opens its section. A missing section
counts zero. Equal to their code on their shipped outputs and 400 generated ones
(tests/metrics/text/test_green.py).

The prompt is :data:`GREEN_PROMPT`, written for medimg_bench in our words with the reply format
GREEN's parser reads; ``prompt_file=`` reads another template (e.g. the authors' prompt from
``green_score/utils.py`` ``make_prompt``, with ``{text1}``/``{text2}`` or
``{reference}``/``{candidate}`` where the reports go), so the authors' numbers with the
authors' model (StanfordAIMI/GREEN-radllama2-7b) are reproduced exactly. Reports are cut to
their first 300 words, as ``make_prompt`` does. The model is any ``generate`` callable
(prompts → replies); ``medimg_bench.tasks.text_model.text_model_generate`` makes one of a generative adapter.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import torch

from medimg_bench.metrics.base import Metric
from medimg_bench.registry import register_metric

__all__ = [
    "GREEN_CATEGORIES",
    "GREEN_COLUMNS",
    "GREEN_PROMPT",
    "clean_green_reply",
    "green_prompt",
    "load_green_template",
    "parse_green",
    "green_score",
    "green_scores",
    "Green",
]

GREEN_CATEGORIES = (
    "False report of a finding in the candidate",
    "Missing a finding present in the reference",
    "Misidentification of a finding's anatomic location/position",
    "Misassessment of the severity of a finding",
    "Mentioning a comparison that isn't in the reference",
    "Omitting a comparison detailing a change from a prior study",
)
#: per-report columns: the score, the six significant error counts, matched findings, then the
#: six insignificant error counts
GREEN_COLUMNS = ("green", *(f"sig_{c}" for c in "abcdef"), "matched", *(f"insig_{c}" for c in "abcdef"))

GREEN_PROMPT = (
    "You are checking a candidate chest radiology report against a reference report written by "
    "radiologists. Compare the clinical findings only, not the wording or style.\n\n"
    "Count the errors of the candidate, separately for clinically significant and clinically "
    "insignificant errors, in six kinds:\n"
    + "".join(f"({c}) {d}.\n" for c, d in zip("abcdef", GREEN_CATEGORIES))
    + "Also count the findings both reports state the same way (matched findings).\n\n"
    "Reference report:\n{reference}\n\nCandidate report:\n{candidate}\n\n"
    "Answer in exactly this layout, each part separated by one blank line, every kind listed "
    "even when its count is 0:\n"
    "[Explanation]:\n<a short explanation>\n\n"
    "[Clinically Significant Errors]:\n(a) <kind>: <count>. <error 1>; <error 2>\n...\n"
    "(f) <kind>: <count>. <errors>\n\n"
    "[Clinically Insignificant Errors]:\n(a) <kind>: <count>. <errors>\n...\n"
    "(f) <kind>: <count>. <errors>\n\n"
    "[Matched Findings]:\n<count>. <finding 1>; <finding 2>\n"
)

_SIG, _INSIG, _MATCHED = "Clinically Significant Errors", "Clinically Insignificant Errors", "Matched Findings"


def clean_green_reply(text: str) -> str:
    """The reply as GREEN reads it (``clean_responses``): after ``[Explanation]:`` and the last
    chat-template ``<|assistant|>``, without ``</s>`` / ``<unk>``."""
    if "[Explanation]:" in text:
        if "<|assistant|>" in text:
            text = text.split("<|assistant|>")[-1]
        # their check only ever tests the first of two template spellings
        pick = 1 if "[Explanation]:\n    <Explanation>\n" in text else -1
        text = text.split("[Explanation]:")[pick]
    if "<|assistant|>" in text:
        text = text.split("<|assistant|>")[-1]
    return text.replace("</s>", "").replace("<unk>", "")


def _section(text: str, name: str) -> str | None:
    m = re.search(r"\[" + re.escape(name) + r"\]:\s*(.*?)(?:\n\s*\n|\Z)", text, re.DOTALL)
    return None if m is None else m.group(1)


def _error_counts(text: str, name: str) -> list[int]:
    counts = [0] * 6
    body = _section(text, name)
    if body is None or body.startswith("No"):
        return counts
    lines, tags = sorted(re.findall(r"\([a-f]\) .*", body)), [f"({c}) " for c in "abcdef"]
    if not lines:
        lines, tags = sorted(re.findall(r"\([1-6]\) .*", body)), [f"({i}) " for i in range(1, 7)]
    for k, tag in enumerate(tags):
        for line in lines:
            if line.startswith(tag):
                n = re.search(r"(?<=: )\b\d+\b(?=\.)", line)
                if n:
                    counts[k] = int(n.group(0))
    return counts


def parse_green(reply: str) -> dict[str, Any]:
    """``{"significant": [6 counts], "insignificant": [6 counts], "matched": int}`` of a GREEN
    model's reply (cleaned as :func:`clean_green_reply` first)."""
    text = clean_green_reply(reply or "")
    body = _section(text, _MATCHED)
    matched = 0
    if body is not None and not body.startswith("No"):
        m = re.match(r"\b\d+\b(?=\.)", body)
        matched = int(m.group(0)) if m else 0
    return {"significant": _error_counts(text, _SIG), "insignificant": _error_counts(text, _INSIG),
            "matched": matched}


def green_score(parsed: dict[str, Any]) -> float:
    """GREEN in [0, 1]: matched / (matched + significant errors); 0 when nothing matched."""
    matched = parsed["matched"]
    return 0.0 if matched == 0 else matched / (matched + sum(parsed["significant"]))


def load_green_template(prompt_file: str | Path | None = None) -> str:
    """The prompt template: :data:`GREEN_PROMPT`, or the text of ``prompt_file`` (placeholders
    ``{reference}``/``{candidate}`` or the authors' ``{text1}``/``{text2}``)."""
    if prompt_file is None:
        return GREEN_PROMPT
    path = Path(prompt_file)
    if not path.is_file():
        raise FileNotFoundError(f"green: prompt_file {str(path)!r} does not exist")
    text = path.read_text(encoding="utf-8")
    text = text.replace("{text1}", "{reference}").replace("{text2}", "{candidate}")
    if "{reference}" not in text or "{candidate}" not in text:
        raise ValueError(f"green: prompt_file {str(path)!r} needs {{reference}} and {{candidate}} "
                         "(or {text1} and {text2}) where the reports go")
    return text


def green_prompt(reference: str, candidate: str, *, template: str = GREEN_PROMPT, max_words: int = 300) -> str:
    """The GREEN model's prompt for one pair (each report cut to ``max_words`` words)."""
    ref = " ".join(reference.split()[:max_words])
    cand = " ".join(candidate.split()[:max_words])
    return template.replace("{reference}", ref).replace("{candidate}", cand)


def _row(reply: str) -> list[float]:
    p = parse_green(reply)
    return [green_score(p), *p["significant"], p["matched"], *p["insignificant"]]


def green_scores(
    references: Sequence[str],
    candidates: Sequence[str],
    *,
    generate: Callable[[list[str]], list[str]],
    prompt_file: str | Path | None = None,
    max_words: int = 300,
) -> tuple[torch.Tensor, list[str]]:
    """``((N, 14) tensor of GREEN_COLUMNS, replies)``: one GREEN-model call per pair."""
    if len(references) != len(candidates):
        raise ValueError(f"green: {len(references)} references but {len(candidates)} candidates")
    template = load_green_template(prompt_file)
    replies = list(generate([green_prompt(r, c, template=template, max_words=max_words)
                             for r, c in zip(references, candidates)]))
    if len(replies) != len(references):
        raise ValueError(f"green: the model returned {len(replies)} replies for {len(references)} prompts")
    return torch.tensor([_row(r) for r in replies], dtype=torch.float64).reshape(-1, len(GREEN_COLUMNS)), replies


@register_metric("green", tags=("report", "text"))
class Green(Metric):
    """Per-report GREEN and its error counts (:data:`GREEN_COLUMNS`). ``update(generated,
    references)`` asks ``generate`` (prompts → replies; any generative adapter through
    ``medimg_bench.tasks.text_model.text_model_generate``); ``replies=True`` takes the GREEN model's replies
    as ``preds`` instead (``targets`` unused), e.g. to re-score stored analyses."""

    name = "green"
    per_sample = True
    higher_is_better = True
    input_kind = "text"
    #: error counts are lower-is-better; the score and matched findings higher
    directions = MappingProxyType({c: False for c in GREEN_COLUMNS if c.startswith(("sig_", "insig_"))})
    value_range = (0.0, math.inf)
    value_ranges = MappingProxyType({"green": (0.0, 1.0)})

    def __init__(self, *, generate: Callable[[list[str]], list[str]] | None = None, replies: bool = False,
                 prompt_file: str | None = None, max_words: int = 300,
                 class_names: Sequence[str] | None = None) -> None:
        super().__init__(class_names=list(GREEN_COLUMNS))
        if generate is None and not replies:
            raise ValueError("green: needs a GREEN model (generate=, prompts → replies) or replies=True")
        self.generate, self.replies, self.max_words = generate, replies, max_words
        self.prompt_file = prompt_file
        load_green_template(prompt_file)  # fails now, not mid-run
        self.add_state("rows", [], dist_reduce_fx="cat")
        self.analyses: list[str] = []

    def update(self, preds: Any, targets: Any, meta: Any = None, *, ids: Sequence[str] | None = None) -> None:
        if isinstance(preds, str) or isinstance(targets, str):
            raise ValueError(f"{self.name}: expected lists of reports, got a single string")
        if len(preds) != len(targets):
            raise ValueError(f"{self.name}: {len(preds)} generated reports but {len(targets)} references")
        if self.replies:
            replies = [str(p) for p in preds]
            rows = torch.tensor([_row(r) for r in replies], dtype=torch.float64).reshape(-1, len(GREEN_COLUMNS))
        else:
            rows, replies = green_scores(list(targets), list(preds), generate=self.generate,  # type: ignore[arg-type]
                                         prompt_file=self.prompt_file, max_words=self.max_words)
        self._add_ids(ids, len(preds))
        self.analyses.extend(replies)
        self.rows.append(rows)

    def values(self) -> tuple[list[str], torch.Tensor]:
        if not self.rows:
            return list(self.ids), torch.empty(0, len(GREEN_COLUMNS), dtype=torch.float64)
        return list(self.ids), torch.cat(self.rows)

    def compute(self) -> torch.Tensor:
        return self.values()[1].mean(0)

    def key_files(self) -> dict[str, Any]:
        """``{"prompt_file": path}`` when the template is read from a file (a run's key holds its
        content); nothing with ``replies=True``, where no prompt is sent."""
        return {"prompt_file": self.prompt_file} if self.prompt_file is not None and not self.replies else {}

    def identity(self) -> dict[str, Any]:
        """What pins a GREEN number: the prompt (ours or the file, with its SHA-256), the word
        limit and the GREEN model's identity when ``generate`` carries one."""
        import hashlib

        template = load_green_template(self.prompt_file)
        return {"prompt": "medimg_bench" if self.prompt_file is None else str(self.prompt_file),
                "prompt_sha256": hashlib.sha256(template.encode("utf-8")).hexdigest(),
                "max_words": self.max_words, "model": getattr(self.generate, "identity", None)}

    def error_free_share(self) -> torch.Tensor:
        """Share of reports with no clinically significant error of each kind (a)–(f), as the
        authors' ``compute_accuracy`` reports it."""
        sig = self.values()[1][:, 1:7]
        return (sig == 0).double().mean(0)
