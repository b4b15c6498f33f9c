"""TVM-compatibility of op inference found by replaying TVM's ``tests/python/relax/test_op_*.py`` (2026-12): inputs
TVM's current inference takes that were refused here, or taken with a dtype dropped. Each is checked against TVM's
expected struct info, and computed by the interpreter and by compiled code against NumPy:

- ``squeeze`` of an axis whose static size is not 1 keeps it (TVM's and PyTorch's no-op; was refused);
- ``zeros``/``ones``/``full``/``broadcast_to``/``collapse_sum_to`` take a shape variable of known values, as
  ``reshape`` does (were refused from Python);
- ``one_hot`` with ``on_value``/``off_value`` of different dtypes is refused naming both, as TVM (one was dropped);
- comparisons of operands of different dtypes compare in NumPy's common dtype, a bool tensor as TVM infers (were
  refused); arithmetic keeps refusing them, as TVM;
- ``floor``/``ceil``/``trunc`` of integers are the identity in the input's dtype, as TVM (were refused);
- ``strided_slice(..., assume_inbound=)``, TVM's keyword: True is this project's behaviour, False gives an unknown
  shape (rank kept) where an axis or a bound is symbolic, computed at run time as NumPy's slice.
"""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import ShapeStructInfo, TensorStructInfo as T, op
from relax_mlir.interpreter import InterpreterError
from relax_mlir.ir import BlockBuilder, IRModule, PrimValue, Var
from relax_mlir.script import from_source

RNG = np.random.default_rng(0)


def _module(params: list[Var], body) -> IRModule:
    """``main(params)`` returning ``body(*params)``."""
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(body(*params))
        bb.emit_func_output(out)
    return bb.get()


def _both(mod: IRModule, *args, rtol: float = 0.0):
    """The interpreter's result and the compiled one's, asserted equal (bit for bit unless ``rtol``: a sum's order
    differs), the interpreter's returned."""
    want = rm.interpret(mod, "main", *args)
    got = rm.VirtualMachine(rm.compile(mod, num_threads=1))["main"](*args)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0)
    assert got.dtype == want.dtype and got.shape == want.shape
    return want


# -- squeeze ----------------------------------------------------------------------------------------------------------

def test_squeeze_keeps_an_axis_whose_static_size_is_not_1_as_tvm_and_pytorch():
    """TVM's ``test_squeeze_infer_ty_axis_length_not_one``: ``(2, 3, 4)`` at axis 0 is ``(2, 3, 4)``; ``(a, 3, 4)``
    assumes ``a`` is 1. Mixed with a size-1 axis only that one goes, as ``torch.squeeze(x, (0, 1))``."""
    import torch

    x = Var("x", T((2, 3, 4), "float32"))
    assert op.squeeze(x, [0]).struct_info == T((2, 3, 4), "float32")
    assert op.squeeze(Var("x", T(("a", 3, 4), "float32")), [0]).struct_info == T((3, 4), "float32")
    y = Var("y", T((2, 1, 3), "float32"))
    assert op.squeeze(y, (0, 1)).struct_info == T((2, 3), "float32")
    data = RNG.standard_normal((2, 1, 3)).astype(np.float32)
    out = _both(_module([y], lambda y: op.squeeze(y, (0, 1, -1))), data)
    np.testing.assert_array_equal(out, torch.squeeze(torch.from_numpy(data), (0, 1, 2)).numpy())
    assert out.shape == (2, 3)


def test_squeeze_of_a_symbolic_axis_still_checks_that_it_is_1():
    mod = _module([Var("x", T(("n", 3), "float32"))], lambda x: op.squeeze(x, [0]))
    np.testing.assert_array_equal(_both(mod, np.ones((1, 3), np.float32)), np.ones(3, np.float32))
    with pytest.raises(InterpreterError, match=r"binding 'gv': expected R\.Tensor\(\(3,\), .*\), got rank 2 "
                                               r"\(shape \(2, 3\)\)"):
        rm.interpret(mod, "main", np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"relax\.squeeze: axis 0 of x has 2 elements, expected 1"):
        rm.VirtualMachine(rm.compile(mod, num_threads=1))["main"](np.ones((2, 3), np.float32))


# -- a shape variable where an op wants a shape ------------------------------------------------------------------------

def test_creation_and_broadcast_ops_take_a_shape_variable_of_known_values_as_reshape_does():
    s = Var("s", ShapeStructInfo((2, "n")))
    x = Var("x", T((1, "n"), "float32"))
    assert op.zeros(s, "float32").struct_info == T((2, "n"), "float32")
    assert op.ones(s, "int32").struct_info == T((2, "n"), "int32")
    assert op.full(s, 1.5).struct_info == T((2, "n"), "float32")
    assert op.broadcast_to(x, s).struct_info == T((2, "n"), "float32")
    assert op.collapse_sum_to(Var("y", T((4, 2, "n"), "float32")), s).struct_info == T((2, "n"), "float32")
    assert op.zeros(s, "float32").attrs == op.zeros((2, "n"), "float32").attrs  # the same call as a tuple's

    data = RNG.standard_normal((1, 3)).astype(np.float32)
    mod = _module([x], lambda x: op.add(op.add(op.broadcast_to(x, s), op.ones(s, "float32")),
                                        op.full(s, 0.5, "float32")))
    np.testing.assert_array_equal(_both(mod, data), np.broadcast_to(data, (2, 3)) + np.float32(1.5))
    y = Var("y", T((4, 2, "n"), "float32"))
    big = RNG.standard_normal((4, 2, 3)).astype(np.float32)
    summed = _both(_module([y], lambda y: op.collapse_sum_to(y, s)), big, rtol=1e-6)
    np.testing.assert_allclose(summed, big.sum(axis=0), rtol=1e-6)


def test_a_shape_variable_of_unknown_values_is_refused_naming_the_op():
    u = Var("u", ShapeStructInfo(ndim=2))
    with pytest.raises(ValueError, match=r"^relax\.zeros: shape u is Shape\(ndim=2\): zeros needs its dims"):
        op.zeros(u, "float32")
    with pytest.raises(ValueError, match=r"^relax\.broadcast_to: shape u is Shape\(ndim=2\): broadcast_to needs"):
        op.broadcast_to(Var("x", T((1, 3), "float32")), u)


# -- one_hot -----------------------------------------------------------------------------------------------------------

def test_one_hot_refuses_on_and_off_values_of_different_dtypes_naming_both():
    """TVM's ``test_one_hot_infer_ty`` case 5: float32 and int64 values are an error (float32 was kept here)."""
    i = Var("i", T((2, 3), "int32"))
    with pytest.raises(ValueError, match=r"^relax\.one_hot: on_value \(float32\) and off_value \(int64\) must have "
                                         r"the same dtype$"):
        op.one_hot(i, PrimValue(1.0, "float32"), PrimValue(0, "int64"), 5)
    with pytest.raises(ValueError, match=r"on_value \(float32\) and off_value \(float16\)"):
        op.one_hot(i, PrimValue(1.0, "float32"), PrimValue(0.0, "float16"), 5)
    assert op.one_hot(i, PrimValue(1, "int64"), PrimValue(0, "int64"), 3, axis=1).struct_info == \
        T((2, 3, 3), "int64")


# -- comparisons of operands of different dtypes -----------------------------------------------------------------------

@pytest.mark.parametrize("name", ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"])
def test_comparisons_of_different_dtypes_compare_in_the_common_dtype(name):
    """TVM's ``test_binary_cmp_infer_ty``: float32 against int32 is a bool tensor. Here both compare as float64
    (NumPy's result_type), so 16777217 (not a float32) is above 16777216.0 as NumPy says."""
    x, y = Var("x", T((2, 3), "float32")), Var("y", T((3,), "int32"))
    assert getattr(op, name)(x, y).struct_info == T((2, 3), "bool")
    a = np.array([[16777216.0, -1.5, 2.0], [0.0, 3.0, -7.0]], np.float32)
    b = np.array([16777217, -1, 2], np.int32)
    out = _both(_module([x, y], getattr(op, name)), a, b)
    np.testing.assert_array_equal(out, getattr(np, name)(a, b))
    assert out[0, 0] == getattr(np, name)(16777216.0, 16777217)


def test_comparisons_of_signed_and_unsigned_integers_compare_in_the_wider_signed_dtype():
    x, y = Var("x", T((4,), "int8")), Var("y", T((4,), "uint8"))
    a, b = np.array([-1, 5, 127, -128], np.int8), np.array([255, 5, 128, 0], np.uint8)
    np.testing.assert_array_equal(_both(_module([x, y], op.less), a, b), [True, False, True, True])


def test_arithmetic_of_different_dtypes_stays_refused_and_pairs_without_a_common_dtype_are_named():
    x, y = Var("x", T((2, 3), "float32")), Var("y", T((2, 3), "int32"))
    with pytest.raises(ValueError, match=r"^relax\.add: operands must have the same dtype, got x1: float32, "
                                         r"x2: int32$"):
        op.add(x, y)
    with pytest.raises(ValueError, match=r"^relax\.less: operands of dtypes x1: bfloat16 and x2: int32 have no "
                                         r"common dtype to compare in"):
        op.less(Var("b", T((2, 3), "bfloat16")), y)


# -- floor, ceil, trunc of integers ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "round"])
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_rounding_an_integer_tensor_is_the_identity_in_its_dtype(name, dtype):
    x = Var("x", T((2, 3), dtype))
    assert getattr(op, name)(x).struct_info == T((2, 3), dtype)
    data = np.array([[-7, 0, 5], [100, -128, 127]], dtype)
    np.testing.assert_array_equal(_both(_module([x], getattr(op, name)), data), data)


def test_rounding_floats_is_unchanged_and_bools_stay_refused():
    x = Var("x", T((4,), "float32"))
    data = np.array([-1.5, -0.5, 0.5, 2.7], np.float32)
    for name in ("floor", "ceil", "trunc"):
        np.testing.assert_array_equal(_both(_module([x], getattr(op, name)), data), getattr(np, name)(data))
    with pytest.raises(ValueError, match=r"^relax\.floor: x must be numeric, got bool$"):
        op.floor(Var("b", T((4,), "bool")))


# -- strided_slice(assume_inbound=) ------------------------------------------------------------------------------------

def test_strided_slice_takes_tvm_s_assume_inbound_keyword():
    """True (the default here) is this project's reading: ``x[1:1000]`` on ``n`` rows is ``999`` rows. False gives
    TVM's unknown shape of rank 2 for a static bound on a symbolic axis (and here for a symbolic bound too); static
    axes slice as NumPy either way."""
    x = Var("x", T(("n", 6), "float32"))
    inbound = op.strided_slice(x, axes=[0], begin=[1], end=[1000], assume_inbound=True)
    assert inbound.struct_info == T((999, 6), "float32")
    assert op.strided_slice(x, [0], [1], [1000]).struct_info == inbound.struct_info
    assert op.strided_slice(x, [0], [1], [1000], assume_inbound=False).struct_info == T(None, "float32", 2)
    assert op.strided_slice(Var("y", T((8, 9), "float32")), [0], ["k"], [8], assume_inbound=False).struct_info == \
        T(None, "float32", 2)
    for flag in (True, False):
        static = op.strided_slice(Var("z", T((5, 6), "float32")), [1, 0], [-9, 1], [4, 100], assume_inbound=flag)
        assert static.struct_info == T((4, 4), "float32")
    with pytest.raises(ValueError, match=r"^relax\.strided_slice: assume_inbound must be a bool, got 'yes'$"):
        op.strided_slice(x, [0], [0], [1], assume_inbound="yes")


def test_strided_slice_without_assume_inbound_computes_numpy_s_length_at_run_time():
    """The slice of unknown shape is match_cast to ``(m, 4)``, ``m`` the length of a second parameter (a compiled
    function's result sizes come from its parameters'): NumPy's ``len(range(n)[1:1000:2])`` passes, another is
    refused. The sum of the slice, of static shape, needs no cast."""
    x, rows = Var("x", T(("n", 6), "float32")), Var("rows", T(("m",), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x, rows]):
        with bb.dataflow():
            part = bb.emit(op.strided_slice(x, [0, 1], [1, 4], [1000, 0], [2, -1], assume_inbound=False))
            assert part.struct_info == T(None, "float32", 2)
            cast = bb.match_cast(part, T(("m", 4), "float32"))
            out = bb.emit_output(op.add(cast, op.sum(part)))
        bb.emit_func_output(out)
    mod = bb.get()
    compiled = rm.VirtualMachine(rm.compile(mod, num_threads=1))["main"]
    for n in (2, 4, 7):
        data = RNG.standard_normal((n, 6)).astype(np.float32)
        part = data[1:1000:2, 4:0:-1]
        want = part + part.sum(dtype=np.float32)
        args = (data, np.zeros(part.shape[0], np.float32))
        np.testing.assert_allclose(rm.interpret(mod, "main", *args), want, rtol=1e-6)
        np.testing.assert_allclose(compiled(*args), want, rtol=1e-6)
    args = (np.ones((7, 6), np.float32), np.zeros(4, np.float32))
    with pytest.raises(ValueError, match=r"match_cast to Tensor\(\(m, 4\), float32\): dimension 0 is 3, "
                                         r"expected m = 4"):
        compiled(*args)
    with pytest.raises(InterpreterError, match=r"size m is 4 \(from an earlier value\) but here 3"):
        rm.interpret(mod, "main", *args)
    # with assume_inbound, x[1:1000:2] on 7 rows was assumed to have 500 rows: refused
    assumed = _module([x], lambda x: op.strided_slice(x, [0], [1], [1000], [2]))
    assert assumed["main"].ret_struct_info == T((500, 6), "float32")
    with pytest.raises(InterpreterError, match=r"binding 'gv': expected 500, got 3: shape \(3, 6\)"):
        rm.interpret(assumed, "main", np.ones((7, 6), np.float32))


def test_assume_inbound_round_trips_through_the_text_format():
    x = Var("x", T(("n", 6), "float32"))
    for flag in (True, False):
        mod = _module([x], lambda x: op.strided_slice(x, [0], [1], [1000], assume_inbound=flag))
        text = mod.script()
        assert ("assume_inbound=False" in text) == (not flag)
        again = from_source(text)
        assert again.script() == text
        call = again["main"].body.blocks[0].bindings[0].value
        assert call.attrs["assume_inbound"] is flag


def test_the_gradient_of_a_slice_without_assume_inbound_scatters_into_its_positions():
    """The backward op has no ``assume_inbound``: the rule leaves it out (it was passed on, an unknown attribute)."""
    from relax_mlir.transform import Gradient

    x = Var("x", T((7, 6), "float64"))
    bb = BlockBuilder()
    with bb.function("f", [x]):
        with bb.dataflow():
            part = bb.emit(op.strided_slice(x, [0], [1], [1000], [2], assume_inbound=False))
            out = bb.emit_output(op.sum(op.multiply(part, part)))
        bb.emit_func_output(out)
    mod = Gradient("f")(bb.get())
    data = RNG.standard_normal((7, 6))
    want = np.zeros_like(data)
    want[1::2] = 2 * data[1::2]
    for value, (grad,) in (rm.interpret(mod, "f_adjoint", data),
                           rm.VirtualMachine(rm.compile(mod, num_threads=1))["f_adjoint"](data)):
        np.testing.assert_allclose(grad, want, rtol=1e-15)
        np.testing.assert_allclose(value, np.sum(data[1::2] ** 2), rtol=1e-12)
