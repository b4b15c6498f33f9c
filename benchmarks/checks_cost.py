"""What the runtime index checks cost a training step: the same step compiled with and without them, alternated.

    python benchmarks/checks_cost.py [--rounds 15] [--steps 50]

Three workloads, each a ``Trainer`` step (summed cross-entropy, SGD) whose checked ops are ``nll_loss`` and its
backward op (every step), and for ``embedding`` also ``take`` and ``take_backward`` on a 5000-row table:

    mlp-digits   64 -> 128 -> 128 -> 10, batch 64 (the tutorial's MLP)
    mlp-mnist    784 -> 128 -> 128 -> 10, batch 64
    embedding    take(5000 x 64 table, 64 x 16 ids), mean over the 16, dense 64 -> 10, batch 64

Both builds live in one process and run alternately (``--steps`` steps a round), so drift hits them alike. The
report gives the median step of each and the checks' cost in percent (the target is under 2%).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from relax_mlir.ir.struct_info import TensorStructInfo
from relax_mlir.models import mlp
from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer, Trainer

BATCH, CLASSES, ROWS, WIDTH, IDS = 64, 10, 5000, 64, 16

EMBEDDING = f'''
@I.ir_module
class Module:
    I.module_attrs({{"param_num": 3, "state_num": 0}})

    @R.function
    def backbone(ids: R.Tensor(({BATCH}, {IDS}), "int64"), table: R.Tensor(({ROWS}, {WIDTH}), "float32"),
                 w: R.Tensor(({WIDTH}, {CLASSES}), "float32"), b: R.Tensor(({CLASSES},), "float32")):
        with R.dataflow():
            rows = R.take(table, ids, axis=0)
            pooled = R.mean(rows, axis=1)
            out = R.add(R.matmul(pooled, w), b)
            R.output(out)
        return out
'''


def workload(name: str, rng: np.random.Generator):
    """(backbone module, initial parameters, batch) of a workload."""
    if name == "embedding":
        from relax_mlir.script import from_source

        params = [rng.standard_normal((ROWS, WIDTH)).astype(np.float32) * 0.1,
                  rng.standard_normal((WIDTH, CLASSES)).astype(np.float32) * 0.1, np.zeros(CLASSES, np.float32)]
        return from_source(EMBEDDING), params, [rng.integers(0, ROWS, (BATCH, IDS)).astype(np.int64)]
    sizes = (64, 128, 128, CLASSES) if name == "mlp-digits" else (784, 128, 128, CLASSES)
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        params += [rng.uniform(-0.1, 0.1, (fan_in, fan_out)).astype(np.float32), np.zeros(fan_out, np.float32)]
    return mlp(BATCH, sizes), params, [rng.uniform(0, 1, (BATCH, sizes[0])).astype(np.float32)]


def trainer(backbone, params, checks: bool) -> Trainer:
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.01),
                         [TensorStructInfo((BATCH, CLASSES), "float32"), TensorStructInfo((BATCH,), "int64")])
    t = Trainer(backbone, len(params), setup).build(checks=checks)
    t.load_params([p.copy() for p in params])
    return t


def measure(name: str, rounds: int, steps: int) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    backbone, params, inputs = workload(name, rng)
    labels = rng.integers(0, CLASSES, BATCH).astype(np.int64)
    builds = {checks: trainer(backbone, params, checks) for checks in (True, False)}
    times: dict[bool, list[float]] = {True: [], False: []}
    for t in builds.values():
        for _ in range(steps):  # warm up
            t.update_params(*inputs, labels)
    for r in range(rounds):
        for checks in ((True, False) if r % 2 == 0 else (False, True)):
            t = builds[checks]
            for _ in range(steps):
                start = time.perf_counter()
                t.update_params(*inputs, labels)
                times[checks].append(time.perf_counter() - start)
    return statistics.median(times[True]) * 1e3, statistics.median(times[False]) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--only", default="mlp-digits,mlp-mnist,embedding")
    args = parser.parse_args()
    print(f"{'workload':12} {'checks on ms':>13} {'checks off ms':>14} {'cost':>8}")
    for name in args.only.split(","):
        on, off = measure(name, args.rounds, args.steps)
        print(f"{name:12} {on:13.4f} {off:14.4f} {100 * (on - off) / off:7.2f}%   (target < 2%)")


if __name__ == "__main__":
    main()
