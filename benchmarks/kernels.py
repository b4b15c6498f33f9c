"""The kernels of the training steps, compiled from Relax, next to NumPy and PyTorch in the same run.

    python benchmarks/kernels.py [--threads N] [--min-seconds 0.2] [--no-pack]

Rows: the matmul shapes of ``train_step.py``'s steps in the three forms their gradients produce (plain
``x w``, transposed ``x^T g`` and ``g w^T``: the transpose is part of the timed function, as in a step), the
CNN's convolutions forward and backward (``conv2d_transpose`` is the data gradient, the weight gradient is a
convolution over the batch), pooling, softmax/exp, tanh/erf/GELU and reductions. Each figure is the median time of repeated
calls for at least ``--min-seconds``; GFLOP/s where the op has a flop count, else µs. NumPy and PyTorch run in
this process too, with a pause between frameworks so that one's spinning threads do not slow another's.
Every compiled result is checked against NumPy (or PyTorch) first. ``--no-pack`` compiles large matmuls without
packing their blocks (``schedule/matmul.py``, ``PACK_MIN_FLOPS``), for the figures before and after it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from relax_mlir import VirtualMachine, compile, op
from relax_mlir.ir import BlockBuilder, TensorStructInfo, Var


def _fn(shapes, body):
    params = [Var(f"a{i}", TensorStructInfo(s, "float32")) for i, s in enumerate(shapes)]
    bb = BlockBuilder()
    with bb.function("k", params):
        with bb.dataflow():
            out = bb.emit_output(body(*params))
        bb.emit_func_output(out)
    return bb.get()


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _t(x):
    return op.permute_dims(x, [1, 0])


def matmuls():
    """(name, shapes, relax body, numpy, torch, flops)."""
    rows = []
    for m, k, n in ((64, 784, 128), (64, 128, 128), (256, 1024, 1024)):
        flops = 2 * m * n * k
        rows.append((f"matmul {m}x{k} . {k}x{n}", [(m, k), (k, n)], op.matmul, np.matmul, "matmul", flops))
        rows.append((f"x^T g  ({k}x{m})^T . {k}x{n}", [(k, m), (k, n)], lambda x, g: op.matmul(_t(x), g),
                     lambda x, g: x.T @ g, "tn", flops))
        rows.append((f"g w^T  {m}x{k} . ({n}x{k})^T", [(m, k), (n, k)], lambda g, w: op.matmul(g, _t(w)),
                     lambda g, w: g @ w.T, "nt", flops))
    return rows


def convs():
    rows = []
    for n, c, hw, f in ((64, 1, 28, 8), (64, 8, 14, 16)):
        flops = 2 * n * f * hw * hw * c * 9
        rows.append((f"conv2d {n}x{c}x{hw}x{hw} * {f}x{c}x3x3", [(n, c, hw, hw), (f, c, 3, 3)],
                     lambda x, w: op.nn.conv2d(x, w, padding=(1, 1, 1, 1)), None, "conv", flops))
        rows.append((f"conv data grad {n}x{f}x{hw}x{hw} -> {c} ch", [(n, f, hw, hw), (f, c, 3, 3)],
                     lambda g, w: op.nn.conv2d_transpose(g, w, padding=(1, 1, 1, 1)), None, "convT", flops))
        rows.append((f"conv weight grad {f}x{c}x3x3 from {n}x{c}x{hw}x{hw}",
                     [(c, n, hw + 2, hw + 2), (f, n, hw, hw)], lambda x, g: op.nn.conv2d(x, g), None, "conv", flops))
    return rows


OTHERS = [
    ("max_pool2d 64x8x28x28", [(64, 8, 28, 28)], lambda x: op.nn.max_pool2d(x, pool_size=(2, 2), strides=(2, 2)),
     None, "pool", 0),
    ("softmax 64x10", [(64, 10)], op.nn.softmax, _softmax, "softmax", 0),
    ("softmax 256x1024", [(256, 1024)], op.nn.softmax, _softmax, "softmax", 0),
    ("exp 256x256", [(256, 256)], op.exp, np.exp, "exp", 0),
    ("tanh 1024x1024", [(1024, 1024)], op.tanh, np.tanh, "tanh", 0),
    ("erf 1024x1024", [(1024, 1024)], op.erf, None, "erf", 0),
    ("gelu 1024x1024", [(1024, 1024)], op.nn.gelu, None, "gelu", 0),
    ("sum all 256x256", [(256, 256)], lambda x: op.sum(x), lambda x: x.sum(), "sum", 0),
    ("bias+relu 256x1024", [(256, 1024), (1024,)], lambda x, b: op.nn.relu(op.add(x, b)),
     lambda x, b: np.maximum(x + b, 0), "bias_relu", 0),
]


def _torch_fn(kind):
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    fns = {
        "matmul": lambda a, b: a @ b, "tn": lambda x, g: x.T @ g, "nt": lambda g, w: g @ w.T,
        "conv": lambda x, w: F.conv2d(x, w, padding=1 if x.shape[-1] != w.shape[-1] + 2 else 0),
        "convT": lambda g, w: F.conv_transpose2d(g, w, padding=1),
        "pool": lambda x: F.max_pool2d(x, 2), "softmax": lambda x: torch.softmax(x, -1), "exp": torch.exp,
        "sum": torch.sum, "bias_relu": lambda x, b: torch.relu(x + b), "tanh": torch.tanh, "erf": torch.erf,
        "gelu": F.gelu,
    }
    fn = fns[kind]
    return lambda *arrays: fn(*[torch.from_numpy(a) for a in arrays])


def median_seconds(fn, args, min_seconds: float) -> float:
    fn(*args)
    times: list[float] = []
    while sum(times) < min_seconds or len(times) < 10:
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--min-seconds", type=float, default=0.2)
    parser.add_argument("--no-pack", action="store_true", help="large matmuls without packed blocks")
    args = parser.parse_args()
    if args.no_pack:
        from relax_mlir.backend.schedule import matmul as matmul_schedule

        matmul_schedule.PACK_MIN_FLOPS = 2 ** 62
    try:
        import torch

        torch.set_num_threads(args.threads)
        have_torch = True
    except ImportError:
        have_torch = False
    rng = np.random.default_rng(0)
    print(f"threads {args.threads}; GFLOP/s where the op has a flop count, else µs per call (median)"
          + ("" if have_torch else "; PyTorch not installed"))
    print(f"{'kernel':<44}{'relax-mlir':>11}{'NumPy':>9}{'PyTorch':>9}")
    for name, shapes, body, ref, kind, flops in matmuls() + convs() + OTHERS:
        vm = VirtualMachine(compile(_fn(shapes, body), num_threads=args.threads))
        arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        torch_fn = _torch_fn(kind)
        check = ref or (lambda *a: torch_fn(*a).numpy()) if (ref or torch_fn) else None
        if check is not None:
            np.testing.assert_allclose(vm["k"](*arrays), check(*arrays), rtol=2e-3, atol=2e-3)
        cells = []
        for fn in (vm["k"], ref, torch_fn):
            if fn is None:
                cells.append("-")
                continue
            time.sleep(0.25)  # the previous framework's worker threads stop spinning
            t = median_seconds(fn, arrays, args.min_seconds)
            cells.append(f"{flops / t / 1e9:.1f}" if flops else f"{t * 1e6:.1f}µs")
        print(f"{name:<44}" + "".join(f"{c:>11}" if i == 0 else f"{c:>9}" for i, c in enumerate(cells)))


if __name__ == "__main__":
    main()
