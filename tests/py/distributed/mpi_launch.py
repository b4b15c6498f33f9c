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


def run_mpi(ranks: int, command: list[str], check: bool = True, cwd=None) -> subprocess.CompletedProcess:
    """Run ``command`` on ``ranks`` ranks (oversubscribing the cores if needed); with ``check`` a non-zero exit
    fails the test showing the job's output."""
    result = subprocess.run([mpiexec(), "-n", str(ranks), "--oversubscribe", *command], env=mpi_env(), cwd=cwd,
                            capture_output=True, text=True, timeout=TIMEOUT)
    if check and result.returncode != 0:
        pytest.fail(f"mpiexec -n {ranks} {' '.join(command)} exited with {result.returncode}:\n"
                    f"{result.stdout}\n{result.stderr}")
    return result
