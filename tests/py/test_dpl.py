"""The dataflow pattern language (relax_mlir.dpl, TVM's relax.dpl): matching through variables, combinators,
constraints, and rewrite_call checked against the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import op as R
from relax_mlir.dpl import (has_attr, has_dtype, has_shape, is_const, is_expr, is_op, is_tuple, is_tuple_get_item,
                            is_var, rewrite_call, wildcard)
from relax_mlir.ir import IRModule, check_well_formed
from relax_mlir.script import from_source

TEXT = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), w: R.Tensor((3, 4), "float32")):
        with R.dataflow():
            mm = R.matmul(x, w)
            b = R.add(mm, R.const(1.0, "float32"))
            twice = R.multiply(b, R.const(2.0, "float32"))
            same = R.add(b, b)
            t = (b, twice)
            first = t[0]
            s = R.sum(same, axis=[1])
            R.output(twice, first, s)
        return (twice, first, s)
"""


@pytest.fixture()
def func():
    return from_source(TEXT)["main"]


def _binding(func, name):
    return next(b for block in func.blocks for b in block.bindings if b.var.name_hint == name)


def _var2val(func):
    return {b.var: b.value for block in func.blocks for b in block.bindings}


def test_a_call_pattern_matches_through_variables_and_reports_what_matched(func):
    x, w = wildcard(), wildcard()
    mm = is_op("relax.matmul")(x, w)
    pattern = is_op("relax.add")(mm, is_const())
    value = _binding(func, "b").value
    assert not pattern.match(value)  # without the bindings, mm is only a variable
    matches = pattern.extract_matched_expr(value, _var2val(func))
    assert matches[x] is func.params[0] and matches[w] is func.params[1]
    assert matches[mm] is _binding(func, "mm").value
    assert not is_op("relax.add")(mm, wildcard()).match(_binding(func, "same").value, _var2val(func))


def test_combinators_and_constraints(func):
    v2v = _var2val(func)
    b = _binding(func, "b").value
    add_or_mul = is_op("relax.add")(wildcard(), wildcard()) | is_op("relax.multiply")(wildcard(), wildcard())
    assert add_or_mul.match(b) and add_or_mul.match(_binding(func, "twice").value)
    assert not add_or_mul.match(_binding(func, "mm").value)
    assert wildcard().has_dtype("float32").has_shape((2, 4)).match(b)
    assert wildcard().has_shape((None, 4)).match(b) and not wildcard().has_shape((2, 3)).match(b)
    assert not wildcard().has_dtype("int64").match(b)
    assert is_op("relax.sum")(wildcard()).has_attr({"axis": [1]}).match(_binding(func, "s").value)
    assert not is_op("relax.sum")(wildcard()).has_attr({"axis": [0]}).match(_binding(func, "s").value)
    y = wildcard()
    assert is_op("relax.add")(y, y).match(_binding(func, "same").value)  # one pattern, one expression
    assert not is_op("relax.add")(y, y).match(b)
    assert is_tuple([wildcard(), is_op("relax.multiply")(wildcard(), is_const())]).match(
        _binding(func, "t").value, v2v)
    assert is_tuple_get_item(is_tuple([wildcard(), wildcard()]), 0).match(_binding(func, "first").value, v2v)
    assert not is_tuple_get_item(wildcard(), 1).match(_binding(func, "first").value, v2v)
    assert is_var("x").match(func.params[0]) and not is_var("w").match(func.params[0])
    with pytest.raises(TypeError, match="expected a pattern or a Relax expression, got int"):
        is_op("relax.add")(1, wildcard())


def test_tvms_module_level_constraints_are_the_methods(func):
    b, s = _binding(func, "b").value, _binding(func, "s").value
    assert has_dtype("float32").match(b) and not has_dtype("int64").match(b)
    assert has_shape((2, 4)).match(b) and not has_shape((2, 3)).match(b)
    assert has_dtype("float32", is_op("relax.add")(wildcard(), wildcard())).match(b)
    assert not has_dtype("float32", is_op("relax.multiply")(wildcard(), wildcard())).match(b)
    assert has_attr({"axis": [1]}, is_op("relax.sum")(wildcard())).match(s)
    assert not has_attr({"axis": [0]}, is_op("relax.sum")(wildcard())).match(s)


def test_rewrite_call_keeps_the_values(func):
    """x * 2 becomes x + x, everywhere it appears; the interpreter gives the same numbers."""
    a = wildcard()
    pattern = is_op("relax.multiply")(a, is_const())

    def rewriter(expr, matches):
        const = expr.args[1]
        if const.data.ndim == 0 and float(const.data) == 2.0:
            return R.add(matches[a], matches[a])
        return expr

    new = rewrite_call(pattern, rewriter, func)
    assert _binding(new, "twice").value.op.name == "relax.add"
    check_well_formed(new)
    x, w = np.ones((2, 3), np.float32), np.arange(12, dtype=np.float32).reshape(3, 4)
    for got, want in zip(rm.interpret(IRModule({"main": new}), "main", x, w),
                         rm.interpret(IRModule({"main": func}), "main", x, w)):
        np.testing.assert_array_equal(got, want)
    assert rewrite_call(pattern, lambda e, m: e, func) is func  # nothing rewritten: the same function


def test_rewrite_call_does_not_reach_into_an_earlier_dataflow_block():
    """b, the output of a dataflow block, reads the block's DataflowVar a: a rewrite after the block must not look
    through b to a (it would use a outside its block), so the reshape of a reshape is left alone there."""
    func = from_source("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3, 4), "float32")):
        with R.dataflow():
            a = R.exp(x)
            b = R.reshape(a, (6, 4))
            R.output(b)
        c = R.reshape(b, (24,))
        return c
""")["main"]
    w = wildcard()
    pattern = is_op("relax.reshape")(is_op("relax.reshape")(w))
    new = rewrite_call(pattern, lambda e, m: R.reshape(m[w], e.attrs["shape"]), func)
    check_well_formed(IRModule({"main": new}))
    assert new is func
    from relax_mlir.transform import RemoveRedundantReshape
    check_well_formed(RemoveRedundantReshape()(IRModule({"main": func})))


def test_a_call_pattern_matches_its_op_pattern_against_the_op(func):
    """As TVM: the call's op is matched by the op pattern, so an alternative of ops works as a call's op."""
    add = _binding(func, "b").value
    either = (is_op("relax.add") | is_op("relax.multiply"))(wildcard(), wildcard())
    assert either.match(add) and either.match(_binding(func, "twice").value)
    assert not either.match(_binding(func, "mm").value)
    assert is_op("relax.add").match(add.op) and not is_op("relax.multiply").match(add.op)
    assert wildcard()(wildcard(), wildcard()).match(add)


def test_is_expr_is_structural_and_add_multiply_commute():
    """As TVM's matcher: is_expr compares structurally; add and multiply also match with their arguments swapped."""
    func = from_source("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")):
        a = R.add(R.const(1.0, "float32"), x)
        m = R.multiply(R.const(2.0, "float32"), x)
        s = R.subtract(R.const(1.0, "float32"), x)
        return (a, m, s)
""")["main"]
    a, m, s = (_binding(func, n).value for n in ("a", "m", "s"))
    one, x = rm.const(1.0, "float32"), func.params[0]
    assert is_op("relax.add")(is_expr(one), wildcard()).match(a)
    assert not is_op("relax.add")(is_expr(rm.const(2.0, "float32")), wildcard()).match(a)
    c, y = is_const(), wildcard()
    matches = is_op("relax.add")(y, c).extract_matched_expr(a)
    assert matches[y] is x and matches[c] is a.args[0]
    assert is_op("relax.multiply")(is_var("x"), is_const()).match(m)
    assert not is_op("relax.subtract")(wildcard(), is_const()).match(s)  # not commutative
    assert wildcard().has_shape(("n", 4)).match(x) and wildcard().has_shape(("n", None)).match(x)
    assert not wildcard().has_shape(("n", 5)).match(x) and not wildcard().has_shape(("m", 4)).match(x)
