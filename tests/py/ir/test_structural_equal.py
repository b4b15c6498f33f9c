"""structural_equal / assert_structural_equal / structural_hash: alpha-equivalence, values, messages."""

from __future__ import annotations

import numpy as np
import pytest

from relax_mlir import op
from relax_mlir.ir import (BindingBlock, BlockBuilder, Call, DataflowBlock, DataflowVar, Function, IRModule, MatchCast,
                           PrimValue, SeqExpr, ShapeExpr, TensorStructInfo, TupleStructInfo, Var, VarBinding, const)
from relax_mlir.ir.structural_equal import assert_structural_equal, structural_equal, structural_hash
from relax_mlir.ir import sym
from relax_mlir.ir.sym import SizeVar

F32 = "float32"


def _module(n=3, c=1.0, names=("x", "y"), attrs=None, mod_attrs=None) -> IRModule:
    bb = BlockBuilder()
    x = Var(names[0], TensorStructInfo(("n", n), F32))
    y = Var(names[1], TensorStructInfo(("n", n), F32))
    with bb.function("main", [x, y], attrs=attrs):
        with bb.dataflow():
            a = bb.emit(op.exp(x), names[0] + "_e")
            b = bb.emit(op.add(a, y))
            d = bb.emit(op.add(b, const(np.full((n,), c, np.float32))))
            gv = bb.emit_output(op.multiply(d, a))
        bb.emit_func_output(gv)
    mod = bb.get()
    return mod.with_attrs(mod_attrs) if mod_attrs else mod


def _eq(a, b, **kw) -> bool:
    result = structural_equal(a, b, **kw)
    if result:
        assert structural_hash(a) == structural_hash(b), "equal objects must hash alike"
    return result


def test_modules_built_twice_are_equal_and_hash_alike():
    assert _eq(_module(), _module())
    assert _eq(_module()["main"], _module()["main"])


def test_name_hints_do_not_matter():
    assert _eq(_module(names=("x", "y")), _module(names=("p", "q")))


def test_mismatch_message_names_the_path_and_shows_both_sides():
    with pytest.raises(AssertionError) as info:
        assert_structural_equal(_module(c=1.0), _module(c=2.0))
    message = str(info.value)
    assert message.startswith("structural mismatch at main.body.blocks[0].bindings[2].value.args[1]: "
                              'R.const([1.0, 1.0, 1.0], "float32") vs R.const([2.0, 2.0, 2.0], "float32")')
    assert 'lhs: lv1 = R.add(lv, R.const([1.0, 1.0, 1.0], "float32"))' in message
    assert 'rhs: lv1 = R.add(lv, R.const([2.0, 2.0, 2.0], "float32"))' in message


def test_mismatch_in_constant_shape_shows_struct_info():
    def f(k):
        x = Var("x", TensorStructInfo((3,), F32))
        return Function([x], SeqExpr([], op.add(x, const(np.zeros(k, np.float32)))))

    with pytest.raises(AssertionError, match=r'^structural mismatch at body.body.args\[1\]: '
                       r'R.Tensor\(\(1,\), dtype="float32"\) vs R.Tensor\(\(3,\), dtype="float32"\)'):
        assert_structural_equal(f(1), f(3))


def test_param_struct_info_matters():
    with pytest.raises(AssertionError, match=r"at main.params\[0\]: "
                       r'R.Tensor\(\("n", 3\), dtype="float32"\) vs R.Tensor\(\("n", 4\), dtype="float32"\)'):
        assert_structural_equal(_module(n=3), _module(n=4))


def test_var_vs_dataflow_var_differ():
    x = Var("x", TensorStructInfo((3,), F32))

    def f(cls, block):
        v = cls("v", x.struct_info)
        return Function([x], SeqExpr([block([VarBinding(v, op.exp(x))])], x))

    assert not _eq(f(Var, BindingBlock), f(DataflowVar, DataflowBlock))
    with pytest.raises(AssertionError, match=r"blocks\[0\]: binding block of 1 bindings vs dataflow block of 1"):
        assert_structural_equal(f(Var, BindingBlock), f(DataflowVar, DataflowBlock))
    assert not _eq(f(Var, DataflowBlock), f(DataflowVar, DataflowBlock))


def test_vars_correspond_by_definition_not_by_use():
    x = Var("x", TensorStructInfo((3,), F32))
    y = Var("y", TensorStructInfo((3,), F32))
    f1 = Function([x, y], SeqExpr([], op.subtract(x, y)))
    f2 = Function([y, x], SeqExpr([], op.subtract(x, y)))  # the params are swapped: a different function
    assert not _eq(f1, f2)
    assert _eq(f1, Function([y, x], SeqExpr([], op.subtract(y, x))))


def test_free_vars_need_identity_unless_mapped():
    x, x2 = (Var("x", TensorStructInfo((3,), F32)) for _ in range(2))
    assert _eq(op.exp(x), op.exp(x))
    assert not _eq(op.exp(x), op.exp(x2))
    assert _eq(op.exp(x), op.exp(x2), map_free_vars=True)
    # Mapping is still a bijection: x + x is not x + x2.
    assert not _eq(op.add(x, x), op.add(x, x2), map_free_vars=True)


def test_calls_compare_op_and_attrs():
    x = Var("x", TensorStructInfo((2, 3), F32))
    assert not _eq(op.exp(x), op.tanh(x))
    assert _eq(op.sum(x, axis=[1]), op.sum(x, axis=(1,)))  # attrs are frozen: a list is a tuple
    with pytest.raises(AssertionError, match=r'attrs\["keepdims"\]: False vs True'):
        assert_structural_equal(op.sum(x, axis=1), op.sum(x, axis=1, keepdims=True))


def test_constants_compare_bytes_and_nan():
    nan = np.array([np.nan, 1.0], np.float32)
    other_nan = np.array([np.float32(np.nan) * -1, 1.0], np.float32)
    assert _eq(const(nan), const(nan.copy()))
    assert _eq(const(nan), const(other_nan))
    assert not _eq(const(np.array([0.0], np.float32)), const(np.array([-0.0], np.float32)))
    assert not _eq(const(np.array([1.0], np.float32)), const(np.array([1.0]), "float64"))


def test_symbolic_dims_compare_by_normal_form():
    n = SizeVar("n")
    a = TensorStructInfo((n * 2 + 1,), F32)
    b = TensorStructInfo((1 + 2 * n,), F32)
    assert _eq(a, b)
    assert not _eq(a, TensorStructInfo((2 * SizeVar("m") + 1,), F32))
    assert _eq(ShapeExpr([n, 4]), ShapeExpr(["n", 4]))
    assert _eq(TupleStructInfo([a, a]), TupleStructInfo([b, b]))


def test_equal_floor_quotients_compare_equal():
    """One size built in two orders (a strided window of a concat of strided windows, and its printed text
    parsed back) is one normal form, so the struct infos are equal and hash alike."""
    n = SizeVar("n")
    inferred = ((n // 2) * 2 + 2) // 4  # what max_pool2d (stride 2), concat, max_pool2d (stride 4) infer
    for a in range(-20, 40):  # the oracle: Python's // on the same formulas
        assert sym.evaluate(inferred, {"n": a}) == ((a // 2) * 2 + 2) // 4 == (a + 2) // 4
    assert _eq(TensorStructInfo((1, inferred), F32), TensorStructInfo((1, "(((n // 2) + 1) // 2)"), F32))
    assert _eq(ShapeExpr([((n // 2) * 2) // 4]), ShapeExpr(["n // 4"]))
    assert not _eq(ShapeExpr([(n + 2) // 4]), ShapeExpr([(n + 1) // 4]))


def test_match_cast_and_prim_values():
    x = Var("x", TensorStructInfo(ndim=1, dtype=F32))

    def f(dim, prim):
        v = Var("v", TensorStructInfo((dim,), F32))
        return Function([x], SeqExpr([BindingBlock([MatchCast(v, x, v.struct_info)])],
                                     op.add(v, v)), TensorStructInfo(ndim=1, dtype=F32), attrs={"p": prim})

    assert _eq(f("n", 1), f("n", 1))
    with pytest.raises(AssertionError, match=r"bindings\[0\].struct_info: .*\"n\".* vs .*\"m\""):
        assert_structural_equal(f("n", 1), f("m", 1))
    assert not _eq(f("n", 1), f("n", 1.0))  # int and float attributes differ
    assert not _eq(PrimValue(3), PrimValue(3, "int32"))


def test_module_function_names_and_attrs():
    assert not _eq(_module(), IRModule({"other": _module()["main"]}))
    state = (np.zeros(3, np.float32), np.ones((2, 2), np.float32))
    a = _module(mod_attrs={"param_num": 2, "optim_state": state})
    b = _module(mod_attrs={"param_num": 2, "optim_state": tuple(s.copy() for s in state)})
    assert _eq(a, b)
    changed = _module(mod_attrs={"param_num": 2, "optim_state": (state[0], state[1] * 2)})
    with pytest.raises(AssertionError, match=r'attrs\["optim_state"\]'):
        assert_structural_equal(a, changed)
    assert not _eq(_module(attrs={"global_symbol": "main"}), _module())


def test_calls_between_functions_compare_global_vars_by_name():
    def mod(callee_name):
        bb = BlockBuilder()
        x = Var("x", TensorStructInfo((3,), F32))
        with bb.function(callee_name, [x]):
            bb.emit_func_output(op.exp(x))
        y = Var("y", TensorStructInfo((3,), F32))
        with bb.function("main", [y]):
            r = bb.emit(Call(bb.get_global_var(callee_name), [y]))
            bb.emit_func_output(r)
        return bb.get()

    assert _eq(mod("f"), mod("f"))
    assert not _eq(mod("f"), mod("g"))


def test_hash_differs_for_different_modules_and_is_stable():
    assert structural_hash(_module(c=1.0)) != structural_hash(_module(c=2.0))
    assert structural_hash(_module(n=3)) != structural_hash(_module(n=4))
    assert isinstance(structural_hash(TensorStructInfo((3,), F32)), int)
