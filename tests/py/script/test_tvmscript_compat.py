"""TVMScript forms TVM reads that the text reader refused or misread: a tensor annotation without a dtype (TVM's
"any dtype", which nothing here represents: a ParseError saying so, where a float32 default was assumed),
``R.reshape(x, s)`` with ``s`` a shape value, and ``vdevice=`` / ``I.module_global_infos`` of the host CPU (read
and dropped: the host CPU is the only device). Expected values computed with NumPy."""

import re

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import op, transform
from relax_mlir.backend.signature import ExportError
from relax_mlir.interpreter import InterpreterError
from relax_mlir.ir import BlockBuilder, ShapeStructInfo, TensorStructInfo, Var, assert_structural_equal
from relax_mlir.script import ParseError, from_source
from relax_mlir.script import ir as I
from relax_mlir.script import relax as R
from relax_mlir.testing import roundtrip


def _at(text: str, fragment: str, nth: int = 1) -> str:
    """``<string>:line:column`` of the ``nth`` occurrence of ``fragment`` in ``text``."""
    index = -1
    for _ in range(nth):
        index = text.index(fragment, index + 1)
    before = text[:index]
    return f"<string>:{before.count(chr(10)) + 1}:{index - before.rfind(chr(10))}"


# -- a tensor without a dtype -------------------------------------------------------------------------

_NO_DTYPE = "TVM reads it as a tensor of any dtype, which this project does not represent"


@pytest.mark.parametrize("annotation, fragment, what", [
    ("x: R.Tensor((2, 3), dtype=None)", "R.Tensor", "R.Tensor with dtype=None"),
    ('x: R.Tensor((2, 3), "void")', "R.Tensor", "R.Tensor with dtype='void'"),
])
def test_an_explicit_any_dtype_is_a_parse_error_saying_to_give_one(annotation, fragment, what):
    """TVM's explicit "any dtype" has no counterpart here: refused, not guessed (``dtype=None`` read as float32)."""
    text = f"@R.function\ndef f({annotation}):\n    return x\n"
    with pytest.raises(ParseError, match=f"^{re.escape(_at(text, fragment))}: {re.escape(what)}: "
                                         f"{re.escape(_NO_DTYPE)}.*give one: "
                                         + re.escape('R.Tensor((2, 3), "float32")')):
        from_source(text)


@pytest.mark.parametrize("annotation, want", [
    ("x: R.Tensor", TensorStructInfo(None, "float32", -1)),
    ("x: R.Tensor()", TensorStructInfo(None, "float32", -1)),
    ("x: R.Tensor(ndim=2)", TensorStructInfo(None, "float32", 2)),
    ("x: R.Tensor((2, 3))", TensorStructInfo((2, 3), "float32")),
])
def test_a_tensor_without_a_dtype_is_float32_as_from_python(annotation, want):
    """A bare ``R.Tensor`` was "expected struct info"; every dtype-less form is now float32, as ``R.Tensor(...)``
    called from Python is (TVM reads them as of any dtype)."""
    mod = from_source(f"@R.function\ndef f({annotation}):\n    return x\n")
    assert mod.params[0].struct_info == want
    assert mod.params[0].struct_info == R.Tensor(*(() if want.shape is None else (want.shape,)), ndim=want.ndim)


def test_a_bare_tensor_return_annotation_and_binding_annotation_read_as_float32():
    mod = from_source('@I.ir_module\nclass M:\n    @R.function\n    def f(x: R.Tensor((2,), "float32")) -> R.Tensor:\n'
                      "        y: R.Tensor = R.add(x, x)\n        return y\n")
    assert mod["f"].ret_struct_info == TensorStructInfo(None, "float32", -1)
    x = np.arange(2, dtype="float32")
    np.testing.assert_array_equal(rm.interpret(mod, "f", x), 2 * x)


def test_a_bare_tensor_of_another_dtype_is_refused_where_the_value_meets_it():
    text = '@R.function\ndef f(x: R.Tensor((2,), "int32")):\n    y: R.Tensor = R.add(x, x)\n    return y\n'
    with pytest.raises(ParseError, match=r"annotation R.Tensor\(dtype=\"float32\"\) does not match the value's "
                                         r"struct info R.Tensor\(\(2,\), dtype=\"int32\"\)"):
        from_source(text)


def test_a_bare_tensor_in_decorated_python_is_float32():
    @R.function
    def f(x: R.Tensor):
        return x

    assert f.params[0].struct_info == TensorStructInfo(None, "float32", -1)


def test_a_dtype_given_first_or_by_keyword_still_reads():
    mod = from_source('@R.function\ndef f(x: R.Tensor("int32", ndim=2), y: R.Tensor(dtype="int32")):\n'
                      "    return x\n")
    assert mod.params[0].struct_info == TensorStructInfo(None, "int32", 2)
    assert mod.params[1].struct_info == TensorStructInfo(None, "int32", -1)


def test_a_bare_shape_annotation_is_a_shape_of_any_length_as_in_tvm():
    mod = from_source("@I.ir_module\nclass M:\n    @R.function\n    def f(s: R.Shape):\n        return s\n")
    assert mod["f"].params[0].struct_info == ShapeStructInfo()
    assert rm.interpret(mod, "f", (2, 3, 4)) == (2, 3, 4)
    roundtrip(mod)


# -- R.reshape(x, s) with s a shape value -------------------------------------------------------------

_RESHAPE = '''@I.ir_module
class Module:
    @R.function
    def by_param(x: R.Tensor((2, 6), "float32"), s: R.Shape(["n", "m"])) -> R.Tensor(("n", "m"), "float32"):
        y = R.reshape(x, s)
        return y

    @R.function
    def by_binding(x: R.Tensor(("n", 6), "float32")):
        n = T.int64()
        s = R.shape([2, n * 3])
        y = R.reshape(x, shape=s)
        return y
'''


def test_reshape_to_a_shape_parameter_takes_its_sizes():
    """``undefined name 's' in an attribute`` before; TVM infers ``(n, m)`` from ``s``'s struct info."""
    mod = from_source(_RESHAPE)
    assert mod["by_param"].body.blocks[0].bindings[0].var.struct_info == TensorStructInfo(("n", "m"), "float32")
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(rm.interpret(mod, "by_param", x, (3, 4)), x.reshape(3, 4))
    np.testing.assert_array_equal(rm.interpret(mod, "by_param", x, (12, 1)), x.reshape(12, 1))
    with pytest.raises(InterpreterError, match=r"cannot reshape array of size 12 into shape \(5,\s*5\)"):
        rm.interpret(mod, "by_param", x, (5, 5))
    roundtrip(mod)


def test_a_shape_parameter_is_refused_at_compile_naming_it():
    """The backend takes tensors only across a function's boundary: the compile error names the parameter."""
    mod = from_source(_RESHAPE)
    with pytest.raises(ExportError, match=r"^by_param: s has struct info Shape\(\(n, m\)\); only tensors"):
        rm.compile(mod)


def test_reshape_to_a_shape_binding_interprets_and_compiles():
    mod = from_source(_RESHAPE)
    assert mod["by_binding"].ret_struct_info == TensorStructInfo((2, "3 * n"), "float32")
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(rm.interpret(mod, "by_binding", x), x.reshape(2, 12))
    # The shape binding is dead once reshape holds its sizes; the backend does not take a shape value, so it goes.
    binding_only = transform.DeadCodeElimination()(rm.ir.IRModule({"by_binding": mod["by_binding"]}))
    vm = rm.VirtualMachine(rm.compile(binding_only))
    np.testing.assert_array_equal(vm["by_binding"](x), x.reshape(2, 12))


@pytest.mark.parametrize("annotation, shown", [("R.Shape(ndim=2)", "R.Shape(ndim=2)"), ("R.Shape", "R.Shape()"),
                                               ('R.Tensor((2,), "int64")', 'R.Tensor((2,), dtype="int64")')])
def test_reshape_to_a_value_without_known_sizes_is_refused_at_it(annotation, shown):
    """TVM would give ``R.Tensor(ndim=2)`` of sizes known only at run time: an op attribute here needs them."""
    text = f'@R.function\ndef f(x: R.Tensor((2, 6), "float32"), s: {annotation}):\n    y = R.reshape(x, s)\n' \
           "    return y\n"
    with pytest.raises(ParseError, match=f"^{re.escape(_at(text, 's)'))}: s is {re.escape(shown)}: an op's "
                                         "attribute takes a shape or a number whose value the struct info gives"):
        from_source(text)


def test_op_reshape_takes_a_shape_variable_as_tvm_s_does():
    x = Var("x", TensorStructInfo((2, 6), "float32"))
    s = Var("s", ShapeStructInfo(["n", "m"]))
    bb = BlockBuilder()
    with bb.function("main", [x, s]):
        y = bb.emit(op.reshape(x, s))
        bb.emit_func_output(y)
    mod = bb.get()
    assert y.struct_info == TensorStructInfo(("n", "m"), "float32")
    data = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(rm.interpret(mod, "main", data, (4, 3)), data.reshape(4, 3))
    with pytest.raises(ValueError, match=r"^relax\.reshape: shape s is Shape\(ndim=2\): reshape needs its dims"):
        op.reshape(x, Var("s", ShapeStructInfo(ndim=2)))


# -- vdevice ------------------------------------------------------------------------------------------

_VDEVICE = '''@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0), I.vdevice({"kind": "llvm"}, 1, "global")]})

    @R.function
    def main(x: R.Tensor((2, 3), "float32", "llvm:1")) -> R.Tensor((2, 3), dtype="float32", vdevice="llvm"):
        y: R.Tensor((2, 3), dtype="float32", vdevice="llvm:0") = R.add(x, x)
        return y
'''
_PLAIN = '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), dtype="float32"):
        y: R.Tensor((2, 3), dtype="float32") = R.add(x, x)
        return y
'''


def test_a_host_cpu_vdevice_is_read_and_dropped():
    """``R.Tensor: unknown argument 'vdevice'`` before. On the host CPU, the only device, it changes nothing: the
    module equals the one without it, and prints (and reads back) as that one."""
    mod = from_source(_VDEVICE)
    assert_structural_equal(mod, from_source(_PLAIN))
    assert "vdevice" not in mod.script() and "global_infos" not in mod.script()
    roundtrip(mod)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(rm.interpret(mod, "main", x), x + x)


@pytest.mark.parametrize("old, new, fragment, message", [
    ('"llvm:1"', '"cuda"', '"cuda"', "R.Tensor: vdevice 'cuda': this backend runs on the host CPU only, TVM's \"llvm\" "
                                     "target"),
    ('"llvm:1"', '"llvm:2"', '"llvm:2"', "R.Tensor: vdevice 'llvm:2': I.module_global_infos declares 2 llvm "
                                         "device(s), so its index must be below 2"),
    ('"llvm:1"', '"llvm:x"', '"llvm:x"', "R.Tensor: vdevice 'llvm:x': expected \"kind\" or \"kind:index\""),
    ('"llvm:1"', "2", "2)", "R.Tensor: vdevice must be a string naming a device (\"llvm\" or \"llvm:0\"), got 2 "
                            "(TVM's order is R.Tensor(shape, dtype, vdevice, ndim): give ndim by keyword)"),
    ('I.vdevice("llvm", 0)', 'I.vdevice("cuda", 0)', '"cuda"', "I.vdevice: target 'cuda': this backend runs on the "
                                                               "host CPU only"),
    ('"global"', '"shared"', '"shared"', "I.vdevice: memory scope 'shared': only \"global\" (host memory)"),
    ('I.vdevice("llvm", 0), ', "", "I.vdevice({", "R.Tensor: vdevice 'llvm:1': I.module_global_infos declares 1"),
    ('{"vdevice": ', '{"mesh": ', '"mesh"', "I.module_global_infos: `'mesh'` is not read; only \"vdevice\""),
])
def test_a_vdevice_other_than_the_host_cpu_is_refused_at_its_line(old, new, fragment, message):
    text = _VDEVICE.replace(old, new, 1)
    where = _at(text, fragment) if fragment != "I.vdevice({" else _at(text, '"llvm:1"')
    with pytest.raises(ParseError, match=f"^{re.escape(where)}: {re.escape(message)}"):
        from_source(text)


def test_a_vdevice_in_a_function_without_a_module_declaration_is_the_host_cpu():
    mod = from_source('@R.function\ndef f(x: R.Tensor((2,), "float32", vdevice="llvm:0")):\n    return x\n')
    assert mod.params[0].struct_info == TensorStructInfo((2,), "float32")


def test_vdevice_in_decorated_python():
    @I.ir_module
    class Module:
        I.module_global_infos({"vdevice": [I.vdevice("llvm")]})

        @R.function
        def main(x: R.Tensor((2, 3), "float32", vdevice="llvm")) -> R.Tensor((2, 3), "float32", "llvm"):
            y = R.add(x, x)
            return y

    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(rm.interpret(Module, "main", x), x + x)
    assert R.Tensor((2, 3), "float32", "llvm") == TensorStructInfo((2, 3), "float32")
    with pytest.raises(ValueError, match=r"^R\.Tensor: vdevice 'cuda': this backend runs on the host CPU only"):
        R.Tensor((2, 3), "float32", vdevice="cuda")
    with pytest.raises(ValueError, match=r"^I\.vdevice: target 'cuda': this backend runs on the host CPU only"):
        I.vdevice("cuda")


_BOUND_SHAPE = '''@I.ir_module
class Module:
    @R.function
    def f(x: R.Tensor(("n", 6), "float32")):
        n = T.int64()
        s = R.shape([n * 2, 3])
        y = R.reshape(x, s)
        z = R.ones(s, "float32")
        w = R.add(y, z)
        return w
'''


def test_a_bound_shape_taken_by_ops_compiles():
    """``s = R.shape([...])`` given to ``reshape`` and ``ones``: the ops took its values, so the binding carries
    nothing at run time (the export refused it: "ShapeExpr is not supported by the MLIR backend")."""
    mod = from_source(_BOUND_SHAPE)
    f = rm.VirtualMachine(rm.compile(mod))["f"]
    for n in (1, 3):
        x = np.arange(n * 6, dtype="float32").reshape(n, 6)
        np.testing.assert_array_equal(f(x), x.reshape(n * 2, 3) + 1)
        np.testing.assert_array_equal(rm.interpret(mod, "f", x), x.reshape(n * 2, 3) + 1)
