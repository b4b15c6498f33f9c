"""Normalisation and dropout: ``relax.nn.batch_norm``, ``layer_norm`` and ``dropout``, composites decomposed into
primitive ops before lowering. The batch-norm numerics follow ``shared/reference/training_semantics.md``.

Two slots make them composites:

* ``decompose(call) -> Expr``: the call's value (same struct info) built from ``call.args`` with op constructors;
  nested calls are fine (the caller binds them). ``DecomposeOps`` and the MLIR export use it.
* ``with_mode(call, training, new_key) -> Call`` (:class:`ModalOp`): the call in its training or inference form.
  ``new_key()`` returns a fresh random key expression (an int64 0-d tensor) for ops that need randomness.
  ``MutateOpsForTraining`` / ``MutateOpsForInference`` use it: batch_norm switches ``training``; dropout's
  training form takes a key (``dropout(data, key, rate)``: a random mask), its inference form none (identity).

Gradients go through the statistics: with ``xhat = (x - mean) * rstd`` over the reduced axes and
``dxhat = g * gamma``, ``x_grad = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))``. Inference-mode
batch norm uses fixed (moving) statistics, so its ``x_grad`` is just ``dxhat * rstd``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import op
from ...ir.dtype import compute_dtype, from_numpy, is_float, to_numpy  # (half floats normalised in float32)
from ...ir.expr import Call, Constant, Expr, Tuple, const
from ...ir.struct_info import TensorStructInfo, TupleStructInfo
from ..common import (check_bool, check_dims_match, check_number, fmt, is_int_value, normalize_axes, normalize_axis,
                      require_float, require_ndim, require_same_dtype)
from ..grad_utils import ShapeNeeded, scalar, sinfo_of
from ..random import require_key, uniform_values
from ..registry import BadSample, Op, Sample, fail, register
from .grad_helpers import along, count, known_shape

_T = TensorStructInfo
_F64 = np.float64


@dataclass(frozen=True, eq=False, repr=False)
class ModalOp(Op):
    """An op whose training form differs from its inference form: ``with_mode(call, training, new_key) -> Call``
    (see the module docstring) rewrites a call into either. Passes ask ``getattr(op, "with_mode", None)``."""

    with_mode: Any = None


def cast_dtype(e: Expr, dtype: str) -> Expr:
    return e if sinfo_of(e).dtype == dtype else op.astype(e, dtype)


def _rank(e: Expr, who: str) -> int:
    s = sinfo_of(e)
    if s.ndim == -1:
        raise ShapeNeeded(f"{who} decomposition", f"needs the rank of data, got {s}", "rank")
    return s.ndim


def check_norm_attrs(attrs: dict) -> None:
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
    d_gamma = sized_like(op.sum(g * xhat, others), gamma) if a["scale"] else None
    d_beta = sized_like(op.sum(g, others), beta) if a["center"] else None
    return [d_x, d_gamma, d_beta, None, None]


def _bn_mode(call: Call, training: bool, new_key) -> Call:
    if call.attrs["training"] == training:
        return call
    return batch_norm(*call.args, **dict(call.attrs, training=training))


def _bn_decompose(call: Call) -> Expr:
    """Inference: normalise with the moving statistics and return them unchanged (TVM's DecomposeBatchNorm).
    Training: batch mean and biased variance over every axis but ``axis``, ``eps`` before the sqrt, and
    ``(1 - momentum) * moving + momentum * batch`` (TVM's MutateBatchNormForTraining)."""
    x, *params = call.args
    a = call.attrs
    ndim = _rank(x, call.op.name)
    axis = a["axis"] % ndim
    others = tuple(i for i in range(ndim) if i != axis)
    shape = sinfo_of(x).shape
    if shape is not None:  # the parameters with data's channel size (see with_sizes)
        params = [with_sizes(p, (shape[axis],)) for p in params]
    gamma, beta, moving_mean, moving_var = params
    dtype = sinfo_of(x).dtype
    ct = compute_dtype(dtype)
    xw = cast_dtype(x, ct)

    def expand(v):  # (C,) -> broadcastable against x along axis
        return op.expand_dims(cast_dtype(v, ct), others) if others else cast_dtype(v, ct)

    if a["training"]:
        mean, var = op.mean(xw, others), op.variance(xw, others)
        m = a["momentum"]

        def update(moving, batch):
            return cast_dtype(scalar(1 - m, batch) * cast_dtype(moving, ct) + scalar(m, batch) * batch, dtype)
        new_mean, new_var = update(moving_mean, mean), update(moving_var, var)
    else:
        mean, var, new_mean, new_var = moving_mean, moving_var, moving_mean, moving_var
    y = (xw - expand(mean)) / op.sqrt(expand(var) + scalar(a["epsilon"], xw))
    if a["scale"]:
        y = y * expand(gamma)
    if a["center"]:
        y = y + expand(beta)
    return Tuple([cast_dtype(y, dtype), new_mean, new_var])


def _bn_args(data, c, dtype="float32"):
    return [_T(data, dtype)] + [_T((c,), dtype)] * 4


batch_norm = register(ModalOp(
    name="relax.nn.batch_norm", inputs=_BN_INPUTS, infer=_bn_infer, reference=_bn_ref, gradient=_bn_grad,
    no_grad_inputs=("moving_mean", "moving_var"), with_mode=_bn_mode, decompose=_bn_decompose,
    attrs={"axis": 1, "epsilon": 1e-5, "center": True, "scale": True, "momentum": 0.1, "training": False},
    check_attrs=check_norm_attrs,
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
        "Composite: decomposed before lowering; ``MutateOpsForTraining`` sets ``training``. Gradient: ``data`` "
        "(through the batch statistics in training, including their share in the new moving statistics), "
        "``gamma`` and ``beta``; the moving statistics are state and get none (as TVM's trainer, which never "
        "asks for them)."))


def canonical_axes(attrs: dict) -> dict:
    return dict(attrs, axes=(attrs["axes"],)) if is_int_value(attrs["axes"]) else attrs


def _ln_check(attrs: dict) -> None:
    check_norm_attrs(attrs)
    axes = attrs["axes"]
    if not (isinstance(axes, tuple) and axes and all(is_int_value(a) for a in axes)):
        fail(f"axes must be an int or a non-empty tuple of ints, got {axes!r}")


def _ln_infer(args, attrs):
    return axis_params_infer(args, ("data", "gamma", "beta"), attrs)


def axis_params_infer(args, names, attrs):
    """data with parameters (``names[1:]``) holding its dims at ``attrs["axes"]`` in the listed order (layer_norm's
    gamma and beta, rms_norm's weight); the result is data's struct info."""
    data = args[0]
    require_float(data, "data")
    require_same_dtype(args, names)
    if data.ndim == -1:
        return data
    axes = normalize_axes(attrs["axes"], data.ndim, "axes")
    for s, name in zip(args[1:], names[1:]):
        require_ndim(s, len(axes), name)
        if data.shape is not None and s.shape is not None:
            want = tuple(data.shape[a] for a in axes)
            for a, b in zip(s.shape, want):
                check_dims_match(a, b, f"{name} must have shape {fmt(want)} (data's dims at axes {attrs['axes']}), "
                                       f"got {fmt(s.shape)}")
    return data


def along_axes(param: np.ndarray, axes: tuple[int, ...], ndim: int) -> np.ndarray:
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
        y = y * along_axes(gamma, axes, x.ndim)
    if center:
        y = y + along_axes(beta, axes, x.ndim)
    return y.astype(data.dtype)


def norm_axes_of(x: Expr, attrs: dict, who: str):
    """data's shape, the axes as listed (gamma's dim order) and sorted."""
    shape = known_shape(x, who)
    listed = tuple(ax % len(shape) for ax in attrs["axes"])
    return shape, listed, tuple(sorted(listed))


def with_sizes(p: Expr, sizes: tuple) -> Expr:
    """``p`` reshaped to ``sizes`` (data's at the parameter's axes) where its own differ: a symbolic size against a
    static one (``n`` against gamma's 4) or another symbol, which the inference assumed equal but an elementwise op
    would not broadcast (either may be 1). Compiled code checks the reshape's element count, so a parameter of
    another size is reported, not read past."""
    s = sinfo_of(p).shape
    return p if s is None or tuple(s) == tuple(sizes) else op.reshape(p, sizes)


def sized_like(e: Expr, p: Expr) -> Expr:
    """A parameter's adjoint ``e`` (data's sizes) with the parameter ``p``'s sizes (see :func:`with_sizes`)."""
    s = sinfo_of(p).shape
    return e if s is None else with_sizes(e, tuple(s))


def _permute(e: Expr, perm: tuple) -> Expr:
    return e if perm == tuple(range(len(perm))) else op.permute_dims(e, perm)


def spread_along(p: Expr, shape, listed) -> Expr:
    """gamma-shaped -> broadcastable against data; gamma itself when it is data's trailing dims in order (reshaped
    to data's sizes where they differ: see :func:`with_sizes`)."""
    if listed == tuple(range(len(shape) - len(listed), len(shape))):
        return with_sizes(p, tuple(shape[a] for a in listed))
    order = tuple(int(i) for i in np.argsort(listed))  # gamma's dims, sorted by the data axis they sit at
    return op.reshape(_permute(p, order), tuple(d if i in listed else 1 for i, d in enumerate(shape)))


def _ln_grad(orig, call, grad):
    x, gamma, beta = call.args
    a = call.attrs
    shape, listed, axes = norm_axes_of(x, a, call.op.name)
    others = tuple(i for i in range(len(shape)) if i not in axes)
    back = tuple(int(i) for i in np.argsort(np.argsort(listed)))

    def gather(e):  # x-shaped -> gamma-shaped
        return _permute(op.sum(e, others) if others else e, back)

    xc = x - op.mean(x, axes, True)
    rstd = op.rsqrt(op.mean(xc * xc, axes, True) + scalar(a["epsilon"], x))
    xhat = xc * rstd
    dxhat = grad * spread_along(gamma, shape, listed) if a["scale"] else grad
    d_gamma = sized_like(gather(grad * xhat), gamma) if a["scale"] else None
    d_beta = sized_like(gather(grad), beta) if a["center"] else None
    return [_normalized_grad(dxhat, xhat, rstd, axes), d_gamma, d_beta]


def _ln_decompose(call: Call) -> Expr:
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` over ``axes`` (TVM's DecomposeLayerNorm), with gamma and
    beta moved to their axes when those are not data's trailing dims in order."""
    x, gamma, beta = call.args
    a = call.attrs
    shape, listed, axes = norm_axes_of(x, a, call.op.name)
    dtype = sinfo_of(x).dtype
    ct = compute_dtype(dtype)
    xw = cast_dtype(x, ct)
    y = (xw - op.mean(xw, axes, True)) / op.sqrt(op.variance(xw, axes, True) + scalar(a["epsilon"], xw))
    if a["scale"]:
        y = y * spread_along(cast_dtype(gamma, ct), shape, listed)
    if a["center"]:
        y = y + spread_along(cast_dtype(beta, ct), shape, listed)
    return cast_dtype(y, dtype)


_LN_X = [_T((4, 6), "float32"), _T((6,), "float32"), _T((6,), "float32")]
layer_norm = register(Op(
    name="relax.nn.layer_norm", inputs=("data", "gamma", "beta"), infer=_ln_infer, reference=_ln_ref,
    gradient=_ln_grad, decompose=_ln_decompose,
    attrs={"axes": -1, "epsilon": 1e-5, "center": True, "scale": True}, canonicalize=canonical_axes, check_attrs=_ln_check,
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
    x = args[0]
    require_float(x, "data")
    if len(args) > 1:
        if is_float(args[1].dtype):
            fail(f"key must be an int64 0-d tensor, got {args[1].dtype} (the rate is an attribute: rate=...)")
        require_key(args[1])
    return TupleStructInfo([x, x])


def _dropout_check(attrs: dict) -> None:
    check_number(attrs, "rate", 0.0, 1.0)
    if attrs["rate"] == 1:
        fail("rate must be < 1 (a rate of 1 drops everything), got 1")


def dropout_mask(key, shape, dtype: str, rate: float) -> np.ndarray:
    """The training mask: ``1 / (1 - rate)`` where ``uniform(key) >= rate``, else 0, in ``dtype``; exactly what
    the decomposition computes (the same NumPy steps as the references of the ops it uses)."""
    u = uniform_values(key, shape, dtype)
    dt = u.dtype
    keep = np.greater_equal(u, np.asarray(rate, dt))
    return np.where(keep, np.asarray(1 / (1 - rate), dt), np.asarray(0.0, dt)).astype(dt)


def _dropout_ref(data, key=None, *, rate):
    if key is None:
        return data.copy(), np.ones_like(data)
    mask = dropout_mask(key, data.shape, from_numpy(data.dtype), rate)
    return np.asarray(np.multiply(data, mask)).astype(data.dtype), mask


def _dropout_grad(orig, call, grad):
    # output = data * mask, whichever form made them; the mask output and the key carry no gradient.
    return [grad[0] * orig[1]] + [None] * (len(call.args) - 1)


def _dropout_mode(call: Call, training: bool, new_key) -> Call:
    if (len(call.args) > 1) == training:
        return call
    key = [new_key()] if training else []
    return dropout(call.args[0], *key, rate=call.attrs["rate"])


def _dropout_decompose(call: Call) -> Expr:
    """Inference: ``(data, ones_like(data))``. Training: ``mask = where(uniform(key) >= rate, 1/(1-rate), 0)``,
    ``(data * mask, mask)``."""
    x = call.args[0]
    if len(call.args) == 1:
        return Tuple([x, op.ones_like(x)])
    s, rate = sinfo_of(x), call.attrs["rate"]
    if s.shape is None:
        raise ShapeNeeded(f"{call.op.name} decomposition", f"the random mask needs the data's shape, got {s}")
    u = op.random.uniform(call.args[1], s.shape, s.dtype)
    mask = op.where(op.greater_equal(u, const(rate, s.dtype)), const(1 / (1 - rate), s.dtype), const(0.0, s.dtype))
    return Tuple([x * mask, mask])


@dataclass(frozen=True, eq=False, repr=False)
class _DropoutOp(ModalOp):
    def bind_arguments(self, args, kwargs):
        # TVM's signature is dropout(data, rate=0.5): a number where the key would go is the rate (also a float
        # literal the script parser made a constant; a key is never a float).
        args = list(args)
        second = args[1] if len(args) >= 2 else None
        if isinstance(second, Constant) and second.data.ndim == 0 and second.data.dtype.kind == "f":
            second = args[1] = float(str(second.data[()]))  # the shortest repr: 0.1, not 0.10000000149...
        if isinstance(second, (int, float)) and not isinstance(second, bool):
            args = [args[0], kwargs.pop("key", None), *args[1:]]
        return super().bind_arguments(args, kwargs)


def _dropout_inputs(rng, sinfos, attrs):
    data = [rng.uniform(-2, 2, tuple(s.shape)).astype(to_numpy(s.dtype)) for s in sinfos[:1]]
    return data + [np.array(rng.integers(-2 ** 63, 2 ** 63 - 1), dtype=np.int64)]


_KEY = _T((), "int64")
dropout = register(_DropoutOp(
    name="relax.nn.dropout", inputs=("data", "key"), num_optional=1, attrs={"rate": 0.5}, infer=_dropout_infer,
    check_attrs=_dropout_check, gradient=_dropout_grad, no_grad_inputs=("key",), reference=_dropout_ref,
    with_mode=_dropout_mode, decompose=_dropout_decompose,
    samples=[Sample([_T((3, 4), "float32")]), Sample([_T(("n", 8), "float32")], {"rate": 0.1}),
             Sample([_T((2, 2, 2), "float64")], {"rate": 0.0}),
             Sample([_T((6, 8), "float32"), _KEY], {"rate": 0.3}, make=_dropout_inputs),
             Sample([_T(("n", 5), "float64"), _KEY], make=_dropout_inputs),
             Sample([_T((4, 4), "float16"), _KEY], {"rate": 0.25}, make=_dropout_inputs)],
    bad_samples=[BadSample([_T((3,), "float32")], {"rate": 1.0}, r"rate must be < 1"),
                 BadSample([_T((3,), "float32")], {"rate": -0.1}, r"'rate' must be a number in \[0.0, 1.0\]"),
                 BadSample([_T((3,), "int32")], {}, r"data must have a float dtype, got int32"),
                 BadSample([_T((3,), "float32"), _T((), "float32")], {}, r"key must be an int64 0-d tensor, got "
                                                                           r"float32 \(the rate is an attribute"),
                 BadSample([_T((3,), "float32"), _T((1,), "int64")], {}, r"key must be an int64 0-d tensor")],
    doc="Dropout with probability ``rate`` (``0 <= rate < 1``); returns ``(output, mask)``, both of the data's "
        "struct info, with ``output == data * mask``: the mask is each element's factor, ``0`` where dropped and "
        "``1 / (1 - rate)`` where kept (a kept element is scaled to keep the expected sum). Without ``key`` "
        "(inference, TVM's form ``dropout(data, rate)``) the output is the data and the mask all ones. With "
        "``key`` (an int64 0-d tensor; the training form MutateOpsForTraining makes) an element is kept where "
        "``relax.random.uniform(key, data.shape, data.dtype) >= rate``: the same key gives the same mask. "
        "Composite: decomposed before lowering. Gradient: ``grad * mask`` to ``data``; the mask output and the "
        "key pass none."))
