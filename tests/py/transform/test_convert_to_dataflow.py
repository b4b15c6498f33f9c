"""ConvertToDataflow: which runs become blocks (min_size, impure calls split runs) and which variables become
dataflow variables (those nothing after the block uses)."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir.ir import DataflowBlock, DataflowVar
from relax_mlir.script import from_source
from relax_mlir.transform import ConvertToDataflow

TEXT = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32")):
        a = R.add(x, x)
        b = R.exp(a)
        c = R.multiply(b, b)
        d = R.add(c, x)
        return (b, d)
"""


def test_inner_variables_become_dataflow_variables_and_used_ones_stay_outputs():
    mod = from_source(TEXT)
    out = ConvertToDataflow()(mod)
    (block,) = out["main"].blocks
    assert isinstance(block, DataflowBlock)
    kinds = {b.var.name_hint: isinstance(b.var, DataflowVar) for b in block.bindings}
    assert kinds == {"a": True, "b": False, "c": True, "d": False}
    x = np.arange(3, dtype=np.float32)
    for got, want in zip(rm.interpret(out, "main", x), rm.interpret(mod, "main", x)):
        np.testing.assert_array_equal(got, want)


def test_min_size_leaves_short_runs():
    assert not any(isinstance(b, DataflowBlock) for b in ConvertToDataflow(min_size=5)(from_source(TEXT))["main"].blocks)
    with pytest.raises(ValueError, match="min_size must be a positive integer, got 0"):
        ConvertToDataflow(min_size=0)
