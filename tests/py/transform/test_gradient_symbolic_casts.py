"""Gradients through a match_cast to a symbolic size, met again by a static size the forward op assumed equal
(a matmul's reduction dim, broadcast_to's target). The rules used to sum the adjoint straight to the symbolic size,
``collapse_sum_to(tensor<2xf64> -> (s1,))``, which the backend cannot lower: whether to sum (s1 = 1) or not would
be a run-time guess, so the compiled adjoint failed with a LegalizeError. A random program of
tests/py/test_random_programs.py found it (MATMUL_AFTER_CAST is its falsifying example, the chain of ``abs`` before
the cast cut). Now the rules sum only the axes broadcasting added and reshape to the cast's sizes. Gradients are
checked against hand-derived ones (and finite differences), interpreted and compiled."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import op, transform
from relax_mlir.ir import TensorStructInfo, Var
from relax_mlir.op import grad_utils as gu
from relax_mlir.script import from_source
from relax_mlir.testing import finite_difference_gradients

MATMUL_AFTER_CAST = '''@I.ir_module
class Module:
    @R.function
    def main(x0: R.Tensor((2,), dtype="float64")) -> R.Tensor((), dtype="float64"):
        gv7: R.Tensor((2,), dtype="float64") = R.abs(x0)
        cast = R.match_cast(gv7, R.Tensor(("s1",), dtype="float64"))
        gv8: R.Tensor(("s1",), dtype="float64") = R.abs(cast)
        gv9: R.Tensor((), dtype="float64") = R.matmul(gv8, x0)
        loss: R.Tensor((), dtype="float64") = R.sum(gv9)
        return loss
'''
MATRIX_AFTER_CAST = '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float64"), w: R.Tensor((3, 4), "float64")) -> R.Tensor((), "float64"):
        with R.dataflow():
            c = R.match_cast(x, R.Tensor((2, "k"), "float64"))
            y = R.matmul(c, w)
            s = R.sum(R.multiply(y, y))
            R.output(s)
        return s
'''
BROADCAST_AFTER_CAST = '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float64")) -> R.Tensor((), "float64"):
        with R.dataflow():
            c = R.match_cast(x, R.Tensor(("s",), "float64"))
            b = R.broadcast_to(c, (3, 4))
            s = R.sum(R.multiply(b, b))
            R.output(s)
        return s
'''


def _both(after, *args):
    return [relax_mlir.interpret(after, "main_adjoint", *args),
            relax_mlir.VirtualMachine(relax_mlir.compile(after))["main_adjoint"](*args)]


def _no_collapse_to_other_sizes(func):
    """Every collapse_sum_to keeps each size of its input or makes it 1: none the backend would have to guess."""
    for block in func.blocks:
        for b in block.bindings:
            if getattr(b.value, "op", None) is op.collapse_sum_to:
                have, want = b.value.args[0].struct_info.shape, b.value.attrs["shape"]
                assert all(w == 1 or w == d for w, d in zip(want, have[len(have) - len(want):])), b.value


def _check(src, args, want_loss, want_grads):
    mod = from_source(src)
    after = transform.Gradient("main")(mod)
    _no_collapse_to_other_sizes(after["main_adjoint"])
    fd = finite_difference_gradients(mod, "main", args, range(len(args)))
    for got, want in zip(fd, want_grads):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)  # the hand derivation, checked
    for loss, grads in _both(after, *args):
        np.testing.assert_allclose(loss, want_loss, rtol=1e-12)
        for got, want in zip(grads, want_grads):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_vector_matmul_after_a_cast():
    x = np.array([0.7, -1.3])
    # loss = sum(|x| * x): d/dx (|x| x) = 2 |x|
    _check(MATMUL_AFTER_CAST, [x], np.sum(np.abs(x) * x), [2 * np.abs(x)])


def test_matrix_matmul_after_a_cast():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    y = x @ w
    _check(MATRIX_AFTER_CAST, [x, w], np.sum(y * y), [2 * y @ w.T, 2 * x.T @ y])


def test_broadcast_to_after_a_cast_sums_the_new_axis_only():
    x = np.array([0.5, -1.0, 2.0, 0.25])
    _check(BROADCAST_AFTER_CAST, [x], 3 * np.sum(x * x), [6 * x])


def _sinfo(shape):
    return TensorStructInfo(shape, "float64")


@pytest.mark.parametrize("have, want, ops", [
    ((2,), ("s1",), ["relax.reshape"]),  # the sizes the forward op assumed equal: no sum
    (("n",), (2,), ["relax.reshape"]),
    ((3, 4), ("s",), ["relax.reshape", "relax.collapse_sum_to"]),  # the leading axis only, then the cast's sizes
    (("n", 5), ("n", 1), ["relax.collapse_sum_to"]),
    ((2, 3), (2, 3), []),
])
def test_unbroadcast_sums_only_what_broadcasting_added(have, want, ops):
    g, target = Var("g", _sinfo(have)), _sinfo(want)
    out = gu.unbroadcast(g, target)
    assert out.struct_info == target
    calls, e = [], out
    while e is not g:
        calls.append(e)
        e = e.args[0]
    assert [c.op.name for c in calls] == ops
    for c in calls:  # summed to sizes the input has (1 where the target has 1), never to a symbolic one
        if c.op.name == "relax.collapse_sum_to":
            sizes = g.struct_info.shape[len(have) - len(want):]
            assert c.attrs["shape"] == tuple(1 if w == 1 else d for w, d in zip(want, sizes))


def test_unbroadcast_to_sizes_that_cannot_match_is_still_an_error():
    # Not reshaped behind the rule's back: (2, 3) -> (3, 2) is no broadcast, whatever the element counts.
    with pytest.raises(ValueError, match=r"shape \(3, 2\) does not broadcast to the input's \(2, 3\)"):
        gu.unbroadcast(Var("g", _sinfo((2, 3))), _sinfo((3, 2)))
