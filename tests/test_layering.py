"""Dependencies point down only (docs/architecture.md, "Layers").

Walks every import of every module of the package, top-level and inside functions alike, and
fails on any cycle between modules and on any edge from a layer to a layer above it or to a
sibling package of its own layer. There is no allow-list: a module that needs something from
above has that thing in the wrong layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "ascendir"

# Top to bottom. A module belongs to the first entry whose prefix it has; the entries of one
# row are siblings: none may import another.
LAYERS: list[tuple[str, ...]] = [
    ("ascendir.__init__", "ascendir.__main__"),  # the public Python API: it re-exports api/library.py's
    ("ascendir.api", "ascendir.api.calibration"),
    ("ascendir.driver",),
    ("ascendir.pipelines",),
    ("ascendir.frontends", "ascendir.transforms.nn", "ascendir.interpreter"),
    ("ascendir.conversion",),
    ("ascendir.transforms.ascend",),
    ("ascendir.patterns",),
    ("ascendir.costmodel",),
    ("ascendir.session",),
    ("ascendir.hardware",),
    ("ascendir.dialects",),
    ("ascendir.weights",),
    ("ascendir.dtypes",),
    ("ascendir.errors",),
]


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    return ".".join(rel.parts)


def modules() -> dict[str, Path]:
    """Every module of the package but empty package markers (an `__init__.py` without code
    belongs to no layer: importing the package imports nothing)."""
    return {module_name(p): p for p in sorted(PKG.rglob("*.py")) if p.name != "__init__.py" or ast.parse(p.read_text()).body}


def resolve(name: str, known: dict[str, Path]) -> str | None:
    """The known module `name` refers to (a package means its __init__), or None outside ascendir."""
    while name:
        if name in known:
            return name
        if name + ".__init__" in known:
            return name + ".__init__"
        name = name.rpartition(".")[0]
    return None


def imports(mod: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every ascendir module `mod` imports anywhere in its source (functions included)."""
    out: set[str] = set()
    package = mod.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            # `from pkg import mod` imports the submodule when there is one
            targets = [f"{base}.{a.name}" if resolve(f"{base}.{a.name}", known) in (f"{base}.{a.name}", f"{base}.{a.name}.__init__")
                       else base for a in node.names]
        else:
            continue
        for t in targets:
            if t.startswith("ascendir") and (r := resolve(t, known)) and r != mod:
                out.add(r)
    return out


def layer_of(mod: str) -> tuple[int, str]:
    for i, row in enumerate(LAYERS):
        for prefix in row:
            if mod == prefix or mod.startswith(prefix + "."):
                return i, prefix
    raise AssertionError(f"{mod} is in no layer of tests/test_layering.py: give it one")


def graph() -> dict[str, set[str]]:
    known = modules()
    return {m: imports(m, p, known) for m, p in known.items()}


def test_every_module_has_a_layer():
    for m in modules():
        layer_of(m)


def test_no_upward_or_sideways_edge():
    bad = []
    for a, deps in graph().items():
        la, pa = layer_of(a)
        for b in sorted(deps):
            lb, pb = layer_of(b)
            if lb < la or (lb == la and pa != pb):
                bad.append(f"{a} -> {b}")
    assert not bad, "imports that do not point down:\n" + "\n".join(bad)


def strongly_connected(g: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[list[str]] = []
    for root in g:
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return comps


def test_no_import_cycle():
    cycles = strongly_connected(graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_checker_sees_cycles_and_upward_edges():
    # the walk itself must be able to fail
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert layer_of("ascendir.api.cli")[0] < layer_of("ascendir.dialects.nn")[0]
    assert layer_of("ascendir.interpreter.sim.kernel")[1] != layer_of("ascendir.frontends.onnx")[1]
