"""conv2d_transpose and strided conv2d, forward and backward, compiled next to PyTorch (eager, CPU).

    python benchmarks/conv_transpose_grad.py [--rounds 15] [--calls 10] [--threads 2] [--only NAME,...] [--cpu]

Workloads (float32, NCHW):

    convt-s2     conv2d_transpose 64x8x28x28, weight 8x8x3x3, stride 2, padding 1, output_padding 1 (-> 56x56)
    convt-k4s2   conv2d_transpose 32x16x14x14, weight 16x8x4x4, stride 2, padding 1 (a DCGAN upsampling)
    convt-s1     conv2d_transpose 32x16x16x16, weight 16x16x3x3, stride 1, padding 1
    conv-s2      conv2d 64x8x56x56, weight 8x8x3x3, stride 2, padding 1 (its data gradient is a conv2d_transpose)

"forward" is the op alone; "backward" the gradients of both inputs for a given output adjoint: relax-mlir's
compiled gradient rule (the data gradient and the weight gradient, as ``Gradient`` emits them), PyTorch's
``autograd.grad`` on a graph built once (``retain_graph``). Each round times ``--calls`` calls of each, the four
alternated; the report gives the medians (and minima) in ms, relax-mlir / PyTorch and backward / forward.
``--cpu --threads 1`` times the calling thread's CPU time instead of the wall clock: on a loaded shared host
the figures then move by a few percent instead of several times (both run their one thread in the caller).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import relax_mlir
from relax_mlir import BlockBuilder, TensorStructInfo as T, Var
from relax_mlir.op import nn
from relax_mlir.testing.gradcheck import vjp_module

# name: (relax op, data shape, weight shape, attrs)
WORKLOADS = {
    "convt-s2": ("conv2d_transpose", (64, 8, 28, 28), (8, 8, 3, 3), dict(strides=2, padding=1, output_padding=1)),
    "convt-k4s2": ("conv2d_transpose", (32, 16, 14, 14), (16, 8, 4, 4), dict(strides=2, padding=1)),
    "convt-s1": ("conv2d_transpose", (32, 16, 16, 16), (16, 16, 3, 3), dict(padding=1)),
    "conv-s2": ("conv2d", (64, 8, 56, 56), (8, 8, 3, 3), dict(strides=2, padding=1)),
}


def _forward_module(op, sinfos, attrs):
    params = [Var(f"a{i}", s) for i, s in enumerate(sinfos)]
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(op(*params, **attrs))
        bb.emit_func_output(out)
    return bb.get()


def _relax(name, xs, ws, attrs, threads):
    op = getattr(nn, name)
    sinfos = [T(xs, "float32"), T(ws, "float32")]
    fwd = relax_mlir.VirtualMachine(relax_mlir.compile(_forward_module(op, sinfos, attrs), num_threads=threads))
    bwd = relax_mlir.VirtualMachine(relax_mlir.compile(vjp_module(op, sinfos, attrs), num_threads=threads))
    return fwd["main"], bwd["vjp"]


def _torch(torch, name, attrs):
    a = {"stride": attrs.get("strides", 1), "padding": attrs.get("padding", 0)}
    if name == "conv2d_transpose":
        return lambda x, w: torch.nn.functional.conv_transpose2d(x, w, output_padding=attrs.get("output_padding", 0),
                                                                 **a)
    return lambda x, w: torch.nn.functional.conv2d(x, w, **a)


def _timed(fn, calls: int, clock) -> list[float]:
    out = []
    for _ in range(calls):
        start = clock()
        fn()
        out.append(clock() - start)
    return out


def run(name: str, rounds: int, calls: int, threads: int, clock=time.perf_counter) -> None:
    import torch

    torch.set_num_threads(threads)
    op_name, xs, ws, attrs = WORKLOADS[name]
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(xs).astype("float32"), rng.standard_normal(ws).astype("float32")
    fwd, bwd = _relax(op_name, xs, ws, attrs, threads)
    g = rng.standard_normal(np.asarray(fwd(x, w)).shape).astype("float32")
    tfn = _torch(torch, op_name, attrs)
    tx, tw, tg = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True), torch.tensor(g)
    ty = tfn(tx, tw)
    got = [np.asarray(v) for v in bwd(x, w, g)]
    want = [v.numpy() for v in torch.autograd.grad(ty, [tx, tw], tg, retain_graph=True)]
    for a, b in zip(got, want):  # a benchmark of wrong code measures nothing
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3 * float(np.abs(b).max()))
    jobs = {"relax fwd": lambda: fwd(x, w), "relax bwd": lambda: bwd(x, w, g),
            "torch fwd": lambda: tfn(tx.detach(), tw.detach()),
            "torch bwd": lambda: torch.autograd.grad(ty, [tx, tw], tg, retain_graph=True)}
    times: dict[str, list[float]] = {k: [] for k in jobs}
    for fn in jobs.values():  # warm up
        fn()
    for _ in range(rounds):
        for key, fn in jobs.items():
            times[key] += _timed(fn, calls, clock)
    med = {k: 1e3 * statistics.median(v) for k, v in times.items()}
    low = {k: 1e3 * min(v) for k, v in times.items()}
    print(f"{name:11} " + "  ".join(f"{med[k]:8.3f} ({low[k]:7.3f})" for k in jobs)
          + f"  {med['relax fwd'] / med['torch fwd']:6.2f} {med['relax bwd'] / med['torch bwd']:6.2f}"
          + f"  {med['relax bwd'] / med['relax fwd']:6.2f} {med['torch bwd'] / med['torch fwd']:6.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workload names")
    parser.add_argument("--cpu", action="store_true", help="time the calling thread's CPU time (with --threads 1)")
    args = parser.parse_args()
    if args.cpu and args.threads != 1:
        parser.error("--cpu measures the calling thread only: use it with --threads 1")
    print(f"median (min) ms over {args.rounds} rounds x {args.calls} calls, {args.threads} thread(s)"
          f"{', CPU time' if args.cpu else ''}; ratios of medians: relax/torch fwd, bwd; bwd/fwd relax, torch")
    print(f"{'workload':11} " + "  ".join(f"{k:>18}" for k in ("relax fwd", "relax bwd", "torch fwd", "torch bwd"))
          + "  r/t fwd r/t bwd  b/f rm b/f pt")
    for name in args.only.split(","):
        run(name.strip(), args.rounds, args.calls, args.threads, time.thread_time if args.cpu else time.perf_counter)


if __name__ == "__main__":
    main()
