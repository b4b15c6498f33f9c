"""Checks on the op family files themselves: the line budget, reduce.py's shadowed builtins, the nn namespace."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from relax_mlir import op as relax_op

OP_DIR = Path(relax_op.__file__).parent
FILES = sorted(OP_DIR.rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(OP_DIR)))
def test_family_file_is_within_the_line_budget(path):
    lines = len(path.read_text().splitlines())
    assert lines <= 500, f"{path.relative_to(OP_DIR)} has {lines} lines: split it by concern"


def test_reduce_does_not_use_the_builtins_it_shadows():
    # reduce.py binds sum, max and min to ops: reading those names there gets an Op, not the builtin.
    tree = ast.parse((OP_DIR / "reduce.py").read_text())
    uses = [f"line {n.lineno}: {n.id}" for n in ast.walk(tree)
            if isinstance(n, ast.Name) and n.id in ("sum", "max", "min") and isinstance(n.ctx, ast.Load)]
    assert not uses, "reduce.py reads a shadowed builtin: " + ", ".join(uses)


def test_every_nn_op_is_in_the_nn_namespace():
    nn_ops = [o for o in relax_op.list_ops() if o.name.startswith("relax.nn.")]
    assert nn_ops
    for o in nn_ops:
        short = o.name[len("relax.nn."):]
        assert getattr(relax_op.nn, short, None) is o, f"relax_mlir.op.nn.{short} is missing"
        assert short in relax_op.nn.__all__
