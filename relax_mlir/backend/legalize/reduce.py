"""Reductions: sum, mean, variance, max, min, prod (one line each through :func:`reduction`), argmax/argmin,
cumsum and collapse_sum_to.

Each reduces into the compact shape (reduced axes dropped) with a ``linalg.generic`` whose reduced loops are
``reduction`` iterators, then converts to the result dtype and reshapes for ``keepdims``. Half floats
accumulate in f32 (the references accumulate in float64). ``cumsum`` is a quadratic ``linalg.generic``
(``out[i] = sum(x[j] for j <= i)``): correct for any shape, slow for long axes.
"""

from __future__ import annotations

from typing import Callable, Sequence

from mlir import ir
from mlir.dialects import arith

from .core import (DYN, Size, amap, as_index, compute_type, convert, dim, elem, filled, generic, highest, identity,
                   int_cmp, is_bool, is_float, loop_index, lowest, map_elementwise, norm_axes, reduce, reshape, scalar,
                   sizes_of, sprod, tensor_type, unsigned_in)
from .checks import report_if, where as binding_of
from ..error_slot import SHAPE_CHECK_PREFIX

Combine = Callable[[ir.Value, ir.Value], ir.Value]


def _kept(x: ir.Value, axes: Sequence[int]) -> list[Size]:
    return [dim(x, a) for a in range(x.type.rank) if a not in axes]


def finish(lc, compact: ir.Value, x: ir.Value, axes: Sequence[int], fn=None) -> ir.Value:
    """``fn(compact)`` (default identity) converted to the result dtype, reshaped to keep the reduced axes as 1s
    when the result has the input's rank."""
    out_elt = elem(lc.result_type)
    sizes = _kept(x, axes)
    body = (lambda v: convert(fn(v) if fn else v, out_elt))
    if fn is None and elem(compact) == out_elt:
        value = compact
    else:
        value = map_elementwise([compact], tensor_type(sizes, out_elt), body, sizes)
    if lc.result_type.rank != len(sizes):
        value = reshape(value, [1 if a in axes else dim(x, a) for a in range(x.type.rank)])
    return value


def _count(x: ir.Value, axes: Sequence[int], t: ir.Type) -> ir.Value:
    """The number of reduced elements, as a scalar of type ``t``."""
    n = sprod([dim(x, a) for a in axes])
    return scalar(n, t) if isinstance(n, int) else convert(n, t)


def _add(t: ir.Type) -> Combine:
    return arith.addf if is_float(t) else arith.addi


def _refuse_empty(op, x: ir.Value, axes: Sequence[int], what: str) -> None:
    """The index of a maximum or minimum over no elements has no value (NumPy and TVM raise; the loop would return
    index 0): when the reduced axis is 0 at run time the call raises ValueError after."""
    n = sprod([dim(x, a) for a in axes])
    if isinstance(n, int) and n > 0:
        return
    count = as_index(n)
    report_if(op, arith.cmpi(arith.CmpIPredicate.eq, count, as_index(0)), arith.index_cast(
        ir.IntegerType.get_signless(64), count), as_index(0),
        f"{SHAPE_CHECK_PREFIX}{binding_of(op)}: {what} of no elements: a reduced axis has size 0 "
        "(the reduction has no value)")


def reduction(combine_float: Combine, combine_int: Combine, init: Callable[[ir.Type], ir.Value], mean: bool = False,
              logical: str = ""):
    """A rule reducing with ``combine`` from ``init(acc_type)``, which is what a reduction over no elements gives
    (max: -inf, or the integer dtype's lowest, as ONNX's ReduceMax from opset 18 defines it; TVM starts float
    maxima from the lowest finite value, which is no identity: ``max(-inf)`` must be -inf); ``mean`` divides by the
    element count. Of bool data, ``logical`` says which of ``any``/``all`` it is (TVM's sum and max of bool are
    ``any``, its prod and min ``all``): on ``i1`` the integer forms are wrong (``addi`` is xor; ``maxsi`` reads true
    as -1)."""
    def rule(lc, op):
        x = lc.inputs[0]
        axes = norm_axes(lc.attrs["axis"], x.type.rank)
        acc_t = compute_type(elem(x))
        if logical and is_bool(acc_t):
            combine, start = (arith.ori, 0) if logical == "any" else (arith.andi, 1)
            return finish(lc, reduce(x, axes, acc_t, scalar(start, acc_t), combine), x, axes)
        combine = combine_float if is_float(acc_t) else combine_int
        compact = reduce(x, axes, acc_t, init(acc_t), combine)
        if not mean:
            return finish(lc, compact, x, axes)
        count = _count(x, axes, acc_t)
        return finish(lc, compact, x, axes, lambda v: arith.divf(v, count))
    return rule


# Named ``reduce_*``: the builtins sum, max and min stay usable in this module.
reduce_sum = reduction(arith.addf, arith.addi, lambda t: scalar(0, t), logical="any")
reduce_prod = reduction(arith.mulf, arith.muli, lambda t: scalar(1, t), logical="all")
reduce_max = reduction(arith.maximumf, lambda a, b: (arith.maxui if unsigned_in() else arith.maxsi)(a, b), lowest,
                       logical="any")
reduce_min = reduction(arith.minimumf, lambda a, b: (arith.minui if unsigned_in() else arith.minsi)(a, b), highest,
                       logical="all")
reduce_mean = reduction(arith.addf, arith.addi, lambda t: scalar(0, t), mean=True)


def mean_and_variance(x: ir.Value, axes: Sequence[int], acc_t: ir.Type) -> tuple[ir.Value, ir.Value]:
    """Compact mean and (biased, two-pass) variance of ``x`` over ``axes``, in ``acc_t``."""
    count = _count(x, axes, acc_t)
    total = reduce(x, axes, acc_t, scalar(0, acc_t), arith.addf)
    sizes = _kept(x, axes)
    mean = map_elementwise([total], tensor_type(sizes, acc_t), lambda v: arith.divf(v, count), sizes)
    rank = x.type.rank
    kept = [a for a in range(rank) if a not in axes]
    acc = filled(sizes, acc_t, 0.0)
    iters = ["reduction" if a in axes else "parallel" for a in range(rank)]

    def body(v, m, a):
        d = arith.subf(convert(v, acc_t), m)
        return arith.addf(arith.mulf(d, d), a)

    (sq,) = generic([x, mean], [acc], [identity(rank), amap(rank, kept), amap(rank, kept)], iters, body)
    var = map_elementwise([sq], tensor_type(sizes, acc_t), lambda v: arith.divf(v, count), sizes)
    return mean, var


def variance(lc, op):
    x = lc.inputs[0]
    axes = norm_axes(lc.attrs["axis"], x.type.rank)
    _, var = mean_and_variance(x, axes, compute_type(elem(x)))
    return finish(lc, var, x, axes)


def _arg_reduction(float_pred: str, int_pred: str, init: Callable[[ir.Type], ir.Value], name: str):
    """argmax/argmin: a (value, index) reduction keeping the first best; a NaN beats any number, as NumPy's."""
    def rule(lc, op):
        x = lc.inputs[0]
        axis = lc.attrs["axis"]
        if axis is None:
            x, axis = reshape(x, [sprod(sizes_of(x))]), 0
        axis %= x.type.rank
        _refuse_empty(op, x, [axis], name)
        rank, t = x.type.rank, elem(x)
        i64 = ir.IntegerType.get_signless(64)
        sizes = _kept(x, [axis])
        best, where = filled(sizes, t, init(t)), filled(sizes, i64, 0)
        kept = [a for a in range(rank) if a != axis]
        iters = ["reduction" if a == axis else "parallel" for a in range(rank)]

        def body(v, b, i):
            if is_float(t):
                better = arith.cmpf(getattr(arith.CmpFPredicate, float_pred), v, b)
                nan_first = arith.andi(arith.cmpf(arith.CmpFPredicate.UNO, v, v),
                                       arith.cmpf(arith.CmpFPredicate.ORD, b, b))
                better = arith.ori(better, nan_first)
            else:
                better = int_cmp(int_pred, v, b)
            here = convert(loop_index(axis), i64)
            return arith.select(better, v, b), arith.select(better, here, i)

        _, idx = generic([x], [best, where], [identity(rank), amap(rank, kept), amap(rank, kept)], iters, body)
        if lc.result_type.rank != len(sizes):
            idx = reshape(idx, [1] * lc.result_type.rank if lc.attrs["axis"] is None
                          else [1 if a == axis else dim(x, a) for a in range(rank)])
        return idx
    return rule


argmax = _arg_reduction("OGT", "gt", lowest, "argmax")
argmin = _arg_reduction("OLT", "lt", highest, "argmin")


def _scan(lc, identity: int, combine):
    """An inclusive (or ``exclusive``) scan along ``axis`` (the flattened input for None): each output combines the
    elements at or before its position, the others counting as ``identity``; quadratic in the axis' length (loops:
    the output's, then j, the combined position), as TVM's. Each element is cast to the result's dtype first, as
    TVM does, then combined in its compute type."""
    x = lc.inputs[0]
    axis = lc.attrs["axis"]
    if axis is None:
        x, axis = reshape(x, [sprod(sizes_of(x))]), 0
    axis %= x.type.rank
    out_elt = elem(lc.result_type)
    acc_t = compute_type(out_elt)
    rank = x.type.rank
    sizes = sizes_of(x)
    x_map = amap(rank + 1, [rank if a == axis else a for a in range(rank)])
    pred = arith.CmpIPredicate.ult if lc.attrs["exclusive"] else arith.CmpIPredicate.ule
    combine = combine(acc_t)

    def body(v, a):
        take = arith.cmpi(pred, loop_index(rank), loop_index(axis))
        v = convert(convert(v, out_elt), acc_t)
        return combine(arith.select(take, v, scalar(identity, acc_t)), a)

    (total,) = generic([x], [filled(sizes, acc_t, identity)], [x_map, amap(rank + 1, list(range(rank)))],
                       ["parallel"] * rank + ["reduction"], body)
    if acc_t == out_elt:
        return total
    return map_elementwise([total], lc.result_type, lambda v: convert(v, out_elt), sizes)


def cumsum(lc, op):
    return _scan(lc, 0, _add)


def cumprod(lc, op):
    return _scan(lc, 1, lambda t: arith.mulf if is_float(t) else arith.muli)


def collapse_sum_to(lc, op):
    x = lc.inputs[0]
    target = list(lc.result_type.shape)
    lead = x.type.rank - len(target)
    unknown = [i for i, d in enumerate(target) if d == DYN and x.type.shape[lead + i] not in (DYN, 1)]
    if unknown:  # summed when the size is 1 at run time, kept when it is the input's: refuse, not guess
        lc.fail(f"cannot tell at compile time whether to sum axis {lead + unknown[0]} of {x.type} to make "
                f"{lc.result_type} (a symbolic size against a static one)")
    axes = list(range(lead)) + [lead + i for i, d in enumerate(target) if d == 1 and x.type.shape[lead + i] != 1]
    acc_t = compute_type(elem(x))
    compact = reduce(x, axes, acc_t, scalar(0, acc_t), _add(acc_t))
    sizes = _kept(x, axes)
    if acc_t != elem(x):
        compact = map_elementwise([compact], tensor_type(sizes, elem(x)), lambda v: convert(v, elem(x)), sizes)
    return reshape(compact, lc.result_sizes())
