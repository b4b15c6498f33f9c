"""3-D pooling (``relax.nn.max_pool3d``, ``avg_pool3d``, ``adaptive_avg_pool3d``), NCDHW, TVM's names, attributes
and defaults (``avg_pool3d`` counts the padding by default, as TVM's and PyTorch's do; the 2-D one does not).

All three are composites of the 2-D poolings, whose lowerings and backward ops they inherit
(``through_decomposition``). A box window is the product of its axes' windows (padding, dilation and
``ceil_mode`` are each axis' own), so a 3-D pool is a 2-D pool over (H, W) on the ``(N, C*D, H, W)`` view, then
one over D with a ``(kD, 1)`` window on the ``(N, C, D, OH*OW)`` view: its max is the max over depth of the
maxes over rows, an average's divisor (with or without padding, in ceil mode too) the product of the axes'
counts. (H, W) go first so that a max's gradient at a tie goes to the box's first maximum in row-major (d, h, w)
order, as PyTorch's: the depth pool picks the first plane holding the maximum, the plane's pool its first
position there.
"""

from __future__ import annotations

import numpy as np

from ... import op
from ...ir.dtype import compute_dtype, from_numpy, is_bool, is_float
from ...ir.expr import Call, Expr
from ...ir.struct_info import TensorStructInfo
from ..common import check_bool, fmt, require_float, require_ndim
from ..grad_utils import shape_of, sinfo_of, through_decomposition
from ..registry import BadSample, Op, Sample, fail, register
from .conv import _out_dim, avg_pool2d, max_pool2d
from .spatial import adaptive_canon, adaptive_check
from .conv3d import _padding3, _triple
from .spatial import _bins, adaptive_avg_pool2d

_T = TensorStructInfo
_F64 = np.float64
_AXES = ("depth", "height", "width")


# -- max_pool3d, avg_pool3d ----------------------------------------------------------------------------------------

def _pool_canon(attrs: dict) -> dict:
    attrs = dict(attrs, pool_size=_triple(attrs["pool_size"], "pool_size"),
                 strides=_triple(attrs["strides"], "strides"), padding=_padding3(attrs["padding"]),
                 dilation=_triple(attrs["dilation"], "dilation"))
    if attrs["out_layout"] is None:
        attrs["out_layout"] = attrs["layout"]
    for key in ("layout", "out_layout"):
        if attrs[key] != "NCDHW":
            fail(f"only {key} 'NCDHW' is supported, got {attrs[key]!r}")
    check_bool(attrs, "ceil_mode", "count_include_pad")
    return attrs  # (any padding, as TVM's and the 2-D pools: a window wholly in it gives -inf or 0)


def _pool_out(shape: tuple, attrs: dict):
    """The output's (D, H, W), or None where ``ceil_mode`` would need a comparison of symbolic sizes."""
    p = attrs["padding"]
    out = tuple(_out_dim(shape[2 + a], p[a], p[3 + a], attrs["pool_size"][a], attrs["strides"][a],
                         attrs["dilation"][a], attrs["ceil_mode"], _AXES[a]) for a in range(3))
    return None if None in out else out


def _pool_infer(float_only: bool):
    def infer(args, attrs):
        (data,) = args
        require_ndim(data, 5, "data")
        if float_only:
            require_float(data, "data")
        elif is_bool(data.dtype):
            fail("data must be numeric, got bool")
        if data.shape is None:
            return _T(None, data.dtype, 5)
        out = _pool_out(data.shape, attrs)
        return _T(None, data.dtype, 5) if out is None else _T(tuple(data.shape[:2]) + out, data.dtype)
    return infer


def _windows(x: np.ndarray, attrs: dict, fill, pad_fill=None) -> np.ndarray:
    """The windows of ``x`` padded with ``pad_fill`` (default ``fill``), plus ``fill`` past the end padding where a
    ceil-mode window overhangs it: shape (KD*KH*KW, N, C, OD, OH, OW)."""
    p, k, s, d = attrs["padding"], attrs["pool_size"], attrs["strides"], attrs["dilation"]
    out = _pool_out(x.shape, attrs)
    extra = [max(0, s[a] * (out[a] - 1) + d[a] * (k[a] - 1) + 1 - (x.shape[2 + a] + p[a] + p[3 + a]))
             for a in range(3)]
    x = np.pad(x, ((0, 0), (0, 0)) + tuple((p[a], p[3 + a]) for a in range(3)),
               constant_values=fill if pad_fill is None else pad_fill)
    x = np.pad(x, ((0, 0), (0, 0)) + tuple((0, e) for e in extra), constant_values=fill)
    return np.stack([x[:, :, i * d[0]:i * d[0] + s[0] * (out[0] - 1) + 1:s[0],
                       j * d[1]:j * d[1] + s[1] * (out[1] - 1) + 1:s[1],
                       m * d[2]:m * d[2] + s[2] * (out[2] - 1) + 1:s[2]]
                     for i in range(k[0]) for j in range(k[1]) for m in range(k[2])])


def _max_ref(data, **attrs):
    lowest = -np.inf if is_float(from_numpy(data.dtype)) else np.iinfo(data.dtype).min
    return _windows(data, attrs, lowest).max(axis=0).astype(data.dtype)


def _avg_ref(data, **attrs):
    total = _windows(data.astype(_F64), attrs, 0.0).sum(axis=0)
    # Count the window positions on the input (and on the padding with count_include_pad), never past it.
    ones = np.ones((1, 1) + data.shape[2:])
    count = _windows(ones, attrs, 0.0, 1.0 if attrs["count_include_pad"] else 0.0).sum(axis=0)
    return (total / np.maximum(count, 1.0)).astype(data.dtype)  # (0 in a window wholly in the padding)


def _pool_decompose(call: Call) -> Expr:
    """A 2-D pool over (H, W) on the ``(N, C*D, H, W)`` view, then one over D with a ``(kD, 1)`` window on the
    ``(N, C, D, OH*OW)`` view (each skipped where its window is a single, unpadded, unstrided element)."""
    pool2d = max_pool2d if call.op.name == "relax.nn.max_pool3d" else avg_pool2d
    a = call.attrs
    x = call.args[0]
    n, c, d, h, w = shape_of(x, f"{call.op.name} decomposition")
    out = sinfo_of(call).shape
    if out is None:
        fail(f"the decomposition needs a known output shape, got {sinfo_of(call)} (ceil_mode over symbolic sizes)")
    od, oh, ow = out[2:]
    (kd, kh, kw), (sd, sh, sw), (dd, dh, dw) = a["pool_size"], a["strides"], a["dilation"]
    front, top, left, back, bottom, right = a["padding"]
    options = dict(ceil_mode=a["ceil_mode"], count_include_pad=a["count_include_pad"])
    if (kh, kw, sh, sw, top, left, bottom, right) != (1, 1, 1, 1, 0, 0, 0, 0):
        y = pool2d(op.reshape(x, (n, c * d, h, w)), pool_size=(kh, kw), strides=(sh, sw),
                   padding=(top, left, bottom, right), dilation=(dh, dw), **options)
        x = op.reshape(y, (n, c, d, oh, ow))
    if (kd, sd, front, back) != (1, 1, 0, 0):
        y = pool2d(op.reshape(x, (n, c, d, oh * ow)), pool_size=(kd, 1), strides=(sd, 1),
                   padding=(front, 0, back, 0), dilation=(dd, 1), **options)
        x = op.reshape(y, (n, c, od, oh, ow))
    return x


def _pool_attrs(count_include_pad: bool) -> dict:
    return {"pool_size": (1, 1, 1), "strides": (1, 1, 1), "padding": (0, 0, 0, 0, 0, 0), "dilation": (1, 1, 1),
            "ceil_mode": False, "count_include_pad": count_include_pad, "layout": "NCDHW", "out_layout": None}


def _pool_samples(dtypes: tuple[str, str, str], avg: bool) -> list[Sample]:
    out = [Sample([_T((2, 3, 4, 6, 6), dtypes[0])], {"pool_size": 2, "strides": 2}),
           Sample([_T(("n", 2, 5, 7, 6), dtypes[0])],
                  {"pool_size": (3, 3, 2), "strides": (2, 2, 1), "padding": (1, 1, 0, 0, 0, 1)}),
           Sample([_T((1, 2, 5, 5, 4), dtypes[1])], {"pool_size": 2, "strides": 3, "padding": 1, "ceil_mode": True}),
           Sample([_T((1, 1, 6, 4, 7), dtypes[0])], {"pool_size": 3, "strides": 2, "padding": 1, "ceil_mode": True,
                                                      "count_include_pad": True}),
           Sample([_T((1, 2, 7, 5, 5), dtypes[0])], {"pool_size": (2, 1, 2), "dilation": (2, 1, 2), "strides": 2}),
           Sample([_T(("n", "c", 3, "h", "w"), dtypes[0])], {"pool_size": 3, "padding": 1}),
           Sample([_T((2, 1, 4, 4, 4), dtypes[2])], {"pool_size": 2, "strides": 2}, low=-9, high=9)]
    if avg:
        out.append(Sample([_T((1, 2, 5, 5, 5), "float32")], {"pool_size": 3, "strides": 2, "padding": 1,
                                                              "count_include_pad": False}))
    return out


def _pool_bad(avg: bool) -> list[BadSample]:
    x = [_T((1, 2, 4, 6, 6), "float32")]
    return [BadSample([_T((1, 2, 6, 6), "float32")], {"pool_size": 2}, r"data must have rank 5"),
            BadSample(x, {"pool_size": (2, 2)}, r"pool_size must be an int or a tuple of 1 or 3 ints"),
            BadSample(x, {"pool_size": 5}, r"depth window \(extent 5\) is larger than the padded input \(4\)"),
            BadSample(x, {"layout": "NDHWC"}, r"only layout 'NCDHW' is supported, got 'NDHWC'"),
            BadSample(x, {"ceil_mode": 1}, r"'ceil_mode' must be a bool"),
            BadSample([_T((1, 2, 4, 6, 6), "int32" if avg else "bool")], {"pool_size": 2},
                      r"data must have a float dtype, got int32" if avg else r"data must be numeric, got bool")]


_POOL_DOC = ("3-D {kind} pooling, NCDHW (TVM's ``{name}``). ``padding`` is ``(front, top, left, back, bottom, "
             "right)`` (``p`` and ``(d, h, w)`` accepted and stored as 6 values), any size, as TVM's: a window "
             "wholly in it gives -inf (max) or 0 (average), and the gradient is refused; ``pool_size``, ``strides`` "
             "and ``dilation`` are stored as triples. ``out = (in + pads - dilation * (k - 1) - 1) // stride + 1`` "
             "per axis, rounded up with ``ceil_mode``, where a last window "
             "starting in the end padding is dropped (PyTorch). {extra} Composite: a 2-D pool over (H, W), then one "
             "over D; its gradient is the decomposition's.")

max_pool3d = register(Op(
    name="relax.nn.max_pool3d", inputs=("data",), attrs=_pool_attrs(False), infer=_pool_infer(False),
    canonicalize=_pool_canon, reference=_max_ref, gradient=through_decomposition, decompose=_pool_decompose,
    samples=_pool_samples(("float32", "float64", "int32"), avg=False), bad_samples=_pool_bad(avg=False),
    doc=_POOL_DOC.format(kind="max", name="max_pool3d", extra="Padding never wins the max (``count_include_pad`` "
                         "changes nothing). Integer data allowed. A window's gradient goes to its first maximum in "
                         "row-major (d, h, w) order, as PyTorch's.")))

avg_pool3d = register(Op(
    name="relax.nn.avg_pool3d", inputs=("data",), attrs=_pool_attrs(True), infer=_pool_infer(True),
    canonicalize=_pool_canon, reference=_avg_ref, gradient=through_decomposition, decompose=_pool_decompose,
    samples=_pool_samples(("float32", "float16", "float64"), avg=True), bad_samples=_pool_bad(avg=True),
    doc=_POOL_DOC.format(kind="average", name="avg_pool3d", extra="The divisor counts the window's positions on "
                         "the input, plus those on the padding with ``count_include_pad`` (True by default, as "
                         "TVM's ``avg_pool3d``; never those past it in ceil mode). Float only.")))


# -- adaptive_avg_pool3d -------------------------------------------------------------------------------------------

def _adaptive_infer(args, attrs):
    (x,) = args
    require_ndim(x, 5, "data")
    require_float(x, "data")
    if x.shape is None:
        return x
    out = attrs["output_size"] or tuple(x.shape[2:])
    for a in range(3):
        if isinstance(x.shape[2 + a], int) and x.shape[2 + a] == 0 and out[a] != 0:
            fail(f"the input {_AXES[a]} is 0, so every window of the output's {_AXES[a]} {out[a]} would be empty; "
                 f"expected a non-empty input (as PyTorch's), got shape {fmt(x.shape)}")
    return _T(tuple(x.shape[:2]) + tuple(out), x.dtype)


def _adaptive_ref(data, output_size, layout, out_layout):
    n, c, d, h, w = data.shape
    od, oh, ow = output_size or (d, h, w)
    x, out = data.astype(_F64), np.zeros((n, c, od, oh, ow))
    for i, (d0, d1) in enumerate(_bins(d, od)):
        for j, (h0, h1) in enumerate(_bins(h, oh)):
            for k, (w0, w1) in enumerate(_bins(w, ow)):
                window = x[:, :, d0:d1, h0:h1, w0:w1]
                out[:, :, i, j, k] = window.mean(axis=(2, 3, 4)) if window.size else np.nan
    return out.astype(data.dtype)


def _adaptive_decompose(call: Call) -> Expr:
    """adaptive_avg_pool2d over (H, W) on the ``(N, C*D, H, W)`` view, then over D on a ``(N, C*M, D, 1)`` view
    (``M = OH*OW``; a permutation brings D next to it unless ``M`` is 1), in the compute dtype (float32 for half
    floats, rounded once at the end)."""
    x = call.args[0]
    if call.attrs["output_size"] is None:
        return x
    n, c, d, h, w = shape_of(x, f"{call.op.name} decomposition")
    od, oh, ow = call.attrs["output_size"]
    dtype = sinfo_of(x).dtype
    wide = compute_dtype(dtype)
    y = x if wide == dtype else op.astype(x, wide)
    y = op.reshape(adaptive_avg_pool2d(op.reshape(y, (n, c * d, h, w)), output_size=(oh, ow)), (n, c, d, oh * ow))
    if oh * ow == 1:
        y = op.reshape(adaptive_avg_pool2d(op.reshape(y, (n, c, d, 1)), output_size=(od, 1)), (n, c, od, oh, ow))
    else:
        cols = op.reshape(op.permute_dims(y, (0, 1, 3, 2)), (n, c * oh * ow, d, 1))
        y = op.reshape(adaptive_avg_pool2d(cols, output_size=(od, 1)), (n, c, oh * ow, od))
        y = op.reshape(op.permute_dims(y, (0, 1, 3, 2)), (n, c, od, oh, ow))
    return y if wide == dtype else op.astype(y, dtype)


adaptive_avg_pool3d = register(Op(
    name="relax.nn.adaptive_avg_pool3d", inputs=("data",),
    attrs={"output_size": None, "layout": "NCDHW", "out_layout": None}, infer=_adaptive_infer,
    canonicalize=lambda attrs: adaptive_canon(attrs, 3), check_attrs=lambda attrs: adaptive_check(attrs, "NCDHW"),
    reference=_adaptive_ref,
    gradient=through_decomposition, decompose=_adaptive_decompose,
    samples=[Sample([_T((2, 3, 4, 6, 6), "float32")], {"output_size": 1}),
             Sample([_T(("n", 2, 5, 7, 5), "float64")], {"output_size": (2, 3, 2)}),
             Sample([_T((1, 2, 3, 4, 4), "float32")]),
             Sample([_T((1, 1, 3, 5, 7), "float16")], {"output_size": (2, 2, 3)}),
             Sample([_T((2, 3, "b", "h", "w"), "float32")], {"output_size": (3, 2, 3)})],
    bad_samples=[BadSample([_T((2, 3, 6, 6), "float32")], {}, r"data must have rank 5"),
                 BadSample([_T((1, 3, 0, 2, 2), "float32")], {"output_size": (2, 2, 2)},
                           r"the input depth is 0, so every window of the output's depth 2 would be empty"),
                 BadSample([_T((2, 3, 4, 6, 6), "float32")], {"output_size": (1, 2)}, r"output_size must be None"),
                 BadSample([_T((2, 3, 4, 6, 6), "int32")], {"output_size": 2}, r"data must have a float dtype"),
                 BadSample([_T((2, 4, 6, 6, 3), "float32")], {"layout": "NDHWC"}, r"only layout 'NCDHW' is supported")],
    doc="Adaptive average pooling, NCDHW (TVM's ``adaptive_avg_pool3d(data, output_size=None)``): output cell "
        "``(i, j, k)`` averages depths ``[floor(i*D/od), ceil((i+1)*D/od))`` and the rows and columns likewise; "
        "``output_size`` ``None`` keeps the input's size. Float data only. Composite: adaptive_avg_pool2d over "
        "(H, W), then over D (half floats averaged in float32 and rounded once); its gradient is the "
        "decomposition's."))
