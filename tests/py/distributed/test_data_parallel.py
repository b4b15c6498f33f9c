"""Data-parallel training under ``mpiexec -n 2`` against one process training on the whole batches.

Tolerance: the two ranks sum their halves' gradients and the all-reduce adds the two partial sums, where one
process sums all 64 examples in one reduction; float32 sums in another order differ in their last bits, and
20 steps carry that along. Seen: at most 1.2e-7 absolute on parameters of order 0.1-1; allowed: rtol 1e-5,
atol 1e-5, which a step with a wrongly scaled or missing gradient misses by orders of magnitude.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from relax_mlir.training import Trainer

from . import mpi_worker
from .mpi_launch import run_mpi

WORKER = Path(mpi_worker.__file__)
RTOL = ATOL = 1e-5


def one_process(model: str, optimizer: str, reduction: str) -> tuple[Trainer, float]:
    """The oracle: a plain Trainer on the whole global batches, same initial parameters and data."""
    backbone = mpi_worker.make_backbone(model, mpi_worker.GLOBAL_BATCH)
    trainer = Trainer(backbone, int(backbone.attrs["param_num"]),
                      mpi_worker.make_setup(mpi_worker.GLOBAL_BATCH, optimizer, reduction)).build()
    trainer.xavier_uniform_init_params(seed=0)
    x, y = mpi_worker.batches(model)
    loss = None
    for step in range(mpi_worker.STEPS):
        loss = trainer.update_params(x[step], y[step])
    return trainer, float(loss.numpy())


@pytest.mark.parametrize("model,optimizer,reduction", [("mlp", "sgd", "sum"), ("mlp", "adam", "mean"),
                                                       ("cnn", "sgd", "sum"), ("cnn", "adam", "mean")])
def test_two_ranks_match_one_process(tmp_path, model, optimizer, reduction):
    """The CNN's batch norm runs with synchronized statistics: with per-rank ones the result would differ."""
    out = tmp_path / "params.npz"
    sync = ["--sync-bn"] if model == "cnn" else []
    run_mpi(2, [sys.executable, str(WORKER), "train", "--model", model, "--optimizer", optimizer,
                "--reduction", reduction, "--out", str(out), *sync])
    got = np.load(out)
    ref, ref_loss = one_process(model, optimizer, reduction)
    for name, want in ref.export_params().items():
        np.testing.assert_allclose(got[f"param/{name}"], want, rtol=RTOL, atol=ATOL, err_msg=name)
    for name, want in ref.export_states().items():  # running statistics, from the global batch's
        np.testing.assert_allclose(got[f"state/{name}"], want, rtol=RTOL, atol=ATOL, err_msg=name)
    # The loss each rank returns is the global batch's, not its half's.
    np.testing.assert_allclose(float(got["loss"]), ref_loss, rtol=RTOL)
    # The parameters moved: a job that skipped the optimizer would fail the comparison above, not this one.
    first = next(iter(ref.export_params()))
    assert not np.allclose(got[f"param/{first}"], _initial(model)[first])


def _initial(model: str) -> dict:
    backbone = mpi_worker.make_backbone(model, mpi_worker.GLOBAL_BATCH)
    trainer = Trainer(backbone, int(backbone.attrs["param_num"]),
                      mpi_worker.make_setup(mpi_worker.GLOBAL_BATCH, "sgd", "sum"))
    trainer.xavier_uniform_init_params(seed=0)
    return trainer.export_params()


@pytest.mark.parametrize("how", ["kill", "raise"])
def test_a_failing_rank_ends_the_job(how):
    """Rank 1 dies (SIGKILL) or raises at step 3 while rank 0 waits in its all-reduce: the job must end with
    an error, not hang (run_mpi's timeout turns a hang into a failure)."""
    result = run_mpi(2, [sys.executable, str(WORKER), "fail", "--how", how], check=False)
    assert result.returncode != 0
    if how == "raise":
        assert "rank 1 fails on purpose" in result.stderr and "aborting the MPI job" in result.stderr
