"""What ``Trainer.update_params`` adds to the compiled step it runs: microseconds a step, by layer.

    python benchmarks/trainer_overhead.py [--rounds 20] [--calls 200] [--inputs 64] [--optimizer sgd|adam]

The tutorial's MLP (``--inputs``-128-128-10, batch 64, summed cross-entropy) compiled once; four ways of running
one step are timed in alternated blocks of ``--calls`` calls (median over all calls):

    native      the compiled function on descriptors already written (no argument handling at all)
    call        ``CompiledFunction(*args, out=buffers)``: the native argument checks, then the call
    scanning    ``CompiledFunction.call_scanning``: the same, plus the NaN/inf scan of what it wrote
    trainer     ``Trainer.update_params(x, y)``: the label check, the call and scan, the buffers' swap

The differences are what each layer costs; the first is the work itself.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from relax_mlir.ir.struct_info import TensorStructInfo
from relax_mlir.models import mlp
from relax_mlir.training import SGD, Adam, CrossEntropyLoss, SetupTrainer, Trainer

BATCH = 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--inputs", type=int, default=64)
    parser.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    args = parser.parse_args()
    opt = SGD(0.01, weight_decay=0.01) if args.optimizer == "sgd" else Adam(0.001)
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), opt,
                         [TensorStructInfo((BATCH, 10), "float32"), TensorStructInfo((BATCH,), "int64")])
    trainer = Trainer(mlp(BATCH, (args.inputs, 128, 128, 10)), 6, setup).build("cpu")
    trainer.xavier_uniform_init_params(0)
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (BATCH, args.inputs)).astype(np.float32)
    y = rng.integers(0, 10, BATCH).astype(np.int64)
    for _ in range(20):
        trainer.update_params(x, y)
    step = trainer._step_fn  # the compiled update_params (static shapes: always there for this model)
    if step is None:
        raise SystemExit("the compiled step does not write into the Trainer's buffers; nothing to compare")
    call_args = (x, *trainer.params, *trainer.states, y, *trainer.optim_state)
    outs = (np.empty((), np.float32), *trainer._reuse_buffers())
    step(*call_args, out=outs)  # writes the descriptors the native variant reuses

    ways = {
        "native": lambda: step._fn(step._argv),
        "call": lambda: step(*call_args, out=outs),
        "scanning": lambda: step.call_scanning(call_args, outs, 1),
        "trainer": lambda: trainer.update_params(x, y),
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, run in ways.items():
            for _ in range(args.calls):
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
    medians = {name: 1e6 * statistics.median(t) for name, t in times.items()}
    print(f"MLP {args.inputs}-128-128-10, batch {BATCH}, {args.optimizer}: median us per step "
          f"({args.rounds} rounds x {args.calls} calls, alternated)")
    previous = None
    for name, us in medians.items():
        added = "" if previous is None else f"   +{us - medians[previous]:6.2f} us over {previous}"
        print(f"  {name:<9}{us:9.2f}{added}")
        previous = name
    total = medians["trainer"] - medians["native"]
    print(f"  the Trainer adds {total:.2f} us to the native step ({100 * total / medians['native']:.1f}%)")


if __name__ == "__main__":
    main()
