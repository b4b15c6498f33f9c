"""Elementwise and reduction kernels compiled from Relax (relax_mlir.compile) next to NumPy, in µs per call.

    python benchmarks/bench_kernels.py

Each kernel is one Relax function; the median of many calls is printed for the compiled function (which
includes the runtime's argument checks) and for the same computation in NumPy, in the same run.
"""

from __future__ import annotations

import time

import numpy as np

from relax_mlir import VirtualMachine, compile, op
from relax_mlir.ir import BlockBuilder, TensorStructInfo, Var


def _fn(name, shapes, body):
    params = [Var(f"a{i}", TensorStructInfo(s, "float32")) for i, s in enumerate(shapes)]
    bb = BlockBuilder()
    with bb.function(name, params):
        with bb.dataflow():
            out = bb.emit_output(body(*params))
        bb.emit_func_output(out)
    return bb.get()


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


KERNELS = [
    ("bias+relu 64x128", [(64, 128), (128,)], lambda x, b: op.nn.relu(op.add(x, b)),
     lambda x, b: np.maximum(x + b, 0)),
    ("exp 256x256", [(256, 256)], lambda x: op.exp(x), np.exp),
    ("sum rows 64x128", [(64, 128)], lambda x: op.sum(x, axis=1), lambda x: x.sum(1)),
    ("sum all 256x256", [(256, 256)], lambda x: op.sum(x), lambda x: x.sum()),
    ("max cols 256x256", [(256, 256)], lambda x: op.max(x, axis=0), lambda x: x.max(0)),
    ("mean/var 64x128", [(64, 128)], lambda x: op.variance(x, axis=1), lambda x: x.var(1)),
    ("softmax 64x10", [(64, 10)], lambda x: op.nn.softmax(x), _softmax),
    ("log_softmax 64x128", [(64, 128)], lambda x: op.nn.log_softmax(x),
     lambda x: np.log(_softmax(x))),
]


def _median_us(fn, args, repeat=2000) -> float:
    for _ in range(50):
        fn(*args)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return float(np.median(times) * 1e6)


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"{'kernel':<22} {'compiled µs':>12} {'NumPy µs':>10} {'ratio':>7}")
    for name, shapes, body, ref in KERNELS:
        vm = VirtualMachine(compile(_fn("k", shapes, body)))
        args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        np.testing.assert_allclose(vm["k"](*args), ref(*args), rtol=1e-4, atol=1e-4)
        compiled, numpy_us = _median_us(vm["k"], args), _median_us(ref, args)
        print(f"{name:<22} {compiled:>12.2f} {numpy_us:>10.2f} {numpy_us / compiled:>6.2f}x")


if __name__ == "__main__":
    main()
