"""The dataflow pattern language (relax_mlir.dpl, TVM's relax.dpl): matching through variables, combinators,
constraints, and rewrite_call checked against the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import op as R
from relax_mlir.dpl import is_const, is_op, is_tuple, is_tuple_get_item, is_var, rewrite_call, wildcard
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
