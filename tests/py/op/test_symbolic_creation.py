"""Symbolic sizes TVM Relax accepts in ``R.arange``'s bounds, ``R.tril``/``R.triu``'s ``k`` and
``R.nn.adaptive_avg_pool2d``'s input height and width (from replaying TVM's ``tests/python/relax/test_op_*.py``).
Each form is compiled and run on several sizes: compiled = interpreter = NumPy, gradients included where the op
has one; the struct info is TVM's (``src/relax/op/tensor/create.cc``, ``nn/pooling.cc``)."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import op, transform
from relax_mlir.ir import Var, sym
from relax_mlir.ir.expr import PrimValue
from relax_mlir.ir.struct_info import TensorStructInfo
from relax_mlir.script import from_source
from relax_mlir.script.parser import ParseError


def _both(mod, name, *args):
    """The interpreter's and the compiled function's results."""
    return relax_mlir.interpret(mod, name, *args), relax_mlir.VirtualMachine(relax_mlir.compile(mod))[name](*args)


def _length(x) -> sym.Dim:
    return x.struct_info.shape[0]


# -- arange --------------------------------------------------------------------------------------------------

def test_arange_infers_tvms_length():
    """TVM infers ``arange(start, stop, step)`` as ``((stop + step - start - 1) // step,)``, unclamped; ``arange(n)``
    counts from 0, and the dtype of sizes is int64."""
    n, m = sym.SizeVar("n"), sym.SizeVar("m")
    assert _length(op.arange(n)) == n and op.arange(n).struct_info.dtype == "int64"
    assert _length(op.arange(1, n)) == n - 1
    assert _length(op.arange(m, n)) == n - m
    assert _length(op.arange(PrimValue(m), PrimValue(n), PrimValue(2))) == sym.floor_div(n + 1 - m, 2)
    assert _length(op.arange(n, n + 3, dtype="float32")) == 3  # bounds a constant apart: a static length
    assert _length(op.arange(n, n - 2)) == 0  # ... clamped as for numbers (NumPy's empty range)
    # A negative step: the exact ceiling of (start - end) / -step (TVM's formula counts one more at 8 - 2)
    for a, b in ((7, 2), (8, 2), (2, 2), (2, 7)):
        got = sym.evaluate(_length(op.arange(n, m, -3)), {"n": a, "m": b})
        assert got == (len(range(a, b, -3)) if a >= b else -((b - a) // 3))


ARANGE = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor(("n",), "float32"), y: R.Tensor(("m", 2), "float32")):
        n = T.int64()
        m = T.int64()
        a = R.arange(0, n)
        b = R.arange(m, n, 2, dtype="float32")
        c = R.arange(R.prim_value(n), R.prim_value(m), R.prim_value(-3))
        d = R.arange(n, n + 3, dtype="int32")
        e = R.arange(n)
        return (a, b, c, d, e)
'''


@pytest.mark.parametrize("n,m", [(5, 1), (9, 9), (1, 1), (0, 0), (7, 3)])
def test_arange_between_sizes(n, m):
    mod = from_source(ARANGE)
    assert from_source(mod.script()).script() == mod.script()  # (the bounds print as "n", "m")
    want = (np.arange(0, n), np.arange(m, n, 2, dtype="float32"), np.arange(n, m, -3),
            np.arange(n, n + 3, dtype="int32"), np.arange(n))
    x, y = np.zeros(n, "float32"), np.zeros((m, 2), "float32")
    for got in _both(mod, "main", x, y):
        for g, w in zip(got, want):
            assert (g.dtype, g.shape) == (w.dtype, w.shape)
            np.testing.assert_array_equal(g, w)


NEGATIVE = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor(("n",), "float32"), y: R.Tensor(("m",), "float32")):
        n = T.int64()
        m = T.int64()
        b = R.arange(m, n, 2, dtype="float32")
        s = R.sum(b)
        return s
'''


def test_a_negative_length_is_refused_at_run_time():
    """TVM's length is not clamped (a size has no max): where ``end`` is below ``start`` at run time, compiled code
    and the interpreter refuse the call with the same message."""
    mod = from_source(NEGATIVE)
    ref, got = _both(mod, "main", np.zeros(5, "float32"), np.zeros(1, "float32"))
    assert ref == got == 1 + 3
    message = (r"main: binding 'b': relax.arange: the length ceil\(\(end - start\) / 2\) from start 9 to end 4 is -2, "
               r"a negative size \(as TVM's, the inferred length is not clamped at 0\)")
    args = np.zeros(4, "float32"), np.zeros(9, "float32")
    with pytest.raises(ValueError, match=message):
        relax_mlir.interpret(mod, "main", *args)
    with pytest.raises(ValueError, match=message):
        relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*args)


def test_arange_of_a_prim_size():
    """``R.arange(0, n)`` with ``n`` the value of an ``R.Prim(value="n")`` parameter (the interpreter: a Prim
    parameter does not cross a compiled function's boundary)."""
    mod = from_source('''
@I.ir_module
class M:
    @R.function
    def main(s: R.Prim(value="n")):
        n = T.int64()
        y = R.arange(0, n)
        return y
''')
    np.testing.assert_array_equal(relax_mlir.interpret(mod, "main", 4), np.arange(4))


@pytest.mark.parametrize("call,error", [
    ("R.arange(0, n, n)", r"relax.arange: step must be a static int, got the size n \(a length divided by a size"),
    ("R.arange(0.5, n)", r"relax.arange: a symbolic start or end needs an integer start, end and step"),
    ('R.arange(0, "n +")', r"relax.arange: end: malformed dimension 'n \+'")])
def test_arange_forms_refused(call, error):
    with pytest.raises(ParseError, match=error):
        from_source(f'''
@R.function
def main(x: R.Tensor(("n",), "float32")):
    n = T.int64()
    y = {call}
    return y
''')


# -- tril, triu ----------------------------------------------------------------------------------------------

TRIANGLES = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor(("n", "m"), "float32"), y: R.Tensor((2, "n", 3), "int32"), z: R.Tensor(("k",), "int8")):
        n = T.int64()
        m = T.int64()
        k = T.int64()
        a = R.tril(x, n - 3)
        b = R.triu(x, R.prim_value(m - n))
        c = R.tril(y, k)
        d = R.triu(y, R.prim_value(0 - k))
        return (a, b, c, d)
'''


@pytest.mark.parametrize("n,m,k", [(4, 4, 0), (2, 5, 1), (5, 2, 3), (1, 3, 7), (0, 2, 2)])
def test_triangles_with_a_symbolic_k(n, m, k):
    """TVM's ``k`` is a ``PrimExpr``: a size expression (negative ones too, ``0 - k``)."""
    mod = from_source(TRIANGLES)
    assert from_source(mod.script()).script() == mod.script()
    rng = np.random.default_rng(n * 100 + m * 10 + k)
    x = rng.standard_normal((n, m)).astype("float32")
    y = rng.integers(-9, 9, (2, n, 3)).astype("int32")
    want = (np.tril(x, n - 3), np.triu(x, m - n), np.tril(y, k), np.triu(y, -k))
    for got in _both(mod, "main", x, y, np.zeros(k, "int8")):
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)


def test_triangle_gradient_with_a_symbolic_k():
    """The gradient is the same triangle of the adjoint, compiled as the forward op is."""
    mod = from_source('''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor(("n", "m"), "float32"), g: R.Tensor(("n", "m"), "float32")):
        n = T.int64()
        m = T.int64()
        loss = R.sum(R.multiply(R.triu(x, R.prim_value(1 - n)), g))
        return loss
''')
    adjoint = transform.Gradient("main", require_grads=mod["main"].params[:1])(mod)
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(adjoint))
    rng = np.random.default_rng(3)
    for n, m in ((3, 3), (4, 2), (1, 5)):
        x, g = (rng.standard_normal((n, m)).astype("float32") for _ in range(2))
        for loss, (grad,) in (relax_mlir.interpret(adjoint, "main_adjoint", x, g), vm["main_adjoint"](x, g)):
            np.testing.assert_allclose(loss, (np.triu(x, 1 - n) * g).sum(), rtol=1e-5)
            np.testing.assert_array_equal(grad, np.triu(g, 1 - n))


def test_a_tensor_k_is_refused():
    """TVM refuses a tensor ``k`` too (it takes a ``PrimExpr``)."""
    x = Var("x", TensorStructInfo((3, 3), "float32"))
    with pytest.raises(ValueError, match=r"relax.tril: k must be an int or a size \(n, R.prim_value\(n - 1\)\), got "
                                         r"Var of Tensor\(\(\), int64\)"):
        op.tril(x, Var("k", TensorStructInfo((), "int64")))


# -- adaptive_avg_pool2d -------------------------------------------------------------------------------------

def _bins(size: int, out: int) -> list[tuple[int, int]]:
    """PyTorch's windows, written out independently of the op's: ``[floor(i*size/out), ceil((i+1)*size/out))``."""
    return [(int(np.floor(i * size / out)), int(np.ceil((i + 1) * size / out))) for i in range(out)]


def _pool(x: np.ndarray, oh: int, ow: int) -> np.ndarray:
    n, c, h, w = x.shape
    out = np.full((n, c, oh, ow), np.nan)
    for i, (a, b) in enumerate(_bins(h, oh)):
        for j, (p, q) in enumerate(_bins(w, ow)):
            if b > a and q > p:
                out[:, :, i, j] = x[:, :, a:b, p:q].astype(np.float64).mean(axis=(2, 3))
    return out


def _pool_vjp(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Each output cell's adjoint spread evenly over its window."""
    out = np.zeros(x.shape)
    for i, (a, b) in enumerate(_bins(x.shape[2], g.shape[2])):
        for j, (p, q) in enumerate(_bins(x.shape[3], g.shape[3])):
            out[:, :, a:b, p:q] += g[:, :, i:i + 1, j:j + 1] / ((b - a) * (q - p))
    return out


POOL = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((2, 3, "h", "w"), "float32"), z: R.Tensor(("n", 2, "h", 4), "float16")):
        a = R.nn.adaptive_avg_pool2d(x, (3, 2))
        b = R.nn.adaptive_avg_pool2d(x)
        c = R.nn.adaptive_avg_pool2d(z, 2)
        return (a, b, c)
'''


@pytest.mark.parametrize("h,w", [(5, 7), (1, 1), (3, 2), (6, 3), (2, 9)])
def test_adaptive_avg_pool2d_over_a_symbolic_height_and_width(h, w):
    """TVM infers ``(N, C, oh, ow)`` (output_size None: the input's ``(N, C, h, w)``); the windows are computed
    at run time, overlapping where the output is larger than the input."""
    mod = from_source(POOL)
    a_info, b_info, c_info = mod["main"].body.body.struct_info.fields
    assert (a_info.shape, b_info.shape) == ((2, 3, 3, 2), (2, 3, sym.SizeVar("h"), sym.SizeVar("w")))
    assert tuple(c_info.shape[1:]) == (2, 2, 2) and c_info.dtype == "float16"
    rng = np.random.default_rng(h * 10 + w)
    x = rng.standard_normal((2, 3, h, w)).astype("float32")
    z = rng.standard_normal((2, 2, h, 4)).astype("float16")
    for a, b, c in _both(mod, "main", x, z):
        np.testing.assert_allclose(a, _pool(x, 3, 2), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(b, x)
        assert c.dtype == np.float16  # averaged in float32 and rounded once
        np.testing.assert_array_equal(c, _pool(z, 2, 2).astype("float32").astype("float16"))


def test_adaptive_avg_pool2d_of_an_empty_input_is_nan():
    """A symbolic height that is 0 at run time: every window is empty, NumPy's mean of nothing (a static 0 is
    refused at inference, as PyTorch refuses it)."""
    mod = from_source(POOL)
    x, z = np.zeros((2, 3, 0, 4), "float32"), np.zeros((1, 2, 0, 4), "float16")
    for a, b, c in _both(mod, "main", x, z):
        assert np.isnan(a).all() and a.shape == (2, 3, 3, 2) and b.shape == (2, 3, 0, 4) and np.isnan(c).all()


def test_adaptive_avg_pool2d_gradient_over_symbolic_sizes():
    mod = from_source('''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor(("n", 2, "h", "w"), "float64"), g: R.Tensor(("n", 2, 3, 2), "float64")):
        loss = R.sum(R.multiply(R.nn.adaptive_avg_pool2d(x, (3, 2)), g))
        return loss
''')
    adjoint = transform.Gradient("main", require_grads=mod["main"].params[:1])(mod)
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(adjoint))
    rng = np.random.default_rng(5)
    for h, w in ((5, 7), (2, 1), (3, 4)):
        x, g = rng.standard_normal((2, 2, h, w)), rng.standard_normal((2, 2, 3, 2))
        for loss, (grad,) in (relax_mlir.interpret(adjoint, "main_adjoint", x, g), vm["main_adjoint"](x, g)):
            np.testing.assert_allclose(loss, (_pool(x, 3, 2) * g).sum(), rtol=1e-12)
            np.testing.assert_allclose(grad, _pool_vjp(x, g), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("shape", ['(1, 2, 7, 5)', '(1, 2, "h", "w")'])
def test_adaptive_avg_pool2d_of_integers(shape):
    """Integer data is averaged as NumPy's mean (an exact sum over the area) and truncated toward zero, as the
    reference's cast: a static height and width were refused (an averaging weight of 1/3 is no int32), and a
    symbolic one must not sum weights of 1/3 that truncate a whole mean such as 7 to 6."""
    mod = from_source(f'''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor({shape}, "int32")):
        y = R.nn.adaptive_avg_pool2d(x, (3, 2))
        return y
''')
    x = np.array([[7, 7, 7, 5, 5], [7, 7, 7, 5, 5], [7, 7, 7, -7, -7], [9, 9, 1, 2, 3], [9, 9, -3, 2, 3],
                  [1, 2, 3, 4, 5], [-9, 8, -7, 6, 0]], "int32")
    x = np.stack([x, 3 * x - 1])[None]
    want = np.trunc(_pool(x, 3, 2)).astype("int32")
    for got in _both(mod, "main", x):
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, want)
