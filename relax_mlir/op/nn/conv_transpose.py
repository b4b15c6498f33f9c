"""``relax.nn.conv2d_transpose``: the transposed 2-D convolution (NCHW data, IOHW weight), TVM's semantics.

It is the adjoint of ``conv2d`` with the same window attributes, hence conv2d's data gradient; its own
gradient is a ``conv2d`` (data) and conv2d's weight-gradient construction with data and output swapped.
"""

from __future__ import annotations

import numpy as np

from ...ir.dtype import from_numpy, is_float, to_numpy
from ...ir.struct_info import TensorStructInfo
from ..common import canonical_dtype, check_dims_match, is_int_value
from ..registry import BadSample, Op, Sample, fail, register
from .conv import (_canonical_window, _window_tuple, check_conv_operands, conv2d, conv2d_weight_grad,
                   conv_output_grad)

_T = TensorStructInfo
_F64 = np.float64


def _canon(attrs: dict) -> dict:
    attrs = _canonical_window(attrs, {"data_layout": "NCHW", "kernel_layout": "IOHW", "out_layout": "NCHW"})
    pads = _window_tuple(attrs["output_padding"], "output_padding", (1, 2), 0)
    attrs["output_padding"] = pads * 2 if len(pads) == 1 else pads
    if not is_int_value(attrs["groups"]) or attrs["groups"] < 1:
        fail(f"groups must be a positive int, got {attrs['groups']!r}")
    return canonical_dtype(attrs, "out_dtype")


def _check(attrs: dict) -> None:
    if any(p >= s for p, s in zip(attrs["output_padding"], attrs["strides"])):
        fail(f"output_padding {attrs['output_padding']} must be smaller than strides {attrs['strides']} "
             "in each dimension")


def _out_size(size, kernel, stride, dilation, before, after, extra, where):
    out = (size - 1) * stride - before - after + dilation * (kernel - 1) + extra + 1
    if isinstance(out, int) and out < 1:
        fail(f"the output {where} (in - 1) * stride - pads + dilation * (k - 1) + output_padding + 1 = {out} is "
             f"not positive (in = {size}, k = {kernel})")
    return out


def _infer(args, attrs):
    data, weight = args
    out_dtype = check_conv_operands(data, weight, attrs)
    if data.shape is None or weight.shape is None:
        return _T(None, out_dtype, 4)
    (n, c, h, w), (i, o, kh, kw), g = data.shape, weight.shape, attrs["groups"]
    check_dims_match(c, i, f"data has {c} channels but weight.shape[0] is {i} (IOHW: the input channels come first)")
    if isinstance(i, int) and i % g:
        fail(f"the {i} input channels (weight.shape[0]) must be divisible by groups {g}")
    pt, pl, pb, pr = attrs["padding"]
    (sh, sw), (dh, dw), (oph, opw) = attrs["strides"], attrs["dilation"], attrs["output_padding"]
    oh = _out_size(h, kh, sh, dh, pt, pb, oph, "height")
    ow = _out_size(w, kw, sw, dw, pl, pr, opw, "width")
    return _T((n, o * g, oh, ow), out_dtype)


def _reference(data, weight, *, strides, padding, output_padding, dilation, groups, out_dtype, **layouts):
    out_dt = to_numpy(out_dtype or from_numpy(data.dtype))
    acc = _F64 if is_float(from_numpy(data.dtype)) or is_float(from_numpy(out_dt)) else np.int64
    (n, c, h, w), (_, og, kh, kw), g = data.shape, weight.shape, groups
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = strides, dilation, padding
    x = data.astype(acc).reshape(n, g, c // g, h, w)
    wgt = weight.astype(acc).reshape(g, c // g, og, kh, kw)
    # Each kernel offset (i, j) scatters data[h, w] to row h * stride + i * dilation of the padded output.
    contrib = np.einsum("ngchw,gcoij->ijngohw", x, wgt).reshape(kh, kw, n, g * og, h, w)
    full_h = (h - 1) * sh + dh * (kh - 1) + 1 + output_padding[0]
    full_w = (w - 1) * sw + dw * (kw - 1) + 1 + output_padding[1]
    out = np.zeros((n, g * og, full_h, full_w), acc)
    for i in range(kh):
        for j in range(kw):
            out[:, :, i * dh:i * dh + sh * (h - 1) + 1:sh, j * dw:j * dw + sw * (w - 1) + 1:sw] += contrib[i, j]
    return out[:, :, pt:full_h - pb, pl:full_w - pr].astype(out_dt)


def _gradient(orig, call, grad):
    data, weight = call.args
    g = conv_output_grad(call, grad)
    if g is None:
        return [None, None]
    a = call.attrs
    # output_padding < strides, so conv2d's floor division lands exactly on data's size.
    d_data = conv2d(g, weight, strides=a["strides"], padding=a["padding"], dilation=a["dilation"], groups=a["groups"])
    return [d_data, conv2d_weight_grad(g, data, weight, a)]


_X = [_T((2, 4, 5, 5), "float32"), _T((4, 3, 3, 3), "float32")]

conv2d_transpose = register(Op(
    name="relax.nn.conv2d_transpose", lowering="nn:conv2d_transpose", inputs=("data", "weight"),
    attrs={"strides": (1, 1), "padding": (0, 0, 0, 0), "output_padding": (0, 0), "dilation": (1, 1), "groups": 1,
           "data_layout": "NCHW", "kernel_layout": "IOHW", "out_layout": None, "out_dtype": None},
    infer=_infer, canonicalize=_canon, check_attrs=_check, reference=_reference, gradient=_gradient,
    samples=[Sample(_X),
             Sample([_T(("n", 4, 5, 6), "float32"), _T((4, 2, 3, 2), "float32")],
                    {"strides": (2, 3), "padding": (1, 0, 2, 1), "output_padding": (1, 2), "groups": 2}),
             Sample([_T((1, 2, 4, 4), "float64"), _T((2, 3, 3, 3), "float64")],
                    {"strides": 2, "padding": 1, "output_padding": 1, "dilation": 2}),
             Sample([_T((1, 4, "h", "w"), "float32"), _T((4, 1, 3, 3), "float32")], {"padding": 1, "groups": 4}),
             Sample([_T((2, 3, 3, 3), "float16"), _T((3, 2, 1, 1), "float16")], {"strides": 2}),
             Sample([_T((1, 2, 3, 3), "int8"), _T((2, 2, 2, 2), "int8")], {"out_dtype": "int32"}, low=-4, high=4)],
    bad_samples=[BadSample([_T((2, 3, 5, 5), "float32"), _T((4, 3, 3, 3), "float32")], {},
                           r"data has 3 channels but weight.shape\[0\] is 4 \(IOHW"),
                 BadSample([_T((2, 3, 5, 5), "float32"), _T((3, 2, 3, 3), "float32")], {"groups": 2},
                           r"3 input channels .* must be divisible by groups 2"),
                 BadSample(_X, {"strides": 2, "output_padding": 2},
                           r"output_padding \(2, 2\) must be smaller than strides \(2, 2\)"),
                 BadSample([_T((2, 4, 5), "float32"), _X[1]], {}, r"data must have rank 4"),
                 BadSample(_X, {"kernel_layout": "OIHW"}, r"only kernel_layout 'IOHW' is supported, got 'OIHW'"),
                 BadSample([_T((1, 1, 1, 1), "float32"), _T((1, 1, 1, 1), "float32")], {"padding": 1},
                           r"output height .* = -1 is not positive"),
                 BadSample([_X[0], _T((4, 3, 3, 3), "float64")], {}, r"same dtype"),
                 BadSample(_X, {"output_padding": -1}, r"output_padding must be non-negative")],
    doc="Transposed 2-D convolution, NCHW data and IOHW weight ``(in_channels, out_channels / groups, kh, kw)``: "
        "each input element scatters ``data[n, c, y, x] * weight[c, o, i, j]`` to output row "
        "``y * stride + i * dilation - pad_top`` (columns alike), the adjoint of ``conv2d`` with the same "
        "attributes. ``out = (in - 1) * stride - pad_before - pad_after + dilation * (k - 1) + output_padding + "
        "1``, with ``output_padding < strides`` (extra rows at the bottom/right). ``padding`` as conv2d's; "
        "``out_dtype`` defaults to the input's."))
