"""Table columns matched to class names: one rule for every table whose columns stand for classes
(``model=predictions`` score columns, ``dataset=csv`` label columns).

Columns that carry the class names are used by name, in any order: an exact name, else a name
equal up to case, spaces and punctuation (``Pleural Effusion`` ~ ``pleural_effusion``) when that
pairs columns and classes one to one. Columns that carry none of the names are taken in order only
when the caller says the order was given explicitly (``positional=True``). Anything else — a class
without a column, a column that is no class, names that only partly match — is an error that lists
both sets.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

log = logging.getLogger(__name__)

__all__ = ["match_class_columns"]


def _key(name: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", str(name).strip().lower()).strip("_")


def _pair_up(columns: list[str], classes: list[str]) -> tuple[dict[str, str], list[str], list[str]]:
    """``({class: column}, classes without a column, columns without a class)``: exact names
    first, then names equal up to :func:`_key` where one column and one class share the key."""
    found = {c: c for c in classes if c in columns}
    rest_cols = [c for c in columns if c not in found]
    rest_cls = [c for c in classes if c not in found]
    for cls in rest_cls:
        same = [c for c in rest_cols if _key(c) == _key(cls)]
        if len(same) == 1 and sum(_key(x) == _key(cls) for x in rest_cls) == 1:
            found[cls] = same[0]
    used = set(found.values())
    return found, [c for c in classes if c not in found], [c for c in columns if c not in used]


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
    both sets when the columns cannot be matched; ``hint`` is appended to that message."""
    columns, classes = [str(c) for c in columns], [str(c) for c in classes]
    both = f"{what}: {columns}; classes: {classes}" + (f"; {hint}" if hint else "")
    for kind, names in (("column", columns), ("class", classes)):
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"{where}: duplicate {kind} name(s) {dup}; {both}")
    found, missing, unknown = _pair_up(columns, classes)
    if not missing and not unknown:
        loose = {k: v for k, v in found.items() if k != v}
        if loose:
            log.info("%s: %s matched to classes up to case and punctuation: %s", where, what, loose)
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
