"""Compiled matmul GFLOP/s next to NumPy, and the per-call cost of small kernels.

Run: python benchmarks/bench_matmul.py [--repeats 51]

Every figure is the median over ``repeats`` samples; a sample times enough back-to-back calls to last about
5 ms. Both sides allocate their result on every call (``f(x, w)`` vs ``x @ w``). NumPy is shown with its
default BLAS threads and, when threadpoolctl is installed, limited to one thread (the compiled code is
single-threaded).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from typing import Callable

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from relax_mlir.backend.pipeline import PipelineOptions  # noqa: E402
from relax_mlir.backend.runtime import compile_module  # noqa: E402

MATMUL = """
func.func @main(%x: tensor<{m}x{k}xf32>, %w: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{m}x{n}xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %y = linalg.matmul ins(%x, %w : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>)
                     outs(%acc : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  return %y : tensor<{m}x{n}xf32>
}}
"""

BIAS_RELU = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @main(%x: tensor<64x128xf32>, %b: tensor<128xf32>) -> tensor<64x128xf32> {
  %e = tensor.empty() : tensor<64x128xf32>
  %z = arith.constant 0.0 : f32
  %r = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
       ins(%x, %b : tensor<64x128xf32>, tensor<128xf32>) outs(%e : tensor<64x128xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %s = arith.addf %i, %j : f32
    %r = arith.maximumf %s, %z : f32
    linalg.yield %r : f32
  } -> tensor<64x128xf32>
  return %r : tensor<64x128xf32>
}
"""

TINY = """
func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.add ins(%x, %y : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Median seconds per call of ``fn`` over ``repeats`` samples of ~5 ms each."""
    fn()
    start, calls = time.perf_counter(), 0
    while time.perf_counter() - start < 0.005:
        fn()
        calls += 1
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls)
    return statistics.median(samples)


@contextlib.contextmanager
def one_blas_thread():
    """Limit NumPy's BLAS to one thread if threadpoolctl is available; yields whether it could."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield False
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield True


def bench_matmuls(repeats: int) -> None:
    print(f"{'matmul (M x K x N)':<20}{'MLIR opt0':>11}{'MLIR opt2':>11}{'NumPy':>11}{'NumPy 1thr':>12}  GFLOP/s")
    rng = np.random.default_rng(0)
    for m, k, n in [(64, 784, 128), (64, 128, 128), (256, 256, 256)]:
        x = rng.standard_normal((m, k), dtype=np.float32)
        w = rng.standard_normal((k, n), dtype=np.float32)
        flops = 2.0 * m * n * k
        row = []
        for opt in (0, 2):
            f = compile_module(MATMUL.format(m=m, k=k, n=n), options=PipelineOptions(opt_level=opt)).main
            np.testing.assert_allclose(f(x, w), x @ w, rtol=1e-3, atol=1e-3)
            row.append(flops / median_seconds(lambda: f(x, w), repeats if opt else 5) / 1e9)
        row.append(flops / median_seconds(lambda: x @ w, repeats) / 1e9)
        with one_blas_thread() as limited:
            row.append(flops / median_seconds(lambda: x @ w, repeats) / 1e9 if limited else float("nan"))
        print(f"{f'{m} x {k} x {n}':<20}" + "".join(f"{v:>11.1f}" for v in row[:3]) + f"{row[3]:>12.1f}")


def raw_call(cf, args: tuple, out: np.ndarray) -> Callable[[], None]:
    """The bare ctypes call of compiled function ``cf``, after one checked call binds it to ``args`` and ``out``.

    The descriptors point into the ndarray objects of the last call, so those must outlive the raw calls:
    hence ``out=`` (an allocated result would be freed at once)."""
    cf(*args, out=out)
    return lambda: cf._fn(cf._argv)


def bench_calls(repeats: int) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 128), dtype=np.float32)
    b = rng.standard_normal(128, dtype=np.float32)
    f = compile_module(BIAS_RELU).main
    out = np.empty((64, 128), np.float32)
    tiny = compile_module(TINY).main
    u, v, w = np.ones(4, np.float32), np.ones(4, np.float32), np.empty(4, np.float32)
    rows = [  # (label, a factory of the timed callable, made right before it is timed)
        ("bias+ReLU 64x128: compiled f(x, b)", lambda: lambda: f(x, b)),
        ("bias+ReLU 64x128: compiled f(x, b, out=y)", lambda: lambda: f(x, b, out=out)),
        ("bias+ReLU 64x128: raw ctypes call only", lambda: raw_call(f, (x, b), out)),
        ("bias+ReLU 64x128: NumPy np.maximum(x + b, 0)", lambda: lambda: np.maximum(x + b, 0)),
        ("4-element add: compiled f(u, v)", lambda: lambda: tiny(u, v)),
        ("4-element add: compiled f(u, v, out=w)", lambda: lambda: tiny(u, v, out=w)),
        ("4-element add: raw ctypes call only", lambda: raw_call(tiny, (u, v), w)),
        ("4-element add: NumPy u + v", lambda: lambda: u + v),
    ]
    print(f"\n{'kernel':<48}{'µs/call':>9}")
    times = {}
    for label, make in rows:
        times[label] = median_seconds(make(), repeats)
        print(f"{label:<48}{times[label] * 1e6:>9.2f}")
    overhead = times["4-element add: compiled f(u, v)"] - times["4-element add: raw ctypes call only"]
    print(f"{'=> runtime overhead per call (checks, binding, np.empty)':<48}{overhead * 1e6:>9.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=51, help="samples per figure (the median is shown)")
    args = parser.parse_args()
    print(f"# {os.cpu_count()} CPUs, NumPy {np.__version__}")
    bench_matmuls(args.repeats)
    bench_calls(args.repeats)


if __name__ == "__main__":
    main()
