"""Every boundary's bad inputs (``bad_inputs.CASES``, the rows of docs/reliability.md without a test of their own
and one case per boundary besides) run in one child interpreter: each must end in the documented exception type
with the documented message, never a signal, a hang or silent success. The child prints a line before each case,
so a crash names the case that caused it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .bad_inputs import CASES

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def outcomes() -> dict:
    done = subprocess.run([sys.executable, "-m", "tests.py.reliability.bad_inputs"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    results = {d["case"]: d for d in lines if "case" in d}
    started = [d["start"] for d in lines if "start" in d]
    crashed = started[-1] if started and started[-1] not in results else None
    return {"results": results, "returncode": done.returncode, "crashed": crashed, "stderr": done.stderr[-2000:]}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input(outcomes, name):
    boundary, _, expected, message = CASES[name]
    assert outcomes["crashed"] != name, (f"the child died (exit {outcomes['returncode']}) running {name!r}:\n"
                                         f"{outcomes['stderr']}")
    got = outcomes["results"].get(name)
    assert got is not None, f"{name!r} never ran: the child ended early ({outcomes['stderr']})"
    assert got["type"] is not None, f"{boundary}: {name!r} was accepted silently"
    assert expected in got["bases"], f"{boundary}: {name!r} raised {got['type']}, expected {expected}: {got['message']}"
    assert re.search(message, got["message"]), f"{boundary}: {name!r}: {got['message']!r} !~ {message!r}"
    assert len(got["message"].splitlines()) == 1, "one line, as the CLI prints it"


def test_the_child_survived_every_case(outcomes):
    results = outcomes["results"]
    refused = [n for n, d in results.items() if d["type"] is not None]
    print(f"bad inputs tried: {len(CASES)}, refused cleanly: {len(refused)}, crashed: "
          f"{0 if outcomes['returncode'] == 0 else 1}")
    assert outcomes["returncode"] == 0, outcomes["stderr"]
    assert sorted(results) == sorted(CASES)
