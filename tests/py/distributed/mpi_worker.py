"""Run by the tests under ``mpiexec -n K`` (not a test module): data-parallel training of a small model on
fixed random batches, or a job in which one rank fails.

    python mpi_worker.py train --model mlp|cnn --optimizer sgd|adam --reduction sum|mean [--sync-bn] --out params.npz
    python mpi_worker.py fail --how kill|raise

``train`` runs ``STEPS`` steps on a global batch of ``GLOBAL_BATCH`` split over the ranks; rank 0 writes the
parameters and states (``param/<name>``, ``state/<name>``) and the last loss to ``--out``.
"""

from __future__ import annotations

import argparse
import os
import signal

import numpy as np

GLOBAL_BATCH, STEPS, CLASSES = 64, 20, 10


def batches(model: str) -> tuple[np.ndarray, np.ndarray]:
    """``STEPS`` global batches of inputs and labels, the same in every process."""
    rng = np.random.default_rng(1)
    shape = (STEPS, GLOBAL_BATCH, 48) if model == "mlp" else (STEPS, GLOBAL_BATCH, 1, 8, 8)
    return rng.normal(size=shape).astype("float32"), rng.integers(0, CLASSES, size=(STEPS, GLOBAL_BATCH))


def make_setup(batch: int, optimizer: str, reduction: str):
    from relax_mlir import TensorStructInfo
    from relax_mlir.training import SetupTrainer
    from relax_mlir.training.loss import CrossEntropyLoss
    from relax_mlir.training.optimizer import SGD, Adam

    opt = SGD(0.01, weight_decay=0.01) if optimizer == "sgd" else Adam(0.01, weight_decay=0.01)
    return SetupTrainer(CrossEntropyLoss(reduction=reduction), opt,
                        [TensorStructInfo((batch, CLASSES), "float32"), TensorStructInfo((batch,), "int64")])


def make_backbone(model: str, batch: int):
    from relax_mlir.models import cnn, mlp

    return mlp(batch, (48, 32, CLASSES)) if model == "mlp" else cnn(batch, (1, 8, 8), (4, 8), CLASSES)


def train(args, trainer_class, **kwargs):
    """Train on this rank's shard of every global batch; returns the trainer and the last loss."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    local = GLOBAL_BATCH // comm.size
    backbone = make_backbone(args.model, local)
    trainer = trainer_class(backbone, int(backbone.attrs["param_num"]), make_setup(local, args.optimizer,
                                                                                   args.reduction), **kwargs)
    trainer.build()
    # Only rank 0's initial parameters count: the others start elsewhere and must be overwritten.
    trainer.xavier_uniform_init_params(seed=0 if comm.rank == 0 else 100 + comm.rank)
    x, y = batches(args.model)
    lo, hi = comm.rank * local, (comm.rank + 1) * local
    loss = None
    for step in range(STEPS):
        if args.command == "fail" and step == 3 and comm.rank == 1:
            if args.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError("rank 1 fails on purpose at step 3")
        loss = trainer.update_params(x[step, lo:hi], y[step, lo:hi])
    return trainer, float(loss.numpy())


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train")
    t.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    t.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    t.add_argument("--reduction", choices=["sum", "mean"], default="sum")
    t.add_argument("--sync-bn", action="store_true", help="synchronized batch-norm statistics")
    t.add_argument("--out", required=True)
    f = sub.add_parser("fail")
    f.add_argument("--how", choices=["kill", "raise"], required=True)
    args = parser.parse_args()
    if args.command == "fail":
        args.model, args.optimizer, args.reduction, args.sync_bn = "mlp", "sgd", "sum", False
    from relax_mlir.distributed import DistributedTrainer

    trainer, loss = train(args, DistributedTrainer, sync_batch_norm=args.sync_bn)
    trainer.check_sync()
    if trainer.rank == 0:
        arrays = {f"param/{k}": v for k, v in trainer.export_params().items()}
        arrays.update({f"state/{k}": v for k, v in trainer.export_states().items()})
        np.savez(args.out, loss=np.array(loss), **arrays)


if __name__ == "__main__":
    main()
