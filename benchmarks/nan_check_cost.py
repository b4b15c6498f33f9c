"""What ``Trainer(nan_policy="raise")``'s finiteness check costs a training step, against ``nan_policy="ignore"``.

    python benchmarks/nan_check_cost.py [--rounds 15] [--steps 200] [--inputs 784] [--optimizer adam|sgd]

One compiled Adam (or SGD) step of the tutorial's MLP (64 -> 128 -> 128 -> 10, batch 64: 26k parameters, 79k floats of
state to check) run by two Trainers sharing the compiled module, alternately (``--steps`` steps a round), so
drift hits both alike (``--inputs 784``: the MNIST-sized MLP, 118k parameters). Prints the median step of each and the check's cost in percent and microseconds.
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


def _trainers(sizes: tuple[int, ...], optimizer: str) -> dict[str, Trainer]:
    setup = SetupTrainer(CrossEntropyLoss(), Adam(1e-3) if optimizer == "adam" else SGD(1e-3),
                         [TensorStructInfo((BATCH, sizes[-1]), "float32"), TensorStructInfo((BATCH,), "int64")])
    first = Trainer(mlp(BATCH, sizes), 6, setup, nan_policy="ignore").build("cpu")
    second = Trainer(first.mod, nan_policy="raise").build("cpu")  # the same native code (from the compile
    # cache): only the check differs
    for t in (first, second):
        t.xavier_uniform_init_params(0)
    return {"ignore": first, "raise": second}


def _round(trainer: Trainer, batches, steps: int) -> float:
    start = time.perf_counter()
    for i in range(steps):
        trainer.update_params(*batches[i % len(batches)])
    return (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--inputs", type=int, default=64)
    parser.add_argument("--optimizer", choices=("adam", "sgd"), default="adam")
    args = parser.parse_args()
    sizes = (args.inputs, 128, 128, 10)
    rng = np.random.default_rng(0)
    batches = [(rng.normal(size=(BATCH, sizes[0])).astype(np.float32), rng.integers(0, sizes[-1], BATCH))
               for _ in range(8)]
    trainers = _trainers(sizes, args.optimizer)
    times: dict[str, list[float]] = {k: [] for k in trainers}
    for _ in range(args.rounds):
        for name, trainer in trainers.items():
            times[name].append(_round(trainer, batches, args.steps))
    plain, checked = statistics.median(times["ignore"]), statistics.median(times["raise"])
    print(f"step, nan_policy='ignore': {1e6 * plain:8.1f} us (median of {args.rounds} rounds of {args.steps})")
    print(f"step, nan_policy='raise':  {1e6 * checked:8.1f} us")
    print(f"check: {1e6 * (checked - plain):+.1f} us a step, {100 * (checked / plain - 1):+.2f}%")


if __name__ == "__main__":
    main()
