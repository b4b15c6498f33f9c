"""conv2d and 2-D pooling (``relax.nn.conv2d``, ``max_pool2d``, ``avg_pool2d``), NCHW or NHWC.

Window attributes are stored canonically, as TVM does (``padding=1`` is kept as ``(1, 1, 1, 1)``); pooling takes
any padding, as TVM, and follows PyTorch for ``ceil_mode``. References compute in float64 (int64 for integers).
Gradients: conv2d's data gradient is a ``conv2d_transpose``, its weight gradient a conv2d with the batch as
the reduced axis (:func:`conv2d_weight_grad`); pooling's are ``relax.grad.*_pool2d_backward`` (``relax_mlir.op.grad``).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ... import op
from ...ir.dtype import from_numpy, is_bool, is_float, to_numpy
from ...ir.expr import Expr
from ...ir.struct_info import TensorStructInfo
from ...ir import sym
from ...ir.sym import Dim
from ..common import (canonical_dtype, check_bool, check_dims_match, is_int_value, require_float, require_ndim,
                      require_same_dtype)
from ..grad_utils import expression_vjp, sinfo_of
from ..registry import BadSample, Op, Sample, fail, register
from .grad_helpers import known_shape
from .groups import never_divisible

_T = TensorStructInfo
_F64 = np.float64


def _window_tuple(value, what: str, lengths: tuple[int, ...], minimum: int) -> tuple[int, ...]:
    vals = (value,) if is_int_value(value) else value
    if not (isinstance(vals, tuple) and len(vals) in lengths and all(is_int_value(v) for v in vals)):
        counts = ", ".join(map(str, lengths[:-1])) + " or " * (len(lengths) > 1) + str(lengths[-1])
        fail(f"{what} must be an int or a tuple of {counts} ints, got {value!r}")
    if any(v < minimum for v in vals):
        fail(f"{what} must be {'positive' if minimum > 0 else 'non-negative'}, got {value!r}")
    return vals


def _pair(value, what: str) -> tuple[int, int]:
    vals = _window_tuple(value, what, (1, 2), 1)
    return vals * 2 if len(vals) == 1 else vals


def _padding(value) -> tuple[int, int, int, int]:
    """TVM's spellings: ``p`` or ``(p,)`` on all sides, ``(h, w)`` symmetric, or ``(top, left, bottom, right)``."""
    vals = _window_tuple(value, "padding", (1, 2, 4), 0)
    return vals * 4 if len(vals) == 1 else vals * 2 if len(vals) == 2 else vals


def _canonical_window(attrs: dict, layouts: dict[str, str]) -> dict:
    """Window attributes as stored; each layout of ``layouts`` must be the one given there."""
    return _canonical_layouts(attrs, {key: (want,) for key, want in layouts.items()})


def _canonical_layouts(attrs: dict, allowed: dict[str, tuple[str, ...]]) -> dict:
    """Window attributes as stored, ``out_layout`` (None: the data's) and the other layouts checked against
    ``allowed`` (the first key names the data's layout)."""
    attrs = dict(attrs, strides=_pair(attrs["strides"], "strides"), padding=_padding(attrs["padding"]),
                 dilation=_pair(attrs["dilation"], "dilation"))
    if attrs.get("out_layout", "") is None:
        attrs["out_layout"] = attrs[next(iter(allowed))]
    for key, ok in allowed.items():
        if attrs[key] not in ok:
            fail(f"only {key} {ok[0]!r} is supported, got {attrs[key]!r}" if len(ok) == 1 else
                 f"{key} must be one of {', '.join(repr(v) for v in ok)}, got {attrs[key]!r}")
    return attrs


# -- layouts: an array in a layout is the NCHW (OIHW) array with its axes permuted ----------------------------

#: The data layouts conv2d and the 2-D poolings take, as the permutation of NCHW's axes that gives them.
DATA_LAYOUTS = {"NCHW": (0, 1, 2, 3), "NHWC": (0, 2, 3, 1)}
#: conv2d's weight layouts, as the permutation of OIHW's axes that gives them.
KERNEL_LAYOUTS = {"OIHW": (0, 1, 2, 3), "OHWI": (0, 2, 3, 1), "HWIO": (2, 3, 1, 0)}


def inverse_permutation(perm: tuple[int, ...]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, a in enumerate(perm):
        inv[a] = i
    return tuple(inv)


def to_canonical_shape(shape: tuple, perm: tuple[int, ...]) -> tuple:
    """A shape given in a layout (``perm`` of the canonical axes) in the canonical order (NCHW, OIHW)."""
    return tuple(shape[i] for i in inverse_permutation(perm))


def from_canonical_shape(shape: tuple, perm: tuple[int, ...]) -> tuple:
    return tuple(shape[a] for a in perm)


def _identity(perm: tuple[int, ...]) -> bool:
    return perm == tuple(range(len(perm)))


def _permute(x: Expr, perm: tuple[int, ...]) -> Expr:
    return x if _identity(perm) else op.permute_dims(x, perm)


def _out_dim(size: Dim, before: int, after: int, kernel: Dim, stride: int, dilation: int, ceil: bool,
             where: str) -> Optional[Dim]:
    """Output length of a sliding window (PyTorch's rule; a floor quotient of a symbolic size), or ``None`` where
    ``ceil`` would need a comparison of symbolic sizes."""
    span = dilation * (kernel - 1) + 1
    num = size + before + after - span
    if isinstance(num, int):
        if num < 0 and not (ceil and num > -stride):  # ceil mode: it may hang past by less than a stride (PyTorch)
            fail(f"the {where} window (extent {span}) is larger than the padded input ({size + before + after})")
        q = -(-num // stride) if ceil else num // stride
    else:
        q = sym.floor_div(num + stride - 1 if ceil else num, stride)
    if ceil:
        # The last window starts at q * stride (padded coordinates); PyTorch drops it when that is at or past
        # the right padding, i.e. when q * stride >= size + before = num + span - after.
        # Symbolic: q * stride - num is in [0, stride), so that is always (gap <= 0) or never (gap >= stride).
        gap = span - after
        if not isinstance(gap, int) or (not isinstance(num, int) and 0 < gap < stride):
            return None
        if (q * stride - num >= gap) if isinstance(num, int) else gap <= 0:
            q = q - 1
    return q + 1


def _spatial_out(data: TensorStructInfo, kernel, attrs: dict, ceil: bool) -> Optional[tuple[Dim, Dim]]:
    pt, pl, pb, pr = attrs["padding"]
    (sh, sw), (dh, dw) = attrs["strides"], attrs["dilation"]
    oh = _out_dim(data.shape[2], pt, pb, kernel[0], sh, dh, ceil, "height")
    ow = _out_dim(data.shape[3], pl, pr, kernel[1], sw, dw, ceil, "width")
    return None if oh is None or ow is None else (oh, ow)


def _windows(x: np.ndarray, kernel, strides, dilation, out_hw) -> np.ndarray:
    """The strided slices of ``x`` (N, C, H, W) seen by each kernel offset: shape (KH, KW, N, C, OH, OW)."""
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, strides, dilation, out_hw
    return np.stack([np.stack([x[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
                               for j in range(kw)]) for i in range(kh)])


# conv2d ----------------------------------------------------------------------------------------------------

def _conv2d_canon(attrs: dict) -> dict:
    attrs = _canonical_layouts(attrs, {"data_layout": tuple(DATA_LAYOUTS), "kernel_layout": tuple(KERNEL_LAYOUTS),
                                       "out_layout": tuple(DATA_LAYOUTS)})
    if not is_int_value(attrs["groups"]) or attrs["groups"] < 1:
        fail(f"groups must be a positive int, got {attrs['groups']!r}")
    return canonical_dtype(attrs, "out_dtype")


def check_conv_operands(data, weight, attrs) -> str:
    """Rank-4 numeric ``data`` and ``weight`` of one dtype (conv2d and conv2d_transpose); the output dtype."""
    for s, what in ((data, "data"), (weight, "weight")):
        require_ndim(s, 4, what)
        if is_bool(s.dtype):
            fail(f"{what} must be numeric, got bool")
    require_same_dtype([data, weight], ["data", "weight"])
    return attrs["out_dtype"] or data.dtype


def _conv_layouts(attrs: dict) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The permutations of conv2d's data, weight and output layouts (identities for NCHW, OIHW)."""
    return (DATA_LAYOUTS[attrs["data_layout"]], KERNEL_LAYOUTS[attrs["kernel_layout"]],
            DATA_LAYOUTS[attrs["out_layout"] or attrs["data_layout"]])


def _conv2d_infer(args, attrs):
    data, weight = args
    out_dtype = check_conv_operands(data, weight, attrs)
    if data.shape is None or weight.shape is None:
        return _T(None, out_dtype, 4)
    dperm, kperm, operm = _conv_layouts(attrs)
    out = _conv2d_infer_nchw(_T(to_canonical_shape(data.shape, dperm), data.dtype),
                             to_canonical_shape(weight.shape, kperm), attrs, out_dtype)
    return out if out.shape is None else _T(from_canonical_shape(out.shape, operm), out_dtype)


def _conv2d_infer_nchw(data: TensorStructInfo, weight_shape: tuple, attrs: dict, out_dtype: str) -> TensorStructInfo:
    (n, c, _, _), (o, i, kh, kw), g = data.shape, weight_shape, attrs["groups"]
    check_dims_match(c, i * g, f"data has {c} channels but weight expects {i} per group x {g} group(s) = {i * g} "
                               "(data channels must equal weight.shape[1] * groups)")
    if never_divisible(o, g):  # (a symbolic count too, when no value of its sizes makes it divisible: 6 * k + 4)
        fail(f"the {o} output channels (weight.shape[0]) must be divisible by groups {g}")
    hw = _spatial_out(data, (kh, kw), attrs, ceil=False)
    return _T(None, out_dtype, 4) if hw is None else _T((n, o) + hw, out_dtype)


def _conv2d_ref(data, weight, **attrs):
    dperm, kperm, operm = _conv_layouts(attrs)
    out = _conv2d_ref_nchw(np.transpose(data, inverse_permutation(dperm)),
                           np.transpose(weight, inverse_permutation(kperm)), **attrs)
    return np.ascontiguousarray(np.transpose(out, operm))


def _conv2d_ref_nchw(data, weight, *, strides, padding, dilation, groups, out_dtype, **layouts):
    out_dt = to_numpy(out_dtype or from_numpy(data.dtype))
    acc = _F64 if is_float(from_numpy(data.dtype)) or is_float(from_numpy(out_dt)) else np.int64
    pt, pl, pb, pr = padding
    x = np.pad(data.astype(acc), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    (n, c, h, w), (o, _, kh, kw), g = data.shape, weight.shape, groups
    oh = _out_dim(h, pt, pb, kh, strides[0], dilation[0], False, "height")
    ow = _out_dim(w, pl, pr, kw, strides[1], dilation[1], False, "width")
    win = _windows(x, (kh, kw), strides, dilation, (oh, ow)).reshape(kh, kw, n, g, c // g, oh, ow)
    wgt = weight.astype(acc).reshape(g, o // g, c // g, kh, kw)
    return np.einsum("ijngchw,gocij->ngohw", win, wgt).reshape(n, o, oh, ow).astype(out_dt)


def conv2d_weight_grad(data: Expr, out_grad: Expr, weight: Expr, attrs: dict) -> Expr:
    """conv2d's weight gradient ``dW[o, c, i, j] = sum_{n,y,x} dY[n, o, y, x] * Xpad[n, c, y*s + i*d, x*s + j*d]``
    (within each group) as a conv2d: the batch becomes the reduced channel axis, ``out_grad`` the kernel, and
    strides and dilation swap roles. Windows past the kernel's reach (a stride that skips the last rows) are
    sliced off. With ``data`` and ``out_grad`` swapped it is conv2d_transpose's weight gradient too."""
    n, _, h, w = known_shape(data, "relax.nn.conv2d")
    oh, ow = known_shape(out_grad, "relax.nn.conv2d")[2:]
    wo, wc, kh, kw = known_shape(weight, "relax.nn.conv2d")
    g = attrs["groups"]
    if g == 1:
        x, k = op.permute_dims(data, (1, 0, 2, 3)), op.permute_dims(out_grad, (1, 0, 2, 3))
    else:  # data (N, G*Cg, H, W) -> (Cg, G*N, H, W); out_grad (N, G*Og, OH, OW) -> (G*Og, N, OH, OW)
        x = op.reshape(op.permute_dims(op.reshape(data, (n, g, wc, h, w)), (2, 1, 0, 3, 4)), (wc, g * n, h, w))
        k = op.reshape(op.permute_dims(op.reshape(out_grad, (n, g, wo // g, oh, ow)), (1, 2, 0, 3, 4)), (wo, n, oh, ow))
    dw = conv2d(x, k, strides=attrs["dilation"], padding=attrs["padding"], dilation=attrs["strides"], groups=g)
    dw = op.permute_dims(dw, (1, 0, 2, 3))
    if tuple(sinfo_of(dw).shape or ())[2:] != (kh, kw):
        dw = op.strided_slice(dw, (2, 3), (0, 0), (kh, kw))
    return dw


def _output_padding(call, out_shape) -> tuple:
    """The ``output_padding`` that makes conv2d_transpose give back conv2d's input size: the rows (columns)
    the last window did not reach, ``(in + pads - span) % stride``; a symbolic size's, known only at run time."""
    (h, w), (kh, kw) = known_shape(call.args[0], call.op.name)[2:], known_shape(call.args[1], call.op.name)[2:]
    pt, pl, pb, pr = call.attrs["padding"]
    (sh, sw), (dh, dw) = call.attrs["strides"], call.attrs["dilation"]
    return (h + pt + pb - dh * (kh - 1) - 1 - (out_shape[2] - 1) * sh,
            w + pl + pr - dw * (kw - 1) - 1 - (out_shape[3] - 1) * sw)


def conv_output_grad(call, grad):
    """The output gradient in the data's dtype (``out_dtype`` may differ), or ``None`` for integer data."""
    dtype = sinfo_of(call.args[0]).dtype
    if not is_float(dtype):
        return None
    return grad if sinfo_of(grad).dtype == dtype else op.astype(grad, dtype)


def _conv2d_in_nchw(call) -> Optional[Expr]:
    """A conv2d in other layouts as the NCHW/OIHW one between permutations (None when it is NCHW/OIHW already):
    its export rewrite (the backend's schedules are NCHW's) and the form its gradient is taken through."""
    dperm, kperm, operm = _conv_layouts(call.attrs)
    if all(_identity(p) for p in (dperm, kperm, operm)):
        return None
    data = _permute(call.args[0], inverse_permutation(dperm))
    weight = _permute(call.args[1], inverse_permutation(kperm))
    attrs = dict(call.attrs, data_layout="NCHW", kernel_layout="OIHW", out_layout="NCHW")
    return _permute(conv2d(data, weight, **attrs), operm)


def _conv2d_grad(orig, call, grad):
    from .conv_transpose import conv2d_transpose  # conv_transpose.py builds on this module

    nchw = _conv2d_in_nchw(call)
    if nchw is not None:
        return expression_vjp(nchw, list(call.args), grad, call.op.name)
    data, weight = call.args
    g = conv_output_grad(call, grad)
    if g is None:
        return [None, None]
    a = call.attrs
    out_padding = _output_padding(call, known_shape(orig, call.op.name))
    # Rows past the last window's reach get no gradient: where their count is symbolic, conv2d_transpose makes
    # every row it could be (stride - 1) and the slice keeps the input's (the rows before are the same).
    widest = tuple(p if isinstance(p, int) else s - 1 for p, s in zip(out_padding, a["strides"]))
    d_data = conv2d_transpose(g, weight, a["strides"], a["padding"], widest, a["dilation"], a["groups"])
    if widest != out_padding:
        d_data = op.strided_slice(d_data, (2, 3), (0, 0), known_shape(data, call.op.name)[2:])
    return [d_data, conv2d_weight_grad(data, g, weight, a)]


_CONV_ATTRS = {"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "groups": 1, "data_layout": "NCHW",
               "kernel_layout": "OIHW", "out_layout": None, "out_dtype": None}
_CONV_X = [_T((2, 3, 6, 6), "float32"), _T((4, 3, 3, 3), "float32")]

conv2d = register(Op(
    name="relax.nn.conv2d", lowering="nn:conv2d", inputs=("data", "weight"), attrs=_CONV_ATTRS, infer=_conv2d_infer,
    canonicalize=_conv2d_canon, reference=_conv2d_ref, gradient=_conv2d_grad, export_rewrite=_conv2d_in_nchw,
    samples=[Sample([_T((2, 3, 6, 6), "float32"), _T((4, 3, 3, 3), "float32")]),
             Sample([_T(("n", 3, 7, 8), "float32"), _T((4, 3, 3, 2), "float32")],
                    {"strides": (2, 3), "padding": (1, 0, 2, 1), "dilation": 1}),
             Sample([_T(("n", 4, "h", "w"), "float64"), _T((6, 2, 3, 3), "float64")], {"padding": 1, "groups": 2}),
             Sample([_T((1, 4, 9, 9), "float32"), _T((4, 1, 3, 3), "float32")],
                    {"groups": 4, "dilation": (2, 2), "strides": 2, "padding": (1, 2)}),
             Sample([_T((2, 2, 5, 5), "float16"), _T((3, 2, 1, 1), "float16")]),
             Sample([_T((1, 2, 4, 4), "int8"), _T((2, 2, 2, 2), "int8")], {"out_dtype": "int32"}, low=-4, high=4),
             Sample([_T((1, 3, "2 * h", 4), "float32"), _T((2, 3, 2, 2), "float32")], {"strides": 2}),
             # a floor quotient of a symbolic height: ((h + 1) // 2) - 1
             Sample([_T((1, 3, "h", 8), "float32"), _T((2, 3, 3, 3), "float32")], {"strides": 2}),
             # other layouts: the NCHW convolution between permutations
             Sample([_T((2, 6, 5, 3), "float32"), _T((4, 3, 3, 3), "float32")],
                    {"data_layout": "NHWC", "kernel_layout": "OHWI", "padding": 1}),
             Sample([_T((1, 7, 6, 4), "float64"), _T((3, 2, 2, 6), "float64")],
                    {"data_layout": "NHWC", "kernel_layout": "HWIO", "strides": 2, "groups": 2, "out_layout": "NCHW"}),
             Sample([_T(("n", 3, 6, 6), "float32"), _T((3, 3, 3, 4), "float32")],
                    {"kernel_layout": "HWIO", "out_layout": "NHWC"})],
    bad_samples=[BadSample([_T((2, 3, 6, 6), "float32"), _T((4, 2, 3, 3), "float32")], {},
                           r"data has 3 channels but weight expects 2 per group x 1 group\(s\) = 2"),
                 BadSample([_T((2, 4, 6, 6), "float32"), _T((3, 2, 3, 3), "float32")], {"groups": 2},
                           r"3 output channels .* must be divisible by groups 2"),
                 BadSample([_T((2, 3, 6), "float32"), _T((4, 3, 3, 3), "float32")], {}, r"data must have rank 4"),
                 BadSample([_T((2, 3, 2, 2), "float32"), _T((4, 3, 3, 3), "float32")], {},
                           r"height window \(extent 3\) is larger than the padded input \(2\)"),
                 BadSample([_CONV_X[0], _T((4, 3, 3, 3), "float64")], {}, r"same dtype"),
                 BadSample([_T((2, 6, 6, 3), "float32"), _T((4, 3, 3, 3), "float32")], {"data_layout": "NCWH"},
                           r"data_layout must be one of 'NCHW', 'NHWC', got 'NCWH'"),
                 BadSample(_CONV_X, {"kernel_layout": "IOHW"}, r"kernel_layout must be one of 'OIHW', 'OHWI', 'HWIO'"),
                 BadSample([_T((2, 3, 6, 6), "float32"), _T((4, 3, 3, 3), "float32")], {"data_layout": "NHWC"},
                           r"data has 6 channels but weight expects 3"),  # NHWC: the channels are last
                 BadSample(_CONV_X, {"padding": (1, 1, 1)}, r"padding must be an int or a tuple of 1, 2 or 4 ints"),
                 BadSample(_CONV_X, {"strides": 0}, r"strides must be positive"),
                 BadSample(_CONV_X, {"groups": 0}, r"groups must be a positive int"),
                 BadSample(_CONV_X, {"out_dtype": "f32"}, r"unknown dtype 'f32'")],
    doc="2-D convolution (cross-correlation). Layouts: ``data_layout`` NCHW or NHWC, ``kernel_layout`` OIHW, OHWI "
        "or HWIO, ``out_layout`` NCHW or NHWC (default: the data's); the other layouts are the NCHW/OIHW convolution "
        "between permutations (so compiled, and differentiated). ``padding`` is "
        "``(top, left, bottom, right)``; ``p`` and ``(h, w)`` are accepted and stored as 4 values; ``strides`` and "
        "``dilation`` are stored as pairs. ``data.shape[1] == weight.shape[1] * groups``. "
        "``out = (in + pad_before + pad_after - dilation * (k - 1) - 1) // stride + 1``; a symbolic size whose "
        "division is not exact leaves the output shape unknown (rank 4). ``out_dtype`` defaults to the input's."))


# pooling ---------------------------------------------------------------------------------------------------

def _pool_canon(attrs: dict) -> dict:  # (any padding, as TVM: padding=1 on the default 1x1 window)
    return _pool_window(_canonical_layouts(attrs, {"layout": tuple(DATA_LAYOUTS), "out_layout": tuple(DATA_LAYOUTS)}))


def pool_canon_nchw(attrs: dict) -> dict:
    """The backward ops' attributes (NCHW only), with PyTorch's padding rule: at most half the window."""
    return _pool_window(_canonical_window(attrs, {"layout": "NCHW", "out_layout": "NCHW"}), half_window=True)


def _pool_window(attrs: dict, half_window: bool = False) -> dict:
    attrs["pool_size"] = _pair(attrs["pool_size"], "pool_size")
    check_bool(attrs, *(k for k in ("ceil_mode", "count_include_pad") if k in attrs))
    pt, pl, pb, pr = attrs["padding"]
    spans = [d * (k - 1) + 1 for k, d in zip(attrs["pool_size"], attrs["dilation"])]
    # PyTorch's rule: with at most half a window of padding, every window overlaps the input.
    if half_window and (max(pt, pb) > spans[0] // 2 or max(pl, pr) > spans[1] // 2):
        fail(f"padding {attrs['padding']} must be at most half the (dilated) window {tuple(spans)} (in a gradient)")
    return attrs


def _pool_infer(float_only: bool):
    def infer(args, attrs):
        (data,) = args
        require_ndim(data, 4, "data")
        if float_only:
            require_float(data, "data")
        elif is_bool(data.dtype):
            fail("data must be numeric, got bool")
        if data.shape is None:
            return _T(None, data.dtype, 4)
        perm, out_perm = _pool_layouts(attrs)
        nchw = _T(to_canonical_shape(data.shape, perm), data.dtype)
        hw = _spatial_out(nchw, attrs["pool_size"], attrs, attrs["ceil_mode"])
        return _T(None, data.dtype, 4) if hw is None else _T(
            from_canonical_shape(tuple(nchw.shape[:2]) + hw, out_perm), data.dtype)
    return infer


def _pool_layouts(attrs: dict) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return DATA_LAYOUTS[attrs["layout"]], DATA_LAYOUTS[attrs["out_layout"] or attrs["layout"]]


def _pool_in_nchw(call) -> Optional[Expr]:
    """A pooling in NHWC as the NCHW one between permutations (None for NCHW): its export rewrite and the form
    its gradient is taken through."""
    perm, out_perm = _pool_layouts(call.attrs)
    if _identity(perm) and _identity(out_perm):
        return None
    nchw = call.op(_permute(call.args[0], inverse_permutation(perm)),
                   **dict(call.attrs, layout="NCHW", out_layout="NCHW"))
    return _permute(nchw, out_perm)


def _layout_reference(reference):
    """A pooling's NCHW reference, run on the data in its layout."""
    def ref(data, **attrs):
        perm, out_perm = _pool_layouts(attrs)
        return np.ascontiguousarray(np.transpose(reference(np.transpose(data, inverse_permutation(perm)), **attrs),
                                                 out_perm))
    return ref


def _pool_windows(x: np.ndarray, attrs: dict, fill, pad_fill=None) -> np.ndarray:
    """Windows of ``x`` padded with ``pad_fill`` (default ``fill``), plus ``fill`` past the right padding where a
    ceil-mode window overhangs it: shape (KH, KW, N, C, OH, OW)."""
    (h, w), (kh, kw) = x.shape[2:], attrs["pool_size"]
    pt, pl, pb, pr = attrs["padding"]
    (sh, sw), (dh, dw), ceil = attrs["strides"], attrs["dilation"], attrs["ceil_mode"]
    oh = _out_dim(h, pt, pb, kh, sh, dh, ceil, "height")
    ow = _out_dim(w, pl, pr, kw, sw, dw, ceil, "width")
    extra_h = max(0, sh * (oh - 1) + dh * (kh - 1) + 1 - (h + pt + pb))
    extra_w = max(0, sw * (ow - 1) + dw * (kw - 1) + 1 - (w + pl + pr))
    x = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=fill if pad_fill is None else pad_fill)
    x = np.pad(x, ((0, 0), (0, 0), (0, extra_h), (0, extra_w)), constant_values=fill)
    return _windows(x, (kh, kw), (sh, sw), (dh, dw), (oh, ow))


def _max_pool_ref(data, **attrs):
    lowest = -np.inf if is_float(from_numpy(data.dtype)) else np.iinfo(data.dtype).min
    return _pool_windows(data, attrs, lowest).max(axis=(0, 1)).astype(data.dtype)


def _avg_pool_ref(data, **attrs):
    total = _pool_windows(data.astype(_F64), attrs, 0.0).sum(axis=(0, 1))
    # Count the window positions on the input (and on the padding with count_include_pad), never past it: at least 1
    ones = np.ones((1, 1) + data.shape[2:])
    count = _pool_windows(ones, attrs, 0.0, 1.0 if attrs["count_include_pad"] else 0.0).sum(axis=(0, 1))
    return (total / np.maximum(count, 1.0)).astype(data.dtype)


def _pool_attrs(avg: bool) -> dict:
    # TVM's, in its positional order, for both (avg changes nothing): max_pool2d takes count_include_pad too.
    return {"pool_size": (1, 1), "strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "ceil_mode": False,
            "count_include_pad": False, "layout": "NCHW", "out_layout": None}


_POOL_DOC = ("2-D {kind} pooling over NCHW or NHWC data (``layout``; ``out_layout`` defaults to it; NHWC is the NCHW "
             "pooling between permutations). ``padding`` is ``(top, left, bottom, right)`` (``p``, ``(h, w)`` stored "
             "as 4), any size, as TVM: a window wholly in it gives -inf (max) or 0 (average); its gradient is refused. "
             "``out = (in + pads - dilation * (k - 1) - 1) // stride + 1``, rounded up with ``ceil_mode``, where "
             "a last window starting in the right padding is dropped (PyTorch). {extra}")


def _pool_samples(dtypes: tuple[str, ...], avg: bool) -> list[Sample]:
    out = [Sample([_T((2, 3, 6, 6), dtypes[0])], {"pool_size": 2, "strides": 2}),
           Sample([_T(("n", 2, 7, 8), dtypes[0])], {"pool_size": (3, 2), "strides": (2, 1), "padding": (1, 1, 0, 1)}),
           Sample([_T((1, 2, 5, 5), dtypes[1])], {"pool_size": 2, "strides": 3, "padding": 1, "ceil_mode": True}),
           Sample([_T((1, 1, 6, 7), dtypes[0])], {"pool_size": 3, "strides": 2, "padding": 1, "ceil_mode": True}),
           Sample([_T(("n", "c", "h", "w"), dtypes[0])], {"pool_size": 3, "padding": 1}),
           Sample([_T((1, 2, 9, 9), dtypes[0])], {"pool_size": 2, "dilation": 2, "strides": 2, "padding": (1, 0)}),
           Sample([_T((2, 1, 8, 8), dtypes[-1])], {"pool_size": (2, 2), "strides": 2, "ceil_mode": True},
                  low=-9, high=9),
           Sample([_T(("n", 2, "h", 6), dtypes[0])], {"pool_size": 2, "strides": 2}),  # (h // 2)
           Sample([_T((2, 6, 5, 3), dtypes[0])], {"pool_size": 2, "strides": 2, "layout": "NHWC"}),
           Sample([_T((1, 5, 5, 2), dtypes[1])], {"pool_size": 3, "padding": 1, "layout": "NHWC", "out_layout": "NCHW"})]
    if avg:
        out += [Sample([_T((1, 2, 5, 5), "float32")],
                       {"pool_size": 3, "strides": 2, "padding": 1, "ceil_mode": True, "count_include_pad": True}),
                Sample([_T(("n", 2, 6, 6), "float64")], {"pool_size": 3, "padding": 1, "count_include_pad": True})]
    return out


def _pool_bad(avg: bool) -> list[BadSample]:
    x = [_T((1, 2, 6, 6), "float32")]
    out = [BadSample([_T((2, 6, 6), "float32")], {"pool_size": 2}, r"data must have rank 4"),
           BadSample(x, {"pool_size": 0}, r"pool_size must be positive"),
           BadSample(x, {"pool_size": 2, "layout": "HWNC"}, r"layout must be one of 'NCHW', 'NHWC', got 'HWNC'"),
           BadSample(x, {"pool_size": 7}, r"height window \(extent 7\) is larger than the padded input \(6\)"),
           BadSample(x, {"pool_size": 2, "ceil_mode": 1}, r"'ceil_mode' must be a bool")]
    out.append(BadSample([_T((1, 2, 6, 6), "int32")], {"pool_size": 2}, r"data must have a float dtype, got int32")
               if avg else BadSample([_T((1, 2, 6, 6), "bool")], {"pool_size": 2}, r"data must be numeric, got bool"))
    return out


def _pool_grad(backward_name: str):
    def gradient(orig, call, grad):
        from .. import grad as backward  # grad/nn.py builds on this module

        nchw = _pool_in_nchw(call)
        if nchw is not None:
            return expression_vjp(nchw, list(call.args), grad, call.op.name)
        data = call.args[0]
        return [getattr(backward, backward_name)(grad, data, **call.attrs) if is_float(sinfo_of(data).dtype)
                else None]
    return gradient


max_pool2d = register(Op(
    name="relax.nn.max_pool2d", lowering="nn:max_pool2d",
    inputs=("data",), attrs=_pool_attrs(avg=False), infer=_pool_infer(False), export_rewrite=_pool_in_nchw,
    canonicalize=_pool_canon, reference=_layout_reference(_max_pool_ref), gradient=_pool_grad("max_pool2d_backward"),
    samples=_pool_samples(("float32", "float64", "int32"), avg=False), bad_samples=_pool_bad(avg=False),
    doc=_POOL_DOC.format(kind="max", extra="Padding never wins the max (``count_include_pad``, in TVM's signature, "
                         "changes nothing). Integer data allowed. Gradient: each window's output gradient goes to "
                         "its first maximum in row-major window order (``relax.grad.max_pool2d_backward``).")))

avg_pool2d = register(Op(
    name="relax.nn.avg_pool2d", lowering="nn:avg_pool2d", inputs=("data",), attrs=_pool_attrs(avg=True),
    infer=_pool_infer(True), canonicalize=_pool_canon, reference=_layout_reference(_avg_pool_ref),
    export_rewrite=_pool_in_nchw,
    gradient=_pool_grad("avg_pool2d_backward"),
    samples=_pool_samples(("float32", "float16", "float64"), avg=True), bad_samples=_pool_bad(avg=True),
    doc=_POOL_DOC.format(kind="average", extra="The divisor counts the window's positions on the input, plus those "
                         "on the padding with ``count_include_pad`` (never those past it in ceil mode). Float only. "
                         "Gradient: ``relax.grad.avg_pool2d_backward``.")))

