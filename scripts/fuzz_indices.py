"""Fuzz the ops that read by a data value: random shapes, axes, modes and index tensors (in and out of range).

    python scripts/fuzz_indices.py N [--seed S]

Each case builds a one-op module (``take`` with a random ``axis``/``mode``, ``grad.take_backward``, or
``nn.nll_loss`` with a random ``ignore_index`` and reduction), compiles it, and calls it with random indices of
which about a third of the cases hold an out-of-range one. The compiled result must equal the reference
interpreter's, or both must raise ``IndexError``. Prints one JSON line per mismatch and a summary line last:
``{"cases": N, "matched": ..., "raised": ..., "mismatches": [...]}``. A crash kills this process: run it in a
subprocess (the test does).
"""

from __future__ import annotations

import argparse
import json

import numpy as np

import relax_mlir
from relax_mlir import op
from relax_mlir.ir import BlockBuilder, TensorStructInfo, Var

MODES = ("fast", "wrap", "clip")


def _indices(rng: np.random.Generator, n: int, shape: tuple, wild: bool, mode: str) -> np.ndarray:
    """Indices valid for an axis of ``n`` under ``mode``; with ``wild``, one far outside."""
    low, high = (-n, n) if mode == "fast" else (-3 * n - 2, 3 * n + 2)
    idx = rng.integers(low, max(high, low + 1), size=shape)
    if wild and idx.size:
        flat = idx.reshape(-1)
        flat[rng.integers(flat.size)] = rng.choice([n, -n - 1, 10 ** 12, -(10 ** 12)])
    return idx.astype(rng.choice([np.int64, np.int32]))


def _case(rng: np.random.Generator):
    """(module, arguments) of one random case."""
    kind = rng.choice(["take", "take_backward", "nll_loss"])
    wild = rng.random() < 0.35
    bb = BlockBuilder()
    if kind == "nll_loss":
        n, c = int(rng.integers(1, 6)), int(rng.integers(1, 7))
        ignore = int(rng.choice([-100, -1, 0]))
        y = rng.integers(0, c, n)
        if wild:
            y[rng.integers(n)] = rng.choice([c, -5, 10 ** 9])
        p, t = Var("p", TensorStructInfo((n, c), "float32")), Var("t", TensorStructInfo((n,), "int64"))
        with bb.function("main", [p, t]):
            bb.emit_func_output(bb.emit(op.nn.nll_loss(p, t, reduction=str(rng.choice(["sum", "mean", "none"])),
                                                       ignore_index=ignore)))
        return bb.get(), [rng.standard_normal((n, c)).astype(np.float32), y.astype(np.int64)]
    shape = tuple(int(s) for s in rng.integers(1, 5, size=int(rng.integers(1, 4))))
    axis = None if rng.random() < 0.2 else int(rng.integers(-len(shape), len(shape)))
    mode = str(rng.choice(MODES))
    n = int(np.prod(shape)) if axis is None else shape[axis]
    ind_shape = tuple(int(s) for s in rng.integers(0 if rng.random() < 0.1 else 1, 4, size=int(rng.integers(0, 3))))
    idx = _indices(rng, n, ind_shape, wild, mode)
    ind = Var("i", TensorStructInfo(ind_shape, str(idx.dtype)))
    if kind == "take":
        x = Var("x", TensorStructInfo(shape, "float32"))
        with bb.function("main", [x, ind]):
            bb.emit_func_output(bb.emit(op.take(x, ind, axis, mode)))
        return bb.get(), [rng.standard_normal(shape).astype(np.float32), idx]
    a = None if axis is None else axis % len(shape)
    g_shape = ind_shape if axis is None else shape[:a] + ind_shape + shape[a + 1:]
    g = Var("g", TensorStructInfo(g_shape, "float32"))
    with bb.function("main", [g, ind]):
        bb.emit_func_output(bb.emit(op.grad.take_backward(g, ind, axis, shape, mode)))
    return bb.get(), [rng.standard_normal(g_shape).astype(np.float32), idx]


def _run(fn, args):
    try:
        return "ok", np.asarray(fn(*args))
    except IndexError as err:
        return "IndexError", str(err)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cases", type=int)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    matched = raised = 0
    mismatches = []
    for case in range(args.cases):
        mod, inputs = _case(rng)
        want = _run(lambda *a: relax_mlir.interpret(mod, "main", *a), inputs)
        got = _run(relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"], inputs)
        same = want[0] == got[0] and (want[0] == "IndexError"
                                      or np.allclose(want[1], got[1], rtol=1e-5, atol=1e-5, equal_nan=True))
        if not same:
            mismatches.append({"case": case, "module": str(mod), "inputs": [np.asarray(a).tolist() for a in inputs],
                               "interpreter": str(want[1]), "compiled": str(got[1])})
            print(json.dumps(mismatches[-1]), flush=True)
        elif want[0] == "IndexError":
            raised += 1
        else:
            matched += 1
    print(json.dumps({"cases": args.cases, "matched": matched, "raised": raised, "mismatches": mismatches}))


if __name__ == "__main__":
    main()
