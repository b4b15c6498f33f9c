"""Elementwise lowerings: one parallel ``linalg.generic`` per op (broadcasting through its indexing maps).

Family helpers make each op one line: ``unary(float_fn, int_fn)``, ``binary(float_fn, int_fn)``,
``compare(float_predicate, signed_predicate, bool_predicate)``. Float math on f16/bf16 is computed in f32 and
rounded once at the end, as the NumPy references (which compute in float64) do.
"""

from __future__ import annotations

import math as pymath
from typing import Callable, Optional

from mlir import ir
from mlir.dialects import arith, math

from ...op import binary as B
from ...op import grad as G
from ...op import unary as U
from ...op.nn import activation as A
from .core import compute_type, convert, elem, is_bool, is_float, map_elementwise, scalar
from .rules import lowers, set_rule

Fn = Callable[..., ir.Value]


def _in_compute_type(fn: Fn) -> Fn:
    """``fn`` applied in the compute type (f32 for half floats), the result converted back."""
    def wrapped(*xs: ir.Value) -> ir.Value:
        t = xs[0].type
        ct = compute_type(t)
        return convert(fn(*(convert(x, ct) for x in xs)), t)
    return wrapped


def unary(float_fn: Optional[Fn], int_fn: Optional[Fn] = None):
    """A rule mapping ``float_fn`` (computed in f32 for half floats) or ``int_fn`` over the input."""
    def rule(lc, op):
        x = lc.inputs[0]
        fn = _in_compute_type(float_fn) if is_float(x.type) else int_fn
        if fn is None:
            lc.fail(f"no lowering for element type {elem(x)}")
        return map_elementwise([x], lc.result_type, fn)
    return rule


def binary(float_fn: Optional[Fn], int_fn: Optional[Fn], widen: bool = False):
    """A rule for a broadcasting binary op; ``widen`` computes half floats in f32 (for non-IEEE-exact ops)."""
    def rule(lc, op):
        x = lc.inputs[0]
        fn = (_in_compute_type(float_fn) if widen else float_fn) if is_float(x.type) else int_fn
        if fn is None:
            lc.fail(f"no lowering for element type {elem(x)}")
        return map_elementwise(lc.inputs, lc.result_type, fn)
    return rule


def compare(fpred: str, ipred: str, bpred: str):
    """A comparison with a bool result: ordered float predicates (``une`` for not_equal, as NaN != NaN in
    NumPy), signed integer predicates, unsigned ones on bools (True > False)."""
    def fn(a: ir.Value, b: ir.Value) -> ir.Value:
        if is_float(a.type):
            return arith.cmpf(getattr(arith.CmpFPredicate, fpred.upper()), a, b)
        return arith.cmpi(getattr(arith.CmpIPredicate, bpred if is_bool(a.type) else ipred), a, b)

    def rule(lc, op):
        return map_elementwise(lc.inputs, lc.result_type, fn)
    return rule


def _const_like(v: ir.Value, value: float) -> ir.Value:
    return scalar(value, v.type)


def _sigmoid(x):
    one = _const_like(x, 1.0)
    return arith.divf(one, arith.addf(one, math.exp(arith.negf(x))))


def _gelu(x):
    half, one = _const_like(x, 0.5), _const_like(x, 1.0)
    inner = math.erf(arith.mulf(x, _const_like(x, 1.0 / pymath.sqrt(2.0))))
    return arith.mulf(arith.mulf(half, x), arith.addf(one, inner))


def _gelu_tanh(x):
    half, one = _const_like(x, 0.5), _const_like(x, 1.0)
    cube = arith.mulf(arith.mulf(x, x), x)
    inner = arith.addf(x, arith.mulf(_const_like(x, 0.044715), cube))
    t = math.tanh(arith.mulf(_const_like(x, pymath.sqrt(2.0 / pymath.pi)), inner))
    return arith.mulf(arith.mulf(half, x), arith.addf(one, t))


def _neg_int(x):
    return arith.subi(scalar(0, x.type), x)


def _relu_int(x):
    return arith.maxsi(x, scalar(0, x.type))


# --- unary -----------------------------------------------------------------------------------------------------
set_rule(U.abs, unary(math.absf, math.absi))
set_rule(U.negative, unary(arith.negf, _neg_int))
set_rule(U.exp, unary(math.exp))
set_rule(U.log, unary(math.log))
set_rule(U.sqrt, unary(math.sqrt))
set_rule(U.rsqrt, unary(math.rsqrt))
set_rule(U.sin, unary(math.sin))
set_rule(U.cos, unary(math.cos))
set_rule(U.tanh, unary(math.tanh))
set_rule(U.sigmoid, unary(_sigmoid))
set_rule(U.square, unary(lambda x: arith.mulf(x, x), lambda x: arith.muli(x, x)))
set_rule(U.erf, unary(math.erf))
set_rule(U.floor, unary(math.floor))
set_rule(U.ceil, unary(math.ceil))
set_rule(A.relu, unary(lambda x: arith.maximumf(x, _const_like(x, 0.0)), _relu_int))
set_rule(A.silu, unary(lambda x: arith.mulf(x, _sigmoid(x))))
set_rule(A.gelu, unary(_gelu))
set_rule(A.gelu_tanh, unary(_gelu_tanh))


@lowers(A.leakyrelu)
def _leakyrelu(lc, op):
    alpha = lc.attrs["alpha"]

    def fn(x):
        neg = arith.cmpf(arith.CmpFPredicate.OGE, x, _const_like(x, 0.0))
        return arith.select(neg, x, arith.mulf(x, _const_like(x, alpha)))
    return map_elementwise(lc.inputs, lc.result_type, _in_compute_type(fn))


@lowers(U.astype)
def _astype(lc, op):
    out = elem(lc.result_type)
    return map_elementwise(lc.inputs, lc.result_type, lambda x: convert(x, out))


@lowers(U.clip)
def _clip(lc, op):
    lo, hi = lc.attrs["min"], lc.attrs["max"]
    x = lc.inputs[0]
    if is_float(x.type):
        def fn(v):
            return arith.minimumf(arith.maximumf(v, _const_like(v, lo)), _const_like(v, hi))
        return map_elementwise([x], lc.result_type, fn)

    def fn_int(v):
        # np.clip then astype: below ceil(lo) gives trunc(lo), above floor(hi) gives trunc(hi)
        bits = elem(v).width
        if pymath.isfinite(lo) and lo > -(1 << (bits - 1)):
            below = arith.cmpi(arith.CmpIPredicate.slt, v, scalar(pymath.ceil(lo), v.type))
            v = arith.select(below, scalar(int(lo), v.type), v)
        if pymath.isfinite(hi) and hi < (1 << (bits - 1)) - 1:
            above = arith.cmpi(arith.CmpIPredicate.sgt, v, scalar(pymath.floor(hi), v.type))
            v = arith.select(above, scalar(int(hi), v.type), v)
        return v
    return map_elementwise([x], lc.result_type, fn_int)


@lowers(G.start_checkpoint, G.end_checkpoint, G.no_grad)
def _identity(lc, op):
    return lc.inputs[0]


# --- binary ----------------------------------------------------------------------------------------------------
set_rule(B.add, binary(arith.addf, arith.addi))
set_rule(B.subtract, binary(arith.subf, arith.subi))
set_rule(B.multiply, binary(arith.mulf, arith.muli))
set_rule(B.divide, binary(arith.divf, arith.divsi))
set_rule(B.floor_divide, binary(lambda a, b: math.floor(arith.divf(a, b)), arith.floordivsi, widen=True))
set_rule(B.power, binary(math.powf, None, widen=True))
set_rule(B.maximum, binary(arith.maximumf, arith.maxsi))
set_rule(B.minimum, binary(arith.minimumf, arith.minsi))
set_rule(B.equal, compare("oeq", "eq", "eq"))
set_rule(B.not_equal, compare("une", "ne", "ne"))
set_rule(B.less, compare("olt", "slt", "ult"))
set_rule(B.less_equal, compare("ole", "sle", "ule"))
set_rule(B.greater, compare("ogt", "sgt", "ugt"))
set_rule(B.greater_equal, compare("oge", "sge", "uge"))


@lowers(B.where)
def _where(lc, op):
    return map_elementwise(lc.inputs, lc.result_type, arith.select)
