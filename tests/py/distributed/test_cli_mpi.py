"""``relax-mlir train`` under ``mpiexec -n 2``: checkpoints move between 1 and 2 ranks (same global batch) where
the trajectory does not depend on the ranks and are refused where it does (a CNN's batch norm without
--sync-batch-norm), rank 0 alone reports, a global batch the ranks cannot split is refused by name, ranks started
with different settings are refused by name, and SIGINT to one rank ends the whole job.

Tolerance as in test_data_parallel.py: two ranks add their halves' gradients in another order than one
process (last-bit differences over 44 steps); rtol 1e-4 / atol 1e-5 on parameters of order 0.1.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

from .mpi_launch import mpi_env, mpiexec, run_job, run_mpi

TRAIN = [sys.executable, "-m", "relax_mlir.cli", "train", "--hidden", "32", "--no-progress"]
CNN = [sys.executable, "-m", "relax_mlir.cli", "train", "--model", "cnn", "--channels", "4", "8", "--no-progress"]


def one_process(args: list[str], command: list[str] = TRAIN) -> subprocess.CompletedProcess:
    result = subprocess.run(command + args, env=mpi_env(), capture_output=True, text=True, timeout=240)
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


def test_cnn_checkpoints_resume_only_where_the_ranks_do_not_change_the_trajectory(tmp_path):
    """A CNN's batch norm uses the global batch's statistics in one process and with --sync-batch-norm (a
    2-rank checkpoint resumes in one process and continues one process's run), but each rank's own without it
    (the run depends on the ranks): resuming across that difference was accepted silently."""
    ref, synced = tmp_path / "ref.npz", tmp_path / "synced.npz"
    one_process(["--epochs", "2", "--save", str(ref)], CNN)
    run_mpi(2, CNN + ["--sync-batch-norm", "--epochs", "1", "--save", str(synced)])
    refused = run_mpi(2, CNN + ["--epochs", "2", "--resume", str(synced)], check=False)
    assert refused.returncode != 0
    assert ("batch_norm_statistics: \"the global batch's (one process, or --sync-batch-norm)\" in the checkpoint, "
            "\"each rank's shard's (2 ranks without --sync-batch-norm)\" now") in refused.stderr
    refused = run_mpi(2, CNN + ["--epochs", "3", "--resume", str(ref)], check=False)  # one process's, per-rank BN
    assert refused.returncode != 0 and "batch_norm_statistics" in refused.stderr
    one_process(["--epochs", "2", "--resume", str(synced), "--save", str(synced)], CNN)
    assert_close(params(synced), params(ref))


def test_ranks_started_with_different_settings_are_refused(tmp_path):
    """MPMD: rank 0 with --save and one epoch, rank 1 with neither. Rank 0 waited at save's barrier forever after
    rank 1 had finished (other --lr values drifted apart silently)."""
    saved = tmp_path / "ckpt.npz"
    result = run_job([mpiexec(), "--oversubscribe", "-n", "1", *TRAIN, "--epochs", "1", "--save", str(saved),
                      ":", "-n", "1", *TRAIN, "--epochs", "2"], check=False, timeout=90)
    assert result.returncode != 0
    assert "the 2 MPI ranks were started with different settings" in result.stderr
    assert "--epochs: 1 on rank 0, 2 on rank 1" in result.stderr
    assert f"--save: '{saved}' on rank 0, None on rank 1" in result.stderr
    assert not saved.exists()


def _rank_pid(marker: str, rank: int) -> Optional[int]:
    """The process of ``rank`` in the job whose environment holds ``marker`` (Open MPI's or PMI's rank variable)."""
    wanted = {f"OMPI_COMM_WORLD_RANK={rank}".encode(), f"PMI_RANK={rank}".encode()}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = set(Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"))
        except OSError:
            continue
        if marker.encode() in environ and environ & wanted:
            return int(entry)
    return None


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds rank 1's process through /proc")
def test_sigint_to_one_rank_ends_the_job():
    """Ctrl-C in one rank's terminal, or a scheduler signalling one process: that rank printed "interrupted" and
    returned 130 without MPI_Abort, and the other waited in its all-reduce forever."""
    marker = f"RELAX_MLIR_TEST_JOB={uuid.uuid4().hex}"
    env = mpi_env() | {"PYTHONUNBUFFERED": "1", marker.split("=")[0]: marker.split("=")[1]}
    proc = subprocess.Popen([mpiexec(), "-n", "2", "--oversubscribe", *CNN, "--epochs", "1000"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 180
        while not any("compiled for" in line for line in lines):  # rank 0 has built; rank 1 trains or builds
            assert proc.poll() is None and time.monotonic() < deadline, "the job did not start training"
            time.sleep(0.2)
        pid = _rank_pid(marker, 1)
        assert pid is not None, "rank 1's process not found"
        os.kill(pid, signal.SIGINT)
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("SIGINT to rank 1 left the job running (rank 0 waiting in its all-reduce)")
    finally:
        if proc.poll() is None:
            proc.terminate()  # mpiexec forwards SIGTERM to its ranks
            proc.wait(timeout=30)
    stderr = proc.stderr.read()
    assert proc.returncode != 0
    assert "relax-mlir train: interrupted" in stderr
