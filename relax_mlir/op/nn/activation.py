"""Activations (``relax.nn.relu`` ... ``leakyrelu``, ``softplus``, one line each through :func:`unary`), ``prelu``
and ``relu6`` (composites) and softmax.

Gradient rules sit next to each record (``unary``'s ``grad=``, float inputs only); they take ``x`` from the call
and, where it saves recomputation, the result ``y``: silu' = sigmoid(x) * (1 + x - y), softmax' uses y and
log_softmax' exp(y).
"""

from __future__ import annotations

import math

import numpy as np

from ... import op
from ...ir.dtype import is_bool
from ...ir.struct_info import TensorStructInfo
from ..common import (check_dims_match, check_number, fmt, normalize_axis, np_erf, require_float, require_ndim,
                      require_same_dtype)
from ..grad_utils import scalar, sinfo_of, through_decomposition
from ..registry import BadSample, Op, Sample, fail, register
from ..unary import sigmoid_scalar, unary
from .grad_helpers import along, known_shape

_T = TensorStructInfo
_F64 = np.float64


def _relu_grad(y, call, g):
    x = call.args[0]
    return [op.where(op.less(x, scalar(0, x)), scalar(0, g), g)]  # relu'(0) = 1, as TVM


def _silu_grad(y, call, g):
    # silu' = s + x s (1 - s) = s (1 + x - y), with s = sigmoid(x) and y = x s
    x = call.args[0]
    return [g * op.sigmoid(x) * (scalar(1.0, x) + x - y)]


def _gelu_grad(y, call, g):
    # d/dx [x * Phi(x)] = Phi(x) + x * phi(x), with Phi the normal CDF and phi its density.
    x = call.args[0]
    cdf = scalar(0.5, x) + scalar(0.5, x) * op.erf(x * scalar(1.0 / math.sqrt(2.0), x))
    pdf = op.exp(scalar(-0.5, x) * x * x) * scalar(1.0 / math.sqrt(2.0 * math.pi), x)
    return [g * (cdf + x * pdf)]


_C, _K = math.sqrt(2.0 / math.pi), 0.044715


def _gelu_tanh_grad(y, call, g):
    # 0.5 (1 + t) + 0.5 x (1 - t^2) u', with t = tanh(u) and u = C (x + K x^3)
    x = call.args[0]
    x2, one = x * x, scalar(1.0, x)
    t = op.tanh(scalar(_C, x) * (x + scalar(_K, x) * x2 * x))
    du = scalar(_C, x) * (one + scalar(3 * _K, x) * x2)
    return [g * (scalar(0.5, x) * (one + t) + scalar(0.5, x) * x * (one - t * t) * du)]


def _leakyrelu_grad(y, call, g):
    x = call.args[0]
    return [op.where(op.less(x, scalar(0, x)), g * scalar(call.attrs["alpha"], g), g)]  # slope 1 at 0, as relu


def _gelu_tanh_scalar(b, x):
    inner = b.add(x, b.mul(0.044715, b.mul(b.mul(x, x), x)))
    return b.mul(b.mul(0.5, x), b.add(1.0, b.tanh(b.mul(math.sqrt(2.0 / math.pi), inner))))


relu = unary("nn.relu", lambda x: np.maximum(x, 0).astype(x.dtype), float_only=False, input_name="data",
             grad=_relu_grad, scalar=lambda b, x: b.max(x, 0),
             doc="``max(x, 0)`` elementwise; integers allowed. Its gradient is ``where(x < 0, 0, g)`` (relu'(0) = 1).")
def _relu6_infer(args, attrs):
    (x,) = args
    if is_bool(x.dtype):
        fail("data must be numeric, got bool")
    return x


relu6 = register(Op(
    name="relax.nn.relu6", inputs=("data",), infer=_relu6_infer,
    reference=lambda x: np.clip(x, 0, 6).astype(x.dtype), decompose=lambda call: op.clip(call.args[0], 0, 6),
    gradient=through_decomposition,
    samples=[Sample([_T((3, 4), "float32")], low=-3.0, high=9.0), Sample([_T(("n", 5), "float64")], low=-3.0, high=9.0),
             Sample([_T((2, 6), "int32")], low=-9, high=12), Sample([_T((4,), "float16")], low=-3.0, high=9.0)],
    bad_samples=[BadSample([_T((3,), "bool")], {}, r"data must be numeric, got bool")],
    doc="``min(max(x, 0), 6)`` elementwise (TVM's ``nn.relu6``, which is ``clip(x, 0, 6)``); integers allowed. "
        "Composite: decomposed into ``clip``, whose gradient passes where ``0 <= x <= 6``."))


def _silu_ref(x):
    """``x * sigmoid(x)`` from ``exp(-|x|)``, which neither overflows nor cancels (``x / 2 * (1 + tanh(x / 2))``
    lost every digit below x = -35: 0 where PyTorch and the compiled code give -1e-20)."""
    e = np.exp(-np.abs(x))
    return x * np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


silu = unary("nn.silu", _silu_ref,
             input_name="data", grad=_silu_grad, scalar=lambda b, x: b.mul(x, sigmoid_scalar(b, x)),
             doc="``x * sigmoid(x)`` elementwise.")
gelu = unary("nn.gelu", lambda x: 0.5 * x * (1.0 + np_erf(x / math.sqrt(2.0))), input_name="data", grad=_gelu_grad,
             scalar=lambda b, x: b.mul(b.mul(0.5, x), b.add(1.0, b.erf(b.mul(x, 1.0 / math.sqrt(2.0))))),
             doc="GELU, exact erf form: ``0.5 * x * (1 + erf(x / sqrt(2)))``.")
gelu_tanh = unary("nn.gelu_tanh",
                  lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
                  input_name="data", grad=_gelu_tanh_grad, scalar=_gelu_tanh_scalar,
                  doc="GELU, tanh approximation: ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))``.")
leakyrelu = unary(
    "nn.leakyrelu", lambda x, alpha: np.where(x >= 0, x, alpha * x), input_name="data", attrs={"alpha": 0.01},
    check_attrs=lambda attrs: check_number(attrs, "alpha"), grad=_leakyrelu_grad,
    scalar=lambda b, x, alpha: b.select(b.cmp("ge", x, 0.0), x, b.mul(x, alpha)),
    samples=[Sample([_T(("n", 5), "float64")], {"alpha": 0.2}), Sample([_T((2, 2, 2), "float16")], {"alpha": 0.5})],
    bad_samples=[BadSample([_T((3,), "int32")], {}, r"data must have a float dtype, got int32"),
                 BadSample([_T((3,), "float32")], {"alpha": "big"}, r"'alpha' must be a number")],
    doc="``x if x >= 0 else alpha * x`` elementwise (float only); its gradient at 0 is 1, as relu's.")


def _softplus_ref(x, beta, threshold):
    bx = beta * x
    return np.where(bx > threshold, x, np.logaddexp(0.0, bx) / beta)


def _softplus_grad(y, call, g):
    # sigmoid(beta x) on the smooth side, 1 on the linear side (beta x > threshold)
    x, a = call.args[0], call.attrs
    bx = x * scalar(a["beta"], x)
    return [g * op.where(op.greater(bx, scalar(a["threshold"], x)), scalar(1.0, x), op.sigmoid(bx))]


def _softplus_scalar(b, x, beta, threshold):
    bx = b.mul(x, beta)
    return b.select(b.cmp("gt", bx, threshold), x, b.div(b.log1p(b.exp(bx)), beta))


def _softplus_check(attrs: dict) -> None:
    check_number(attrs, "beta", 0.0)
    check_number(attrs, "threshold")
    if attrs["beta"] == 0:
        raise ValueError("attribute 'beta' must be positive, got 0")


softplus = unary(
    "nn.softplus", _softplus_ref, input_name="data", attrs={"beta": 1.0, "threshold": 20.0},
    check_attrs=_softplus_check, grad=_softplus_grad, scalar=_softplus_scalar,
    samples=[Sample([_T((4, 5), "float64")], {"beta": 2.0, "threshold": 1.0}, low=-3.0, high=3.0),
             Sample([_T(("n", 3), "float32")], {"beta": 0.5}, low=-30.0, high=30.0)],
    bad_samples=[BadSample([_T((3,), "float32")], {"beta": 0.0}, r"'beta' must be positive"),
                 BadSample([_T((3,), "float32")], {"threshold": "x"}, r"'threshold' must be a number")],
    doc="``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold`` (TVM's and "
        "PyTorch's ``softplus(data, beta=1.0, threshold=20.0)``). Gradient: ``sigmoid(beta * x)``, 1 on the linear "
        "side.")


# -- PReLU ---------------------------------------------------------------------------------------------------------

def _prelu_infer(args, attrs):
    x, alpha = args
    require_float(x, "data")
    require_same_dtype(args, ("data", "alpha"))
    require_ndim(alpha, 1, "alpha")
    if x.ndim == -1:
        return x
    axis = normalize_axis(attrs["axis"], x.ndim)
    if x.shape is not None and alpha.shape is not None and alpha.shape[0] != 1:
        check_dims_match(alpha.shape[0], x.shape[axis], f"alpha must have shape ({x.shape[axis]},) (data's axis "
                                                        f"{axis}) or (1,), got {fmt(alpha.shape)}")
    return x


def _prelu_ref(data, alpha, axis):
    shape = [1] * data.ndim
    shape[axis % data.ndim] = -1
    x = data.astype(_F64)
    return np.where(x > 0, x, x * alpha.astype(_F64).reshape(shape)).astype(data.dtype)


def _prelu_decompose(call):
    """``where(x > 0, x, x * alpha)``, alpha reshaped to broadcast along ``axis``; a one-element alpha (PyTorch's
    default ``nn.PReLU()``, one slope for every channel) is broadcast over all of ``x``."""
    x, alpha = call.args
    shape = known_shape(x, call.op.name)
    if sinfo_of(alpha).shape is not None and sinfo_of(alpha).shape[0] == 1:
        shape = (1,) * len(shape)
    slope = along(alpha, normalize_axis(call.attrs["axis"], len(shape)), shape)
    return op.where(op.greater(x, scalar(0, x)), x, x * slope)


prelu = register(Op(
    name="relax.nn.prelu", inputs=("data", "alpha"), attrs={"axis": 1}, infer=_prelu_infer, reference=_prelu_ref,
    gradient=through_decomposition, decompose=_prelu_decompose,
    samples=[Sample([_T((2, 3, 4), "float32"), _T((3,), "float32")]),
             Sample([_T(("n", 5), "float64"), _T((5,), "float64")], {"axis": -1}),
             Sample([_T((4, 2), "float16"), _T((4,), "float16")], {"axis": 0}),
             Sample([_T((2, 3, 4), "float32"), _T((1,), "float32")]),  # one slope shared by every channel
             Sample([_T(("n", "c", 3), "float32"), _T((1,), "float32")])],
    bad_samples=[BadSample([_T((2, 3), "float32"), _T((2,), "float32")], {},
                           r"alpha must have shape \(3,\) \(data's axis 1\) or \(1,\), got \(2,\)"),
                 BadSample([_T((2, 3), "float32"), _T((3, 1), "float32")], {}, r"alpha must have rank 1"),
                 BadSample([_T((2, 3), "int32"), _T((3,), "int32")], {}, r"data must have a float dtype"),
                 BadSample([_T((2, 3), "float32"), _T((3,), "float32")], {"axis": 2}, r"axis 2 is out of range")],
    doc="Parametric ReLU (TVM's ``prelu(data, alpha, axis=1)``): ``x if x > 0 else alpha[c] * x`` with ``c`` the "
        "index along ``axis``; a one-element ``alpha`` is one slope for every element, as TVM broadcasts it. "
        "Composite: decomposed into ``where``; its gradient is the decomposition's."))


# -- Softmax ----------------------------------------------------------------------------------------------------------

def _softmax_infer(args, attrs):
    (x,) = args
    require_float(x, "data")
    if x.ndim != -1:
        normalize_axis(attrs["axis"], x.ndim)
    return x


def _log_softmax64(x: np.ndarray, axis: int) -> np.ndarray:
    # Subtracting the max keeps exp() from overflowing; the result is exact in exact arithmetic. An empty axis
    # has no max (and nothing to normalize): its result is empty too.
    if x.shape[axis] == 0:
        return x.copy()
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def _softmax_grad(orig, call, grad):
    # y = softmax(x): x_grad = (g - sum(g * y, axis)) * y
    return [(grad - op.sum(grad * orig, call.attrs["axis"], True)) * orig]


def _log_softmax_grad(orig, call, grad):
    # y = log_softmax(x): x_grad = g - exp(y) * sum(g, axis)
    return [grad - op.exp(orig) * op.sum(grad, call.attrs["axis"], True)]


def _softmax_op(name: str, fn, gradient, doc: str) -> Op:
    samples = [Sample([_T((2, 5), "float32")]), Sample([_T(("n", 4), "float32")], {"axis": 0}),
               Sample([_T((2, 3, 4), "float64")], {"axis": 1}), Sample([_T((3, "m"), "float16")], {"axis": -1}),
               Sample([_T((4,), "bfloat16")]), Sample([_T((2, 3), "float32")], low=-80.0, high=80.0),
               Sample([_T((3, 0), "float32")])]  # an empty axis: an empty result
    bad = [BadSample([_T((2, 3), "int32")], {}, r"data must have a float dtype, got int32"),
           BadSample([_T((2, 3), "float32")], {"axis": 2}, r"axis 2 is out of range for a tensor of rank 2"),
           BadSample([_T((), "float32")], {}, r"axis -1 is out of range for a tensor of rank 0")]
    return register(Op(name=f"relax.nn.{name}", inputs=("data",), attrs={"axis": -1}, infer=_softmax_infer,
                       reference=lambda x, axis: np.asarray(fn(x.astype(_F64), axis)).astype(x.dtype),
                       gradient=gradient, lowering=f"nn:{name}", samples=samples, bad_samples=bad, doc=doc))


softmax = _softmax_op("softmax", lambda v, axis: np.exp(_log_softmax64(v, axis)), _softmax_grad,
                      "``exp(x) / sum(exp(x), axis)``, computed stably (the max along ``axis`` is subtracted).")
log_softmax = _softmax_op("log_softmax", _log_softmax64, _log_softmax_grad,
                          "``x - log(sum(exp(x), axis))``, computed stably; the input of ``nll_loss``.")

