"""FastMathTransform and the fast ops it introduces: accuracy of the compiled ``fast_tanh``/``fast_erf`` against
the exact functions (computed in float64 by the standard library), special values, what the pass rewrites and
what it leaves, compiled tanh/erf being the same functions, and a gradient through the rewritten module."""

from __future__ import annotations

import math

import numpy as np
import pytest

import relax_mlir
from relax_mlir import transform
from relax_mlir.script import from_source
from relax_mlir.testing import roundtrip

_ERF = np.vectorize(math.erf)


def _run(text: str, *args):
    mod = from_source(text)
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod))
    return mod, vm["main"](*args)


def _unary_module(fn: str, n: int, dtype: str = "float32") -> str:
    return f"""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(({n},), "{dtype}")):
        y = R.{fn}(x)
        return y
"""


def _float32_range(n: int) -> np.ndarray:
    """Points over the whole float32 range: dense near 0 (where the functions bend), log-spaced beyond."""
    rng = np.random.default_rng(0)
    near = np.linspace(-12, 12, n, dtype=np.float32)
    far = (10.0 ** rng.uniform(-30, 38, n // 4)).astype(np.float32) * rng.choice([-1, 1], n // 4).astype(np.float32)
    return np.concatenate([near, far])


@pytest.mark.parametrize("fn, exact, bound", [("fast_tanh", np.tanh, 5e-7), ("fast_erf", _ERF, 5e-7)])
def test_compiled_fast_ops_are_within_their_stated_error_over_the_float32_range(fn, exact, bound):
    x = _float32_range(1 << 18)
    _, got = _run(_unary_module(fn, x.size), x)
    want = exact(x.astype(np.float64))
    err = np.abs(got.astype(np.float64) - want)
    assert err.max() < bound, f"{fn}: max error {err.max():.3g} at x={x[err.argmax()]}"
    # odd functions: exactly antisymmetric, and saturated to +-1 away from 0
    assert np.array_equal(got[x > 20], np.ones(np.sum(x > 20), np.float32))


@pytest.mark.parametrize("fn", ["fast_tanh", "fast_erf"])
def test_special_values(fn):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32)
    _, got = _run(_unary_module(fn, x.size), x)
    got = got
    assert np.isnan(got[0])
    assert got[1:3].tolist() == [1.0, -1.0] and got[3] == 0.0


def test_compiled_fast_ops_match_the_interpreter():
    x = np.linspace(-6, 6, 101, dtype=np.float32)
    for fn in ("fast_tanh", "fast_erf"):
        mod, got = _run(_unary_module(fn, x.size), x)
        # the reference computes the same rational function in float64: they differ by float32 rounding only, the
        # several roundings of the polynomials' steps (0.89 of the way to 2e-7 was measured): 4 ulps at 1
        np.testing.assert_allclose(got, relax_mlir.interpret(mod, "main", x), rtol=0, atol=4 * 2.0 ** -23)


def test_compiled_float32_tanh_and_erf_are_the_fast_functions():
    """The backend approximates float32 tanh/erf with the same rational functions (math_approx.py): compiled,
    the exact op and the fast op give the same bits."""
    x = np.linspace(-8, 8, 4001, dtype=np.float32)
    for fn in ("tanh", "erf"):
        _, exact = _run(_unary_module(fn, x.size), x)
        _, fast = _run(_unary_module(f"fast_{fn}", x.size), x)
        np.testing.assert_array_equal(exact, fast)


GELU = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 64), "float32"), w: R.Tensor((64, 32), "float32"), d: R.Tensor((8,), "float64")):
        with R.dataflow():
            h = R.matmul(x, w)
            a = R.nn.gelu(h)
            b = R.nn.gelu_tanh(h)
            c = R.tanh(a)
            e = R.erf(b)
            f = R.erf(d)
            s = R.add(c, e)
            R.output(s, f)
        return (s, f)
"""


def _calls(mod) -> list[str]:
    return [b.value.op.name for block in mod["main"].body.blocks for b in block.bindings
            if hasattr(getattr(b.value, "op", None), "name")]


def test_fast_math_transform_rewrites_float32_and_keeps_float64_exact():
    before = from_source(GELU)
    after = transform.FastMathTransform()(before)
    roundtrip(after)
    ops = _calls(after)
    assert not {"relax.nn.gelu", "relax.nn.gelu_tanh", "relax.tanh"} & set(ops), after.script()
    assert ops.count("relax.erf") == 1  # the float64 one
    assert ops.count("relax.fast_erf") == 2 and ops.count("relax.fast_tanh") == 2
    rng = np.random.default_rng(3)
    args = [rng.standard_normal((3, 64)).astype(np.float32), (rng.standard_normal((64, 32)) / 8).astype(np.float32),
            rng.standard_normal(8)]
    want = relax_mlir.interpret(before, "main", *args)
    got = relax_mlir.VirtualMachine(relax_mlir.compile(after))["main"](*args)
    # float32 results through approximations within 4e-7 and the float32 matmul's rounding
    np.testing.assert_allclose(got[0], want[0], rtol=0, atol=2e-6)
    np.testing.assert_array_equal(got[1], relax_mlir.VirtualMachine(relax_mlir.compile(before))["main"](
        *args)[1])


def test_gradient_through_fast_math_matches_finite_differences():
    text = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((5,), "float32")):
        with R.dataflow():
            a = R.nn.gelu(x)
            b = R.tanh(a)
            s = R.sum(b)
            R.output(s)
        return s
"""
    mod = transform.Gradient("main")(transform.FastMathTransform()(from_source(text)))
    x = np.linspace(-2, 2, 5).astype(np.float32)
    _, (grad,) = relax_mlir.interpret(mod, "main_adjoint", x)
    exact = lambda v: np.sum(np.tanh(0.5 * v * (1 + _ERF(v / math.sqrt(2)))))  # noqa: E731
    h = 1e-6
    fd = np.array([(exact(x + h * e) - exact(x - h * e)) / (2 * h) for e in np.eye(5)])
    # the gradient rules are the exact functions' derivatives at the approximated values: 1e-5 covers the
    # approximations (4e-7) and float32 rounding of the forward values
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-5)
