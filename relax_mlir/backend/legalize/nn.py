"""Neural-network lowerings: softmax/log_softmax, the losses, conv2d and pooling; and fused lowerings of the
composites batch_norm and layer_norm (``fused_batch_norm``, ``fused_layer_norm``: one normalising
``linalg.generic`` after the statistics). The composites' records decompose them before export, so these are
not attached to the records: select them with ``LegalizeOps({"relax.nn.layer_norm": fused_layer_norm})``.

* softmax: max-reduce, ``exp(x - max)``, sum-reduce, divide (computed in f32 for half floats);
* conv2d: ``tensor.pad`` then ``linalg.conv_2d_nchw_fchw`` (``conv_2d_ngchw_gfchw`` on reshaped operands for
  groups > 1); a dilated one (static, float, stride 1 along the dilated axes: the weight gradients of strided
  convolutions) as the undilated convolution of its input's phases stacked along the batch, which the schedules
  take (``_dilated_by_phases``); a strided one as the sum of stride-1 convolutions of its input's phases
  (``_strided_by_phases``);
* max/avg pooling: ``tensor.pad`` (with -inf, or 0 for the sum) then ``linalg.pooling_nchw_max``/``_sum``; the
  average divides by the number of window positions on the input (and padding, with ``count_include_pad``),
  counted per output position in the dividing ``linalg.generic``;
* nll_loss: a ``linalg.generic`` over the targets that reads ``predictions[n, t, ...]`` and ``weights[t]`` with
  ``tensor.extract`` (an out-of-range target is read clamped and reported: the call raises IndexError after;
  targets of another batch than the predictions' are a size check).
"""

from __future__ import annotations

from math import gcd
from typing import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, linalg, math, scf, tensor

from .core import (DYN, amap, as_index, cast_elements, compute_type, convert, dim, elem, emap, empty, filled,
                   generic, identity, index, insert_strided, is_float, loop_index, lowest, map_elementwise, reduce,
                   reshape, sadd, scalar, sceildiv, sfloordiv, Size, sizes_of, smax, smul, ssub, tensor_type)
from .reduce import mean_and_variance
from .checks import guarded_extract, linear_position, report_if, where
from ..error_slot import SHAPE_CHECK_PREFIX
from .shape import extract_slice
from .size_checks import assumed_equal, unless_sizes
from ..schedule.common import UNLESS_EMPTY
from ..schedule.pooling import POOL_TAG


def _map(inputs: Sequence[ir.Value], maps: Sequence[ir.AffineMap], sizes: Sequence[Size], t: ir.Type, fn) -> ir.Value:
    """A parallel generic over ``sizes`` reading ``inputs`` through ``maps``: ``out = fn(*scalars)``."""
    rank = len(sizes)
    return generic(inputs, [empty(sizes, t)], list(maps) + [identity(rank)], ["parallel"] * rank,
                   lambda *args: fn(*args[:len(inputs)]))[0]


# --- softmax ---------------------------------------------------------------------------------------------------
def _softmax(log: bool):
    """The rule of softmax (``log``: log_softmax). Over an empty axis there is nothing to normalise, and its row
    statistics, sized by the other axes, would be the only memory it uses: a static empty axis gives the empty
    result at once; a dynamic one beside another dynamic size (an ``(m, n)`` input with ``n = 0`` at run time and
    ``m = 2**34``: 64 GiB of row maxima and sums) computes under ``scf.if`` on ``n != 0`` into the result's
    tensor, which the other branch yields empty (both are the one result buffer: nothing is copied). An
    elementwise consumer is moved into the branch before fusion (``pipeline.py: sink_into_empty_guards``). With
    the other sizes static, the statistics are no larger than the type says: no branch."""
    def rule(lc, op):
        x = lc.inputs[0]
        axis = lc.attrs["axis"] % x.type.rank
        out_t, sizes = elem(lc.result_type), sizes_of(x)
        extent = sizes[axis]
        if isinstance(extent, int):
            return empty(sizes, out_t) if extent == 0 else _normalised(x, axis, sizes, out_t, log)
        if all(isinstance(s, int) for a, s in enumerate(sizes) if a != axis):
            return _normalised(x, axis, sizes, out_t, log)
        out = empty(sizes, out_t)
        choose = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, extent, index(0)), [out.type], has_else=True)
        choose.operation.attributes[UNLESS_EMPTY] = ir.UnitAttr.get()  # its consumer joins it (pipeline.py)
        with ir.InsertionPoint(choose.then_block):
            scf.YieldOp([out])
        with ir.InsertionPoint(choose.else_block):
            scf.YieldOp([_normalised(x, axis, sizes, out_t, log, out)])
        return choose.results[0]
    return rule


def _normalised(x: ir.Value, axis: int, sizes: Sequence[Size], out_t: ir.Type, log: bool,
                out: ir.Value | None = None) -> ir.Value:
    """Max-reduce, ``exp(x - max)``, sum-reduce, then divide (or subtract the log) into ``out`` (or a new tensor)."""
    rank, ct = x.type.rank, compute_type(elem(x))
    kept = amap(rank, [a for a in range(rank) if a != axis])
    mx = reduce(x, [axis], ct, lowest(ct), arith.maximumf)
    shifted = _map([x, mx], [identity(rank), kept], sizes, ct, lambda v, m: arith.subf(convert(v, ct), m))
    total = reduce(shifted, [axis], ct, scalar(0, ct), arith.addf, pre=math.exp)
    if log:
        def fn(s, t):
            return convert(arith.subf(s, math.log(t)), out_t)
    else:
        def fn(s, t):
            return convert(arith.divf(math.exp(s), t), out_t)
    if out is None:
        return _map([shifted, total], [identity(rank), kept], sizes, out_t, fn)
    return generic([shifted, total], [out], [identity(rank), kept, identity(rank)], ["parallel"] * rank,
                   lambda s, t, _: fn(s, t))[0]


softmax = _softmax(False)
log_softmax = _softmax(True)


# --- losses ----------------------------------------------------------------------------------------------------
def cross_entropy_with_logits(lc, op):
    x, y = lc.inputs
    rank, ct, out_t = x.type.rank, compute_type(elem(x)), elem(lc.result_type)
    acc = filled([], ct, 0)
    (total,) = generic([x, y], [acc], [identity(rank), identity(rank), amap(rank, [])], ["reduction"] * rank,
                       lambda a, b, o: arith.addf(o, arith.mulf(convert(a, ct), convert(b, ct))))
    count = convert(as_index(dim(x, 0)), ct) if rank > 1 else scalar(1, ct)
    return map_elementwise([total], lc.result_type, lambda t: convert(arith.negf(arith.divf(t, count)), out_t), [])



def class_weight(t: ir.Value, classes: ir.Value, ignore: int, weights, ct: ir.Type):
    """For a class-index target ``t``: (``t != ignore_index``, whether ``t`` is a bad target (not ignored and
    outside [0, classes)), the class clamped into [0, classes), the class's weight or 1, and 0 where ``t`` is
    ignored or bad). A bad target reads no weight. Shared by nll_loss and its backward op."""
    valid = arith.cmpi(arith.CmpIPredicate.ne, t, scalar(ignore, t.type))
    outside = arith.cmpi(arith.CmpIPredicate.uge, convert(t, ir.IndexType.get()), classes)
    bad = arith.andi(valid, outside)
    i = convert(t, ir.IndexType.get())
    i = arith.maxsi(arith.minsi(i, arith.subi(classes, as_index(1))), as_index(0))
    w = convert(guarded_extract(weights, [i], outside), ct) if weights is not None else scalar(1, ct)
    return valid, bad, i, arith.select(arith.andi(valid, arith.xori(outside, scalar(True, outside.type))), w,
                                       scalar(0, ct))


def class_target_message(op: ir.Operation, name: str, classes, ignore: int) -> str:
    """The error slot's message for a bad class target of ``name`` (nll_loss and its backward op)."""
    return (f"{where(op)}: {name}: target {{value}} at position {{position}} of the targets (flat) "
            f"is not a class index in [0, {classes if isinstance(classes, int) else '{extent}'}) "
            f"nor the ignore_index {ignore}")

def nll_loss(lc, op):
    pred, targets = lc.inputs[:2]
    weights = lc.inputs[2] if len(lc.inputs) > 2 else None
    ct, out_t = compute_type(elem(pred)), elem(lc.result_type)
    k = targets.type.rank
    class_axis = 1 if pred.type.rank > 1 else 0
    classes = as_index(dim(pred, class_axis))
    ignore, reduction = lc.attrs["ignore_index"], lc.attrs["reduction"]
    if weights is not None and (weights.type.is_dynamic_dim(0) or pred.type.is_dynamic_dim(class_axis)):
        # the weights' length and the class count, which inference assumed equal, checked; a target is read only
        # below the smaller of the two
        count = as_index(dim(weights, 0))
        report_if(op, arith.cmpi(arith.CmpIPredicate.ne, count, classes), arith.index_cast(
            ir.IntegerType.get_signless(64), count), as_index(0),
            f"{SHAPE_CHECK_PREFIX}{where(op)}: nll_loss: the weights have {{value}} classes, where the "
            "predictions have another count (sizes the op's inference assumed equal)")
        classes = arith.minui(classes, count)

    message = class_target_message(op, "relax.nn.nll_loss", dim(pred, class_axis), ignore)

    def picked(t):
        """(-pred[n, t, ...] * w[t], w[t]) with both 0 where t is ignored; a target outside [0, C) that is not
        ignored is reported through the error slot (``checks.py``) and reads a clamped class."""
        valid, bad, i, w = class_weight(t, classes, ignore, weights, ct)
        report_if(op, bad, t, linear_position(list(range(k)), sizes_of(targets)), message,
                  as_index(dim(pred, class_axis)))
        coords = [loop_index(0), i] + [loop_index(a) for a in range(1, k)] if pred.type.rank > 1 else [i]
        p = convert(guarded_extract(pred, coords, bad), ct)
        return arith.negf(arith.mulf(p, w)), w

    def build() -> ir.Value:
        if reduction == "none":
            return _map([targets], [identity(k)], sizes_of(targets), out_t, lambda t: convert(picked(t)[0], out_t))
        loss, wsum = filled([], ct, 0), filled([], ct, 0)

        def body(t, lo, wo):
            value, w = picked(t)
            return arith.addf(lo, value), arith.addf(wo, w)

        total, weight = generic([targets], [loss, wsum], [identity(k), amap(k, []), amap(k, [])], ["reduction"] * k,
                                body)
        if reduction == "sum":
            return map_elementwise([total], lc.result_type, lambda v: convert(v, out_t), [])
        return map_elementwise([total, weight], lc.result_type, lambda v, w: convert(arith.divf(v, w), out_t), [])

    # The loops run over the targets and read the predictions at the same positions: their sizes (the
    # predictions' without the class axis), which inference assumed equal, are checked first.
    mismatch = assumed_equal(op, [
        (dim(targets, a), dim(pred, a if a < class_axis else a + 1), a,
         f"{where(op)}: relax.nn.nll_loss: dimension {{position}} of the targets is {{value}}, where the predictions "
         "have {extent} (the targets must have the predictions' shape without the class axis)")
        for a in range(k)])
    out_sizes = sizes_of(targets) if reduction == "none" else []
    return unless_sizes(mismatch, tensor_type(out_sizes, out_t), out_sizes, build)


# --- convolution and pooling --------------------------------------------------------------------------------------
def pad(x: ir.Value, low: Sequence[Size], high: Sequence[Size], value: float) -> ir.Value:
    """``tensor.pad`` of ``x`` with the constant ``value`` (``low``/``high`` per axis, ints or index Values)."""
    if all(isinstance(s, int) and s == 0 for s in list(low) + list(high)):
        return x
    sizes = [sadd(sadd(d, lo), hi) for d, lo, hi in zip(sizes_of(x), low, high)]
    dyn = lambda vals: [v for v in vals if not isinstance(v, int)]  # noqa: E731
    stat = lambda vals: [v if isinstance(v, int) else ir.ShapedType.get_dynamic_size() for v in vals]  # noqa: E731
    op = tensor.PadOp(tensor_type(sizes, elem(x)), x, dyn(low), dyn(high), stat(low), stat(high))
    block = op.region.blocks.append(*[ir.IndexType.get()] * x.type.rank)
    with ir.InsertionPoint(block):
        tensor.YieldOp(scalar(value, elem(x)))
    return op.result


def window_out(size: Size, before: int, after: int, kernel: Size, stride: int, dilation: int, ceil: bool) -> Size:
    """Output length of a sliding window (the registry's rule, PyTorch's): floor or ceil division, and in ceil
    mode a last window starting in the right padding is dropped."""
    span = sadd(smul(ssub(kernel, 1), dilation), 1)
    num = ssub(sadd(size, before + after), span)
    q = sceildiv(num, stride) if ceil else sfloordiv(num, stride)
    if ceil:
        gap = ssub(span, after)
        if isinstance(q, int) and isinstance(num, int) and isinstance(gap, int):
            q = q - 1 if q * stride - num >= gap else q
        else:
            drop = arith.cmpi(arith.CmpIPredicate.sge, as_index(ssub(smul(q, stride), num)), as_index(gap))
            q = arith.select(drop, as_index(ssub(q, 1)), as_index(q))
    return sadd(q, 1)


def refuse_large_window(lc, size: Size, pads: int, kernel: Size, dilation: int, axis: str, ceil_stride: int = 1) \
        -> None:
    """A window larger than the padded input has no output (the registry refuses it for static sizes; the loops
    would give an empty result): for a size known only at run time the call raises ValueError after. In ceil mode
    (``ceil_stride``: the stride) a window may hang past the padded input by less than a stride, as in PyTorch."""
    span, padded = sadd(smul(ssub(kernel, 1), dilation), 1), sadd(size, pads)
    if isinstance(span, int) and isinstance(padded, int):
        return
    padded = as_index(padded)
    too_large = arith.cmpi(arith.CmpIPredicate.sgt, as_index(ssub(span, ceil_stride - 1)), padded)
    report_if(lc.op, too_large, arith.index_cast(
        ir.IntegerType.get_signless(64), padded), as_index(0),
        f"{SHAPE_CHECK_PREFIX}{where(lc.op)}: {lc.record.name}: the {axis} window (extent {{extent}}) is "
        "larger than the padded input ({value})", as_index(span))


def _extra(out: Size, size: Size, pads: int, kernel: Size, stride: int, dilation: int) -> Size:
    """Padding past the right edge that the last (ceil-mode) window needs."""
    need = sadd(smul(ssub(out, 1), stride), sadd(smul(ssub(kernel, 1), dilation), 1))
    return smax(ssub(need, sadd(size, pads)), 0)


def conv2d(lc, op):
    data, weight = lc.inputs
    a = lc.attrs
    (pt, pl, pb, pr), strides, dilations, g = a["padding"], list(a["strides"]), list(a["dilation"]), a["groups"]
    out_t = elem(lc.result_type)
    acc_t = compute_type(out_t)
    n, c, h, w = sizes_of(data)
    o, i, kh, kw = sizes_of(weight)
    refuse_large_window(lc, h, pt + pb, kh, dilations[0], "height")
    refuse_large_window(lc, w, pl + pr, kw, dilations[1], "width")
    oh = window_out(h, pt, pb, kh, strides[0], dilations[0], False)
    ow = window_out(w, pl, pr, kw, strides[1], dilations[1], False)
    by_phases = _strided_by_phases(data, weight, a["padding"], strides, dilations, acc_t) if g == 1 else None
    x = pad(data, [0, 0, pt, pl], [0, 0, pb, pr], 0.0) if by_phases is None else None
    if by_phases is None and g == 1:
        by_phases = _dilated_by_phases(x, weight, strides, dilations, acc_t)
    if by_phases is not None:
        res = by_phases
    elif g == 1:
        res = linalg.conv_2d_nchw_fchw(x, weight, outs=[filled([n, o, oh, ow], acc_t, 0)],
                                       strides=strides, dilations=dilations)
    else:
        f = sfloordiv(o, g)
        xg = reshape(x, [n, g, sfloordiv(c, g)] + sizes_of(x)[2:])
        wg = reshape(weight, [g, f, i, kh, kw])
        res = linalg.conv_2d_ngchw_gfchw(xg, wg, outs=[filled([n, g, f, oh, ow], acc_t, 0)],
                                         strides=strides, dilations=dilations)
        res = reshape(res, [n, o, oh, ow])
    if acc_t != out_t:
        res = map_elementwise([res], tensor_type(sizes_of(res), out_t), lambda v: convert(v, out_t), sizes_of(res))
    return res


def _dilated_by_phases(x: ir.Value, weight: ir.Value, strides: list[int], dilations: list[int],
                       acc_t: ir.Type) -> ir.Value | None:
    """A dilated convolution of the padded ``x`` (static, float, stride 1 along each dilated axis) as one undilated
    convolution of the input's phases, or None for any other: TensorFlow's "space to batch". Output row
    ``d * p + r`` reads padded rows ``d * (p + i) + r``, so the output's phase ``r`` is the ordinary convolution of
    the input's phase ``r``; the ``dh * dw`` phases are stacked along the batch, convolved at once and interleaved
    back. The zero rows that make every phase equally long reach only outputs past the end, which are cropped.

    Why: the convolution schedules (``schedule/conv.py``) take undilated convolutions only, and a dilated one ran
    as naive loops. The gradient rules make one of every strided convolution's weight gradient (and of
    conv2d_transpose's, whose dilation is the forward stride): 64x8x28x28 conv2d_transpose, stride 2, ~55 ms
    for that weight gradient, its forward ~5 ms."""
    shapes = [ir.RankedTensorType(v.type).shape for v in (x, weight)]
    if (dilations == [1, 1] or any(d != 1 and s != 1 for s, d in zip(strides, dilations)) or not is_float(elem(x))
            or any(v == DYN or v == 0 for shape in shapes for v in shape)):
        return None
    (n, c, hp, wp), (f, _, kh, kw) = shapes
    full, rows, cols = [], [], []  # per axis: the output's length, a phase's input and output lengths
    for size, k, s, d in zip((hp, wp), (kh, kw), strides, dilations):
        out = (size - d * (k - 1) - 1) // s + 1
        full.append(out)
        cols.append(-(-out // d))
        rows.append(size if d == 1 else cols[-1] + k - 1)
    (dh, dw), (qh, qw), (oh, ow) = dilations, rows, cols
    x = pad(x, [0, 0, 0, 0], [0, 0, qh * dh - hp, qw * dw - wp], 0.0)
    x = _permuted(reshape(x, [n, c, qh, dh, qw, dw]), [3, 5, 0, 1, 2, 4])
    res = linalg.conv_2d_nchw_fchw(reshape(x, [dh * dw * n, c, qh, qw]), weight,
                                   outs=[filled([dh * dw * n, f, oh, ow], acc_t, 0)], strides=strides,
                                   dilations=[1, 1])
    res = _permuted(reshape(res, [dh, dw, n, f, oh, ow]), [2, 3, 4, 0, 5, 1])
    return extract_slice(reshape(res, [n, f, oh * dh, ow * dw]), [0] * 4, [n, f] + full, [1] * 4)


def _strided_by_phases(data: ir.Value, weight: ir.Value, padding: Sequence[int], strides: list[int],
                       dilations: list[int], acc_t: ir.Type) -> ir.Value | None:
    """A strided convolution of ``data`` padded by ``padding`` (static, float, undilated along each strided axis)
    as the sum of ``stride_h * stride_w`` stride-1 convolutions, one per phase of the padded input, or None for
    any other. Output row ``y`` reads padded row ``s * y + i``: the taps ``i = s * a + r`` read row ``y + a`` of
    the input's phase ``r`` (padded rows ``r, r + s, ...``), so phase ``r`` meets the kernel's rows ``r, r + s,
    ...`` in an ordinary convolution. The products are those of the strided convolution (no zero tap is added: a
    kernel shorter than the stride leaves phases out), summed in another order. Each phase is sliced from the
    data and padded on its own (one copy, which the convolution schedule extends with its own rows).

    Why: the schedules' direct forms take stride 1 only; a strided convolution went through im2col and the matmul
    schedule (64x8x56x56, 3x3, stride 2, one thread: ~9 ms, PyTorch ~1 ms). It is conv2d_transpose's data
    gradient too."""
    shapes = [ir.RankedTensorType(v.type).shape for v in (data, weight)]
    if (strides == [1, 1] or any(s != 1 and d != 1 for s, d in zip(strides, dilations)) or not is_float(elem(data))
            or any(v == DYN or v == 0 for shape in shapes for v in shape)):
        return None
    (n, c, h, w), (f, _, kh, kw) = shapes
    (pt, pl, pb, pr) = padding
    out = [(size + before + after - d * (k - 1) - 1) // s + 1
           for size, before, after, k, s, d in zip((h, w), (pt, pl), (pb, pr), (kh, kw), strides, dilations)]
    parts = []
    for rh in range(min(strides[0], kh)):
        for rw in range(min(strides[1], kw)):
            taps = [-(-(k - r) // s) for k, r, s in zip((kh, kw), (rh, rw), strides)]
            rows = [o + (t - 1) * d for o, t, d in zip(out, taps, dilations)]
            plans = [_phase_rows(r, rows_, size, before, s)
                     for r, rows_, size, before, s in zip((rh, rw), rows, (h, w), (pt, pl), strides)]
            if any(p is None for p in plans):
                return None  # a phase of padding alone: left to the strided convolution
            (lo_h, first_h, count_h), (lo_w, first_w, count_w) = plans
            phase = extract_slice(data, [0, 0, first_h, first_w], [n, c, count_h, count_w], [1, 1] + strides)
            phase = pad(phase, [0, 0, lo_h, lo_w], [0, 0, rows[0] - lo_h - count_h, rows[1] - lo_w - count_w], 0.0)
            kernel = extract_slice(weight, [0, 0, rh, rw], [f, c] + taps, [1, 1] + strides)
            res = _dilated_by_phases(phase, kernel, [1, 1], dilations, acc_t)
            parts.append(res if res is not None else linalg.conv_2d_nchw_fchw(
                phase, kernel, outs=[filled([n, f] + out, acc_t, 0)], strides=[1, 1], dilations=dilations))
    if len(parts) == 1:
        return parts[0]
    return map_elementwise(parts, tensor_type([n, f] + out, acc_t), lambda *vs: _sum(vs), [n, f] + out)


def _phase_rows(r: int, rows: int, size: int, before: int, stride: int) -> tuple[int, int, int] | None:
    """Rows ``r, r + stride, ...`` (``rows`` of them) of the data padded by ``before`` (and zeros after): the
    padding rows before the first data row, that data row, and how many data rows (None: none)."""
    low = max(0, -(-(before - r) // stride))
    first = stride * low + r - before
    count = min(rows - low, -(-(size - first) // stride))
    return None if count <= 0 else (low, first, count)


def _sum(values: Sequence[ir.Value]) -> ir.Value:
    total = values[0]
    for v in values[1:]:
        total = arith.addf(total, v)
    return total


def _permuted(x: ir.Value, perm: list[int]) -> ir.Value:
    out = empty([sizes_of(x)[a] for a in perm], elem(x))
    return linalg.transpose(x, outs=[out], permutation=perm).results[0]


def _pool_geometry(lc, x: ir.Value, check: bool = False):
    a = lc.attrs
    (pt, pl, pb, pr), (kh, kw) = a["padding"], a["pool_size"]
    (sh, sw), (dh, dw), ceil = a["strides"], a["dilation"], a["ceil_mode"]
    n, c, h, w = sizes_of(x)
    if check:  # the forward op's (its gradient's lowering reads the same sizes)
        refuse_large_window(lc, h, pt + pb, kh, dh, "height", sh if ceil else 1)
        refuse_large_window(lc, w, pl + pr, kw, dw, "width", sw if ceil else 1)
    oh = window_out(h, pt, pb, kh, sh, dh, ceil)
    ow = window_out(w, pl, pr, kw, sw, dw, ceil)
    high = [0, 0, sadd(pb, _extra(oh, h, pt + pb, kh, sh, dh)), sadd(pr, _extra(ow, w, pl + pr, kw, sw, dw))]
    return [n, c, oh, ow], [0, 0, pt, pl], high


def tiles_exactly(lc, data: ir.Value, out_sizes: Sequence[Size]) -> bool:
    """Whether the pooling windows tile the input exactly: stride = pool size, no padding or dilation, and the
    output covers every input row and column (each input element lies in exactly one window)."""
    a = lc.attrs
    (kh, kw), (sh, sw), (dh, dw) = a["pool_size"], a["strides"], a["dilation"]
    _, _, h, w = sizes_of(data)
    _, _, oh, ow = out_sizes
    static = all(isinstance(v, int) for v in (h, w, oh, ow))
    return (static and (kh, kw) == (sh, sw) and (dh, dw) == (1, 1) and not any(a["padding"])
            and h == oh * kh and w == ow * kw)


def window_view(x: ir.Value, kernel: tuple[int, int]) -> ir.Value:
    """``x`` (N, C, H, W) seen as ``[n, c, oh, i, ow, j]`` (a free reshape) for windows that tile it exactly."""
    (kh, kw), (n, c, h, w) = kernel, sizes_of(x)
    six = [n, c, h // kh, kh, w // kw, kw]  # h and w are static (tiles_exactly); a batch or channel may not be
    out_t = tensor_type(six, elem(x))
    dynamic = [s for s in six if not isinstance(s, int)]
    return tensor.expand_shape(out_t, x, [[0], [1], [2, 3], [4, 5]], dynamic, list(out_t.shape))


def window_maps(ndims: int, oh: int, ow: int, kernel: tuple[int, int]) -> list[ir.AffineMap]:
    """For loops ``(n, c, ..., oh at ``oh``, ..., ow at ``ow``, ...)``, the maps reading element ``(a, b)`` of each
    window of a ``window_view``, row-major: the whole window is read in one iteration, so that the loop over
    ``ow`` is innermost and LLVM vectorizes it (a loop over the 2 x 2 window inside would not be)."""
    const = ir.AffineConstantExpr.get
    return [emap(ndims, [0, 1, oh, const(a), ow, const(b)]) for a in range(kernel[0]) for b in range(kernel[1])]


def _tiled_max_pool(x: ir.Value, kernel: tuple[int, int], sizes: Sequence[Size]) -> ir.Value:
    """Max pooling whose windows tile the input: one parallel generic over the output reading the whole window
    (``window_maps``): NaN-propagating ``maximumf`` as ``linalg.pooling_nchw_max``."""
    view = window_view(x, kernel)
    maps = window_maps(4, 2, 3, kernel)

    def body(*args):
        best = args[0]
        for v in args[1:len(maps)]:
            best = arith.maximumf(best, v)
        return best

    (res,) = generic([view] * len(maps), [empty(sizes, elem(x))], maps + [identity(4)], ["parallel"] * 4, body)
    res.owner.attributes[POOL_TAG] = ir.StringAttr.get("max")  # schedule/pooling.py vectorizes it
    return res


def max_pool2d(lc, op):
    x = lc.inputs[0]
    t = elem(x)
    sizes, low, high = _pool_geometry(lc, x, check=True)
    if is_float(t) and tiles_exactly(lc, x, sizes):
        return _tiled_max_pool(x, tuple(lc.attrs["pool_size"]), sizes)
    lo = float("-inf") if is_float(t) else -(1 << (t.width - 1))
    padded = pad(x, low, high, lo)
    window = empty(list(lc.attrs["pool_size"]), t)
    return linalg.pooling_nchw_max(padded, window, outs=[filled(sizes, t, lo)],
                                   strides=list(lc.attrs["strides"]), dilations=list(lc.attrs["dilation"]))


def _window_count(o: ir.Value, size: Size, before: int, after: int, kernel: int, stride: int,
                  dilation: int, include_pad: bool) -> ir.Value:
    """How many of the ``kernel`` positions of output ``o``'s window lie on the input (or its padding)."""
    lo, hi = (-before, sadd(size, after)) if include_pad else (0, size)
    start = arith.subi(arith.muli(o, as_index(stride)), as_index(before))
    count = as_index(0)
    for k in range(kernel):
        p = arith.addi(start, as_index(k * dilation))
        inside = arith.andi(arith.cmpi(arith.CmpIPredicate.sge, p, as_index(lo)),
                            arith.cmpi(arith.CmpIPredicate.slt, p, as_index(hi)))
        count = arith.addi(count, arith.select(inside, as_index(1), as_index(0)))
    return count


def avg_pool2d(lc, op):
    x = lc.inputs[0]
    a = lc.attrs
    t = elem(x)
    ct = compute_type(t)
    sizes, low, high = _pool_geometry(lc, x, check=True)
    padded = pad(x, low, high, 0.0)
    window = empty(list(a["pool_size"]), t)
    total = linalg.pooling_nchw_sum(padded, window, outs=[filled(sizes, ct, 0)],
                                    strides=list(a["strides"]), dilations=list(a["dilation"]))
    (pt, pl, pb, pr), (kh, kw), include = a["padding"], a["pool_size"], a["count_include_pad"]
    h, w = dim(x, 2), dim(x, 3)

    def fn(v):
        ch = _window_count(loop_index(2), h, pt, pb, kh, a["strides"][0], a["dilation"][0], include)
        cw = _window_count(loop_index(3), w, pl, pr, kw, a["strides"][1], a["dilation"][1], include)
        # (a window wholly in the padding counts 0 positions: divided by 1, it gives 0, as TVM's)
        return convert(arith.divf(v, convert(arith.maxsi(arith.muli(ch, cw), as_index(1)), ct)), t)

    return map_elementwise([total], lc.result_type, fn, sizes)


# --- normalisation (fused) --------------------------------------------------------------------------------------------
def _normalize(x, mean, var, gamma, beta, stat_map, param_map, eps, center, scale, out_t):
    rank, ct = x.type.rank, elem(mean)
    ins, maps = [x, mean, var], [identity(rank), stat_map, stat_map]
    if scale:
        ins, maps = ins + [gamma], maps + [param_map]
    if center:
        ins, maps = ins + [beta], maps + [param_map]

    def fn(v, m, s, *params):
        y = arith.divf(arith.subf(convert(v, ct), m), math.sqrt(arith.addf(s, scalar(eps, ct))))
        rest = list(params)
        if scale:
            y = arith.mulf(y, convert(rest.pop(0), ct))
        if center:
            y = arith.addf(y, convert(rest.pop(0), ct))
        return convert(y, out_t)

    return _map(ins, maps, sizes_of(x), out_t, fn)


def fused_batch_norm(lc, op):
    """``relax.nn.batch_norm`` lowered directly (inference and training forms), for ``LegalizeOps``."""
    x, gamma, beta, moving_mean, moving_var = lc.inputs
    a = lc.attrs
    rank, axis = x.type.rank, a["axis"] % x.type.rank
    ct, t = compute_type(elem(x)), elem(x)
    channel = amap(rank, [axis])
    if a["training"]:
        mean, var = mean_and_variance(x, [d for d in range(rank) if d != axis], ct)
        mom = a["momentum"]

        def update(old, new):
            return convert(arith.addf(arith.mulf(scalar(1 - mom, ct), convert(old, ct)),
                                      arith.mulf(scalar(mom, ct), new)), t)
        new_mean = map_elementwise([moving_mean, mean], moving_mean.type, update)
        new_var = map_elementwise([moving_var, var], moving_var.type, update)
    else:
        stat_t = tensor_type(sizes_of(moving_mean), ct)
        mean = map_elementwise([moving_mean], stat_t, lambda v: convert(v, ct))
        var = map_elementwise([moving_var], stat_t, lambda v: convert(v, ct))
        new_mean, new_var = moving_mean, moving_var
    y = _normalize(x, mean, var, gamma, beta, channel, channel, a["epsilon"], a["center"], a["scale"], t)
    return [y, new_mean, new_var]


def fused_layer_norm(lc, op):
    """``relax.nn.layer_norm`` lowered directly, for ``LegalizeOps``."""
    x, gamma, beta = lc.inputs
    a = lc.attrs
    rank = x.type.rank
    listed = [ax % rank for ax in a["axes"]]  # gamma's dims follow the axes in the order listed
    axes = sorted(listed)
    ct = compute_type(elem(x))
    mean, var = mean_and_variance(x, axes, ct)
    stat_map = amap(rank, [d for d in range(rank) if d not in axes])
    return _normalize(x, mean, var, gamma, beta, stat_map, amap(rank, listed), a["epsilon"], a["center"],
                      a["scale"], elem(x))


# --- conv2d_transpose -----------------------------------------------------------------------------------------------
def conv2d_transpose(lc, op):
    """The input dilated by the strides (``insert_slice`` with strides), padded by ``dilation * (k - 1) - pad``
    (cropped where negative), convolved with the flipped, transposed kernel; a strided one of static float operands
    and one group as one convolution of the data per output phase instead (``_transposed_by_phases``).

    That convolution multiplies the kernel by the inserted and padded zeros, and ``0 * inf`` is NaN: an inf or NaN
    weight would spread NaN to outputs it does not reach (PyTorch's and ONNX's scatter forms, and the interpreter,
    give finite values there). So it runs only when every weight is finite (then the zeros add exact zeros); with a
    non-finite weight an ``scf.if`` takes the same sums over only the taps that meet an input element
    (``_masked_conv``), in naive loops: slow, but a non-finite weight is an accident, not a workload. Each branch
    builds its own operands: the convolution schedule extends the padding it reads (``schedule/conv.py``)."""
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
    lo = [dh * (kh - 1) - pt, dw * (kw - 1) - pl]
    hi = [dh * (kh - 1) - pb + oph, dw * (kw - 1) - pr + opw]
    cg = c // groups if isinstance(c, int) else arith.divsi(c, index(groups))
    oh = sadd(smul(ssub(h, 1), sh), 1 + lo[0] + hi[0] - dh * (kh - 1))  # the dilated size, padded (or cropped),
    ow = sadd(smul(ssub(w, 1), sw), 1 + lo[1] + hi[1] - dw * (kw - 1))  # less the dilated kernel's reach
    out_sizes = [n, smul(og, groups), oh, ow]

    def operands():
        """The dilated, padded input and the flipped kernel ``wt[g, o, c, i, j] = weight[g * C/g + c, o, kh-1-i,
        kw-1-j]``."""
        return dilated_input(), flipped_kernel()

    def dilated_input():
        # 1. dilate by the strides, 2. pad by dilation * (k - 1) - pad (crop where that is negative)
        dilated = filled([n, c, sadd(smul(ssub(h, 1), sh), 1), sadd(smul(ssub(w, 1), sw), 1)], elem(data), 0)
        x = insert_strided(data, dilated, [0, 0, 0, 0], [1, 1, sh, sw])
        x = pad(x, [0, 0] + [max(v, 0) for v in lo], [0, 0] + [max(v, 0) for v in hi], 0.0)
        if min(lo + hi) < 0:
            full = sizes_of(x)
            start = [0, 0] + [max(-v, 0) for v in lo]
            size = [full[0], full[1]] + [ssub(ssub(full[2 + k], max(-lo[k], 0)), max(-hi[k], 0)) for k in range(2)]
            x = extract_slice(x, start, size, [1, 1, 1, 1])
        return x

    def flipped_kernel():
        w5 = reshape(weight, [groups, cg, og, kh, kw])
        d = [ir.AffineDimExpr.get(k) for k in range(5)]
        flip = emap(5, [0, 2, 1, ir.AffineConstantExpr.get(kh - 1) - d[3], ir.AffineConstantExpr.get(kw - 1) - d[4]])
        (wt,) = generic([w5], [empty([groups, og, cg, kh, kw], elem(weight))], [flip, identity(5)],
                        ["parallel"] * 5, lambda v, _o: v)
        return wt

    def grouped(x: ir.Value) -> ir.Value:
        return reshape(x, [n, groups, cg] + sizes_of(x)[2:])

    def convolved():
        x, wt = operands()
        if groups == 1:
            wt = reshape(wt, [og, cg, kh, kw])
            by_phases = _dilated_by_phases(x, wt, [1, 1], [dh, dw], acc_t)
            return by_phases if by_phases is not None else linalg.conv_2d_nchw_fchw(
                x, wt, outs=[filled(out_sizes, acc_t, 0)], strides=[1, 1], dilations=[dh, dw])
        res = linalg.conv_2d_ngchw_gfchw(grouped(x), wt, outs=[filled([n, groups, og, oh, ow], acc_t, 0)],
                                         strides=[1, 1], dilations=[dh, dw])
        return reshape(res, out_sizes)

    if not is_float(elem(weight)):  # integer weights are finite
        return cast_elements(convolved(), out_t)
    finite = reduce(weight, list(range(4)), ir.IntegerType.get_signless(1), 1, arith.andi,
                    pre=lambda v: arith.cmpf(arith.CmpFPredicate.OLT, math.absf(v), scalar(float("inf"), elem(weight))))
    choose = scf.IfOp(tensor.extract(finite, []), [tensor_type(out_sizes, acc_t)], has_else=True)
    with ir.InsertionPoint(choose.then_block):
        by_phases = (_transposed_by_phases(data, lambda: reshape(flipped_kernel(), [og, cg, kh, kw]), a, acc_t,
                                           out_sizes) if groups == 1 else None)
        scf.YieldOp([by_phases if by_phases is not None else convolved()])
    with ir.InsertionPoint(choose.else_block):
        x, wt = operands()
        taps = [((h, sh, dh), lo[0]), ((w, sw, dw), lo[1])]
        masked = _masked_conv(grouped(x), wt, [n, groups, og, oh, ow], acc_t, taps)
        scf.YieldOp([reshape(masked, out_sizes)])
    return cast_elements(choose.results[0], out_t)


def _transposed_by_phases(data: ir.Value, flipped: Callable[[], ir.Value], a: dict, acc_t: ir.Type,
                          out_sizes: Sequence[Size]) -> ir.Value | None:
    """A strided conv2d_transpose of static float operands (one group) as ``stride_h * stride_w`` ordinary
    convolutions of the data, one per phase of the output ("sub-pixel convolution"), each written to its rows and
    columns of the output; None for any other. ``flipped()`` builds the flipped, transposed kernel (OIHW).

    Output row ``y`` (of phase ``r = y % stride``) sums the taps ``i`` with ``(y + pad_top - i * dilation) %
    stride == 0``: every ``stride / gcd`` th tap from the first such one, each reading data row ``(y + pad_top -
    i * dilation) / stride``, so a phase is a convolution of the data (padded or cropped) with those taps, at
    dilation ``dilation / gcd``. Why: the form of the other branch, the data dilated by the strides, multiplies
    ``stride_h * stride_w - 1`` zeros out of every ``stride_h * stride_w`` products (64x8x28x28, stride 2: 4x the
    work, plus the dilated copy). Only the data's own elements (and its zero padding) meet the kernel, as there, so
    with finite weights (this branch) the sums are the same."""
    shape = ir.RankedTensorType(data.type).shape
    if (tuple(a["strides"]) == (1, 1) or not is_float(elem(data)) or not all(isinstance(v, int) for v in out_sizes)
            or any(v == DYN or v == 0 for v in list(shape) + list(out_sizes))):
        return None
    wt = flipped()
    shapes = [shape, ir.RankedTensorType(wt.type).shape]
    (pt, pl, _, _), strides, dilations = a["padding"], a["strides"], a["dilation"]
    axes = [[_phase_plan(r, size, k, st, d, before, out) for r in range(st)]
            for size, k, st, d, before, out in zip(shapes[0][2:], shapes[1][2:], strides, dilations, (pt, pl),
                                                  out_sizes[2:])]
    phases = [(ph, pw) for ph in axes[0] for pw in axes[1] if ph is not None and pw is not None]
    empty_phase = any(ph["taps"] == 0 or pw["taps"] == 0 for ph, pw in phases)
    n, o = out_sizes[:2]
    out = filled(out_sizes, acc_t, 0) if empty_phase else empty(out_sizes, acc_t)
    for ph, pw in phases:
        if ph["taps"] == 0 or pw["taps"] == 0:
            continue  # no tap reaches these rows (a kernel shorter than the stride): they stay zero
        x = _padded_or_cropped(data, (ph["low"], pw["low"]), (ph["high"], pw["high"]))
        kernel = extract_slice(wt, [0, 0, ph["first"], pw["first"]], [o, shapes[1][1], ph["taps"], pw["taps"]],
                               [1, 1, ph["step"], pw["step"]])
        dil = [ph["dilation"], pw["dilation"]]
        res = _dilated_by_phases(x, kernel, [1, 1], dil, acc_t)
        if res is None:
            res = linalg.conv_2d_nchw_fchw(x, kernel, outs=[filled([n, o, ph["rows"], pw["rows"]], acc_t, 0)],
                                           strides=[1, 1], dilations=dil)
        out = insert_strided(res, out, [0, 0, ph["phase"], pw["phase"]], [1, 1] + list(strides))
    return out


def _phase_plan(r: int, size: int, k: int, stride: int, dilation: int, before: int, out: int) -> dict | None:
    """Along one axis, output phase ``r`` of a transposed convolution (see ``_transposed_by_phases``): its
    ``rows``, the taps that reach it (``taps`` of them, from the flipped kernel's ``first`` every ``step``), the
    data's padding (negative: cropping) ``low`` and ``high``, and the ``dilation`` of its convolution (``taps`` 0:
    no data row reaches the phase); None when the output has no row of this phase."""
    rows = -(-(out - r) // stride)
    if rows <= 0:
        return None
    reaching = [i for i in range(k) if (r + before - i * dilation) % stride == 0]
    if not reaching:
        return {"phase": r, "rows": rows, "taps": 0}
    g = gcd(stride, dilation)
    step, spacing, m = stride // g, dilation // g, len(reaching)
    last_row = (r + before - reaching[0] * dilation) // stride  # the data row the first output row's first tap reads
    start = last_row - (m - 1) * spacing  # ... and its last tap: the first row of the phase's convolution
    end = rows - 1 + last_row  # the last row it reads
    if start >= size or end < 0:  # only padding (a large pad_top, or output_padding): zero, as finite weights give
        return {"phase": r, "rows": rows, "taps": 0}
    return {"phase": r, "rows": rows, "taps": m, "first": k - 1 - reaching[-1], "step": step, "dilation": spacing,
            "low": -start, "high": end - (size - 1)}


def _padded_or_cropped(x: ir.Value, low: Sequence[int], high: Sequence[int]) -> ir.Value:
    """``x`` (static NCHW) with ``low``/``high`` zero rows and columns added before/after (removed where negative)."""
    sizes = sizes_of(x)
    crop = [max(-v, 0) for v in low], [max(-v, 0) for v in high]
    if any(crop[0] + crop[1]):
        x = extract_slice(x, [0, 0] + crop[0], sizes[:2] + [sizes[2 + k] - crop[0][k] - crop[1][k] for k in range(2)],
                          [1] * 4)
    return pad(x, [0, 0] + [max(v, 0) for v in low], [0, 0] + [max(v, 0) for v in high], 0.0)


def _masked_conv(x: ir.Value, wt: ir.Value, sizes: Sequence[Size], acc_t: ir.Type, taps) -> ir.Value:
    """``out[n, g, o, y, z] = sum(x[n, g, c, y + i*dh, z + j*dw] * wt[g, o, c, i, j])`` over the ``(c, i, j)`` whose
    input position is an element of the data, not an inserted or padded zero: a product with a zero is not taken
    (so ``0 * inf`` makes no NaN). ``taps`` gives per spatial axis ``((data size, stride, dilation), low pad)``: the
    padded position ``p`` is the data's element ``(p - low) / stride`` when that divides and lies in the data."""
    loops = 8  # n, g, o, y, z (parallel); c, i, j (reduced)
    d = [ir.AffineDimExpr.get(k) for k in range(loops)]
    (_, _, dh), _ = taps[0]
    (_, _, dw), _ = taps[1]
    x_map = emap(loops, [0, 1, 5, d[3] + d[6] * dh, d[4] + d[7] * dw])
    w_map = emap(loops, [1, 2, 5, 6, 7])

    def on_data(axis: int, tap: int, geometry) -> ir.Value:
        (size, stride, dilation), low = geometry
        q = arith.subi(arith.addi(loop_index(axis), arith.muli(loop_index(tap), index(dilation))), index(low))
        last = arith.muli(arith.subi(as_index(size), index(1)), index(stride))
        inside = arith.andi(arith.cmpi(arith.CmpIPredicate.sge, q, index(0)),
                            arith.cmpi(arith.CmpIPredicate.sle, q, last))
        on_grid = arith.cmpi(arith.CmpIPredicate.eq, arith.remsi(q, index(stride)), index(0))
        return arith.andi(inside, on_grid)

    def body(xv, wv, acc):
        take = arith.andi(on_data(3, 6, taps[0]), on_data(4, 7, taps[1]))
        product = arith.mulf(convert(xv, acc_t), convert(wv, acc_t))
        return arith.addf(acc, arith.select(take, product, scalar(0, acc_t)))

    (out,) = generic([x, wt], [filled(sizes, acc_t, 0)], [x_map, w_map, amap(loops, [0, 1, 2, 3, 4])],
                     ["parallel"] * 5 + ["reduction"] * 3, body)
    return out


# --- pad -------------------------------------------------------------------------------------------------------
def pad_constant(lc, op):
    """``relax.nn.pad`` in constant mode: one ``tensor.pad`` (``pad_value`` truncated for integer data, as
    NumPy's cast does)."""
    x, width = lc.inputs[0], lc.attrs["pad_width"]
    rank = x.type.rank
    return pad(x, [width[2 * a] for a in range(rank)], [width[2 * a + 1] for a in range(rank)], lc.attrs["pad_value"])
