"""ExprVisitor and ExprMutator: dispatch, identity when nothing changes, var remapping, re-inference, ANF."""

from __future__ import annotations

import numpy as np
import pytest

from relax_mlir import op
from relax_mlir.ir import (BindingBlock, BlockBuilder, Call, DataflowVar, Function, IRModule, SeqExpr,
                           TensorStructInfo, Tuple, Var, VarBinding, const)
from relax_mlir.ir.structural_equal import assert_structural_equal
from relax_mlir.ir.visitor import ExprMutator, ExprVisitor, post_order_visit
from relax_mlir.ir.well_formed import check_well_formed

F32 = "float32"


def _mlp_like(n=3) -> IRModule:
    bb = BlockBuilder()
    x = Var("x", TensorStructInfo((2, n), F32))
    y = Var("y", TensorStructInfo((2, n), F32))
    with bb.function("main", [x, y]):
        with bb.dataflow():
            a = bb.emit(op.exp(x))
            b = bb.emit(op.add(a, y))
            t = bb.emit(Tuple([a, b]))
            gv = bb.emit_output(op.multiply(t[0], b))
        bb.emit_func_output(gv)
    return bb.get()


class _Counter(ExprVisitor):
    def __init__(self):
        self.calls, self.defs, self.uses, self.blocks = [], [], 0, 0

    def visit_call_(self, call):
        self.calls.append(call.op.name)
        super().visit_call_(call)

    def visit_var_def_(self, var):
        self.defs.append(var.name_hint)

    def visit_dataflow_var_(self, var):
        self.uses += 1

    def visit_dataflow_block_(self, block):
        self.blocks += 1
        super().visit_dataflow_block_(block)


def test_visitor_dispatches_on_node_type():
    v = _Counter()
    v.visit_module(_mlp_like())
    assert v.calls == ["relax.exp", "relax.add", "relax.multiply"]
    assert v.defs == ["x", "y", "lv", "lv1", "lv2", "lv3", "gv"]  # params, then binding vars as defined
    assert v.blocks == 1
    assert v.uses == 6  # lv, lv (tuple), lv1 (tuple), lv2 (getitem), lv3, lv1


def test_post_order_visit_sees_children_first():
    x = Var("x", TensorStructInfo((3,), F32))
    seen = []
    post_order_visit(op.add(op.exp(x), x), lambda e: seen.append(type(e).__name__))
    assert seen == ["Var", "Call", "Var", "Call"]


def test_unknown_node_type_is_a_type_error():
    class Strange:
        pass

    with pytest.raises(TypeError, match="ExprVisitor: unknown expression type Strange"):
        ExprVisitor().visit_expr(Strange())
    with pytest.raises(TypeError, match="ExprMutator: unknown binding type Strange"):
        ExprMutator().visit_binding(Strange())


def test_identity_mutator_returns_the_same_objects():
    mod = _mlp_like()
    assert ExprMutator().mutate_module(mod) is mod
    func = mod["main"]
    assert ExprMutator().visit_function(func) is func
    assert ExprMutator().visit_binding_block(func.body.blocks[0]) is func.body.blocks[0]


class _ExpToSigmoidOfNegative(ExprMutator):
    """Returns a nested expression: the mutator must bring it back to A-normal form."""

    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        if call.op is op.exp:
            return op.sigmoid(op.negative(call.args[0]))
        return call


def test_rewrite_to_nested_expression_is_normalised():
    mod = _mlp_like()
    new = _ExpToSigmoidOfNegative().mutate_module(mod)
    assert new is not mod
    check_well_formed(new)
    bindings = new["main"].body.blocks[0].bindings
    assert [b.value.op.name for b in bindings if isinstance(b.value, Call)] == [
        "relax.negative", "relax.sigmoid", "relax.add", "relax.multiply"]
    assert isinstance(bindings[0].var, DataflowVar)  # emitted inside the dataflow block
    # lv keeps its struct info, so it keeps its Var, and the later bindings are the very same objects.
    assert bindings[1].var is mod["main"].body.blocks[0].bindings[0].var
    assert bindings[2:] == mod["main"].body.blocks[0].bindings[1:]


def test_changed_struct_info_gives_fresh_var_and_reinfers_uses():
    x = Var("x", TensorStructInfo((2, 3), F32))
    w = Var("w", TensorStructInfo((2, 3), F32))
    bb = BlockBuilder()
    with bb.function("main", [x, w]):
        a = bb.emit(op.exp(x))
        b = bb.emit(op.add(a, a))
        bb.emit_func_output(b)
    mod = bb.get()

    class SwapToW(ExprMutator):  # replace exp(x) by a tensor of another shape: broadcast of (4, 1, 3)
        def visit_call_(self, call):
            call = self.visit_expr_post_order(call)
            if call.op is op.exp:
                return op.add(call, const([[[0.0]]] * 4))
            return call

    new = SwapToW().mutate_module(mod)
    check_well_formed(new)
    f = new["main"]
    old_a = mod["main"].body.blocks[0].bindings[0].var
    new_bindings = f.body.blocks[0].bindings
    a2 = new_bindings[1].var
    assert a2 is not old_a and a2.name_hint == "gv" and a2.struct_info == TensorStructInfo((4, 2, 3), F32)
    assert new_bindings[2].value.args == (a2, a2)  # later uses remapped
    assert new_bindings[2].var.struct_info == TensorStructInfo((4, 2, 3), F32)  # re-inferred
    assert f.ret_struct_info == TensorStructInfo((4, 2, 3), F32)  # it restated the body's, so it follows


def test_unchanged_struct_info_keeps_the_var():
    x = Var("x", TensorStructInfo((3,), F32))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        a = bb.emit(op.exp(x))
        bb.emit_func_output(op.add(a, x))
    mod = bb.get()

    class ExpToTanh(ExprMutator):
        def visit_call_(self, call):
            call = self.visit_expr_post_order(call)
            return op.tanh(call.args[0]) if call.op is op.exp else call

    new = ExpToTanh().mutate_module(mod)
    b0 = new["main"].body.blocks[0].bindings[0]
    assert b0.var is a  # same struct info: same Var, so uses need no remap
    assert new["main"].body.body.args[0] is a
    assert b0.value.op is op.tanh


def test_visit_var_def_remaps_uses_and_lookup_binding():
    mod = _mlp_like()
    renamed = {}

    class Rename(ExprMutator):
        def visit_var_def_(self, var):
            new = type(var)(var.name_hint + "_r", var.struct_info)
            renamed[var] = new
            return new

        def visit_call_(self, call):
            call = self.visit_expr_post_order(call)
            if call.op is op.multiply:
                # The rewritten value of the first argument's tuple is visible through lookup_binding.
                src = self.lookup_binding(call.args[0])
                assert src is not None and src.tuple_value.name_hint == "lv2_r"
            return call

    new = Rename().mutate_module(mod)
    check_well_formed(new)
    f = new["main"]
    assert [p.name_hint for p in f.params] == ["x_r", "y_r"]
    assert f.body.body.name_hint == "gv_r"
    assert_structural_equal(new, mod)  # renaming does not change the structure


def test_nested_result_is_bound_in_a_trailing_block():
    x = Var("x", TensorStructInfo((3,), F32))
    v = Var("v", x.struct_info)
    body = SeqExpr([BindingBlock([VarBinding(v, op.exp(x))])], v)
    func = Function([x], body)

    class NestBody(ExprMutator):  # the function result becomes a nested expression
        def visit_var_(self, var):
            return op.negative(op.exp(var)) if var is v else var

    new = NestBody().visit_function(func)
    check_well_formed(new)
    # The nested call was bound after the block (adjacent plain blocks merge into one); the result is a call of
    # bound values.
    assert len(new.body.blocks) == 1 and len(new.body.blocks[0].bindings) == 2
    assert new.body.body.op is op.negative


def test_tuple_rewrite_rebuilds_struct_info():
    x = Var("x", TensorStructInfo((3,), F32))
    t = Tuple([x, x])

    class ToInt(ExprMutator):
        def visit_var_(self, var):
            return const(np.array([1, 2]), "int64")

    new = ToInt().visit_expr(t)
    assert new.struct_info.fields[0] == TensorStructInfo((2,), "int64")


def test_hook_emits_extra_bindings_through_builder():
    mod = _mlp_like()

    class NegateFirst(ExprMutator):  # TVM style: self.builder_.emit(...) from inside a hook
        def visit_call_(self, call):
            call = self.visit_expr_post_order(call)
            if call.op is op.exp:
                neg = self.builder_.emit(op.negative(call.args[0]), "neg")
                return op.exp(neg)
            return call

    new = NegateFirst().mutate_module(mod)
    check_well_formed(new)
    first = new["main"].body.blocks[0].bindings[0]
    assert first.var.name_hint == "neg" and isinstance(first.var, DataflowVar)
    assert new["main"].body.blocks[0].bindings[1].value.args == (first.var,)
