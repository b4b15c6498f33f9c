"""The README's table of TVM's relax.transform says "here" for exactly the passes that are registered."""

from __future__ import annotations

import os
import re

from relax_mlir.transform import PASSES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_every_registered_pass_is_in_a_here_row_and_no_other_row_claims_one():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("### TVM's `relax.transform`"):text.index("\n## Layout")]
    here, elsewhere = set(), set()
    for group, names, status in re.findall(r"^\| ([^|]+) \| ([^|]+) \| ([^|]+) \|$", section, flags=re.M):
        listed = set(re.findall(r"\b([A-Z][A-Za-z0-9]+)\b", names))
        (here if status.strip().startswith("here") else elsewhere).update(listed)
    assert set(PASSES) <= here, f"registered but not in a 'here' row: {sorted(set(PASSES) - here)}"
    assert not (set(PASSES) & elsewhere), f"registered but listed as not done: {sorted(set(PASSES) & elsewhere)}"
