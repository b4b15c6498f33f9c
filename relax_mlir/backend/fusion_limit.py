"""A bound on how many elementwise ops fuse into one loop (TVM's ``max_fuse_depth``).

``linalg-fuse-elementwise-ops`` merges an elementwise ``linalg.generic`` into its consumer whenever the consumer is
its one user, so a chain of N elementwise ops becomes one loop whose body holds all N. Both that pass (it clones
the growing body at every step) and LLVM (one basic block of thousands of instructions) take time quadratic in N:
a chain of 500 ``add``/``tanh`` ops compiled in 1.9 s, 2000 in 18 s, 18 of 20 in the fused loop. TVM's FuseOps
stops a group at 256 ops for the same reason.

``limit_fusion_depth`` walks each function's elementwise generics in order and counts, for each, the generics
fusion would merge into it: itself and, through every input whose producer is an elementwise generic with this one
user, that producer's count. Where a count would pass ``MAX_FUSED``, the input with the largest count is read
through a ``linalg.copy`` into a fresh tensor instead (a named op, which the fusion pass does not merge): the chain
is computed in loops of at most ``MAX_FUSED`` ops each, one extra pass over the tensor per ``MAX_FUSED`` ops. The
training steps of the models here have groups of a few ops to a few dozen (Adam's update, batch norm's backward):
none reaches the bound, their code is unchanged.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from .schedule.common import all_parallel, as_operation, defining_op, indexing_maps

#: The most elementwise ops one fused loop may hold (the generics of the relax ops; TVM's bound is 256 relax ops).
MAX_FUSED = 64


def limit_fusion_depth(module: ir.Module, max_fused: int = MAX_FUSED) -> int:
    """Cut every chain of elementwise generics that would fuse into more than ``max_fused`` (module docstring);
    returns how many copies were inserted."""
    cuts = 0
    for func in module.body.operations:
        func = as_operation(func)
        if func.name != "func.func" or len(func.regions[0].blocks) == 0:
            continue
        counts: dict[ir.Operation, int] = {}
        for op in func.regions[0].blocks[0].operations:
            op = as_operation(op)
            if op.name != "linalg.generic" or not _elementwise(op):
                continue
            n_inputs = len(op.operands) - len(op.results)
            fused = {i: counts.get(_fusable_producer(op.operands[i]), 0) for i in range(n_inputs)}
            total = 1 + sum(fused.values())
            while total > max_fused and any(fused.values()):
                i = max(fused, key=fused.get)
                _read_through_copy(op, i)
                total -= fused.pop(i)
                cuts += 1
            counts[op] = total
    return cuts


def _elementwise(op: ir.Operation) -> bool:
    return all_parallel(op) and all(m.is_projected_permutation for m in indexing_maps(op))


def _fusable_producer(value: ir.Value):
    """The elementwise generic producing ``value`` that the fusion pass would merge into its one user, or None."""
    producer = defining_op(value)
    if producer is None or producer.name != "linalg.generic" or len(producer.results) != 1:
        return None
    return producer if len(list(value.uses)) == 1 else None


def _read_through_copy(op: ir.Operation, index: int) -> None:
    """Make ``op`` read operand ``index`` from a ``linalg.copy`` of it into a fresh tensor."""
    value = op.operands[index]
    kind = ir.RankedTensorType(value.type)
    with ir.InsertionPoint(op), op.location:
        sizes = [tensor.dim(value, arith.constant(ir.IndexType.get(), d)) if kind.is_dynamic_dim(d) else n
                 for d, n in enumerate(kind.shape)]
        copy = linalg.copy(value, outs=[tensor.empty(sizes, kind.element_type)])
    op.operands[index] = copy if isinstance(copy, ir.Value) else copy.results[0]
