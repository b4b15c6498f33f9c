"""``const`` without a dtype follows TVM's ``relax.const`` (python/tvm/relax/expr.py): a Python int is int32, a float
float32, a bool bool; a NumPy value keeps its dtype except int64 (int32) and float64 (float32). What the narrowing
would change is refused, not wrapped. Also: a Python number beside a tensor in ``x + 1`` takes the tensor's dtype,
and a float ``PrimStructInfo`` refuses a finite value its dtype cannot hold."""

from __future__ import annotations

import re

import numpy as np
import pytest

from relax_mlir.ir import BlockBuilder, IRModule, TensorStructInfo, Var, assert_structural_equal
from relax_mlir.ir.expr import Function, SeqExpr, Tuple, const
from relax_mlir.ir.printer import format_module
from relax_mlir.ir.struct_info import PrimStructInfo
from relax_mlir.script import from_source


@pytest.mark.parametrize("value, dtype, expected", [
    (1, "int32", np.int32(1)),
    (-7, "int32", np.int32(-7)),
    (1.5, "float32", np.float32(1.5)),
    (True, "bool", np.bool_(True)),
    ([1, 2], "int32", np.array([1, 2], np.int32)),
    ([1.0, 2], "float32", np.array([1, 2], np.float32)),
    ([[True], [False]], "bool", np.array([[True], [False]])),
    (np.array([1, 2]), "int32", np.array([1, 2], np.int32)),
    (np.array([0.1, 2.0]), "float32", np.array([0.1, 2.0], np.float32)),
    (np.array([1, 2], ">i8"), "int32", np.array([1, 2], np.int32)),  # big-endian int64 too
    (np.float64(0.25), "float32", np.float32(0.25)),
    (np.int64(3), "int32", np.int32(3)),
    (np.array([1, 2], np.int16), "int16", np.array([1, 2], np.int16)),  # other dtypes are kept
    (np.array([1, 2], np.uint64), "uint64", np.array([1, 2], np.uint64)),
    (np.array([0.5], np.float16), "float16", np.array([0.5], np.float16)),
    (np.array([1.0, np.nan, -np.inf]), "float32", np.array([1.0, np.nan, -np.inf], np.float32)),
])
def test_default_dtype_is_tvms(value, dtype, expected):
    c = const(value)
    assert c.struct_info == TensorStructInfo(np.shape(expected), dtype)
    assert c.data.dtype == np.asarray(expected).dtype
    np.testing.assert_array_equal(c.data, expected)


_INT32_ADVICE = ", the dtype of an integer constant without one (as in TVM); expected -2**31 <= value < 2**31, or give "


@pytest.mark.parametrize("value, message", [
    (2**31, "R.const: the integer 2147483648 does not fit int32" + _INT32_ADVICE + "dtype='int64'"),
    (-2**31 - 1, "R.const: the integer -2147483649 does not fit int32" + _INT32_ADVICE + "dtype='int64'"),
    (2**63, "R.const: the integer 9223372036854775808 does not fit int32" + _INT32_ADVICE + "dtype='uint64'"),
    (2**64, "R.const: the integer 18446744073709551616 does not fit int64 or any other integer dtype; expected "
            "-2**63 <= value < 2**64 (or give a float)"),
    (np.array([1, 2**40]), "R.const: the integer 1099511627776 does not fit int32" + _INT32_ADVICE + "dtype='int64'"),
    ([3, -2**35], "R.const: the integer -34359738368 does not fit int32" + _INT32_ADVICE + "dtype='int64'"),
    (1e39, "R.const: 1e+39 overflows float32 (largest 3.403e+38); expected a float32 value, or give "
           "dtype='float64'"),
    (np.array([1.0, -1e300]), "R.const: -1e+300 overflows float32 (largest 3.403e+38)"),
])
def test_what_narrowing_would_change_is_refused_naming_the_dtype_to_give(value, message):
    """TVM wraps ``relax.const(2**40)`` to 0 silently."""
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        const(value)


def test_a_given_dtype_is_kept():
    assert const(2**40, "int64").data == 2**40
    assert const(np.array([1e300]), "float64").data.dtype == np.float64
    assert const(1, "float64").struct_info == TensorStructInfo((), "float64")
    assert const(np.array([1, 2]), "int64").struct_info == TensorStructInfo((2,), "int64")


def test_printed_constants_read_back_equal():
    """The printer writes the dtype, so a const without one reads back as it was built."""
    x = Var("x", TensorStructInfo((2,), "int32"))
    f = Function([x], SeqExpr([], Tuple([const(1), const(1.5), const([1, 2]), const(np.array([0.1, 0.2])), x])))
    mod = IRModule({"main": f})
    text = format_module(mod)
    for written in ('R.const(1, "int32")', 'R.const(1.5, "float32")', 'R.const([1, 2], "int32")',
                    'R.const([0.1, 0.2], "float32")'):
        assert written in text
    assert_structural_equal(from_source(text), mod)


def test_a_python_number_beside_a_tensor_takes_its_dtype():
    """``x + 1`` as the text format's ``x + 1``: before, an int was an int64 constant, refused beside an int32
    tensor ("operands must have the same dtype"), and a float a float32 one beside a float16 tensor."""
    bb = BlockBuilder()
    i = Var("i", TensorStructInfo((3,), "int32"))
    h = Var("h", TensorStructInfo((3,), "float16"))
    with bb.function("main", [i, h]):
        a = bb.emit(i + 1)
        b = bb.emit(2 * i - 1)
        c = bb.emit(h * 0.5 + 1)
        d = bb.emit(1 / h)
        bb.emit_func_output(Tuple([a, b, c, d]))
    assert [v.struct_info.dtype for v in (a, b, c, d)] == ["int32", "int32", "float16", "float16"]
    from relax_mlir import interpret

    iv, hv = np.array([1, -2, 5], np.int32), np.array([0.5, 2.0, -4.0], np.float16)
    got = interpret(bb.get(), "main", iv, hv)
    for g, want in zip(got, (iv + 1, 2 * iv - 1, hv * np.float16(0.5) + np.float16(1), np.float16(1) / hv)):
        assert g.dtype == want.dtype
        np.testing.assert_array_equal(g, want)
    with pytest.raises(ValueError, match=re.escape("R.const: 1.5 is not representable in int32")):
        i * 1.5
    assert (i + np.int64(1)).args[1].struct_info.dtype == "int32"  # NumPy scalars: R.const's rule


@pytest.mark.parametrize("dtype, value, largest", [("float16", 1e10, "65504"), ("float32", 1e39, "3.4028235e+38"),
                                                   ("bfloat16", -1e39, "3.3895314e+38")])
def test_a_float_prim_struct_info_refuses_a_finite_value_its_dtype_cannot_hold(dtype, value, largest):
    """As ``R.prim_value`` and the parser's ``R.Prim`` do: 1e10 in float16 would be inf."""
    with pytest.raises(ValueError, match=re.escape(f"PrimStructInfo: {value!r} does not fit in {dtype} (largest "
                                                   f"finite value {largest}; it would become inf)")):
        PrimStructInfo(dtype, value)


def test_a_float_prim_struct_info_keeps_what_its_dtype_holds():
    assert PrimStructInfo("float16", 65504.0).value == 65504.0
    assert PrimStructInfo("float16", float("inf")).value == float("inf")
    assert PrimStructInfo("float16", np.float64(-2.5)).value == -2.5
    assert PrimStructInfo("float32", 10**30).value == 10**30
