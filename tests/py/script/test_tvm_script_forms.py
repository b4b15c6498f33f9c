"""Forms of TVM's TVMScript that TVM's own tests and printer use: ``R.const`` without a dtype (TVM's
``relax.const`` rule), a call of a local function and ``Module.f(x)`` in decorated Python as in ``from_source``,
and the method ``x.astype(dtype)``. Expected values computed with NumPy."""

import re

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir.ir import assert_structural_equal
from relax_mlir.ir.struct_info import TensorStructInfo
from relax_mlir.script import ParseError, from_source
from relax_mlir.script import ir as I
from relax_mlir.script import relax as R

W64 = np.array([0.5, 1.5, 2.5, 3.5])  # float64, NumPy's default: R.const(W64) is float32, as in TVM
I64 = np.array([1, 2, 3, 4])  # int64: R.const(I64) is int32


def _run(mod, fn="main", *args):
    return rm.interpret(mod, fn, *args)


# -- R.const without a dtype --------------------------------------------------------------------------

def test_an_int_constant_is_int32_as_in_tvm():
    """TVM's test_transform_canonicalize_bindings::test_basic_folding_example shape: refused before (int64)."""
    mod = from_source('''
@R.function
def main() -> R.Tensor((), "int32"):
    with R.dataflow():
        y = R.const(1)
        z = R.add(y, R.const(2))
        R.output(z)
    return z
''')
    assert mod.ret_struct_info == TensorStructInfo((), "int32")
    out = rm.interpret(rm.IRModule({"main": mod}), "main")
    assert out.dtype == np.int32 and out == 3


def test_consts_from_the_defining_scope_narrow_int64_and_float64():
    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((4,), "float32"), i: R.Tensor((4,), "int32")):
            a = R.add(x, R.const(W64))
            b = R.add(i, R.const(I64))
            c = R.add(x, R.const(W64, "float32"))
            return (a, b, c)

    x, i = np.linspace(-1, 1, 4, dtype=np.float32), np.arange(4, dtype=np.int32)
    a, b, c = _run(Module, "main", x, i)
    assert a.dtype == c.dtype == np.float32 and b.dtype == np.int32
    np.testing.assert_array_equal(a, x + W64.astype(np.float32))
    np.testing.assert_array_equal(b, i + I64.astype(np.int32))
    text = Module.script()
    assert 'R.const([0.5, 1.5, 2.5, 3.5], "float32")' in text and 'R.const([1, 2, 3, 4], "int32")' in text
    assert_structural_equal(from_source(text), Module)


def test_an_int_beyond_int32_without_a_dtype_is_a_parse_error_naming_the_dtype_to_give():
    text = '@R.function\ndef main():\n    y = R.const({})\n    return y\n'
    with pytest.raises(ParseError, match=re.escape("<string>:3:9: R.const: the integer 3000000000 does not fit "
                                                   "int32, the dtype of an integer constant without one (as in TVM); "
                                                   "expected -2**31 <= value < 2**31, or give dtype='int64'")):
        from_source(text.format(3_000_000_000))
    y = from_source(text.format('3000000000, "int64"')).body.body
    assert y.struct_info == TensorStructInfo((), "int64")


# -- calls of local functions and of Module.f in decorated Python ---------------------------------------

LOCAL_CALL = '''
@I.ir_module
class LocalCall:
    @R.function
    def main(x: R.Tensor((4,), "float32"), y: R.Tensor((4,), "float32")):
        @R.function
        def inner(x1: R.Tensor((4,), "float32"), y1: R.Tensor((4,), "float32")):
            s = R.multiply(x1, y1)
            return s
        gv = inner(x, y)
        gv1 = R.add(inner(gv, y), x)
        return gv1
'''


def test_a_local_function_call_in_decorated_python_reads_as_from_source_reads_it():
    """TVM's test_transform_lambda_lift shape: ``inner(x, y)`` was "unsupported expression" in decorator mode."""
    @I.ir_module
    class LocalCall:
        @R.function
        def main(x: R.Tensor((4,), "float32"), y: R.Tensor((4,), "float32")):
            @R.function
            def inner(x1: R.Tensor((4,), "float32"), y1: R.Tensor((4,), "float32")):
                s = R.multiply(x1, y1)
                return s
            gv = inner(x, y)
            gv1 = R.add(inner(gv, y), x)
            return gv1

    assert_structural_equal(LocalCall, from_source(LOCAL_CALL))
    x, y = np.array([1, 2, 3, 4], np.float32), np.array([0.5, -1, 2, 3], np.float32)
    np.testing.assert_array_equal(_run(LocalCall, "main", x, y), x * y * y + x)


def by_class_name():
    """A module whose main calls scale as ``ByClassName.scale(x)``."""
    @I.ir_module
    class ByClassName:
        @R.function(private=True)
        def scale(a: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
            b = R.add(a, a)
            return b

        @R.function
        def main(x: R.Tensor((3,), "float32")):
            y = ByClassName.scale(x)
            z = R.multiply(ByClassName.scale(y), x)
            return z
    return ByClassName


def test_a_module_function_called_by_the_class_name_is_cls_f():
    """TVM's remove_unused_parameters / inline_private_functions tests write ``Before.func(A)``."""
    ByClassName = by_class_name()
    by_cls = from_source(ByClassName.script())  # the printer writes cls.scale
    assert "cls.scale(x)" in ByClassName.script()
    assert_structural_equal(ByClassName, by_cls)
    assert_structural_equal(from_source(ByClassName.script().replace("cls.scale", "Module.scale")), by_cls)
    x = np.array([1, -2, 3], np.float32)
    np.testing.assert_array_equal(_run(ByClassName, "main", x), 4 * x * x)


def test_another_class_name_is_still_an_unknown_callee():
    text = by_class_name().script().replace("cls.scale(x)", "Other.scale(x)")
    with pytest.raises(ParseError, match=re.escape("unknown callee Other.scale: expected R.<op>, cls.<function> or "
                                                   "<value>.astype(dtype)")):
        from_source(text)


# -- x.astype(dtype) ------------------------------------------------------------------------------------

ASTYPE = '''
@R.function
def f(p: R.Tensor((3, 5), "float32"), t: R.Tensor((3, 5), "int64")):
    with R.dataflow():
        lv = R.nn.log_softmax(p, axis=-1)
        gv = R.mean(-lv * t.astype("float32"))
        h = R.add(lv, t).astype(dtype="float16")
        R.output(gv, h)
    return (gv, h)
'''


def test_astype_method_is_r_astype():
    """TVM's test_training_loss expected modules write ``t.astype("float32")`` (its printer does too)."""
    f = from_source(ASTYPE.replace('R.add(lv, t)', 'R.add(lv, t.astype("float32"))'))
    spelled = from_source(ASTYPE.replace('t.astype("float32")', 'R.astype(t, "float32")')
                          .replace('R.add(lv, t).astype(dtype="float16")',
                                   'R.astype(R.add(lv, R.astype(t, "float32")), dtype="float16")'))
    assert_structural_equal(f, spelled)
    p = np.linspace(-2, 2, 15, dtype=np.float32).reshape(3, 5)
    t = np.eye(3, 5, dtype=np.int64)
    gv, h = rm.interpret(rm.IRModule({"f": f}), "f", p, t)
    log_softmax = p - np.log(np.exp(p).sum(-1, keepdims=True))
    np.testing.assert_allclose(gv, np.mean(-log_softmax * t), rtol=1e-6)
    assert h.dtype == np.float16
    np.testing.assert_allclose(h, (log_softmax + t).astype(np.float16), rtol=1e-3)


def test_astype_in_decorated_python_on_relax_values_and_numpy_arrays():
    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((4,), "int32")):
            y = x.astype("float32")
            z = R.add(y, R.const(W64.astype("float32")))  # NumPy's astype, evaluated in Python
            return z

    x = np.array([1, -2, 3, 7], np.int32)
    np.testing.assert_array_equal(_run(Module, "main", x), x.astype(np.float32) + W64.astype(np.float32))
    assert 'R.astype(x, "float32")' in Module.script()


def test_astype_errors_say_what_and_where():
    with pytest.raises(ParseError, match=re.escape("<string>:6:27: relax.astype: ")):
        from_source(ASTYPE.replace('t.astype("float32")', 't.astype("float33")'))
    with pytest.raises(ParseError, match=re.escape("<string>:6:27: undefined variable 'q'")):
        from_source(ASTYPE.replace('t.astype("float32")', 'q.astype("float32")'))
