"""The package's layers only point down, and no module imports itself back (read with ``ast``).

The rule (also in docs/design.md): the configuration layer (``cli`` over ``baselines`` over
``runs``) sits above ``protocols`` and ``report`` (the run page), which sit above ``engine``; ``engine`` above ``tasks``; ``tasks`` above
``models``; ``models`` above ``datasets`` and ``metrics`` (two rooms that never import each
other); everything above the core (``registry``, ``sample``, ``_fs``, ``resources``,
``findings``, ``builders``). An import may point down or stay in its own room, never up or
sideways. Imports inside functions count: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "medimg_bench"

LAYERS: dict[str, int] = {
    "registry": 0, "sample": 0, "_fs": 0, "_hashing": 0, "identity": 0, "_secrets": 0, "resources": 0, "findings": 0, "hub": 0,
    "builders": 0,
    "datasets": 1, "metrics": 1,
    "models": 2,
    "tasks": 3,
    "engine": 4,
    "protocols": 5, "report": 5,
    "runs": 6,
    "baselines": 7,
    "cli": 8,
}
# rooms of one layer that must not import each other
SIDEWAYS_FORBIDDEN = {frozenset({"datasets", "metrics"})}
# the top-level facade imports lazily by name (medimg_bench.evaluate, ...): exempt
FACADE = "medimg_bench"
# modules kept so that names stay importable from where they used to be; each only forwards
# attribute access (a module-level __getattr__) to the module that now holds the name
COMPAT_ALIASES: dict[str, str] = {
    "medimg_bench.engine.pipeline": "medimg_bench.runs",
    "medimg_bench.engine.sweep": "medimg_bench.runs.sweep",
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(name: str, path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                mod = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.add(mod)
            found |= {f"{mod}.{a.name}" for a in node.names}  # `from pkg import submodule`
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                found.add(node.args[0].value)
    return {m for m in found if m == FACADE or m.startswith(FACADE + ".")}


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    graph = {}
    for name, path in mods.items():
        graph[name] = {m for m in _imports(name, path) if m in mods and m != name}
    return graph


def test_every_room_has_a_layer() -> None:
    rooms = {_room(m) for m in _modules()} - {""}
    assert not rooms - set(LAYERS), f"give these a layer in LAYERS and docs/design.md: {sorted(rooms - set(LAYERS))}"


def test_imports_only_point_down() -> None:
    bad = []
    for src, targets in _graph().items():
        if src == FACADE or src in COMPAT_ALIASES:
            continue
        for dst in targets:
            a, b = _room(src), _room(dst)
            if not b or a == b:
                continue
            if LAYERS[b] > LAYERS[a] or (LAYERS[a] == LAYERS[b] and frozenset({a, b}) in SIDEWAYS_FORBIDDEN):
                bad.append(f"{src} -> {dst}  ({a}: layer {LAYERS[a]}, {b}: layer {LAYERS[b]})")
            elif LAYERS[a] == LAYERS[b] and LAYERS[a] > 0:
                bad.append(f"{src} -> {dst}  (sideways between rooms of layer {LAYERS[a]})")
    assert not bad, "imports that point up or sideways:\n" + "\n".join(sorted(bad))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles() -> None:
    graph = _graph()
    # a package's __init__ re-exporting its own modules is not a cycle: drop edges from a module
    # to the packages that contain it
    pruned = {
        src: {d for d in dsts if not src.startswith(d + ".")} for src, dsts in graph.items()
    }
    cycles = _cycles(pruned)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize("alias", sorted(COMPAT_ALIASES))
def test_compat_aliases_only_forward(alias: str) -> None:
    path = _modules()[alias]
    tree = ast.parse(path.read_text())
    kinds = {type(n).__name__ for n in tree.body}
    assert kinds <= {"Expr", "ImportFrom", "Import", "FunctionDef", "Assign"}, kinds
    funcs = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert funcs == ["__getattr__"], f"{alias} must hold nothing but a forwarding __getattr__"
