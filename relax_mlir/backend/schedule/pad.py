"""Padding schedules: a large constant ``tensor.pad`` copied by a generic that the threads share.

Bufferized as it is, a ``tensor.pad`` becomes a fill of the padded buffer and a ``memref.copy`` of the source
into its interior, and that copy runs as scalar loops on one thread. The convolutions of a CNN step pad every
input (the forward convolution's activations, the data gradient's output gradient, the weight gradient's
transposed activations): on the 28x28 CNN those copies were 3% of the samples, all of it on one core while the
other waited. A static pad with a constant value and at least ``elementwise.PARALLEL_MIN_POINTS`` elements is
rewritten, on tensors, as

* an all-parallel ``linalg.generic`` that fills the padded tensor with the padding value (not a ``linalg.fill``,
  which bufferization makes a ``memset`` on the calling thread), and
* an all-parallel ``linalg.generic`` that copies the source into the interior (``extract_slice`` /
  ``insert_slice``, which bufferize in place), reading through a ``linalg.transpose`` that keeps the innermost
  dimension (the weight gradient pads ``x`` transposed: no transposed copy is made first).

Both are ordinary generics, so the elementwise schedule (``elementwise.py``) splits them across the threads and
LLVM vectorizes their rows. With one thread the pad is left as it is. The fill as a generic split across threads:
28x28 CNN step 2.32 -> 2.24 ms and 2.61 -> 2.54 ms (two A/B runs in one process, 2-core Intel Xeon), where the
memset had the other core waiting. Filling only the padding (slabs around the interior) was slower, 2.32 ->
2.44 ms: the slabs of the padded columns store one element every row, touching every cache line anyway.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import tensor

from ..legalize.core import generic
from . import elementwise
from .common import erase_if_unused, ops_named


def through_transpose(value: ir.Value) -> tuple[ir.Value, list[int]]:
    """(what to read, the permutation from ``value``'s indices to its): a ``linalg.transpose`` that keeps the
    innermost dimension is read through (no transposed copy), anything else as it is."""
    owner = value.owner
    owner = getattr(owner, "operation", owner)
    if isinstance(owner, ir.Operation) and owner.name == "linalg.transpose":
        perm = list(ir.DenseI64ArrayAttr(owner.attributes["permutation"]))
        if perm[-1] == len(perm) - 1:
            return owner.operands[0], perm
    return value, list(range(ir.RankedTensorType(value.type).rank))


def padding_value(pad: ir.Operation) -> ir.Value | None:
    """The value a pad yields if it is the same everywhere (defined outside its region), else None."""
    block = pad.regions[0].blocks[0]
    value = block.operations[0].operands[0] if len(block.operations) == 1 else None
    if value is None:
        return None
    owner = value.owner
    if isinstance(owner, ir.Block) or getattr(owner, "operation", owner).parent == pad:
        return None
    return value


def _rewrite(pad: ir.Operation) -> bool:
    result_t = ir.RankedTensorType(pad.results[0].type)
    source = pad.operands[0]
    source_t = ir.RankedTensorType(source.type)
    if len(pad.operands) != 1 or not (result_t.has_static_shape and source_t.has_static_shape):
        return False  # dynamic padding amounts or shapes: bufferization's copy stays
    value = padding_value(pad)
    if value is None:
        return False
    low = list(ir.DenseI64ArrayAttr(pad.attributes["static_low"]))
    rank = source_t.rank
    read, perm = through_transpose(source)
    d = [ir.AffineDimExpr.get(k) for k in range(rank)]
    read_map = ir.AffineMap.get(rank, 0, [d[perm.index(m)] for m in range(rank)])
    with ir.InsertionPoint(pad), pad.location:
        empty = tensor.empty(list(result_t.shape), result_t.element_type)
        (filled,) = generic([], [empty], [ir.AffineMap.get_identity(rank)], ["parallel"] * rank, lambda _o: value)
        interior = tensor.extract_slice(source_t, filled, [], [], [], low, list(source_t.shape), [1] * rank)
        (copied,) = generic([read], [interior], [read_map, ir.AffineMap.get_identity(rank)], ["parallel"] * rank,
                            lambda v, _o: v)
        out = tensor.insert_slice(copied, filled, [], [], [], low, list(source_t.shape), [1] * rank)
    pad.results[0].replace_all_uses_with(out)
    pad.erase()
    erase_if_unused(source)
    return True


def parallel_pads(module: ir.Module, threads: int = 1) -> int:
    """Rewrite every large constant pad of ``module`` (on tensors) as fill and copy generics; returns how many."""
    if threads < 2:
        return 0
    count = 0
    for pad in ops_named(module.operation, {"tensor.pad"}):
        points = 1
        for size in ir.RankedTensorType(pad.results[0].type).shape:
            points *= max(size, 0)
        if points >= elementwise.PARALLEL_MIN_POINTS:
            count += _rewrite(pad)
    return count
