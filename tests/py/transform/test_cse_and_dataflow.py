"""EliminateCommonSubexpr and ToNonDataflow on the cases TVM's documentation and a user meet: what is shared,
what is not (other operands, other attributes, calls of impure functions, another block's dataflow variables)."""

from __future__ import annotations

import numpy as np

import relax_mlir as rm
from relax_mlir import op
from relax_mlir.ir import BlockBuilder, DataflowBlock, DataflowVar, TensorStructInfo, Var, VarBinding
from relax_mlir.script import from_source
from relax_mlir.transform import EliminateCommonSubexpr, ToNonDataflow

TEXT = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")):
        with R.dataflow():
            a = R.add(x, y)
            b = R.add(x, y)
            c = R.add(y, x)
            d = R.sum(a, axis=[0])
            e = R.sum(a, axis=[1])
            t = (a, b)
            u = (a, b)
            out = R.add(b, R.const(1.0, "float32"))
            R.output(out, c, t, u, d, e)
        late = R.add(x, y)
        again = R.add(x, y)
        return (out, c, t, u, d, e, late, again)
"""


def _bindings(mod):
    return {b.var.name_hint: b for block in mod["main"].blocks for b in block.bindings}


def test_what_is_shared_and_what_is_not():
    mod = from_source(TEXT)
    out = EliminateCommonSubexpr()(mod)
    kept = _bindings(out)
    assert "b" not in kept  # R.add(x, y) again: replaced by a
    assert kept["out"].value.args[0] is kept["a"].var
    assert "c" in kept and "d" in kept and "e" in kept  # other operand order, other attributes
    assert "u" not in kept  # the tuple (a, b) again, once b is a: t (a block output, visible after it) is reused
    # the later plain-block R.add(x, y) cannot use a (a dataflow variable of the block): it is computed again
    # once, and `again` reuses it
    assert "late" in kept and "again" not in kept
    x, y = np.ones((2, 3), np.float32), np.arange(6, dtype=np.float32).reshape(2, 3)
    want = rm.interpret(mod, "main", x, y)
    got = rm.VirtualMachine(rm.compile(out))["main"](x, y)
    for g, w in zip(_flat(got), _flat(want)):
        np.testing.assert_array_equal(g, w)


def _flat(v):
    return [a for x in v for a in _flat(x)] if isinstance(v, tuple) else [v]


def test_call_only_leaves_tuples():
    out = EliminateCommonSubexpr(call_only=True)(from_source(TEXT))
    kept = _bindings(out)
    assert "b" not in kept and "u" in kept


def test_to_non_dataflow_removes_every_dataflow_block_and_variable():
    out = ToNonDataflow()(from_source(TEXT))
    func = out["main"]
    assert not any(isinstance(b, DataflowBlock) for b in func.blocks)
    assert not any(isinstance(b.var, DataflowVar) for block in func.blocks for b in block.bindings)
    assert all(isinstance(b, VarBinding) for block in func.blocks for b in block.bindings)
    x, y = np.ones((2, 3), np.float32), np.full((2, 3), 2, np.float32)
    for g, w in zip(_flat(rm.interpret(out, "main", x, y)), _flat(rm.interpret(from_source(TEXT), "main", x, y))):
        np.testing.assert_array_equal(g, w)


def test_a_long_chain_compares_each_value_with_its_own_candidates_only(monkeypatch):
    # v_i = add(v_{i-1}, x) for 600 bindings: all hash alike, so the table keys on the variables read too; keyed
    # on the hash alone, each value was compared with every earlier one (180,000 comparisons, quadratic time).
    from relax_mlir.transform import eliminate_common_subexpr as cse

    x = Var("x", TensorStructInfo((4,), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            v = x
            for i in range(600):
                v = bb.emit((op.add if i % 2 else op.multiply)(v, x))
            bb.emit_output(op.add(v, x))
            out = bb.emit_output(op.add(v, x))  # the one repeated value
        bb.emit_func_output(out)
    calls = []
    real = cse.structural_equal
    monkeypatch.setattr(cse, "structural_equal", lambda a, b, **kw: calls.append(1) or real(a, b, **kw))
    mod = EliminateCommonSubexpr()(bb.get())
    assert len(calls) == 1  # the repeat found its twin; nothing else was compared
    assert len(mod["main"].body.blocks[0].bindings) == 601  # the two equal outputs became one


_NARROWER = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor("float32", ndim=2), w: R.Tensor((3, 2), "float32")):
        a = R.add(x, x)
        b: R.Tensor((4, 3), "float32") = R.add(x, x)
        c = R.matmul(b, w)
        return (a, c)
"""


def test_a_binding_declaring_more_than_the_earlier_variable_is_kept():
    # b declares (4, 3) where a is any 2-d tensor: replaced by a, its size check was lost and c, inferred (4, 2) from
    # b, was left reading a, of unknown sizes (the check after the pass blamed c).
    import pytest
    from relax_mlir.ir.well_formed import WellFormedError
    from relax_mlir.transform import PassContext

    mod = from_source(_NARROWER)
    with PassContext(check_well_formed=False):
        out = EliminateCommonSubexpr()(mod)
    kept = _bindings(out)
    assert kept["b"].value.op.name == "relax.add" and kept["c"].value.args[0] is kept["b"].var
    x, w = np.arange(12, dtype=np.float32).reshape(4, 3), np.ones((3, 2), np.float32)
    np.testing.assert_array_equal(rm.interpret(out, "main", x, w)[1], (x + x) @ w)
    with pytest.raises(Exception, match=r"binding 'b': expected 4, got 5"):
        rm.interpret(out, "main", np.ones((5, 3), np.float32), w)
    # checked, the annotation itself is what the module is refused for, as after any other pass
    with pytest.raises(WellFormedError, match=r"binding 'b': struct info R.Tensor\(\(4, 3\), dtype=\"float32\"\) "
                                              r"disagrees with its value's R.Tensor\(dtype=\"float32\", ndim=2\)"):
        EliminateCommonSubexpr()(mod)


def test_a_binding_declaring_less_than_the_earlier_variable_becomes_an_alias():
    # c was inferred from b's ndim=2: reading a of (4, 3) instead, its call's struct info would disagree with it
    mod = from_source(_NARROWER.replace('x: R.Tensor("float32", ndim=2)', 'x: R.Tensor((4, 3), "float32")')
                      .replace('b: R.Tensor((4, 3), "float32")', 'b: R.Tensor("float32", ndim=2)'))
    out = EliminateCommonSubexpr()(mod)
    kept = _bindings(out)
    assert kept["b"].value is kept["a"].var and kept["c"].value.args[0] is kept["b"].var
    x, w = np.arange(12, dtype=np.float32).reshape(4, 3), np.ones((3, 2), np.float32)
    np.testing.assert_array_equal(rm.interpret(out, "main", x, w)[1], (x + x) @ w)
