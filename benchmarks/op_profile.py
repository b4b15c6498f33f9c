"""Where a training step's time goes: every op of its ``update_params``, compiled alone and timed.

    python benchmarks/op_profile.py [--model cnn|mlp] [--image 28] [--batch 64] [--top 25] [--threads N]

Each call of the step (after SetupTrainer) becomes a one-op function with its tensor arguments as parameters,
compiled with the same pipeline, and timed (median of repeated calls). Ops are grouped by op and result type;
the table shows their total, so the schedule that would pay most is at the top. Fusion across ops is not
modelled (a fused pair costs less than its two rows), so the total exceeds the step's time.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time

import numpy as np


def _random(sinfo, rng):
    from relax_mlir.ir.dtype import to_numpy

    dtype = to_numpy(sinfo.dtype)
    shape = tuple(int(d) for d in sinfo.shape)
    if dtype.kind == "f":
        return rng.uniform(0.5, 1.5, shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    return np.zeros(shape, dtype)  # indices and labels: 0 is valid for every op


def one_op_module(call):
    """A module whose ``main`` calls ``call``'s op on parameters of its arguments' struct info (or None)."""
    from relax_mlir.ir import BlockBuilder, TensorStructInfo, Var
    from relax_mlir.ir.expr import Call, Constant

    params, args = [], []
    for i, a in enumerate(call.args):
        if isinstance(a, Constant):
            args.append(a)
            continue
        sinfo = getattr(a, "struct_info", None)
        if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None:
            return None
        v = Var(f"a{i}", sinfo)
        params.append(v)
        args.append(v)
    if not isinstance(call.struct_info, TensorStructInfo):
        return None
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(Call(call.op, args, call.attrs))
        bb.emit_func_output(out)
    return bb.get(), params


def median_call(fn, args, min_seconds: float = 0.05) -> float:
    fn(*args)
    times, total = [], 0.0
    while total < min_seconds or len(times) < 5:
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
        total += times[-1]
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=["cnn", "mlp"], default="cnn")
    parser.add_argument("--image", type=int, default=28)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--hidden", type=int, nargs="+", default=[1024, 1024])
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()

    import relax_mlir
    from relax_mlir.ir.expr import Call
    from relax_mlir.ir.struct_info import TensorStructInfo
    from relax_mlir.ir.visitor import post_order_visit
    from relax_mlir.models import cnn, mlp
    from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer

    b = args.batch
    backbone = cnn(b, (1, args.image, args.image)) if args.model == "cnn" else mlp(b, (args.image ** 2, *args.hidden, 10))
    mod = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.01, weight_decay=0.01),
                       [TensorStructInfo((b, 10), "float32"), TensorStructInfo((b,), "int64")])(backbone)
    calls = []
    post_order_visit(mod["update_params"], lambda e: calls.append(e) if isinstance(e, Call) else None)
    rng = np.random.default_rng(0)
    rows: dict[str, list[float]] = collections.defaultdict(list)
    skipped = 0
    for call in calls:
        built = one_op_module(call)
        if built is None:
            skipped += 1
            continue
        one, params = built
        vm = relax_mlir.VirtualMachine(relax_mlir.compile(one, num_threads=args.threads))
        values = [_random(p.struct_info, rng) for p in params]
        rows[f"{call.op.name} -> {call.struct_info}"].append(median_call(vm["main"], values))
    total = sum(sum(v) for v in rows.values())
    print(f"{args.model} step, batch {b}: {len(calls)} calls ({skipped} not tensor-to-tensor, skipped); "
          f"sum of ops alone {1e3 * total:.2f} ms")
    print(f"{'ms total':>9} {'calls':>5}  op -> result")
    for name, times in sorted(rows.items(), key=lambda kv: -sum(kv[1]))[:args.top]:
        print(f"{1e3 * sum(times):9.3f} {len(times):5d}  {name}")


if __name__ == "__main__":
    main()
