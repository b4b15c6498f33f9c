"""bfloat16 <-> f32 conversions as integer ops: the same results on every host, subnormals kept.

x86 has no bf16 arithmetic: ``arith-emulate-unsupported-floats`` (``pipeline.LOOPS_PIPELINE``) computes every bf16
op in f32, between an ``arith.extf`` of its operands and an ``arith.truncf`` of its result, and the lowering's casts
(``legalize.core.convert``) are the same two ops. After the emulation, ``exact_bf16_conversions`` rewrites each
into bit arithmetic on i32:

* f32 -> bf16: ``arith.truncf`` became ``vcvtneps2bf16`` on a host with AVX512-BF16, an instruction that flushes
  subnormal inputs and results to zero whatever MXCSR says (``astype(1e-39, bf16)`` was 0, ``2**-126 * 0.5`` in
  bf16 was 0; ml_dtypes, the interpreter's, and PyTorch keep them): results depended on the host. Rewritten as
  rounding to nearest even on the bits (``f32_to_bf16``).
* bf16 -> f32: exact either way, the bf16 bits moved to the top half of an i32. Rewritten too so that no bf16
  arithmetic type reaches LLVM: with one, its loop vectorizer chose 4 lanes for bf16 elementwise loops (16 for f32
  and f16), and the rounding's integer ops made them twice as slow as with ``vcvtneps2bf16``. bf16 is then only
  data that is loaded, moved and stored: the LLVM abort on bf16 moved between vector lanes (``Do not know how to
  soft promote this operator's operand``, ``schedule/conv.py::widen_half_convs``) no longer came up in the size
  sweeps of ``tests/py/backend/test_half_precision.py`` even with the convolutions left in bf16.

Measured on a 2-core Intel Xeon (AVX512-BF16), two threads, 1024x1024 bf16, A/B in fresh processes: ``x + y``
0.20 ms with ``vcvtneps2bf16`` (subnormals flushed), 0.42 ms with only the rounding rewritten (4-lane loops), 0.25 ms
with both; ``x * 0.5 + y`` 0.30 -> 0.34 ms; an f32 -> bf16 ``astype`` 0.165 -> 0.186 ms; a 256x512x256 bf16 matmul
unchanged (0.96 ms: its f32 sums are rounded once).

The walk that finds them costs about 1 ms on a training module (the 8x8 CNN's: 2700 ops, 1.8 ms of a 1.1 s
build); it rewrites nothing in a module without bf16.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from .legalize.core import int_like, retyped


def _element(t: ir.Type) -> ir.Type:
    return t.element_type if isinstance(t, ir.VectorType) else t


def f32_to_bf16(v: ir.Value) -> ir.Value:
    """f32 (scalar or vector) -> bf16 rounded to nearest even: subnormals kept, a NaN the quiet NaN of its sign
    (as ml_dtypes' astype). The bias ``0x7FFF + lsb`` rounds half to even; a carry moves into the exponent (the
    largest subnormal rounds up to 2**-126, a value past the largest bf16 to inf) and inf stays inf (zero
    mantissa)."""
    i32, i16 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(16)
    bits = arith.bitcast(retyped(v, i32), v)
    lsb = arith.andi(arith.shrui(bits, int_like(16, v, 32)), int_like(1, v, 32))
    rounded = arith.addi(bits, arith.addi(lsb, int_like(0x7FFF, v, 32)))
    quiet = arith.ori(arith.andi(bits, int_like(0x80000000, v, 32)), int_like(0x7FC00000, v, 32))
    bits = arith.select(arith.cmpf(arith.CmpFPredicate.UNO, v, v), quiet, rounded)
    high = arith.trunci(retyped(v, i16), arith.shrui(bits, int_like(16, v, 32)))
    return arith.bitcast(retyped(v, ir.BF16Type.get()), high)


def bf16_to_f32(v: ir.Value) -> ir.Value:
    """bf16 (scalar or vector) -> f32, exactly: its bits are the top half of the f32's."""
    i32, i16 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(16)
    wide = arith.extui(retyped(v, i32), arith.bitcast(retyped(v, i16), v))
    return arith.bitcast(retyped(v, ir.F32Type.get()), arith.shli(wide, int_like(16, v, 32)))


def _rewrite(op: ir.Operation) -> ir.Value | None:
    """The integer form of a bf16 <-> f32 ``extf``/``truncf``, built before ``op``, or None for another cast."""
    source, result = _element(op.operands[0].type), _element(op.results[0].type)
    with ir.InsertionPoint(op), op.location:
        if op.name == "arith.truncf" and isinstance(source, ir.F32Type) and isinstance(result, ir.BF16Type):
            return f32_to_bf16(op.operands[0])
        if op.name == "arith.extf" and isinstance(source, ir.BF16Type) and isinstance(result, ir.F32Type):
            return bf16_to_f32(op.operands[0])
    return None


def exact_bf16_conversions(module: ir.Module) -> int:
    """Rewrite every bf16 <-> f32 ``arith.extf``/``arith.truncf`` of ``module`` as integer ops; returns how many."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in ("arith.truncf", "arith.extf"):
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    rewritten = 0
    for op in found:
        exact = _rewrite(op)
        if exact is not None:
            op.results[0].replace_all_uses_with(exact)
            op.erase()
            rewritten += 1
    return rewritten
