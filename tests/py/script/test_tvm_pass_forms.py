"""TVMScript forms and results found by replaying TVM's pass tests: a function's result erased to the sizes its
parameters define (TVM's ``EraseToWellDefined``), ``R.Tuple([...])`` and ``R.Tensor("float32", ndim=4)``, and
the refusal of a broadcast of unrelated symbolic sizes. (No ``from __future__ import annotations``: Python must
evaluate the decorated modules' annotations, as it does by default.)"""

import numpy as np
import pytest

import relax_mlir
from relax_mlir import transform
from relax_mlir.interpreter import InterpreterError, interpret
from relax_mlir.ir import BlockBuilder, IRModule, TensorStructInfo, TupleStructInfo, Var
from relax_mlir.ir.block_builder import call_return_struct_info
from relax_mlir.ir.expr import Call
from relax_mlir.ir.struct_info import FuncStructInfo, PrimStructInfo, ShapeStructInfo, erase_to_well_defined
from relax_mlir.ir.sym import SizeVar
from relax_mlir.ir.well_formed import check_well_formed
from relax_mlir.script import ParseError, from_source
from relax_mlir.script import ir as I, relax as R, tir as T
from relax_mlir.testing import roundtrip

_F32_1D = TensorStructInfo(None, "float32", ndim=1)

_SIZE_FROM_MATCH_CAST = '''
@I.ir_module
class Mod:
    @R.function
    def f(y: R.Tensor(ndim=1, dtype="float32")):
        n = T.int64()
        y2 = R.match_cast(y, R.Tensor((n,), "float32"))
        z = R.ones((n,), "float32")
        return z

    @R.function
    def main(x: R.Tensor((4,), "float32"), w: R.Tensor((WIDTH,), "float32")):
        a = Mod.f(x)
        b = Mod.f(w)
        c = R.add(a, b)
        return c
'''


def _binding(func, name):
    return next(b for block in func.body.blocks for b in block.bindings if b.var.name_hint == name)


# -- 1. a result size defined inside a function ----------------------------------------------------------------

def test_a_result_size_defined_by_a_match_cast_is_erased_for_callers():
    """Two calls on 4 and 3 elements were both ``(n,)`` (the callee's n), so their add passed inference and the
    module was ill-formed. Now f returns ``R.Tensor(ndim=1)``, as TVM's does, and the add is what TVM infers."""
    mod = from_source(_SIZE_FROM_MATCH_CAST.replace("WIDTH", "3"))
    assert mod["f"].ret_struct_info == _F32_1D
    assert mod["f"].body.body.struct_info.shape == (SizeVar("n"),)  # (inside f, n is defined)
    main = mod["main"]
    for name in ("a", "b", "c"):
        assert _binding(main, name).var.struct_info == _F32_1D
    assert main.ret_struct_info == _F32_1D
    check_well_formed(mod)
    with pytest.raises(InterpreterError, match=r"binding 'c': relax.add failed .* shape \(4,\) .* shape \(3,\)"):
        interpret(mod, "main", np.ones(4, "float32"), np.ones(3, "float32"))
    same = from_source(_SIZE_FROM_MATCH_CAST.replace("WIDTH", "4"))
    np.testing.assert_array_equal(interpret(same, "main", np.zeros(4, "float32"), np.zeros(4, "float32")),
                                  np.full(4, 2, "float32"))
    assert from_source(mod.script()).script() == mod.script()


def test_lambda_lift_of_a_local_function_that_defines_its_result_size():
    """TVM's test_runtime_symbolic_variable_defined_by_inner_func: LambdaLift raised WellFormedError (main's 'b'
    named the local function's n)."""
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((4,), "float32")):
            @R.function
            def from_param(y: R.Tensor(("n",), "float32")):
                n = T.int64()
                z = R.ones((n,), "float32")
                return z

            @R.function
            def from_match_cast(y: R.Tensor(ndim=1, dtype="float32")):
                n = T.int64()
                y2 = R.match_cast(y, R.Tensor((n,), "float32"))
                z = R.ones_like(y2)
                return z

            a = from_param(x)
            b = from_match_cast(x)
            return a, b

    after = transform.LambdaLift()(Before)
    check_well_formed(after)
    assert sorted(name for name, _ in after.items()) == ["main", "main_from_match_cast", "main_from_param"]
    assert after["main"].ret_struct_info == TupleStructInfo([TensorStructInfo((4,), "float32"), _F32_1D])
    assert after["main_from_match_cast"].ret_struct_info == _F32_1D
    assert after["main_from_param"].ret_struct_info == TensorStructInfo(("n",), "float32")
    for result in interpret(after, "main", np.zeros(4, "float32")):
        np.testing.assert_array_equal(result, np.ones(4, "float32"))


def test_an_annotated_result_size_is_kept_and_erased_where_called():
    """TVM never prints such an annotation (its Function erases it; its parser refuses the name). Here passes may
    build one (LiftTransformParams' transform function) and every printed function must parse back the same, so
    the annotation is kept; each call erases what its arguments do not bind, so callers stay well formed."""
    signature = 'def f(y: R.Tensor(ndim=1, dtype="float32"))'
    text = _SIZE_FROM_MATCH_CAST.replace("WIDTH", "3").replace(f"{signature}:",
                                                                f'{signature} -> R.Tensor(("n",), "float32"):')
    mod = from_source(text)
    assert mod["f"].ret_struct_info == TensorStructInfo(("n",), "float32")
    assert [_binding(mod["main"], v).var.struct_info for v in ("a", "b", "c")] == [_F32_1D] * 3
    check_well_formed(mod)
    assert from_source(mod.script()).script() == mod.script()

    @I.ir_module
    class Local:
        @R.function
        def main(x: R.Tensor(("m",), "float32")):
            @R.function
            def inner(y: R.Tensor(ndim=1, dtype="float32")) -> R.Tensor(("m",), "float32"):
                return x

            a = inner(x)
            return a

    assert _binding(Local["main"], "inner").value.ret_struct_info == TensorStructInfo(("m",), "float32")
    assert Local["main"].ret_struct_info == _F32_1D  # (inner's m is not bound by its arguments)
    lifted = roundtrip(transform.LambdaLift()(Local))  # the capture x binds m in the lifted call
    assert _binding(lifted["main"], "a").value.struct_info == TensorStructInfo(("m",), "float32")


def test_block_builder_erases_a_function_result_to_its_parameters_sizes():
    bb = BlockBuilder()
    y = Var("y", _F32_1D)
    with bb.function("f", [y]):
        z = bb.match_cast(y, TensorStructInfo(("n",), "float32"))
        bb.emit_func_output(z)
    x = Var("x", TensorStructInfo((4,), "float32"))
    with bb.function("main", [x]):
        a = bb.emit(Call(bb.get_global_var("f"), [x], {}, None))
        bb.emit_func_output(a)
    mod = bb.get()
    assert mod["f"].ret_struct_info == _F32_1D
    assert a.struct_info == _F32_1D and mod["main"].ret_struct_info == _F32_1D
    check_well_formed(mod)


def test_a_call_erases_the_sizes_its_arguments_do_not_bind():
    callee = FuncStructInfo([TensorStructInfo(("n",), "float32")],
                            TupleStructInfo([TensorStructInfo(("n", "k"), "float32"), ShapeStructInfo(["k"]),
                                             PrimStructInfo("int64", SizeVar("k")), TensorStructInfo(("n",), "int32")]))
    got = call_return_struct_info("g", callee, [TensorStructInfo((5,), "float32")])
    assert got == TupleStructInfo([TensorStructInfo(None, "float32", ndim=2), ShapeStructInfo(ndim=1),
                                   PrimStructInfo("int64"), TensorStructInfo((5,), "int32")])
    # an argument of unknown shape binds nothing: the callee's n is not the caller's
    assert call_return_struct_info("g", FuncStructInfo([TensorStructInfo(("n",), "float32")],
                                                       TensorStructInfo(("n",), "float32")), [_F32_1D]) == _F32_1D
    assert erase_to_well_defined(callee.ret, {"n", "k"}) is callee.ret


def test_a_prim_parameter_binds_the_size_a_result_names():
    mod = from_source('''
@I.ir_module
class Mod:
    @R.function
    def f(x: R.Tensor(ndim=1, dtype="float32"), k: R.Prim(value="m")) -> R.Tensor(("m",), "float32"):
        z = R.zeros(("m",), "float32")
        return z

    @R.function
    def main(x: R.Tensor((4,), "float32")):
        a = Mod.f(x, R.prim_value(3))
        return a
''')
    assert mod["main"].ret_struct_info == TensorStructInfo((3,), "float32")
    check_well_formed(mod)


def test_compile_refuses_an_erased_result_and_compiles_the_rest():
    mod = from_source(_SIZE_FROM_MATCH_CAST.replace("WIDTH", "3"))
    with pytest.raises(ValueError, match=r"\bf: result .*unknown shape"):
        relax_mlir.compile(mod)

    @I.ir_module
    class Sized:
        @R.function
        def main(x: R.Tensor(("n",), "float32")):
            @R.function
            def from_param(y: R.Tensor(("n",), "float32")):
                z = R.add(y, y)
                return z

            a = from_param(x)
            return a

    vm = relax_mlir.VirtualMachine(relax_mlir.compile(Sized))
    np.testing.assert_array_equal(vm["main"](np.arange(5, dtype="float32")), 2 * np.arange(5, dtype="float32"))


# -- 2. TVM's spellings of R.Tuple and R.Tensor ---------------------------------------------------------------

_FORMS = '''
@I.ir_module
class Mod:
    @R.function
    def main(x: R.Tensor("float32", ndim=2), t: R.Tuple([R.Tensor((2,), "float32"), R.Tuple([])]),
             u: R.Tuple(R.Tensor, R.Shape)) -> R.Tuple([R.Tensor("float32", ndim=2), R.Tensor((2,), "float32")]):
        a = t[0]
        return (x, a)
'''
_EXPECTED_PARAMS = [TensorStructInfo(None, "float32", ndim=2),
                    TupleStructInfo([TensorStructInfo((2,), "float32"), TupleStructInfo([])]),
                    TupleStructInfo([TensorStructInfo(None, "float32"), ShapeStructInfo()])]


def test_tuple_of_a_list_and_a_dtype_first_tensor_parse_from_text():
    mod = from_source(_FORMS)
    assert [p.struct_info for p in mod["main"].params] == _EXPECTED_PARAMS
    assert mod["main"].ret_struct_info == TupleStructInfo([_EXPECTED_PARAMS[0], TensorStructInfo((2,), "float32")])
    assert from_source(mod.script()).script() == mod.script()


def test_tuple_of_a_list_and_a_dtype_first_tensor_in_a_decorated_module():
    """Python evaluates these annotations before the parser reads them: R.Tuple([...]) raised a TypeError there."""
    @I.ir_module
    class Mod:
        @R.function
        def main(x: R.Tensor("float32", ndim=2), t: R.Tuple([R.Tensor((2,), "float32"), R.Tuple([])]),
                 u: R.Tuple(R.Tensor, R.Shape)) -> R.Tuple([R.Tensor("float32", ndim=2), R.Tensor((2,), "float32")]):
            a = t[0]
            return (x, a)

    assert Mod.script() == from_source(_FORMS).script()
    assert R.Tuple([R.Tensor("int8", ndim=1)]) == R.Tuple(R.Tensor(dtype="int8", ndim=1))
    assert R.Tensor("float16") == TensorStructInfo(None, "float16")


@pytest.mark.parametrize("call, message", [
    (lambda: R.Tuple(1, 2), r"R.Tuple: field 0 must be struct info \(R.Tensor\(...\), .*got int 1; the fields are "
                            r"given as arguments, R.Tuple\(a, b\), or as one list, R.Tuple\(\[a, b\]\)"),
    (lambda: R.Tuple([R.Tensor()], R.Tensor()), r"R.Tuple: field 0 must be struct info .*got list"),
    (lambda: R.Tensor("float32", "float32"), r"R.Tensor: shape must be a tuple or list of dimensions, got the string "
                                             r"'float32' \(a dtype first is read as one only when no dtype= follows"),
])
def test_wrong_struct_info_forms_from_python_say_what_was_expected(call, message):
    with pytest.raises(TypeError, match=message):
        call()


@pytest.mark.parametrize("annotation, column, message", [
    ("R.Tuple([1])", 52, "expected struct info: R.Tensor"),  # (at the field)
    ('R.Tensor("float32", "float32")', 52, r"expected a shape: a tuple of ints or size-variable names"),
    ("R.Tuple([R.Tensor()], dtype=1)", 43, r"R.Tuple takes struct infos as positional arguments, or one list"),
])
def test_wrong_struct_info_forms_in_text_are_parse_errors(annotation, column, message):
    text = f"@R.function\ndef main(x: R.Tensor((2,), \"float32\"), y: {annotation}):\n    return x\n"
    with pytest.raises(ParseError, match=rf"<string>:2:{column}: {message}"):
        from_source(text)


# -- 3. broadcasting unrelated symbolic sizes -------------------------------------------------------------------

_UNRELATED = '''
@R.function
def main(x: R.Tensor(("n", "m"), "float32"), y: R.Tensor(("p", "q"), "float32")):
    CAST
    z = R.multiply(x, Y)
    return z
'''


def test_a_broadcast_of_unrelated_symbolic_sizes_is_refused_saying_why_and_what_to_do():
    """TVM infers R.Tensor(ndim=2); compiled code would assume the sizes equal, so the broadcast the op was written
    for would fail at run time, and the result could not be returned: refused where written, with the remedy."""
    with pytest.raises(ParseError, match=r"<string>:4:9: relax.multiply: cannot broadcast shapes \(n, m\) and "
                                         r"\(p, q\): dims m and q may differ or be 1; match_cast an operand to the "
                                         r"size it has first \(q as m, or as 1 where it broadcasts\). TVM infers only "
                                         r"the rank here \(R.Tensor\(ndim=2\)\), a shape compiled code could neither "
                                         r"broadcast at run time nor return"):
        from_source(_UNRELATED.replace("    CAST\n", "").replace("Y)", "y)"))
    with pytest.raises(ParseError, match=r"dims n and 4 may differ or be 1; .*\(n as 4, or as 1"):
        from_source(_UNRELATED.replace("    CAST\n", "").replace('("p", "q")', '(4, "m")').replace("Y)", "y)"))


def test_the_remedy_the_broadcast_refusal_names_compiles():
    func = from_source(_UNRELATED.replace("CAST", 'y2 = R.match_cast(y, R.Tensor(("n", "m"), "float32"))')
                       .replace("Y)", "y2)"))
    assert func.ret_struct_info == TensorStructInfo(("n", "m"), "float32")
    mod = IRModule({"main": func})
    x, y = np.arange(6, dtype="float32").reshape(2, 3), np.full((2, 3), 3, "float32")
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod))
    np.testing.assert_array_equal(vm["main"](x, y), x * y)

