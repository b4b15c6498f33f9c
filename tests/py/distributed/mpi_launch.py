"""``run_mpi(K, command)``: a command under ``mpiexec -n K`` in a subprocess, for the tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
# A job that hangs instead of ending is a failure: far above the ~10-20 s a 2-rank test job takes here.
TIMEOUT = 240


def mpiexec() -> str:
    """The ``mpiexec`` next to this interpreter (the ``mpi`` extra's Open MPI), else the one on PATH."""
    local = Path(sys.executable).parent / "mpiexec"
    found = str(local) if local.exists() else shutil.which("mpiexec")
    if found is None:
        pytest.fail("mpiexec not found: install the mpi extra (pip install -e '.[mpi]', part of '.[dev]')")
    return found


def mpi_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env["RELAX_MLIR_NUM_THREADS"] = "1"  # two ranks on a small machine: one thread each
    # Open MPI refuses root without these; containers and CI often run as root.
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def run_mpi(ranks: int, command: list[str], check: bool = True, cwd=None,
            timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """Run ``command`` on ``ranks`` ranks (oversubscribing the cores if needed); with ``check`` a non-zero exit
    fails the test showing the job's output. A job still running after ``timeout`` seconds (hung) fails it."""
    return run_job([mpiexec(), "-n", str(ranks), "--oversubscribe", *command], check, cwd, timeout)


def run_job(argv: list[str], check: bool = True, cwd=None, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """``argv`` (an ``mpiexec`` command line) to its end; a job that outlives ``timeout`` fails the test after
    ``mpiexec`` has been told to end its ranks (SIGTERM, which it forwards; SIGKILL would orphan them, busy
    waiting in a collective)."""
    proc = subprocess.Popen(argv, env=mpi_env(), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            stdout, stderr = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        pytest.fail(f"{' '.join(argv)} hung (still running after {timeout} s):\n{stdout}\n{stderr}")
    result = subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(argv)} exited with {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result
