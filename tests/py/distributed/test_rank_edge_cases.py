"""``DistributedTrainer`` under ``mpiexec -n 2`` where the ranks' shards or counters differ: a shard whose targets
are all ignored (synchronized batch norm, mean loss) trains as one process does; a NaN in one rank's shard is named
alike on every rank, by its global batch index; ranks disagreeing on the step make ``sync_check_every`` raise on
every rank instead of deadlocking. The worker is ``mpi_cases.py``.

Tolerance as in test_data_parallel.py (the same sums in another order): rtol 1e-5, atol 1e-5.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from relax_mlir.training import Trainer

from . import mpi_cases
from .mpi_launch import run_mpi

CASES = Path(mpi_cases.__file__)
RTOL = ATOL = 1e-5


def _reports(out: Path) -> list[dict]:
    return [json.loads(Path(f"{out}.{rank}.json").read_text()) for rank in range(2)]


def test_a_shard_whose_targets_are_all_ignored_trains_as_one_process(tmp_path):
    """Sync batch norm with a mean cross-entropy: the rank whose targets are all ``ignore_index`` still shapes
    the batch-norm statistics but adds nothing to the loss (its own mean is 0 / 0). Its scaled mean was 0 x NaN
    and the step raised NonFiniteError (a NaN loss) where one process trains."""
    out = tmp_path / "params.npz"
    run_mpi(2, [sys.executable, str(CASES), "ignored-shard", "--out", str(out)])
    got = np.load(out)
    batch = mpi_cases.CNN_BATCH
    ref = Trainer(mpi_cases.cnn_backbone(batch), None, mpi_cases.cnn_setup(batch)).build()
    ref.xavier_uniform_init_params()
    x, y = mpi_cases.ignored_batches()
    losses = [float(ref.update_params(x[s], y[s]).numpy()) for s in range(mpi_cases.STEPS)]
    np.testing.assert_allclose(got["losses"], losses, rtol=RTOL)
    for name, want in ref.export_params().items():
        np.testing.assert_allclose(got[f"param/{name}"], want, rtol=RTOL, atol=ATOL, err_msg=name)
    for name, want in ref.export_states().items():
        np.testing.assert_allclose(got[f"state/{name}"], want, rtol=RTOL, atol=ATOL, err_msg=name)


def test_a_nan_in_one_shard_is_named_alike_on_every_rank(tmp_path):
    """Every rank's step is non-finite (the sums carry the NaN), so every rank must say where it came from: rank
    0 said its inputs were finite and the step diverged, rank 1 named its own shard's index (3, not 11)."""
    batch = mpi_cases.MLP_BATCH
    ref = Trainer(mpi_cases.mlp_backbone(batch), None, mpi_cases.mlp_setup(batch)).build()
    ref.xavier_uniform_init_params()
    with pytest.raises(FloatingPointError) as one:
        ref.update_params(*mpi_cases.nan_batch())
    assert one.value.batch_index == 11
    out = tmp_path / "report"
    run_mpi(2, [sys.executable, str(CASES), "nan-shard", "--out", str(out)])
    rank0, rank1 = _reports(out)
    assert rank0 == rank1, (rank0, rank1)
    assert rank0["raised"] == "NonFiniteError"
    assert rank0["batch_index"] == one.value.batch_index and rank0["rank"] == 1
    assert "input 'x' of rank 1 holds nan at [3, 3]" in rank0["message"]
    assert "global batch index 11" in rank0["message"] and "diverged" not in rank0["message"]


def test_ranks_disagreeing_on_the_step_raise_on_every_rank(tmp_path):
    """``sync_check_every`` counted each rank's own ``step``: with rank 1's one ahead, rank 1 entered
    check_sync's allgather while rank 0 entered the next step's all-reduce, and the job hung."""
    out = tmp_path / "report"
    run_mpi(2, [sys.executable, str(CASES), "step-mismatch", "--out", str(out)], timeout=90)
    for report in _reports(out):
        assert report["raised"] == "RuntimeError", report
        assert "check_sync: the ranks diverged" in report["message"]
