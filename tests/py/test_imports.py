"""No import cycles in ``relax_mlir``: every module imports alone, and the static import graph is acyclic.

A cycle that "works" depends on which module a user happens to import first; these checks make one fail here.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "relax_mlir"


def module_names() -> dict[str, Path]:
    """Every module of the package by dotted name (packages by their ``__init__.py``)."""
    names = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def top_level_statements(body):
    """Statements run at import time (inside top-level ``if``/``try`` too; not inside functions)."""
    for stmt in body:
        if isinstance(stmt, (ast.If, ast.Try)):
            yield from top_level_statements(stmt.body)
            for handler in getattr(stmt, "handlers", []):
                yield from top_level_statements(handler.body)
            yield from top_level_statements(stmt.orelse)
        else:
            yield stmt


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports at its top level, relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for stmt in top_level_statements(ast.parse(path.read_text(), str(path)).body):
        if isinstance(stmt, ast.Import):
            found.update(alias.name for alias in stmt.names if alias.name in modules)
        elif isinstance(stmt, ast.ImportFrom):
            if stmt.level:
                base = package.split(".")[:len(package.split(".")) - (stmt.level - 1)]
                target = ".".join(base + ([stmt.module] if stmt.module else []))
            else:
                target = stmt.module or ""
            if target in modules:
                found.add(target)
            found.update(f"{target}.{a.name}" for a in stmt.names if f"{target}.{a.name}" in modules)
    # A module's enclosing packages are already being imported when it runs: not an edge of a cycle.
    return {m for m in found if not (name + ".").startswith(m + ".")}


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of ``graph`` as a path ``[a, b, ..., a]``, or ``[]`` if it has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return []


def test_find_cycle_reports_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []


def test_top_level_import_graph_has_no_cycle():
    modules = module_names()
    graph = {name: imported_modules(name, path, modules) for name, path in modules.items()}
    cycle = find_cycle(graph)
    assert not cycle, "import cycle in relax_mlir: " + " -> ".join(cycle)


# Runs in one subprocess: third-party packages are loaded once, then each module is imported in a forked child
# that has never imported relax_mlir, so every module is imported first, alone.
_IMPORT_EACH = textwrap.dedent("""
    import importlib, os, sys, traceback
    import numpy, mlir.ir  # noqa: F401 - shared by the children; relax_mlir itself is not loaded here
    failed = []
    for name in sys.argv[1:]:
        pid = os.fork()
        if pid == 0:
            try:
                importlib.import_module(name)
            except BaseException:
                traceback.print_exc()
                os._exit(1)
            os._exit(0)
        if os.waitpid(pid, 0)[1] != 0:
            failed.append(name)
    print(" ".join(failed))
""")


def test_every_module_imports_alone():
    names = sorted(module_names())
    done = subprocess.run([sys.executable, "-c", _IMPORT_EACH, *names], cwd=PACKAGE.parent, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    failed = done.stdout.split()
    assert not failed, f"modules that fail when imported first: {failed}\n{done.stderr}"
