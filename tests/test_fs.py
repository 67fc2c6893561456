"""One atomic-write helper: no module but ``_fs.py`` renames a file into place itself (every
writer goes through ``atomic_path`` / ``atomic_write`` / ``locked_materialize``), and the
helper's files get the mode a plain ``open()`` gives (the umask's), not ``mkstemp``'s 0600."""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path

import medimg_bench
from medimg_bench._fs import atomic_path, atomic_write, is_temporary

PACKAGE = Path(medimg_bench.__file__).parent
#: ``os.<name>(...)`` calls that put a file in place
RENAMES = {"replace", "rename", "renames"}


def _renames(tree: ast.AST) -> list[tuple[int, str]]:
    """``os.replace`` / ``os.rename`` / ``shutil.move`` calls, and ``<path>.replace(target)`` /
    ``<path>.rename(target)`` (one positional argument, no keywords: ``str.replace`` takes two,
    ``DataFrame.rename`` keywords)."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner, attr = ast.unparse(node.func.value), node.func.attr
        if (owner == "os" and attr in RENAMES) or (owner == "shutil" and attr == "move"):
            found.append((node.lineno, ast.unparse(node)))
        elif attr in ("replace", "rename") and len(node.args) == 1 and not node.keywords:
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_no_module_renames_files_into_place_itself() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_fs.py" and path.parent == PACKAGE:
            continue
        for line, call in _renames(ast.parse(path.read_text(encoding="utf-8"))):
            offenders.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {call}")
    assert not offenders, "use medimg_bench._fs.atomic_path / atomic_write instead:\n" + "\n".join(offenders)


def test_the_detector_finds_each_way_of_renaming() -> None:
    src = ("import os, shutil\nos.replace(a, b)\nos.rename(a, b)\nshutil.move(a, b)\ntmp.replace(path)\n"
           "tmp.rename(path)\ns.replace('a', 'b')\ndf.rename(columns={})\n")
    assert [line for line, _ in _renames(ast.parse(src))] == [2, 3, 4, 5, 6]


def test_helper_files_get_the_umask_mode(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        with atomic_path(tmp_path / "a.bin") as tmp:
            tmp.write_bytes(b"x")
            assert is_temporary(tmp)
        with atomic_write(tmp_path / "b.txt", mode="w") as f:
            f.write("y")
        (tmp_path / "c.txt").write_text("z")
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes == {"a.bin": 0o644, "b.txt": 0o644, "c.txt": 0o644}
    assert not is_temporary(tmp_path / "a.bin") and not is_temporary(tmp_path / ".a.bin.lock")
