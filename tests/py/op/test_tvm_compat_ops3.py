"""Op forms TVM Relax accepts that the text format refused (from replaying TVM's ``tests/python/relax/test_op_*.py``):
an ``R.Prim`` operand of a binary elementwise op and ``R.full`` with a tensor fill value. Each is checked through
the interpreter and compiled code against NumPy; the forms still refused name what to write instead."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir.ir.expr import PrimValue
from relax_mlir.ir.struct_info import TensorStructInfo
from relax_mlir.script import from_source
from relax_mlir.script.parser import ParseError


def _run(mod, *args):
    """The interpreter's and the compiled function's results."""
    ref = relax_mlir.interpret(mod, "main", *args)
    got = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*args)
    return ref, got


def _ret(mod) -> TensorStructInfo:
    return mod["main"].body.body.struct_info


PRIM_OPERANDS = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")):
        a = R.add(x, R.prim_value(T.float32(2)))
        b = R.subtract(R.prim_value(T.float32(0.5)), a)
        c = b * R.prim_value(T.float32(3))
        d = R.less(c, R.prim_value(T.float32(-4.5)))
        return (c, d)
'''


def test_prim_value_operand_is_a_scalar():
    """TVM infers ``Tensor((2, 3)) + Prim("float32")`` as ``Tensor((2, 3), "float32")``; a Prim whose number is
    written in the program is that scalar, on either side and under Python's operators."""
    mod = from_source(PRIM_OPERANDS)
    c_info, d_info = _ret(mod).fields
    assert (tuple(c_info.shape), c_info.dtype) == ((2, 3), "float32")
    assert (tuple(d_info.shape), d_info.dtype) == ((2, 3), "bool")
    x = np.arange(6, dtype="float32").reshape(2, 3) - 2
    want_c = (np.float32(0.5) - (x + np.float32(2))) * np.float32(3)
    (ref_c, ref_d), (got_c, got_d) = _run(mod, x)
    for c, d in ((ref_c, ref_d), (got_c, got_d)):
        np.testing.assert_array_equal(c, want_c)
        np.testing.assert_array_equal(d, want_c < -4.5)
    assert from_source(mod.script()).script() == mod.script()  # (printed as R.const(2.0, "float32"))


def test_typed_prim_literal():
    """``R.prim_value(T.int64(5))`` (TVM's printer's form) is a Prim of T's dtype; a contradicting dtype= is refused."""
    mod = from_source('''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((2,), "int64")):
        p = R.prim_value(T.int64(5))
        y = R.add(x, R.prim_value(T.int64(-1)))
        return y
''')
    p = mod["main"].body.blocks[0].bindings[0].value
    assert isinstance(p, PrimValue) and (p.value, p.dtype) == (5, "int64")
    ref, got = _run(mod, np.array([3, 7], "int64"))
    np.testing.assert_array_equal(ref, [2, 6])
    np.testing.assert_array_equal(got, [2, 6])
    with pytest.raises(ParseError, match=r"the value is T.float32\(...\) but dtype='int64' is given"):
        from_source('''
@R.function
def main(x: R.Tensor((2,), "int64")):
    y = R.add(x, R.prim_value(T.float32(2), "int64"))
    return y
''')


@pytest.mark.parametrize("params, operand, error", [
    ('s: R.Prim("float32")', "s",
     r"relax.add: operand 'x2' is R.Prim\(\"float32\"\) \(known only at run time\).*pass a 0-d tensor "
     r"\(R.Tensor\(\(\), \"float32\"\)\)"),
    ("", "R.prim_value(n)", r"operand 'x2' is R.Prim\(value=\"n\", dtype=\"int64\"\) \(a size, n\)"),
    ("", "R.prim_value(T.float64(2))", r"same dtype, got x1: float32, x2: float64"),
])
def test_prim_operand_refused(params, operand, error):
    """A Prim known only at run time (a parameter, a size) has no tensor here: refused naming what to pass. A Prim of
    another dtype is refused as TVM refuses it."""
    sep = ", " if params else ""
    with pytest.raises(ParseError, match=error):
        from_source(f'''
@R.function
def main(x: R.Tensor(("n", 3), "float32"){sep}{params}):
    n = T.int64()
    y = R.add(x, {operand})
    return y
''')


def test_two_prim_operands_refused():
    with pytest.raises(ParseError, match=r"relax.multiply: both operands are R.Prim values"):
        from_source('''
@R.function
def main(x: R.Tensor((2,), "float32")):
    y = R.multiply(R.prim_value(T.float32(2)), R.prim_value(T.float32(3)))
    return x
''')


FULL_FROM_TENSOR = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor(("n", 3), "float32"), v: R.Tensor((), "int32")):
        n = T.int64()
        a = R.full((n, 3), v, "float32")
        b = R.full(R.shape([2, n]), R.sum(x))
        c = R.full((2,), v)
        return (a, b, c)
'''


def test_full_with_a_tensor_fill_value():
    """TVM's ``R.full(shape, fill_value)`` takes a 0-d tensor; one known only at run time (a parameter, a computed
    value) fills the shape with its value, cast to ``dtype`` when one is given."""
    mod = from_source(FULL_FROM_TENSOR)
    a, b, c = _ret(mod).fields
    assert (str(a), str(b), str(c)) == ("Tensor((n, 3), float32)", "Tensor((2, n), float32)", "Tensor((2,), int32)")
    x = np.arange(12, dtype="float32").reshape(4, 3) / 4
    v = np.array(-7, "int32")
    for a, b, c in _run(mod, x, v):
        np.testing.assert_array_equal(a, np.full((4, 3), -7.0, "float32"))
        np.testing.assert_allclose(b, np.full((2, 4), x.sum(), "float32"), rtol=1e-6)
        np.testing.assert_array_equal(c, np.full((2,), -7, "int32"))
        assert (a.dtype, b.dtype, c.dtype) == (np.float32, np.float32, np.int32)


def test_full_fill_value_must_be_0d():
    with pytest.raises(ParseError, match=r"R.full: fill_value must be a 0-d tensor .* got R.Tensor\(\(3,\)"):
        from_source('''
@R.function
def main(v: R.Tensor((3,), "float32")):
    y = R.full((2, 3), v)
    return y
''')
