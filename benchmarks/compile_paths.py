"""Step time of one training step compiled three ways, alternated in one process: native compilation with kernel
outlining (the default), MLIR's ExecutionEngine with outlining, and the ExecutionEngine without it.

    python benchmarks/compile_paths.py [--only mlp-wide,cnn-28] [--rounds 9]

Workloads are ``train_step.py``'s. Prints the median and minimum ms per step of each. The three must agree to the
run-to-run spread: outlining and native compilation exist for compile time (``compile_time.py``), not speed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_step import CHANNELS, CLASSES, LR, WD, WORKLOADS, make_data  # noqa: E402

VARIANTS = {"native, outlined": ("1", True), "engine, outlined": ("0", True), "engine, inline": ("0", False)}


def _trainer(name: str, data: dict, native: str, outline: bool):
    from relax_mlir.backend import VirtualMachine, compile
    from relax_mlir.backend.pipeline import PipelineOptions
    from relax_mlir.ir.struct_info import TensorStructInfo
    from relax_mlir.models import cnn, mlp
    from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer, Trainer

    kind, batch, shape = WORKLOADS[name]
    os.environ["RELAX_MLIR_NATIVE"] = native
    backbone = mlp(batch, shape) if kind == "mlp" else cnn(batch, shape, CHANNELS, CLASSES)
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(LR, weight_decay=WD),
                         [TensorStructInfo((batch, CLASSES), "float32"), TensorStructInfo((batch,), "int64")])
    trainer = Trainer(backbone, len(data["params"]), setup)
    trainer.vm = VirtualMachine(compile(trainer._used_functions(), options=PipelineOptions(outline=outline)))
    trainer.load_params([p.copy() for p in data["params"]])
    if data["states"]:
        trainer.load_states([s.copy() for s in data["states"]])
    return trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="mlp-digits,mlp-wide,cnn-8,cnn-28")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    os.environ["RELAX_MLIR_CACHE"] = "0"  # every variant compiled here, none loaded from the disk cache
    for name in args.only.split(","):
        data = make_data(name)
        trainers = {v: _trainer(name, data, *how) for v, how in VARIANTS.items()}
        steps = 10 if WORKLOADS[name][0] == "cnn" or name == "mlp-wide" else 200
        times: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for _ in range(args.rounds):
            for v, trainer in trainers.items():
                trainer.update_params(data["x"], data["y"])
                start = time.perf_counter()
                for _ in range(steps):
                    trainer.update_params(data["x"], data["y"])
                times[v].append((time.perf_counter() - start) / steps * 1e3)
        print(f"{name}: " + "  ".join(f"{v} {statistics.median(t):.3f} ms (min {min(t):.3f})"
                                      for v, t in times.items()))


if __name__ == "__main__":
    main()
