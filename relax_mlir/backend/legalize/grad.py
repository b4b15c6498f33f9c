"""Lowerings of the ops gradients use: ``relax.grad.*_backward`` and ``relax.nn.conv2d_transpose``.

Scatters are written as gathers, so that every result element is computed by one iteration of a
``linalg.generic`` (no atomic or sequential accumulation is needed):

* take_backward: ``out[..., i, ...] = sum_j (indices[j] == i) * g[..., j, ...]`` (O(size x indices));
* strided_slice_backward: ``tensor.insert_slice`` of the gradient into zeros (a gather for negative strides);
* max/avg_pool2d_backward: for each input position and kernel offset, the output window that read it
  (``oh = (h + pad - i * dilation) / stride`` when exact and in range) gives its gradient: all of it if the
  window's first maximum is there (max), ``g / divisor`` (avg);
* conv2d_transpose: the input dilated by the strides (``insert_slice`` with strides), padded by
  ``dilation * (k - 1) - pad`` (cropped where negative), convolved with the flipped, transposed kernel.
"""

from __future__ import annotations

from typing import Sequence, Union

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from ...op import grad as G
from ...op.nn import backward as BW
from ...op.nn import conv_transpose as CT
from .core import (DYN, Size, as_index, compute_type, convert, dim, elem, empty, filled, generic,
                   identity, index, is_float, loop_index, map_elementwise, reshape, sadd, scalar, sizes_of, smul,
                   sprod, ssub, tensor_type)
from .nn import _pool_geometry, _window_count, class_weight, pad
from .rules import lowers
from .shape import _slice_bounds, extract_slice

Expr = Union[int, None, ir.AffineExpr]


def emap(ndims: int, exprs: Sequence[Expr]) -> ir.AffineMap:
    """An affine map whose results may be dims (int), the constant 0 (None) or any ``AffineExpr``."""
    out = []
    for e in exprs:
        out.append(ir.AffineConstantExpr.get(0) if e is None else ir.AffineDimExpr.get(e) if isinstance(e, int) else e)
    return ir.AffineMap.get(ndims, 0, out)


def _add(t: ir.Type):
    return arith.addf if is_float(t) else arith.addi


def _finish(value: ir.Value, t: ir.Type) -> ir.Value:
    if elem(value) == t:
        return value
    sizes = sizes_of(value)
    return map_elementwise([value], tensor_type(sizes, t), lambda v: convert(v, t), sizes)


def insert_strided(src: ir.Value, dest: ir.Value, offsets: Sequence[Size], strides: Sequence[int]) -> ir.Value:
    sizes = sizes_of(src)
    dyn = lambda vals: [v for v in vals if not isinstance(v, int)]  # noqa: E731
    stat = lambda vals: [v if isinstance(v, int) else DYN for v in vals]  # noqa: E731
    return tensor.insert_slice(src, dest, dyn(offsets), dyn(sizes), [], stat(offsets), stat(sizes), list(strides))


# --- take, strided_slice ------------------------------------------------------------------------------------------
@lowers(G.take_backward)
def _take_backward(lc, op):
    g, ind = lc.inputs
    t = elem(lc.result_type)
    ct = compute_type(t)
    sizes, axis = lc.result_sizes(), lc.attrs["axis"]
    if axis is None:
        g, ind = reshape(g, [sprod(sizes_of(g))]), reshape(ind, [sprod(sizes_of(ind))])
        out_sizes, axis = [sprod(sizes)], 0
    else:
        out_sizes, axis = sizes, axis % len(sizes)
    r, k = len(out_sizes), ind.type.rank
    extent = as_index(out_sizes[axis])
    g_map = emap(r + k, list(range(axis)) + list(range(r, r + k)) + list(range(axis + 1, r)))
    maps = [g_map, emap(r + k, list(range(r, r + k))), emap(r + k, list(range(r)))]

    def body(gv, iv, o):
        i = convert(iv, ir.IndexType.get())
        i = arith.select(arith.cmpi(arith.CmpIPredicate.slt, i, index(0)), arith.addi(i, extent), i)
        hit = arith.cmpi(arith.CmpIPredicate.eq, i, loop_index(axis))
        return _add(ct)(o, arith.select(hit, convert(gv, ct), scalar(0, ct)))

    (res,) = generic([g, ind], [filled(out_sizes, ct, 0)], maps, ["parallel"] * r + ["reduction"] * k, body)
    return reshape(_finish(res, t), sizes) if lc.attrs["axis"] is None else _finish(res, t)


@lowers(G.strided_slice_backward)
def _strided_slice_backward(lc, op):
    g = lc.inputs[0]
    t, sizes = elem(lc.result_type), lc.result_sizes()
    rank, a = len(sizes), lc.attrs
    offsets, lens, strides = [0] * rank, list(sizes), [1] * rank
    for ax, b, e, s in zip(a["axes"], a["begin"], a["end"], a["strides"] or (1,) * len(a["axes"])):
        ax %= rank
        offsets[ax], lens[ax] = _slice_bounds(b, e, s, sizes[ax])
        strides[ax] = s
    zero = filled(sizes, t, 0)
    if any(isinstance(n, int) and n == 0 for n in lens):
        return zero
    if all(s > 0 for s in strides):
        return insert_strided(g, zero, offsets, strides)

    def body(_out):  # a negative stride: out[p] = g[(p - start) / stride] where that is exact and in range
        coords, valid = [], None
        for ax in range(rank):
            if strides[ax] == 1 and isinstance(offsets[ax], int) and offsets[ax] == 0:
                coords.append(loop_index(ax))
                continue
            delta = arith.subi(loop_index(ax), as_index(offsets[ax]))
            s = index(strides[ax])
            q = arith.divsi(delta, s)
            ok = arith.andi(arith.cmpi(arith.CmpIPredicate.eq, arith.remsi(delta, s), index(0)),
                            arith.andi(arith.cmpi(arith.CmpIPredicate.sge, q, index(0)),
                                       arith.cmpi(arith.CmpIPredicate.slt, q, as_index(lens[ax]))))
            coords.append(arith.select(ok, q, index(0)))
            valid = ok if valid is None else arith.andi(valid, ok)
        value = tensor.extract(g, coords)
        return value if valid is None else arith.select(valid, value, scalar(0, t))

    return generic([], [empty(sizes, t)], [identity(rank)], ["parallel"] * rank, body)[0]


# --- nll_loss --------------------------------------------------------------------------------------------------------
@lowers(BW.nll_loss_backward)
def _nll_loss_backward(lc, op):
    g, pred, targets = lc.inputs[:3]
    weights = lc.inputs[3] if len(lc.inputs) > 3 else None
    t, ct = elem(pred), compute_type(elem(pred))
    rank, k = pred.type.rank, targets.type.rank
    cls = 1 if rank > 1 else 0
    classes = as_index(dim(pred, cls))
    ignore, reduction = lc.attrs["ignore_index"], lc.attrs["reduction"]

    def weight_of(tv):
        return class_weight(tv, classes, ignore, weights, ct)

    ins = [g, targets]
    per_item = [d for d in range(rank) if d != cls]
    maps = [emap(rank, per_item if reduction == "none" else []), emap(rank, per_item)]
    if reduction == "mean":
        (wsum,) = generic([targets], [filled([], ct, 0)], [identity(k), emap(k, [])], ["reduction"] * k,
                          lambda tv, o: arith.addf(o, weight_of(tv)[2]))
        ins, maps = ins + [wsum], maps + [emap(rank, [])]

    def body(gv, tv, *rest):
        valid, i, w = weight_of(tv)
        coef = arith.negf(arith.mulf(convert(gv, ct), w))
        if reduction == "mean":
            coef = arith.divf(coef, rest[0])
        hit = arith.andi(valid, arith.cmpi(arith.CmpIPredicate.eq, i, loop_index(cls)))
        value = arith.select(hit, coef, scalar(0, ct))
        if reduction == "mean":  # every target ignored: NaN everywhere, as the loss
            empty_ = arith.cmpf(arith.CmpFPredicate.OEQ, rest[0], scalar(0, ct))
            value = arith.select(empty_, scalar(float("nan"), ct), value)
        return convert(value, t)

    return generic(ins, [empty(sizes_of(pred), t)], maps + [identity(rank)], ["parallel"] * rank, body)[0]


# --- pooling ---------------------------------------------------------------------------------------------------------
def _window_of(p: ir.Value, before: int, offset: int, stride: int, out: Size) -> tuple[ir.Value, ir.Value]:
    """(valid, o): the output position ``o`` whose window reads input position ``p`` at kernel offset ``offset``
    (``o * stride + offset = p + before``), and whether there is one; ``o`` is 0 when not."""
    delta = arith.subi(arith.addi(p, index(before)), offset if isinstance(offset, ir.Value) else index(offset))
    o = arith.divsi(delta, index(stride))
    ok = arith.andi(arith.cmpi(arith.CmpIPredicate.eq, arith.remsi(delta, index(stride)), index(0)),
                    arith.andi(arith.cmpi(arith.CmpIPredicate.sge, delta, index(0)),
                               arith.cmpi(arith.CmpIPredicate.slt, o, as_index(out))))
    return ok, arith.select(ok, o, index(0))


def _pool_backward(lc, g: ir.Value, data: ir.Value, contribution) -> ir.Value:
    """``out[n, c, h, w] = sum over kernel offsets (i, j) of contribution(n, c, oh, ow, i, j)`` where ``(oh, ow)``
    is the window that read ``(h, w)`` at that offset (0 when none did)."""
    a = lc.attrs
    (pt, pl, _, _), (kh, kw) = a["padding"], a["pool_size"]
    (sh, sw), (dh, dw) = a["strides"], a["dilation"]
    t = elem(data)
    ct = compute_type(t)
    oh, ow = dim(g, 2), dim(g, 3)

    def body(_o):
        i, j = loop_index(4), loop_index(5)
        ok_h, y = _window_of(loop_index(2), pt, arith.muli(i, index(dh)), sh, oh)
        ok_w, x = _window_of(loop_index(3), pl, arith.muli(j, index(dw)), sw, ow)
        value = contribution([loop_index(0), loop_index(1), y, x], i, j)
        return arith.addf(_o, arith.select(arith.andi(ok_h, ok_w), value, scalar(0, ct)))

    sizes = sizes_of(data)
    acc = filled(sizes, ct, 0)
    # the kernel loops are iteration dims 4 and 5: give them their extents through a (kh, kw) operand
    window = empty([kh, kw], ct)
    (res,) = generic([window], [acc], [emap(6, [4, 5]), emap(6, [0, 1, 2, 3])],
                     ["parallel"] * 4 + ["reduction"] * 2, lambda _w, o: body(o))
    return _finish(res, t)


@lowers(BW.max_pool2d_backward)
def _max_pool2d_backward(lc, op):
    g, data = lc.inputs
    a = lc.attrs
    t, ct = elem(data), compute_type(elem(data))
    (kh, kw), (sh, sw), (dh, dw) = a["pool_size"], a["strides"], a["dilation"]
    sizes, low, high = _pool_geometry(lc, data)
    padded = pad(data, low, high, float("-inf"))
    i64 = ir.IntegerType.get_signless(64)
    d = [ir.AffineDimExpr.get(k) for k in range(6)]
    read = emap(6, [0, 1, d[2] * sh + d[4] * dh, d[3] * sw + d[5] * dw])
    out_map = emap(6, [0, 1, 2, 3])

    def first_max(v, b, bi):
        better = arith.ori(arith.cmpf(arith.CmpFPredicate.OGT, v, b),
                           arith.andi(arith.cmpf(arith.CmpFPredicate.UNO, v, v), arith.cmpf(arith.CmpFPredicate.ORD, b, b)))
        here = convert(arith.addi(arith.muli(loop_index(4), index(kw)), loop_index(5)), i64)
        return arith.select(better, v, b), arith.select(better, here, bi)

    window = empty([kh, kw], t)
    _, arg = generic([padded, window], [filled(sizes, t, float("-inf")), filled(sizes, i64, 0)],
                     [read, emap(6, [4, 5]), out_map, out_map], ["parallel"] * 4 + ["reduction"] * 2,
                     lambda v, _w, b, bi: first_max(v, b, bi))
    if _tiles_exactly(lc, data, sizes):
        return _tiled_pool_backward(g, data, arg, (kh, kw), ct)

    def contribution(coords, i, j):
        k = convert(arith.addi(arith.muli(i, index(kw)), j), i64)
        hit = arith.cmpi(arith.CmpIPredicate.eq, tensor.extract(arg, coords), k)
        return arith.select(hit, convert(tensor.extract(g, coords), ct), scalar(0, ct))

    return _pool_backward(lc, g, data, contribution)


@lowers(BW.avg_pool2d_backward)
def _avg_pool2d_backward(lc, op):
    g, data = lc.inputs
    a = lc.attrs
    ct = compute_type(elem(data))
    (pt, pl, pb, pr), (kh, kw), include = a["padding"], a["pool_size"], a["count_include_pad"]
    h, w = dim(data, 2), dim(data, 3)

    def contribution(coords, i, j):
        ch = _window_count(coords[2], h, pt, pb, kh, a["strides"][0], a["dilation"][0], include)
        cw = _window_count(coords[3], w, pl, pr, kw, a["strides"][1], a["dilation"][1], include)
        return arith.divf(convert(tensor.extract(g, coords), ct), convert(arith.muli(ch, cw), ct))

    return _pool_backward(lc, g, data, contribution)


def _tiles_exactly(lc, data: ir.Value, out_sizes: Sequence[Size]) -> bool:
    """Whether the windows tile the input exactly: stride = pool size, no padding or dilation, and the output
    covers every input row and column (each input element lies in exactly one window)."""
    a = lc.attrs
    (kh, kw), (sh, sw), (dh, dw) = a["pool_size"], a["strides"], a["dilation"]
    _, _, h, w = sizes_of(data)
    _, _, oh, ow = out_sizes
    static = all(isinstance(v, int) for v in (h, w, oh, ow))
    return (static and (kh, kw) == (sh, sw) and (dh, dw) == (1, 1) and not any(a["padding"])
            and h == oh * kh and w == ow * kw)


def _tiled_pool_backward(g: ir.Value, data: ir.Value, arg: ir.Value, kernel: tuple[int, int], ct: ir.Type) -> ir.Value:
    """Max-pool gradient when windows tile the input: written as ``[n, c, oh, i, ow, j]`` (the input's layout,
    reshaped for free), ``out = g[n, c, oh, ow]`` where ``(i, j)`` is its window's first maximum, else 0. No loop
    over kernel offsets and no division per element."""
    kh, kw = kernel
    t = elem(data)
    n, c, h, w = sizes_of(data)
    i64 = ir.IntegerType.get_signless(64)
    window = emap(6, [0, 1, 2, 4])

    def body(gv, av, _o):
        here = convert(arith.addi(arith.muli(loop_index(3), index(kw)), loop_index(5)), i64)
        hit = arith.cmpi(arith.CmpIPredicate.eq, av, here)
        return convert(arith.select(hit, convert(gv, ct), scalar(0, ct)), t)

    six = [n, c, h // kh, kh, w // kw, kw]
    (res,) = generic([g, arg], [empty(six, t)], [window, window, identity(6)], ["parallel"] * 6, body)
    return tensor.collapse_shape(tensor_type([n, c, h, w], t), res, [[0], [1], [2, 3], [4, 5]])


# --- conv2d_transpose -----------------------------------------------------------------------------------------------
@lowers(CT.conv2d_transpose)
def _conv2d_transpose(lc, op):
    data, weight = lc.inputs
    a = lc.attrs
    (pt, pl, pb, pr), (sh, sw), (dh, dw) = a["padding"], a["strides"], a["dilation"]
    (oph, opw), groups = a["output_padding"], a["groups"]
    out_t = elem(lc.result_type)
    acc_t = compute_type(out_t)
    n, c, h, w = sizes_of(data)
    _, og, kh, kw = sizes_of(weight)
    if not (isinstance(kh, int) and isinstance(kw, int)):
        lc.fail("the kernel's spatial size must be static")
    # 1. dilate by the strides, 2. pad by dilation * (k - 1) - pad (crop where that is negative)
    dilated = filled([n, c, sadd(smul(ssub(h, 1), sh), 1), sadd(smul(ssub(w, 1), sw), 1)], elem(data), 0)
    x = insert_strided(data, dilated, [0, 0, 0, 0], [1, 1, sh, sw])
    lo = [dh * (kh - 1) - pt, dw * (kw - 1) - pl]
    hi = [dh * (kh - 1) - pb + oph, dw * (kw - 1) - pr + opw]
    x = pad(x, [0, 0] + [max(v, 0) for v in lo], [0, 0] + [max(v, 0) for v in hi], 0.0)
    if min(lo + hi) < 0:
        full = sizes_of(x)
        start = [0, 0] + [max(-v, 0) for v in lo]
        size = [full[0], full[1]] + [ssub(ssub(full[2 + k], max(-lo[k], 0)), max(-hi[k], 0)) for k in range(2)]
        x = extract_slice(x, start, size, [1, 1, 1, 1])
    # 3. the kernel flipped and transposed per group: wt[g, o, c, i, j] = weight[g * C/g + c, o, kh-1-i, kw-1-j]
    cg = c // groups if isinstance(c, int) else arith.divsi(c, index(groups))
    w5 = reshape(weight, [groups, cg, og, kh, kw])
    d = [ir.AffineDimExpr.get(k) for k in range(5)]
    flip = emap(5, [0, 2, 1, ir.AffineConstantExpr.get(kh - 1) - d[3], ir.AffineConstantExpr.get(kw - 1) - d[4]])
    (wt,) = generic([w5], [empty([groups, og, cg, kh, kw], elem(weight))], [flip, identity(5)], ["parallel"] * 5,
                    lambda v, _o: v)
    xs = sizes_of(x)
    oh, ow = ssub(xs[2], dh * (kh - 1)), ssub(xs[3], dw * (kw - 1))
    if groups == 1:
        res = linalg.conv_2d_nchw_fchw(x, reshape(wt, [og, cg, kh, kw]), outs=[filled([n, og, oh, ow], acc_t, 0)],
                                       strides=[1, 1], dilations=[dh, dw])
    else:
        xg = reshape(x, [n, groups, cg, xs[2], xs[3]])
        res = linalg.conv_2d_ngchw_gfchw(xg, wt, outs=[filled([n, groups, og, oh, ow], acc_t, 0)],
                                         strides=[1, 1], dilations=[dh, dw])
        res = reshape(res, [n, smul(og, groups), oh, ow])
    return _finish(res, out_t)
