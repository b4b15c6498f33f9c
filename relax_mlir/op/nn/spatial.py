"""Spatial ops of real models, with TVM's names and attributes: ``nn.pad`` (constant mode; lowered to a fill and
an insert), and the composites ``nn.conv1d`` (a conv2d over a height of 1), ``nn.adaptive_avg_pool2d``
(averaging matrices contracted with an einsum) and ``nn.pixel_shuffle`` (reshape, permute, reshape). The
composites' gradients are their decompositions' (``grad_utils.through_decomposition``)."""

from __future__ import annotations

import numpy as np

from ... import op
from ...ir import sym
from ...ir.dtype import compute_dtype, is_float
from ...ir.expr import Call, Expr, const
from ...ir.struct_info import TensorStructInfo
from ..common import fmt, int_tuple, is_int_value, require_ndim
from ..grad_utils import SLICE_END, rank_of, shape_of, sinfo_of, tensor_rule, through_decomposition
from ..registry import REQUIRED, BadSample, Op, Sample, fail, register
from .conv import conv2d

_T = TensorStructInfo
_F64 = np.float64


# -- pad ----------------------------------------------------------------------------------------------------

def _pad_canon(attrs: dict) -> dict:
    width = attrs["pad_width"]
    if isinstance(width, tuple) and width and all(isinstance(p, tuple) for p in width):
        width = tuple(v for p in width for v in p)  # ((before, after), ...) as TVM's docstring writes it
    return dict(attrs, pad_width=int_tuple(width, "pad_width"))


def _pad_check(attrs: dict) -> None:
    if attrs["pad_mode"] != "constant":
        fail(f"only pad_mode 'constant' is supported, got {attrs['pad_mode']!r}")
    if any(p < 0 for p in attrs["pad_width"]):
        fail(f"pad_width {attrs['pad_width']} must not be negative")
    v = attrs["pad_value"]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        fail(f"pad_value must be a number, got {v!r}")


def _pairs(width: tuple, ndim: int) -> list[tuple[int, int]]:
    if len(width) != 2 * ndim:
        fail(f"pad_width must hold 2 values (before, after) per axis: {2 * ndim} for rank {ndim}, got {len(width)}")
    return [(width[2 * i], width[2 * i + 1]) for i in range(ndim)]


def _pad_infer(args, attrs):
    (x,) = args
    if x.ndim == -1:
        return x
    pairs = _pairs(attrs["pad_width"], x.ndim)
    if x.shape is None:
        return x
    return _T(tuple(d + b + a for d, (b, a) in zip(x.shape, pairs)), x.dtype)


def _pad_ref(data, pad_width, pad_mode, pad_value):
    return np.pad(data, _pairs(pad_width, data.ndim), constant_values=pad_value).astype(data.dtype)


def _pad_grad(x: Expr, g: Expr, call: Call) -> Expr:
    """The interior of the adjoint: a slice from ``before`` to ``-after`` on every axis."""
    pairs = _pairs(call.attrs["pad_width"], rank_of(x, "relax.nn.pad gradient"))
    axes = tuple(range(len(pairs)))
    return op.strided_slice(g, axes, tuple(b for b, _ in pairs), tuple(-a if a else SLICE_END for _, a in pairs))


pad = register(Op(
    name="relax.nn.pad", unsigned="agnostic", lowering="nn:pad_constant", inputs=("data",),
    attrs={"pad_width": REQUIRED, "pad_mode": "constant", "pad_value": 0.0}, infer=_pad_infer,
    canonicalize=_pad_canon, check_attrs=_pad_check, reference=_pad_ref, gradient=tensor_rule(_pad_grad),
    samples=[Sample([_T((2, 3), "float32")], {"pad_width": (1, 2, 0, 1)}),
             Sample([_T(("n", 3, 4), "float64")], {"pad_width": ((0, 0), (1, 1), (2, 0)), "pad_value": -1.5}),
             Sample([_T((2, 2), "int32")], {"pad_width": (1, 1, 1, 1), "pad_value": 7}, low=-5, high=5),
             Sample([_T((3,), "float16")], {"pad_width": (0, 0)})],
    bad_samples=[BadSample([_T((2, 3), "float32")], {"pad_width": (1, 1)}, r"2 values \(before, after\) per axis: 4"),
                 BadSample([_T((2, 3), "float32")], {"pad_width": (1, 1, 0, 0), "pad_mode": "reflect"},
                           r"only pad_mode 'constant' is supported"),
                 BadSample([_T((2, 3), "float32")], {"pad_width": (-1, 1, 0, 0)}, r"must not be negative"),
                 BadSample([_T((2, 3), "float32")], {"pad_width": (1, 1, 0, 0), "pad_value": "x"},
                           r"pad_value must be a number")],
    doc="Pad every axis with ``pad_value`` (TVM's ``nn.pad(data, pad_width, pad_mode='constant', pad_value=0.0)``): "
        "``pad_width`` is ``(before_0, after_0, before_1, after_1, ...)`` (the nested ``((before, after), ...)`` is "
        "accepted and stored flat). Only the constant mode is supported. Gradient: the adjoint's interior."))


# -- conv1d -------------------------------------------------------------------------------------------------

def _conv1d_canon(attrs: dict) -> dict:
    out = dict(attrs)
    for key in ("strides", "dilation"):
        out[key] = int_tuple(attrs[key], key)
    padding = int_tuple(attrs["padding"], "padding")
    out["padding"] = padding * 2 if len(padding) == 1 else padding
    return out


def _conv1d_check(attrs: dict) -> None:
    for key, n in (("strides", 1), ("dilation", 1), ("padding", 2)):
        if len(attrs[key]) != n:
            fail(f"{key} must be an int or a tuple of {n} int(s), got {attrs[key]}")
    for key, want in (("data_layout", "NCW"), ("kernel_layout", "OIW"), ("out_layout", "NCW")):
        allowed = (want, None) if key == "out_layout" else (want,)
        if attrs[key] not in allowed:
            fail(f"only {key} {want!r} is supported, got {attrs[key]!r}")


def _as_conv2d_attrs(attrs: dict) -> dict:
    """conv1d's attributes for the conv2d over a height of 1 that computes it."""
    (left, right), (s,), (d,) = attrs["padding"], attrs["strides"], attrs["dilation"]
    return conv2d.complete_attrs({"strides": (1, s), "padding": (0, left, 0, right), "dilation": (1, d),
                                  "groups": attrs["groups"], "out_dtype": attrs["out_dtype"]})


def _with_height_1(s: TensorStructInfo) -> TensorStructInfo:
    """conv1d's ``(N, C, W)`` struct info as the conv2d's ``(N, C, 1, W)``."""
    return _T(None if s.shape is None else s.shape[:2] + (1,) + s.shape[2:], s.dtype, 4)


def _conv1d_infer(args, attrs):
    data, weight = args
    require_ndim(data, 3, "data")
    require_ndim(weight, 3, "weight")
    out = conv2d.infer([_with_height_1(data), _with_height_1(weight)], _as_conv2d_attrs(attrs))
    return _T(None if out.shape is None else out.shape[:2] + out.shape[3:], out.dtype, 3)


def _conv1d_ref(data, weight, *, strides, padding, dilation, groups, out_dtype, **layouts):
    two_d = conv2d.reference(data[:, :, None, :], weight[:, :, None, :],
                             **_as_conv2d_attrs({"strides": strides, "padding": padding, "dilation": dilation,
                                                 "groups": groups, "out_dtype": out_dtype}))
    return two_d[:, :, 0, :]


def _conv1d_decompose(call: Call) -> Expr:
    """``squeeze(conv2d(expand_dims(data, 2), expand_dims(weight, 2)), 2)``."""
    data, weight = (op.expand_dims(a, (2,)) for a in call.args)
    return op.squeeze(conv2d(data, weight, **_as_conv2d_attrs(call.attrs)), (2,))


conv1d = register(Op(
    name="relax.nn.conv1d", inputs=("data", "weight"), infer=_conv1d_infer, reference=_conv1d_ref,
    attrs={"strides": (1,), "padding": (0, 0), "dilation": (1,), "groups": 1, "data_layout": "NCW",
           "kernel_layout": "OIW", "out_layout": None, "out_dtype": None},
    canonicalize=_conv1d_canon, check_attrs=_conv1d_check, gradient=through_decomposition, decompose=_conv1d_decompose,
    samples=[Sample([_T((2, 3, 9), "float32"), _T((4, 3, 3), "float32")]),
             Sample([_T(("n", 4, 11), "float64"), _T((6, 2, 3), "float64")],
                    {"strides": 2, "padding": (1, 2), "dilation": 2, "groups": 2}),
             Sample([_T((1, 2, 5), "float32"), _T((2, 2, 2), "float32")], {"padding": 1}),
             Sample([_T((1, 2, 6), "float16"), _T((3, 2, 1), "float16")])],
    bad_samples=[BadSample([_T((2, 3, 9), "float32"), _T((4, 2, 3), "float32")], {},
                           r"data has 3 channels but weight expects 2"),
                 BadSample([_T((2, 3, 9, 9), "float32"), _T((4, 3, 3), "float32")], {}, r"data must have rank 3"),
                 BadSample([_T((2, 3, 9), "float32"), _T((4, 3, 3), "float32")], {"data_layout": "NWC"},
                           r"only data_layout 'NCW' is supported"),
                 BadSample([_T((2, 3, 9), "float32"), _T((4, 3, 3), "float32")], {"strides": (1, 2)},
                           r"strides must be an int or a tuple of 1 int"),
                 BadSample([_T((2, 3, 2), "float32"), _T((4, 3, 3), "float32")], {},
                           r"width window \(extent 3\) is larger than the padded input \(2\)")],
    doc="1-D convolution (cross-correlation), NCW data and OIW weight (TVM's ``conv1d``): ``padding`` is "
        "``(left, right)`` (an int pads both sides). Composite: a conv2d over a height of 1; its gradient is the "
        "decomposition's."))


# -- adaptive_avg_pool2d --------------------------------------------------------------------------------------

def adaptive_canon(attrs: dict, rank: int = 2) -> dict:
    """An adaptive pool's ``output_size`` as one size per spatial axis (an int or a 1-tuple repeated)."""
    size = attrs["output_size"]
    if size is None:
        return attrs
    size = int_tuple(size, "output_size")
    return dict(attrs, output_size=size * rank if len(size) == 1 else size)


def adaptive_check(attrs: dict, layout: str = "NCHW") -> None:
    """``output_size`` None or one positive size per spatial axis of ``layout``, the only layout taken."""
    size, rank = attrs["output_size"], len(layout) - 2
    if size is not None and (len(size) != rank or any(s < 1 for s in size)):
        fail(f"output_size must be None, a positive int or a{' pair' if rank == 2 else ' triple'} of them, got {size}")
    if attrs["layout"] != layout or attrs["out_layout"] not in (None, layout):
        fail(f"only layout {layout!r} is supported, got layout {attrs['layout']!r}, out_layout {attrs['out_layout']!r}")


def _nchw(args) -> TensorStructInfo:
    """The one input, which must have rank 4 (NCHW)."""
    (x,) = args
    require_ndim(x, 4, "data")
    return x


def _adaptive_infer(args, attrs):
    """An input height or width may be symbolic (TVM's): the windows are then computed at run time. A static 0 with
    output cells to fill is refused; a symbolic one that is 0 at run time averages empty windows: NaN, as NumPy's
    mean of nothing (PyTorch refuses it)."""
    x = _nchw(args)
    if x.shape is None:
        return x
    oh, ow = attrs["output_size"] or x.shape[2:]
    for d, o, what in ((x.shape[2], oh, "height"), (x.shape[3], ow, "width")):
        if isinstance(d, int) and d == 0 and o != 0:
            fail(f"the input {what} is 0, so every window of the output's {what} {o} would be empty; expected a "
                 f"non-empty input (as PyTorch's), got shape {fmt(x.shape)}")
    return _T(x.shape[:2] + (oh, ow), x.dtype)


def _bins(size: int, out: int) -> list[tuple[int, int]]:
    """PyTorch's and TVM's adaptive windows: ``[floor(i * size / out), ceil((i + 1) * size / out))``."""
    return [((i * size) // out, -(-(i + 1) * size // out)) for i in range(out)]


def _adaptive_ref(data, output_size, layout, out_layout):
    n, c, h, w = data.shape
    oh, ow = output_size or (h, w)
    x, out = data.astype(_F64), np.zeros((n, c, oh, ow))
    for i, (h0, h1) in enumerate(_bins(h, oh)):
        for j, (w0, w1) in enumerate(_bins(w, ow)):
            window = x[:, :, h0:h1, w0:w1]  # (empty only where a symbolic input size is 0: NaN, without a warning)
            out[:, :, i, j] = window.mean(axis=(2, 3)) if window.shape[2] and window.shape[3] else np.nan
    return out.astype(data.dtype)


def _averaging(size: int, out: int, dtype: str) -> Expr:
    """The ``(out, size)`` matrix whose row ``i`` averages window ``i``."""
    m = np.zeros((out, size))
    for i, (a, b) in enumerate(_bins(size, out)):
        m[i, a:b] = 1.0 / (b - a)
    return const(m, dtype)


def _window_mask(size: sym.Dim, out: int, dtype: str) -> Expr:
    """The ``(out, size)`` 0/1 matrix whose row ``i`` is window ``i`` (:func:`_bins`), built at run time for a
    symbolic ``size``: element ``r`` is in window ``i`` iff ``i * size < (r + 1) * out`` and
    ``r * out < (i + 1) * size`` (the floor and the ceiling of the bounds, multiplied out)."""
    if isinstance(size, int):
        m = np.zeros((out, size))
        for i, (a, b) in enumerate(_bins(size, out)):
            m[i, a:b] = 1.0
        return const(m, dtype)
    i = op.expand_dims(op.arange(0, out), 1)  # (out, 1)
    r = op.arange(0, size)  # (size,)
    n = op.arange(size, size + 1)  # (1,): the size itself
    inside = op.logical_and(op.less(op.multiply(i, n), op.multiply(op.add(r, 1), out)),
                            op.less(op.multiply(r, out), op.multiply(op.add(i, 1), n)))
    return op.astype(inside, dtype)


def _masks(h: sym.Dim, w: sym.Dim, oh: int, ow: int, dtype: str) -> tuple[Expr, Expr, Expr, Expr]:
    """The windows' masks over the height and the width, and each window's length along them."""
    mh, mw = _window_mask(h, oh, dtype), _window_mask(w, ow, dtype)
    return mh, mw, op.sum(mh, axis=1), op.sum(mw, axis=1)


def _adaptive_at_run_time(x: Expr, h: sym.Dim, w: sym.Dim, oh: int, ow: int, dtype: str) -> Expr:
    """Over a symbolic height or width: the einsum with the averaging matrices built at run time (each mask's rows
    divided by their counts, the same numbers as the constants' for the same sizes), times ``area / area``: 1, or
    NaN (0 / 0) for an input that is empty at run time, NumPy's mean of nothing."""
    mh, mw, ch, cw = _masks(h, w, oh, ow, dtype)
    ah, aw = op.divide(mh, op.expand_dims(ch, 1)), op.divide(mw, op.expand_dims(cw, 1))
    area = op.multiply(op.expand_dims(ch, 1), cw)
    return op.multiply(op.einsum([ah, x, aw], "ih,nchw,jw->ncij"), op.divide(area, area))


def _adaptive_exact(x: Expr, h: sym.Dim, w: sym.Dim, oh: int, ow: int, dtype: str) -> Expr:
    """Integer data: each window's sum in float64 (exact below 2**53) divided by its area, NumPy's mean, then cast
    back, truncated toward zero as the reference's ``astype`` (weights of 1/3 summed fall below a whole mean
    of 7 and truncate it to 6)."""
    mh, mw, ch, cw = _masks(h, w, oh, ow, "float64")
    sums = op.einsum([mh, op.astype(x, "float64"), mw], "ih,nchw,jw->ncij")
    return op.astype(op.divide(sums, op.multiply(op.expand_dims(ch, 1), cw)), dtype)


def _adaptive_decompose(call: Call) -> Expr:
    """``einsum('ih,nchw,jw->ncij', A_h, x, A_w)`` with the averaging matrices as constants; over a symbolic height or
    width, :func:`_adaptive_at_run_time`; integer data, :func:`_adaptive_exact`. ``output_size`` None keeps every
    cell: the data itself. Half-precision data is averaged in float32 and rounded once: weights such as 1/3 rounded
    to bfloat16 (0.33398) made a mean of nine 3.0s 3.0156."""
    x = call.args[0]
    if call.attrs["output_size"] is None:
        return x
    n, c, h, w = shape_of(x, f"{call.op.name} decomposition")
    oh, ow = call.attrs["output_size"]
    dtype = sinfo_of(x).dtype
    if not is_float(dtype):
        return _adaptive_exact(x, h, w, oh, ow, dtype)
    wide = compute_dtype(dtype)
    data = x if wide == dtype else op.astype(x, wide)
    if isinstance(h, int) and isinstance(w, int):
        out = op.einsum([_averaging(h, oh, wide), data, _averaging(w, ow, wide)], "ih,nchw,jw->ncij")
    else:
        out = _adaptive_at_run_time(data, h, w, oh, ow, wide)
    return out if wide == dtype else op.astype(out, dtype)


adaptive_avg_pool2d = register(Op(
    name="relax.nn.adaptive_avg_pool2d", inputs=("data",),
    attrs={"output_size": None, "layout": "NCHW", "out_layout": None}, infer=_adaptive_infer,
    canonicalize=adaptive_canon, check_attrs=adaptive_check, reference=_adaptive_ref,
    gradient=through_decomposition, decompose=_adaptive_decompose,
    samples=[Sample([_T((2, 3, 6, 6), "float32")], {"output_size": 1}),
             Sample([_T(("n", 2, 7, 5), "float64")], {"output_size": (3, 2)}),
             Sample([_T((1, 2, 4, 4), "float32")]),
             Sample([_T((1, 1, 5, 7), "float16")], {"output_size": (2, 3)}),
             Sample([_T((2, 3, "h", "w"), "float32")], {"output_size": (2, 3)}, sizes={"h": 5, "w": 7}),
             Sample([_T((1, 2, "h", 4), "float64")], {"output_size": 3}, sizes={"h": 2}),
             Sample([_T(("n", 2, "h", "w"), "float32")], sizes={"n": 2, "h": 3, "w": 2}),
             Sample([_T((1, 2, 5, 3), "int32")], {"output_size": (2, 2)}, low=-50, high=50),
             Sample([_T((2, 1, "h", 6), "int64")], {"output_size": (3, 4)}, low=-50, high=50, sizes={"h": 7})],
    bad_samples=[BadSample([_T((2, 3, 6), "float32")], {}, r"data must have rank 4"),
                 BadSample([_T((1, 3, 0, 0), "float32")], {"output_size": (2, 2)}, r"the input height is 0, so every "
                           r"window of the output's height 2 would be empty"),
                 BadSample([_T((2, 3, 6, 6), "float32")], {"output_size": (1, 2, 3)}, r"output_size must be None"),
                 BadSample([_T((2, 6, 6, 3), "float32")], {"layout": "NHWC"}, r"only layout 'NCHW' is supported")],
    doc="Adaptive average pooling, NCHW (TVM's ``adaptive_avg_pool2d(data, output_size=None)``): output cell "
        "``(i, j)`` averages rows ``[floor(i*H/oh), ceil((i+1)*H/oh))`` and the columns likewise; ``output_size`` "
        "``None`` keeps the input's size. Over a symbolic height or width the windows are computed at run time "
        "(an empty input averages to NaN). Composite: an einsum with averaging matrices; its gradient is the "
        "decomposition's."))


# -- pixel_shuffle --------------------------------------------------------------------------------------------

def _shuffle_check(attrs: dict) -> None:
    if not is_int_value(attrs["upscale_factor"]) or attrs["upscale_factor"] < 1:
        fail(f"upscale_factor must be a positive int, got {attrs['upscale_factor']!r}")


def _shuffle_infer(args, attrs):
    x = _nchw(args)
    if x.shape is None:
        return x
    r = attrs["upscale_factor"]
    n, c, h, w = x.shape
    channels = sym.exact_div(c, r * r) if not isinstance(c, int) else (c // (r * r) if c % (r * r) == 0 else None)
    if channels is None:
        fail(f"the channels ({sym.format_dim(c)}) of data {fmt(x.shape)} must be divisible by upscale_factor ** 2 "
             f"= {r * r}")
    return _T((n, channels, h * r, w * r), x.dtype)


def _shuffle_ref(data, upscale_factor):
    r = upscale_factor
    n, c, h, w = data.shape
    out = np.empty((n, c // (r * r), h * r, w * r), data.dtype)
    for i in range(r):
        for j in range(r):  # out[n, c, y*r + i, x*r + j] = data[n, c*r*r + i*r + j, y, x]
            out[:, :, i::r, j::r] = data[:, i * r + j::r * r]
    return out


def _shuffle_decompose(call: Call) -> Expr:
    """``reshape`` to ``(N, C, r, r, H, W)``, ``permute_dims`` to ``(N, C, H, r, W, r)``, ``reshape``."""
    x, r = call.args[0], call.attrs["upscale_factor"]
    n, c, h, w = shape_of(x, f"{call.op.name} decomposition")
    channels = sinfo_of(call).shape[1]
    split = op.reshape(x, (n, channels, r, r, h, w))
    return op.reshape(op.permute_dims(split, (0, 1, 4, 2, 5, 3)), (n, channels, h * r, w * r))


pixel_shuffle = register(Op(
    name="relax.nn.pixel_shuffle", inputs=("data",), attrs={"upscale_factor": REQUIRED}, infer=_shuffle_infer,
    check_attrs=_shuffle_check, reference=_shuffle_ref, gradient=through_decomposition, decompose=_shuffle_decompose,
    samples=[Sample([_T((1, 8, 3, 5), "float32")], {"upscale_factor": 2}),
             Sample([_T(("n", 9, 2, 2), "float64")], {"upscale_factor": 3}),
             Sample([_T((2, 3, 2, 2), "int32")], {"upscale_factor": 1}, low=-5, high=5)],
    bad_samples=[BadSample([_T((1, 6, 3, 5), "float32")], {"upscale_factor": 2},
                           r"channels \(6\) .* must be divisible by upscale_factor \*\* 2 = 4"),
                 BadSample([_T((1, 8, 3), "float32")], {"upscale_factor": 2}, r"data must have rank 4"),
                 BadSample([_T((1, 8, 3, 5), "float32")], {"upscale_factor": 0}, r"upscale_factor must be a positive")],
    doc="Pixel shuffle (TVM's and PyTorch's): ``(N, C*r*r, H, W)`` to ``(N, C, H*r, W*r)`` with "
        "``out[n, c, y*r + i, x*r + j] = data[n, c*r*r + i*r + j, y, x]``. Composite: reshape, permute_dims, "
        "reshape; its gradient is the decomposition's."))
