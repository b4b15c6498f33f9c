"""Per-call overhead of a compiled function with 1, 10 and 30 arguments, next to PyTorch's and JAX's dispatch.

    python benchmarks/call_overhead.py [--repeats 31]

The function takes k float32 vectors of 4 elements and returns the first doubled, so the native work is a few
nanoseconds and the time is the call path's: argument checks, descriptor writing, the output's allocation and
the ctypes call. Rows, each the median over ``repeats`` samples of enough back-to-back calls to last ~5 ms:

    compiled f(*args)           the call a user makes (the signature's plan, callpath.py, falling back to the general route)
    f(*args), Python checks     the same without the native module (_callpath.c): its checks written in Python
    compiled f(*args, out=y)    the same into a preallocated output (outputs checked: writeable, no overlap)
    general path                the path that converts or refuses arguments (docs/arguments.md), timed on
                                arguments that fit, as if it were the only path
    ctypes call only            the packed wrapper called with prepared descriptors: the floor
    torch.add(a, b)             PyTorch's eager dispatch of a trivial op on 4-element tensors (not per argument)
    jax jit f(*args)            a jitted function of the same k arguments returning the first doubled

The issue's target: under 3 us for 10 arguments. Measured (2-core AMD EPYC, 2026-11-24): 2.6 / 7.3 / 16.7 us
for 1 / 10 / 30 arguments with the data pointer read through the buffer protocol (``ctypes.c_char.from_buffer``,
about 0.3 us an array, most of the cost), against 1.4 / 3.6 / 9.0 us when it was read from CPython's object
layout (``id(a) + object.__basicsize__``), which a NumPy or CPython change would have made read the wrong word.
A native helper that reads the buffers in one call would reach the target; not written yet.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Callable

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def median_us(fn: Callable[[], object], repeats: int) -> float:
    fn()
    n, elapsed = 1, 0.0
    while elapsed < 5e-3:  # calls per sample: about 5 ms worth
        start = time.perf_counter()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter() - start
        n *= 2
    n //= 2
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(samples)


def module_text(k: int) -> str:
    params = ", ".join(f'x{i}: R.Tensor((4,), "float32")' for i in range(k))
    return f"""
@I.ir_module
class Module:
    @R.function
    def main({params}) -> R.Tensor((4,), "float32"):
        y = R.multiply(x0, R.const(2.0, "float32"))
        return y
"""


def relax_rows(k: int, repeats: int) -> dict[str, float]:
    import relax_mlir as rm
    from relax_mlir.script import from_source

    f = rm.VirtualMachine(rm.compile(from_source(module_text(k))))["main"]
    args = [np.full(4, i, np.float32) for i in range(k)]
    out = np.empty(4, np.float32)
    np.testing.assert_array_equal(f(*args), args[0] * 2)
    argv = f._argv
    rows = {
        "compiled f(*args)": median_us(lambda: f(*args), repeats),
        "compiled f(*args, out=y)": median_us(lambda: f(*args, out=out), repeats),
        "general path": median_us(lambda: f._call_general(args, None), repeats),
    }
    native, f._plan.native = f._plan.native, None  # the same call with the checks in Python
    rows["f(*args), Python checks"] = median_us(lambda: f(*args), repeats) if native is not None else None
    f._plan.native = native
    f(*args)  # leaves argv pointing at live arrays for the raw call
    raw = f._fn
    rows["ctypes call only"] = median_us(lambda: raw(argv), repeats)
    return rows


def torch_row(repeats: int) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    a, b = torch.ones(4), torch.ones(4)
    return median_us(lambda: torch.add(a, b), repeats)


def jax_row(k: int, repeats: int) -> float | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    f = jax.jit(lambda *xs: xs[0] * 2)
    args = [jnp.full(4, i, jnp.float32) for i in range(k)]
    f(*args).block_until_ready()
    return median_us(lambda: f(*args).block_until_ready(), repeats)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=31)
    args = ap.parse_args()
    counts = (1, 10, 30)
    table: dict[str, dict[int, float | None]] = {}
    for k in counts:
        for name, us in relax_rows(k, args.repeats).items():
            table.setdefault(name, {})[k] = us
        table.setdefault("jax jit f(*args)", {})[k] = jax_row(k, args.repeats)
    torch_us = torch_row(args.repeats)
    table["torch.add(a, b)"] = {k: torch_us for k in counts}
    print(f"# per-call time in microseconds (median of {args.repeats} samples)")
    print(f"{'call':<28}" + "".join(f"{f'{k} args':>12}" for k in counts))
    for name, row in table.items():
        print(f"{name:<28}" + "".join(f"{'n/a' if row[k] is None else f'{row[k]:.2f}':>12}" for k in counts))
    ten = table["compiled f(*args)"][10]
    print(f"target: under 3 us for 10 arguments: {ten:.2f} us, {'met' if ten < 3 else 'NOT met'}")


if __name__ == "__main__":
    main()
