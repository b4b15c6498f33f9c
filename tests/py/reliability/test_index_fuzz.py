"""Random index tensors, in and out of range, through compiled take / take_backward / nll_loss, against the
reference interpreter: the same values where every index is valid, IndexError from both where one is not, and
never a crash. All compiled calls run in one fresh interpreter (a crash shows as a signal, not a failed assert).

``scripts/fuzz_indices.py N`` runs the same check on N cases (the closing notes quote a long run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CASES = 60  # each case compiles one small module (tens of milliseconds)


def test_random_indices_match_the_interpreter_and_never_crash():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "fuzz_indices.py"), str(CASES), "--seed", "7"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, f"the fuzzing process failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
    summary = json.loads(proc.stdout.splitlines()[-1])
    assert summary["cases"] == CASES and summary["mismatches"] == [], summary
    # Both kinds of call were tried: the random indices include out-of-range ones by construction.
    assert summary["raised"] > 0 and summary["matched"] > 0, summary
