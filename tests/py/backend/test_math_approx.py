"""float32 exp and log as vectorizable polynomials (schedule/math_approx.py): accuracy against NumPy in float64
over the whole float32 range, special values, and that the loops no longer call libm."""

from __future__ import annotations

import numpy as np
import pytest

from relax_mlir.backend.pipeline import PipelineOptions
from relax_mlir.backend.runtime import compile_module

KERNEL = """
#id = affine_map<(d0) -> (d0)>
func.func @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %e = tensor.empty() : tensor<{n}xf32>
  %r = linalg.generic {{indexing_maps = [#id, #id], iterator_types = ["parallel"]}}
       ins(%x : tensor<{n}xf32>) outs(%e : tensor<{n}xf32>) {{
  ^bb0(%i: f32, %o: f32):
    %y = math.{fn} %i : f32
    linalg.yield %y : f32
  }} -> tensor<{n}xf32>
  return %r : tensor<{n}xf32>
}}
"""


def _ulps(got: np.ndarray, want64: np.ndarray) -> np.ndarray:
    """Error in units of the last place of the float32 nearest to the exact value."""
    want = want64.astype(np.float32)
    spacing = np.spacing(np.abs(want)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want64) / spacing


def _compiled(fn: str, n: int):
    return compile_module(KERNEL.format(fn=fn, n=n), options=PipelineOptions(num_threads=1))


def test_exp_is_within_one_and_a_half_ulps_over_its_range():
    x = np.linspace(-87.3, 88.7, 1 << 20, dtype=np.float32)
    x = np.concatenate([x, np.float32(np.random.default_rng(0).standard_normal(1 << 16) * 4)])
    got = _compiled("exp", x.size).main(x)
    assert _ulps(got, np.exp(x.astype(np.float64))).max() <= 1.5  # measured: 0.99 (exp), 0.74 (log)


def test_log_is_within_one_and_a_half_ulps_over_its_range():
    bits = np.random.default_rng(1).integers(1, 0x7F800000, 1 << 20, dtype=np.int64).astype(np.int32)
    x = bits.view(np.float32)  # every positive finite float32, subnormals included
    got = _compiled("log", x.size).main(x)
    assert _ulps(got, np.log(x.astype(np.float64))).max() <= 1.5  # measured: 0.99 (exp), 0.74 (log)


def test_special_values_as_numpy():
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 89.0, -88.0, -104.0, 1e-45, -1.0, 1.0],
                       dtype=np.float32)
    with np.errstate(all="ignore"):
        want_exp = np.exp(special)
        want_log = np.log(special)
    got_exp = _compiled("exp", special.size).main(special)
    got_log = _compiled("log", special.size).main(special)
    # exp below 2^-126 (a subnormal in NumPy) flushes to 0: an absolute error under 1.2e-38
    np.testing.assert_allclose(got_exp, want_exp, rtol=2.4e-7, atol=1.2e-38)
    np.testing.assert_array_equal(np.isnan(got_log), np.isnan(want_log))
    finite = ~np.isnan(want_log)
    np.testing.assert_allclose(got_log[finite], want_log[finite], rtol=2.4e-7)


@pytest.mark.parametrize("fn", ["exp", "log", "tanh", "erf"])
def test_no_libm_call_remains(fn):
    text = _compiled(fn, 64).llvm_text
    assert f"@{fn}f" not in text and f"llvm.intr.{fn}" not in text


@pytest.mark.parametrize("fn", ["tanh", "erf"])
def test_tanh_and_erf_are_within_their_stated_error(fn):
    import math as pymath

    rng = np.random.default_rng(2)
    x = np.concatenate([np.linspace(-10, 10, 1 << 20, dtype=np.float32),
                        np.float32(10.0 ** rng.uniform(-45, 1.3, 1 << 18)) * rng.choice([-1, 1], 1 << 18).astype(
                            np.float32),
                        np.array([0.0, -0.0, np.inf, -np.inf, 1e30, -1e30], np.float32)])
    exact = np.tanh if fn == "tanh" else np.vectorize(pymath.erf)
    want = exact(x.astype(np.float64))
    got = _compiled(fn, x.size).main(x)
    # measured: tanh 6.0 ulp / 3.6e-7, erf 7.1 ulp / 4.3e-7 at worst, both near +-1 (op/fast_math.py)
    assert _ulps(got, want).max() <= 8 and np.abs(got - want).max() < 5e-7
    assert np.isnan(_compiled(fn, 1).main(np.array([np.nan], np.float32))).all()


@pytest.mark.parametrize("name", ["fast_tanh", "fast_erf"])
def test_the_approximations_stay_within_minus_one_and_one_in_float64(name):
    """Both functions are bounded by 1; in float64 the rational approximation of erf(10) was 1.0000000494."""
    import math

    import relax_mlir as rm
    from relax_mlir.script import from_source

    mod = from_source(f'''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((8,), "float64")):
        y = R.{name}(x)
        return y
''')
    x = np.array([-100.0, -10.0, -4.0, -3.5, 3.5, 4.0, 10.0, 100.0])
    for got in (rm.interpret(mod, "main", x), rm.VirtualMachine(rm.compile(mod))["main"](x)):
        assert np.all(np.abs(got) <= 1.0), got
        exact = np.tanh(x) if name == "fast_tanh" else np.array([math.erf(v) for v in x])
        np.testing.assert_allclose(got, exact, rtol=0, atol=5e-7)
