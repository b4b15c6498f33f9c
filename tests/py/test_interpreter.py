"""The reference interpreter: an MLP against NumPy, tuples, calls between functions, symbolic sizes, bad args."""

from __future__ import annotations

import numpy as np
import pytest

from relax_mlir import op
from relax_mlir.interpreter import Interpreter, InterpreterError, interpret
from relax_mlir.ir import (BlockBuilder, Call, Function, IRModule, PrimStructInfo, PrimValue, SeqExpr, ShapeExpr,
                           TensorStructInfo, Tuple, TupleStructInfo, Var)
from relax_mlir.ir.well_formed import check_well_formed

F32 = "float32"


def _mlp(sizes=(784, 128, 10)):
    """main(x: (n, 784), w0, b0, w1, b1) -> (n, 10): relu(x @ w0 + b0) @ w1 + b1."""
    bb = BlockBuilder()
    x = Var("x", TensorStructInfo(("n", sizes[0]), F32))
    params = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        params += [Var(f"w{i}", TensorStructInfo((a, b), F32)), Var(f"b{i}", TensorStructInfo((b,), F32))]
    with bb.function("main", [x] + params):
        with bb.dataflow():
            h = x
            for i in range(0, len(params), 2):
                h = bb.emit(op.add(op.matmul(h, params[i]), params[i + 1]))
                if i + 2 < len(params):
                    h = bb.emit(op.nn.relu(h))
            gv = bb.emit_output(h)
        bb.emit_func_output(gv)
    mod = bb.get()
    check_well_formed(mod)
    return mod


def _mlp_numpy(x, w0, b0, w1, b1):
    return np.maximum(x @ w0 + b0, 0) @ w1 + b1


def test_mlp_forward_matches_numpy(rng):
    mod = _mlp((20, 16, 5))
    args = [rng.standard_normal(s).astype(np.float32) for s in [(4, 20), (20, 16), (16,), (16, 5), (5,)]]
    out = interpret(mod, "main", *args)
    assert out.shape == (4, 5) and out.dtype == np.float32
    np.testing.assert_allclose(out, _mlp_numpy(*args), rtol=1e-5, atol=1e-5)


def test_symbolic_batch_takes_any_size(rng):
    mod = _mlp((6, 3, 2))
    weights = [rng.standard_normal(s).astype(np.float32) for s in [(6, 3), (3,), (3, 2), (2,)]]
    run = Interpreter(mod)
    for n in (1, 7):
        x = rng.standard_normal((n, 6)).astype(np.float32)
        np.testing.assert_allclose(run("main", x, *weights), _mlp_numpy(x, *weights), rtol=1e-5, atol=1e-6)


def test_tuples_in_and_out_and_shapes():
    bb = BlockBuilder()
    pair = Var("pair", TupleStructInfo([TensorStructInfo(("n",), F32), TensorStructInfo(("n",), F32)]))
    with bb.function("main", [pair]):
        s = bb.emit(op.add(pair[0], pair[1]))
        bb.emit_func_output(Tuple([s, Tuple([pair[1], ShapeExpr(["n", 2])]), PrimValue(7)]))
    a, b = np.arange(3, dtype=np.float32), np.ones(3, np.float32)
    total, (second, shape), seven = interpret(bb.get(), "main", (a, b))
    np.testing.assert_array_equal(total, a + b)
    assert second is b and shape == (3, 2) and seven == 7


def _module_with_call():
    bb = BlockBuilder()
    y = Var("y", TensorStructInfo(("m", 2), F32))
    with bb.function("square_plus_one", [y]):
        bb.emit_func_output(op.add(op.multiply(y, y), np.ones((1,), np.float32)))
    x = Var("x", TensorStructInfo(("n", 2), F32))
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(Call(bb.get_global_var("square_plus_one"), [x]))
            gv = bb.emit_output(Call(bb.get_global_var("square_plus_one"), [op.exp(a)]))
        bb.emit_func_output(gv)
    mod = bb.get()
    check_well_formed(mod)
    return mod


def test_function_calling_another():
    x = np.array([[0.5, -1.0], [2.0, 0.0]], np.float32)
    step = np.exp(x * x + 1)
    np.testing.assert_allclose(interpret(_module_with_call(), "main", x), step * step + 1, rtol=1e-6)


def test_match_cast_binds_and_checks_sizes():
    bb = BlockBuilder()
    x = Var("x", TensorStructInfo(ndim=2, dtype=F32))
    with bb.function("main", [x]):
        v = bb.match_cast(x, TensorStructInfo(("k", 3), F32))
        bb.emit_func_output(Tuple([op.exp(v), ShapeExpr(["k", "k * 3"])]))
    mod = bb.get()
    check_well_formed(mod)
    out, shape = interpret(mod, "main", np.zeros((4, 3), np.float32))
    assert out.shape == (4, 3) and shape == (4, 12)
    with pytest.raises(InterpreterError, match=r"main: match_cast 'gv': expected 3, got 5: shape \(4, 5\)"):
        interpret(mod, "main", np.zeros((4, 5), np.float32))


def test_a_numpy_scalar_is_a_0d_tensor_argument():
    # (refused as "not a NumPy array", where compiled calls take it)
    bb = BlockBuilder()
    x = Var("x", TensorStructInfo((), F32))
    with bb.function("main", [x]):
        bb.emit_func_output(op.add(x, x))
    out = interpret(bb.get(), "main", np.float32(2.5))
    assert out.shape == () and out.dtype == np.float32 and out == 5.0
    with pytest.raises(InterpreterError, match=r"expected dtype float32, got float64"):
        interpret(bb.get(), "main", np.float64(2.5))  # the oracle converts no dtype


def test_prim_value_parameter():
    bb = BlockBuilder()
    k = Var("k", PrimStructInfo("int64"))
    x = Var("x", TensorStructInfo((2,), F32))
    with bb.function("main", [x, k]):
        bb.emit_func_output(Tuple([op.exp(x), k]))
    out, k_out = interpret(bb.get(), "main", np.zeros(2, np.float32), 5)
    assert k_out == 5
    with pytest.raises(InterpreterError, match=r"main: argument 1 \('k'\): expected a int64 value, got a float"):
        interpret(bb.get(), "main", np.zeros(2, np.float32), 5.0)


@pytest.mark.parametrize("x,with_weights,message", [
    (np.zeros((2, 6), np.float32), False, r"^main: expected 5 argument\(s\) \(x, w0, b0, w1, b1\), got 1$"),
    (np.zeros((2, 5), np.float32), True, r"^main: argument 0 \('x'\): expected 6, got 5: shape \(2, 5\) "
                                         r'\(R.Tensor\(\("n", 6\), dtype="float32"\)\)$'),
    (np.zeros((2, 6), np.float64), True, r"^main: argument 0 \('x'\): expected dtype float32, got float64"),
    (np.zeros((6,), np.float32), True, r"^main: argument 0 \('x'\): expected R.Tensor.*, got rank 1"),
    ([[0.0] * 6], True, r"^main: argument 0 \('x'\): expected .* \(a NumPy array\), got a tuple of 1"),
])
def test_bad_arguments_name_the_function_and_parameter(x, with_weights, message):
    weights = [np.zeros(s, np.float32) for s in [(6, 3), (3,), (3, 2), (2,)]] if with_weights else []
    with pytest.raises(InterpreterError, match=message):
        interpret(_mlp((6, 3, 2)), "main", x, *weights)


def test_inconsistent_symbolic_sizes_and_tuple_lengths():
    mod = _module_with_call()
    with pytest.raises(InterpreterError, match=r"main: argument 0 \('x'\): expected 2, got 3"):
        interpret(mod, "main", np.zeros((4, 3), np.float32))
    bb = BlockBuilder()
    a, b = Var("a", TensorStructInfo(("n",), F32)), Var("b", TensorStructInfo(("n",), F32))
    with bb.function("main", [a, b]):
        bb.emit_func_output(op.add(a, b))
    with pytest.raises(InterpreterError, match=r"main: argument 1 \('b'\): size n is 2 \(from an earlier value\) "
                                               r"but here 3"):
        interpret(bb.get(), "main", np.zeros(2, np.float32), np.zeros(3, np.float32))
    bb = BlockBuilder()
    t = Var("t", TupleStructInfo([TensorStructInfo((2,), F32)] * 2))
    with bb.function("main", [t]):
        bb.emit_func_output(t[0])
    with pytest.raises(InterpreterError, match=r"main: argument 0 \('t'\): expected a tuple of 2, got a tuple of 1"):
        interpret(bb.get(), "main", (np.zeros(2, np.float32),))


def test_unknown_function_and_result_check():
    with pytest.raises(KeyError, match="no function 'nope'"):
        interpret(_module_with_call(), "nope")
    x = Var("x", TensorStructInfo((2,), F32))
    lying = Function([x], SeqExpr([], x), TensorStructInfo((2,), "int32"))  # ill-formed on purpose
    with pytest.raises(InterpreterError, match=r"main: result: expected dtype int32, got float32"):
        interpret(IRModule({"main": lying}), "main", np.zeros(2, np.float32))
