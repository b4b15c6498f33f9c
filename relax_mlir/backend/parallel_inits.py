"""Elementwise ops that read their initial value: the value is read from the fill it comes from instead.

A ``linalg.generic`` whose loops are all parallel and whose body reads an output operand (``out + x`` on a tensor
filled with zeros: an einsum or a reduction over no axis) computes each element once, from that element's initial
value. ``linalg-fuse-elementwise-ops`` (MLIR 22) fuses such a producer into its consumer keeping the producer's
result as an extra output of the fused op, written through the consumer's map of the fused operand; when that map
leaves out some of the consumer's loops (a contraction reading the producer along its summed axis), the element is
written once per iteration of the missing loops, each time adding ``x`` to what the last one wrote: einsum
``i->i`` read by ``i,ij->j`` came out squared, and so did every gradient of a diagonal einsum (found by a bug hunt).
Where the initial value is a ``linalg.fill``, the body reads the filled scalar instead, and the fusion pass sees a
producer that writes fresh values.
"""

from __future__ import annotations

from mlir import ir

from .schedule.common import all_parallel, defining_op, ops_named


def read_fills_directly(module: ir.Module) -> int:
    """In every all-parallel ``linalg.generic`` of ``module``, replace the body's reads of an output operand that a
    ``linalg.fill`` produced by the fill's scalar; returns how many reads were replaced. Reads of another initial
    value are left: no lowering writes one (checked over the op tests' programs, 2026-11-27)."""
    count = 0
    for op in ops_named(module.operation, {"linalg.generic"}):
        if not all_parallel(op):
            continue
        block = op.regions[0].blocks[0]
        n_inputs = len(op.operands) - len(op.results)
        for k in range(len(op.results)):
            arg = block.arguments[n_inputs + k]
            if not list(arg.uses):
                continue
            fill = defining_op(op.operands[n_inputs + k])
            if fill is None or fill.name != "linalg.fill":
                continue
            arg.replace_all_uses_with(fill.operands[0])
            count += 1
    return count

