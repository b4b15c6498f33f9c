"""The lit configuration makes a failing FileCheck test fail the run (never "unresolved" or passed)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

LIT_CFG = Path(__file__).resolve().parents[1] / "lit" / "lit.cfg.py"


def _run_lit(tmp_path: Path, check: str) -> subprocess.CompletedProcess:
    shutil.copy(LIT_CFG, tmp_path / "lit.cfg.py")
    (tmp_path / "probe.relax").write_text(f"# RUN: echo hello world | filecheck %s\n# CHECK: {check}\n")
    command = [sys.executable, "-c", "from lit.main import main; main()", "-v", str(tmp_path)]
    return subprocess.run(command, capture_output=True, text=True)


def test_a_matching_check_passes(tmp_path):
    result = _run_lit(tmp_path, "hello world")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Passed: 1" in result.stdout


def test_a_failing_check_fails_the_run(tmp_path):
    result = _run_lit(tmp_path, "goodbye")
    assert result.returncode != 0
    assert "Failed: 1" in result.stdout, result.stdout + result.stderr
