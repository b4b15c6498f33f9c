"""A/B of a compiler change on one training step: variants built side by side in one process, rounds alternated.

    python benchmarks/ab_step.py mlp-digits \\
        'import relax_mlir.backend.schedule.matmul as m; m.PAD_N = False' \\
        'import relax_mlir.backend.schedule.matmul as m; m.PAD_N = True' [--rounds 15] [--steps 30] [--optimizer adam|momentum]

Each variant is Python run just before its step is built (the disk cache is off and the in-process cache cleared,
so every variant compiles): set a schedule's switch or threshold, wrap a function. Variants run in the order
given and what one sets stays set, so each should set everything it relies on (the baseline first, stating its
values). The steps are ``train_step.py``'s (its workloads, data and optimizers); every round runs three untimed
steps per variant, then ``--steps`` timed ones. Printed: median and min ms per step of each variant, and its ratio
to the first. The session notes' "A/B in one process" figures are measured this way: far steadier than separate
runs on a shared machine, where the figures move by 10-30% between runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ["RELAX_MLIR_CACHE"] = "0"  # every variant compiles: a cached library would ignore the variant's change
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_step  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=sorted(train_step.WORKLOADS))
    parser.add_argument("variants", nargs="+", help="Python statements run before each variant's build")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--optimizer", choices=("sgd", "adam", "momentum"), default="sgd")
    args = parser.parse_args()
    train_step.OPTIMIZER = args.optimizer

    from relax_mlir.backend.build import clear_cache

    data = train_step.make_data(args.workload)
    steps = []
    for code in args.variants:
        exec(compile(code, "<variant>", "exec"), {})
        clear_cache()
        start = time.perf_counter()
        steps.append(train_step.relax_step(args.workload, data, args.threads))
        print(f"built in {time.perf_counter() - start:.2f} s: {code}")
    times: list[list[float]] = [[] for _ in steps]
    for _ in range(args.rounds):
        for step, seen in zip(steps, times):
            for _ in range(3):
                step()
            for _ in range(args.steps):
                start = time.perf_counter()
                step()
                seen.append(time.perf_counter() - start)
    first = statistics.median(times[0])
    for code, seen in zip(args.variants, times):
        median = statistics.median(seen)
        print(f"{1e3 * median:9.4f} ms  min {1e3 * min(seen):.4f}  x{median / first:.3f}  {code}")


if __name__ == "__main__":
    main()
