"""Logical, bitwise and float-class ops (TVM's names): ``logical_and``/``or``/``xor``/``not`` on booleans,
``bitwise_and``/``or``/``xor``/``not`` on integers (and booleans, but ``bitwise_not``), ``isnan``/``isinf``/
``isfinite`` on floats (boolean results). None has a gradient: their results are booleans or integers."""

from __future__ import annotations

import numpy as np

from ..ir.dtype import is_bool, is_int
from ..ir.struct_info import TensorStructInfo
from .common import broadcast_shapes, require_float, require_same_dtype
from .registry import NOT_DIFFERENTIABLE, BadSample, Elementwise, Op, Sample, fail, register

_T = TensorStructInfo
_INTS = ("int8", "int32", "int64")


def _accepts(kind: str, dtype: str) -> bool:
    return is_bool(dtype) if kind == "logical" else is_int(dtype) or (kind == "bitwise" and is_bool(dtype))


def _expected(kind: str) -> str:
    return {"logical": "bool", "bitwise": "an integer or bool dtype", "bitwise_not": "an integer dtype",
            "float_class": "a float dtype"}[kind]


def _binary_infer(kind: str):
    def infer(args, attrs):
        a, b = args
        dtype = require_same_dtype([a, b], ["x1", "x2"])
        if not _accepts(kind, dtype):
            fail(f"operands must have {_expected(kind)}, got {dtype}")
        ndim = -1 if -1 in (a.ndim, b.ndim) else max(a.ndim, b.ndim)
        return TensorStructInfo(broadcast_shapes(a.shape, b.shape), dtype, ndim)
    return infer


def _binary(name: str, kind: str, fn, scalar) -> Op:
    dtypes = ("bool",) if kind == "logical" else _INTS + ("bool",)
    samples = [Sample([_T((3, 4), d), _T((3, 4), d)], low=-50, high=50) for d in dtypes]
    samples += [Sample([_T(("n", 1), dtypes[0]), _T((1, 5), dtypes[0])], low=-50, high=50)]
    wrong = "int32" if kind == "logical" else "float32"
    return register(Op(
        name=f"relax.{name}", inputs=("x1", "x2"), infer=_binary_infer(kind), reference=lambda a, b: fn(a, b),
        gradient=NOT_DIFFERENTIABLE, lowering=Elementwise(scalar, widen=False), samples=samples, unsigned="agnostic",
        bad_samples=[BadSample([_T((3,), wrong), _T((3,), wrong)], {}, rf"must have {_expected(kind)}, got {wrong}"),
                     BadSample([_T((3,), dtypes[0]), _T((4,), dtypes[0])], {}, r"cannot broadcast")],
        doc=f"Elementwise {name.replace('_', ' ')} ({_expected(kind)}), with broadcasting."))


logical_and = _binary("logical_and", "logical", np.logical_and, lambda b, x, y: b.and_(x, y))
logical_or = _binary("logical_or", "logical", np.logical_or, lambda b, x, y: b.or_(x, y))
logical_xor = _binary("logical_xor", "logical", np.logical_xor, lambda b, x, y: b.xor(x, y))
bitwise_and = _binary("bitwise_and", "bitwise", np.bitwise_and, lambda b, x, y: b.and_(x, y))
bitwise_or = _binary("bitwise_or", "bitwise", np.bitwise_or, lambda b, x, y: b.or_(x, y))
bitwise_xor = _binary("bitwise_xor", "bitwise", np.bitwise_xor, lambda b, x, y: b.xor(x, y))


def _unary(name: str, kind: str, fn, scalar, doc: str) -> Op:
    def infer(args, attrs):
        (x,) = args
        if kind == "float_class":
            require_float(x, "x")
            return TensorStructInfo(x.shape, "bool", x.ndim)
        if not _accepts(kind, x.dtype):
            fail(f"x must have {_expected(kind)}, got {x.dtype}")
        return x

    if kind == "float_class":
        dtypes, wrong = ("float32", "float64", "float16", "bfloat16"), "int32"
    else:
        dtypes, wrong = (("bool",), "int32") if kind == "logical" else (_INTS, "bool")
    samples = [Sample([_T((2, 3), d)], low=-50, high=50) for d in dtypes] + [Sample([_T(("n",), dtypes[0])])]
    return register(Op(
        name=f"relax.{name}", inputs=("x",), infer=infer, reference=lambda x: np.asarray(fn(x)),
        gradient=NOT_DIFFERENTIABLE, lowering=Elementwise(scalar, widen=kind == "float_class"), samples=samples,
        unsigned="agnostic",
        bad_samples=[BadSample([_T((3,), wrong)], {}, rf"x must have {_expected(kind)}, got {wrong}")],
        doc=doc))


logical_not = _unary("logical_not", "logical", np.logical_not, lambda b, x: b.xor(x, True),
                     "Elementwise logical not of booleans.")
bitwise_not = _unary("bitwise_not", "bitwise_not", np.invert, lambda b, x: b.xor(x, -1),
                     "Elementwise bitwise not of integers (``~x``).")
isnan = _unary("isnan", "float_class", np.isnan, lambda b, x: b.cmp("ne", x, x),
               "Whether each element is NaN (a boolean tensor).")
isinf = _unary("isinf", "float_class", np.isinf, lambda b, x: b.cmp("eq", b.abs(x), float("inf")),
               "Whether each element is +inf or -inf (a boolean tensor).")
isfinite = _unary("isfinite", "float_class", np.isfinite, lambda b, x: b.cmp("lt", b.abs(x), float("inf")),
                  "Whether each element is neither inf nor NaN (a boolean tensor).")
