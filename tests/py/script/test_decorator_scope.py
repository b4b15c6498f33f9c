"""Decorator mode evaluates Python where TVM's parser does, in the scope the module was defined in;
``from_source`` never evaluates anything. Expected values computed with NumPy."""

from __future__ import annotations

import re

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir.ir import assert_structural_equal
from relax_mlir.script import ParseError, from_source
from relax_mlir.script import ir as I
from relax_mlir.script import relax as R

N = 3
W = np.arange(6, dtype="float32").reshape(2, 3)
X = np.linspace(-1, 1, 6, dtype="float32").reshape(2, 3)


def _run(mod, *args):
    return rm.interpret(mod, "main", *args)


def test_arrays_and_numbers_from_the_defining_scope():
    k = 2

    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((2, N), "float32")):
            a = R.add(x, R.const(np.ones((2, 3), "float32")))
            b = R.add(a, R.const(W * 2 + 1))
            c = R.multiply(b, R.const(float(k), "float32"))
            d = R.add(c, W)
            return d

    np.testing.assert_allclose(_run(Module, X), ((X + 1) + (W * 2 + 1)) * 2 + W, rtol=1e-6)
    assert Module["main"].params[0].struct_info.shape == (2, 3)  # N from the module's globals


def test_shape_and_prim_value_arguments_and_computed_attributes():
    axes = [i for i in range(1, 2)]

    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((2, 3), "float32")):
            r = R.reshape(x, R.shape([3, 2]))
            s = R.strided_slice(x, axes=axes, begin=[R.prim_value(0)], end=[R.prim_value(N - 1)])
            f = R.full(R.shape([2, N]), R.const(1.5, "float32"), "float32")
            t = R.sum(x, axis=[i for i in range(2)])
            return (r, s, f, t)

    r, s, f, t = _run(Module, X)
    np.testing.assert_array_equal(r, X.reshape(3, 2))
    np.testing.assert_array_equal(s, X[:, 0:2])
    np.testing.assert_array_equal(f, np.full((2, 3), 1.5, np.float32))
    np.testing.assert_allclose(t, X.sum(), rtol=1e-6)
    compiled = rm.VirtualMachine(rm.compile(Module))["main"](X)
    np.testing.assert_array_equal(compiled[0], r)


def test_an_evaluation_error_names_the_expression():
    with pytest.raises(ParseError, match=r"evaluating `np\.ones\(\(2, 3\), 'no-such-dtype'\)` in the defining "
                                         r"scope failed: TypeError"):
        @R.function
        def main(x: R.Tensor((2, 3), "float32")):
            y = R.add(x, R.const(np.ones((2, 3), "no-such-dtype")))
            return y


def test_from_source_never_evaluates_code():
    ran = []
    text = '''
@R.function
def main(x: R.Tensor((2, 3), "float32")):
    y = R.add(x, R.const(np.array(ran.append(1) or [1.0], "float32")))
    return y
'''
    with pytest.raises(ParseError, match=r"unsupported attribute value `np\.array"):
        from_source(text, env={"np": np, "ran": ran})
    assert ran == []  # the text's Python did not run, even with the names it wanted given
    with pytest.raises(ParseError, match="unsupported expression"):
        from_source(text.replace("R.const(np.array(ran.append(1) or [1.0], \"float32\"))", "W * 2"), env={"W": W})


@pytest.mark.parametrize("array", [np.array([1 + 2j, 3j], "complex64"), np.array(["a", "b"]),
                                   np.array([None, 1], object)])
def test_an_array_of_no_relax_dtype_is_a_parse_error_at_its_constant(array):
    with pytest.raises(ParseError, match=r"test_decorator_scope.py:\d+:\d+: NumPy dtype \w+ has no Relax "
                                         r"counterpart"):
        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2,), "float32")):
                c = R.add(x, R.const(array))
                return c


def test_operators_on_relax_values_are_tvms_ops_not_python_names():
    x = np.zeros((2, 3), "float32")  # noqa: F841 - a Python name the parameter shadows (was read: a constant 0)

    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((2, 3), "float32"), k: R.Tensor((3,), "int32")):
            a = x * 2
            b = 1 - a / 4
            c = -R.matmul(x, R.permute_dims(x)) ** 2
            d = a <= b
            e = k // 2
            return (a, b, c, d, e)

    k = np.array([5, -5, 0], "int32")
    a, b, c, d, e = _run(Module, X, k)
    np.testing.assert_array_equal(a, X * 2)
    np.testing.assert_allclose(b, 1 - X * 2 / 4, rtol=1e-6)
    np.testing.assert_allclose(c, -(X @ X.T) ** 2, rtol=1e-6)
    np.testing.assert_array_equal(d, X * 2 <= 1 - X * 2 / 4)
    np.testing.assert_array_equal(e, k // 2)
    assert e.dtype == np.int32  # the number takes the tensor's dtype
    assert_structural_equal(from_source(Module.script()), Module)


def test_a_python_number_of_the_defining_scope_is_read_as_a_literal_number_is():
    """``x * k`` with ``k = 2`` in Python is ``x * 2``, as TVM's parser evaluates both alike: the number takes the
    tensor's dtype (it became an int64 constant first, refused beside a float64 tensor: "operands must have the
    same dtype"). So do Python expressions of no Relax variable (``k + 1``, ``-k``), and a name from_source's
    ``env`` gives."""
    k, half = 2, 0.5

    @I.ir_module
    class Named:
        @R.function
        def main(x: R.Tensor((3,), "float64")):
            a = x * k
            b = k - a
            c = a ** -k + x * (k + 1) / half
            return (b, c)

    @I.ir_module
    class Literal:
        @R.function
        def main(x: R.Tensor((3,), "float64")):
            a = x * 2
            b = 2 - a
            c = a ** -2 + x * 3 / 0.5
            return (b, c)

    assert_structural_equal(Named, Literal)
    assert Named.script() == Literal.script()
    x = np.array([1.0, 2.0, 4.0])
    b, c = _run(Named, x)
    assert b.dtype == c.dtype == np.float64
    np.testing.assert_array_equal(b, 2 - x * 2)
    np.testing.assert_allclose(c, (x * 2) ** -2.0 + x * 3 / 0.5, rtol=1e-15)
    for got, want in zip(_run(Named, x), _run(Literal, x)):
        np.testing.assert_array_equal(got, want)
    text = '@R.function\ndef main(x: R.Tensor((3,), "float64")):\n    y = x * {}\n    return y\n'
    assert_structural_equal(from_source(text.format("k"), env={"k": 2}), from_source(text.format("2")))


@pytest.mark.parametrize("expr, message", [
    ("x % 2", "operator Mod is not defined on Relax values"),
    ("x == x", "operator Eq is not defined on Relax values"),
    ("0 < x < 1", "a chained comparison"),
    ("k * 1.5", "1.5 is not representable in int32"),
    ("x.shape", "unsupported expression"),
])
def test_operators_tvm_does_not_define_are_parse_errors(expr, message):
    text = ('@R.function\ndef main(x: R.Tensor((2,), "float32"), k: R.Tensor((2,), "int32")):\n'
            f"    y = {expr}\n    return y\n")
    with pytest.raises(ParseError, match=re.escape(message)):
        from_source(text)


def test_two_modules_of_one_name_in_a_file_are_each_read_from_their_own_class(tmp_path):
    path = tmp_path / "two_modules.py"
    path.write_text('''
from relax_mlir.script import ir as I, relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), "float32")):
        y = R.add(x, x)
        return y

FIRST = Module

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), "float32")):
        y = R.multiply(x, x)
        return y
''')
    import importlib.util

    spec = importlib.util.spec_from_file_location("two_modules", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = np.array([3.0, 4.0], "float32")
    np.testing.assert_array_equal(_run(module.FIRST, x), x + x)
    np.testing.assert_array_equal(_run(module.Module, x), x * x)
