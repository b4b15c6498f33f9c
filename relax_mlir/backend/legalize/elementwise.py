"""Elementwise lowerings: one parallel ``linalg.generic`` per op (broadcasting through its indexing maps).

An elementwise op's record gives its scalar function (``relax_mlir.op.registry.Elementwise``); :func:`lower_elementwise`
maps it over the inputs with a :class:`ScalarBuilder`, whose methods pick the float, signed-integer or boolean form of
each operation from the element type. Float math on f16/bf16 is computed in f32 and rounded once at the end (the
record's ``widen``), as the NumPy references (which compute in float64) do. ``astype``, ``clip`` and the identity
markers are lowered by the named functions below.
"""

from __future__ import annotations

import math as pymath
from typing import Callable, Optional, Union

from mlir import ir
from mlir.dialects import arith, math

from ...op.registry import Elementwise
from .core import compute_type, convert, elem, int_cmp, is_float, map_elementwise, scalar, unsigned_in

Operand = Union[ir.Value, int, float, bool]


class ScalarBuilder:
    """Scalar operations on MLIR values for the records' scalar functions: ``b.add(x, 1)``, ``b.exp(x)``.

    Each picks its float or integer form from the operands' element type (booleans compare unsigned, as
    ``True > False``); a plain number becomes a constant of the other operand's type. An operation with no form
    for the type (``exp`` of an integer) fails naming the op and the type."""

    def __init__(self, fail: Callable[[str], None]):
        self._fail = fail

    def const(self, value: Union[int, float, bool], like: ir.Value) -> ir.Value:
        """``value`` as a constant of ``like``'s type."""
        return scalar(value, like.type)

    def _pair(self, a: Operand, b: Operand) -> tuple[ir.Value, ir.Value]:
        if not isinstance(a, ir.Value):
            a = self.const(a, b)
        if not isinstance(b, ir.Value):
            b = self.const(b, a)
        return a, b

    def _by_type(self, name: str, float_fn: Optional[Callable], int_fn: Optional[Callable], *xs: Operand):
        if len(xs) == 2:
            xs = self._pair(*xs)
        fn = float_fn if is_float(xs[0].type) else int_fn
        if fn is None:
            self._fail(f"{name} has no lowering for element type {elem(xs[0])}")
        return fn(*xs)

    # arithmetic
    def add(self, a: Operand, b: Operand) -> ir.Value:
        return self._by_type("add", arith.addf, arith.addi, a, b)

    def sub(self, a: Operand, b: Operand) -> ir.Value:
        return self._by_type("sub", arith.subf, arith.subi, a, b)

    def mul(self, a: Operand, b: Operand) -> ir.Value:
        return self._by_type("mul", arith.mulf, arith.muli, a, b)

    def div(self, a: Operand, b: Operand) -> ir.Value:
        """Float division; integer division truncating toward zero (C's), by zero 0 (see ``_int_division``)."""
        return self._by_type("div", arith.divf, lambda x, y: _int_division(arith.divsi, x, y), a, b)

    def floordiv(self, a: Operand, b: Operand) -> ir.Value:
        return self._by_type("floordiv", lambda x, y: math.floor(arith.divf(x, y)),
                             lambda x, y: _int_division(arith.floordivsi, x, y), a, b)

    def pow(self, a: Operand, b: Operand) -> ir.Value:
        return self._by_type("pow", math.powf, None, a, b)

    def max(self, a: Operand, b: Operand) -> ir.Value:
        """The larger; NaN if either is NaN."""
        return self._by_type("max", arith.maximumf, arith.maxui if unsigned_in() else arith.maxsi, a, b)

    def min(self, a: Operand, b: Operand) -> ir.Value:
        """The smaller; NaN if either is NaN."""
        return self._by_type("min", arith.minimumf, arith.minui if unsigned_in() else arith.minsi, a, b)

    def neg(self, x: ir.Value) -> ir.Value:
        return self._by_type("neg", arith.negf, lambda v: arith.subi(scalar(0, v.type), v), x)

    def abs(self, x: ir.Value) -> ir.Value:
        return self._by_type("abs", math.absf, (lambda v: v) if unsigned_in() else math.absi, x)

    def copysign(self, a: Operand, b: Operand) -> ir.Value:
        """``|a|`` with the sign of ``b``: a float's sign bit (``-0.0`` too), an integer's ``b < 0``."""
        return self._by_type("copysign", math.copysign,
                             lambda x, y: self.select(self.cmp("lt", y, 0), self.neg(self.abs(x)), self.abs(x)), a, b)

    # float functions
    def _math(self, name: str, x: ir.Value) -> ir.Value:
        return self._by_type(name, getattr(math, name), None, x)

    def exp(self, x): return self._math("exp", x)  # noqa: E704 - a table of one-line forwards
    def log(self, x): return self._math("log", x)  # noqa: E704
    def sqrt(self, x): return self._math("sqrt", x)  # noqa: E704
    def rsqrt(self, x): return self._math("rsqrt", x)  # noqa: E704
    def sin(self, x): return self._math("sin", x)  # noqa: E704
    def cos(self, x): return self._math("cos", x)  # noqa: E704
    def tanh(self, x): return self._math("tanh", x)  # noqa: E704
    def erf(self, x): return self._math("erf", x)  # noqa: E704
    def log2(self, x): return self._math("log2", x)  # noqa: E704
    def log10(self, x): return self._math("log10", x)  # noqa: E704
    def tan(self, x): return self._math("tan", x)  # noqa: E704
    def asin(self, x): return self._math("asin", x)  # noqa: E704
    def acos(self, x): return self._math("acos", x)  # noqa: E704
    def atan(self, x): return self._math("atan", x)  # noqa: E704
    def atan2(self, y, x): return self._by_type("atan2", math.atan2, None, y, x)  # noqa: E704 - libm's atan2
    def sinh(self, x): return self._math("sinh", x)  # noqa: E704
    def cosh(self, x): return self._math("cosh", x)  # noqa: E704
    def asinh(self, x): return self._math("asinh", x)  # noqa: E704
    def acosh(self, x): return self._math("acosh", x)  # noqa: E704
    def atanh(self, x): return self._math("atanh", x)  # noqa: E704

    def log1p(self, x: ir.Value) -> ir.Value:
        """``log(1 + x)`` to within a few ulps for tiny ``x`` too: MLIR lowers ``math.log1p`` to LLVM as
        ``log(1 + x)``, which rounds ``1 + x`` first (0 for ``|x|`` below half an ulp of 1, 19% off at 1e-7 in
        float32). Kahan's correction instead: with ``u = 1 + x``, ``x`` where ``u == 1``, else ``log(u) * x / (u -
        1)`` (the rounding of ``u`` cancels in the ratio); ``u`` itself where it is infinite."""
        if not is_float(x.type):
            self._fail(f"log1p has no lowering for element type {elem(x)}")
        u = self.add(1.0, x)
        ratio = self.mul(self.log(u), self.div(x, self.sub(u, 1.0)))
        return self.select(self.cmp("eq", u, 1.0), x, self.select(self.cmp("eq", u, float("inf")), u, ratio))

    def rem(self, a: Operand, b: Operand) -> ir.Value:
        """The remainder of the truncated division (C's ``fmod``: the sign of ``a``); on integers by zero 0."""
        return self._by_type("rem", arith.remf, lambda x, y: _int_division(arith.remsi, x, y), a, b)

    # bits (integers and booleans)
    def and_(self, a: Operand, b: Operand) -> ir.Value:
        return self._by_type("and", None, arith.andi, a, b)

    def or_(self, a: Operand, b: Operand) -> ir.Value:
        return self._by_type("or", None, arith.ori, a, b)

    def xor(self, a: Operand, b: Operand) -> ir.Value:
        return self._by_type("xor", None, arith.xori, a, b)

    def floor(self, x: ir.Value) -> ir.Value:
        """Round down (an integer is its own rounding, as for the three below)."""
        return self._by_type("floor", math.floor, lambda v: v, x)

    def ceil(self, x: ir.Value) -> ir.Value:
        return self._by_type("ceil", math.ceil, lambda v: v, x)

    def trunc(self, x: ir.Value) -> ir.Value:
        return self._by_type("trunc", math.trunc, lambda v: v, x)

    def round_even(self, x: ir.Value) -> ir.Value:
        """To the nearest integer, halves to even (an integer is its own rounding)."""
        return self._by_type("round_even", math.roundeven, lambda v: v, x)

    # comparison and selection
    _FLOAT_PREDICATES = {"eq": "OEQ", "ne": "UNE", "lt": "OLT", "le": "OLE", "gt": "OGT", "ge": "OGE"}

    def cmp(self, predicate: str, a: Operand, b: Operand) -> ir.Value:
        """``a <predicate> b`` as a bool, ``predicate`` one of eq, ne, lt, le, gt, ge. Floats compare ordered
        (NaN is unequal to everything: ``ne`` is true for it, as in NumPy), integers signed (unsigned where the op's
        are), booleans unsigned."""
        if predicate not in self._FLOAT_PREDICATES:
            known = ", ".join(self._FLOAT_PREDICATES)
            raise ValueError(f"cmp: unknown predicate {predicate!r}; expected one of {known}")
        a, b = self._pair(a, b)
        if is_float(a.type):
            return arith.cmpf(getattr(arith.CmpFPredicate, self._FLOAT_PREDICATES[predicate]), a, b)
        return int_cmp(predicate, a, b)

    def select(self, condition: ir.Value, a: Operand, b: Operand) -> ir.Value:
        a, b = self._pair(a, b)
        return arith.select(condition, a, b)


def lower_elementwise(spec: Elementwise) -> Callable:
    """The lowering of an op whose record's ``lowering`` is ``spec``: its scalar function mapped over the inputs."""
    def rule(lc, op):
        out = elem(lc.result_type)
        builder = ScalarBuilder(lc.fail)

        def fn(*xs: ir.Value) -> ir.Value:
            if spec.widen:
                xs = tuple(convert(x, compute_type(x.type)) if is_float(x.type) else x for x in xs)
            y = spec.scalar(builder, *xs, **lc.attrs)
            return convert(y, out) if y.type != out else y
        return map_elementwise(lc.inputs, lc.result_type, fn)
    return rule


def astype(lc, op):
    """A conversion per element, with NumPy's astype semantics (``convert``)."""
    out = elem(lc.result_type)
    return map_elementwise(lc.inputs, lc.result_type, lambda x: convert(x, out))


def clip(lc, op):
    """``min(max(x, lo), hi)``; integers clip to the bounds truncated toward zero, as ``np.clip`` then astype."""
    lo, hi = lc.attrs["min"], lc.attrs["max"]
    x = lc.inputs[0]
    if is_float(x.type):
        def fn(v):
            return arith.minimumf(arith.maximumf(v, scalar(lo, v.type)), scalar(hi, v.type))
        return map_elementwise([x], lc.result_type, fn)

    def fn_int(v):
        # np.clip then astype: below ceil(lo) gives trunc(lo), above floor(hi) gives trunc(hi)
        bits = elem(v).width
        low, high = (0, (1 << bits) - 1) if unsigned_in() else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        if pymath.isfinite(lo) and lo > low:
            v = arith.select(int_cmp("lt", v, scalar(pymath.ceil(lo), v.type)), scalar(int(lo), v.type), v)
        if pymath.isfinite(hi) and hi < high:
            v = arith.select(int_cmp("gt", v, scalar(pymath.floor(hi), v.type)), scalar(int(hi), v.type), v)
        return v
    return map_elementwise([x], lc.result_type, fn_int)


def identity(lc, op):
    """The markers (``grad.no_grad``, checkpoint boundaries) are the identity once compiled."""
    return lc.inputs[0]


_UNSIGNED_DIVISION = {arith.divsi: arith.divui, arith.floordivsi: arith.divui, arith.remsi: arith.remui}


def _int_division(divide: Callable[[ir.Value, ir.Value], ir.Value], a: ir.Value, b: ir.Value) -> ir.Value:
    """``divide(a, b)`` defined for every pair, as NumPy defines it: a quotient by zero is 0, and the most negative
    value divided by -1 wraps to itself. The CPU's division instruction traps on both (SIGFPE, the process
    killed), so the divisor is replaced by 1 there before dividing and the quotient chosen after. Unsigned
    operands divide unsigned (floor and truncation agree; nothing overflows)."""
    width = ir.IntegerType(a.type).width
    zero, one = scalar(0, a.type), scalar(1, a.type)
    by_zero = arith.cmpi(arith.CmpIPredicate.eq, b, zero)
    if width == 1:
        return arith.select(by_zero, zero, a)  # bools: a / 1 is a
    if unsigned_in():
        quotient = _UNSIGNED_DIVISION[divide](a, arith.select(by_zero, one, b))
        return arith.select(by_zero, zero, quotient)
    lowest = arith.cmpi(arith.CmpIPredicate.eq, a, scalar(-(1 << (width - 1)), a.type))
    overflow = arith.andi(lowest, arith.cmpi(arith.CmpIPredicate.eq, b, scalar(-1, a.type)))
    quotient = divide(a, arith.select(arith.ori(by_zero, overflow), one, b))
    return arith.select(by_zero, zero, quotient)
