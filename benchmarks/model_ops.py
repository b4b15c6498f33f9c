"""The ops real models need (issue 11), compiled, next to NumPy written by hand: forward and forward + gradient.

    python benchmarks/model_ops.py [--rounds 15] [--calls 20]

Workloads (float32):

    attention    nn.attention(q, k, v, causal_mask="TopLeft"), (B, S, N, H) = (4, 128, 4, 32)
    group_norm   nn.group_norm over (8, 64, 16, 16), 8 groups
    einsum       einsum("bij,bjk->bik") of (16, 64, 64) and (16, 64, 64)
    scatter      scatter_elements(data (512, 64), indices (256, 64), 'add')

Each is compiled once (the composites through their decompositions); each round times ``--calls`` calls of the
compiled function and of the NumPy version, alternated. The report gives the medians in ms and their ratio.
The gradient column is the compiled ``Gradient`` of ``sum(op(...) * w)`` (NumPy has none to compare with).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import relax_mlir
from relax_mlir import BlockBuilder, TensorStructInfo as T, Var, op
from relax_mlir.transform import Gradient


def _module(make, sinfos, grad: bool):
    params = [Var(f"a{i}", s) for i, s in enumerate(sinfos)]
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit(make(*params))
            result = bb.emit_output(op.sum(out * out) if grad else out)
        bb.emit_func_output(result)
    mod = bb.get()
    return (Gradient("main")(mod), "main_adjoint") if grad else (mod, "main")


def _attention_np(q, k, v):
    s = np.einsum("bsnh,btnh->bnst", q, k) / np.sqrt(q.shape[-1])
    s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bnst,btnh->bsnh", p / p.sum(-1, keepdims=True), v)


def _group_norm_np(x, gamma, beta):
    n, c, h, w = x.shape
    g = x.reshape(n, 8, c // 8, h, w)
    y = (g - g.mean((2, 3, 4), keepdims=True)) / np.sqrt(g.var((2, 3, 4), keepdims=True) + 1e-5)
    return y.reshape(x.shape) * gamma[:, None, None] + beta[:, None, None]


def _scatter_np(data, indices, updates):
    out = data.copy()
    np.add.at(out, (indices, np.arange(indices.shape[1])[None]), updates)
    return out


def workloads(rng):
    f = np.float32
    q, k, v = (rng.standard_normal((4, 128, 4, 32)).astype(f) for _ in range(3))
    x, gamma, beta = rng.standard_normal((8, 64, 16, 16)).astype(f), np.ones(64, f), np.zeros(64, f)
    a, b = rng.standard_normal((16, 64, 64)).astype(f), rng.standard_normal((16, 64, 64)).astype(f)
    data, idx, upd = np.zeros((512, 64), f), rng.integers(0, 512, (256, 64)), rng.standard_normal((256, 64)).astype(f)
    return {
        "attention": (lambda *p: op.nn.attention(*p, causal_mask="TopLeft"), [q, k, v], _attention_np),
        "group_norm": (lambda *p: op.nn.group_norm(*p, 8, 1, (2, 3)), [x, gamma, beta], _group_norm_np),
        "einsum": (lambda *p: op.einsum(list(p), "bij,bjk->bik"), [a, b], lambda a, b: np.einsum("bij,bjk->bik", a, b)),
        "scatter": (lambda *p: op.scatter_elements(*p, 0, "add"), [data, idx, upd], _scatter_np),
    }


def _time(fn, args, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    return (time.perf_counter() - start) / calls * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'workload':<12} {'compiled ms':>12} {'NumPy ms':>10} {'ratio':>7} {'gradient ms':>12}")
    for name, (make, arrays, numpy_fn) in workloads(rng).items():
        sinfos = [T(a.shape, str(a.dtype)) for a in arrays]
        fwd_mod, fwd_name = _module(make, sinfos, grad=False)
        grad_mod, grad_name = _module(make, sinfos, grad=True)
        fwd = relax_mlir.VirtualMachine(relax_mlir.compile(fwd_mod))[fwd_name]
        bwd = relax_mlir.VirtualMachine(relax_mlir.compile(grad_mod))[grad_name]
        np.testing.assert_allclose(fwd(*arrays), numpy_fn(*arrays), rtol=1e-3, atol=1e-4)
        ours, theirs, grads = [], [], []
        for _ in range(args.rounds):
            ours.append(_time(fwd, arrays, args.calls))
            theirs.append(_time(numpy_fn, arrays, args.calls))
            grads.append(_time(bwd, arrays, max(1, args.calls // 4)))
        mo, mt, mg = (statistics.median(v) for v in (ours, theirs, grads))
        print(f"{name:<12} {mo:>12.3f} {mt:>10.3f} {mo / mt:>7.2f} {mg:>12.3f}", flush=True)


if __name__ == "__main__":
    main()
