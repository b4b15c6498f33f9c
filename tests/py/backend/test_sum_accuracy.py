"""Float32 sums of many elements, compiled: computed in blocks (``schedule/reduction.py: block_sums``), their
rounding error stays near NumPy's pairwise sum instead of growing with the elements per partial sum.

The bound every large case asserts (first-order error analysis of a sum computed as a tree of serial chains):
each add rounds its result by at most ``u = 2^-24`` of it, and no partial result exceeds ``sum(|x|)``, so the
error is at most ``u * sum(|x|)`` times the longest chain of adds any element goes through. Blocked, that chain is
at most 128 adds into a lane's partial in a leaf block (256 when the reduced loop is not the vectorized one: a
column sum), a tree of log2(64) = 6 adds across the lanes, at most 64 adds at each level of blocks above it (two
levels up to 2^25 elements), 1 add of each thread's partial: under 300 (400 for a column sum) adds. The plain
vectorized loop had 2^24 / 64 = 2^18 adds in a chain and reached 4.9e-4 relative on the values below; a column
sum of 2^20 rows, 2^20. The measured errors are far below the bound (~1e-7: the float32 result's own rounding is
up to 6e-8); the tests also hold them to ``TYPICAL``, the statistical estimate ``u * sqrt(chain)`` with margin.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from mlir import ir

import relax_mlir
from relax_mlir.backend.schedule.reduction import plan_blocks
from relax_mlir.script.parser import from_source

U = 2.0 ** -24
#: Worst-case relative error (to sum(|x|)) of a blocked sum: the longest chain of adds times u (module docstring).
BOUND = 300 * U  # 1.8e-5
BOUND_COLUMNS = 400 * U  # 2.4e-5
#: Measured ~1e-7; u * sqrt(300) = 1e-6 is the statistical estimate of the same chain.
TYPICAL = 1e-6


def _module(shape, body: str, dtype: str = "float32"):
    dims = ", ".join(repr(s) for s in shape) + ("," if len(shape) == 1 else "")
    return from_source(f'''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(({dims}), "{dtype}")):
        with R.dataflow():
            s = {body}
            R.output(s)
        return s
''')


def _run(mod, x, threads=1):
    return np.asarray(relax_mlir.VirtualMachine(relax_mlir.compile(mod, num_threads=threads))["main"](x))


def _near_one(shape, seed=0):
    """Positive values near 1: the case where a long chain of adds loses the most (every add rounds a total that
    only grows). The plain vectorized sum of 2^20 of them was off by 3.6e-4."""
    rng = np.random.default_rng(seed)
    return (1 + rng.random(shape, dtype=np.float32) * np.float32(1e-3)).astype(np.float32)


def _relative_error(got, x, axis):
    x64 = x.astype(np.float64)
    want = x64.sum(axis=axis)  # float64 pairwise: its own error ~1e-16 relative, exact for these purposes
    return np.max(np.abs(got.astype(np.float64) - want) / np.abs(x64).sum(axis=axis))


def test_a_full_sum_of_2_to_the_24_is_as_exact_as_fsum_allows():
    """Against math.fsum (the correctly rounded sum), one thread: 2^24 elements, two levels of blocks."""
    x = _near_one(2 ** 24)
    got = float(_run(_module(x.shape, "R.sum(x)"), x))
    exact = math.fsum(x.astype(np.float64))
    error = abs(got - exact) / exact  # sum(|x|) is the sum here: all positive
    assert error <= BOUND, error  # longest chain 128 + 6 + 64 + 32 < 300 adds of at most u each
    assert error <= TYPICAL, error  # before: 4.9e-4
    np.testing.assert_allclose(got, np.sum(x, dtype=np.float64), rtol=TYPICAL)


@pytest.mark.parametrize("shape, axis, bound", [
    pytest.param((2 ** 22,), None, BOUND, id="full"),
    pytest.param((8, 2 ** 20), 1, BOUND, id="rows"),  # blocks along each row
    pytest.param((2 ** 20, 8), 0, BOUND_COLUMNS, id="columns"),  # serial partials: leaves of 256 rows
    pytest.param((256, 4, 4096), (0, 2), BOUND, id="channels"),  # a batch-norm statistic: images and pixels
])
@pytest.mark.parametrize("threads", [1, 2])
def test_large_sums_stay_within_the_blocked_bound(shape, axis, bound, threads):
    """Positive values near 1 and mixed-sign ones; one thread and two (each thread's partial blocked, then
    added)."""
    ax = "" if axis is None else f", axis={list(axis) if isinstance(axis, tuple) else [axis]}"
    mod = _module(shape, f"R.sum(x{ax})")
    for x in (_near_one(shape, 1), np.random.default_rng(2).standard_normal(shape, dtype=np.float32)):
        error = _relative_error(_run(mod, x, threads), x, axis)
        assert error <= bound, error  # the chain bound of the module docstring
        assert error <= TYPICAL, error


@pytest.mark.parametrize("shape, axis", [((1000003,), None), ((3, 100003), 1), ((2003, 67), 0),
                                         ((5, 7, 30011), (0, 2))])
def test_sizes_the_blocks_do_not_divide(shape, axis):
    """Partial last blocks at every level, and two threads' chunks of an odd size (whose extent the blocks then
    see as unknown): the same bound."""
    ax = "" if axis is None else f", axis={list(axis) if isinstance(axis, tuple) else [axis]}"
    x = _near_one(shape, 8)
    got = _run(_module(shape, f"R.sum(x{ax})"), x, threads=2)
    assert _relative_error(got, x, axis) <= TYPICAL


def test_means_and_variances_of_many_elements():
    """R.mean and R.variance (two blocked sums: the mean, then the squared deviations) against float64 NumPy;
    the variance is relative to itself (sum((x - m)^2) has no cancellation)."""
    shape = (4, 2 ** 20)
    x = _near_one(shape, 3)
    mean = _run(_module(shape, "R.mean(x, axis=[1])"), x)
    np.testing.assert_allclose(mean, x.astype(np.float64).mean(axis=1), rtol=TYPICAL)  # mean(|x|) = mean(x)
    y = np.random.default_rng(3).standard_normal(shape, dtype=np.float32) + np.float32(5)
    var = _run(_module(shape, "R.variance(x, axis=[1])"), y)
    # each deviation y - m is rounded once (|error| <= u * |y|, random in sign) before it is squared and summed:
    # that adds ~u * 2 * E|d| * E|y| / E[d^2] = 8u systematic at most, well under TYPICAL, to the blocked chain
    np.testing.assert_allclose(var, y.astype(np.float64).var(axis=1), rtol=TYPICAL)


@pytest.mark.parametrize("op", ["R.nn.log_softmax(x, axis=-1)", "R.nn.softmax(x, axis=-1)"])
def test_softmax_over_long_rows_matches_the_interpreter(op):
    """The sums of exp inside (log_)softmax over rows of 2^18 go through the same blocks."""
    x = np.random.default_rng(4).standard_normal((2, 2 ** 18), dtype=np.float32)
    mod = _module(x.shape, op)
    want = relax_mlir.interpret(mod, "main", x)
    np.testing.assert_allclose(_run(mod, x, threads=2), want, rtol=1e-5, atol=1e-10)


def test_small_sums_are_left_alone_and_exact_enough():
    """Sums whose partials take few elements are not blocked: the same numbers as the interpreter within a few
    ulps of sum(|x|)."""
    rng = np.random.default_rng(5)
    for shape, axis in [((7,), None), ((3, 5), 1), ((64, 10), 0), ((4096, 1024), 1), ((512, 16), 0)]:
        x = rng.standard_normal(shape, dtype=np.float32)
        ax = "" if axis is None else f", axis=[{axis}]"
        mod = _module(shape, f"R.sum(x{ax})")
        got = _run(mod, x)
        want = relax_mlir.interpret(mod, "main", x)
        scale = np.abs(x.astype(np.float64)).sum(axis=axis)
        assert np.max(np.abs(got - want) / scale) <= 64 * U, (shape, axis)


@pytest.mark.parametrize("n", [1, 300, 70000])
def test_sums_of_a_symbolic_size(n):
    """A symbolic reduced size is blocked as if it were 2^24 long: a column sum of ``n`` rows runs three levels of
    blocks, each cut short (partial blocks) or run once, and equals the interpreter's; so do a full sum and row
    sums."""
    mod = _module(("n", 16), "R.sum(x, axis=[0])")
    x = _near_one((n, 16), 6)
    got = _run(mod, x)
    np.testing.assert_allclose(got, relax_mlir.interpret(mod, "main", x), rtol=TYPICAL)
    assert _relative_error(got, x, 0) <= BOUND_COLUMNS
    full = _module(("n",), "R.sum(x)")
    y = np.random.default_rng(n).standard_normal(n * 16, dtype=np.float32)
    assert _relative_error(_run(full, y)[None], y[None], 1) <= BOUND
    rows = _module(("m", "n"), "R.sum(x, axis=[1])")  # rows of unknown count outside the blocks, one at a time
    z = _near_one((3, n), 9)
    assert _relative_error(_run(rows, z), z, 1) <= TYPICAL


def test_cumsum_over_a_long_axis():
    """cumsum is a reduction whose body reads its loop index (``linalg.index``): blocked, each block reads the
    index of its own elements."""
    x = np.random.default_rng(7).standard_normal((1, 3000), dtype=np.float32)
    got = _run(_module(x.shape, "R.cumsum(x, axis=1)"), x)
    want = np.cumsum(x.astype(np.float64), axis=1)
    scale = np.cumsum(np.abs(x.astype(np.float64)), axis=1)
    assert np.max(np.abs(got - want) / scale) <= BOUND


SUM = """
#in = affine_map<({dims}) -> ({dims})>
#out = affine_map<({dims}) -> ({kept})>
func.func @f(%x: tensor<{shape}x{t}>, %init: tensor<{out}>) -> tensor<{out}> {{
  %r = linalg.generic {{indexing_maps = [#in, #out], iterator_types = [{kinds}]}}
      ins(%x : tensor<{shape}x{t}>) outs(%init : tensor<{out}>) {{
  ^bb0(%a: {t}, %b: {t}):
    %s = {combine} %a, %b : {t}
    linalg.yield %s : {t}
  }} -> tensor<{out}>
  return %r : tensor<{out}>
}}
"""


def _plan(shape, reduced, t="f32", combine="arith.addf"):
    dims = [f"d{i}" for i in range(len(shape))]
    kept = [d for i, d in enumerate(dims) if i not in reduced]
    out = "x".join(str(s) for i, s in enumerate(shape) if i not in reduced)
    text = SUM.format(dims=", ".join(dims), kept=", ".join(kept), shape="x".join(map(str, shape)), t=t,
                      out=f"{out}x{t}" if out else t, combine=combine,
                      kinds=", ".join('"reduction"' if i in reduced else '"parallel"' for i in range(len(shape))))
    with ir.Context(), ir.Location.unknown():
        mod = ir.Module.parse(text)
        found = []
        mod.operation.walk(lambda op: (found.append(plan_blocks(op, 64)) if op.name == "linalg.generic" else None)
                           or ir.WalkResult.ADVANCE)
        return found[0]


def test_the_levels_of_blocks():
    """Leaves of 128 elements per partial (128 x 64 partials), 64 leaves a level, as many levels as the size
    needs."""
    assert _plan((2 ** 24,), [0]) == [[2 ** 19], [2 ** 13]]  # 32 blocks of 64 leaves of 8192
    assert _plan((2 ** 15,), [0]) == [[2 ** 13]]  # 4 leaves
    assert _plan((2 ** 14,), [0]) is None  # 256 per partial: left to the vectorized loop
    # rows: one row at a time outside the blocks (all rows inside each block read 16 rows at once: 2x slower)
    assert _plan((16, 2 ** 20), [1]) == [[1, 2 ** 19], [0, 2 ** 13]]
    assert _plan((2 ** 20, 16), [0]) == [[2 ** 14, 0], [256, 0]]  # columns: leaves of 256 rows
    assert _plan((512, 16), [0]) is None
    # a batch-norm statistic: two images' 3136 pixels a leaf (<= 8192), 167 images a block (<= 64 x 8192)
    assert _plan((256, 4, 3136), [0, 2]) == [[167, 0, 0], [2, 0, 0]]
    # rows of 28 are not the vectorized loop: leaves of 9 rows (252 <= 256), blocks of 20 images (<= 64 x 256)
    assert _plan((64, 8, 28, 28), [0, 2, 3]) == [[20, 0, 0, 0], [1, 0, 9, 0]]
    assert _plan((2 ** 20,), [0], t="f64") is None  # float64: 2^29 times the precision
    assert _plan((2 ** 20,), [0], combine="arith.maximumf") is None  # exact in any order
    assert _plan((2 ** 20,), [0], combine="arith.mulf") is None
