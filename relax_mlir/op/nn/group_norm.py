"""``relax.nn.group_norm`` and ``relax.nn.rms_norm``: normalisations of real models, composites decomposed into
primitive ops (TVM's attribute names and defaults). Their gradients are their decompositions'
(``grad_utils.through_decomposition``), checked against the NumPy references by finite differences."""

from __future__ import annotations

import numpy as np

from ... import op
from ...ir.expr import Call, Expr
from ...ir.struct_info import TensorStructInfo
from ..common import (check_dims_match, check_number, fmt, int_tuple, is_int_value, normalize_axes, normalize_axis,
                      require_float, require_ndim, require_same_dtype)
from ..grad_utils import ShapeNeeded, scalar, sinfo_of, through_decomposition
from ..registry import REQUIRED, BadSample, Op, Sample, fail, register
from .norm import (along_axes, axis_params_infer, canonical_axes, cast_dtype, check_norm_attrs, compute_dtype,
                   norm_axes_of, spread_along)

_T = TensorStructInfo
_F64 = np.float64


# -- group_norm ---------------------------------------------------------------------------------------------

def _gn_canon(attrs: dict) -> dict:
    return dict(attrs, axes=int_tuple(attrs["axes"], "axes"))


def _gn_check(attrs: dict) -> None:
    check_norm_attrs(attrs)
    if not is_int_value(attrs["num_groups"]) or attrs["num_groups"] < 1:
        fail(f"num_groups must be a positive int, got {attrs['num_groups']!r}")
    if not is_int_value(attrs["channel_axis"]):
        fail(f"channel_axis must be an int, got {attrs['channel_axis']!r}")


def _gn_axes(ndim: int, attrs: dict) -> tuple[int, tuple[int, ...]]:
    channel = normalize_axis(attrs["channel_axis"], ndim, "channel_axis")
    axes = normalize_axes(attrs["axes"], ndim, "axes")
    if channel in axes:
        fail(f"axes {attrs['axes']} must not include the channel axis {attrs['channel_axis']}")
    return channel, axes


def _gn_infer(args, attrs):
    data = args[0]
    require_float(data, "data")
    require_same_dtype(args, ("data", "gamma", "beta"))
    for s, name in zip(args[1:], ("gamma", "beta")):
        require_ndim(s, 1, name)
    if data.ndim == -1:
        return data
    channel, _ = _gn_axes(data.ndim, attrs)
    if data.shape is None:
        return data
    c, g = data.shape[channel], attrs["num_groups"]
    if isinstance(c, int) and c % g:  # (a symbolic count is checked when it has a value: _gn_ref, compiled reshapes)
        fail(f"the channel axis {channel} of data {fmt(data.shape)} ({c}) must be divisible by num_groups {g}")
    for s, name in zip(args[1:], ("gamma", "beta")):
        if s.shape is not None:
            check_dims_match(s.shape[0], c, f"{name} must have shape ({c},) (data's channels), got {fmt(s.shape)}")
    return data


def _grouped(shape, channel: int, axes, groups: int):
    """data's shape with the channel axis split into ``(groups, channels // groups)`` and the axes to reduce."""
    split = tuple(shape[:channel]) + (groups, shape[channel] // groups) + tuple(shape[channel + 1:])
    return split, (channel + 1,) + tuple(a + (a > channel) for a in axes)


def _gn_ref(data, gamma, beta, *, num_groups, channel_axis, axes, epsilon, center, scale):
    x = data.astype(_F64)
    channel, axes = channel_axis % x.ndim, tuple(a % x.ndim for a in axes)
    if x.shape[channel] % num_groups:  # a symbolic channel count the inference could not check
        raise ValueError(f"the channel axis {channel} of data {x.shape} ({x.shape[channel]}) "
                         f"must be divisible by num_groups {num_groups}")
    split, reduced = _grouped(x.shape, channel, axes, num_groups)
    xs = x.reshape(split)
    y = ((xs - xs.mean(axis=reduced, keepdims=True)) / np.sqrt(xs.var(axis=reduced, keepdims=True) + epsilon))
    y = y.reshape(x.shape)
    if scale:
        y = y * along_axes(gamma, (channel,), x.ndim)
    if center:
        y = y + along_axes(beta, (channel,), x.ndim)
    return y.astype(data.dtype)


def _gn_decompose(call: Call) -> Expr:
    """Reshape the channels into ``(groups, channels / groups)``, normalise over those and ``axes`` as layer_norm
    does, reshape back, then ``* gamma + beta`` along the channel axis. A symbolic channel count not divisible by
    the groups is refused at run time by compiled code's check of the reshape's element count (``c // g`` groups
    of ``g`` fall short of ``c``)."""
    x, gamma, beta = call.args
    a = call.attrs
    s = sinfo_of(x)
    if s.shape is None:
        raise ShapeNeeded(f"{call.op.name} decomposition", f"needs the shape of data, got {s}")
    shape = tuple(s.shape)
    channel, axes = normalize_axis(a["channel_axis"], len(shape)), normalize_axes(a["axes"], len(shape))
    split, reduced = _grouped(shape, channel, axes, a["num_groups"])
    ct = compute_dtype(s.dtype)
    xs = op.reshape(cast_dtype(x, ct), split)
    y = (xs - op.mean(xs, reduced, True)) / op.sqrt(op.variance(xs, reduced, True) + scalar(a["epsilon"], xs))
    y = op.reshape(y, shape)
    if a["scale"]:
        y = y * spread_along(cast_dtype(gamma, ct), shape, (channel,))
    if a["center"]:
        y = y + spread_along(cast_dtype(beta, ct), shape, (channel,))
    return cast_dtype(y, s.dtype)


def _gn_args(shape, c, dtype="float32"):
    return [_T(shape, dtype), _T((c,), dtype), _T((c,), dtype)]


group_norm = register(Op(
    name="relax.nn.group_norm", inputs=("data", "gamma", "beta"), infer=_gn_infer, reference=_gn_ref,
    attrs={"num_groups": REQUIRED, "channel_axis": REQUIRED, "axes": REQUIRED, "epsilon": 1e-5, "center": True,
           "scale": True},
    canonicalize=_gn_canon, check_attrs=_gn_check, gradient=through_decomposition, decompose=_gn_decompose,
    samples=[Sample(_gn_args((2, 4, 3, 3), 4), {"num_groups": 2, "channel_axis": 1, "axes": (2, 3)}),
             Sample(_gn_args(("n", 6, 5), 6, "float64"), {"num_groups": 3, "channel_axis": 1, "axes": 2}),
             Sample(_gn_args((2, 5, 4), 4, "float64"),
                    {"num_groups": 4, "channel_axis": -1, "axes": (1,), "epsilon": 1e-3, "center": False}),
             Sample(_gn_args((3, 4, "h"), 4), {"num_groups": 1, "channel_axis": 1, "axes": (-1,), "scale": False}),
             Sample(_gn_args((2, 4, 2, 2), 4, "float16"), {"num_groups": 2, "channel_axis": 1, "axes": (2, 3)}),
             Sample(_gn_args(("n", "c", "h"), "c", "float64"), {"num_groups": 3, "channel_axis": 1, "axes": (2,)})],
    bad_samples=[BadSample(_gn_args((2, 6, 3), 6), {"num_groups": 4, "channel_axis": 1, "axes": (2,)},
                           r"\(6\) must be divisible by num_groups 4"),
                 BadSample(_gn_args((2, 4, 3), 3), {"num_groups": 2, "channel_axis": 1, "axes": (2,)},
                           r"gamma must have shape \(4,\)"),
                 BadSample(_gn_args((2, 4, 3), 4), {"num_groups": 2, "channel_axis": 1, "axes": (1, 2)},
                           r"must not include the channel axis 1"),
                 BadSample(_gn_args((2, 4, 3), 4), {"num_groups": 0, "channel_axis": 1, "axes": (2,)},
                           r"num_groups must be a positive int"),
                 BadSample(_gn_args((2, 4, 3), 4, "int32"), {"num_groups": 2, "channel_axis": 1, "axes": (2,)},
                           r"data must have a float dtype"),
                 BadSample(_gn_args((2, "c", 3), "c + 1"), {"num_groups": 2, "channel_axis": 1, "axes": (2,)},
                           r"gamma must have shape \(c,\)"),
                 BadSample(_gn_args((2, 4, 3), 4), {"num_groups": 2, "axes": (2,)}, r"missing required attribute")],
    doc="Group normalisation (TVM's ``group_norm(data, gamma, beta, num_groups, channel_axis, axes, epsilon=1e-5, "
        "center=True, scale=True)``): the channels (divisible by ``num_groups``, a symbolic count checked at run "
        "time) are split into groups, each normalised over its channels and ``axes`` with the biased variance, then "
        "``* gamma + beta`` per channel. "
        "Composite: decomposed before lowering; its gradient is the decomposition's."))


# -- rms_norm -----------------------------------------------------------------------------------------------

def _rms_check(attrs: dict) -> None:
    check_number(attrs, "epsilon", 0.0)
    axes = attrs["axes"]
    if not (isinstance(axes, tuple) and axes and all(is_int_value(a) for a in axes)):
        fail(f"axes must be an int or a non-empty tuple of ints, got {axes!r}")


def _rms_infer(args, attrs):
    return axis_params_infer(args, ("data", "weight"), attrs)


def _rms_ref(data, weight, *, axes, epsilon):
    x = data.astype(_F64)
    axes = tuple(a % x.ndim for a in axes)
    y = x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + epsilon) * along_axes(weight, axes, x.ndim)
    return y.astype(data.dtype)


def _rms_decompose(call: Call) -> Expr:
    """``x * rsqrt(mean(x * x, axes) + epsilon) * weight`` (weight moved to ``axes``)."""
    x, weight = call.args
    shape, listed, axes = norm_axes_of(x, call.attrs, call.op.name)
    dtype = sinfo_of(x).dtype
    ct = compute_dtype(dtype)
    xw = cast_dtype(x, ct)
    y = xw * op.rsqrt(op.mean(xw * xw, axes, True) + scalar(call.attrs["epsilon"], xw))
    return cast_dtype(y * spread_along(cast_dtype(weight, ct), shape, listed), dtype)


rms_norm = register(Op(
    name="relax.nn.rms_norm", inputs=("data", "weight"), infer=_rms_infer, reference=_rms_ref,
    attrs={"axes": -1, "epsilon": 1e-5}, canonicalize=canonical_axes, check_attrs=_rms_check,
    gradient=through_decomposition, decompose=_rms_decompose,
    samples=[Sample([_T((4, 6), "float32"), _T((6,), "float32")]),
             Sample([_T(("n", 3, 4), "float64"), _T((3, 4), "float64")], {"axes": (-2, -1), "epsilon": 1e-3}),
             Sample([_T((2, 3, 4), "float64"), _T((4, 2), "float64")], {"axes": (2, 0)}),
             Sample([_T((2, "m"), "float16"), _T(("m",), "float16")])],
    bad_samples=[BadSample([_T((4, 6), "float32"), _T((4,), "float32")], {}, r"weight must have shape \(6,\)"),
                 BadSample([_T((4, 6), "int32"), _T((6,), "int32")], {}, r"data must have a float dtype"),
                 BadSample([_T((4, 6), "float32"), _T((6,), "float32")], {"axes": ()},
                           r"axes must be an int or a non-empty tuple"),
                 BadSample([_T((4, 6), "float32"), _T((6,), "float32")], {"epsilon": -1.0},
                           r"'epsilon' must be a number")],
    doc="Root-mean-square normalisation (TVM's ``rms_norm(data, weight, axes=-1, epsilon=1e-5)``): "
        "``data / sqrt(mean(data ** 2, axes) + epsilon) * weight``, ``weight`` having the data's dims at ``axes``. "
        "Composite: decomposed before lowering; its gradient is the decomposition's."))
