"""Unary elementwise ops (one line each through :func:`unary`), ``astype`` and ``clip``.

Gradient rules are ``grad(y, call, g) -> [x_grad]`` with ``y`` the result, ``call`` the call and ``g`` the
result's adjoint; :func:`unary` skips them (no gradient) for integer and boolean inputs. Conventions at kinks:
``abs'(0) = +1`` (TVM: ``where(x < 0, -1, 1)``), ``clip`` passes the gradient on its bounds
(``min <= x <= max``, as PyTorch's clamp), ``floor``/``ceil`` have zero gradient (None).
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

import numpy as np

from ..ir.dtype import is_bool, to_numpy
from ..ir.struct_info import TensorStructInfo
from . import grad_utils as gu
from .common import canonical_dtype, np_erf, require_float
from .registry import REQUIRED, BadSample, Elementwise, InferError, Op, Sample, fail, register

_T = TensorStructInfo
_FLOATS = ("float32", "float64", "float16", "bfloat16")


def _compute(fn):
    """Evaluate ``fn`` in float64 and cast back to the input's dtype: the reference is exact-ish."""
    def ref(x, **attrs):
        return np.asarray(fn(x.astype(np.float64), **attrs)).astype(x.dtype)
    return ref


def _unary_infer(input_name: str, float_only: bool, allow_bool: bool):
    def infer(args, attrs):
        (x,) = args
        if float_only:
            require_float(x, input_name)
        if not allow_bool and is_bool(x.dtype):
            fail(f"{input_name} must be numeric, got bool")
        return x
    return infer


def _default_samples(float_only: bool, low: float, high: float) -> list[Sample]:
    samples = [Sample([_T((2, 3), d)], low=low, high=high) for d in _FLOATS]
    samples += [Sample([_T(("n", 4), "float32")], low=low, high=high), Sample([_T((), "float32")], low=low, high=high)]
    if not float_only:
        samples += [Sample([_T((5,), "int32")], low=-5, high=5), Sample([_T((2, 2), "int64")], low=-5, high=5)]
    return samples


def _default_bad(input_name: str, float_only: bool, allow_bool: bool) -> list[BadSample]:
    bad = []
    if float_only:
        bad.append(BadSample([_T((2, 3), "int32")], {}, r"must have a float dtype, got int32"))
    bad.append(BadSample([[_T((2,), "float32")]], {}, rf"argument '{input_name}' must be a tensor, got Tuple"))
    if not allow_bool:
        bad.append(BadSample([_T((2,), "bool")], {}, r"must (be numeric|have a float dtype), got bool"))
    return bad


def unary(name: str, fn, *, float_only: bool = True, allow_bool: bool = False, low: float = -2.0,
          high: float = 2.0, input_name: str = "x", attrs: Optional[dict] = None,
          check_attrs: Optional[Callable[[dict], None]] = None, samples: Sequence[Sample] = (),
          bad_samples: Sequence[BadSample] = (), doc: str = "", grad: Optional[Callable] = None,
          scalar: Optional[Callable] = None, unsigned: Optional[str] = None) -> Op:
    """Register an elementwise op ``relax.<name>`` whose output has the input's shape and dtype.

    ``fn(x, **attrs)`` computes it (in float64 when ``float_only``); ``input_name`` is the input's name
    (TVM's ``nn`` ops call it ``data``); ``attrs`` and ``check_attrs`` declare and validate attributes
    (``leakyrelu``'s ``alpha``). ``samples``/``bad_samples`` add to the generated ones. ``grad(y, call, g)``
    returns ``[x_grad]`` (see the module docstring); it only runs on float inputs. ``scalar(b, x, **attrs)`` is the
    lowering, one element at a time with the backend's scalar builder ``b`` (see ``registry.Elementwise``);
    half floats are computed in f32. ``unsigned``: the record's field (``registry.Op``)."""
    return register(Op(
        name=f"relax.{name}", inputs=(input_name,), attrs=dict(attrs or {}), check_attrs=check_attrs,
        gradient=None if grad is None else _float_input_rule(grad),
        lowering=None if scalar is None else Elementwise(scalar), unsigned=unsigned,
        infer=_unary_infer(input_name, float_only, allow_bool), reference=_compute(fn) if float_only else fn,
        samples=_default_samples(float_only, low, high) + list(samples),
        bad_samples=_default_bad(input_name, float_only, allow_bool) + list(bad_samples),
        doc=doc or f"Elementwise {name.split('.')[-1]}."))


def _float_input_rule(rule: Callable) -> Callable:
    def gradient(orig, call, grad):
        return rule(orig, call, grad) if gu.is_float_expr(call.args[0]) else [None]
    return gradient


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def sigmoid_scalar(b, x):
    """``1 / (1 + exp(-x))`` with the backend's scalar builder (``silu`` uses it too)."""
    return b.div(1.0, b.add(1.0, b.exp(b.neg(x))))


def _abs_grad(y, call, g):
    from .binary import less, where

    x = call.args[0]
    return [where(less(x, gu.scalar(0, x)), -g, g)]  # abs'(0) = +1, as TVM


def _clip_grad(y, call, g):
    """Pass ``g`` where ``min <= x <= max`` (on the bounds too, as PyTorch's clamp); an infinite bound
    masks nothing and emits no comparison."""
    from .binary import greater, less, where

    x, zero = call.args[0], gu.scalar(0, g)
    if call.attrs["max"] != math.inf:
        g = where(greater(x, gu.scalar(call.attrs["max"], x)), zero, g)
    if call.attrs["min"] != -math.inf:
        g = where(less(x, gu.scalar(call.attrs["min"], x)), zero, g)
    return [g]


def _astype_grad(y, call, g):
    """Cast the adjoint back to the input's dtype; no gradient into or out of integer and boolean values."""
    x = call.args[0]
    return [gu.cast_like(g, x) if gu.is_float_expr(x) and gu.is_float_expr(y) else None]


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _one(y):
    return gu.scalar(1, y)


abs = unary("abs", np.abs, float_only=False, scalar=lambda b, x: b.abs(x),  # noqa: A001 - the op is called abs, as in TVM
            grad=_abs_grad, unsigned="aware")
negative = unary("negative", np.negative, float_only=False, scalar=lambda b, x: b.neg(x),
                 grad=lambda y, call, g: [-g], unsigned="agnostic")
exp = unary("exp", np.exp, scalar=lambda b, x: b.exp(x), grad=lambda y, call, g: [g * y])
log = unary("log", np.log, scalar=lambda b, x: b.log(x), low=0.1, high=4.0, grad=lambda y, call, g: [g / call.args[0]])
sqrt = unary("sqrt", np.sqrt, scalar=lambda b, x: b.sqrt(x), low=0.1, high=4.0,  # 1 / (2 sqrt(x)) = 0.5 / y
             grad=lambda y, call, g: [g * gu.scalar(0.5, y) / y])
rsqrt = unary("rsqrt", lambda x: 1.0 / np.sqrt(x), scalar=lambda b, x: b.rsqrt(x),
              low=0.1, high=4.0,  # -0.5 x^(-3/2) = -0.5 y / x
              grad=lambda y, call, g: [g * (y * gu.scalar(-0.5, y)) / call.args[0]])
sin = unary("sin", np.sin, scalar=lambda b, x: b.sin(x), grad=lambda y, call, g: [g * cos(call.args[0])])
cos = unary("cos", np.cos, scalar=lambda b, x: b.cos(x), grad=lambda y, call, g: [-(g * sin(call.args[0]))])
tanh = unary("tanh", np.tanh, scalar=lambda b, x: b.tanh(x), grad=lambda y, call, g: [g * (_one(y) - y * y)])
sigmoid = unary("sigmoid", _sigmoid, scalar=sigmoid_scalar, grad=lambda y, call, g: [g * (y * (_one(y) - y))])
square = unary("square", np.square, float_only=False, scalar=lambda b, x: b.mul(x, x), low=-3, high=3,
               grad=lambda y, call, g: [g * (call.args[0] * gu.scalar(2, y))], unsigned="agnostic")
erf = unary("erf", np_erf, scalar=lambda b, x: b.erf(x),  # 2/sqrt(pi) exp(-x^2)
            grad=lambda y, call, g: [g * (gu.scalar(_TWO_OVER_SQRT_PI, y) * exp(-square(call.args[0])))])


def _integral(fn):
    """A rounding's reference: ``fn`` on floats, an integer tensor itself (as TVM's ``floor``/``ceil``/``trunc``,
    and NumPy's ``round``, take it; NumPy's ``floor`` would make it float64)."""
    def ref(x):
        return x.copy() if np.issubdtype(x.dtype, np.integer) else np.asarray(fn(x))
    return ref


# Piecewise constant: the derivative is 0 almost everywhere (undefined at the steps), so no gradient flows. Integer
# inputs are their own rounding (TVM's inference allows them and keeps their dtype).
floor = unary("floor", _integral(np.floor), float_only=False, scalar=lambda b, x: b.floor(x),
              grad=lambda y, call, g: [None], unsigned="agnostic",
              doc="Round down; integers are unchanged. Piecewise constant: no gradient.")
ceil = unary("ceil", _integral(np.ceil), float_only=False, scalar=lambda b, x: b.ceil(x),
             grad=lambda y, call, g: [None], unsigned="agnostic",
             doc="Round up; integers are unchanged. Piecewise constant: no gradient.")
round = unary("round", np.round, float_only=False, scalar=lambda b, x: b.round_even(x),  # noqa: A001 - TVM's name
              grad=lambda y, call, g: [None],
              doc="Round to the nearest integer, halves to even (NumPy's ``round``; TVM's ``round`` is LLVM's "
                  "``nearbyint``, the same); integers are unchanged. Piecewise constant: no gradient.")
sign = unary("sign", np.sign, float_only=False, grad=lambda y, call, g: [None], unsigned="aware",
             scalar=lambda b, x: b.select(b.cmp("gt", x, 0), 1, b.select(b.cmp("lt", x, 0), -1,
                                                                           b.select(b.cmp("eq", x, 0), 0, x))),
             doc="``-1``, ``0`` or ``1`` by the sign of each element (NaN stays NaN, ``-0.0`` gives ``0.0``, as "
                 "NumPy); integers allowed. Piecewise constant: no gradient.")

trunc = unary("trunc", _integral(np.trunc), float_only=False, scalar=lambda b, x: b.trunc(x),
              grad=lambda y, call, g: [None], unsigned="agnostic",
              doc="Round toward zero; integers are unchanged. Piecewise constant: no gradient.")

# The rest of TVM's elementwise math; the gradients are the textbook derivatives, on the samples' domains.
_LN2, _LN10 = math.log(2.0), math.log(10.0)


def _x(call):
    return call.args[0]


tan = unary("tan", np.tan, scalar=lambda b, x: b.tan(x), low=-1.2, high=1.2,
            grad=lambda y, call, g: [g * (_one(y) + y * y)])
asin = unary("asin", np.arcsin, scalar=lambda b, x: b.asin(x), low=-0.9, high=0.9,
             grad=lambda y, call, g: [g * rsqrt(_one(y) - _x(call) * _x(call))])
acos = unary("acos", np.arccos, scalar=lambda b, x: b.acos(x), low=-0.9, high=0.9,
             grad=lambda y, call, g: [-(g * rsqrt(_one(y) - _x(call) * _x(call)))])
atan = unary("atan", np.arctan, scalar=lambda b, x: b.atan(x), low=-3.0, high=3.0,
             grad=lambda y, call, g: [g / (_one(y) + _x(call) * _x(call))])
sinh = unary("sinh", np.sinh, scalar=lambda b, x: b.sinh(x), grad=lambda y, call, g: [g * cosh(_x(call))])
cosh = unary("cosh", np.cosh, scalar=lambda b, x: b.cosh(x), grad=lambda y, call, g: [g * sinh(_x(call))])
asinh = unary("asinh", np.arcsinh, scalar=lambda b, x: b.asinh(x), low=-3.0, high=3.0,
              grad=lambda y, call, g: [g * rsqrt(_x(call) * _x(call) + _one(y))])
acosh = unary("acosh", np.arccosh, scalar=lambda b, x: b.acosh(x), low=1.2, high=4.0,
              grad=lambda y, call, g: [g * rsqrt(_x(call) * _x(call) - _one(y))])
atanh = unary("atanh", np.arctanh, scalar=lambda b, x: b.atanh(x), low=-0.9, high=0.9,
              grad=lambda y, call, g: [g / (_one(y) - _x(call) * _x(call))])
log2 = unary("log2", np.log2, scalar=lambda b, x: b.log2(x), low=0.1, high=4.0,
             grad=lambda y, call, g: [g / (_x(call) * gu.scalar(_LN2, y))])
log10 = unary("log10", np.log10, scalar=lambda b, x: b.log10(x), low=0.1, high=4.0,
              grad=lambda y, call, g: [g / (_x(call) * gu.scalar(_LN10, y))])
log1p = unary("log1p", np.log1p, scalar=lambda b, x: b.log1p(x), low=-0.5, high=3.0,
              grad=lambda y, call, g: [g / (_one(y) + _x(call))])


def _astype_infer(args, attrs):
    (x,) = args
    return TensorStructInfo(x.shape, attrs["dtype"], x.ndim)


astype = register(Op(
    name="relax.astype", unsigned="aware", inputs=("x",), attrs={"dtype": REQUIRED}, infer=_astype_infer,
    canonicalize=canonical_dtype, gradient=_astype_grad, lowering="elementwise:astype",
    reference=lambda x, dtype: x.astype(to_numpy(dtype)),
    samples=[Sample([_T((2, 3), "float32")], {"dtype": "float64"}),
             Sample([_T(("n", 3), "float32")], {"dtype": "int32"}, low=-50, high=50),
             Sample([_T((4,), "int64")], {"dtype": "float32"}, low=-9, high=9),
             Sample([_T((4,), "float32")], {"dtype": "bool"}),
             Sample([_T((4,), "bool")], {"dtype": "float32"})],
    bad_samples=[BadSample([_T((2,), "float32")], {"dtype": "float8"}, r"unknown dtype 'float8'")],
    doc="Convert the elements to ``dtype`` (floats to ints truncate toward zero, as C and NumPy do)."))


def _clip_infer(args, attrs):
    (x,) = args
    if is_bool(x.dtype):
        fail("x must be numeric, got bool")
    return x


def _clip_check(attrs):
    lo, hi = attrs["min"], attrs["max"]
    for key in ("min", "max"):
        if not isinstance(attrs[key], (int, float)) or isinstance(attrs[key], bool):
            raise InferError(f"attribute {key!r} must be a number, got {attrs[key]!r}")
    if lo > hi:
        raise InferError(f"min ({lo}) must not exceed max ({hi})")


clip = register(Op(
    name="relax.clip", unsigned="aware", inputs=("x",), attrs={"min": -math.inf, "max": math.inf}, infer=_clip_infer,
    check_attrs=_clip_check, gradient=_float_input_rule(_clip_grad), lowering="elementwise:clip",
    reference=lambda x, min, max: np.clip(x, min, max).astype(x.dtype),
    samples=[Sample([_T((3, 4), "float32")], {"min": -0.5, "max": 1.0}),
             Sample([_T(("n",), "int32")], {"min": -2, "max": 3}, low=-6, high=6)],
    bad_samples=[BadSample([_T((3,), "float32")], {"min": 2.0, "max": 1.0}, r"min \(2.0\) must not exceed max"),
                 BadSample([_T((3,), "bool")], {"min": 0, "max": 1}, r"must be numeric")],
    doc="Clamp every element to ``[min, max]``; the gradient passes where ``min <= x <= max``."))
