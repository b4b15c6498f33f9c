"""Unary elementwise ops (one line each through :func:`unary`), ``astype`` and ``clip``."""

from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

import numpy as np

from ..ir.dtype import is_bool, to_numpy
from ..ir.struct_info import TensorStructInfo
from .common import canonical_dtype, np_erf, require_float
from .registry import BadSample, InferError, Op, Sample, fail, register

_T = TensorStructInfo
_FLOATS = ("float32", "float64", "float16")


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
          bad_samples: Sequence[BadSample] = (), doc: str = "") -> Op:
    """Register an elementwise op ``relax.<name>`` whose output has the input's shape and dtype.

    ``fn(x, **attrs)`` computes it (in float64 when ``float_only``); ``input_name`` is the input's name
    (TVM's ``nn`` ops call it ``data``); ``attrs`` and ``check_attrs`` declare and validate attributes
    (``leakyrelu``'s ``alpha``). ``samples``/``bad_samples`` add to the generated ones."""
    return register(Op(
        name=f"relax.{name}", inputs=(input_name,), attrs=dict(attrs or {}), check_attrs=check_attrs,
        infer=_unary_infer(input_name, float_only, allow_bool), reference=_compute(fn) if float_only else fn,
        samples=_default_samples(float_only, low, high) + list(samples),
        bad_samples=_default_bad(input_name, float_only, allow_bool) + list(bad_samples),
        doc=doc or f"Elementwise {name.split('.')[-1]}."))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


abs = unary("abs", np.abs, float_only=False)  # noqa: A001 - the op is called abs, as in TVM
negative = unary("negative", np.negative, float_only=False)
exp = unary("exp", np.exp)
log = unary("log", np.log, low=0.1, high=4.0)
sqrt = unary("sqrt", np.sqrt, low=0.1, high=4.0)
rsqrt = unary("rsqrt", lambda x: 1.0 / np.sqrt(x), low=0.1, high=4.0)
sin = unary("sin", np.sin)
cos = unary("cos", np.cos)
tanh = unary("tanh", np.tanh)
sigmoid = unary("sigmoid", _sigmoid)
square = unary("square", np.square, float_only=False, low=-3, high=3)
erf = unary("erf", np_erf)
floor = unary("floor", np.floor)
ceil = unary("ceil", np.ceil)


def _astype_infer(args, attrs):
    (x,) = args
    return TensorStructInfo(x.shape, attrs["dtype"], x.ndim)


astype = register(Op(
    name="relax.astype", inputs=("x",), attrs={"dtype": "float32"}, infer=_astype_infer,
    canonicalize=canonical_dtype,
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
    name="relax.clip", inputs=("x",), attrs={"min": -math.inf, "max": math.inf}, infer=_clip_infer,
    check_attrs=_clip_check,
    reference=lambda x, min, max: np.clip(x, min, max).astype(x.dtype),
    samples=[Sample([_T((3, 4), "float32")], {"min": -0.5, "max": 1.0}),
             Sample([_T(("n",), "int32")], {"min": -2, "max": 3}, low=-6, high=6)],
    bad_samples=[BadSample([_T((3,), "float32")], {"min": 2.0, "max": 1.0}, r"min \(2.0\) must not exceed max"),
                 BadSample([_T((3,), "bool")], {"min": 0, "max": 1}, r"must be numeric")],
    doc="Clamp every element to ``[min, max]``."))
