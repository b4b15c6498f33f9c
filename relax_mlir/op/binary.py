"""Binary elementwise ops with NumPy broadcasting (one line each through :func:`binary`), and ``where``.

Gradient rules are ``grad(a, b, g, y) -> (a_grad, b_grad)`` on the broadcast shape; :func:`binary` sums each
down to its operand's shape (only where broadcasting made it bigger) and gives integer operands no gradient.
Ties follow TVM: ``maximum`` gives the gradient to ``x1`` where ``x1 == x2``, ``minimum`` to ``x2``.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from ..ir.dtype import from_numpy, is_bool, is_float, to_numpy
from ..ir.expr import Constant, Expr, const
from ..ir.struct_info import TensorStructInfo
from . import grad_utils as gu
from .common import broadcast_shapes, fmt, require_same_dtype
from .registry import NOT_DIFFERENTIABLE, BadSample, Elementwise, Op, Sample, fail, register

_T = TensorStructInfo


def common_dtype(a: str, b: str) -> str:
    """The dtype a comparison of ``a`` and ``b`` values computes in: NumPy's ``result_type`` (float32 and int32:
    float64, uint8 and int8: int16). Pairs NumPy gives none (bfloat16 and an integer or float16) are refused."""
    if a == b:
        return a
    try:
        return from_numpy(np.result_type(to_numpy(a), to_numpy(b)))
    except (TypeError, ValueError):  # NumPy's DTypePromotionError is a TypeError
        fail(f"operands of dtypes x1: {a} and x2: {b} have no common dtype to compare in (NumPy's result_type); "
             "astype one of them")


def _binary_infer(kind: str):
    def infer(args, attrs):
        a, b = args
        # Comparisons take operands of different dtypes, as TVM's do: both are promoted to their common dtype.
        dtype = common_dtype(a.dtype, b.dtype) if kind == "compare" else require_same_dtype([a, b], ["x1", "x2"])
        if kind == "float" and not is_float(dtype):
            fail(f"operands must have a float dtype, got {dtype}")
        if kind in ("arith", "float") and is_bool(dtype):
            fail("operands must be numeric, got bool")
        ndim = -1 if -1 in (a.ndim, b.ndim) else max(a.ndim, b.ndim)
        _refuse_unknown_broadcast(a.shape, b.shape)
        shape = broadcast_shapes(a.shape, b.shape)
        return TensorStructInfo(shape, "bool" if kind == "compare" else dtype, ndim)
    return infer


def _refuse_unknown_broadcast(x1, x2) -> None:
    """Refuse two dims that neither are 1 nor can be proven equal, one of them symbolic (``(n, m)`` and ``(p, q)``).
    TVM infers only the rank there (``R.Tensor(ndim=2)``); here that unknown shape would compile to code that
    assumes the sizes equal (the broadcast the op was written for fails at run time) and could not be a function's
    result, so the op is refused where it is written, with the cast that makes it compile."""
    if x1 is None or x2 is None:
        return
    for d1, d2 in zip(reversed(x1), reversed(x2)):
        if 1 in (d1, d2) or d1 == d2 or isinstance(d1, int) and isinstance(d2, int):
            continue  # (two different ints: broadcast_shapes's own message)
        cast, to = (d1, d2) if isinstance(d2, int) else (d2, d1)  # (the symbolic one, to the other)
        fail(f"cannot broadcast shapes {fmt(x1)} and {fmt(x2)}: dims {d1} and {d2} may differ or be 1; match_cast an "
             f"operand to the size it has first ({cast} as {to}, or as 1 where it broadcasts). TVM infers only the "
             f"rank here (R.Tensor(ndim={max(len(x1), len(x2))})), a shape compiled code could neither broadcast at "
             "run time nor return")


def _samples(kind: str, low: float, high: float) -> list[Sample]:
    dtypes = ("float32", "float64", "float16", "bfloat16") if kind == "float" else \
        ("float32", "float64", "int32", "int64", "bfloat16")
    shapes = [((3, 4), (3, 4))] * len(dtypes)
    out = [Sample([_T(a, d), _T(b, d)], low=low, high=high) for (a, b), d in zip(shapes, dtypes)]
    for a, b in [((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((), (2, 2)), (("n", 4), (4,)), (("n", 1), ("n", 3))]:
        out.append(Sample([_T(a, "float32"), _T(b, "float32")], low=low, high=high))
    if kind == "compare":  # operands of different dtypes compare in their common one (TVM accepts them)
        out += [Sample([_T((4,), "bool"), _T((4,), "bool")]),
                Sample([_T((3, 4), "float32"), _T((4,), "int32")], low=-3, high=3),
                Sample([_T(("n",), "int64"), _T((), "float64")], low=-3, high=3),
                Sample([_T((2, 2), "int8"), _T((2, 2), "uint8")], low=0, high=5)]
    return out


def _bad(kind: str) -> list[BadSample]:
    out = [BadSample([_T((3,), "float32"), _T((4,), "float32")], {}, r"cannot broadcast shapes \(3,\) and \(4,\)"),
           BadSample([_T(("n",), "float32"), _T(("m",), "float32")], {}, r"cannot broadcast .* may differ"),
           BadSample([_T(("n", "m"), "float32"), _T(("p", "q"), "float32")], {},
                     r"dims m and q may differ or be 1; match_cast .*\(q as m, .*TVM infers only the rank here "
                     r"\(R\.Tensor\(ndim=2\)\)")]
    if kind == "compare":
        out.append(BadSample([_T((3,), "bfloat16"), _T((3,), "int32")], {},
                             r"x1: bfloat16 and x2: int32 have no common dtype to compare in"))
    else:  # arithmetic refuses operands of different dtypes, as TVM does
        out.append(BadSample([_T((3,), "float32"), _T((3,), "int32")], {}, r"same dtype, got x1: float32, x2: int32"))
    if kind == "float":
        out.append(BadSample([_T((3,), "int32"), _T((3,), "int32")], {}, r"must have a float dtype, got int32"))
    if kind == "arith":
        out.append(BadSample([_T((3,), "bool"), _T((3,), "bool")], {}, r"must be numeric, got bool"))
    return out


def _compare_ref(fn):
    def ref(a, b):
        common = to_numpy(common_dtype(from_numpy(a.dtype), from_numpy(b.dtype)))
        return np.asarray(fn(a.astype(common, copy=False), b.astype(common, copy=False)))
    return ref


def _promoted(call) -> Optional[Expr]:
    """The export's rewrite of a comparison of operands of different dtypes into one of both cast to their common
    dtype (``common_dtype``), which the dialect op and its lowering take: ``less(astype(x1, "float64"), astype(x2,
    "float64"))`` for float32 and int32 operands."""
    from .unary import astype  # unary.py imports this module

    a, b = call.args
    da, db = a.struct_info.dtype, b.struct_info.dtype
    if da == db:
        return None
    common = common_dtype(da, db)
    return call.op(*(x if d == common else astype(x, common) for x, d in ((a, da), (b, db))))


def _arith_ref(fn):
    def ref(a, b):
        return np.asarray(fn(a, b)).astype(np.result_type(a, b))
    return ref


def _binary_rule(rule: Callable) -> Callable:
    def gradient(orig, call, grad):
        a, b = call.args
        if not gu.is_float_expr(orig):
            return [None, None]
        grads = rule(a, b, grad, orig)
        return [None if d is None or not gu.is_float_expr(x) else gu.unbroadcast(d, x.struct_info)
                for x, d in zip((a, b), grads)]
    return gradient


def binary(name: str, fn, scalar: Callable, kind: str = "arith", doc: str = "", low: float = -2.0,
           high: float = 2.0, grad: Optional[Callable] = None, widen: bool = False,
           unsigned: Optional[str] = "aware", export_rewrite: Optional[Callable] = None) -> Op:
    """Register ``relax.<name>``: ``kind`` is ``"arith"`` (numeric, same dtype out), ``"float"`` (float
    only), or ``"compare"`` (any dtype, bool out, not differentiable). ``low``/``high``: the samples' domain.
    ``grad(a, b, g, y)`` is the gradient rule (see the module docstring). ``scalar(b, x1, x2)`` is the lowering
    with the backend's scalar builder (``registry.Elementwise``); ``widen`` computes half floats in f32, for the
    ops whose f16 result would differ from the rounded exact one. ``unsigned``: the record's field (``registry.Op``);
    most binary ops depend on the sign of integers (comparisons, division), the default; float-only ops have none."""
    return register(Op(
        name=f"relax.{name}", inputs=("x1", "x2"), infer=_binary_infer(kind),
        reference=_compare_ref(fn) if kind == "compare" else _arith_ref(fn),
        gradient=NOT_DIFFERENTIABLE if kind == "compare" else None if grad is None else _binary_rule(grad),
        lowering=Elementwise(scalar, widen=widen), unsigned=None if kind == "float" else unsigned,
        export_rewrite=_promoted if kind == "compare" else export_rewrite,
        samples=_samples(kind, low, high), bad_samples=_bad(kind), doc=doc or f"Elementwise {name} with broadcasting."))


def _divide(a, b):
    if np.issubdtype(a.dtype, np.integer):
        # Integer division truncates toward zero (C and MLIR's arith.divsi), not NumPy's floor: the floor quotient
        # moved up by one where the division is inexact and the signs differ (exact for every int64, where a
        # division through float64 is not). By zero: 0; the lowest value by -1: itself (as the compiled code).
        with np.errstate(divide="ignore", over="ignore"):
            q = np.floor_divide(a, b)
            inexact = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0)) & (b != 0)
        return np.asarray(q + inexact.astype(q.dtype))
    return np.true_divide(a, b)


def _floor_divide(a, b):
    if np.issubdtype(a.dtype, np.integer):
        with np.errstate(divide="ignore", over="ignore"):  # by zero: 0; the lowest value by -1: itself
            return np.floor_divide(a, b)
    return np.floor(a / b)


def _mod(a, b):
    """The remainder of the truncated division (C's ``fmod``, TVM's ``mod``: the sign of ``a``); integers by zero:
    0."""
    if np.issubdtype(a.dtype, np.integer):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(b == 0, 0, np.fmod(a, np.where(b == 0, 1, b))).astype(a.dtype)
    return np.fmod(a, b)


def _floor_mod(a, b):
    """The remainder of the floor division (Python's ``%``, TVM's ``floor_mod``: the sign of ``b``)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.remainder(a, b)


def _floor_mod_scalar(b, x, y):
    r = b.rem(x, y)  # the truncated remainder moves by y where it is non-zero and the signs differ
    differ = b.cmp("ne", b.cmp("lt", r, 0), b.cmp("lt", y, 0))
    moved = b.select(b.and_(b.cmp("ne", r, 0), differ), b.add(r, y), r)
    return b.select(b.cmp("eq", r, 0), b.copysign(r, y), moved)  # a zero takes y's sign, as in NumPy (rem gave x's)


def _mod_grad(rounding: str, a, b, g):
    """``a - q b`` with ``q`` the rounded quotient, piecewise constant: ``(g, -q g)``."""
    from . import unary

    return g, -(g * getattr(unary, rounding)(divide(a, b)))


def _zero(g):
    return gu.scalar(0, g)


def _square_root_of(call) -> Optional[Expr]:
    """The export's rewrite of ``power(x, 0.5)`` (a one-element constant exponent, the result of ``x``'s shape) into
    ``sqrt(x)`` for float32/float64: NumPy, and so the reference, take the square root for a broadcast exponent of 0.5
    there, as PyTorch does for ``x ** 0.5``, so ``(-inf) ** 0.5`` is NaN and ``(-0.0) ** 0.5`` is -0.0, where C's
    ``pow`` gives inf and 0.0. (Cheaper too.) An exponent array of 0.5s takes ``pow``'s path in NumPy as here."""
    from .unary import sqrt

    x, e = call.args
    if not isinstance(e, Constant) or e.data.size != 1 or float(e.data.reshape(-1)[0]) != 0.5:
        return None
    out, xs = call.struct_info, x.struct_info
    if out is None or xs is None or out.shape is None or xs.shape is None or tuple(out.shape) != tuple(xs.shape):
        return None
    return sqrt(x) if xs.dtype in ("float32", "float64") else None  # NumPy's half floats take pow's path


def _power_grad(a, b, g, y):
    """``d/da a^b = b a^(b-1)``, ``d/db a^b = log(a) a^b`` (real only for a > 0). A constant exponent is
    lowered by one at compile time, and ``a^1`` is ``a``."""
    from .unary import log

    if isinstance(b, Constant):
        lowered = np.asarray(b.data) - 1
        da = b * a if np.all(lowered == 1) else b * power(a, const(lowered, gu.sinfo_of(b).dtype))
    else:
        da = b * power(a, b - gu.scalar(1, b))
    return g * da, g * y * log(a)


add = binary("add", np.add, lambda b, x, y: b.add(x, y),
             grad=lambda a, b, g, y: (g, g), unsigned="agnostic")
subtract = binary("subtract", np.subtract, lambda b, x, y: b.sub(x, y),
                  grad=lambda a, b, g, y: (g, -g), unsigned="agnostic")
multiply = binary("multiply", np.multiply, lambda b, x, y: b.mul(x, y),
                  grad=lambda a, b, g, y: (g * b, g * a), unsigned="agnostic")
divide = binary("divide", _divide, lambda b, x, y: b.div(x, y),
                doc="Elementwise division; on integers it truncates toward zero (by zero: 0, as NumPy's).",
                low=0.5, high=3.0, grad=lambda a, b, g, y: (g / b, -(g * y / b)))
# Piecewise constant in both operands: no gradient.
floor_divide = binary("floor_divide", _floor_divide, lambda b, x, y: b.floordiv(x, y), widen=True, low=0.5, high=3.0,
                      grad=lambda a, b, g, y: (None, None))
power = binary("power", np.power, lambda b, x, y: b.pow(x, y), widen=True, kind="float", low=0.5, high=2.0,
               grad=_power_grad, export_rewrite=_square_root_of)
maximum = binary("maximum", np.maximum, lambda b, x, y: b.max(x, y), grad=lambda a, b, g, y: (  # ties go to x1
    where(less(a, b), _zero(g), g), where(greater_equal(a, b), _zero(g), g)))
minimum = binary("minimum", np.minimum, lambda b, x, y: b.min(x, y), grad=lambda a, b, g, y: (  # ties go to x2
    where(greater_equal(a, b), _zero(g), g), where(less(a, b), _zero(g), g)))
mod = binary("mod", _mod, lambda b, x, y: b.rem(x, y), low=0.5, high=3.0, widen=True,
             doc="The remainder of the division truncated toward zero (C's ``fmod``; TVM's ``mod``): the sign of "
                 "``x1``; integers by zero give 0.",
             grad=lambda a, b, g, y: _mod_grad("trunc", a, b, g))
floor_mod = binary("floor_mod", _floor_mod, _floor_mod_scalar, low=0.5, high=3.0, widen=True,
                   doc="The remainder of the floor division (Python's ``%``; TVM's ``floor_mod``): the sign of "
                       "``x2``; integers by zero give 0.",
                   grad=lambda a, b, g, y: _mod_grad("floor", a, b, g))
def _atan2_grad(y, x, g, out):
    """``d atan2(y, x) = (x dy - y dx) / (x^2 + y^2)``; 0 at the origin, where it has none, as PyTorch's."""
    r2 = x * x + y * y
    origin = equal(r2, _zero(r2))
    scale = where(origin, _zero(g), g / where(origin, gu.scalar(1, r2), r2))
    return scale * x, -(scale * y)


atan2 = binary("atan2", np.arctan2, lambda b, y, x: b.atan2(y, x), kind="float", widen=True, grad=_atan2_grad,
               doc="The angle of the point ``(x2, x1)``: ``atan2(x1, x2)`` in ``[-pi, pi]`` with the quadrant from "
                   "both signs (TVM's ``atan2(x1, x2)``, NumPy's ``arctan2``; signed zeros and infinities as C's). "
                   "Float only. Gradient: ``(x2, -x1) / (x1^2 + x2^2)``, 0 at the origin (PyTorch's).")
equal = binary("equal", np.equal, lambda b, x, y: b.cmp("eq", x, y), kind="compare",
               unsigned="agnostic")
not_equal = binary("not_equal", np.not_equal, lambda b, x, y: b.cmp("ne", x, y), kind="compare",
                   unsigned="agnostic")
less = binary("less", np.less, lambda b, x, y: b.cmp("lt", x, y), kind="compare")
less_equal = binary("less_equal", np.less_equal, lambda b, x, y: b.cmp("le", x, y), kind="compare")
greater = binary("greater", np.greater, lambda b, x, y: b.cmp("gt", x, y), kind="compare")
greater_equal = binary("greater_equal", np.greater_equal, lambda b, x, y: b.cmp("ge", x, y), kind="compare")


def _where_infer(args, attrs):
    cond, a, b = args
    if not is_bool(cond.dtype):
        fail(f"condition must have dtype bool, got {cond.dtype}")
    dtype = require_same_dtype([a, b], ["x1", "x2"])
    ndim = -1 if -1 in (cond.ndim, a.ndim, b.ndim) else max(cond.ndim, a.ndim, b.ndim)
    return TensorStructInfo(broadcast_shapes(cond.shape, a.shape, b.shape), dtype, ndim)


def _where_grad(orig, call, grad):
    cond, a, b = call.args
    if not gu.is_float_expr(orig):
        return [None, None, None]
    zero = _zero(grad)
    return [None, gu.unbroadcast(where(cond, grad, zero), a.struct_info),
            gu.unbroadcast(where(cond, zero, grad), b.struct_info)]


where = register(Op(
    name="relax.where", unsigned="agnostic", inputs=("condition", "x1", "x2"), infer=_where_infer,
    reference=lambda c, a, b: np.where(c, a, b).astype(np.result_type(a, b)), gradient=_where_grad,
    lowering=Elementwise(lambda b, c, x, y: b.select(c, x, y), widen=False),
    no_grad_inputs=("condition",),
    samples=[Sample([_T((3, 4), "bool"), _T((3, 4), "float32"), _T((3, 4), "float32")]),
             Sample([_T((3, 1), "bool"), _T((4,), "float64"), _T((), "float64")]),
             Sample([_T(("n", 4), "bool"), _T(("n", 4), "int32"), _T((4,), "int32")])],
    bad_samples=[BadSample([_T((3,), "float32"), _T((3,), "float32"), _T((3,), "float32")], {},
                           r"condition must have dtype bool, got float32"),
                 BadSample([_T((3,), "bool"), _T((2,), "float32"), _T((3,), "float32")], {},
                           r"cannot broadcast shapes \(3,\), \(2,\) and \(3,\)")],
    doc="``condition ? x1 : x2`` elementwise, with broadcasting of all three."))
