"""Compile-time behaviour found by a differential hunt (s17, 2026-11): the size checks' walk back to the parameters'
size names took time exponential in a chain of guarded ops (``a = a * tanh(a)`` eight times, then a reshape of a
symbolic batch: 6 s, 4x per repeat), and a schedule that failed on a fused reduction was reported as a matmul's."""

from __future__ import annotations

import contextlib
import re
import warnings

import numpy as np
import pytest

import relax_mlir
from relax_mlir.backend import host as host_module
from relax_mlir.backend.legalize import size_checks
from relax_mlir.script import from_source


def _swish_chain(k: int):
    """``a = tanh(a) * a`` k times over a symbolic batch, then reshaped to ``(n, 10)`` and summed by rows: each
    op's size guard is an ``scf.if`` whose two branches lead back to the previous op's sizes."""
    body = "\n".join(f"            t{i} = R.tanh(a{i})\n            a{i + 1} = R.multiply(t{i}, a{i})"
                     for i in range(k))
    return from_source(f'''
@I.ir_module
class Module:
    @R.function
    def main(a0: R.Tensor(("n", 5, 2, 1), "float64")):
        with R.dataflow():
{body}
            r = R.reshape(a{k}, ("n", 10))
            s = R.sum(r, axis=[1])
            R.output(s)
        return s
''')


def test_size_names_are_traced_in_time_linear_in_a_chain_of_guarded_ops(monkeypatch):
    """Calls of ``_dim_key`` (each recursion goes through the module's name) are counted, failing fast past a
    linear budget (unmemoised: 20477 calls at k = 6, 4x per repeat; 50 memoised)."""
    calls, budget = [0], [0]
    traced = size_checks._dim_key

    def counted(*args):
        calls[0] += 1
        assert calls[0] <= budget[0], f"_dim_key called more than {budget[0]} times"
        return traced(*args)

    monkeypatch.setattr(size_checks, "_dim_key", counted)
    counts = {}
    for k in (6, 12, 30):
        calls[0], budget[0] = 0, 20 * k + 100
        relax_mlir.to_mlir(_swish_chain(k), "linalg")
        counts[k] = calls[0]
    # one repeat adds the same number of calls wherever it is added (8 at the time of writing)
    assert (counts[30] - counts[12]) * 6 == (counts[12] - counts[6]) * 18, counts


def test_memoised_size_names_change_nothing():
    """The linalg text is the same with the memo as without it (every lookup walked afresh)."""
    for k in (1, 3):
        mod = _swish_chain(k)
        remembered = relax_mlir.to_mlir(mod, "linalg")
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(size_checks, "_tracing", contextlib.nullcontext)
            assert relax_mlir.to_mlir(mod, "linalg") == remembered
    assert size_checks._memo.get() is None  # the memo lives only as long as one pass over a module


@pytest.mark.parametrize("k", [12, 30])
def test_a_long_chain_of_guarded_ops_compiles_and_matches_at_two_batch_sizes(k):
    mod = _swish_chain(k)
    f = relax_mlir.VirtualMachine(relax_mlir.compile(mod, num_threads=1))["main"]
    rng = np.random.default_rng(k)
    for n in (1, 4):
        x = rng.uniform(1.5, 4.0, (n, 5, 2, 1)) * rng.choice([-1.0, 1.0], (n, 5, 2, 1))  # |a * tanh(a)| stays large
        a = x
        for _ in range(k):
            a = np.tanh(a) * a
        np.testing.assert_allclose(f(x), a.reshape(n, 10).sum(axis=1), rtol=1e-12)
        np.testing.assert_allclose(f(x), relax_mlir.interpret(mod, "main", x), rtol=1e-12)


BATCH_NORM_MSE = """
@I.ir_module
class Module:
    @R.function
    def main(a: R.Tensor((1, 12, 3, 4), "float64"), b: R.Tensor((1, 12, 3, 4), "float64"),
             g: R.Tensor((12,), "float64"), be: R.Tensor((12,), "float64"), mm: R.Tensor((12,), "float64"),
             mv: R.Tensor((12,), "float64"), t: R.Tensor((1, 12, 3, 4), "float64")):
        with R.dataflow():
            c = R.multiply(R.const(1.5, "float64"), a)
            d = R.multiply(c, b)
            e = R.add(d, R.const(0.5, "float64"))
            f = R.abs(e)
            bn = R.nn.batch_norm(f, g, be, mm, mv)
            h = bn[0]
            i = R.subtract(h, t)
            j = R.square(i)
            k = R.mean(j)
            R.output(k)
        return k
"""


def _batch_norm_mse_args():
    rng = np.random.default_rng(0)
    shape = (1, 12, 3, 4)
    return [rng.standard_normal(shape), rng.standard_normal(shape)] + [rng.uniform(0.5, 1.5, 12) for _ in range(4)] \
        + [rng.standard_normal(shape)]


def _batch_norm_mse_numpy(a, b, g, be, mm, mv, t):
    channel = (1, 12, 1, 1)
    f = np.abs(1.5 * a * b + 0.5)
    h = (f - mm.reshape(channel)) / np.sqrt(mv.reshape(channel) + 1e-5) * g.reshape(channel) + be.reshape(channel)
    return np.mean((h - t) ** 2)


MATMUL_RELU = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((64, 10), "float32"), w: R.Tensor((10, 32), "float32")):
        with R.dataflow():
            y = R.nn.relu(R.matmul(x, w))
            R.output(y)
        return y
"""


@pytest.mark.parametrize("step,kind", [("vectorize_short_rows", "short-row vectorization"),
                                       ("schedule_elementwise", "elementwise"), ("schedule_matmuls", "matmul")])
def test_a_failed_schedule_is_named_by_its_own_family(monkeypatch, step, kind):
    """The fallback's warning named a matmul whatever failed (a fused batch norm + MSE mean, no matmul at all,
    whose short-row vectorization failed: below)."""
    import relax_mlir.backend.schedule as schedule

    def fails(*args, **kwargs):
        raise ValueError("Attempted to vectorize, but failed")

    monkeypatch.setattr(schedule, step, fails)
    message = (rf"^the {kind} schedule failed, lowering with naive loops instead: "
               r"Attempted to vectorize, but failed$")
    with pytest.warns(RuntimeWarning, match=message):
        text = relax_mlir.to_mlir(from_source(MATMUL_RELU), "scheduled")
    assert "vector." not in text  # the module as it was before the schedules: naive loops


@contextlib.contextmanager
def _avx512_host(monkeypatch):
    """The schedules planned for 512-bit vectors whatever the host, then the host's own facts again."""
    try:
        with monkeypatch.context() as patched:
            patched.setenv("RELAX_MLIR_VECTOR_BITS", "512")
            host_module.host_cpu.cache_clear()
            yield
    finally:
        host_module.host_cpu.cache_clear()


def test_a_fused_batch_norm_mse_mean_is_vectorized_without_a_warning(monkeypatch):
    mod = from_source(BATCH_NORM_MSE)
    args = _batch_norm_mse_args()
    # Rows of 4 float64 are short rows (vectorized in MLIR) with AVX-512's 8 lanes only; with 256 or 128 bits (other
    # hosts) LLVM's loop vectorizer takes them and the scheduled text has no vector op: the width is pinned.
    with warnings.catch_warnings(), _avx512_host(monkeypatch):
        warnings.simplefilter("error")
        text = relax_mlir.to_mlir(mod, "scheduled")
        f = relax_mlir.VirtualMachine(relax_mlir.compile(mod, num_threads=1))["main"]
    assert re.search(r"vector\.(multi_)?reduction|vector\.transfer_read", text)  # not the naive loops
    got = f(*args)
    np.testing.assert_allclose(got, relax_mlir.interpret(mod, "main", *args), rtol=1e-13)
    np.testing.assert_allclose(got, _batch_norm_mse_numpy(*args), rtol=1e-12)
