"""R.If in the IR: its struct info (the branches' least upper bound), structural equality, the visitor and mutator,
the BlockBuilder, and well-formedness (branch scoping, the condition, no If in a dataflow block)."""

from __future__ import annotations

import re

import pytest

from relax_mlir import op
from relax_mlir.ir import (BindingBlock, BlockBuilder, BlockBuilderError, DataflowBlock, ExprMutator, ExprVisitor,
                           Function, If, IRModule, MatchCast, ObjectStructInfo, PrimStructInfo, SeqExpr,
                           ShapeStructInfo, TensorStructInfo, TupleStructInfo, Var, VarBinding, const,
                           structural_equal, structural_hash)
from relax_mlir.ir.struct_info import FuncStructInfo, struct_info_lca
from relax_mlir.ir.well_formed import WellFormedError, check_well_formed
from relax_mlir.transform.utils import free_vars

F32 = "float32"
BOOL0 = TensorStructInfo((), "bool")


def T(*shape, dtype=F32) -> TensorStructInfo:
    return TensorStructInfo(shape, dtype)


# -- struct info: the least upper bound --------------------------------------------------------------------------

@pytest.mark.parametrize("a, b, expected", [
    (T(2, 3), T(2, 3), T(2, 3)),                                          # equal: kept
    (T(2, 3), T(2, 4), TensorStructInfo(None, F32, 2)),                   # other sizes: the rank
    (T(2, 3), T(6), TensorStructInfo(None, F32, -1)),                     # other ranks: the dtype
    (T("n", 3), T("n", 3), T("n", 3)),                                    # symbolic, equal
    (T(2), T(2, dtype="int32"), ObjectStructInfo()),                      # other dtypes: nothing in common
    (T(2), ShapeStructInfo((2,)), ObjectStructInfo()),                    # other kinds
    (ShapeStructInfo((1, 2)), ShapeStructInfo((3, 4)), ShapeStructInfo(ndim=2)),
    (ShapeStructInfo((1,)), ShapeStructInfo((3, 4)), ShapeStructInfo(ndim=-1)),
    (PrimStructInfo("int64", 1), PrimStructInfo("int64", 2), PrimStructInfo("int64")),
    (PrimStructInfo("int64"), PrimStructInfo("float32"), ObjectStructInfo()),
    (TupleStructInfo([T(2), T(3)]), TupleStructInfo([T(2), T(4)]),
     TupleStructInfo([T(2), TensorStructInfo(None, F32, 1)])),            # field by field
    (TupleStructInfo([T(2)]), TupleStructInfo([T(2), T(2)]), ObjectStructInfo()),
    (FuncStructInfo([T(2)], T(2)), FuncStructInfo([T(2)], T(3)),
     FuncStructInfo([T(2)], TensorStructInfo(None, F32, 1))),
    (ObjectStructInfo(), T(2), ObjectStructInfo()),
])
def test_struct_info_lca_is_the_least_upper_bound(a, b, expected):
    assert struct_info_lca(a, b) == expected
    assert struct_info_lca(b, a) == expected


def test_an_if_takes_the_lca_of_its_branches_and_wraps_bare_branches_in_seq_exprs():
    c, x, y = Var("c", BOOL0), Var("x", T(2, 3)), Var("y", T(2, 4))
    e = If(c, x, y)
    assert isinstance(e.true_branch, SeqExpr) and e.true_branch.body is x
    assert e.struct_info == TensorStructInfo(None, F32, 2)
    assert If(c, x, x).struct_info == T(2, 3)


def test_a_size_a_branch_defines_is_erased_from_the_ifs_struct_info():
    c, x = Var("c", BOOL0), Var("x", TensorStructInfo(None, F32, 1))
    cast = Var("v", T("m"))
    then = SeqExpr([BindingBlock([MatchCast(cast, x, T("m"))])], cast)
    other = SeqExpr([BindingBlock([MatchCast(Var("w", T("m")), x, T("m"))])], x)
    assert then.struct_info == T("m")
    assert If(c, then, other).struct_info == TensorStructInfo(None, F32, 1)


def test_if_refuses_non_expressions():
    with pytest.raises(TypeError, match="If: true_branch must be an Expr, got int"):
        If(Var("c", BOOL0), 1, Var("x", T(2)))


# -- structural equality -------------------------------------------------------------------------------------------

def _module(swap: bool = False, other_op=op.multiply) -> IRModule:
    c, x = Var("c", BOOL0), Var("x", T(3))
    bb = BlockBuilder()
    with bb.function("main", [c, x]):
        then, other = op.add(x, x), other_op(x, x)
        y = bb.emit(If(c, *((other, then) if swap else (then, other))), "y")
        bb.emit_func_output(y)
    return bb.get()


def test_structural_equality_and_hash_see_both_branches():
    assert structural_equal(_module(), _module())
    assert structural_hash(_module()) == structural_hash(_module())
    assert not structural_equal(_module(), _module(swap=True))
    assert structural_hash(_module()) != structural_hash(_module(swap=True))
    assert not structural_equal(_module(), _module(other_op=op.subtract))


# -- visitor and mutator -----------------------------------------------------------------------------------------

def test_the_visitor_walks_the_condition_and_both_branches():
    seen = []

    class Calls(ExprVisitor):
        def visit_call_(self, call):
            seen.append(call.op.name)
            super().visit_call_(call)

    Calls().visit_module(_module())
    assert sorted(seen) == ["relax.add", "relax.multiply"]


def test_free_vars_see_what_the_branches_read():
    mod = _module()
    if_ = mod["main"].body.blocks[0].bindings[0].value
    assert {v.name_hint for v in free_vars(if_)} >= {"c", "x"}


def test_the_mutator_rewrites_inside_both_branches_and_re_infers_the_if():
    class AddToSubtract(ExprMutator):
        def visit_call_(self, call):
            call = self.visit_expr_post_order(call)
            return op.subtract(call.args[0], call.args[1]) if call.op is op.add else call

    out = AddToSubtract().mutate_module(_module())
    assert structural_equal(out, IRModule({"main": _module_fn(op.subtract, op.multiply)}))
    check_well_formed(out)


def _module_fn(first, second) -> Function:
    c, x = Var("c", BOOL0), Var("x", T(3))
    bb = BlockBuilder()
    with bb.function("main", [c, x]):
        y = bb.emit(If(c, first(x, x), second(x, x)), "y")
        bb.emit_func_output(y)
    return bb.get()["main"]


def test_the_mutator_returns_an_untouched_if_as_it_is():
    mod = _module()
    assert ExprMutator().mutate_module(mod) is mod


# -- BlockBuilder ------------------------------------------------------------------------------------------------

def test_block_builder_binds_a_branchs_call_result_inside_that_branch():
    mod = _module()
    check_well_formed(mod)
    if_ = mod["main"].body.blocks[0].bindings[0].value
    for branch in (if_.true_branch, if_.false_branch):
        assert isinstance(branch.body, Var)
        assert [b.var for b in branch.blocks[0].bindings] == [branch.body]
    assert mod["main"].ret_struct_info == T(3)


def test_block_builder_refuses_an_if_in_a_dataflow_block():
    c, x = Var("c", BOOL0), Var("x", T(3))
    bb = BlockBuilder()
    with pytest.raises(BlockBuilderError, match="R.If cannot be emitted inside a dataflow block"):
        with bb.function("main", [c, x]):
            with bb.dataflow():
                bb.emit(If(c, x, x))


def test_block_builder_refuses_a_condition_that_is_no_bool_scalar():
    c, x = Var("c", T(3, dtype="bool")), Var("x", T(3))
    bb = BlockBuilder()
    with pytest.raises(ValueError, match=r'must be a 0-d bool tensor \(R.Tensor\(\(\), "bool"\)\) or an '
                                         r'R.Prim\("bool"\), got R.Tensor\(\(3,\), dtype="bool"\)'):
        with bb.function("main", [c, x]):
            bb.emit(If(c, x, x))


# -- well-formedness ---------------------------------------------------------------------------------------------

def _problems(mod) -> list[str]:
    with pytest.raises(WellFormedError) as info:
        check_well_formed(mod)
    return info.value.problems


def test_a_branchs_variable_is_not_visible_after_the_if():
    c, x = Var("c", BOOL0), Var("x", T(3))
    inner = Var("inner", T(3))
    then = SeqExpr([BindingBlock([VarBinding(inner, op.exp(x))])], inner)
    y = Var("y", T(3))
    z = Var("z", T(3))
    body = SeqExpr([BindingBlock([VarBinding(y, If(c, then, x)), VarBinding(z, op.add(y, inner))])], z)
    problems = _problems(IRModule({"main": Function([c, x], body)}))
    assert len(problems) == 1
    assert re.search(r"main, binding 'z': var 'inner' is defined in a branch of an R.If and is not visible after "
                     r"it", problems[0]), problems


def test_the_other_branch_does_not_see_a_branchs_variable():
    c, x = Var("c", BOOL0), Var("x", T(3))
    inner = Var("inner", T(3))
    then = SeqExpr([BindingBlock([VarBinding(inner, op.exp(x))])], inner)
    y = Var("y", T(3))
    body = SeqExpr([BindingBlock([VarBinding(y, If(c, then, SeqExpr([], inner)))])], y)
    problems = _problems(IRModule({"main": Function([c, x], body)}))
    assert any("var 'inner' is defined in a branch of an R.If" in p for p in problems), problems


def test_an_if_in_a_dataflow_block_is_ill_formed():
    c, x = Var("c", BOOL0), Var("x", T(3))
    y = Var("y", T(3))
    body = SeqExpr([DataflowBlock([VarBinding(y, If(c, x, x))])], y)
    problems = _problems(IRModule({"main": Function([c, x], body)}))
    assert any(re.search(r"main, binding 'y': an R.If cannot be inside a dataflow block", p) for p in problems)


@pytest.mark.parametrize("cond_sinfo, ok", [
    (BOOL0, True), (PrimStructInfo("bool"), True), (ObjectStructInfo(), True),
    (T(2, dtype="bool"), False), (T(dtype="int32"), False), (PrimStructInfo("int64"), False),
])
def test_the_condition_must_be_a_bool_scalar(cond_sinfo, ok):
    c, x = Var("c", cond_sinfo), Var("x", T(3))
    y = Var("y", T(3))
    mod = IRModule({"main": Function([c, x], SeqExpr([BindingBlock([VarBinding(y, If(c, x, x))])], y))})
    if ok:
        check_well_formed(mod)
    else:
        assert any("the condition of an R.If must be a 0-d bool tensor" in p for p in _problems(mod))


def test_a_condition_that_is_no_leaf_is_ill_formed():
    c, x = Var("c", T(3)), Var("x", T(3))
    y = Var("y", T(3))
    cond = op.greater(op.sum(c), const(0.0))
    mod = IRModule({"main": Function([c, x], SeqExpr([BindingBlock([VarBinding(y, If(cond, x, x))])], y))})
    assert any("the condition of an R.If must be a variable or a constant" in p for p in _problems(mod))


def test_a_binding_annotation_narrower_than_the_lca_is_ill_formed():
    c, x, w = Var("c", BOOL0), Var("x", T(3)), Var("w", T(4))
    y = Var("y", T(3))  # the If is Tensor(ndim=1)
    mod = IRModule({"main": Function([c, x, w], SeqExpr([BindingBlock([VarBinding(y, If(c, x, w))])], y))})
    assert any("struct info R.Tensor((3,)" in p and "disagrees" in p for p in _problems(mod))
