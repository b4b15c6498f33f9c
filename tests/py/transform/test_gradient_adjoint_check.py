"""Gradient checks every adjoint an op's gradient rule returns against the argument it is for: same dtype, rank and
fields, sizes not provably different. A rule that broke that contract (nn.pad's, slicing a static axis of 2**31 + 5
elements up to 2**31 - 1) made an ill-typed adjoint function, accepted silently.

The wrong rules here live in copies of the records (``dataclasses.replace``), never registered: the registry keeps
its own rules and nothing has to be restored."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import op, transform
from relax_mlir.ir import BlockBuilder, TensorStructInfo, Tuple, Var
from relax_mlir.ir.sym import SizeVar
from relax_mlir.transform.gradient import GradientRuleError, _adjoint_mismatch

_T = TensorStructInfo
BIG = 2**31 + 5  # an axis past int32: only a static size, nothing is allocated


def _module(build, params):
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = build(bb)
        bb.emit_func_output(out)
    return bb.get()


def _one_op(record, x, **attrs):
    """``main(x) = sum(record(x))``, the call bound to ``lv``."""
    return _module(lambda bb: bb.emit_output(op.sum(bb.emit(record(x, **attrs), "lv"))), [x])


def _short_pad_rule(orig, call, g):
    """nn.pad's rule as it was: "to the end" written as 2**31 - 1, short of an axis of 2**31 elements or more."""
    before, after = call.attrs["pad_width"][0::2], call.attrs["pad_width"][1::2]
    ends = tuple(-a if a else 2**31 - 1 for a in after)
    return [op.strided_slice(g, tuple(range(len(ends))), before, ends)]


def test_a_pad_rule_short_of_a_big_static_axis_is_refused():
    x = Var("x", _T((BIG, 3), "float32"))
    bad = dataclasses.replace(op.nn.pad, gradient=_short_pad_rule)
    with pytest.raises(GradientRuleError) as info:
        transform.Gradient("main")(_one_op(bad, x, pad_width=(1, 0, 0, 0)))
    assert str(info.value) == (
        "Gradient(main): the gradient rule of relax.nn.pad is wrong (an internal error: a bug in that op's record, "
        "not in the function): at binding 'lv', the adjoint it returned for argument 0 (data, 'x') has struct info "
        'R.Tensor((2147483646, 3), dtype="float32"), but the argument has R.Tensor((2147483653, 3), dtype="float32") '
        "(axis 0 has 2147483646 elements, not 2147483653); please report it")
    # an internal error, not the user's: the command line shows its traceback instead of one line
    assert not isinstance(info.value, ValueError)


def test_the_registered_pad_rule_passes_on_the_big_axis():
    x = Var("x", _T((BIG, 3), "float32"))
    adjoint = transform.Gradient("main")(_one_op(op.nn.pad, x, pad_width=(1, 0, 0, 0)))["main_adjoint"]
    assert adjoint.ret_struct_info.fields[1].fields[0] == _T((BIG, 3), "float32")


def _with_rule(record, rule):
    return dataclasses.replace(record, gradient=rule)


def test_a_wrong_dtype_is_refused():
    x = Var("x", _T((2, 3), "float32"))
    bad = _with_rule(op.exp, lambda y, call, g: [op.astype(g * y, "float16")])
    with pytest.raises(GradientRuleError, match=r"relax.exp is wrong .* at binding 'lv', the adjoint it returned for "
                                                r"argument 0 \(x, 'x'\) has struct info R.Tensor\(\(2, 3\), "
                                                r"dtype=\"float16\"\), but the argument has R.Tensor\(\(2, 3\), "
                                                r"dtype=\"float32\"\) \(dtype float16, not float32\)"):
        transform.Gradient("main")(_one_op(bad, x))


def test_a_rule_that_leaves_a_broadcast_operand_unsummed_is_refused():
    # Gradient adds contributions as they come: it never sums an adjoint down to its argument (the rules do, with
    # grad_utils.unbroadcast), so a bias's adjoint of the output's shape would be added into a (3,) gradient.
    x, b = Var("x", _T((2, 3), "float32")), Var("b", _T((3,), "float32"))
    bad = _with_rule(op.add, lambda y, call, g: [g, g])
    mod = _module(lambda bb: bb.emit_output(op.sum(bb.emit(bad(x, b), "lv"))), [x, b])
    with pytest.raises(GradientRuleError, match=r"argument 1 \(x2, 'b'\) has struct info R.Tensor\(\(2, 3\), "
                                                r"dtype=\"float32\"\), but the argument has R.Tensor\(\(3,\), "
                                                r"dtype=\"float32\"\) \(rank 2, not 1\)"):
        transform.Gradient("main")(mod)


def test_the_registered_add_rule_sums_the_broadcast_operand_down():
    x, b = Var("x", _T((2, 3), "float32")), Var("b", _T((3,), "float32"))
    mod = _module(lambda bb: bb.emit_output(op.sum(bb.emit(op.add(x, b), "lv"))), [x, b])
    adjoint = transform.Gradient("main")(mod)["main_adjoint"]
    _, (gx, gb) = rm.interpret(rm.ir.IRModule({"f": adjoint}), "f", np.ones((2, 3), "float32"),
                               np.ones(3, "float32"))
    np.testing.assert_array_equal(gx, np.ones((2, 3)))
    np.testing.assert_array_equal(gb, np.full(3, 2.0))  # d sum(x + b) / db: one per row of x


def test_a_symbolic_size_off_by_a_constant_is_refused():
    n = SizeVar("n")
    x = Var("x", _T((n, 4), "float32"))
    bad = _with_rule(op.nn.pad, lambda y, call, g: [op.strided_slice(g, (0, 1), (0, 1), (n + 1, 5))])
    with pytest.raises(GradientRuleError, match=r"has struct info R.Tensor\(\(\"n \+ 1\", 4\), dtype=\"float32\"\), "
                                                r"but the argument has R.Tensor\(\(\"n\", 4\), dtype=\"float32\"\) "
                                                r"\(axis 0 "
                                                r"has n \+ 1 elements, not n\)"):
        transform.Gradient("main")(_one_op(bad, x, pad_width=(1, 1, 1, 1)))


def test_a_wrong_field_of_a_tuple_argument_is_refused():
    a, b = Var("a", _T((2, 3), "float32")), Var("b", _T((4, 3), "float32"))

    def rule(y, call, g):  # b's slice one row short
        return [Tuple([op.strided_slice(g, (0,), (0,), (2,)), op.strided_slice(g, (0,), (2,), (5,))])]

    bad = _with_rule(op.concat, rule)
    mod = _module(lambda bb: bb.emit_output(op.sum(bb.emit(bad(Tuple([a, b]), axis=0), "lv"))), [a, b])
    with pytest.raises(GradientRuleError, match=r"argument 0 \(tensors, a Tuple\) has struct info R.Tuple\("
                                                r"R.Tensor\(\(2, 3\), dtype=\"float32\"\), R.Tensor\(\(3, 3\), "
                                                r"dtype=\"float32\"\)\), but the argument has .* \(field 1: axis 0 has "
                                                r"3 elements, not 4\)"):
        transform.Gradient("main")(mod)


def test_a_rule_returning_one_adjoint_too_many_is_an_internal_error():
    x = Var("x", _T((2, 3), "float32"))
    bad = _with_rule(op.exp, lambda y, call, g: [g * y, g])
    with pytest.raises(GradientRuleError, match=r"Gradient\(main\): the gradient rule of relax.exp is wrong \(an "
                                                r"internal error: .*\): at binding 'lv', it returned 2 adjoints for 1 "
                                                r"arguments; please report it"):
        transform.Gradient("main")(_one_op(bad, x))


def test_a_float16_value_through_astype_keeps_its_dtype():
    # Mixed precision: astype's rule casts the adjoint back, so a float16 parameter gets a float16 gradient.
    x = Var("x", _T((3,), "float16"))

    def build(bb):
        wide = bb.emit(op.astype(x, "float32"))
        return bb.emit_output(op.sum(bb.emit(op.multiply(wide, wide))))

    mod = _module(build, [x])
    adjoint = transform.Gradient("main")(mod)["main_adjoint"]
    assert adjoint.ret_struct_info.fields[1].fields[0] == _T((3,), "float16")
    _, (gx,) = rm.interpret(rm.ir.IRModule({"f": adjoint}), "f", np.array([1, 2, 3], "float16"))
    np.testing.assert_array_equal(gx, np.array([2, 4, 6], "float16"))


@pytest.mark.parametrize("want,got", [
    (_T((SizeVar("n"), 4)), _T((SizeVar("m"), 4))),  # may be equal: op inference assumes it too
    (_T((SizeVar("n"), 4)), _T((3, 4))),
    (_T((3, 4)), _T(None, ndim=2)),  # unknown sizes
    (_T(None, ndim=-1), _T((3,))),  # unknown rank
])
def test_sizes_that_may_be_equal_pass(want, got):
    assert _adjoint_mismatch(want, got) is None
