"""well_formed / check_well_formed: one test per kind of ill-formedness, each module built from nodes directly."""

from __future__ import annotations

import re

import numpy as np
import pytest

from relax_mlir import op
from relax_mlir.ir import (BindingBlock, BlockBuilder, Call, DataflowBlock, DataflowVar, Function, GlobalVar,
                           IRModule, MatchCast, ObjectStructInfo, PrimValue, SeqExpr, ShapeExpr, ShapeStructInfo,
                           TensorStructInfo, Tuple, TupleGetItem, TupleStructInfo, Var, VarBinding, const)
from relax_mlir.ir.sym import SizeVar
from relax_mlir.ir.well_formed import WellFormedError, check_well_formed, well_formed

F32 = "float32"


def T(*shape, dtype=F32) -> TensorStructInfo:
    return TensorStructInfo(shape, dtype)


def _func(params, blocks, body, ret=None) -> Function:
    return Function(params, SeqExpr(blocks, body), ret)


def _problems(obj, **kw) -> list[str]:
    with pytest.raises(WellFormedError) as info:
        check_well_formed(obj, **kw)
    assert not well_formed(obj, **kw)
    return info.value.problems


def _only(obj, pattern: str, **kw) -> str:
    problems = _problems(obj, **kw)
    assert len(problems) == 1, problems
    assert re.search(pattern, problems[0]), problems[0]
    return problems[0]


def test_builder_modules_are_well_formed():
    bb = BlockBuilder()
    x = Var("x", TensorStructInfo(ndim=2, dtype=F32))
    y = Var("y", T("n", 4))
    with bb.function("helper", [y]):
        bb.emit_func_output(op.exp(y))
    with bb.function("main", [x]):
        with bb.dataflow():
            xm = bb.match_cast(x, T("m", 4))
            a = bb.emit(Call(bb.get_global_var("helper"), [xm]))
            t = bb.emit(Tuple([a, xm]))
            gv = bb.emit_output(op.add(TupleGetItem(t, 0), t[1]))
        s = bb.emit(ShapeExpr(["m", 4]))
        bb.emit_func_output(Tuple([gv, s]))
    mod = bb.get()
    check_well_formed(mod)
    assert well_formed(mod["main"])


def test_var_used_before_its_definition():
    x = Var("x", T(3))
    a, b = Var("a", T(3)), Var("b", T(3))
    f = _func([x], [BindingBlock([VarBinding(a, op.exp(b)), VarBinding(b, op.exp(x))])], a)
    _only(IRModule({"main": f}), r"^main, binding 'a': var 'b' is used before its definition$")


def test_undefined_var():
    x, z, a = Var("x", T(3)), Var("z", T(3)), Var("a", T(3))
    f = _func([x], [BindingBlock([VarBinding(a, op.add(x, z))])], a)
    _only(IRModule({"main": f}), r"^main, binding 'a': var 'z' is not defined in this function$")


def test_var_of_another_function_is_undefined():
    x, a = Var("x", T(3)), Var("a", T(3))
    f = _func([x], [BindingBlock([VarBinding(a, op.exp(x))])], a)
    y = Var("y", T(3))
    g = _func([y], [], op.add(y, a))
    _only(IRModule({"f": f, "g": g}), r"^g, return value: var 'a' is not defined in this function$")


def test_dataflow_var_used_outside_its_block():
    x, lv = Var("x", T(3)), DataflowVar("lv", T(3))
    f = _func([x], [DataflowBlock([VarBinding(lv, op.exp(x))])], lv)
    _only(IRModule({"main": f}), r"^main, return value: DataflowVar 'lv' is used outside its dataflow block$")


def test_dataflow_var_defined_outside_a_dataflow_block():
    x, lv = Var("x", T(3)), DataflowVar("lv", T(3))
    f = _func([x], [BindingBlock([VarBinding(lv, op.exp(x))])], x)
    _only(IRModule({"main": f}), r"^main, binding 'lv': DataflowVar 'lv' is defined outside a dataflow block$")


def test_non_dataflow_var_from_a_dataflow_block_is_visible_after_it():
    x, lv, gv = Var("x", T(3)), DataflowVar("lv", T(3)), Var("gv", T(3))
    f = _func([x], [DataflowBlock([VarBinding(lv, op.exp(x)), VarBinding(gv, op.exp(lv))])], gv)
    check_well_formed(f)


def test_var_bound_twice():
    x, a = Var("x", T(3)), Var("a", T(3))
    f = _func([x], [BindingBlock([VarBinding(a, op.exp(x)), VarBinding(a, op.exp(a))])], a)
    _only(IRModule({"main": f}), r"^main, binding 'a': Var 'a' is defined twice")


def test_param_also_bound():
    x = Var("x", T(3))
    f = _func([x], [BindingBlock([VarBinding(x, op.exp(x))])], x)
    _only(IRModule({"main": f}), r"^main, binding 'x': Var 'x' is defined twice")


def test_missing_struct_info_on_var_and_call():
    x, a = Var("x", T(3)), Var("a")
    f = _func([x], [BindingBlock([VarBinding(a, op.exp(x))])], op.exp(x))
    _only(IRModule({"main": f}), r"^main, binding 'a': Var 'a' has no struct info$")
    b = Var("b", T(3))
    g = _func([x], [BindingBlock([VarBinding(b, Call(op.exp, [x], {}))])], b)
    _only(IRModule({"main": g}), r"^main, binding 'b': call R.exp\(x\) has no struct info$")
    check_well_formed(IRModule({"main": g}), check_struct_info=False)


def test_binding_struct_info_disagrees_with_the_value():
    x, a = Var("x", T(3)), Var("a", T(4))
    f = _func([x], [BindingBlock([VarBinding(a, op.exp(x))])], a, ret=T(4))
    _only(IRModule({"main": f}), r'^main, binding \'a\': struct info R.Tensor\(\(4,\), dtype="float32"\) disagrees '
                                 r'with its value\'s R.Tensor\(\(3,\), dtype="float32"\) \(R.exp\(x\)\)$')


def test_binding_struct_info_may_be_a_base_of_the_value():
    """TVM's rule: an annotation less specific than the value's struct info (ndim only, no shape, R.Object, a
    tuple of such) describes the value; one more specific than the value's, or incompatible, does not."""
    def module(x_sinfo, y_sinfo, value=op.add):
        x = Var("x", x_sinfo)
        y = Var("y", y_sinfo)
        return IRModule({"main": _func([x], [BindingBlock([VarBinding(y, value(x, x))])], y)})

    ndim2 = TensorStructInfo(ndim=2, dtype=F32)
    assert well_formed(module(T(2, 3), ndim2))
    assert well_formed(module(T(2, 3), TensorStructInfo(dtype=F32)))
    assert well_formed(module(T(2, 3), ObjectStructInfo()))
    pair = lambda a, b: Tuple([a, b])  # noqa: E731
    assert well_formed(module(T(2, 3), TupleStructInfo([ndim2, ObjectStructInfo()]), pair))
    _only(module(ndim2, T(2, 3)), r"binding 'y': struct info R.Tensor\(\(2, 3\).* disagrees with its value's "
                                  r"R.Tensor\(dtype=\"float32\", ndim=2\)")  # narrower than the value
    _only(module(T(2, 3), TensorStructInfo(ndim=3, dtype=F32)), r"binding 'y': .* disagrees")
    _only(module(T(2, 3), TensorStructInfo(ndim=2, dtype="int32")), r"binding 'y': .* disagrees")


def test_call_struct_info_is_reinferred_from_the_arguments():
    x, a = Var("x", T(3)), Var("a", T(4))
    stale = Call(op.exp, [x], {}, T(4))  # both the call and the var claim (4,)
    f = _func([x], [BindingBlock([VarBinding(a, stale)])], a)
    _only(IRModule({"main": f}), r"disagrees with its value's R.Tensor\(\(3,\)")


def test_op_refusing_its_arguments():
    x, y, a = Var("x", T(3)), Var("y", T(4)), Var("a", T(3))
    bad = Call(op.add, [x, y], op.add.complete_attrs({}), T(3))
    f = _func([x, y], [BindingBlock([VarBinding(a, bad)])], a)
    _only(IRModule({"main": f}), r"^main, binding 'a': R.add\(x, y\): relax.add: cannot broadcast shapes")


def test_match_cast_var_must_have_the_cast_struct_info():
    x, v = Var("x", TensorStructInfo(ndim=1, dtype=F32)), Var("v", T("n"))
    f = _func([x], [BindingBlock([MatchCast(v, x, T("m"))])], x)
    _only(IRModule({"main": f}), r"^main, match_cast 'v': struct info .*\"n\".* differs from the cast's .*\"m\"")


def _caller(callee: str, *arg_sinfo) -> Function:
    params = [Var(f"p{i}", s) for i, s in enumerate(arg_sinfo)]
    r = Var("r", T(3))
    return _func(params, [BindingBlock([VarBinding(r, Call(GlobalVar(callee), params, {}, T(3)))])], r)


def _callee() -> Function:
    y = Var("y", T("n"))
    return _func([y], [], op.exp(y))


def test_call_to_an_undefined_function():
    _only(IRModule({"main": _caller("missing", T(3))}), r"^main, binding 'r': call to undefined function 'missing'$")


def test_call_with_wrong_argument_count_or_kind():
    mod = IRModule({"f": _callee(), "main": _caller("f", T(3), T(3))})
    _only(mod, r"^main, binding 'r': call to f: expected 1 argument\(s\), got 2$")
    mod = IRModule({"f": _callee(), "main": _caller("f", TupleStructInfo([T(3)]))})
    _only(mod, r"call to f: argument 0: expected R.Tensor\(\(\"n\",\), .* got R.Tuple")
    mod = IRModule({"f": _callee(), "main": _caller("f", T(3, dtype="int32"))})
    _only(mod, r"call to f: argument 0: expected dtype float32, got int32")


def test_call_result_struct_info_binds_callee_sizes():
    assert well_formed(IRModule({"f": _callee(), "main": _caller("f", T(3))}))
    mod = IRModule({"f": _callee(), "main": _caller("f", T(5))})  # r claims (3,) but the callee gives (5,)
    _only(mod, r"binding 'r': struct info R.Tensor\(\(3,\).* disagrees with its value's R.Tensor\(\(5,\)")


def test_return_struct_info_must_describe_the_body():
    x = Var("x", T(3))
    _only(IRModule({"main": _func([x], [], op.exp(x), ret=T(4))}),
          r"^main, return value: return struct info R.Tensor\(\(4,\).* does not describe the body's R.Tensor\(\(3,\)")
    assert well_formed(_func([x], [], op.exp(x), ret=TensorStructInfo(ndim=1, dtype=F32)))  # coarser is fine


def test_undefined_size_variable():
    x, a = Var("x", T("n")), Var("a", T("m"))
    f = _func([x], [BindingBlock([VarBinding(a, op.exp(x))])], x)
    problems = _problems(IRModule({"main": f}))
    assert any(re.search(r"binding 'a': size variable m in .* not defined by a parameter or an earlier match_cast",
                         p) for p in problems), problems
    y = Var("y", T(2 * SizeVar("k")))
    _only(_func([y], [], y), r"parameter 'y': size variable k in .*2 \* k")


def test_interpreting_an_undefined_size_variable_names_it():
    """The interpreter does not require a well-formed module, but a size it cannot evaluate is an
    InterpreterError naming the variable (a bare KeyError said only 'abc')."""
    import relax_mlir
    from relax_mlir.interpreter import InterpreterError
    x = Var("x", T("n"))
    data = np.arange(5, dtype=np.float32)
    prim, shape, sliced = PrimValue(SizeVar("abc")), ShapeExpr(["k", 2]), op.strided_slice(x, [0], [0], ["k"])
    for value, shown, name in ((prim, r"R.prim_value\(abc\)", "abc"), (shape, r"R.shape\(\[k, 2\]\)", "k"),
                               (sliced, r"relax.strided_slice's attributes", "k")):
        y = Var("y", value.struct_info)
        mod = IRModule({"main": _func([x], [BindingBlock([VarBinding(y, value)])], y)})
        assert not well_formed(mod)
        with pytest.raises(InterpreterError, match=rf"^main: .*{shown}.* the size variable '{name}', which has no "
                           "value"):
            relax_mlir.interpret(mod, "main", data)
    # Defined, the same sizes evaluate (the oracle: Python's own arithmetic on the argument's length).
    y = Var("y", PrimValue(2 * SizeVar("n") + 1).struct_info)
    mod = IRModule({"main": _func([x], [BindingBlock([VarBinding(y, PrimValue(2 * SizeVar("n") + 1))])], y)})
    assert relax_mlir.interpret(mod, "main", data) == 2 * len(data) + 1


def test_size_variable_used_before_its_match_cast():
    x = Var("x", TensorStructInfo(ndim=1, dtype=F32))
    s, v, shape = Var("s", T("m")), Var("v", T("m")), Var("shape", ShapeStructInfo(["m"]))
    early = VarBinding(shape, ShapeExpr(["m"]))
    f = _func([x], [BindingBlock([early, MatchCast(v, x, T("m")), VarBinding(s, op.exp(v))])], s)
    _only(f, r"^<function>, binding 'shape': size variable m in R.Shape\(\[\"m\"\]\) not defined")
    good = _func([x], [BindingBlock([MatchCast(v, x, T("m")), VarBinding(shape, ShapeExpr(["m"]))])], shape)
    check_well_formed(good)


def test_tuple_index_out_of_range():
    x, t, a = Var("x", T(3)), Var("t", TupleStructInfo([T(3), T(3)])), Var("a", T(3))
    item = TupleGetItem(t, 2, struct_info=T(3))  # given struct info: the constructor does not check the index
    f = _func([x], [BindingBlock([VarBinding(t, Tuple([x, x])), VarBinding(a, item)])], a)
    _only(IRModule({"main": f}), r"^main, binding 'a': tuple index 2 is out of range for a tuple of 2 field\(s\)")


def test_a_tuple_index_must_be_an_int():
    """``t[True]`` was built and printed as ``t[True]`` (TVM takes an int); a NumPy integer is an int."""
    t = Var("t", TupleStructInfo([T(3), T(4)]))
    for bad in (True, 1.0, "1"):
        with pytest.raises(TypeError, match=f"TupleGetItem: the index must be an int, got {bad!r}"):
            TupleGetItem(t, bad)
    item = TupleGetItem(t, np.int64(1))
    assert type(item.index) is int and item.struct_info == T(4)


def test_every_problem_is_listed_with_its_function():
    x, z = Var("x", T(3)), Var("z", T(3))
    a, lv = Var("a", T(4)), DataflowVar("lv", T(3))
    f = _func([x], [BindingBlock([VarBinding(a, op.exp(x)), VarBinding(lv, op.add(x, z))])], const(np.zeros(3)))
    mod = IRModule({"main": f, "other": _caller("missing", T(3))})
    with pytest.raises(WellFormedError) as info:
        check_well_formed(mod)
    problems = info.value.problems
    assert len(problems) == 4, problems
    assert problems[0].startswith("main, binding 'a': struct info")
    assert problems[1] == "main, binding 'lv': var 'z' is not defined in this function"
    assert problems[2] == "main, binding 'lv': DataflowVar 'lv' is defined outside a dataflow block"
    assert problems[3] == "other, binding 'r': call to undefined function 'missing'"
    assert str(info.value).startswith("module is not well formed (4 problems):\n  - main, binding 'a'")
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("symbol", [3, None, ("main",)])
def test_a_global_symbol_must_be_a_string(symbol):
    """The parser refuses ``R.func_attr({"global_symbol": 3})``; a BlockBuilder can set any value, which passed the
    check and compiled, and failed where the module was looked up by that name."""
    x = Var("x", T(2))
    bb = BlockBuilder()
    with bb.function("main", [x], attrs={"global_symbol": symbol}):
        bb.emit_func_output(bb.emit(op.add(x, x)))
    mod = bb.get()
    message = f"global_symbol must be a string, got {symbol!r} ({type(symbol).__name__})"
    _only(mod, "^" + re.escape(f"main, attributes: {message}"))
    _only(mod["main"], "^" + re.escape(f"<function>, attributes: {message}"))  # (named by no symbol: it has none)
    assert well_formed(IRModule({"main": mod["main"].with_attr("global_symbol", "main")}))
