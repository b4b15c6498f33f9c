"""Reduction schedules: float sums that may be reassociated, so that LLVM vectorizes them.

A float sum computed in order is a chain of dependent adds: one add per 4 cycles on one lane, and LLVM's loop
vectorizer will not reorder it. The user asked for a sum (``R.sum``, ``R.mean``, ``R.variance``, a bias
gradient, a batch-norm statistic), not for a particular order of additions, as in NumPy (pairwise) and every
BLAS. So the accumulating ``arith.addf`` (and ``arith.mulf`` of a product) in the body of every
``linalg.generic`` with a reduction loop gets ``fastmath<reassoc>``: LLVM then keeps one partial sum per lane
and adds them at the end. Results change in their last bits only: the float32 tests compare against a float64
NumPy reference at rtol 1e-4, float64 at 1e-9, and these hold.

Max/min reductions are exact in any order but LLVM vectorizes them only without NaNs (``nnan``), which would
change what a NaN input gives: they are left alone.
"""

from __future__ import annotations

from mlir import ir

from .common import ops_named

_COMBINERS = {"arith.addf", "arith.mulf"}


def _has_reduction(op: ir.Operation) -> bool:
    return any("reduction" in str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"]))


def _accumulators(op: ir.Operation) -> list[ir.Operation]:
    """The float adds/multiplies whose result the body yields (the accumulation into the output)."""
    block = op.regions[0].blocks[0]
    body = list(block.operations)
    found = []
    for value in body[-1].operands:  # linalg.yield
        owner = value.owner
        owner = getattr(owner, "operation", owner)
        if isinstance(owner, ir.Operation) and owner.name in _COMBINERS:
            found.append(owner)
    return found


def reassociate_reductions(module: ir.Module) -> int:
    """Mark the accumulations of every float reduction ``fastmath<reassoc>``; returns how many were marked."""
    reassoc = ir.Attribute.parse("#arith.fastmath<reassoc>")
    count = 0
    for op in ops_named(module.operation, {"linalg.generic"}):
        if not _has_reduction(op):
            continue
        for acc in _accumulators(op):
            acc.attributes["fastmath"] = reassoc
            count += 1
    return count
