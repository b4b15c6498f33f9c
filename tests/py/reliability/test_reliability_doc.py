"""docs/reliability.md stays true: every row of its table names a test, every test it names exists (``file::name``,
``::name`` meaning the file named before it in the row, census cases of bad_inputs.CASES), and every boundary the
issue lists has a row."""

from __future__ import annotations

import re
from pathlib import Path

from .bad_inputs import CASES

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "reliability.md"
BOUNDARIES = ("text parser", "script front end", "BlockBuilder", "op inference", "pass options", "Gradient",
              "loss constructors", "optimizer constructors", "SetupTrainer", "Trainer", "compiled calls",
              "checkpoints", "CLI options", "data files")


def _rows() -> list[list[str]]:
    lines = [line for line in DOC.read_text().splitlines() if line.startswith("| ") and not line.startswith("| ---")]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines[1:]]


def test_every_row_names_existing_tests():
    rows = _rows()
    assert len(rows) > 20
    for boundary, bad, _, tests in rows:
        refs = re.findall(r"`([^`]+)`", tests)
        census = re.findall(r"census ((?:`[^`]+`(?:, )?)+)", tests)
        assert refs, f"row {boundary!r} / {bad!r} names no test"
        current = None
        for ref in refs:
            if ref in CASES:
                continue
            path, _, name = ref.partition("::")
            if path:
                current = ROOT / path
                assert current.exists(), f"{ref}: no such file"
            if name:
                assert current is not None, ref
                function = name.split("[")[0]
                assert re.search(rf"^def {re.escape(function)}\(", current.read_text(), re.M), \
                    f"{ref}: no test {function} in {current.relative_to(ROOT)}"
            elif not path.startswith(("tests/lit/", "scripts/")):
                raise AssertionError(f"{ref!r} in row {boundary!r} is neither a test nor a census case")
        for group in census:
            for case in re.findall(r"`([^`]+)`", group):
                assert case in CASES, f"census case {case!r} is not in bad_inputs.CASES"


def test_every_boundary_has_a_row_and_every_census_case_is_cited():
    text = DOC.read_text()
    rows = _rows()
    for boundary in BOUNDARIES:
        assert any(boundary in row[0] for row in rows), f"no row for {boundary}"
    for case in CASES:
        assert f"`{case}`" in text, f"census case {case!r} is not cited in docs/reliability.md"
    assert "(arguments.md)" in text, "the compiled-calls row links the argument policy"
