"""A seeded corpus of report-like sentences for checking the PTB tokenizer against the Stanford
jar: the report sentences of the loaders' and labeler's test fixtures plus generated sentences
covering measurements, decimals, ranges, percentages, hyphenated and slashed terms, contractions,
brackets, quotes, list markers, abbreviations, times, dates, URLs and non-ASCII text."""

from __future__ import annotations

import random
import re
from pathlib import Path

HERE = Path(__file__).parent

FINDINGS = [
    "pleural effusion", "pneumothorax", "consolidation", "cardiomegaly", "atelectasis", "edema",
    "opacity", "nodule", "mass", "granuloma", "fracture", "hiatal hernia", "emphysema",
    "scoliosis", "calcified granuloma", "airspace disease", "infiltrate", "effusions",
]
PLACES = [
    "right lower lobe", "left upper lobe", "lingula", "right costophrenic angle", "left base",
    "right hilum", "mediastinum", "apices", "retrocardiac region", "left midlung", "bases",
]
WORDS = [
    "heart", "size", "normal", "lungs", "clear", "no", "acute", "disease", "stable", "mild",
    "moderate", "small", "large", "within", "limits", "unchanged", "compared", "prior", "exam",
    "there", "is", "are", "the", "a", "of", "and", "or", "with", "without", "noted", "seen",
    "degenerative", "changes", "thoracic", "spine", "visualized", "osseous", "structures",
    "intact", "silhouette", "contour", "vascularity", "pulmonary", "focal", "process",
]
HYPHENATED = [
    "left-sided", "right-sided", "well-defined", "ill-defined", "non-specific", "post-operative",
    "AP-view", "x-ray", "follow-up", "T2-weighted", "re-demonstrated", "mid-thoracic",
    "anterior-posterior", "co-existing", "self-limited", "three-vessel", "pre-existing",
    "end-stage", "low-lying", "non-calcified", "XXXX-XXXX", "calcified-granuloma",
]
SLASHED = [
    "T2/FLAIR", "AP/PA", "and/or", "PA/lateral", "w/o", "s/p", "c/w", "1/2", "3/4", "24/7",
    "L/S", "mg/kg", "mL/min", "CT/MR", "yes/no", "w/", "n/a", "10/12", "AP/Lat", "IV/PO",
]
CONTRACTIONS = [
    "cannot", "can't", "won't", "it's", "isn't", "doesn't", "there's", "that's", "I'm",
    "we're", "they've", "you'll", "he'd", "didn't", "don't", "shouldn't", "Can't", "CANNOT",
    "gonna", "wanna", "'tis", "'twas", "y'all", "O'Brien", "rock'n'roll", "ma'am", "'90s",
    "patient's", "patients'", "Cannot", "aren't", "wasn't", "won't've", "d'Arcy", "l'hopital",
]
ABBREVS = [
    "e.g.", "i.e.", "Dr.", "Mr.", "Mrs.", "vs.", "etc.", "approx.", "cf.", "U.S.", "a.m.",
    "p.m.", "No.", "no.", "fig.", "Fig.", "ca.", "Jan.", "Dec.", "St.", "Inc.", "Co.", "Pty.",
    "Ltd.", "Ph.D.", "M.D.", "R.N.", "A.P.", "P.A.", "b.i.d.", "q.d.", "Jr.", "Sr.", "pp.",
    "est.", "Wed.", "Mon.", "Calif.", "Mass.", "Ill.", "Gen.", "Prof.", "Rev.", "Sept.", "al.",
]
NONASCII = [
    "café", "naïve", "Müller", "résumé", "São Paulo", "Ångström", "ß", "µm", "5 µg", "10°",
    "±2 mm", "×3", "≥5 mm", "≤1 cm", "→", "•", "–", "—", "…", "“quoted”", "‘single’", "«guillemets»",
    "½", "¼", "€5", "£3", "¥100", "¢50", "§2", "©", "®", "™", "Δ", "αβγ", "Ωmega", "日本語", "中文报告",
    "Москва", "Ελλάδα", "عربي", "עברית", "हिन्दी", "한국어", "Ça", "œdème", "ﬁbrosis", "²", "³",
    "H₂O", "x²", "\u00a0nbsp", "zero\u200bwidth", "soft\u00adhyphen", "🙂", "naïve-ly", "co\u2011op",
    "\u2018tis", "don\u2019t", "it\u2019s", "can\u2019t", "Ω", "ŉ", "ǅ", "İstanbul", "ΣΟΦΙΑ",
]
PUNCT_BITS = [
    "(", ")", "[", "]", "{", "}", '"', "'", "`", "``", "''", ",", ";", ":", "...", "..", ". . .",
    "--", "---", "-", "?", "!", "?!", "*", "**", "#", "##", "@", "&", "&amp;", "&lt;", "&gt;",
    "<", ">", "<<", ">>", "=", "+", "%", "$", "$5", "US$", "/", "\\", "|", "~", "^", "_", "__",
    ":)", ":-(", ";)", "=)", "^_^", "<br>", "<p class='x'>", "</p>", "&quot;", "&apos;",
    "&nbsp;", "&mdash;", "&#39;", "&eacute;", "C++", "c#", "f#", "S&P", "AT&T", "R&D",
]
URLS = [
    "http://example.com/a/b", "https://www.nlm.nih.gov/", "www.example.org", "foo.com",
    "report.pdf", "image.png", "data.txt", "name@example.com", "<user@host.org>", "@handle",
    "#hashtag", "x-ray.jpg", "file_name.docx", "v1.2.3", "192.168.0.1", "a.b.c",
]


def _num(rng: random.Random) -> str:
    kind = rng.randrange(12)
    if kind == 0:
        return str(rng.randrange(1, 30))
    if kind == 1:
        return f"{rng.randrange(0, 20)}.{rng.randrange(0, 10)}"
    if kind == 2:
        return f"{rng.randrange(0, 10)}.{rng.randrange(0, 100):02d}"
    if kind == 3:
        return f"{rng.randrange(1, 10)}-{rng.randrange(2, 20)}"
    if kind == 4:
        return f"{rng.randrange(1, 100)}%"
    if kind == 5:
        return f"{rng.randrange(1, 9)}.{rng.randrange(10)} x {rng.randrange(1, 9)}.{rng.randrange(10)}"
    if kind == 6:
        return f"{rng.randrange(1, 9)}x{rng.randrange(1, 9)}"
    if kind == 7:
        return f"{rng.randrange(1000, 99999):,}"
    if kind == 8:
        return f"-{rng.randrange(1, 50)}"
    if kind == 9:
        return f"+{rng.randrange(1, 50)}.{rng.randrange(10)}"
    if kind == 10:
        return f".{rng.randrange(1, 99)}"
    return f"{rng.randrange(1, 12)} {rng.randrange(1, 4)}/{rng.randrange(2, 9)}"


UNITS = ["cm", "mm", "mL", "cc", "mg", "HU", "%", "cm.", "mm.", "cm,", "mm)", "cm;", "mmHg", "kg/m2", ""]


def _time_or_date(rng: random.Random) -> str:
    kind = rng.randrange(10)
    h, m = rng.randrange(0, 24), rng.randrange(0, 60)
    if kind == 0:
        return f"{h}:{m:02d}"
    if kind == 1:
        return f"{h % 12 + 1}:{m:02d} {rng.choice(['a.m.', 'p.m.', 'AM', 'PM', 'am'])}"
    if kind == 2:
        return f"{rng.randrange(1, 13)}/{rng.randrange(1, 29)}/{rng.choice(['2019', '20', '1998', '05'])}"
    if kind == 3:
        return f"{rng.randrange(1, 13)}-{rng.randrange(1, 29)}-{rng.choice(['2019', '20', '1998'])}"
    if kind == 4:
        return f"{rng.choice(['2019', '2020', '2008'])}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
    if kind == 5:
        return f"{rng.choice(['Jan.', 'Feb.', 'March', 'Sept.', 'Oct.', 'Dec.'])} {rng.randrange(1, 29)}, {rng.randrange(1990, 2024)}"
    if kind == 6:
        return f"{h:02d}{m:02d} hours"
    if kind == 7:
        return f"{h}:{m:02d}:{rng.randrange(60):02d}"
    if kind == 8:
        return f"'{rng.randrange(10, 99)}"
    return f"{rng.randrange(1, 31)}.{rng.randrange(1, 13)}.{rng.randrange(1990, 2024)}"


def _list_marker(rng: random.Random) -> str:
    return rng.choice(["1.", "2)", "3.", "(a)", "a)", "i.", "ii)", "-", "*", "•", "1)", "4 .", "A.", "#1", "No. 2"])


def _cap(rng: random.Random, s: str) -> str:
    r = rng.random()
    if r < 0.5:
        return s[:1].upper() + s[1:]
    if r < 0.6:
        return s.upper()
    return s


def _fragment(rng: random.Random) -> str:
    k = rng.randrange(14)
    if k == 0:
        return f"{_num(rng)} {rng.choice(UNITS)}".strip()
    if k == 1:
        return rng.choice(HYPHENATED)
    if k == 2:
        return rng.choice(SLASHED)
    if k == 3:
        return rng.choice(CONTRACTIONS)
    if k == 4:
        return rng.choice(ABBREVS)
    if k == 5:
        return rng.choice(NONASCII)
    if k == 6:
        return rng.choice(PUNCT_BITS)
    if k == 7:
        return _time_or_date(rng)
    if k == 8:
        return rng.choice(URLS)
    if k == 9:
        inner = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 4)))
        o, c = rng.choice([("(", ")"), ("[", "]"), ("{", "}"), ('"', '"'), ("'", "'"), ("“", "”"), ("`", "'"), ("``", "''")])
        return f"{o}{inner}{c}" if rng.random() < 0.7 else f"{o} {inner} {c}"
    if k == 10:
        return rng.choice(FINDINGS)
    if k == 11:
        return rng.choice(PLACES)
    if k == 12:
        w = rng.choice(WORDS)
        return w + rng.choice([".", ",", ";", ":", "?", "!", ".,", "'s", "s'", "-", "/", ")", "...", ".."])
    return rng.choice(WORDS)


def _sentence(rng: random.Random) -> str:
    n = rng.randrange(1, 14)
    parts = [_fragment(rng) for _ in range(n)]
    if rng.random() < 0.3:
        parts.insert(0, _list_marker(rng))
    s = " ".join(parts)
    if rng.random() < 0.15:  # glue some fragments together
        s = s.replace(" ", "", rng.randrange(1, 3))
    if rng.random() < 0.1:
        s = s.replace(" ", "  ", 1)
    if rng.random() < 0.05:
        s = s.replace(" ", "\t", 1)
    s = _cap(rng, s)
    r = rng.random()
    if r < 0.6:
        s += "."
    elif r < 0.65:
        s += " ."
    elif r < 0.7:
        s += "?"
    elif r < 0.75:
        s += "..."
    return s


def _template(rng: random.Random) -> str:
    t = rng.randrange(8)
    f, p = rng.choice(FINDINGS), rng.choice(PLACES)
    if t == 0:
        return f"There is a {_num(rng)} {rng.choice(['cm', 'mm'])} {f} in the {p}."
    if t == 1:
        return f"No {f}. No {rng.choice(FINDINGS)} or {rng.choice(FINDINGS)}."
    if t == 2:
        return f"{_list_marker(rng)} {f.capitalize()} of the {p}, {rng.choice(['unchanged', 'new', 'improved'])} since {_time_or_date(rng)}."
    if t == 3:
        return f"The {rng.choice(HYPHENATED)} {f} ({_num(rng)} cm) {rng.choice(CONTRACTIONS)} be excluded."
    if t == 4:
        return f"{rng.choice(ABBREVS)} {rng.choice(['Smith', 'the patient', 'prior study', 'Jones'])} notes {f} {rng.choice(SLASHED)} {p}."
    if t == 5:
        return f"Heart size is normal. {f.capitalize()} measuring {_num(rng)} x {_num(rng)} {rng.choice(UNITS)} is seen in the {p}."
    if t == 6:
        return f"Compared to the prior exam of {_time_or_date(rng)} at {_time_or_date(rng)}, the {f} is {rng.choice(['stable', 'larger', 'smaller'])}."
    return f"XXXX {f}: {p}; {rng.choice(WORDS)}, {rng.choice(WORDS)}... {rng.choice(NONASCII)}"


def fixture_sentences() -> list[str]:
    """The report sentences of the loaders' test fixtures and of the labeler's sentence set."""
    out: list[str] = []
    tsv = HERE / "data" / "labelled_sentences.tsv"
    for line in tsv.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            out.append(line.split("\t")[0])
    src = (HERE.parent.parent / "datasets" / "test_reports.py").read_text(encoding="utf-8")
    for block in re.findall(r'"""(.*?)"""', src, flags=re.S):
        for sent in re.split(r"(?<=[.:])\s+|\n", block):
            if sent.strip():
                out.append(sent.strip())
    for text in re.findall(r'"report": "([^"]+)"', src):
        out.append(text)
    return out


def corpus(n_generated: int = 20000, seed: int = 0) -> list[str]:
    """Fixture sentences, then ``n_generated`` generated ones (deterministic for a seed)."""
    rng = random.Random(seed)
    out = fixture_sentences()
    for i in range(n_generated):
        out.append(_template(rng) if i % 3 == 0 else _sentence(rng))
    return out
