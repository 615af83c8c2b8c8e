"""The house's import rules, checked on the source: no import circles, no import that runs back
up a floor, and no private (`_name`) import across files. Imports inside functions count too:
a lazy import is still a dependency.

Floors, lowest first (a module may import its own floor or lower ones):
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("compiler", "frontends", "tools")
FLOORS = (
    ("compiler.errors", "compiler.threads", "compiler.ops", "compiler.progress", "compiler.symbolic"),
    ("compiler.dialects", "compiler.stages", "compiler.cache", "compiler.fingerprint"),
    ("compiler.reference", "compiler.numerics"),
    ("compiler.lowering",),  # target-independent passes
    ("compiler.stats", "compiler.codegen"),  # codegen: emitters per output language
    ("frontends",),
    ("compiler.targets",),  # the registry, then each target's package
    ("compiler.pipeline", "compiler.universe"),
    ("compiler.api", "compiler.tune_worker"),  # tune_worker: the autotuner's child process
    ("compiler",),  # compiler/__init__: the public API
    ("tools",),
)
__doc__ += "".join(f"\n    {i}: {', '.join(f)}" for i, f in enumerate(FLOORS))


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            mods[name.removesuffix(".__init__")] = path
    return mods


MODULES = _modules()


def _resolve(name: str) -> str | None:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in MODULES:
            return ".".join(parts[:i])
    return None


def _imports(module: str, path: Path):
    """(imported module, [names imported from it], line) for every project import; a private
    attribute read off an imported project module (`aicc._fmt(...)`) counts as a name
    imported from it."""
    tree = ast.parse(path.read_text(), str(path))
    bound = {}  # local name -> project module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and (target := _resolve(a.name)) == a.name:
                    bound[a.asname] = target
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if full in MODULES:
                    bound[a.asname or a.name] = full
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in bound and node.attr.startswith("_")
                and not node.attr.startswith("__") and bound[node.value.id] != module):
            yield bound[node.value.id], [node.attr], node.lineno
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if (target := _resolve(a.name)) and target != module:
                    yield target, [], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            base = node.module or ""
            if node.level:
                pkg = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = ".".join(pkg[:len(pkg) - node.level + 1] + ([base] if base else []))
            for a in node.names:
                target = _resolve(f"{base}.{a.name}") or _resolve(base)
                if target and target != module:
                    # `from pkg import submodule` imports the submodule, not a name
                    names = [] if target == _resolve(f"{base}.{a.name}") != _resolve(base) else [a.name]
                    yield target, names, node.lineno


def _floor(module: str) -> int:
    best = (-1, -1)
    for floor, prefixes in enumerate(FLOORS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best[0]:
                best = (len(p), floor)
    assert best[1] >= 0, f"{module} is on no floor: add it to FLOORS"
    return best[1]


GRAPH: dict[str, set[str]] = defaultdict(set)
EDGES = []
for _m, _p in MODULES.items():
    for _t, _names, _line in _imports(_m, _p):
        GRAPH[_m].add(_t)
        EDGES.append((_m, _t, _names, _line))


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
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

    for v in sorted(MODULES):
        if v not in index:
            visit(v)
    return out


def test_the_graph_is_read():
    assert len(MODULES) > 50 and len(EDGES) > 100
    assert ("compiler.pipeline", "compiler.targets") in {(a, b) for a, b, _, _ in EDGES}


def test_no_import_circles():
    assert _cycles() == []


def test_no_import_runs_up_a_floor():
    up = [f"{a} (floor {_floor(a)}) imports {b} (floor {_floor(b)}) at line {line}"
          for a, b, _, line in EDGES if _floor(b) > _floor(a)]
    assert up == []


@pytest.mark.parametrize("shared", ["compiler.dialects", "compiler.lowering", "compiler.codegen",
                                    "frontends", "compiler.stages", "compiler.reference"])
def test_shared_levels_import_no_target(shared):
    bad = [(a, b) for a, b, _, _ in EDGES if (a == shared or a.startswith(shared + "."))
           and b.startswith("compiler.targets")]
    assert bad == []


def test_frontends_never_import_the_public_api():
    bad = [(a, b) for a, b, _, _ in EDGES if a.startswith("frontends")
           and b in ("compiler", "compiler.api", "compiler.pipeline")]
    assert bad == []


def test_no_private_name_imported_across_files():
    bad = [f"{a}:{line} imports {n} from {b}" for a, b, names, line in EDGES for n in names
           if n.startswith("_") and not n.startswith("__")]
    assert bad == []


def test_the_checker_sees_a_circle_and_an_upward_import():
    """The rules above can fail: a made-up upward edge and circle are caught."""
    GRAPH["compiler.errors"].add("compiler.api")
    try:
        assert any("compiler.errors" in c and "compiler.api" in c for c in _cycles())
        assert _floor("compiler.api") > _floor("compiler.errors")
    finally:
        GRAPH["compiler.errors"].discard("compiler.api")
