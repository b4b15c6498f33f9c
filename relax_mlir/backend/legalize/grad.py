"""Lowerings of the ops gradients use: ``relax.grad.*_backward``.

Scatters are written as gathers, so that every result element is computed by one iteration of a
``linalg.generic`` (no atomic or sequential accumulation is needed):

* take_backward: ``out[..., i, ...] = sum_j (indices[j] == i) * g[..., j, ...]`` (O(size x indices));
* strided_slice_backward: ``tensor.insert_slice`` of the gradient into zeros (a gather for negative strides);
* max/avg_pool2d_backward: for each input position and kernel offset, the output window that read it
  (``oh = (h + pad - i * dilation) / stride`` when exact and in range) gives its gradient: all of it if the
  window's first maximum is there (max), ``g / divisor`` (avg);
"""

from __future__ import annotations


from mlir import ir
from mlir.dialects import arith, scf, tensor

from .core import (Size, as_index, cast_elements, compute_type, convert, dim, elem, emap, empty, filled, generic,
                   identity, index, insert_strided, is_float, loop_index, map_elementwise, reshape, scalar, sizes_of, sprod,
                   tensor_type)
from .nn import (_pool_geometry, _window_count, class_target_message, class_weight, pad, tiles_exactly, window_maps,
                 window_view)
from ..schedule.pooling import POOL_TAG, beats, first_max
from .checks import linear_position, report_if, where
from .shape import _shape_text, _slice_bounds, checked_indices, extract_slice, insert_slice
from .size_checks import assumed_equal, unless_sizes

def _add(t: ir.Type):
    return arith.addf if is_float(t) else arith.addi


def take_backward(lc, op):
    """A scatter-add, one index at a time: ``out[..., idx[j], ...] += g[..., j, ...]`` in an ``scf.for`` over the
    (flattened) indices, each adding one slab, so the work is that of reading ``g`` once, whatever the size of the
    table (an embedding's gradient). Each index is mapped by ``mode`` and checked once; a bad one adds nothing."""
    g, ind = lc.inputs
    t = elem(lc.result_type)
    ct = compute_type(t)
    sizes, axis = lc.result_sizes(), lc.attrs["axis"]
    if axis is None:
        out_sizes, axis = [sprod(sizes)], 0
    else:
        out_sizes, axis = list(sizes), axis % len(sizes)
    r, count = len(out_sizes), sprod(sizes_of(ind))
    size = out_sizes[axis]
    message = (f"{where(op)}: relax.grad.take_backward: index {{value}} at position {{position}} of the indices "
               f"(flat, shape {_shape_text(sizes_of(ind))}) is out of range for axis {axis} of size "
               f"{size if isinstance(size, int) else '{extent}'}")
    extent = as_index(size)
    # Checked before the loop (which then has no side effects): a bad index becomes ``extent`` and adds nothing.
    flat = checked_indices(op, reshape(ind, [count]), extent, lc.attrs["mode"], message, extent)
    g = cast_elements(reshape(g, out_sizes[:axis] + [count] + out_sizes[axis + 1:]), ct)
    slab = out_sizes[:axis] + [1] + out_sizes[axis + 1:]

    def at(position: ir.Value) -> list:
        return [0] * axis + [position] + [0] * (r - axis - 1)

    acc0 = filled(out_sizes, ct, 0)
    loop = scf.ForOp(index(0), as_index(count), index(1), [acc0])
    with ir.InsertionPoint(loop.body):
        j, acc = loop.induction_variable, loop.inner_iter_args[0]
        i = tensor.extract(flat, [j])
        update = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, i, extent), [acc.type], has_else=True)
        with ir.InsertionPoint(update.then_block):
            scf.YieldOp([acc])
        with ir.InsertionPoint(update.else_block):
            row, piece = extract_slice(acc, at(i), slab, [1] * r), extract_slice(g, at(j), slab, [1] * r)
            summed = map_elementwise([row, piece], tensor_type(slab, ct), _add(ct), slab)
            scf.YieldOp([insert_slice(summed, acc, at(i))])
        scf.YieldOp([update.results[0]])
    res = cast_elements(loop.results[0], t)
    return reshape(res, sizes) if lc.attrs["axis"] is None else res


def strided_slice_backward(lc, op):
    g = lc.inputs[0]
    t, sizes = elem(lc.result_type), lc.result_sizes()
    rank, a = len(sizes), lc.attrs
    offsets, lens, strides = [0] * rank, list(sizes), [1] * rank
    for ax, b, e, s in zip(a["axes"], a["begin"], a["end"], a["strides"] or (1,) * len(a["axes"])):
        ax %= rank
        offsets[ax], lens[ax] = _slice_bounds(b, e, s, sizes[ax])
        strides[ax] = s
    if any(isinstance(n, int) and n == 0 for n in lens):
        return filled(sizes, t, 0)
    # The gradient is inserted with its own sizes (or read over the slice's): they are the slice's, which
    # inference assumed of symbolic ones; a larger gradient would be written past the result.
    mismatch = assumed_equal(op, [
        (dim(g, ax), lens[ax], ax, f"{where(op)}: relax.grad.strided_slice_backward: dimension {{position}} of "
         "output_grad is {value}, where the slice has {extent}") for ax in range(rank)])
    return unless_sizes(mismatch, tensor_type(sizes, t), sizes,
                        lambda: _slice_backward(g, sizes, offsets, lens, strides))


def _slice_backward(g: ir.Value, sizes: list, offsets: list, lens: list, strides: list) -> ir.Value:
    """``g`` written into zeros of ``sizes`` at ``offsets`` every ``strides`` (``lens`` elements along each axis)."""
    t, rank = elem(g), len(sizes)
    if all(s > 0 for s in strides):
        return insert_strided(g, filled(sizes, t, 0), offsets, strides)

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
def nll_loss_backward(lc, op):
    g, pred, targets = lc.inputs[:3]
    weights = lc.inputs[3] if len(lc.inputs) > 3 else None
    t, ct = elem(pred), compute_type(elem(pred))
    rank, k = pred.type.rank, targets.type.rank
    cls = 1 if rank > 1 else 0
    classes = as_index(dim(pred, cls))
    ignore, reduction = lc.attrs["ignore_index"], lc.attrs["reduction"]

    message = class_target_message(op, "relax.grad.nll_loss_backward", dim(pred, cls), ignore)

    def weight_of(tv):
        return class_weight(tv, classes, ignore, weights, ct)

    ins = [g, targets]
    per_item = [d for d in range(rank) if d != cls]
    maps = [emap(rank, per_item if reduction == "none" else []), emap(rank, per_item)]
    if reduction == "mean":
        (wsum,) = generic([targets], [filled([], ct, 0)], [identity(k), emap(k, [])], ["reduction"] * k,
                          lambda tv, o: arith.addf(o, weight_of(tv)[3]))
        ins, maps = ins + [wsum], maps + [emap(rank, [])]

    def body(gv, tv, *rest):
        valid, bad, i, w = weight_of(tv)
        # Every class position sees its item's target: the slot keeps the first report of a call.
        report_if(op, bad, tv, linear_position(per_item, sizes_of(targets)), message, classes)
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
    return cast_elements(res, t)


def _output_grad_checked(lc, g: ir.Value, data: ir.Value, out_sizes: list, build) -> ir.Value:
    """``build()``, run only when ``g`` has the forward op's output sizes ``out_sizes`` (which inference assumed of
    symbolic ones): the gradient is read at the positions of the data's windows, over the data's batch and
    channels, and (max) the window argmax at the gradient's positions."""
    mismatch = assumed_equal(lc.op, [
        (dim(g, ax), out_sizes[ax], ax, f"{where(lc.op)}: {lc.record.name}: dimension {{position}} of output_grad "
         "is {value}, where the forward op's output has {extent}") for ax in range(4)])
    return unless_sizes(mismatch, tensor_type(sizes_of(data), elem(data)), sizes_of(data), build)


def max_pool2d_backward(lc, op):
    g, data = lc.inputs
    a = lc.attrs
    geometry = _pool_geometry(lc, data)
    if tiles_exactly(lc, data, geometry[0]):
        return _tiled_pool_backward(g, data, a["pool_size"])
    return _output_grad_checked(lc, g, data, geometry[0], lambda: _max_pool_backward(lc, g, data, geometry))


def _max_pool_backward(lc, g: ir.Value, data: ir.Value, geometry: tuple) -> ir.Value:
    a = lc.attrs
    t, ct = elem(data), compute_type(elem(data))
    (kh, kw), (sh, sw), (dh, dw) = a["pool_size"], a["strides"], a["dilation"]
    sizes, low, high = geometry
    padded = pad(data, low, high, float("-inf"))
    i64 = ir.IntegerType.get_signless(64)
    d = [ir.AffineDimExpr.get(k) for k in range(6)]
    read = emap(6, [0, 1, d[2] * sh + d[4] * dh, d[3] * sw + d[5] * dw])
    out_map = emap(6, [0, 1, 2, 3])

    def running_max(v, b, bi):
        better = beats(v, b)
        here = convert(arith.addi(arith.muli(loop_index(4), index(kw)), loop_index(5)), i64)
        return arith.select(better, v, b), arith.select(better, here, bi)

    window = empty([kh, kw], t)
    _, arg = generic([padded, window], [filled(sizes, t, float("-inf")), filled(sizes, i64, 0)],
                     [read, emap(6, [4, 5]), out_map, out_map], ["parallel"] * 4 + ["reduction"] * 2,
                     lambda v, _w, b, bi: running_max(v, b, bi))

    def contribution(coords, i, j):
        k = convert(arith.addi(arith.muli(i, index(kw)), j), i64)
        hit = arith.cmpi(arith.CmpIPredicate.eq, tensor.extract(arg, coords), k)
        return arith.select(hit, convert(tensor.extract(g, coords), ct), scalar(0, ct))

    return _pool_backward(lc, g, data, contribution)


def avg_pool2d_backward(lc, op):
    g, data = lc.inputs
    return _output_grad_checked(lc, g, data, _pool_geometry(lc, data)[0], lambda: _avg_pool_backward(lc, g, data))


def _avg_pool_backward(lc, g: ir.Value, data: ir.Value) -> ir.Value:
    a = lc.attrs
    ct = compute_type(elem(data))
    (pt, pl, pb, pr), (kh, kw), include = a["padding"], a["pool_size"], a["count_include_pad"]
    h, w = dim(data, 2), dim(data, 3)

    def contribution(coords, i, j):
        ch = _window_count(coords[2], h, pt, pb, kh, a["strides"][0], a["dilation"][0], include)
        cw = _window_count(coords[3], w, pl, pr, kw, a["strides"][1], a["dilation"][1], include)
        return arith.divf(convert(tensor.extract(g, coords), ct), convert(arith.muli(ch, cw), ct))

    return _pool_backward(lc, g, data, contribution)


def _tiled_pool_backward(g: ir.Value, data: ir.Value, kernel: tuple[int, int]) -> ir.Value:
    """Max-pool gradient when windows tile the input: written as ``[n, c, oh, i, ow, j]`` (the input's layout,
    reshaped for free), ``out = g[n, c, oh, ow]`` where ``(i, j)`` is its window's first maximum, else 0. Each
    iteration reads its whole window (``window_maps``) and finds the first maximum again: no argmax tensor
    between two passes, no loop over kernel offsets; ``schedule/pooling.py`` turns it into vector code."""
    kh, kw = kernel
    t = elem(data)
    n, c, h, w = sizes_of(data)
    i32 = ir.IntegerType.get_signless(32)
    maps = window_maps(6, 2, 4, kernel)

    def body(gv, *args):
        _, at = first_max(args[:len(maps)])
        here = convert(arith.addi(arith.muli(loop_index(3), index(kw)), loop_index(5)), i32)
        return arith.select(arith.cmpi(arith.CmpIPredicate.eq, at, here), gv, scalar(0, t))

    six = [n, c, h // kh, kh, w // kw, kw]
    (res,) = generic([g] + [window_view(data, kernel)] * len(maps), [empty(six, t)],
                     [emap(6, [0, 1, 2, 4])] + maps + [identity(6)], ["parallel"] * 6, body)
    res.owner.attributes[POOL_TAG] = ir.StringAttr.get("max_backward")  # schedule/pooling.py vectorizes it
    return tensor.collapse_shape(tensor_type([n, c, h, w], t), res, [[0], [1], [2, 3], [4, 5]])
