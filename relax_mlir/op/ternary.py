"""TVM's ternary family: ``ewise_fma`` (``x1 * x2 + x3``, elementwise, no broadcasting)."""

from __future__ import annotations

import numpy as np

from ..ir.struct_info import TensorStructInfo
from . import grad_utils as gu
from .common import fmt, require_same_dtype
from .registry import BadSample, Elementwise, Op, Sample, fail, register

_T = TensorStructInfo


# -- ewise_fma ---------------------------------------------

def _fma_infer(args, attrs):
    """TVM's: three operands of one dtype and one shape (no broadcasting); sizes must be provably equal, as TVM's
    analyzer proves them (``n`` against ``m`` or ``3`` is refused: ``match_cast`` first)."""
    from ..ir.dtype import is_bool

    names = ("x1", "x2", "x3")
    dtype = require_same_dtype(args, names)
    if is_bool(dtype):
        fail("operands must be numeric, got bool")
    ranks = {a.ndim for a in args if a.ndim != -1}
    if len(ranks) > 1:
        fail("the 3 operands must have the same rank, got " + ", ".join(f"{n}: rank {a.ndim}"
                                                                         for n, a in zip(names, args)))
    if any(a.shape is None for a in args):
        return _T(None, dtype, ranks.pop() if ranks else -1)
    for n, a in zip(names[1:], args[1:]):
        if any(not (isinstance(d - e, int) and d - e == 0) for d, e in zip(a.shape, args[0].shape)):
            fail(f"the 3 operands must have the same shape (no broadcasting), got x1: {fmt(args[0].shape)}, "
                 + ", ".join(f"{m}: {fmt(b.shape)}" for m, b in zip(names[1:], args[1:])))
    return _T(args[0].shape, dtype)


def _fma_ref(x1, x2, x3):
    """``x1 * x2 + x3`` in the operands' dtype, each operation rounded (the compiled code's multiply then add; no
    fused rounding); half floats in float32, rounded once (as their lowering computes them)."""
    from ..ir.dtype import from_numpy

    if from_numpy(x1.dtype) in ("float16", "bfloat16"):
        wide = [np.asarray(x, np.float32) for x in (x1, x2, x3)]
        return (wide[0] * wide[1] + wide[2]).astype(x1.dtype)
    with np.errstate(over="ignore"):
        return np.asarray(x1 * x2 + x3, dtype=x1.dtype)


def _fma_grad(orig, call, grad):
    from . import multiply

    if not gu.is_float_expr(orig):
        return [None, None, None]
    x1, x2, _ = call.args
    return [multiply(grad, x2), multiply(grad, x1), grad]


def _fma_scalar(b, x1, x2, x3):
    return b.add(b.mul(x1, x2), x3)


ewise_fma = register(Op(
    name="relax.ewise_fma", inputs=("x1", "x2", "x3"), infer=_fma_infer, reference=_fma_ref, gradient=_fma_grad,
    lowering=Elementwise(_fma_scalar), unsigned="agnostic",
    samples=[Sample([_T((2, 3), "float32")] * 3),
             Sample([_T(("n", 4), "float64")] * 3),
             Sample([_T((3,), "int32")] * 3, low=-50, high=50),
             Sample([_T((2, 2), "float16")] * 3),
             Sample([_T((), "float32")] * 3)],
    bad_samples=[BadSample([_T((2, 3), "float32"), _T((2, 3), "float32"), _T((1, 3), "float32")], {},
                           r"same shape \(no broadcasting\), got x1: \(2, 3\), x2: \(2, 3\), x3: \(1, 3\)"),
                 BadSample([_T(("n",), "float32"), _T(("m",), "float32"), _T(("n",), "float32")], {},
                           r"same shape"),
                 BadSample([_T((2,), "float32"), _T((2,), "float64"), _T((2,), "float32")], {}, r"same dtype"),
                 BadSample([_T((2,), "float32"), _T((2, 1), "float32"), _T((2,), "float32")], {},
                           r"same rank, got x1: rank 1, x2: rank 2"),
                 BadSample([_T((2,), "bool")] * 3, {}, r"numeric, got bool")],
    doc="``x1 * x2 + x3`` elementwise (TVM's ``ewise_fma``): three operands of one dtype and one shape, no "
        "broadcasting. Computed as a multiply then an add (each rounded), as TVM's legalization writes it; half "
        "floats in float32, rounded once. Gradient: ``(g * x2, g * x1, g)``."))
