"""Element-wise indexing: ``gather_elements`` and ``one_hot`` (one parallel ``linalg.generic`` each) and
``scatter_elements`` (``scf.for`` loops over the indices in row-major order, carrying the result tensor: later
writes win, as the reference's). Every index is checked (``checks.checked_index``): one out of range is reported
through the error slot, and nothing is read or written for it.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, scf, tensor

from .checks import checked_index, flat_position, linear_position, read_unless
from .core import amap, as_index, dim, elem, empty, generic, identity, index, loop_index, scalar, sizes_of
from .elementwise import ScalarBuilder
from .shape import index_message


def gather_elements(lc, op):
    """``out[p] = data[p with p[axis] = indices[p]]`` over the indices' positions ``p``."""
    data, ind = lc.inputs
    rank = data.type.rank
    axis = lc.attrs["axis"] % rank
    extent = as_index(dim(data, axis))
    message = index_message(op, "relax.gather_elements", "index", sizes_of(ind), axis, dim(data, axis))

    def body(raw, _out):
        i, bad = checked_index(op, raw, extent, linear_position(list(range(rank)), sizes_of(ind)), message)
        return read_unless(bad, data, [i if a == axis else loop_index(a) for a in range(rank)])

    return generic([ind], [empty(sizes_of(ind), elem(data))], [identity(rank)] * 2, ["parallel"] * rank, body)[0]


def one_hot(lc, op):
    """``out[..., j, ...] = on_value if indices[...] == j else off_value`` with ``j`` at ``axis``."""
    (ind,) = lc.inputs
    rank = lc.result_type.rank
    axis = lc.attrs["axis"] % rank
    depth, t = lc.attrs["depth"], elem(lc.result_type)
    rest = [a for a in range(rank) if a != axis]
    message = (f"{index_message(op, 'relax.one_hot', 'index', sizes_of(ind), axis, depth)} "
               f"(one_hot takes [0, {depth}))")

    def body(raw, _out):
        i, _ = checked_index(op, raw, index(depth), linear_position(rest, sizes_of(ind)), message, negative=False)
        hot = arith.cmpi(arith.CmpIPredicate.eq, i, loop_index(axis))
        return arith.select(hot, scalar(lc.attrs["on_value"], t), scalar(lc.attrs["off_value"], t))

    sizes = sizes_of(ind)
    sizes.insert(axis, depth)
    return generic([ind], [empty(sizes, t)], [amap(rank, rest), identity(rank)], ["parallel"] * rank, body)[0]


def scatter_elements(lc, op):
    """A copy of ``data`` updated at each index in turn: nested ``scf.for`` loops carrying the tensor."""
    data, ind, upd = lc.inputs
    rank = data.type.rank
    axis = lc.attrs["axis"] % rank
    reduction = lc.attrs["reduction"]
    extent = as_index(dim(data, axis))
    sizes = sizes_of(ind)
    message = index_message(op, "relax.scatter_elements", "index", sizes, axis, dim(data, axis))
    b = ScalarBuilder(lc.fail)
    combine = {"add": b.add, "mul": b.mul, "min": b.min, "max": b.max}.get(reduction)

    def innermost(pos: list, acc: ir.Value) -> ir.Value:
        i, bad = checked_index(op, tensor.extract(ind, pos), extent, flat_position(pos, sizes), message)
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

    return loops(0, [], data)

