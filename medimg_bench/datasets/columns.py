"""One column matcher for every table the toolkit reads: class-score tables (``model=predictions``),
per-frame phase tables, stored reports and answers, and label CSVs (``dataset=csv``).

The rule, the same everywhere:

* **Names, never positions.** A column is found by its name, compared up to case, spaces and
  punctuation (:func:`column_key`: ``Pleural Effusion`` ~ ``pleural_effusion``) and, for columns
  that stand for a class, up to one of the usual score prefixes or suffixes
  (:data:`SCORE_AFFIXES`: ``prob_Nodule``, ``nodule_prob``, ``score_nodule``, ``pred_nodule``,
  ``p_nodule``, ``logit_nodule``...). Columns are taken in file order only where the caller was
  given that order explicitly (``positional=True``: the user listed the columns).
* **Ambiguity is refused, listing the candidates**: two columns that could hold one class
  (``nodule`` and ``prob_nodule``), two id columns of the same name, two text columns that
  could be the model's output.
* **Id columns** by name (:data:`ID_NAMES`, in that order of preference: ``id``, ``sample_id``,
  ``image_id``, ``Image Index``, ``dicom_id``, ``study_id``...), never the first column.
* **The model's text** (stored reports and answers) by name (:func:`match_text_column`): a column
  named as a model's output (:data:`OUTPUT_TEXT_NAMES`: ``generated``, ``prediction``, ``pred``,
  ``output``, ``response``...) wins over a neutral one (:data:`NEUTRAL_TEXT_NAMES`: ``text``,
  ``report``, ``answer``, ``findings``...), which is taken only when it is the one text column;
  a column named as a reference (:data:`REFERENCE_TEXT_NAMES`: ``reference``, ``ground_truth``,
  ``gt``, ``target``...) never is. Callers that know the reference texts also refuse a column
  equal to them for most rows (:func:`equals_reference`).
* **Index conventions** are detected or refused (:func:`index_base`): a column of class numbers
  is 0-based or 1-based by its values, and a set of values that fits both is refused naming
  the option that settles it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence

log = logging.getLogger(__name__)

__all__ = [
    "ID_NAMES", "NEUTRAL_TEXT_NAMES", "OUTPUT_TEXT_NAMES", "REFERENCE_TEXT_NAMES", "SCORE_AFFIXES",
    "column_key", "equals_reference", "find_column", "index_base", "match_class_columns",
    "match_id_column", "match_text_column",
]

#: words a score column may carry before (``prob_<class>``) or after (``<class>_prob``) the class
SCORE_AFFIXES = ("prob", "probs", "proba", "probability", "p", "score", "scores", "pred", "preds",
                 "prediction", "predicted", "logit", "logits", "y", "yhat", "output", "out")
#: id column names, in order of preference (compared by :func:`column_key`)
ID_NAMES = ("id", "sample_id", "image_id", "image_index", "dicom_id", "study_id", "question_id", "qid",
            "case_id", "uid", "image_name", "filename", "file_name", "image", "image_path", "path")
#: names of a column holding what a model said (stored reports and answers)
OUTPUT_TEXT_NAMES = ("generated", "generated_text", "generated_report", "generation", "prediction",
                     "predicted", "predictions", "pred", "preds", "pred_text", "pred_report", "pred_answer",
                     "predicted_answer", "predicted_report", "output", "model_output", "response",
                     "model_answer", "model_response", "hypothesis", "hyp", "candidate", "completion")
#: names of a text column that may be either side: taken only when it is the one text column
NEUTRAL_TEXT_NAMES = ("text", "report", "answer", "findings", "impression", "caption")
#: names of a column holding the reference (never the model's text)
REFERENCE_TEXT_NAMES = ("reference", "references", "ref", "ground_truth", "groundtruth", "gt", "gt_report",
                        "gt_answer", "gt_text", "target", "target_text", "label", "true_report",
                        "reference_report", "reference_answer", "answer_gt", "report_gt", "original_report")

_AFFIX = frozenset(SCORE_AFFIXES)


def column_key(name: object) -> str:
    """``name`` lower-cased, every run of spaces and punctuation one ``_`` (``"Image Index"`` →
    ``"image_index"``)."""
    return re.sub(r"[^0-9a-z]+", "_", str(name).strip().lower()).strip("_")


def _forms(column: str) -> set[str]:
    """The keys a class column may stand for: its key, and its key less one score affix."""
    key = column_key(column)
    out = {key}
    head, _, rest = key.partition("_")
    if rest and head in _AFFIX:
        out.add(rest)
    rest, _, tail = key.rpartition("_")
    if rest and tail in _AFFIX:
        out.add(rest)
    return out


def _candidates(columns: list[str], classes: list[str]) -> dict[str, list[str]]:
    """Each class's columns: the same name, else the same key or the key less an affix."""
    forms = {c: _forms(c) for c in columns}
    return {cls: [c for c in columns if c == cls or column_key(cls) in forms[c]] for cls in classes}


def match_class_columns(
    columns: Sequence[str],
    classes: Sequence[str],
    *,
    where: str,
    what: str = "columns",
    positional: bool = False,
    hint: str = "",
) -> list[str]:
    """The column that holds each class, in class order.

    ``columns``: the candidate columns (in file order); ``classes``: the class names; ``where``
    names the file (or option) in errors; ``positional``: columns that carry no class name may be
    taken in order (the caller was given that order explicitly). Raises ``ValueError`` listing
    both sets when the columns cannot be matched one to one (a class without a column, a column
    that is no class, a class two columns could hold); ``hint`` is appended to that message."""
    columns, classes = [str(c) for c in columns], [str(c) for c in classes]
    both = f"{what}: {columns}; classes: {classes}" + (f"; {hint}" if hint else "")
    for kind, names in (("column", columns), ("class", classes)):
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"{where}: duplicate {kind} name(s) {dup}; {both}")
    cand = _candidates(columns, classes)
    owners: dict[str, list[str]] = {}
    for cls, cols in cand.items():
        for c in cols:
            owners.setdefault(c, []).append(cls)
    ambiguous = {cls: cols for cls, cols in cand.items() if len(cols) > 1}
    shared = {c: owned for c, owned in owners.items() if len(owned) > 1}
    if ambiguous or shared:
        parts = [f"class {cls!r} could be any of {cols}" for cls, cols in ambiguous.items()]
        parts += [f"column {c!r} could be any of the classes {owned}" for c, owned in shared.items()]
        raise ValueError(f"{where}: ambiguous {what} ({'; '.join(parts)}); rename or drop the extra "
                         f"column(s); {both}")
    found = {cls: cols[0] for cls, cols in cand.items() if cols}
    used = set(found.values())
    missing = [c for c in classes if c not in found]
    unknown = [c for c in columns if c not in used]
    if not missing and not unknown:
        loose = {k: v for k, v in found.items() if k != v}
        if loose:
            log.info("%s: %s matched to classes up to case, punctuation and affixes: %s", where, what, loose)
        return [found[c] for c in classes]
    if positional and not found and len(columns) == len(classes):
        return list(columns)
    problem = []
    if missing:
        problem.append(f"no column for class(es) {missing}")
    if unknown:
        problem.append(f"{what} {unknown} are not classes")
    if positional and not found:
        problem.append(f"{len(columns)} {what} for {len(classes)} classes")
    raise ValueError(f"{where}: {what} do not match the classes by name ({'; '.join(problem)}); {both}")


def find_column(columns: Sequence[str], names: Iterable[str], *, where: str, what: str,
                given: str | None = None, option: str | None = None, required: bool = True) -> str | None:
    """The column named as the first of ``names`` that one is (compared by :func:`column_key`),
    or ``given`` (a name the user set, which must be a column). Two columns of that name (``ID``
    and ``id``) are refused listing them; with none, ``None`` unless ``required`` (then an error
    listing the names tried and the columns, naming ``option``)."""
    columns = [str(c) for c in columns]
    set_it = f"; set {option}" if option else ""
    if given is not None:
        if given not in columns:
            raise ValueError(f"{where}: no {what} column {given!r}{f' ({option})' if option else ''}; "
                             f"columns are {columns}")
        return given
    keys = {c: column_key(c) for c in columns}
    for name in names:
        hits = [c for c in columns if keys[c] == column_key(name)]
        if len(hits) > 1:
            raise ValueError(f"{where}: several {what} columns {hits}: which is meant is ambiguous{set_it}")
        if hits:
            return hits[0]
    if required:
        raise ValueError(f"{where}: no {what} column found (tried {list(names)}, up to case and "
                         f"punctuation); columns are {columns}{set_it}")
    return None


def match_id_column(columns: Sequence[str], *, where: str, given: str | None = None,
                    option: str = "model.options.id_column") -> str:
    """The id column: ``given``, else the first of :data:`ID_NAMES` present (by name, never by
    position); none is an error listing the columns."""
    found = find_column(columns, ID_NAMES, where=where, what="id", given=given, option=option)
    assert found is not None
    return found


def match_text_column(columns: Sequence[str], *, where: str, given: str | None = None,
                      exclude: Sequence[str] = (), option: str = "model.options.text_column") -> str:
    """The column holding the model's text: ``given``; else the one column named as an output
    (:data:`OUTPUT_TEXT_NAMES`); else the one neutral text column (:data:`NEUTRAL_TEXT_NAMES`).
    Two candidates at the level that decides are refused, listing them; reference-named columns
    (:data:`REFERENCE_TEXT_NAMES`) and ``exclude`` (the id column) are never candidates."""
    columns = [str(c) for c in columns]
    if given is not None:
        return find_column(columns, (), where=where, what="text", given=given, option=option) or given
    pool = [c for c in columns if c not in exclude and column_key(c) not in REFERENCE_TEXT_NAMES]
    for names, kind in ((OUTPUT_TEXT_NAMES, "named as a model's output"),
                        (NEUTRAL_TEXT_NAMES, "that could be the model's text")):
        keys = {column_key(n) for n in names}
        hits = [c for c in pool if column_key(c) in keys]
        if len(hits) > 1:
            raise ValueError(f"{where}: several text columns {kind}: {hits}; which one holds the model's "
                             f"text is ambiguous: set {option}")
        if hits:
            return hits[0]
    raise ValueError(f"{where}: no column holding the model's text (tried {list(OUTPUT_TEXT_NAMES)}, then "
                     f"{list(NEUTRAL_TEXT_NAMES)}); columns are {columns}; set {option}")


def _norm_text(value: object) -> str:
    return " ".join(str(value).split()).lower()


def equals_reference(texts: Mapping[str, object], references: Mapping[str, object], *,
                     min_words: int = 4) -> tuple[int, int]:
    """``(equal, compared)``: of the ids in both whose reference has at least ``min_words``
    words (short answers such as "yes" are often right, not copied), how many texts equal the
    reference up to case and spaces."""
    equal = compared = 0
    for sid, ref in references.items():
        if sid not in texts or ref is None or len(str(ref).split()) < min_words:
            continue
        compared += 1
        equal += _norm_text(texts[sid]) == _norm_text(ref)
    return equal, compared


def index_base(values: Iterable[int], num_classes: int, *, where: str, given: object = "auto",
               option: str = "model.options.index_base") -> int:
    """Whether the class numbers ``values`` count from 0 or 1, for ``num_classes`` classes.
    ``given``: ``0``, ``1`` or ``"auto"``: 0 present (and ``num_classes`` absent) → 0;
    ``num_classes`` present (and 0 absent) → 1; values that fit both (neither 0 nor
    ``num_classes`` occurs) are refused naming ``option``, and so are values that fit neither."""
    seen = {int(v) for v in values}
    if str(given) in ("0", "1"):
        base = int(str(given))
        bad = sorted(v for v in seen if not base <= v < num_classes + base)
        if bad:
            raise ValueError(f"{where}: class number(s) {bad[:5]} outside {base}..{num_classes - 1 + base} "
                             f"({option}={base}, {num_classes} classes)")
        return base
    if str(given) != "auto":
        raise ValueError(f"{where}: {option} must be 0, 1 or auto, got {given!r}")
    lo, hi = (min(seen), max(seen)) if seen else (0, 0)
    if lo < 0 or hi > num_classes or (0 in seen and num_classes in seen):
        raise ValueError(f"{where}: class numbers {sorted(seen)[:12]} fit neither 0..{num_classes - 1} nor "
                         f"1..{num_classes} ({num_classes} classes)")
    if num_classes in seen:
        return 1
    if 0 in seen or not seen:
        return 0
    raise ValueError(f"{where}: class numbers {sorted(seen)[:12]} fit both 0..{num_classes - 1} and "
                     f"1..{num_classes} (neither 0 nor {num_classes} occurs): whether they count from 0 or "
                     f"from 1 is ambiguous; set {option}=0 or {option}=1")
