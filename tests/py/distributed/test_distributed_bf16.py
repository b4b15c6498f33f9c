"""bfloat16 (and float16) data parallelism under ``mpiexec -n 2``, against one process training on the global batches.

``DistributedTrainer`` refused bfloat16 models: mpi4py takes no ml_dtypes bfloat16 buffer, for the all-reduce of the
gradients nor for the broadcast of rank 0's parameters. Now the 2-byte floats are weighted, summed and divided in
float32 and rounded once (``comm.wire_dtype``), and broadcast as their bits.

Oracle and tolerance: one process on the global batches, and the same run in float32 (same initial parameters
and inputs, rounded to the low precision). One process rounds its gradient of the global batch once; two ranks
round each half's gradient, then the float32 sum of the two. Those differences are of the size of every other
rounding of a low-precision step (the forward pass, the backward pass, each parameter), and training carries them
along chaotically: after ``STEPS`` steps the job and one process differ, entry by entry, by as much as either
differs from the float32 run (seen: the same, up to 300 ulps on entries near 0). So the test compares distances to
the float32 run: per array, the job's root-mean-square distance is at most 1.5 times one process's (seen: 0.9 to 1.2
times). Training that lost a rank's half of every batch is more than 4.5 times farther (checked below).

With synchronized batch norm (a CNN) the statistics are summed over the ranks in float32, as one process's batch
norm computes them; summed in bfloat16 they ended 2 to 13 times farther from the float32 run than one process's.
Those cases run 3 steps, not 12: rounding each rank's gradient before the sum moves a channel's beta or gamma by an
ulp or two where the halves cancel, and 9 to 12 chaotic steps grew that to 2 to 6 times one process's distance on
these 4-entry arrays (seen: one process's bn0_gamma went from 40 ulps off the float32 run's at step 11 to 16 at step
12, the job's from 51 to 29). After 3 steps the job is within 1.1 times, summing in bfloat16 it was beyond 3.5 times.

This file is also the job's script: ``python test_distributed_bf16.py --optimizer sgd|adam --reduction sum|mean
--dtype bfloat16|float16 [--model mlp|cnn] [--sync-bn] [--steps N] --out params.npz``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

GLOBAL_BATCH, STEPS, CLASSES, LR = 64, 12, 10, 0.01
MANTISSA = {"bfloat16": 7, "float16": 10}


def batches(model: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    shape = (STEPS, GLOBAL_BATCH, 48) if model == "mlp" else (STEPS, GLOBAL_BATCH, 1, 8, 8)
    return rng.normal(size=shape).astype(np.float32), rng.integers(0, CLASSES, size=(STEPS, GLOBAL_BATCH))


def make_trainer(trainer_class, model: str, batch: int, optimizer: str, reduction: str, dtype: str, **kwargs):
    from relax_mlir import TensorStructInfo
    from relax_mlir.models import cnn, mlp
    from relax_mlir.training import SetupTrainer
    from relax_mlir.training.loss import CrossEntropyLoss
    from relax_mlir.training.optimizer import SGD, Adam

    backbone = mlp(batch, (48, 32, CLASSES), dtype) if model == "mlp" else cnn(batch, (1, 8, 8), (4, 8), CLASSES,
                                                                                 dtype)
    opt = SGD(LR, weight_decay=0.01) if optimizer == "sgd" else Adam(LR, weight_decay=0.01)
    setup = SetupTrainer(CrossEntropyLoss(reduction=reduction), opt,
                         [TensorStructInfo((batch, CLASSES), dtype), TensorStructInfo((batch,), "int64")])
    return trainer_class(backbone, int(backbone.attrs["param_num"]), setup, **kwargs).build()


def run(args) -> None:
    """The job: train on this rank's shard of every global batch; rank 0 writes parameters and states (as float32,
    exactly) and the last loss."""
    from mpi4py import MPI

    from relax_mlir.distributed import DistributedTrainer
    from relax_mlir.ir.dtype import to_numpy

    comm = MPI.COMM_WORLD
    local = GLOBAL_BATCH // comm.size
    trainer = make_trainer(DistributedTrainer, args.model, local, args.optimizer, args.reduction, args.dtype,
                           sync_batch_norm=args.sync_bn)
    # Only rank 0's initial parameters count (broadcast as bits): the others start elsewhere.
    trainer.xavier_uniform_init_params(seed=0 if comm.rank == 0 else 100 + comm.rank)
    x, y = batches(args.model)
    lo, hi = comm.rank * local, (comm.rank + 1) * local
    for step in range(args.steps):
        loss = trainer.update_params(x[step, lo:hi].astype(to_numpy(args.dtype)), y[step, lo:hi])
    assert loss.dtype == to_numpy(args.dtype) and trainer.params[0].dtype == to_numpy(args.dtype)
    trainer.check_sync()
    if trainer.rank == 0:
        arrays = {f"param/{k}": v.astype(np.float32) for k, v in trainer.export_params().items()}
        arrays.update({f"state/{k}": v.astype(np.float32) for k, v in trainer.export_states().items()})
        np.savez(args.out, loss=np.array(float(loss)), **arrays)


# -- the tests ------------------------------------------------------------------------------------------------------
def one_process(model: str, optimizer: str, reduction: str, dtype: str, rounded: str, start=None,
                rows: int = GLOBAL_BATCH, steps: int = STEPS):
    """A plain Trainer in ``dtype`` on the first ``rows`` examples of each of the first ``steps`` global batches
    (all of them: the oracle), from rank 0's initial parameters (or ``start``), the inputs rounded to ``rounded``
    as the job's are. Returns the parameters and states (as float32) and the last loss."""
    from relax_mlir.ir.dtype import to_numpy
    from relax_mlir.training import Trainer

    trainer = make_trainer(Trainer, model, rows, optimizer, reduction, dtype)
    trainer.xavier_uniform_init_params(seed=0)
    if start is not None:
        trainer.load_params(start)
    x, y = batches(model)
    for step in range(steps):
        loss = trainer.update_params(x[step, :rows].astype(to_numpy(rounded)).astype(to_numpy(dtype)), y[step, :rows])
    arrays = {f"param/{k}": v.astype(np.float32) for k, v in trainer.export_params().items()}
    arrays.update({f"state/{k}": v.astype(np.float32) for k, v in trainer.export_states().items()})
    return arrays, float(loss)


def initial_params(model: str, dtype: str) -> dict:
    """Rank 0's initial parameters in ``dtype``, as float32 (exactly)."""
    from relax_mlir.training import Trainer

    trainer = make_trainer(Trainer, model, GLOBAL_BATCH, "sgd", "sum", dtype)
    trainer.xavier_uniform_init_params(seed=0)
    return {k: v.astype(np.float32) for k, v in trainer.export_params().items()}


def ulp(x: np.ndarray, dtype: str) -> np.ndarray:
    """The spacing of ``dtype`` at ``|x|`` (normal numbers)."""
    exponent = np.floor(np.log2(np.maximum(np.abs(x.astype(np.float64)), 2.0 ** -126)))
    return 2.0 ** (exponent - MANTISSA[dtype])


def rms(a: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(a.astype(np.float64)))))


def errors(arrays: dict, reference: dict) -> dict:
    """Each array's root-mean-square distance to the float32 reference's."""
    return {k: rms(arrays[k] - reference[k]) for k in reference}


# (model, optimizer, reduction, dtype, sync_batch_norm, steps); the synchronized batch norm's cases run fewer steps
# (see the module docstring). Not here: a float16 CNN with Adam, whose one-process run itself ends 2 to 4 times its
# weights' size from the float32 run's (conv1_weight 0.62 RMS apart, its RMS 0.28): no reference to compare with.
CASES = [("mlp", "sgd", "sum", "bfloat16", False, STEPS), ("mlp", "adam", "mean", "bfloat16", False, STEPS),
         ("mlp", "adam", "mean", "float16", False, STEPS), ("cnn", "adam", "mean", "bfloat16", True, 3),
         ("cnn", "sgd", "sum", "float16", True, 3)]


def _run_job(tmp_path, model, optimizer, reduction, dtype, sync, steps=STEPS):
    from .mpi_launch import run_mpi

    out = tmp_path / "params.npz"
    run_mpi(2, [sys.executable, str(Path(__file__)), "--model", model, "--optimizer", optimizer, "--reduction",
                reduction, "--dtype", dtype, "--steps", str(steps), "--out", str(out),
                *(["--sync-bn"] if sync else [])])
    return dict(np.load(out))


def _references(model, optimizer, reduction, dtype, steps=STEPS):
    """The one-process run in ``dtype`` and the float32 run from the same (rounded) start on the same inputs."""
    half, half_loss = one_process(model, optimizer, reduction, dtype, dtype, steps=steps)
    start = initial_params(model, dtype)
    full, full_loss = one_process(model, optimizer, reduction, "float32", dtype, start, steps=steps)
    return half, half_loss, full, full_loss, start


def test_bfloat16_and_float16_two_ranks_match_one_process(tmp_path):
    """Each case in one job after the other (a job starts two interpreters and compiles twice: ~10 s). The job's
    distance to the float32 run is at most 1.5 times the one-process run's (seen: 0.9 to 1.2 times), per array."""
    for model, optimizer, reduction, dtype, sync, steps in CASES:
        what = f"{model} {optimizer} {reduction} {dtype}{' sync-bn' if sync else ''}"
        got = _run_job(tmp_path, model, optimizer, reduction, dtype, sync, steps)
        half, half_loss, full, full_loss, start = _references(model, optimizer, reduction, dtype, steps)
        ours, theirs = errors(got, full), errors(half, full)
        for k in full:
            assert ours[k] <= 1.5 * theirs[k] + 1e-6, \
                f"{what}: {k} is {ours[k]:.3g} from the float32 run's, one process's {theirs[k]:.3g}"
        moved = [np.mean(got[f"param/{k}"] != v) for k, v in start.items()]
        assert min(moved) > 0.5, f"{what}: parameters did not move ({moved})"
        # the loss each rank returns is the global batch's: as close to the float32 run's as one process's is
        bound = 1.5 * abs(half_loss - full_loss) + 2 * ulp(np.array(full_loss), dtype)
        assert abs(got["loss"] - full_loss) <= bound, (what, float(got["loss"]), half_loss, full_loss)


def test_the_tolerance_sees_a_lost_half():
    """The bound separates: training that lost one rank's half of every batch (one process on the first 32
    examples: the mean a rank that skipped the all-reduce would use) ends more than 3 times as far from the float32
    run as the bound allows, on every array."""
    half, _, full, _, _ = _references("mlp", "adam", "mean", "bfloat16")
    lost, _ = one_process("mlp", "adam", "mean", "bfloat16", "bfloat16", rows=GLOBAL_BATCH // 2)
    ours, theirs = errors(lost, full), errors(half, full)
    assert all(ours[k] > 3 * 1.5 * theirs[k] for k in full), (ours, theirs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    parser.add_argument("--optimizer", choices=["sgd", "adam"], required=True)
    parser.add_argument("--reduction", choices=["sum", "mean"], required=True)
    parser.add_argument("--dtype", choices=["bfloat16", "float16"], required=True)
    parser.add_argument("--sync-bn", action="store_true")
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--out", required=True)
    run(parser.parse_args())


if __name__ == "__main__":
    main()
