"""Steps per second: one process with 2 threads against 2 MPI ranks with 1 thread each, same global batch.

    python benchmarks/distributed_step.py [--rounds 3] [--steps 30] [--only mlp-wide,cnn-28]

Workloads (summed cross-entropy, SGD 0.01 with weight decay 0.01, random data):

    mlp-wide   1024 -> 1024 -> 1024 -> 10, global batch 256 (8.4 MB of float32 parameters)
    cnn-28     relax_mlir.models.cnn, channels 8, 16, on 1x28x28, global batch 64

Each configuration runs in fresh processes (``mpiexec -n 2`` for the ranks), alternated for ``--rounds``
rounds; each prints the median step time of its ``--steps`` steps after 5 warm-up steps, and the median time
of the all-reduce alone on a buffer of the gradients' size. The parent prints the medians over rounds and the
ratio. The cores are shared: other processes running at the same time (other users, other agents) move the
figures, so compare rows measured together.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

WORKLOADS = {"mlp-wide": ("mlp", 256, (1024, 1024, 1024, 10)), "cnn-28": ("cnn", 64, (1, 28, 28))}
REPO = Path(__file__).resolve().parents[1]


def build(name: str, ranks: int):
    """A trainer (distributed when ``ranks`` > 1) on this rank's part of the workload's global batch."""
    from relax_mlir import TensorStructInfo
    from relax_mlir.models import cnn, mlp
    from relax_mlir.training import SetupTrainer, Trainer
    from relax_mlir.training.loss import CrossEntropyLoss
    from relax_mlir.training.optimizer import SGD

    kind, batch, shape = WORKLOADS[name]
    local = batch // ranks
    backbone = mlp(local, shape) if kind == "mlp" else cnn(local, shape, (8, 16), 10)
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.01, weight_decay=0.01),
                         [TensorStructInfo((local, 10), "float32"), TensorStructInfo((local,), "int64")])
    if ranks > 1:
        from relax_mlir.distributed import DistributedTrainer

        trainer = DistributedTrainer(backbone, int(backbone.attrs["param_num"]), setup)
    else:
        trainer = Trainer(backbone, int(backbone.attrs["param_num"]), setup)
    trainer.build()
    trainer.xavier_uniform_init_params()
    rng = np.random.default_rng(0)
    in_shape = (local, shape[0]) if kind == "mlp" else (local, *shape)
    return trainer, rng.uniform(0, 1, in_shape).astype(np.float32), rng.integers(0, 10, local)


def worker(name: str, ranks: int, steps: int) -> None:
    trainer, x, y = build(name, ranks)
    for _ in range(5):
        trainer.update_params(x, y)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        trainer.update_params(x, y)
        times.append(time.perf_counter() - t0)
    result = {"step_ms": 1e3 * statistics.median(times)}
    n = sum(p.size for p in trainer.params)
    result["param_bytes"] = 4 * n
    if ranks > 1:
        from relax_mlir.distributed.comm import allreduce_in_place

        buf, reduce_times = np.ones(n + 1, np.float32), []
        for _ in range(steps):
            t0 = time.perf_counter()
            allreduce_in_place(trainer.comm, buf, trainer.bucket_elems)
            reduce_times.append(time.perf_counter() - t0)
        result["allreduce_ms"] = 1e3 * statistics.median(reduce_times)
        if trainer.rank:
            return
    print(json.dumps(result))


def run(name: str, ranks: int, steps: int) -> dict:
    threads = str(2 // ranks)
    env = dict(os.environ, RELAX_MLIR_NUM_THREADS=threads, OMP_NUM_THREADS=threads,
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    command = [sys.executable, __file__, "--worker", name, "--ranks", str(ranks), "--steps", str(steps)]
    if ranks > 1:
        mpiexec = Path(sys.executable).parent / "mpiexec"
        # --oversubscribe only when it must: it makes waiting ranks yield the core, which costs
        # milliseconds per all-reduce (8.8 ms instead of 1.4 ms for 8.4 MB here).
        extra = ["--oversubscribe"] if (os.cpu_count() or 1) < ranks else []
        command = [str(mpiexec) if mpiexec.exists() else "mpiexec", "-n", str(ranks), *extra, *command]
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True, timeout=900).stdout
    return json.loads(out.strip().splitlines()[-1])


#: A ring all-reduce's per-message latency (TCP over Ethernet; RDMA is nearer 2 us): the cost model's alpha.
LATENCY_S = 10e-6


def ring_allreduce_s(nbytes: float, machines: int, gbit_per_s: float) -> float:
    """A ring all-reduce: 2(K-1) messages of bytes/K each way, so 2(K-1)/K x bytes over the link, plus latency."""
    k = machines
    return 2 * (k - 1) / k * nbytes / (gbit_per_s * 1e9 / 8) + 2 * (k - 1) * LATENCY_S


def projection(name: str, nbytes: float, step_ms: float) -> list[str]:
    """Table rows: the all-reduce time and the step time on 8 and 64 machines like this one, for a global
    batch split K ways (compute / K) and for a per-machine batch kept (compute as now)."""
    rows = []
    for gbit in (10, 100):
        for k in (8, 64):
            ar = 1e3 * ring_allreduce_s(nbytes, k, gbit)
            rows.append(f"| {name} | {gbit} Gb/s | {k} | {ar:.3f} | {step_ms / k + ar:.3f} | {step_ms + ar:.2f} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--only", default=",".join(WORKLOADS))
    parser.add_argument("--worker")
    parser.add_argument("--ranks", type=int, default=1)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.ranks, args.steps)
    projected: list[str] = []
    print("| workload | parameters | 1 rank x 2 threads: ms/step (steps/s) | 2 ranks x 1 thread: ms/step (steps/s) "
          "| all-reduce alone, ms | 2 ranks / 1 rank, steps/s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.only.split(","):
        rounds = {1: [], 2: []}
        for _ in range(args.rounds):
            for ranks in (1, 2):
                rounds[ranks].append(run(name, ranks, args.steps))
        one = statistics.median(r["step_ms"] for r in rounds[1])
        two = statistics.median(r["step_ms"] for r in rounds[2])
        reduce_ms = statistics.median(r["allreduce_ms"] for r in rounds[2])
        mb = rounds[1][0]["param_bytes"] / 1e6
        print(f"| {name} | {mb:.2f} MB | {one:.2f} ({1e3 / one:.1f}) | {two:.2f} ({1e3 / two:.1f}) | "
              f"{reduce_ms:.3f} | {one / two:.2f} |", flush=True)
        projected += projection(name, rounds[1][0]["param_bytes"], one)
    print("\n| workload | network | machines K | ring all-reduce, ms | step, global batch split K ways, ms "
          "| step, per-machine batch kept, ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    print("\n".join(projected))


if __name__ == "__main__":
    main()
