"""Report-text tokenizers by name (``tokenizer=`` of :func:`report_text_scores`):

* ``ptb`` — pycocoevalcap's ``PTBTokenizer`` token for token: Stanford CoreNLP 3.4.1's
  ``PTBTokenizer -preserveLines -lowerCase`` over all texts at once (one per line), then
  pycocoevalcap's punctuation filter. Runs the jar that pycocoevalcap ships when Java and
  pycocoevalcap are installed (``backend="jar"``), else a pure-Python implementation of the same
  lexer rules (``backend="python"``, :mod:`._ptb_lexer`) that equals the jar on a corpus of
  > 20,000 sentences (tests/metrics/text/test_tokenizers.py). Note what PTB does that a plain
  split does not: "1.5 cm" stays "1.5 cm", "left-sided" one token, "cannot" -> "can not",
  "can't" -> "ca n't", brackets -> ``-lrb-`` / ``-rrb-`` (kept: pycocoevalcap drops only the
  upper-case forms, and lower-casing happens first).
* ``r2gen`` — R2Gen's ``clean_report_iu_xray`` / ``clean_report_mimic_cxr``
  (``modules/tokenizers.py`` of cuhksz-nlp/R2Gen at 5a2e63f6d8da670725b1926317b4bfd1393ec51b).
* ``simple`` — lower case, punctuation dropped (this package's earlier default).
* ``none`` — the text as given, runs of whitespace collapsed.

One deliberate difference from pycocoevalcap: carriage returns and the other characters the
lexer treats as line breaks (U+000B, U+000C, U+0085, U+2028, U+2029) are replaced by spaces like
``\\n``; pycocoevalcap replaces only ``\\n``, so such a character shifts every later caption onto
its neighbour's line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["TOKENIZERS", "tokenize_texts", "ptb_tokenize", "r2gen_clean", "simple_tokenize", "ptb_jar_path"]

# pycocoevalcap/tokenizer/ptbtokenizer.py: tokens dropped after tokenisation
PTB_PUNCTUATIONS = frozenset(["''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-", "-RCB-", ".", "?", "!",
                              ",", ":", "-", "--", "...", ";"])
_LINE_BREAKS = re.compile("[\n\r\u000B\u000C\u0085\u2028\u2029]")
_PUNCT = re.compile(r"[^\w\s]|_")


def simple_tokenize(text: str) -> str:
    """Lower-cased words separated by single spaces, punctuation removed."""
    return " ".join(_PUNCT.sub(" ", text.lower()).split())


def ptb_jar_path() -> Path | None:
    """pycocoevalcap's ``stanford-corenlp-3.4.1.jar`` when it and ``java`` are installed."""
    if shutil.which("java") is None:
        return None
    import importlib.util

    spec = importlib.util.find_spec("pycocoevalcap")
    if spec is None or not spec.submodule_search_locations:
        return None
    jar = Path(list(spec.submodule_search_locations)[0]) / "tokenizer" / "stanford-corenlp-3.4.1.jar"
    return jar if jar.is_file() else None


def _ptb_lines_jar(text: str, jar: Path) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "captions.txt")
        with open(path, "wb") as fh:
            fh.write(text.encode("utf-8"))
        cmd = ["java", "-cp", str(jar), "edu.stanford.nlp.process.PTBTokenizer", "-preserveLines",
               "-lowerCase", path]
        done = subprocess.run(cmd, capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"PTBTokenizer ({jar}) failed: {done.stderr.decode(errors='replace')[-500:]}")
    return done.stdout.decode("utf-8")


def _ptb_lines_python(text: str) -> str:
    from medimg_bench.metrics.text._ptb_lexer import NL, lex

    lines: list[str] = []
    current: list[str] = []
    for tok in lex(text):
        if tok == NL:
            lines.append(" ".join(current))
            current = []
        else:
            current.append(tok.lower())
    lines.append(" ".join(current))
    return "\n".join(lines)


def ptb_tokenize(texts: Sequence[str], *, backend: str = "auto") -> list[str]:
    """pycocoevalcap's ``PTBTokenizer`` output for each text (a list of strings, same order).

    ``backend``: ``"jar"`` (Java + pycocoevalcap's jar), ``"python"`` (:mod:`._ptb_lexer`) or
    ``"auto"`` (the jar when available, else Python). All texts go through the lexer as one
    file, one per line, as pycocoevalcap sends them."""
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"text {i} is {type(t).__name__}, expected str")
    if not texts:
        return []
    joined = "\n".join(_LINE_BREAKS.sub(" ", t) for t in texts)
    if backend not in ("auto", "jar", "python"):
        raise ValueError(f"backend must be auto, jar or python, got {backend!r}")
    jar = ptb_jar_path() if backend != "python" else None
    if backend == "jar" and jar is None:
        raise RuntimeError("tokenizer ptb with backend='jar' needs Java and pycocoevalcap's jar")
    out = _ptb_lines_jar(joined, jar) if jar is not None else _ptb_lines_python(joined)
    lines = out.split("\n")
    if len(lines) < len(texts):
        raise RuntimeError(f"PTBTokenizer returned {len(lines)} lines for {len(texts)} texts")
    return [" ".join(w for w in line.rstrip().split(" ") if w not in PTB_PUNCTUATIONS)
            for line in lines[: len(texts)]]


_R2GEN_SENT_CHARS = re.compile(r"[.,?;*!%^&_+():-\[\]{}]")  # ':-\[' is a range, as in R2Gen


def _r2gen_sentence(t: str) -> str:
    t = t.replace('"', "").replace("/", "").replace("\\", "").replace("'", "").strip().lower()
    return _R2GEN_SENT_CHARS.sub("", t)


def r2gen_clean(text: str, *, dataset: str = "iu_xray") -> str:
    """R2Gen's ``clean_report_iu_xray`` (``dataset="iu_xray"``) or ``clean_report_mimic_cxr``
    (``"mimic_cxr"``): sentences joined by ``" . "``, a final ``" ."`` (returns a string)."""
    t = text
    if dataset == "mimic_cxr":
        t = t.replace("\n", " ")
        for _ in range(7):
            t = t.replace("__", "_")
        for _ in range(6):
            t = t.replace("  ", " ")
        for _ in range(8):
            t = t.replace("..", ".")
    elif dataset == "iu_xray":
        for _ in range(3):
            t = t.replace("..", ".")
    else:
        raise ValueError(f"r2gen_clean: dataset must be iu_xray or mimic_cxr, got {dataset!r}")
    t = t.replace("1. ", "")
    for k in "2345":
        t = t.replace(f". {k}. ", ". ")
    for k in "2345":
        t = t.replace(f" {k}. ", ". ")
    sentences = t.strip().lower().split(". ")
    return " . ".join(_r2gen_sentence(s) for s in sentences) + " ."


def _none(text: str) -> str:
    return " ".join(text.split())


TOKENIZERS: dict[str, Callable[..., list[str]]] = {
    "ptb": lambda texts, **kw: ptb_tokenize(texts, **kw),
    "r2gen": lambda texts, dataset="iu_xray": [r2gen_clean(t, dataset=dataset) for t in texts],
    "simple": lambda texts: [simple_tokenize(t) for t in texts],
    "none": lambda texts: [_none(t) for t in texts],
}


def tokenize_texts(texts: Sequence[str], tokenizer: str = "ptb", **options: object) -> list[str]:
    """``texts`` tokenised by the named tokenizer (space-separated tokens per text)."""
    if tokenizer not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer {tokenizer!r}; known: {', '.join(TOKENIZERS)}")
    return TOKENIZERS[tokenizer](list(texts), **options)
