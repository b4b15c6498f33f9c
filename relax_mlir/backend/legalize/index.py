"""Element-wise indexing: ``gather_elements`` and ``one_hot`` (their indices checked once by
``shape.checked_indices``, then one parallel ``linalg.generic``) and ``scatter_elements`` (``scf.for`` loops over the
indices in row-major order, carrying the result tensor: later writes win, as the reference's; each index checked
as it is met). An out-of-range index is reported through the error slot (``checks.py``), and nothing is read or
written for it.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, scf, tensor

from ...op.scatter import range_note
from .checks import flat_position, guarded_extract, report_if, where
from .core import amap, as_index, convert, dim, elem, empty, generic, identity, index, loop_index, scalar, sizes_of
from .elementwise import ScalarBuilder
from .shape import checked_indices, index_message, take_index
from .size_checks import assumed_equal, unless_sizes


def gather_elements(lc, op):
    """``out[p] = data[p with p[axis] = indices[p]]`` over the indices' positions ``p``; the indices are checked
    once first (``shape.checked_indices``): in ``[-s, s)``, or ``[0, s)`` with ``negative_indices=False``. An
    empty axis reads nothing."""
    data, ind = lc.inputs
    rank = data.type.rank
    axis = lc.attrs["axis"] % rank
    size = dim(data, axis)
    negative = lc.attrs.get("negative_indices", True)
    message = index_message(op, "relax.gather_elements", sizes_of(ind), axis, size)
    if not negative:
        message += f" ({range_note(size if isinstance(size, int) else '{extent}')})"
    safe = checked_indices(op, ind, as_index(size), "fast" if negative else "strict", message, as_index(0))
    nothing = None if isinstance(size, int) and size > 0 else \
        arith.cmpi(arith.CmpIPredicate.eq, as_index(size), as_index(0))

    def body(i, _out):
        coords = [i if a == axis else loop_index(a) for a in range(rank)]
        return tensor.extract(data, coords) if nothing is None else guarded_extract(data, coords, nothing)

    return generic([safe], [empty(sizes_of(ind), elem(data))], [identity(rank)] * 2, ["parallel"] * rank, body)[0]


def one_hot(lc, op):
    """``out[..., j, ...] = on_value if indices[...] == j else off_value`` with ``j`` at ``axis``; the indices
    are checked once first, in ``[0, depth)`` (negatives are not counted from the end)."""
    (ind,) = lc.inputs
    rank = lc.result_type.rank
    axis = lc.attrs["axis"] % rank
    depth, t = lc.attrs["depth"], elem(lc.result_type)
    message = f"{index_message(op, 'relax.one_hot', sizes_of(ind), axis, depth)} (one_hot takes [0, {depth}))"
    safe = checked_indices(op, ind, index(depth), "strict", message, index(depth))
    on, off = scalar(lc.attrs["on_value"], t), scalar(lc.attrs["off_value"], t)

    def body(i, _out):
        return arith.select(arith.cmpi(arith.CmpIPredicate.eq, i, loop_index(axis)), on, off)

    sizes = sizes_of(ind)
    sizes.insert(axis, depth)
    rest = [a for a in range(rank) if a != axis]
    return generic([safe], [empty(sizes, t)], [amap(rank, rest), identity(rank)], ["parallel"] * rank, body)[0]


def scatter_elements(lc, op):
    """A copy of ``data`` updated at each index in turn: nested ``scf.for`` loops carrying the tensor."""
    data, ind, upd = lc.inputs
    rank = data.type.rank
    axis = lc.attrs["axis"] % rank
    reduction = lc.attrs["reduction"]
    extent = as_index(dim(data, axis))
    sizes = sizes_of(ind)
    message = index_message(op, "relax.scatter_elements", sizes, axis, dim(data, axis))
    b = ScalarBuilder(lc.fail)
    combine = {"add": b.add, "mul": b.mul, "min": b.min, "max": b.max,
               "mean": lambda old, new: b.div(b.add(old, new), 2.0)}.get(reduction)  # TVM's running mean

    def innermost(pos: list, acc: ir.Value) -> ir.Value:
        raw = tensor.extract(ind, pos)
        i, bad = take_index(convert(raw, ir.IndexType.get()), extent, "fast")
        report_if(op, bad, raw, flat_position(pos, sizes), message, extent)
        write = scf.IfOp(bad, [acc.type], has_else=True)
        with ir.InsertionPoint(write.then_block):
            scf.YieldOp([acc])
        with ir.InsertionPoint(write.else_block):
            target = [i if a == axis else p for a, p in enumerate(pos)]
            value = tensor.extract(upd, pos)
            if combine is not None:
                value = combine(tensor.extract(acc, target), value)
            scf.YieldOp([tensor.insert(value, acc, target)])
        return write.results[0]

    def loops(depth: int, pos: list, acc: ir.Value) -> ir.Value:
        if depth == rank:
            return innermost(pos, acc)
        loop = scf.ForOp(index(0), as_index(sizes[depth]), index(1), [acc])
        with ir.InsertionPoint(loop.body):
            scf.YieldOp([loops(depth + 1, pos + [loop.induction_variable], loop.inner_iter_args[0])])
        return loop.results[0]

    # The loops run over the indices' positions and read the updates there: their sizes, which inference assumed
    # equal, are checked first (smaller updates would be read past their buffer).
    mismatch = assumed_equal(op, [
        (dim(upd, a), sizes[a], a, f"{where(op)}: relax.scatter_elements: dimension {{position}} of the updates is "
         "{value}, where the indices have {extent} (the updates must have the indices' shape)")
        for a in range(rank)])
    return unless_sizes(mismatch, data.type, sizes_of(data), lambda: loops(0, [], data))



def scatter_nd(lc, op):
    """A copy of ``data`` updated at each index tuple in turn: ``scf.for`` loops over the tuples' positions (row-major:
    later writes win, as the reference's) carrying the tensor; each tuple's entries are checked as they are read (a
    bad one is reported and its tuple writes nothing), then loops over the trailing axes of ``data`` write the
    update's slice."""
    data, ind, upd = lc.inputs
    k = ind.type.shape[-1]
    outer = sizes_of(ind)[:-1]
    rest = sizes_of(data)[k:]
    b = ScalarBuilder(lc.fail)
    combine = {"add": b.add, "mul": b.mul, "min": b.min, "max": b.max}.get(lc.attrs["reduction"])
    messages = [index_message(op, "relax.scatter_nd", sizes_of(ind), a, dim(data, a)) for a in range(k)]

    def write(pos: list, target: list, acc: ir.Value, depth: int = 0) -> ir.Value:
        if depth == len(rest):
            value = tensor.extract(upd, pos + target[k:])
            if combine is not None:
                value = combine(tensor.extract(acc, target), value)
            return tensor.insert(value, acc, target)
        loop = scf.ForOp(index(0), as_index(rest[depth]), index(1), [acc])
        with ir.InsertionPoint(loop.body):
            scf.YieldOp([write(pos, target + [loop.induction_variable], loop.inner_iter_args[0], depth + 1)])
        return loop.results[0]

    def innermost(pos: list, acc: ir.Value) -> ir.Value:
        target, any_bad = [], None
        for a in range(k):
            coords = pos + [index(a)]
            raw = tensor.extract(ind, coords)
            extent = as_index(dim(data, a))
            i, bad = take_index(convert(raw, ir.IndexType.get()), extent, "fast")
            report_if(op, bad, raw, flat_position(coords, sizes_of(ind)), messages[a], extent)
            target.append(i)
            any_bad = bad if any_bad is None else arith.ori(any_bad, bad)
        if any_bad is None:  # K = 0: every tuple names all of data
            return write(pos, target, acc)
        choose = scf.IfOp(any_bad, [acc.type], has_else=True)
        with ir.InsertionPoint(choose.then_block):
            scf.YieldOp([acc])
        with ir.InsertionPoint(choose.else_block):
            scf.YieldOp([write(pos, target, acc)])
        return choose.results[0]

    def loops(depth: int, pos: list, acc: ir.Value) -> ir.Value:
        if depth == len(outer):
            return innermost(pos, acc)
        loop = scf.ForOp(index(0), as_index(outer[depth]), index(1), [acc])
        with ir.InsertionPoint(loop.body):
            scf.YieldOp([loops(depth + 1, pos + [loop.induction_variable], loop.inner_iter_args[0])])
        return loop.results[0]

    # The loops take their bounds from the indices and data and read the updates there: the updates' sizes, which
    # inference assumed equal, are checked first (smaller updates would be read past their buffer).
    expected = outer + rest
    mismatch = assumed_equal(op, [
        (dim(upd, a), expected[a], a, f"{where(op)}: relax.scatter_nd: dimension {{position}} of the updates is "
         "{value}, where indices.shape[:-1] + data.shape[K:] has {extent}") for a in range(upd.type.rank)])
    return unless_sizes(mismatch, data.type, sizes_of(data), lambda: loops(0, [], data))
