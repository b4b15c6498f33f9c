"""``relax-mlir train`` under ``mpiexec -n 2``: checkpoints move between 1 and 2 ranks (same global batch),
rank 0 alone reports, and a global batch the ranks cannot split is refused by name.

Tolerance as in test_data_parallel.py: two ranks add their halves' gradients in another order than one
process (last-bit differences over 44 steps); rtol 1e-4 / atol 1e-5 on parameters of order 0.1.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from .mpi_launch import mpi_env, run_mpi

TRAIN = [sys.executable, "-m", "relax_mlir.cli", "train", "--hidden", "32", "--no-progress"]


def one_process(args: list[str]) -> subprocess.CompletedProcess:
    result = subprocess.run(TRAIN + args, env=mpi_env(), capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    return result


def params(path) -> dict[str, np.ndarray]:
    with np.load(path) as f:
        return {k: f[k] for k in f.files if k.startswith(("param/", "optim/"))} | {"step": f["step"]}


def assert_close(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5, err_msg=k)


def test_checkpoints_move_between_one_and_two_ranks(tmp_path):
    ref, a, b = tmp_path / "ref.npz", tmp_path / "a.npz", tmp_path / "b.npz"
    one_process(["--epochs", "2", "--save", str(ref)])
    # 2 ranks for epoch 1, then 1 process for epoch 2
    first = run_mpi(2, TRAIN + ["--epochs", "1", "--save", str(a)])
    one_process(["--epochs", "2", "--resume", str(a), "--save", str(a)])
    # 1 process for epoch 1, then 2 ranks for epoch 2
    one_process(["--epochs", "1", "--save", str(b)])
    run_mpi(2, TRAIN + ["--epochs", "2", "--resume", str(b), "--save", str(b)])
    want = params(ref)
    assert int(want["step"]) == 44
    assert_close(params(a), want)
    assert_close(params(b), want)
    # Rank 0 alone reports: one line per epoch, not one per rank.
    assert first.stdout.count("epoch 1/1:") == 1 and first.stdout.count("final test accuracy") == 1
    assert "on 2 MPI ranks of 32 examples" in first.stdout


def test_a_global_batch_the_ranks_cannot_split_is_refused():
    result = run_mpi(2, TRAIN + ["--global-batch", "63"], check=False)
    assert result.returncode != 0
    assert "--global-batch 63: must be a multiple of the 2 MPI ranks" in result.stderr
