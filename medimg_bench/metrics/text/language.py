"""Is a report English? The offline labeler's phrase lists are English, so a report in another
language is refused rather than labelled: "Pas de pneumothorax" would otherwise read as a
positive pneumothorax.

A cheap, dependency-free check (see docs/reports.md, "Language"):

* a text whose letters are at least 20 % of another script (CJK, kana, Hangul, Cyrillic, Greek,
  Arabic, Hebrew, Devanagari, Thai) is that script;
* otherwise its words are counted against the word lists of ``phrases/languages.yaml``: English
  function and report words, and for French, German, Spanish, Portuguese, Italian and Dutch words
  of that language that are not English; a word with an accented letter (é, ñ, ß…) that no list
  holds counts as foreign too. The text is not English when the foreign words outnumber the
  English ones and are at least two, or at least half of all words ("Kein Pneumothorax").

A text with no telling words ("Pneumothorax.", "ETT.") counts as English.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from pathlib import Path

__all__ = ["detect_non_english"]

_LISTS = Path(__file__).with_name("phrases") / "languages.yaml"
_WORD = re.compile(r"[^\W\d_]+")
# unicodedata name prefix -> what we call the script; kana decides Japanese over Chinese
_SCRIPTS = (
    ("HIRAGANA", "japanese"), ("KATAKANA", "japanese"), ("CJK", "chinese"), ("HANGUL", "korean"),
    ("CYRILLIC", "cyrillic"), ("GREEK", "greek"), ("ARABIC", "arabic"), ("HEBREW", "hebrew"),
    ("DEVANAGARI", "devanagari"), ("THAI", "thai"),
)
_SCRIPT_SHARE = 0.2


@lru_cache(maxsize=2)
def _lists(path: str = str(_LISTS)) -> tuple[frozenset[str], dict[str, frozenset[str]], frozenset[str],
                                             frozenset[str]]:
    import yaml

    spec = yaml.safe_load(Path(path).read_text())
    bad = [(k, w) for k, words in spec.items() for w in words if not isinstance(w, str)]
    if bad:  # YAML reads a bare no / on / yes as a boolean
        raise ValueError(f"{path}: quote these words: {bad}")
    english = frozenset(spec.pop("english"))
    weak = frozenset(spec.pop("weak"))
    others = {lang: frozenset(words) for lang, words in spec.items()}
    return english, others, frozenset().union(*others.values()), weak


def _script(text: str) -> str | None:
    counts: dict[str, int] = {}
    letters = 0
    for ch in text:
        if not ch.isalpha():
            continue
        letters += 1
        if ch.isascii():
            continue
        name = unicodedata.name(ch, "")
        for prefix, script in _SCRIPTS:
            if name.startswith(prefix):
                counts[script] = counts.get(script, 0) + 1
                break
    if not counts:
        return None
    if "japanese" in counts:  # kanji are CJK too
        counts["japanese"] += counts.pop("chinese", 0)
    script, n = max(counts.items(), key=lambda kv: kv[1])
    return script if sum(counts.values()) >= _SCRIPT_SHARE * letters else None


def detect_non_english(text: str) -> str | None:
    """The language (``"french"``…) or script (``"chinese"``…) of a text that is not English,
    ``"non-english"`` when foreign but unnamed; None when it reads as English or cannot tell."""
    if not text.isascii():
        script = _script(text)
        if script is not None:
            return script
    words = _WORD.findall(text.lower())
    if not words:
        return None
    english, others, foreign, weak = _lists()
    n_en = n_foreign = n_accented = 0
    hits: dict[str, int] = {}
    for w in words:
        if w in english:
            n_en += 1
            continue
        accented = not w.isascii() and _latin_diacritic(w)
        n_accented += accented
        if w in foreign:
            n_foreign += 1
            for lang, vocab in others.items():
                if w in vocab:
                    hits[lang] = hits.get(lang, 0) + 1
        elif accented:
            n_foreign += 1
    if n_foreign <= n_en:
        return None
    # one foreign word decides only where no English word stands beside it, and not one of the
    # short words that English borrows ("de novo")
    if n_foreign < 2 and (n_en > 0 or (n_accented == 0 and all(w in weak for w in words if w in foreign))):
        return None
    return max(hits.items(), key=lambda kv: kv[1])[0] if hits else "non-english"


def _latin_diacritic(word: str) -> bool:
    # é, ñ, ß, œ … but not µ (micro sign) or Greek letters
    return any(not ch.isascii() and unicodedata.name(ch, "").startswith("LATIN") for ch in word)
