"""TVM parser forms and checks found by replaying TVM's parser tests (hunt s19): a size a parameter only uses in an
expression is refused, the result is checked as TVM's parser checks it, sizes declared by tuple assignment, ops
called through a Python name, ``R.Any`` and ``-> T.int64``, and ``ShapeExpr([-1])`` built in Python. Expected
values computed with NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import BlockBuilder, ShapeExpr, TensorStructInfo, Var, op
from relax_mlir.ir import assert_structural_equal, well_formed
from relax_mlir.script import ParseError, from_source
from relax_mlir.script import ir as I
from relax_mlir.script import relax as R
from relax_mlir.script import tir as T
from relax_mlir.testing import roundtrip

# Declared in Python, two at once, as TVM's tests write it.
rows, cols = T.int64(), T.int64()
# An op named by a Python name of the defining scope, as TVM's op tests parametrize it.
activation = R.sigmoid


def _run(func, *args):
    return rm.interpret(rm.IRModule.from_expr(func) if isinstance(func, rm.ir.Function) else func, "main", *args)


# -- 1. a size no parameter defines -------------------------------------------------------------------------------

def test_a_size_a_parameter_uses_only_in_an_expression_is_refused_naming_function_parameter_and_size():
    # TVM's test_undefined_symbolic_var_raises_error: nothing defines m, so m + 1 = 3 and 2m = 5 were both taken.
    with pytest.raises(ParseError, match=r"test_parser_s19.py:\d+:\d+: function foo: parameter 'x' "
                                         r"\(R.Tensor\(\(\"m \+ 1\", \"2 \* m\"\), dtype=\"float32\"\)\) uses the size "
                                         r"m, which no parameter defines"):
        @R.function
        def foo(x: R.Tensor(("m + 1", "m * 2"), "float32")):
            z = R.add(x, x)
            return z

    text = ('@R.function\ndef foo(x: R.Tensor((2,), "float32"), y: R.Tensor(("n * k", "k"), "float32")):\n'
            "    return y\n")
    with pytest.raises(ParseError, match=r"<string>:2:42: function foo: parameter 'y' .* uses the size n, which no "
                                         r"parameter defines"):
        from_source(text)
    unchecked = from_source(text, check_well_formed=False)  # read as written, as the option reads everything
    assert unchecked.params[1].struct_info == TensorStructInfo(("k * n", "k"), "float32")
    assert not well_formed(rm.IRModule.from_expr(unchecked))


def test_a_size_another_parameter_defines_may_be_used_in_an_expression_before_it():
    @R.function
    def foo(x: R.Tensor(("m + 1",), "float32"), y: R.Tensor(("m",), "float32"), k: R.Prim(value="p"),
            z: R.Tensor(("p * 2",), "float32")):
        a = R.add(R.strided_slice(x, axes=[0], begin=[1], end=["m + 1"]), y)
        return (a, z)

    x, y, z = np.arange(4, dtype="float32"), np.ones(3, "float32"), np.zeros(4, "float32")
    out = _run(foo, x, y, 2, z)
    np.testing.assert_array_equal(out[0], x[1:] + y)
    with pytest.raises(Exception, match="m"):  # x must hold m + 1 = 4 elements
        _run(foo, np.arange(5, dtype="float32"), y, 2, z)


def test_a_local_function_s_parameter_may_use_the_enclosing_function_s_sizes():
    @R.function
    def outer(x: R.Tensor(("n",), "float32")):
        @R.function
        def inner(y: R.Tensor(("n + 1",), "float32")) -> R.Tensor(("n + 1",), "float32"):
            return y

        z = R.concat([x, R.const(np.ones(1, "float32"))], axis=0)
        w = inner(z)
        return w

    np.testing.assert_array_equal(_run(outer, np.arange(3, dtype="float32")), [0, 1, 2, 1])


def test_the_parser_checks_what_it_returns_unless_told_not_to():
    # a size nothing defines, outside the parameters: the well-formedness check's, as TVM's parser runs it
    with pytest.raises(ParseError, match=r"function f is not well formed \(1 problem\):\n  - f, binding 's': size "
                                         r"variable k in R.Shape\(\[\"k\"\]\) not defined by a parameter or an "
                                         r"earlier match_cast\n\(check_well_formed=False"):
        @R.function
        def f(x: R.Tensor((2,), "float32")):
            s = R.shape(["k"])
            return s

    @R.function(check_well_formed=False)
    def g(x: R.Tensor((2,), "float32")):
        s = R.shape(["k"])
        return s

    @I.ir_module(check_well_formed=False)
    class Module:
        @R.function
        def main(x: R.Tensor((2,), "float32")):
            s = R.shape(["k"])
            return s

    text = g.script()
    with pytest.raises(ParseError, match=r"module Module is not well formed"):
        from_source(Module.script())
    assert not well_formed(rm.IRModule.from_expr(g)) and not well_formed(Module)
    assert not well_formed(from_source(text, check_well_formed=False))
    with pytest.raises(ParseError, match=r"@R.function: check_well_formed must be True or False, got 1"):
        from_source(text.replace("@R.function", "@R.function(check_well_formed=1)"))
    with pytest.raises(ParseError, match=r"@I.ir_module: unknown option 'check' \(expected check_well_formed or "
                                         r"s_tir\)"):
        from_source("@I.ir_module(check=False)\nclass M:\n    pass\n")
    assert len(from_source("@I.ir_module(s_tir=True)\nclass M:\n    pass\n")) == 0  # (TVM's option; no TIR here)


def test_a_binding_annotated_narrower_than_its_value_still_parses():
    # a run-time check here (the struct-info part of well_formed is not the parser's check)
    @R.function
    def f(x: R.Tensor("float32", ndim=2)):
        y: R.Tensor((2, 3), "float32") = R.add(x, x)
        return y

    np.testing.assert_array_equal(_run(f, np.ones((2, 3), "float32")), np.full((2, 3), 2, "float32"))


# -- 2. sizes declared by tuple assignment ------------------------------------------------------------------------

def test_sizes_declared_by_tuple_assignment_in_the_body():
    # TVM's test_tuple_return_2 and others declare sizes so
    @R.function
    def foo(x: R.Tensor("float32", ndim=2)):
        n, m = T.int64(), T.int64()
        x0 = R.match_cast(x, R.Tensor((n, m), "float32"))
        y = R.reshape(x0, (m, n))
        return y

    x = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_array_equal(_run(foo, x), x.reshape(3, 2))
    assert foo.body.blocks[0].bindings[0].struct_info == TensorStructInfo(("n", "m"), "float32")
    text = foo.script().replace('R.Tensor(("n", "m")', "R.Tensor((n, m)").replace(
        "    x0 =", "    n, m = T.int64(), T.int64()\n    x0 =")
    assert "n, m = T.int64(), T.int64()" in text
    assert_structural_equal(from_source(text), foo)
    roundtrip(rm.IRModule.from_expr(foo))


def test_sizes_declared_by_tuple_assignment_in_python():
    @R.function
    def foo(x: R.Tensor((rows, cols), "float32")) -> R.Tensor((cols, rows), "float32"):
        y = R.permute_dims(x)
        return y

    assert foo.params[0].struct_info == TensorStructInfo(("rows", "cols"), "float32")
    x = np.arange(6, dtype="float32").reshape(3, 2)
    np.testing.assert_array_equal(_run(foo, x), x.T)

    def declare():
        a, b, c = T.int64(), T.int32(is_size_var=True), T.int64()  # a comment may follow
        return a, b, c

    assert [str(d) for d in declare()] == ["a", "b", "c"]


def test_a_size_declaration_that_names_no_size_is_refused():
    with pytest.raises(ParseError, match=r"T.int64\(\) declares one symbolic size: write `n = T.int64\(\)`, or "
                                         r"several at once, one per name: `n, m = T.int64\(\), T.int64\(\)`"):
        from_source('@R.function\ndef f(x: R.Tensor((2,), "float32")):\n    n, m, k = T.int64(), T.int64()\n'
                    "    return x\n")
    with pytest.raises(TypeError, match=r"or `n, m = T.int64\(\), T.int64\(\)`"):
        u, v = T.int64(), 3
    with pytest.raises(TypeError, match=r"on a line of its own"):
        u = T.int64(); v = T.int64()  # noqa: E702 - both would be named u


# -- 3. an op called through a Python name -------------------------------------------------------------------------

@pytest.mark.parametrize("unary, reference", [(op.exp, np.exp), (op.negative, np.negative), (R.tanh, np.tanh),
                                              (op.nn.relu, lambda a: np.maximum(a, 0))])
def test_an_op_named_by_a_closure_variable(unary, reference):
    # TVM's test_tvmscript_parser_op_arith_cmp.py: the op is the test's parameter
    @R.function
    def foo(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        gv: R.Tensor((2, 3), "float32") = unary(x)
        return gv

    x = Var("x", TensorStructInfo((2, 3), "float32"))
    bb = BlockBuilder()
    with bb.function("foo", [x]):
        gv = bb.emit(unary(x))
        bb.emit_func_output(gv)
    assert_structural_equal(foo, bb.get()["foo"])
    roundtrip(rm.IRModule.from_expr(foo))
    a = np.linspace(-2, 2, 6, dtype="float32").reshape(2, 3)
    np.testing.assert_allclose(_run(foo, a), reference(a), rtol=1e-6)


def test_an_op_named_in_python_or_in_the_body():
    @R.function
    def foo(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")):
        add = R.add
        c = R.const
        with R.dataflow():
            mul = R.nn.relu
            z = mul(activation(add(x, y)))
            w = R.multiply(z, c(2.0, "float32"))
            R.output(w)
        return w

    x, y = np.linspace(-1, 1, 6, dtype="float32").reshape(2, 3), np.ones((2, 3), "float32")
    np.testing.assert_allclose(_run(foo, x, y), 2 / (1 + np.exp(-(x + y))), rtol=1e-6)
    text = foo.script()
    assert "R.sigmoid(" in text and "R.nn.relu(" in text and "add =" not in text
    roundtrip(rm.IRModule.from_expr(foo))


def test_an_op_name_in_text_and_from_source_s_env():
    body = '@R.function\ndef f(x: R.Tensor((2, 3), "float32")):\n    y = act(x)\n    return y\n'
    assert "R.tanh(x)" in from_source(body, env={"act": op.tanh}).script()
    with pytest.raises(ParseError, match=r"<string>:3:9: unknown callee act"):
        from_source(body)  # from_source evaluates nothing: without env, act is no op
    aliased = from_source(body.replace("    y = act(x)", "    act = R.sigmoid\n    y = act(x)\n    act = y")
                          .replace("return y", "return act"))
    assert "R.sigmoid(x)" in aliased.script()  # (a Relax variable of the name, bound later, is the variable)
    np.testing.assert_allclose(_run(aliased, np.zeros((2, 3), "float32")), np.full((2, 3), 0.5))


# -- 4. R.Any and -> T.int64 ---------------------------------------------------------------------------------------

def test_r_any_is_r_object():
    @R.function
    def foo(x: R.Any, y: R.Tensor((2,), "float32")) -> R.Any:
        o: R.Any = R.call_packed("f", y, sinfo_args=R.Any)
        return x

    @R.function
    def bar(x: R.Object, y: R.Tensor((2,), "float32")) -> R.Object:
        o: R.Object = R.call_packed("f", y, sinfo_args=R.Object)
        return x

    assert R.Any is R.Object
    assert_structural_equal(foo, bar)
    assert_structural_equal(from_source(foo.script().replace("R.Object", "R.Any")), bar)


def test_a_prim_return_written_as_tvm_prints_it():
    # TVM's printer: `def func() -> T.int64: return 1`
    func = from_source("@R.function\ndef func() -> T.int64:\n    return 1\n")

    @R.function
    def expected() -> R.Prim("int64"):
        return R.prim_value(1)

    assert_structural_equal(func, expected)
    assert _run(func) == 1
    half = from_source('@R.function\ndef h(n: T.int64) -> R.Prim("float32"):\n    return 2.5\n')
    assert half.params[0].struct_info == R.Prim("int64") and _run(half, 3) == 2.5
    roundtrip(rm.IRModule.from_expr(half))
    with pytest.raises(ParseError, match="returns R.Tensor"):  # a number elsewhere is R.const's, a tensor
        from_source('@R.function\ndef g() -> R.Prim("int64"):\n    x = 1\n    return x\n')


# -- 5. ShapeExpr([-1]) ---------------------------------------------------------------------------------------------

def test_shape_expr_holds_reshape_s_placeholder_as_r_shape_does():
    # TVM's test_reshape_infer_ty: relax.op.reshape(x, relax.ShapeExpr([-1]))
    x = Var("x", TensorStructInfo((2, 3, 4, 5), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit(op.reshape(x, ShapeExpr([-1])))
        z = bb.emit(op.reshape(y, ShapeExpr([6, -1])))
        bb.emit_func_output(z)
    built = bb.get()

    @R.function
    def parsed(x: R.Tensor((2, 3, 4, 5), "float32")):
        y = R.reshape(x, R.shape([-1]))
        z = R.reshape(y, R.shape([6, -1]))
        return z

    assert_structural_equal(built["main"], parsed)
    assert built["main"].body.blocks[0].bindings[1].var.struct_info == TensorStructInfo((6, 20), "float32")
    a = np.arange(120, dtype="float32").reshape(2, 3, 4, 5)
    np.testing.assert_array_equal(_run(built, a), a.reshape(6, 20))


def test_a_shape_value_holding_the_placeholder_is_of_known_length_only():
    s = ShapeExpr([-1, "n"])
    assert s.values == (-1, rm.SizeVar("n")) and s.struct_info == R.Shape(ndim=2)

    @R.function
    def f(x: R.Tensor((2, 3), "float32")):
        s = R.shape([-1])
        return s

    assert f.body.blocks[0].bindings[0].var.struct_info == R.Shape(ndim=1)
    roundtrip(rm.IRModule.from_expr(f))
    assert _run(f, np.ones((2, 3), "float32")) == (-1,)
    with pytest.raises(ValueError, match=r"ShapeExpr: dimension must be non-negative, got -2"):
        ShapeExpr([-2])


def test_cls_bound_to_the_module_as_tvms_printer_writes_it():
    """TVM's printer starts each function of a module with ``cls = Module``; it was an undefined variable here."""
    text = '''
@I.ir_module
class Module:
    @R.function
    def double(a: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        cls = Module
        b = R.add(a, a)
        return b

    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        cls = Module
        p = cls.double(x)
        return p
'''
    mod = from_source(text)
    np.testing.assert_array_equal(rm.interpret(mod, "main", np.array([1.0, 2.5], np.float32)), [2.0, 5.0])
    with pytest.raises(ParseError, match="Other"):
        from_source(text.replace("cls = Module\n        p", "cls = Other\n        p"))
