"""``argsort`` without a sort, through ranks, as two ``linalg.generic`` reductions (``sort`` and ``topk`` are
composites of it):

1. ``rank[i] = #{j : x[j] before x[i]}`` along the axis (``before``: smaller, or larger when descending; equal
   ones by position, which makes the order stable), a reduction over a second copy of the axis;
2. ``indices[r] = sum_i (rank[i] == r ? i : 0)`` (exactly one ``i`` has rank ``r``).

Quadratic in the length of the axis, and free of data-dependent control flow: nothing is read by a computed
index, so no runtime check is needed. NaN counts as the largest value: last ascending, first descending
(PyTorch's order, and NumPy's ascending one).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from .core import amap, convert, elem, filled, generic, loop_index, scalar, sizes_of
from .elementwise import ScalarBuilder


def _ranks(lc, x: ir.Value, axis: int, descending: bool) -> ir.Value:
    r = x.type.rank
    i64 = ir.IntegerType.get_signless(64)
    b = ScalarBuilder(lc.fail)
    mine = amap(r + 1, list(range(r)))
    other = amap(r + 1, [r if a == axis else a for a in range(r)])

    def body(xi, xj, acc):
        i, j = loop_index(axis), loop_index(r)
        nan_i, nan_j = b.cmp("ne", xi, xi), b.cmp("ne", xj, xj)
        # NaN is the largest: last ascending, first descending (PyTorch's order; NumPy's ascending one)
        nan_before = arith.andi(nan_j, arith.xori(nan_i, scalar(1, nan_i.type))) if descending else \
            arith.andi(nan_i, arith.xori(nan_j, scalar(1, nan_j.type)))
        earlier = arith.ori(b.cmp("gt" if descending else "lt", xj, xi), nan_before)
        same = arith.ori(b.cmp("eq", xj, xi), arith.andi(nan_i, nan_j))
        tie = arith.andi(same, arith.cmpi(arith.CmpIPredicate.ult, j, i))
        return arith.addi(acc, arith.extui(i64, arith.ori(earlier, tie)))

    return generic([x, x], [filled(sizes_of(x), i64, 0)], [mine, other, mine], ["parallel"] * r + ["reduction"],
                   body)[0]


def _positions(ranks: ir.Value, axis: int, t: ir.Type) -> ir.Value:
    """``out[..., r, ...] = i`` where ``ranks[..., i, ...] == r``."""
    r = ranks.type.rank
    sizes = sizes_of(ranks)

    def body(rank_i, acc):
        hit = arith.cmpi(arith.CmpIPredicate.eq, rank_i, convert(loop_index(axis), rank_i.type))
        return arith.addi(acc, arith.select(hit, convert(loop_index(r), t), scalar(0, t)))

    maps = [amap(r + 1, [r if a == axis else a for a in range(r)]), amap(r + 1, list(range(r)))]
    return generic([ranks], [filled(sizes, t, 0)], maps, ["parallel"] * r + ["reduction"], body)[0]


def argsort(lc, op):
    x = lc.inputs[0]
    axis = lc.attrs["axis"] % x.type.rank
    return _positions(_ranks(lc, x, axis, lc.attrs["descending"]), axis, elem(lc.result_type))
