"""A compiled reshape checks its element count wherever the new shape has a size known only at run time.

``R.reshape(x, (n, 2, c // 2))`` (two or more symbolic sizes: a reshape by a shape tensor) used to read 4 of the
6 elements of a (2, 3) input, and a larger new shape described memory the input does not have; a 1-D new shape
(``(2 * n,)``) kept the input's count. Now a call whose counts differ raises ``ValueError`` naming the binding and
both counts (the interpreter raises for it too), and the others give the interpreter's (NumPy's) values. Where the
sizes are static, or the same product of the parameters' sizes on both sides, no check is inserted. The same
check lets ``R.nn.group_norm`` take a symbolic channel count.
"""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir.interpreter import InterpreterError
from relax_mlir.script import from_source
from relax_mlir.transform import Gradient

RESHAPES = '''
@I.ir_module
class Module:
    @R.function
    def halves(x: R.Tensor(("n", "c"), "float32")):
        n = T.int64()
        c = T.int64()
        y = R.reshape(x, (n, 2, c // 2))
        z = R.sum(y, axis=[2])
        return z

    @R.function
    def larger(x: R.Tensor(("n", "c"), "float32")):
        n = T.int64()
        c = T.int64()
        y = R.reshape(x, (n, 2, c))
        z = R.sum(y)
        return z

    @R.function
    def three(x: R.Tensor(("n", "c", "h"), "float32")):
        n = T.int64()
        c = T.int64()
        h = T.int64()
        y = R.reshape(x, (h, n, 2, c // 2))
        z = R.sum(y, axis=[0, 2])
        return z

    @R.function
    def shape_value(x: R.Tensor(("n", "c"), "float32")):
        n = T.int64()
        c = T.int64()
        s = R.shape([c // 2, n, 2])
        y = R.reshape(x, s)
        z = R.sum(y, axis=[1])
        return z

    @R.function
    def flat(x: R.Tensor(("n", "c"), "float32")):
        n = T.int64()
        y = R.reshape(x, (2 * n,))
        z = R.sum(y)
        return z

    @R.function
    def negative(x: R.Tensor(("n", "c"), "float32")):
        n = T.int64()
        c = T.int64()
        y = R.reshape(x, (c - 5, n - 5))
        z = R.sum(y)
        return z
'''


@pytest.fixture(scope="module")
def mod():
    return from_source(RESHAPES)


@pytest.fixture(scope="module")
def vm(mod):
    return rm.VirtualMachine(rm.compile(mod))


def _input(shape) -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)


def _count_message(name: str, have: int, want: int) -> str:
    return (rf"^{name}: binding 'y': reshape: the input has {have} elements, where the new shape has {want} \(sizes "
            r"the op's inference assumed equal\)$")


# (function, input shape, NumPy's answer): counts that agree
AGREEING = [
    ("halves", (2, 4), lambda x: x.reshape(2, 2, 2).sum(2)),
    ("halves", (3, 6), lambda x: x.reshape(3, 2, 3).sum(2)),
    ("three", (2, 4, 3), lambda x: x.reshape(3, 2, 2, 2).sum((0, 2))),
    ("shape_value", (2, 4), lambda x: x.reshape(2, 2, 2).sum(1)),
    ("flat", (3, 2), lambda x: x.sum()),
]


@pytest.mark.parametrize("name,shape,numpy", AGREEING, ids=[f"{a[0]}{a[1]}" for a in AGREEING])
def test_agreeing_counts_give_the_interpreters_values(vm, mod, name, shape, numpy):
    x = _input(shape)
    got = vm[name](x)
    np.testing.assert_array_equal(got, numpy(x))
    np.testing.assert_array_equal(got, rm.interpret(mod, name, x))


# (function, input shape, the input's count, the new shape's): a smaller new shape (elements silently dropped) and
# a larger one (memory the input does not have), with 2 and 3 symbolic sizes, by a shape value and 1-D
DIFFERING = [
    ("halves", (2, 3), 6, 4),  # the reproducer: it returned [[1, 1], [1, 1]] for ones
    ("halves", (3, 5), 15, 12),
    ("larger", (2, 3), 6, 12),
    ("three", (2, 3, 2), 12, 8),
    ("shape_value", (2, 3), 6, 4),
    ("flat", (2, 3), 6, 4),
    ("negative", (6, 7), 42, 2),
]


@pytest.mark.parametrize("name,shape,have,want", DIFFERING, ids=[f"{a[0]}{a[1]}" for a in DIFFERING])
def test_differing_counts_raise_where_the_interpreter_raises(vm, mod, name, shape, have, want):
    x = _input(shape)
    with pytest.raises(InterpreterError, match="cannot reshape array"):
        rm.interpret(mod, name, x)
    with pytest.raises(ValueError, match=_count_message(name, have, want)):
        vm[name](x)
    assert vm["halves"](_input((1, 2))).tolist() == [[0, 1]]  # the slot was cleared


def test_a_negative_size_is_reported():
    """``(c - 5, n - 5)`` at n = 2, c = 3 is (-2, -3): 6 elements, the input's count."""
    mod = from_source(RESHAPES)
    f = rm.VirtualMachine(rm.compile(mod))["negative"]
    with pytest.raises(InterpreterError):
        rm.interpret(mod, "negative", _input((2, 3)))
    with pytest.raises(ValueError, match=r"^negative: binding 'y': reshape: dimension 0 of the new shape is -2, a "
                                         r"negative size$"):
        f(_input((2, 3)))


def test_a_reshape_in_a_training_steps_gradient_is_checked():
    """loss = sum(reshape(x, (n, 2, c // 2)) ** 2): its adjoint reshapes the gradient back to (n, c)."""
    mod = Gradient("main")(from_source('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", "c"), "float32")):
        n = T.int64()
        c = T.int64()
        y = R.reshape(x, (n, 2, c // 2))
        z = R.sum(R.multiply(y, y))
        return z
'''))
    f = rm.VirtualMachine(rm.compile(mod))["main_adjoint"]
    x = _input((2, 4))
    loss, (grad,) = f(x)
    assert loss == (x * x).sum()
    np.testing.assert_array_equal(grad, 2 * x)
    expected, (expected_grad,) = rm.interpret(mod, "main_adjoint", x)
    assert loss == expected
    np.testing.assert_array_equal(grad, expected_grad)
    with pytest.raises(InterpreterError, match="cannot reshape array"):
        rm.interpret(mod, "main_adjoint", _input((2, 3)))
    with pytest.raises(ValueError, match=_count_message("main_adjoint", 6, 4)):
        f(_input((2, 3)))


STATIC_AND_PROVEN = '''
@I.ir_module
class Module:
    @R.function
    def static(x: R.Tensor((4, 6), "float32"), w: R.Tensor((6, 3), "float32")):
        y = R.reshape(x, (2, 2, 6))
        f = R.reshape(y, (4, 6))
        z = R.matmul(f, w)
        return z

    @R.function
    def proven(x: R.Tensor(("n", "c", 4), "float32")):
        n = T.int64()
        c = T.int64()
        y = R.reshape(x, (c, n, 2, 2))
        f = R.reshape(y, (n * c * 4,))
        z = R.sum(f)
        return z
'''


def test_no_check_where_the_counts_are_static_or_the_same_sizes():
    """A static reshape (an MLP's) gets no check, nor one whose new sizes multiply to the input's as the parameters
    name them: the lowered text has no size check, no error slot, no guard."""
    mod = from_source(STATIC_AND_PROVEN)
    for name in ("static", "proven"):
        text = rm.to_mlir(mod, "linalg", name)
        assert "relax_mlir.size_check" not in text and "relax_mlir_error" not in text and "scf.if" not in text, text
    vm = rm.VirtualMachine(rm.compile(mod))
    x = _input((2, 3, 4))
    assert vm["proven"](x) == x.sum()


def test_a_static_mlp_has_no_size_check():
    """Down to LLVM IR: its only checks are the allocations' (``memory: ``)."""
    from relax_mlir.models import mlp

    for stage in ("linalg", "llvm"):
        text = rm.to_mlir(mlp(4, (64, 32, 10)), stage)
        assert "relax_mlir.size_check" not in text and '"size: ' not in text and "tensor.reshape" not in text


# -- group_norm over a symbolic channel count ---------------------------------------------------------------------

GROUP_NORM = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", "c", "h", "w"), "float32"), g: R.Tensor(("c",), "float32"),
             b: R.Tensor(("c",), "float32")):
        y = R.nn.group_norm(x, g, b, num_groups=2, channel_axis=1, axes=[2, 3])
        return y
'''


def _group_norm(x, g, b, groups: int = 2, eps: float = 1e-5) -> np.ndarray:
    n, c = x.shape[:2]
    xs = x.astype(np.float64).reshape(n, groups, c // groups, *x.shape[2:])
    axes = tuple(range(2, xs.ndim))
    y = ((xs - xs.mean(axis=axes, keepdims=True)) / np.sqrt(xs.var(axis=axes, keepdims=True) + eps)).reshape(x.shape)
    return y * g[None, :, None, None] + b[None, :, None, None]


def _group_norm_args(shape):
    rng = np.random.default_rng(sum(shape))
    c = shape[1]
    return [rng.standard_normal(s).astype(np.float32) for s in (shape, (c,), (c,))]


@pytest.mark.parametrize("shape", [(2, 4, 3, 3), (1, 6, 2, 5), (3, 2, 1, 4)])
def test_group_norm_of_symbolic_channels_matches_numpy(shape):
    mod = from_source(GROUP_NORM)
    args = _group_norm_args(shape)
    got = rm.VirtualMachine(rm.compile(mod))["main"](*args)
    np.testing.assert_allclose(got, _group_norm(*args), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(rm.interpret(mod, "main", *args), _group_norm(*args), rtol=1e-4, atol=1e-5)


def test_group_norm_refuses_channels_the_groups_do_not_divide():
    mod = from_source(GROUP_NORM)
    args = _group_norm_args((2, 5, 3, 3))
    with pytest.raises(InterpreterError, match=r"the channel axis 1 of data \(2, 5, 3, 3\) \(5\) must be divisible "
                                               r"by num_groups 2"):
        rm.interpret(mod, "main", *args)
    with pytest.raises(ValueError, match=_count_message("main", 90, 72)):
        rm.VirtualMachine(rm.compile(mod))["main"](*args)
