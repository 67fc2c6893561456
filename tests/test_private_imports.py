"""No module of the package uses another module's underscore names: what one module needs from
another is public there (``from X import _name`` and ``X._name`` are refused; dunder names and
private *modules* such as ``_fs`` or ``_seg_core``, the package's internal helpers, are fine)."""

from __future__ import annotations

import ast
from pathlib import Path

import medimg_bench

PACKAGE = Path(medimg_bench.__file__).parent
ROOT = PACKAGE.parent


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(dotted: str) -> bool:
    p = ROOT.joinpath(*dotted.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _source(node: ast.ImportFrom, path: Path) -> str:
    if not node.level:
        return node.module or ""
    here = _module(path).split(".")
    base = here if path.name == "__init__.py" else here[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def private_uses(path: Path) -> list[str]:
    """``line: what`` for each use in ``path`` of another package module's underscore name."""
    me, tree = _module(path), ast.parse(path.read_text(encoding="utf-8"))
    found, modules = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            src = _source(node, path)
            if not src.startswith("medimg_bench"):
                continue
            for alias in node.names:
                if _is_module(f"{src}.{alias.name}"):
                    modules[alias.asname or alias.name] = f"{src}.{alias.name}"
                elif _private(alias.name) and src != me:
                    found.append(f"{node.lineno}: from {src} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("medimg_bench"):
                    modules[alias.asname or alias.name] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            owner = ast.unparse(node.value)
            module = modules.get(owner) or (owner if owner.startswith("medimg_bench.") and _is_module(owner) else None)
            if module and module != me and not _is_module(f"{module}.{node.attr}"):
                found.append(f"{node.lineno}: {owner}.{node.attr}")
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    offenders = [f"{path.relative_to(ROOT)}:{use}" for path in sorted(PACKAGE.rglob("*.py"))
                 for use in private_uses(path)]
    assert not offenders, "make these names public where they are defined:\n" + "\n".join(offenders)


def test_the_check_finds_both_forms(tmp_path: Path, monkeypatch) -> None:
    pkg = tmp_path / "medimg_bench"
    (pkg / "sub").mkdir(parents=True)
    for name in ("__init__.py", "sub/__init__.py", "sub/_helpers.py", "sub/a.py"):
        (pkg / name).write_text("")
    (pkg / "sub" / "b.py").write_text(
        "import medimg_bench.sub.a as A\n"
        "from medimg_bench.sub.a import _hidden, public, __version__\n"
        "from . import _helpers\n"
        "from .a import _other\n"
        "from medimg_bench.sub import a\n"
        "x = a._attr + A._attr2 + _helpers.thing + a.__doc__\n")
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert sorted(private_uses(pkg / "sub" / "b.py")) == sorted([
        "2: from medimg_bench.sub.a import _hidden", "4: from medimg_bench.sub.a import _other",
        "6: a._attr", "6: A._attr2"])
