"""TVM's pass decorators: ``function_pass``, ``module_pass`` and ``dataflowblock_pass``, on functions and classes."""

from __future__ import annotations

import numpy as np
import pytest

from relax_mlir import transform
from relax_mlir.interpreter import interpret
from relax_mlir.ir.expr import DataflowBlock
from relax_mlir.script import from_source
from relax_mlir.testing import roundtrip

SOURCE = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((3,), "float32")):
        with R.dataflow():
            lv = R.exp(x)
            unused_a = R.negative(lv)
            gv = R.add(lv, x)
            R.output(gv)
        unused_b = R.multiply(gv, gv)
        return gv

    @R.function
    def other(y: R.Tensor((2,), "float32")):
        with R.dataflow():
            unused_c = R.exp(y)
            gv = R.negative(y)
            R.output(gv)
        return gv
'''


def _without_unused(block):
    return type(block)([b for b in block.bindings if not b.var.name_hint.startswith("unused")])


def test_dataflowblock_pass_visits_only_dataflow_blocks():
    mod = from_source(SOURCE)
    seen = []

    @transform.dataflowblock_pass(opt_level=0)
    def drop_unused(block, m, ctx):
        seen.append(type(block))
        return _without_unused(block)

    assert isinstance(drop_unused, transform.Pass) and drop_unused.info.name == "drop_unused"
    out = roundtrip(drop_unused(mod))
    assert seen == [DataflowBlock, DataflowBlock]  # one per function; the plain block is not passed
    text = out.script()
    assert "unused_a" not in text and "unused_c" not in text and "unused_b" in text
    x = np.array([0.5, -1.0, 2.0], "float32")
    np.testing.assert_allclose(interpret(out, "main", x), np.exp(x) + x, rtol=1e-6)
    assert "drop_unused" not in transform.PASSES  # a user's pass is not one of the library's


def test_dataflowblock_pass_on_a_class_takes_its_options():
    @transform.dataflowblock_pass(name="DropPrefixed")
    class DropPrefixed:
        def __init__(self, prefix):
            self.prefix = prefix

        def transform_dataflow_block(self, block, mod, ctx):
            return DataflowBlock([b for b in block.bindings if not b.var.name_hint.startswith(self.prefix)])

    out = DropPrefixed("unused_c")(from_source(SOURCE))
    assert "unused_c" not in out.script() and "unused_a" in out.script()
    assert DropPrefixed("x").info.name == "DropPrefixed"


def test_function_and_module_pass_decorators():
    names = []

    @transform.function_pass(opt_level=1, name="Count")
    def count(func, mod, ctx):
        names.append(len(func.params))
        return func

    @transform.module_pass
    def drop_other(mod, ctx):
        out = mod.copy()
        del out["other"]
        return out

    mod = from_source(SOURCE)
    assert count.info.opt_level == 1 and count(mod) is not None and names == [1, 1]
    assert list(drop_other(mod)) == ["main"]
    with transform.PassContext(opt_level=0):
        names.clear()
        count(mod)  # opt_level 1 > 0: skipped
        assert names == []

    @transform.function_pass
    class Rename:
        def __init__(self, suffix):
            self.suffix = suffix

        def transform_function(self, func, mod, ctx):
            return func.with_attr("note", self.suffix)

    out = Rename("x")(mod)
    assert all(out[n].attrs["note"] == "x" for n in out)


def test_decorating_something_else_is_a_clear_error():
    with pytest.raises(TypeError, match="expects a function or a class"):
        transform.dataflowblock_pass(3)
    with pytest.raises(TypeError, match="needs a transform_dataflow_block"):
        @transform.dataflowblock_pass
        class NoMethod:
            pass
