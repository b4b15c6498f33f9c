"""``relax.random.uniform``: counter-based random numbers as one parallel ``linalg.generic``.

Each element hashes the key with its row-major flat index (from ``linalg.index``) in wrapping 64-bit integer
arithmetic (``arith.muli``/``xori``/``shrui``), exactly as the registry's reference does, so compiled values equal
the interpreter's bit for bit on any tiling. The top ``p`` bits become the value through f64, exactly.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from ...op import random as RND
from .core import amap, as_index, convert, elem, empty, generic, identity, loop_index, scalar, smul


def _mix64(z: ir.Value) -> ir.Value:
    t = z.type
    for shift, mul in ((30, RND.MIX1), (27, RND.MIX2), (31, None)):
        z = arith.xori(z, arith.shrui(z, scalar(shift, t)))
        if mul is not None:
            z = arith.muli(z, scalar(RND.to_int64(mul), t))
    return z


def uniform(lc, op):
    key = lc.inputs[0]
    t = elem(lc.result_type)
    p = RND.SIGNIFICAND_BITS[lc.attrs["dtype"]]
    sizes = lc.result_sizes()
    rank = len(sizes)
    i64, f64 = ir.IntegerType.get_signless(64), ir.F64Type.get()
    strides, acc = [], 1
    for s in reversed(sizes):  # row-major strides, as index values outside the loop
        strides.append(as_index(acc))
        acc = smul(acc, s)
    strides.reverse()

    def body(k, _out):
        flat = as_index(0)
        for axis, stride in enumerate(strides):
            flat = arith.addi(flat, arith.muli(loop_index(axis), stride))
        counter = arith.addi(convert(flat, i64), scalar(1, i64))
        bits = _mix64(arith.addi(_mix64(k), arith.muli(counter, scalar(RND.to_int64(RND.GAMMA), i64))))
        top = arith.shrui(bits, scalar(64 - p, i64))
        value = arith.mulf(arith.uitofp(f64, top), scalar(2.0 ** -p, f64))  # both steps exact
        return convert(value, t)

    return generic([key], [empty(sizes, t)], [amap(rank, []), identity(rank)], ["parallel"] * rank, body)[0]
