"""Loop coalescing: a ``linalg.generic`` over adjacent loops that every operand reads contiguously runs as one loop.

A convolutional network's elementwise work (batch-norm normalisation, ReLU, their gradients, the statistics'
reductions) is 4-D: ``(n, c, h, w)`` with ``w`` the innermost loop. ``w`` is short (28, 14, 8, 4) and often
not a multiple of the vector width, so LLVM's loop vectorizer, which works on the innermost loop, runs a
16-lane body once or not at all plus a scalar remainder. When loops ``h`` and ``w`` are read in that order
and next to each other by every operand that reads either (and not at all by the others, e.g. a per-channel
``(1, C, 1, 1)`` scale), they are one loop of ``h * w`` iterations over the same memory: the operands are
collapsed (``tensor.collapse_shape``, a free view of a contiguous tensor), the generic runs over the merged
loops and its results are expanded back. The body is moved unchanged (a body that reads ``linalg.index``
is left alone, as is a tagged generic another schedule owns). Two dims of an ``extract_slice`` whose inner dim
is cut (a convolution's output cropped from its wide rows) are not adjacent in memory and stay apart: collapsed,
the slice would be copied whole, on one thread, before the generic.

Measured on a 2-core AMD EPYC (AVX-512), the 28x28 CNN step at batch 64: a divide over ``64x16x14x14`` took
0.17 ms as 4 loops and (see ``benchmarks/op_profile.py``) about a third of that as ``64x16x196``.
"""

from __future__ import annotations

from typing import Optional

from mlir import ir
from mlir.dialects import linalg, tensor

from .common import indexing_maps, ops_named

#: Generics tagged by another schedule (pooling, im2col contractions, matmul epilogues) keep their loops: the tag's
#: owner reads them.
_OWNED_PREFIX = "relax_mlir."


def _iterators(op: ir.Operation) -> list[str]:
    return [str(ir.Attribute(a)) for a in ir.ArrayAttr(op.attributes["iterator_types"])]


def _position(amap: ir.AffineMap, dim: int) -> Optional[int]:
    """Where loop ``dim`` is read in ``amap``'s results (None if it is not)."""
    for pos, expr in enumerate(amap.results):
        if isinstance(expr, ir.AffineDimExpr) and expr.position == dim:
            return pos
    return None


def _mergeable(maps: list[ir.AffineMap], iterators: list[str], a: int, breaks: list[set[int]]) -> bool:
    """Whether loop ``a + 1`` can join loop ``a``: same kind, and read right after it or not at all by every map,
    in two dimensions of the operand that are adjacent in memory (not a break of ``_breaks``)."""
    if iterators[a] != iterators[a + 1]:
        return False
    for amap, cuts in zip(maps, breaks):
        first, second = _position(amap, a), _position(amap, a + 1)
        if (first is None) != (second is None) or (first is not None and (second != first + 1 or first in cuts)):
            return False
    return True


def _breaks(value: ir.Value) -> set[int]:
    """The dims ``p`` of an operand that cannot be collapsed with ``p + 1`` for free: an ``extract_slice`` that
    keeps part of dim ``p + 1`` (a conv's output cropped from its wide rows) or steps over dim ``p`` is strided
    there, and collapsing it would make bufferization copy the slice (a serial copy of the whole tensor)."""
    owner = value.owner
    owner = getattr(owner, "operation", owner)
    if not isinstance(owner, ir.Operation) or owner.name != "tensor.extract_slice":
        return set()
    source = ir.RankedTensorType(owner.operands[0].type)
    sizes = list(ir.DenseI64ArrayAttr(owner.attributes["static_sizes"]))
    strides = list(ir.DenseI64ArrayAttr(owner.attributes["static_strides"]))
    if len(sizes) != source.rank:  # rank-reducing: stay out of the way
        return set(range(len(sizes)))
    full = [size == extent and stride == 1 for size, extent, stride in zip(sizes, source.shape, strides)]
    return {p for p in range(source.rank - 1) if not (full[p + 1] and strides[p] == 1)}


def _projection(amap: ir.AffineMap) -> bool:
    """Whether ``amap`` reads dims (each at most once) or constants only. A dim read twice (an einsum's diagonal,
    ``(d0, d1, d1)``) walks the operand with a stride of a row plus one, which no collapse of adjacent dims keeps."""
    dims = [e.position for e in amap.results if isinstance(e, ir.AffineDimExpr)]
    plain = all(isinstance(e, (ir.AffineDimExpr, ir.AffineConstantExpr)) for e in amap.results)
    return plain and len(dims) == len(set(dims))


def _plain(op: ir.Operation) -> bool:
    """A generic whose maps are projections (``_projection``) and whose body does not ask for loop indices."""
    if op.name != "linalg.generic" or any(name.startswith(_OWNED_PREFIX) for name in op.attributes):
        return False
    if not all(isinstance(v.type, ir.RankedTensorType) for v in list(op.operands) + list(op.results)):
        return False
    if not all(_projection(amap) for amap in indexing_maps(op)):
        return False
    return not ops_named(op, {"linalg.index"})


def loop_groups(op: ir.Operation) -> Optional[list[list[int]]]:
    """The generic's loops in runs that can be merged (each run one loop), or None when nothing merges."""
    if not _plain(op):
        return None
    maps, iterators = indexing_maps(op), _iterators(op)
    if not iterators:
        return None
    breaks = [_breaks(v) for v in op.operands]
    groups = [[0]]
    for a in range(len(iterators) - 1):
        if _mergeable(maps, iterators, a, breaks):
            groups[-1].append(a + 1)
        else:
            groups.append([a + 1])
    return groups if len(groups) < len(iterators) else None


def _zero(expr: ir.AffineExpr) -> bool:
    return isinstance(expr, ir.AffineConstantExpr) and expr.value == 0


def _operand_plan(amap: ir.AffineMap, group_of: dict[int, int], groups: list[list[int]]):
    """For one operand: its new map's results and the reassociation collapsing its dims to them. A run of dims read
    at constant 0 (a per-channel ``(1, c, 1, 1)`` operand's 1s) collapses to one dim: kept apart, the new map would
    have more results than loops, which is no projected permutation, and MLIR's vectorizer refuses it."""
    results, reassociation, pos = [], [], 0
    exprs = list(amap.results)
    while pos < len(exprs):
        expr = exprs[pos]
        if isinstance(expr, ir.AffineDimExpr):
            g = group_of[expr.position]
            width = len(groups[g])  # the group's loops are read here in order (_mergeable)
            results.append(ir.AffineDimExpr.get(g))
        else:
            width = 1
            while _zero(expr) and pos + width < len(exprs) and _zero(exprs[pos + width]):
                width += 1  # adjacent dims read at index 0 (broadcast) collapse to one, read at 0 too
            results.append(expr)
        reassociation.append(list(range(pos, pos + width)))
        pos += width
    return results, reassociation


def _collapsed_type(t: ir.RankedTensorType, reassociation: list[list[int]]) -> ir.RankedTensorType:
    shape = []
    for group in reassociation:
        sizes = [t.shape[d] for d in group]
        dynamic = any(ir.ShapedType.is_dynamic_size(s) for s in sizes)
        prod = 1
        for s in sizes:
            prod *= s
        shape.append(ir.ShapedType.get_dynamic_size() if dynamic else prod)
    return ir.RankedTensorType.get(shape, t.element_type, t.encoding)


def _one_dynamic_per_group(t: ir.RankedTensorType, reassociation: list[list[int]]) -> bool:
    """expand_shape (the results' way back) takes at most one dynamic size per group."""
    return all(sum(ir.ShapedType.is_dynamic_size(t.shape[d]) for d in g) <= 1 for g in reassociation)


def coalesce(op: ir.Operation) -> bool:
    """Rewrite one generic over merged loops; False (nothing changed) if no loops merge."""
    groups = loop_groups(op)
    if groups is None:
        return False
    group_of = {d: g for g, members in enumerate(groups) for d in members}
    n_groups = len(groups)
    plans = [_operand_plan(m, group_of, groups) for m in indexing_maps(op)]
    operands = list(op.operands)
    if not all(_one_dynamic_per_group(v.type, r) for v, (_, r) in zip(operands, plans)):
        return False
    n_outs = len(op.results)
    iterators = _iterators(op)
    kinds = [ir.Attribute.parse(iterators[g[0]]) for g in groups]
    with ir.InsertionPoint(op), op.location:
        new_operands = []
        for v, (_, reassociation) in zip(operands, plans):
            t = ir.RankedTensorType(v.type)
            if len(reassociation) == t.rank:
                new_operands.append(v)
            else:
                new_operands.append(tensor.collapse_shape(_collapsed_type(t, reassociation), v, reassociation))
        ins, outs = new_operands[:-n_outs], new_operands[-n_outs:]
        maps = [ir.AffineMapAttr.get(ir.AffineMap.get(n_groups, 0, results)) for results, _ in plans]
        new = linalg.GenericOp([o.type for o in outs], ins, outs, ir.ArrayAttr.get(maps), ir.ArrayAttr.get(kinds))
        _move_body(op, new.operation)
        results = []
        for old, res, (_, reassociation) in zip(op.results, new.results, plans[-n_outs:]):
            if len(reassociation) == old.type.rank:
                results.append(res)
                continue
            t = ir.RankedTensorType(old.type)
            dynamic = [tensor.dim(old_out, _index(d)) for d, old_out in
                       ((d, operands[len(operands) - n_outs + old.result_number]) for d in range(t.rank))
                       if t.is_dynamic_dim(d)]
            results.append(tensor.expand_shape(t, res, reassociation, dynamic, list(t.shape)))
    for old, new_value in zip(op.results, results):
        old.replace_all_uses_with(new_value)
    op.erase()
    return True


def _index(i: int) -> ir.Value:
    from mlir.dialects import arith

    return arith.constant(ir.IndexType.get(), i)


def _move_body(old: ir.Operation, new: ir.Operation) -> None:
    """Move ``old``'s one-block body into ``new`` (block arguments remapped; the ops themselves unchanged)."""
    old_block = old.regions[0].blocks[0]
    block = new.regions[0].blocks.append(*[a.type for a in old_block.arguments])
    for old_arg, arg in zip(old_block.arguments, block.arguments):
        old_arg.replace_all_uses_with(arg)
    body_ops = list(old_block.operations)
    ip = ir.InsertionPoint(block)
    for body_op in body_ops:
        body_op.detach_from_parent()
        ip.insert(body_op)


def coalesce_loops(module: ir.Module) -> int:
    """Coalesce the loops of every plain generic in ``module`` (on tensors); returns how many were rewritten."""
    return sum(coalesce(op) for op in ops_named(module.operation, {"linalg.generic"}))
