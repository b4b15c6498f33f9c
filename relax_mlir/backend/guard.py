"""An existing op moved under an ``scf.if``: ``scf.if %cond { yield <stand-ins> } else { %r = <op>; yield %r }``.

The shape that size checks (``legalize/size_checks.py``: on a mismatch the op does not run and an empty tensor or
its inits stand in) and empty-size skips (``schedule/common.py: unless_empty``: over no iterations a linalg op
returns its inits) both build around a linalg op on tensors. Bufferized, the two branches are one buffer when the
stand-ins are the op's inits: nothing is copied.
"""

from __future__ import annotations

from typing import Callable, Sequence

from mlir import ir
from mlir.dialects import scf


def move_into_else(op: ir.Operation, condition: ir.Value,
                   stand_ins: Callable[[], Sequence[ir.Value]]) -> scf.IfOp:
    """Move ``op`` into the else branch of a new ``scf.if`` on ``condition`` (an ``i1`` defined before ``op``),
    whose then branch yields ``stand_ins()`` (built there, one per result of ``op``). Every use of ``op``'s results
    becomes a use of the ``scf.if``'s."""
    with ir.InsertionPoint(op), op.location:
        choose = scf.IfOp(condition, [r.type for r in op.results], has_else=True)
        with ir.InsertionPoint(choose.then_block):
            scf.YieldOp(list(stand_ins()))
    for old, new in zip(op.results, choose.results):
        old.replace_all_uses_with(new)
    with ir.InsertionPoint(choose.else_block), op.location:
        yield_op = scf.YieldOp(list(op.results))
    op.move_before(yield_op.operation)
    return choose
