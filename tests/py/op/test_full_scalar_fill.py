"""``full``/``full_like`` with the fill value as a scalar expression, as TVM's ``relax.op.full(shape, fill_value:
Expr, dtype)`` takes it: a 0-d ``relax.const`` or a ``PrimValue`` is read as its number (and, for ``full``, its
dtype is the default dtype), as the parser reads ``R.full(shape, R.const(2.5, "float32"))``."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import TensorStructInfo as T, op
from relax_mlir.ir import BlockBuilder, Var
from relax_mlir.ir.expr import PrimValue, Tuple, const
from relax_mlir.tvm import relax


def test_tvm_full_takes_a_relax_constant():
    call = relax.op.full((2, 3), relax.const(2.5, "float32"), "float32")
    assert call.attrs["fill_value"] == 2.5 and call.struct_info == T((2, 3), "float32")


@pytest.mark.parametrize("make,want", [
    (lambda x: op.full((2, 3), const(2.5, "float16")), np.full((2, 3), 2.5, np.float16)),  # the constant's dtype
    (lambda x: op.full((3,), PrimValue(-4, "int32")), np.full((3,), -4, np.int32)),
    (lambda x: op.full((2,), const(1.75, "float64"), "int64"), np.full((2,), 1, np.int64)),  # truncated
    (lambda x: op.full_like(x, const(7, "int32")), np.full((2, 2), 7, np.float32)),  # full_like: x's dtype
    (lambda x: op.full_like(x, PrimValue(0.5, "float64"), "float64"), np.full((2, 2), 0.5, np.float64))])
def test_scalar_fill_values_compile_and_interpret(make, want):
    x = Var("x", T((2, 2), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(make(x))
        bb.emit_func_output(out)
    mod = bb.get()
    arg = np.zeros((2, 2), np.float32)
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"]
    for got in (compiled(arg), relax_mlir.interpret(mod, "main", arg)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("value,error", [
    (const(np.ones(2, np.float32)), r"relax.full: fill_value must be a number, got Constant\(R.const\(\[1.0, 1.0\]"),
    (const(300, "int32"), r"relax.full: fill_value 300 is not representable in int8"),
    (Tuple([]), r"relax.full: fill_value must be a number, got Tuple")])
def test_fill_values_that_are_not_scalars_of_the_dtype_are_refused(value, error):
    with pytest.raises(ValueError, match=error):
        op.full((2,), value, "int8")
