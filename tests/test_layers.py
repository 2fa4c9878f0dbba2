"""The layers of ``src/hpd``, enforced: no import runs up the floors of :data:`LAYERS`, and no two modules
(nor two units) import each other, directly or round a circle.

Every module is parsed with :mod:`ast` (nothing is imported, so this takes well under a second); every
``import``/``from ... import`` counts, also those inside functions (the lazy ones), with relative imports
resolved. A *unit* is what sits directly under ``hpd``: a subpackage (``hpd.eval``, with all its modules), a
top-level module (``hpd.demo``, ``hpd.runfolder``), or ``hpd`` itself (its ``__init__``: the version and
the Pi constants). ``python -m`` entry points (``__main__`` modules) are command lines wherever they live:
each is a unit of its own on the CLI floor.

A module may import modules of its own unit, of the units on its own floor and of the units on any floor
below. The same table, with what each floor is, is in docs/architecture.md ("Layers"); the last test keeps
the two equal.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "hpd"

#: floors, bottom first: (floor, units on it)
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("hpd", "runfolder", "resources")),
    ("harness", ("harness", "harnesses")),
    ("inputs", ("bench", "policy", "document")),
    ("capture", ("boundary", "serve")),
    ("evaluation", ("eval", "views")),
    ("stages", ("teacher", "train", "probe", "export", "bfcl")),
    ("baselines", ("methods",)),
    ("report", ("report",)),
    ("orchestration", ("demo", "demo_engine", "demo_estimate", "study")),
    ("cli", ("cli", "__main__", "api")),
]
FLOOR = {u: i for i, (_, units) in enumerate(LAYERS) for u in units}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@lru_cache(maxsize=1)
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def unit(mod: str) -> str:
    """``hpd.eval.variant`` -> ``eval``; ``hpd`` -> ``hpd``; any ``pkg.__main__`` -> itself (a command line)."""
    if mod.endswith(".__main__"):
        return mod
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def floor(mod: str) -> int:
    return FLOOR["__main__" if mod.endswith(".__main__") else unit(mod)]


def _resolve(name: str) -> str | None:
    """The module ``name`` names: itself, or the nearest enclosing module (``hpd.x.y.Class`` -> ``hpd.x.y``)."""
    mods = modules()
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(mod: str) -> dict[str, int]:
    """``{imported hpd module: first line}`` of every import statement in ``mod``, at any depth."""
    path = modules()[mod]
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                src = ".".join(base + ([node.module] if node.module else []))
            else:
                src = node.module or ""
            # ``from pkg import sub`` imports the module pkg.sub; ``from mod import name`` imports mod
            targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in modules() else src for a in node.names]
        else:
            continue
        for t in targets:
            if t == "hpd" or t.startswith("hpd."):
                r = _resolve(t)
                if r and r != mod:
                    found.setdefault(r, node.lineno)
    return found


@lru_cache(maxsize=1)
def graph() -> dict[str, dict[str, int]]:
    return {m: imports_of(m) for m in modules()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
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
                        out.append(sorted(comp))
    return out


def _where(mod: str, line: int) -> str:
    return f"{modules()[mod].relative_to(REPO).as_posix()}:{line}"


def test_every_unit_has_a_floor():
    missing = sorted({unit(m) for m in modules() if not m.endswith(".__main__")} - set(FLOOR))
    assert not missing, f"units on no floor (add them to LAYERS here and in docs/architecture.md): {missing}"
    assert len(FLOOR) == sum(len(units) for _, units in LAYERS), "a unit is on two floors"


def test_the_parser_sees_lazy_and_relative_imports():
    g = graph()
    assert "hpd.runfolder" in g["hpd.eval.variant"]              # a top-level absolute import
    assert "hpd.eval.rollout" in g["hpd.eval.variant"]           # from .rollout import ...
    assert "hpd.bench.loader" in g["hpd.eval.variant"]           # inside a function
    assert "hpd.harness.loop" in g["hpd.harness"]                # from .loop import ... in an __init__


def test_no_import_runs_up_the_layers():
    up = [f"{_where(m, line)}: {m} ({LAYERS[floor(m)][0]}) imports {t} ({LAYERS[floor(t)][0]})"
          for m, targets in graph().items() for t, line in targets.items() if floor(t) > floor(m)]
    assert not up, "imports that run up the layers (tests/test_layers.py LAYERS):\n" + "\n".join(up)


def test_no_import_cycle_between_modules():
    g = graph()
    found = cycles({m: set(t) for m, t in g.items()})
    msg = ["  " + " <-> ".join(c) + ": " + ", ".join(_where(a, g[a][b]) + f" -> {b}" for a in c for b in c
                                                      if b in g[a]) for c in found]
    assert not found, "modules that import each other:\n" + "\n".join(msg)


def test_no_import_cycle_between_units():
    g = graph()
    edges: dict[str, set[str]] = {}
    why: dict[tuple[str, str], str] = {}
    for m, targets in g.items():
        for t, line in targets.items():
            a, b = unit(m), unit(t)
            if a != b:
                edges.setdefault(a, set()).add(b)
                why.setdefault((a, b), f"{_where(m, line)} -> {t}")
    found = cycles(edges)
    msg = ["  " + " <-> ".join(c) + ": " + ", ".join(why[a, b] for a in c for b in c if (a, b) in why)
           for c in found]
    assert not found, "units (packages) that import each other:\n" + "\n".join(msg)


def test_docs_state_the_same_layers():
    text = (REPO / "docs/architecture.md").read_text(encoding="utf-8")
    assert "\n## Layers\n" in text, "docs/architecture.md has no '## Layers' section"
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    assert "tests/test_layers.py" in section
    rows = [ln for ln in section.splitlines() if ln.startswith("|") and not ln.startswith("|---")][1:]
    documented = [(cells[1].strip(), tuple(re.findall(r"`([\w.]+)`", cells[2])))
                  for cells in (r.split("|") for r in rows)]
    want = list(reversed(LAYERS))     # the page lists the top floor first
    assert [(f, tuple(f"hpd.{u}" if u not in ("hpd", "__main__") else u for u in units))
            for f, units in want] == documented
