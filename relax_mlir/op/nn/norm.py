"""Normalisation and dropout: ``relax.nn.batch_norm``, ``layer_norm`` (composites, decomposed before lowering)
and ``dropout``. The batch-norm numerics follow ``shared/reference/training_semantics.md``.

Gradients go through the statistics: with ``xhat = (x - mean) * rstd`` over the reduced axes and
``dxhat = g * gamma``, ``x_grad = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))``. Inference-mode
batch norm uses fixed (moving) statistics, so its ``x_grad`` is just ``dxhat * rstd``.
"""

from __future__ import annotations

import numpy as np

from ... import op
from ...ir.struct_info import TensorStructInfo, TupleStructInfo
from ..common import (check_bool, check_dims_match, check_number, fmt, is_int_value, normalize_axes, normalize_axis,
                      require_float, require_ndim, require_same_dtype)
from ..grad_utils import scalar
from ..registry import BadSample, Op, Sample, fail, register
from .grad_helpers import along, count, known_shape

_T = TensorStructInfo
_F64 = np.float64


def _norm_attrs_check(attrs: dict) -> None:
    check_number(attrs, "epsilon", 0.0)
    check_bool(attrs, "center", "scale", *(k for k in ("training",) if k in attrs))
    if "momentum" in attrs:
        check_number(attrs, "momentum", 0.0, 1.0)


_BN_INPUTS = ("data", "gamma", "beta", "moving_mean", "moving_var")


def _bn_infer(args, attrs):
    data = args[0]
    require_float(data, "data")
    dtype = require_same_dtype(args, _BN_INPUTS)
    axis = normalize_axis(attrs["axis"], data.ndim) if data.ndim != -1 else None
    channels = data.shape[axis] if data.shape is not None and axis is not None else None
    for s, name in zip(args[1:], _BN_INPUTS[1:]):
        require_ndim(s, 1, name)
        if channels is not None and s.shape is not None:
            check_dims_match(s.shape[0], channels, f"{name} must have shape ({channels},) to match data axis "
                                                   f"{axis} of {fmt(data.shape)}, got {fmt(s.shape)}")
    known = [s.shape for s in args[1:] if s.shape is not None]
    stat = _T((channels,) if channels is not None else known[0] if known else None, dtype, 1)
    return TupleStructInfo([data, stat, stat])


def _bn_ref(data, gamma, beta, moving_mean, moving_var, *, axis, epsilon, center, scale, momentum, training):
    x, dt = data.astype(_F64), data.dtype
    axis %= x.ndim
    shape = [1] * x.ndim
    shape[axis] = -1
    if training:
        others = tuple(i for i in range(x.ndim) if i != axis)
        mean, var = x.mean(axis=others), x.var(axis=others)  # biased variance, also for the running update
        new_mean = (1 - momentum) * moving_mean.astype(_F64) + momentum * mean
        new_var = (1 - momentum) * moving_var.astype(_F64) + momentum * var
    else:
        mean, var = moving_mean.astype(_F64), moving_var.astype(_F64)
        new_mean, new_var = mean, var
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + epsilon)
    if scale:
        y = y * gamma.astype(_F64).reshape(shape)
    if center:
        y = y + beta.astype(_F64).reshape(shape)
    return y.astype(dt), new_mean.astype(dt), new_var.astype(dt)


def _normalized_grad(dxhat, xhat, rstd, axes):
    """The gradient through ``xhat = (x - mean(x)) * rstd(x)`` over ``axes`` (biased variance)."""
    def avg(e):
        return op.mean(e, axes, True)
    return rstd * (dxhat - avg(dxhat) - xhat * avg(dxhat * xhat))


def _bn_grad(orig, call, grad):
    x, gamma, beta, moving_mean, moving_var = call.args
    a = call.attrs
    shape = known_shape(x, call.op.name)
    axis = a["axis"] % len(shape)
    others = tuple(i for i in range(len(shape)) if i != axis)
    g, eps = grad[0], scalar(a["epsilon"], x)
    if a["training"]:
        xc = x - op.mean(x, others, True)
        var = op.mean(xc * xc, others, True)
    else:
        xc, var = x - along(moving_mean, axis, shape), along(moving_var, axis, shape)
    rstd = op.rsqrt(var + eps)
    xhat = xc * rstd
    dxhat = g * along(gamma, axis, shape) if a["scale"] else g
    if a["training"]:
        # new_mean = (1 - m) * moving_mean + m * mean(x); new_var likewise with the biased var(x)
        d_stats = (along(grad[1], axis, shape) + scalar(2.0, x) * along(grad[2], axis, shape) * xc) \
            * (scalar(a["momentum"], x) / count([shape[i] for i in others], x))
        d_x = _normalized_grad(dxhat, xhat, rstd, others) + d_stats
    else:
        d_x = dxhat * rstd
    d_gamma = op.sum(g * xhat, others) if a["scale"] else None
    d_beta = op.sum(g, others) if a["center"] else None
    return [d_x, d_gamma, d_beta, None, None]


def _bn_args(data, c, dtype="float32"):
    return [_T(data, dtype)] + [_T((c,), dtype)] * 4


batch_norm = register(Op(
    name="relax.nn.batch_norm", inputs=_BN_INPUTS, infer=_bn_infer, reference=_bn_ref, gradient=_bn_grad,
    no_grad_inputs=("moving_mean", "moving_var"),
    attrs={"axis": 1, "epsilon": 1e-5, "center": True, "scale": True, "momentum": 0.1, "training": False},
    check_attrs=_norm_attrs_check,
    samples=[Sample(_bn_args((4, 3, 5, 5), 3), low=0.1),
             Sample(_bn_args(("n", 3, 5, 5), 3), {"training": True}, low=0.1),
             Sample(_bn_args((6, 4), 4, "float64"), {"training": True, "momentum": 0.3, "epsilon": 1e-3}, low=0.1),
             Sample(_bn_args((2, 5, 3), 3), {"axis": -1, "center": False, "scale": False, "training": True}, low=0.1),
             Sample(_bn_args(("n", "c"), "c", "float16"), {"training": True}, low=0.1),
             Sample(_bn_args((2, 3, 4), 3, "float64"), {"center": False}, low=0.1)],
    bad_samples=[BadSample(_bn_args((4, 3, 5, 5), 4), {}, r"gamma must have shape \(3,\) to match data axis 1"),
                 BadSample(_bn_args((4, 3), 3, "int32"), {}, r"data must have a float dtype, got int32"),
                 BadSample([_T((4, 3), "float32")] + [_T((3,), "float32")] * 3 + [_T((3,), "float64")], {},
                           r"same dtype"),
                 BadSample(_bn_args((4, 3), 3), {"axis": 2}, r"axis 2 is out of range for a tensor of rank 2"),
                 BadSample([_T((4, 3), "float32"), _T((3, 1), "float32")] + [_T((3,), "float32")] * 3, {},
                           r"gamma must have rank 1"),
                 BadSample(_bn_args((4, 3), 3), {"momentum": 1.5}, r"'momentum' must be a number in \[0.0, 1.0\]")],
    doc="Batch normalisation over every axis but ``axis``; returns ``(output, new moving_mean, new moving_var)``. "
        "Inference (``training=False``): normalise with the moving statistics and return them unchanged. "
        "Training: normalise with the batch mean and biased variance (``eps`` added before the sqrt) and return "
        "``(1 - momentum) * moving + momentum * batch_stat``. ``scale``/``center`` apply ``gamma``/``beta``. "
        "Composite: decomposed before lowering. Gradient: ``data`` (through the batch statistics in training, "
        "including their share in the new moving statistics), ``gamma`` and ``beta``; the moving statistics "
        "are state and get none (as TVM's trainer, which never asks for them)."))


def _ln_canon(attrs: dict) -> dict:
    return dict(attrs, axes=(attrs["axes"],)) if is_int_value(attrs["axes"]) else attrs


def _ln_check(attrs: dict) -> None:
    _norm_attrs_check(attrs)
    axes = attrs["axes"]
    if not (isinstance(axes, tuple) and axes and all(is_int_value(a) for a in axes)):
        fail(f"axes must be an int or a non-empty tuple of ints, got {axes!r}")


def _ln_infer(args, attrs):
    data = args[0]
    require_float(data, "data")
    require_same_dtype(args, ("data", "gamma", "beta"))
    if data.ndim == -1:
        return data
    axes = normalize_axes(attrs["axes"], data.ndim, "axes")
    for s, name in zip(args[1:], ("gamma", "beta")):
        require_ndim(s, len(axes), name)
        if data.shape is not None and s.shape is not None:
            want = tuple(data.shape[a] for a in axes)
            for a, b in zip(s.shape, want):
                check_dims_match(a, b, f"{name} must have shape {fmt(want)} (data's dims at axes {attrs['axes']}), "
                                       f"got {fmt(s.shape)}")
    return data


def _along(param: np.ndarray, axes: tuple[int, ...], ndim: int) -> np.ndarray:
    """``param``'s dims follow ``axes`` in the given order; put them at those axes, with 1 elsewhere."""
    order = np.argsort(axes)
    shape = [1] * ndim
    for a, d in zip(sorted(axes), np.transpose(param, order).shape):
        shape[a] = d
    return np.transpose(param, order).astype(_F64).reshape(shape)


def _ln_ref(data, gamma, beta, *, axes, epsilon, center, scale):
    x = data.astype(_F64)
    axes = tuple(a % x.ndim for a in axes)
    y = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + epsilon)
    if scale:
        y = y * _along(gamma, axes, x.ndim)
    if center:
        y = y + _along(beta, axes, x.ndim)
    return y.astype(data.dtype)


def _ln_grad(orig, call, grad):
    x, gamma, beta = call.args
    a = call.attrs
    shape = known_shape(x, call.op.name)
    listed = tuple(ax % len(shape) for ax in a["axes"])
    axes = tuple(sorted(listed))
    others = tuple(i for i in range(len(shape)) if i not in axes)
    order = tuple(int(i) for i in np.argsort(listed))  # gamma's dims, sorted by the data axis they sit at
    back = tuple(int(i) for i in np.argsort(order))

    def permute(e, perm):
        return e if perm == tuple(range(len(perm))) else op.permute_dims(e, perm)

    def spread(p):  # gamma-shaped -> broadcastable against x
        return op.reshape(permute(p, order), tuple(d if i in axes else 1 for i, d in enumerate(shape)))

    def gather(e):  # x-shaped -> gamma-shaped
        return permute(op.sum(e, others) if others else e, back)

    xc = x - op.mean(x, axes, True)
    rstd = op.rsqrt(op.mean(xc * xc, axes, True) + scalar(a["epsilon"], x))
    xhat = xc * rstd
    dxhat = grad * spread(gamma) if a["scale"] else grad
    return [_normalized_grad(dxhat, xhat, rstd, axes), gather(grad * xhat) if a["scale"] else None,
            gather(grad) if a["center"] else None]


_LN_X = [_T((4, 6), "float32"), _T((6,), "float32"), _T((6,), "float32")]
layer_norm = register(Op(
    name="relax.nn.layer_norm", inputs=("data", "gamma", "beta"), infer=_ln_infer, reference=_ln_ref,
    gradient=_ln_grad,
    attrs={"axes": -1, "epsilon": 1e-5, "center": True, "scale": True}, canonicalize=_ln_canon, check_attrs=_ln_check,
    samples=[Sample([_T((4, 6), "float32"), _T((6,), "float32"), _T((6,), "float32")]),
             Sample([_T(("n", 3, 4), "float32"), _T((3, 4), "float32"), _T((3, 4), "float32")], {"axes": (-2, -1)}),
             Sample([_T((2, 3, 4), "float64"), _T((4, 2), "float64"), _T((4, 2), "float64")], {"axes": (2, 0)}),
             Sample([_T((2, "m"), "float16"), _T(("m",), "float16"), _T(("m",), "float16")],
                    {"epsilon": 1e-3, "center": False}),
             Sample([_T((3, 5), "float32"), _T((3,), "float32"), _T((3,), "float32")], {"axes": 0, "scale": False})],
    bad_samples=[BadSample([_LN_X[0], _T((4,), "float32"), _LN_X[2]], {}, r"gamma must have shape \(6,\)"),
                 BadSample([_T((4, 6), "float32"), _T((4, 6), "float32"), _T((6,), "float32")], {},
                           r"gamma must have rank 1"),
                 BadSample([_T((4, 6), "int32")] * 3, {}, r"data must have a float dtype, got int32"),
                 BadSample(_LN_X[:2] + [_T((6,), "float64")], {}, r"same dtype"),
                 BadSample([_T((4, 6), "float32")] * 3, {"axes": (0, -2)}, r"axes \(0, -2\) repeats an axis"),
                 BadSample(_LN_X, {"axes": ()}, r"axes must be an int or a non-empty tuple"),
                 BadSample(_LN_X, {"epsilon": -1.0}, r"'epsilon' must be a number")],
    doc="Layer normalisation over ``axes`` (an int or a tuple; stored as a tuple): "
        "``(x - mean) / sqrt(var + epsilon) * gamma + beta`` with the biased variance; ``gamma``/``beta`` have "
        "the data's dims at ``axes``, in the order ``axes`` lists them. Composite: decomposed before lowering."))


def _dropout_infer(args, attrs):
    (x,) = args
    require_float(x, "data")
    return TupleStructInfo([x, x])


def _dropout_check(attrs: dict) -> None:
    check_number(attrs, "rate", 0.0, 1.0)
    if attrs["rate"] == 1:
        fail("rate must be < 1 (a rate of 1 drops everything), got 1")


def _dropout_grad(orig, call, grad):
    # output = data * mask, whichever form made them; the mask output itself carries no gradient.
    return [grad[0] * orig[1]]


dropout = register(Op(
    name="relax.nn.dropout", inputs=("data",), attrs={"rate": 0.5}, infer=_dropout_infer,
    check_attrs=_dropout_check, gradient=_dropout_grad,
    reference=lambda x, rate: (x.copy(), np.ones_like(x)),
    samples=[Sample([_T((3, 4), "float32")]), Sample([_T(("n", 8), "float32")], {"rate": 0.1}),
             Sample([_T((2, 2, 2), "float64")], {"rate": 0.0})],
    bad_samples=[BadSample([_T((3,), "float32")], {"rate": 1.0}, r"rate must be < 1"),
                 BadSample([_T((3,), "float32")], {"rate": -0.1}, r"'rate' must be a number in \[0.0, 1.0\]"),
                 BadSample([_T((3,), "int32")], {}, r"data must have a float dtype, got int32")],
    doc="Dropout with probability ``rate`` (``0 <= rate < 1``); returns ``(output, mask)``, both of the data's "
        "struct info, with ``output == data * mask``: the mask is each element's factor, ``0`` where dropped and "
        "``1 / (1 - rate)`` where kept (a kept element is scaled to keep the expected sum). This reference is the "
        "inference form: the output is the data and the mask all ones. The training form (a seeded random mask) "
        "comes with MutateOpsForTraining. Gradient: ``grad * mask``, i.e. ``grad * keep / (1 - rate)`` in "
        "training and ``grad`` in inference; the mask output passes no gradient back."))
