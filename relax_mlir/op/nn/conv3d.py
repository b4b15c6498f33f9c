"""The 3-D convolution and the 1-D and 3-D transposed ones (``relax.nn.conv3d``, ``conv1d_transpose``,
``conv3d_transpose``), TVM's names, attributes and defaults; NCDHW / OIDHW, NCW / IOW and NCDHW / IODHW.

Both are composites built on the 2-D convolutions, whose schedules (``backend/schedule/conv.py``: shifted rows,
weight gradients along kernel rows, im2col) they inherit, with their gradients (``through_decomposition``).
conv3d folds the output depth into the batch and the kernel depth into the channels: ``KD`` depth slices of the
(depth-padded) input, one per kernel depth offset, stacked beside each channel, make a ``(N*OD, C*KD, H, W)``
image whose 2-D convolution with the ``(F, C/g*KD, KH, KW)`` view of the weight (a free reshape) is the 3-D one.
A naive ``linalg.conv_3d_ncdhw_fcdhw`` would run as scalar loops: no schedule takes 3-D convolutions. The slices
cost a copy of ``KD`` times the input, as a depth-only im2col. conv1d_transpose is conv2d_transpose over a height
of 1, as conv1d is conv2d's. conv3d_transpose is the adjoint of conv3d's decomposition: one conv2d_transpose of
the ``(N*D, C, H, W)`` depth slices with the ``(C, O/g*KD, KH, KW)`` view of the weight, whose kernel-depth parts are
spread ``stride`` apart, shifted by ``i * dilation``, added and cropped.
"""

from __future__ import annotations

import numpy as np

from ... import op
from ...ir.dtype import from_numpy, is_bool, is_float, to_numpy
from ...ir.expr import Call, Expr
from ...ir.struct_info import TensorStructInfo
from ..common import canonical_dtype, check_dims_match, int_tuple, is_int_value, require_ndim, require_same_dtype
from ..grad_utils import shape_of, sinfo_of, through_decomposition
from ..registry import BadSample, Op, Sample, fail, register
from .conv import _out_dim, _window_tuple, conv2d
from .conv_transpose import _out_size, conv2d_transpose

_T = TensorStructInfo
_F64 = np.float64
_AXES = ("depth", "height", "width")


# -- conv3d ---------------------------------------------------------------------------------------------------

def _triple(value, what: str) -> tuple[int, int, int]:
    vals = _window_tuple(value, what, (1, 3), 1)
    return vals * 3 if len(vals) == 1 else vals


def _padding3(value) -> tuple[int, ...]:
    """TVM's spellings: ``p`` or ``(p,)`` on all sides, ``(d, h, w)`` symmetric, or
    ``(front, top, left, back, bottom, right)``."""
    vals = _window_tuple(value, "padding", (1, 3, 6), 0)
    return vals * 6 if len(vals) == 1 else vals * 2 if len(vals) == 3 else vals


def _conv3d_canon(attrs: dict) -> dict:
    attrs = dict(attrs, strides=_triple(attrs["strides"], "strides"), padding=_padding3(attrs["padding"]),
                 dilation=_triple(attrs["dilation"], "dilation"))
    if attrs["out_layout"] is None:
        attrs["out_layout"] = attrs["data_layout"]
    for key, want in (("data_layout", "NCDHW"), ("kernel_layout", "OIDHW"), ("out_layout", "NCDHW")):
        if attrs[key] != want:
            fail(f"only {key} {want!r} is supported, got {attrs[key]!r}")
    if not is_int_value(attrs["groups"]) or attrs["groups"] < 1:
        fail(f"groups must be a positive int, got {attrs['groups']!r}")
    return canonical_dtype(attrs, "out_dtype")


def _check_operands(data, weight, attrs, rank: int) -> str:
    for s, what in ((data, "data"), (weight, "weight")):
        require_ndim(s, rank, what)
        if is_bool(s.dtype):
            fail(f"{what} must be numeric, got bool")
    require_same_dtype([data, weight], ["data", "weight"])
    return attrs["out_dtype"] or data.dtype


def _conv3d_infer(args, attrs):
    data, weight = args
    out_dtype = _check_operands(data, weight, attrs, 5)
    if data.shape is None or weight.shape is None:
        return _T(None, out_dtype, 5)
    (n, c), (o, i), g = data.shape[:2], weight.shape[:2], attrs["groups"]
    check_dims_match(c, i * g, f"data has {c} channels but weight expects {i} per group x {g} group(s) = {i * g} "
                               "(data channels must equal weight.shape[1] * groups)")
    if isinstance(o, int) and o % g:
        fail(f"the {o} output channels (weight.shape[0]) must be divisible by groups {g}")
    p = attrs["padding"]
    spatial = tuple(_out_dim(data.shape[2 + a], p[a], p[3 + a], weight.shape[2 + a], attrs["strides"][a],
                             attrs["dilation"][a], False, _AXES[a]) for a in range(3))
    return _T((n, o) + spatial, out_dtype)


def _conv3d_ref(data, weight, *, strides, padding, dilation, groups, out_dtype, **layouts):
    out_dt = to_numpy(out_dtype or from_numpy(data.dtype))
    acc = _F64 if is_float(from_numpy(data.dtype)) or is_float(from_numpy(out_dt)) else np.int64
    x = np.pad(data.astype(acc), ((0, 0), (0, 0)) + tuple((padding[a], padding[3 + a]) for a in range(3)))
    (n, c), (o, _, *kernel), g = data.shape[:2], weight.shape, groups
    out = [_out_dim(data.shape[2 + a], padding[a], padding[3 + a], kernel[a], strides[a], dilation[a], False,
                    _AXES[a]) for a in range(3)]
    # win[i, j, k] is the input seen by kernel offset (i, j, k): (N, C, OD, OH, OW)
    win = np.stack([x[:, :, i * dilation[0]:i * dilation[0] + strides[0] * (out[0] - 1) + 1:strides[0],
                      j * dilation[1]:j * dilation[1] + strides[1] * (out[1] - 1) + 1:strides[1],
                      k * dilation[2]:k * dilation[2] + strides[2] * (out[2] - 1) + 1:strides[2]]
                    for i in range(kernel[0]) for j in range(kernel[1]) for k in range(kernel[2])])
    win = win.reshape(tuple(kernel) + (n, g, c // g) + tuple(out))
    wgt = weight.astype(acc).reshape((g, o // g, c // g) + tuple(kernel))
    return np.einsum("ijkngcdhw,gocijk->ngodhw", win, wgt).reshape((n, o) + tuple(out)).astype(out_dt)


def _conv3d_decompose(call: Call) -> Expr:
    """The conv2d of the ``(N*OD, C*KD, H, W)`` image of depth slices (see the module's docstring): the input as
    ``(N, D, C, H, W)``, padded in depth, sliced once per kernel depth offset ``k`` (rows ``k * dilation + z *
    stride``), the slices stacked after the channel axis; the conv2d's ``(N*OD, F, OH, OW)`` back to NCDHW."""
    data, weight = call.args
    a = call.attrs
    n, c = shape_of(data, f"{call.op.name} decomposition")[:2]
    f, cg, kd, kh, kw = shape_of(weight, f"{call.op.name} decomposition")
    out = sinfo_of(call).shape
    if not isinstance(kd, int) or out is None:
        fail(f"the decomposition needs a static kernel depth and a known output shape, got kernel depth {kd} "
             f"and output {sinfo_of(call)}")
    od, oh, ow = out[2:]
    front, top, left, back, bottom, right = a["padding"]
    (sd, sh, sw), (dd, dh, dw) = a["strides"], a["dilation"]
    x = op.permute_dims(data, (0, 2, 1, 3, 4))
    if front or back:
        x = op.nn.pad(x, pad_width=(0, 0, front, back, 0, 0, 0, 0, 0, 0))
    h, w = shape_of(x)[3:]
    slices = [op.strided_slice(x, (1,), (k * dd,), (k * dd + sd * (od - 1) + 1,), (sd,)) for k in range(kd)]
    stacked = slices[0] if kd == 1 else op.concat([op.expand_dims(s, (3,)) for s in slices], axis=3)
    image = op.reshape(stacked, (n * od, c * kd, h, w))
    y = conv2d(image, op.reshape(weight, (f, cg * kd, kh, kw)), strides=(sh, sw), padding=(top, left, bottom, right),
               dilation=(dh, dw), groups=a["groups"], out_dtype=a["out_dtype"])
    return op.permute_dims(op.reshape(y, (n, od, f, oh, ow)), (0, 2, 1, 3, 4))


_X3 = [_T((2, 3, 4, 5, 5), "float32"), _T((4, 3, 2, 3, 3), "float32")]

conv3d = register(Op(
    name="relax.nn.conv3d", inputs=("data", "weight"),
    attrs={"strides": (1, 1, 1), "padding": (0, 0, 0, 0, 0, 0), "dilation": (1, 1, 1), "groups": 1,
           "data_layout": "NCDHW", "kernel_layout": "OIDHW", "out_layout": None, "out_dtype": None},
    infer=_conv3d_infer, canonicalize=_conv3d_canon, reference=_conv3d_ref, gradient=through_decomposition,
    decompose=_conv3d_decompose,
    samples=[Sample(_X3),
             Sample([_T(("n", 2, 5, 6, 7), "float32"), _T((3, 2, 3, 2, 3), "float32")],
                    {"strides": (2, 1, 2), "padding": (1, 0, 2, 0, 1, 1)}),
             Sample([_T((1, 4, 5, "h", "w"), "float64"), _T((6, 2, 3, 3, 3), "float64")],
                    {"padding": 1, "groups": 2}),
             Sample([_T((1, 2, 7, 6, 6), "float64"), _T((2, 1, 2, 2, 2), "float64")],
                    {"groups": 2, "dilation": (2, 1, 2), "strides": (1, 2, 1), "padding": (1, 1, 0)}),
             Sample([_T((2, 2, 3, 4, 4), "float16"), _T((3, 2, 1, 1, 1), "float16")]),
             Sample([_T((1, 2, 3, 4, 4), "int8"), _T((2, 2, 2, 2, 2), "int8")], {"out_dtype": "int32"},
                    low=-4, high=4),
             Sample([_T((1, 3, 6, 4, 4), "float32"), _T((2, 3, 3, 1, 1), "float32")], {"strides": (3, 1, 1)})],
    bad_samples=[BadSample([_T((2, 3, 4, 5, 5), "float32"), _T((4, 2, 2, 3, 3), "float32")], {},
                           r"data has 3 channels but weight expects 2 per group x 1 group\(s\) = 2"),
                 BadSample([_T((2, 4, 4, 5, 5), "float32"), _T((3, 2, 2, 3, 3), "float32")], {"groups": 2},
                           r"3 output channels .* must be divisible by groups 2"),
                 BadSample([_T((2, 3, 5, 5), "float32"), _X3[1]], {}, r"data must have rank 5"),
                 BadSample([_T((2, 3, 1, 5, 5), "float32"), _X3[1]], {},
                           r"depth window \(extent 2\) is larger than the padded input \(1\)"),
                 BadSample([_X3[0], _T((4, 3, 2, 3, 3), "float64")], {}, r"same dtype"),
                 BadSample(_X3, {"data_layout": "NDHWC"}, r"only data_layout 'NCDHW' is supported, got 'NDHWC'"),
                 BadSample(_X3, {"padding": (1, 1)}, r"padding must be an int or a tuple of 1, 3 or 6 ints"),
                 BadSample(_X3, {"strides": (1, 1)}, r"strides must be an int or a tuple of 1 or 3 ints"),
                 BadSample(_X3, {"dilation": 0}, r"dilation must be positive"),
                 BadSample(_X3, {"groups": 0}, r"groups must be a positive int")],
    doc="3-D convolution (cross-correlation), NCDHW data and OIDHW weight (TVM's ``conv3d``). ``padding`` is "
        "``(front, top, left, back, bottom, right)``; ``p`` and ``(d, h, w)`` are accepted and stored as 6 values; "
        "``strides`` and ``dilation`` are stored as triples. ``data.shape[1] == weight.shape[1] * groups``; "
        "``out = (in + pad_before + pad_after - dilation * (k - 1) - 1) // stride + 1`` per axis; ``out_dtype`` "
        "defaults to the input's. Composite: one conv2d over the ``(N*OD, C*KD, H, W)`` stack of the input's depth "
        "slices (one per kernel depth offset) with the ``(O, I*KD, KH, KW)`` view of the weight, so it compiles "
        "with conv2d's schedules; its gradient is the decomposition's."))


# -- conv1d_transpose -----------------------------------------------------------------------------------------

def _conv1d_transpose_canon(attrs: dict) -> dict:
    out = dict(attrs)
    for key in ("strides", "dilation", "output_padding"):
        out[key] = int_tuple(attrs[key], key)
    padding = int_tuple(attrs["padding"], "padding")
    out["padding"] = padding * 2 if len(padding) == 1 else padding
    return canonical_dtype(out, "out_dtype")


def _conv1d_transpose_check(attrs: dict) -> None:
    for key, count in (("strides", 1), ("dilation", 1), ("output_padding", 1), ("padding", 2)):
        if len(attrs[key]) != count:
            fail(f"{key} must be an int or a tuple of {count} int(s), got {attrs[key]}")
    for key, want in (("data_layout", "NCW"), ("kernel_layout", "IOW"), ("out_layout", "NCW")):
        if attrs[key] not in ((want, None) if key == "out_layout" else (want,)):
            fail(f"only {key} {want!r} is supported, got {attrs[key]!r}")
    if attrs["output_padding"][0] >= attrs["strides"][0]:
        fail(f"output_padding {attrs['output_padding']} must be smaller than strides {attrs['strides']}")


def _as_conv2d_transpose_attrs(attrs: dict) -> dict:
    """conv1d_transpose's attributes for the conv2d_transpose over a height of 1 that computes it."""
    (left, right), (s,), (d,), (extra,) = attrs["padding"], attrs["strides"], attrs["dilation"], attrs["output_padding"]
    return conv2d_transpose.complete_attrs({"strides": (1, s), "padding": (0, left, 0, right), "dilation": (1, d),
                                            "output_padding": (0, extra), "groups": attrs["groups"],
                                            "out_dtype": attrs["out_dtype"]})


def _height_1(s: TensorStructInfo) -> TensorStructInfo:
    return _T(None if s.shape is None else s.shape[:2] + (1,) + s.shape[2:], s.dtype, 4)


def _conv1d_transpose_infer(args, attrs):
    data, weight = args
    require_ndim(data, 3, "data")
    require_ndim(weight, 3, "weight")
    out = conv2d_transpose.infer([_height_1(data), _height_1(weight)], _as_conv2d_transpose_attrs(attrs))
    return _T(None if out.shape is None else out.shape[:2] + out.shape[3:], out.dtype, 3)


def _conv1d_transpose_ref(data, weight, **attrs):
    two_d = conv2d_transpose.reference(data[:, :, None, :], weight[:, :, None, :], **_as_conv2d_transpose_attrs(attrs))
    return two_d[:, :, 0, :]


def _conv1d_transpose_decompose(call: Call) -> Expr:
    """``squeeze(conv2d_transpose(expand_dims(data, 2), expand_dims(weight, 2)), 2)``."""
    data, weight = (op.expand_dims(a, (2,)) for a in call.args)
    return op.squeeze(conv2d_transpose(data, weight, **_as_conv2d_transpose_attrs(call.attrs)), (2,))


_X1 = [_T((2, 4, 5), "float32"), _T((4, 3, 3), "float32")]

conv1d_transpose = register(Op(
    name="relax.nn.conv1d_transpose", inputs=("data", "weight"),
    attrs={"strides": (1,), "padding": (0, 0), "output_padding": (0,), "dilation": (1,), "groups": 1,
           "data_layout": "NCW", "kernel_layout": "IOW", "out_layout": None, "out_dtype": None},
    infer=_conv1d_transpose_infer, canonicalize=_conv1d_transpose_canon, check_attrs=_conv1d_transpose_check,
    reference=_conv1d_transpose_ref, gradient=through_decomposition, decompose=_conv1d_transpose_decompose,
    samples=[Sample(_X1),
             Sample([_T(("n", 4, 6), "float32"), _T((4, 2, 3), "float32")],
                    {"strides": 3, "padding": (1, 2), "output_padding": 2, "groups": 2}),
             Sample([_T((1, 2, 4), "float64"), _T((2, 3, 3), "float64")],
                    {"strides": 2, "padding": 1, "output_padding": 1, "dilation": 2}),
             Sample([_T((2, 3, 3), "float16"), _T((3, 2, 1), "float16")], {"strides": 2}),
             Sample([_T((1, 2, 3), "int8"), _T((2, 2, 2), "int8")], {"out_dtype": "int32"}, low=-4, high=4)],
    bad_samples=[BadSample([_T((2, 3, 5), "float32"), _X1[1]], {}, r"data has 3 channels but weight.shape\[0\] is 4"),
                 BadSample(_X1, {"strides": 2, "output_padding": 2},
                           r"output_padding \(2,\) must be smaller than strides \(2,\)"),
                 BadSample([_T((2, 4, 5, 5), "float32"), _X1[1]], {}, r"data must have rank 3"),
                 BadSample(_X1, {"kernel_layout": "OIW"}, r"only kernel_layout 'IOW' is supported, got 'OIW'"),
                 BadSample(_X1, {"strides": (1, 2)}, r"strides must be an int or a tuple of 1 int")],
    doc="Transposed 1-D convolution, NCW data and IOW weight ``(in_channels, out_channels / groups, k)`` (TVM's "
        "``conv1d_transpose``): the adjoint of conv1d with the same attributes. ``out = (in - 1) * stride - "
        "pad_left - pad_right + dilation * (k - 1) + output_padding + 1``, ``output_padding < strides``; ``padding`` "
        "is ``(left, right)`` (an int pads both sides). Composite: conv2d_transpose over a height of 1; its "
        "gradient is the decomposition's."))


# -- conv3d_transpose -----------------------------------------------------------------------------------------

def _conv3d_transpose_canon(attrs: dict) -> dict:
    extra = _window_tuple(attrs["output_padding"], "output_padding", (1, 3), 0)
    attrs = dict(attrs, strides=_triple(attrs["strides"], "strides"), padding=_padding3(attrs["padding"]),
                 dilation=_triple(attrs["dilation"], "dilation"), output_padding=extra * 3 if len(extra) < 3 else extra)
    if attrs["out_layout"] is None:
        attrs["out_layout"] = attrs["data_layout"]
    for key, want in (("data_layout", "NCDHW"), ("kernel_layout", "IODHW"), ("out_layout", "NCDHW")):
        if attrs[key] != want:
            fail(f"only {key} {want!r} is supported, got {attrs[key]!r}")
    if not is_int_value(attrs["groups"]) or attrs["groups"] < 1:
        fail(f"groups must be a positive int, got {attrs['groups']!r}")
    return canonical_dtype(attrs, "out_dtype")


def _conv3d_transpose_check(attrs: dict) -> None:
    if any(p >= s for p, s in zip(attrs["output_padding"], attrs["strides"])):
        fail(f"output_padding {attrs['output_padding']} must be smaller than strides {attrs['strides']} "
             "in each dimension")


def _conv3d_transpose_infer(args, attrs):
    data, weight = args
    out_dtype = _check_operands(data, weight, attrs, 5)
    if data.shape is None or weight.shape is None:
        return _T(None, out_dtype, 5)
    (n, c), (i, o), g = data.shape[:2], weight.shape[:2], attrs["groups"]
    check_dims_match(c, i, f"data has {c} channels but weight.shape[0] is {i} (IODHW: the input channels come first)")
    if isinstance(i, int) and i % g:
        fail(f"the {i} input channels (weight.shape[0]) must be divisible by groups {g}")
    p = attrs["padding"]
    spatial = tuple(_out_size(data.shape[2 + a], weight.shape[2 + a], attrs["strides"][a], attrs["dilation"][a],
                              p[a], p[3 + a], attrs["output_padding"][a], _AXES[a]) for a in range(3))
    return _T((n, o * g) + spatial, out_dtype)


def _conv3d_transpose_ref(data, weight, *, strides, padding, output_padding, dilation, groups, out_dtype,
                          **layouts):
    """Each kernel offset ``(i, j, k)`` scatters ``data[z, y, x]`` to ``(z * stride + i * dilation, ...)`` of the
    unpadded output, which is then cropped by the padding."""
    out_dt = to_numpy(out_dtype or from_numpy(data.dtype))
    acc = _F64 if is_float(from_numpy(data.dtype)) or is_float(from_numpy(out_dt)) else np.int64
    (n, c, *size), (_, og, *kernel), g = data.shape, weight.shape, groups
    x = data.astype(acc).reshape((n, g, c // g) + tuple(size))
    wgt = weight.astype(acc).reshape((g, c // g, og) + tuple(kernel))
    contrib = np.einsum("ngcdhw,gcoijk->ijkngodhw", x, wgt).reshape(tuple(kernel) + (n, g * og) + tuple(size))
    full = [(size[a] - 1) * strides[a] + dilation[a] * (kernel[a] - 1) + 1 + output_padding[a] for a in range(3)]
    out = np.zeros((n, g * og) + tuple(full), acc)
    for i, j, k in np.ndindex(*kernel):
        at = tuple(slice(o * dilation[a], o * dilation[a] + strides[a] * (size[a] - 1) + 1, strides[a])
                   for a, o in enumerate((i, j, k)))
        out[(slice(None), slice(None)) + at] += contrib[i, j, k]
    crop = tuple(slice(padding[a], full[a] - padding[3 + a]) for a in range(3))
    return out[(slice(None), slice(None)) + crop].astype(out_dt)


def _depth_scatter(y: Expr, n, d, f: int, kd: int, attrs: dict) -> Expr:
    """The depth half of the transposed convolution (the adjoint of conv3d's depth slices): ``y`` is ``(N, D, F,
    KD, OH, OW)``, the contribution of input depth ``z`` and kernel depth ``i`` to output depth ``z * stride + i *
    dilation - pad_front``. The input depths are spread ``stride`` apart (zeros between), each kernel depth's
    part shifted by ``i * dilation`` and added, the sum cropped by the depth padding: ``(N, OD, F, OH, OW)``."""
    sd, dd, extra = (attrs[key][0] for key in ("strides", "dilation", "output_padding"))
    front, back = attrs["padding"][0], attrs["padding"][3]
    oh, ow = shape_of(y)[4:]
    if sd > 1:  # each depth row followed by stride - 1 rows of zeros
        y = op.nn.pad(op.reshape(y, (n, d, 1, f * kd * oh * ow)), pad_width=(0, 0, 0, 0, 0, sd - 1, 0, 0))
        y = op.reshape(y, (n, d * sd, f, kd, oh, ow))
    rows = shape_of(y)[1]
    total = None
    for i in range(kd):
        part = op.reshape(op.strided_slice(y, (3,), (i,), (i + 1,)) if kd > 1 else y, (n, rows, f, oh, ow))
        if kd > 1:
            part = op.nn.pad(part, pad_width=(0, 0, i * dd, dd * (kd - 1 - i)) + (0, 0) * 3)
        total = part if total is None else op.add(total, part)
    # The sum has D * stride + dilation * (KD - 1) rows; the output's last row is the full result's row
    # (D - 1) * stride + dilation * (KD - 1) + output_padding - pad_back, so the last stride - 1 - output_padding
    # + pad_back rows (zeros of the spreading, or cropped) go, and the first pad_front.
    surplus = sd - 1 - extra + back
    if front or surplus:
        total = op.strided_slice(total, (1,), (front,), (rows + dd * (kd - 1) - surplus,))
    return total


def _conv3d_transpose_decompose(call: Call) -> Expr:
    """A conv2d_transpose of the ``(N*D, C, H, W)`` image of the input's depth slices with the ``(C, F/g*KD, KH,
    KW)`` view of the weight (a free reshape) gives each slice's contribution for every kernel depth offset;
    ``_depth_scatter`` adds them up at their output depths. The adjoint of conv3d's decomposition."""
    data, weight = call.args
    a = call.attrs
    n, c, d = shape_of(data, f"{call.op.name} decomposition")[:3]
    i, fg, kd, kh, kw = shape_of(weight, f"{call.op.name} decomposition")
    if not isinstance(kd, int):
        fail(f"the decomposition needs a static kernel depth, got {kd}")
    top, left, bottom, right = a["padding"][1:3] + a["padding"][4:]
    image = op.reshape(op.permute_dims(data, (0, 2, 1, 3, 4)), (n * d, c) + tuple(shape_of(data)[3:]))
    y = conv2d_transpose(image, op.reshape(weight, (i, fg * kd, kh, kw)), strides=a["strides"][1:],
                         padding=(top, left, bottom, right), output_padding=a["output_padding"][1:],
                         dilation=a["dilation"][1:], groups=a["groups"], out_dtype=a["out_dtype"])
    f = fg * a["groups"]
    y = op.reshape(y, (n, d, f, kd) + tuple(shape_of(y)[2:]))
    return op.permute_dims(_depth_scatter(y, n, d, f, kd, a), (0, 2, 1, 3, 4))


_XT = [_T((2, 4, 3, 4, 4), "float32"), _T((4, 3, 2, 3, 3), "float32")]

conv3d_transpose = register(Op(
    name="relax.nn.conv3d_transpose", inputs=("data", "weight"),
    attrs={"strides": (1, 1, 1), "padding": (0, 0, 0, 0, 0, 0), "output_padding": (0, 0, 0), "dilation": (1, 1, 1),
           "groups": 1, "data_layout": "NCDHW", "kernel_layout": "IODHW", "out_layout": None, "out_dtype": None},
    infer=_conv3d_transpose_infer, canonicalize=_conv3d_transpose_canon, check_attrs=_conv3d_transpose_check,
    reference=_conv3d_transpose_ref, gradient=through_decomposition, decompose=_conv3d_transpose_decompose,
    samples=[Sample(_XT),
             Sample([_T(("n", 4, 3, 4, 5), "float32"), _T((4, 2, 3, 2, 3), "float32")],
                    {"strides": (2, 3, 1), "padding": (1, 0, 2, 0, 1, 1), "output_padding": (1, 2, 0), "groups": 2}),
             Sample([_T((1, 2, 3, 3, 3), "float64"), _T((2, 3, 2, 3, 2), "float64")],
                    {"strides": 3, "padding": (2, 1, 0), "output_padding": 2, "dilation": (2, 1, 2)}),
             Sample([_T((1, 4, "h", 3, "w"), "float64"), _T((4, 1, 3, 3, 3), "float64")], {"padding": 1, "groups": 4}),
             Sample([_T((2, 3, 2, 3, 3), "float16"), _T((3, 2, 1, 1, 1), "float16")], {"strides": 2}),
             Sample([_T((1, 2, 2, 3, 3), "int8"), _T((2, 2, 2, 2, 2), "int8")], {"out_dtype": "int32"},
                    low=-4, high=4)],
    bad_samples=[BadSample([_T((2, 3, 3, 4, 4), "float32"), _XT[1]], {},
                           r"data has 3 channels but weight.shape\[0\] is 4 \(IODHW"),
                 BadSample([_T((2, 3, 3, 4, 4), "float32"), _T((3, 2, 2, 3, 3), "float32")], {"groups": 2},
                           r"3 input channels .* must be divisible by groups 2"),
                 BadSample(_XT, {"strides": (2, 1, 1), "output_padding": (0, 1, 0)},
                           r"output_padding \(0, 1, 0\) must be smaller than strides \(2, 1, 1\)"),
                 BadSample([_T((2, 4, 4, 4), "float32"), _XT[1]], {}, r"data must have rank 5"),
                 BadSample(_XT, {"kernel_layout": "OIDHW"}, r"only kernel_layout 'IODHW' is supported, got 'OIDHW'"),
                 BadSample([_T((1, 1, 1, 1, 1), "float32"), _T((1, 1, 1, 1, 1), "float32")], {"padding": (1, 0, 0)},
                           r"output depth .* = -1 is not positive"),
                 BadSample([_XT[0], _T((4, 3, 2, 3, 3), "float64")], {}, r"same dtype"),
                 BadSample(_XT, {"padding": (1, 1)}, r"padding must be an int or a tuple of 1, 3 or 6 ints"),
                 BadSample(_XT, {"output_padding": (1, 1)}, r"output_padding must be an int or a tuple of 1 or 3 ints"),
                 BadSample(_XT, {"groups": 0}, r"groups must be a positive int")],
    doc="Transposed 3-D convolution, NCDHW data and IODHW weight ``(in_channels, out_channels / groups, kd, kh, "
        "kw)`` (TVM's ``conv3d_transpose``): the adjoint of conv3d with the same attributes. ``out = (in - 1) * "
        "stride - pad_before - pad_after + dilation * (k - 1) + output_padding + 1`` per axis, ``output_padding < "
        "strides``; ``padding`` as conv3d's (stored as 6 values), ``strides``, ``dilation`` and ``output_padding`` "
        "as triples; ``out_dtype`` defaults to the input's. Composite: one conv2d_transpose of the ``(N*D, C, H, "
        "W)`` depth slices with the ``(I, O/g*KD, KH, KW)`` view of the weight, its kernel-depth parts added at "
        "their output depths, so it compiles with conv2d_transpose's schedules; its gradient is the "
        "decomposition's."))
