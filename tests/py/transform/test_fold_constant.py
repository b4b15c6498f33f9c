"""FoldConstant outside dataflow blocks: pure op calls on constants are folded in plain blocks too (as TVM's pass
does), host calls are not, and a variable declared less precisely than its folded value is not propagated."""

from __future__ import annotations

import numpy as np

import relax_mlir as rm
from relax_mlir.ir.expr import Constant
from relax_mlir.script import from_source
from relax_mlir.transform import FoldConstant


def _bindings(mod):
    return {b.var.name_hint: b for block in mod["main"].blocks for b in block.bindings}


def test_pure_calls_on_constants_are_folded_in_a_plain_block():
    mod = from_source("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), "float32")):
        a = R.add(R.const([1.0, 2.0], "float32"), R.const([10.0, 20.0], "float32"))
        b = R.multiply(a, R.const(2.0, "float32"))
        c = R.multiply(x, b)
        return c
""")
    kept = _bindings(FoldConstant()(mod))
    np.testing.assert_array_equal(kept["a"].value.data, [11.0, 22.0])
    np.testing.assert_array_equal(kept["b"].value.data, [22.0, 44.0])  # a folded counts as a constant further on
    np.testing.assert_array_equal(kept["c"].value.args[1].data, [22.0, 44.0])
    x = np.array([3.0, -1.0], np.float32)
    np.testing.assert_array_equal(rm.interpret(FoldConstant()(mod), "main", x), x * [22.0, 44.0])


def test_host_calls_on_constants_stay():
    calls = []
    rm.register_func("test_fold_constant.log", lambda v: (calls.append(1), v)[1])
    mod = from_source("""
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((2,), "float32")):
        c = R.const([1.0, 2.0], "float32")
        lc = R.call_packed("test_fold_constant.log", c, sinfo_args=R.Tensor((2,), "float32"))
        y = R.add(x, lc)
        return y
""")
    folded = FoldConstant()(mod)
    kept = _bindings(folded)
    assert not isinstance(kept["lc"].value, Constant) and kept["y"].value.args[1] is kept["lc"].var
    np.testing.assert_array_equal(rm.interpret(folded, "main", np.zeros(2, np.float32)), [1.0, 2.0])
    assert len(calls) == 1


def test_a_variable_declared_less_precisely_than_its_value_is_folded_in_place():
    # c was inferred from a's ndim=1: given the (2,) constant instead, its call's struct info disagreed with it
    mod = from_source("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), "float32")):
        with R.dataflow():
            a: R.Tensor("float32", ndim=1) = R.add(R.const([1.0, 2.0], "float32"), R.const([10.0, 20.0], "float32"))
            c = R.add(x, a)
            R.output(c)
        return c
""")
    folded = FoldConstant()(mod)
    kept = _bindings(folded)
    np.testing.assert_array_equal(kept["a"].value.data, [11.0, 22.0])
    assert kept["c"].value.args[1] is kept["a"].var
    np.testing.assert_array_equal(rm.interpret(folded, "main", np.ones(2, np.float32)), [12.0, 23.0])
