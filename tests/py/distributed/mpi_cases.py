"""Run by the tests under ``mpiexec -n 2`` (not a test module): cases where the ranks' shards or counters differ.

    python mpi_cases.py ignored-shard --out params.npz   # sync batch norm, a mean loss, one shard all ignored
    python mpi_cases.py nan-shard --out report           # a NaN in rank 1's shard: each rank's error message
    python mpi_cases.py step-mismatch --out report       # rank 1's step moved: sync_check_every must raise

``ignored-shard`` trains ``STEPS`` steps and rank 0 writes the parameters, states and every step's loss;
the other two write one JSON file per rank (``report.<rank>.json``) saying what that rank saw.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

CLASSES, IGNORED = 10, 3
STEPS = 3
CNN_BATCH, MLP_BATCH = 16, 16  # global batches


def cnn_setup(batch: int):
    from relax_mlir import TensorStructInfo
    from relax_mlir.training import SetupTrainer
    from relax_mlir.training.loss import CrossEntropyLoss
    from relax_mlir.training.optimizer import SGD

    return SetupTrainer(CrossEntropyLoss(reduction="mean", ignore_index=IGNORED), SGD(0.1),
                        [TensorStructInfo((batch, CLASSES), "float32"), TensorStructInfo((batch,), "int64")])


def cnn_backbone(batch: int):
    from relax_mlir.models import cnn

    return cnn(batch, (1, 8, 8), (4, 8), CLASSES)


def ignored_batches() -> tuple[np.ndarray, np.ndarray]:
    """``STEPS`` global batches whose second half (rank 1's shard on 2 ranks) is all ``IGNORED`` in the first
    and last steps, and the first half in the middle one."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(STEPS, CNN_BATCH, 1, 8, 8)).astype("float32")
    y = rng.integers(0, CLASSES, size=(STEPS, CNN_BATCH))
    half = CNN_BATCH // 2
    y[0, half:] = y[2, half:] = IGNORED
    y[1, :half] = IGNORED
    return x, y


def mlp_setup(batch: int):
    from relax_mlir import TensorStructInfo
    from relax_mlir.training import SetupTrainer
    from relax_mlir.training.loss import CrossEntropyLoss
    from relax_mlir.training.optimizer import SGD

    return SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.1),
                        [TensorStructInfo((batch, CLASSES), "float32"), TensorStructInfo((batch,), "int64")])


def mlp_backbone(batch: int):
    from relax_mlir.models import mlp

    return mlp(batch, (12, 16, CLASSES))


def nan_batch() -> tuple[np.ndarray, np.ndarray]:
    """A global batch whose example 11 (in rank 1's half on 2 ranks) holds a NaN."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(MLP_BATCH, 12)).astype("float32")
    x[11, 3] = np.nan
    return x, rng.integers(0, CLASSES, MLP_BATCH)


def _shard(comm, a: np.ndarray) -> np.ndarray:
    n = len(a) // comm.size
    return a[comm.rank * n:(comm.rank + 1) * n]


def ignored_shard(comm, out: str) -> None:
    from relax_mlir.distributed import DistributedTrainer

    local = CNN_BATCH // comm.size
    trainer = DistributedTrainer(cnn_backbone(local), None, cnn_setup(local), comm=comm, sync_batch_norm=True)
    trainer.build()
    trainer.xavier_uniform_init_params()
    x, y = ignored_batches()
    losses = [float(trainer.update_params(_shard(comm, x[s]), _shard(comm, y[s])).numpy()) for s in range(STEPS)]
    trainer.check_sync()
    if comm.rank == 0:
        arrays = {f"param/{k}": v for k, v in trainer.export_params().items()}
        arrays.update({f"state/{k}": v for k, v in trainer.export_states().items()})
        np.savez(out, losses=np.array(losses), **arrays)


def nan_shard(comm, out: str) -> None:
    from relax_mlir.distributed import DistributedTrainer

    local = MLP_BATCH // comm.size
    trainer = DistributedTrainer(mlp_backbone(local), None, mlp_setup(local), comm=comm, abort_on_error=False)
    trainer.build()
    trainer.xavier_uniform_init_params()
    x, y = nan_batch()
    report = {"raised": None}
    try:
        trainer.update_params(_shard(comm, x), _shard(comm, y))
    except FloatingPointError as exc:
        report = {"raised": type(exc).__name__, "message": str(exc), "batch_index": exc.batch_index,
                  "rank": getattr(exc, "rank", None)}
    with open(f"{out}.{comm.rank}.json", "w") as f:
        json.dump(report, f)


def step_mismatch(comm, out: str) -> None:
    from relax_mlir.distributed import DistributedTrainer

    local = MLP_BATCH // comm.size
    trainer = DistributedTrainer(mlp_backbone(local), None, mlp_setup(local), comm=comm, sync_check_every=2,
                                 abort_on_error=False)
    trainer.build()
    trainer.xavier_uniform_init_params()
    x, y = np.ones((local, 12), "float32"), np.zeros(local, "int64")
    trainer.update_params(x, y)
    if comm.rank == 1:
        trainer.step += 1  # the ranks now disagree on the step, which check_sync compares
    report = {"raised": None}
    try:
        for _ in range(3):
            trainer.update_params(x, y)
    except RuntimeError as exc:
        report = {"raised": type(exc).__name__, "message": str(exc)}
    with open(f"{out}.{comm.rank}.json", "w") as f:
        json.dump(report, f)


def main() -> None:
    from mpi4py import MPI

    parser = argparse.ArgumentParser()
    parser.add_argument("case", choices=["ignored-shard", "nan-shard", "step-mismatch"])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    {"ignored-shard": ignored_shard, "nan-shard": nan_shard, "step-mismatch": step_mismatch}[args.case](
        MPI.COMM_WORLD, args.out)


if __name__ == "__main__":
    main()
