"""Gradient rules that need a rank, a shape or static sizes the arguments' struct info does not give (a
``strided_slice`` of a tensor of unknown shape, a ``sum`` of one of unknown rank) refuse the call with
``grad_utils.ShapeNeeded``. The Gradient pass used to let it through as a bare ``TypeError`` that named neither the
function nor the binding, and the command line printed its traceback as if relax-mlir had a bug. Now it is a
``GradientError`` (a ``ValueError``: one line on the command line) naming the function, the binding, the op and the
arguments to ``match_cast``; a refusal by a rule whose arguments have what it asked for is the rule's bug
(``GradientRuleError``), and any other ``TypeError`` of a rule stays a traceback."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import op, transform
from relax_mlir.ir import BlockBuilder, TensorStructInfo, Var
from relax_mlir.op import grad as markers
from relax_mlir.op import grad_utils as gu
from relax_mlir.script import from_source
from relax_mlir.transform import GradientError
from relax_mlir.transform.gradient import GradientRuleError

_T = TensorStructInfo

NEGATIVE_SLICE = '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor("float32", ndim=2)) -> R.Tensor("float32", ndim=0):
        with R.dataflow():
            y = R.strided_slice(x, axes=[0], begin=[-2], end=[-1])
            s = R.sum(y)
            R.output(s)
        return s
'''


def _module(params, build):
    """``main(*params)``: ``build(bb, *params)`` returns the (scalar) value to return."""
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(build(bb, *params), "s")
        bb.emit_func_output(out)
    return bb.get()


def _refused(mod) -> str:
    with pytest.raises(GradientError) as info:
        transform.Gradient("main")(mod)
    assert isinstance(info.value, ValueError)  # the command line's one line, not a traceback
    return str(info.value)


def test_a_slice_of_a_tensor_of_unknown_shape_names_the_binding_and_the_argument():
    x = Var("x", _T(None, "float32", ndim=2))
    mod = _module([x], lambda bb, x: op.sum(bb.match_cast(
        bb.emit(op.strided_slice(x, (0,), (-2,), (-1,)), "y"), _T((1, 2), "float32"), "c")))
    assert _refused(mod) == (
        "Gradient(main): cannot differentiate binding 'y' (relax.strided_slice): its gradient rule needs the shape of "
        "'x', which has struct info R.Tensor(dtype=\"float32\", ndim=2); match_cast it to a shape first")


def test_a_slice_of_an_unknown_shape_is_refused_where_its_shape_is_needed_and_the_advice_works():
    """``x[-2:-1]`` of a tensor of unknown shape has an unknown shape, which the ``sum`` after it needs. With ``x``
    cast to a shape (the slice then has one row), the gradient is one on row m - 2 (hand-derived)."""
    mod = from_source(NEGATIVE_SLICE)
    assert _refused(mod) == (
        "Gradient(main): cannot differentiate binding 's' (relax.sum): its gradient rule needs the shape of 'y', "
        "which has struct info R.Tensor(dtype=\"float32\", ndim=2); match_cast it to a shape first")
    cast = NEGATIVE_SLICE.replace("y = R.strided_slice(x,", 'c = R.match_cast(x, R.Tensor(("m", 2), "float32"))\n'
                                                            "            y = R.strided_slice(c,")
    after = transform.Gradient("main")(from_source(cast))
    x = np.arange(10, dtype="float32").reshape(5, 2)
    loss, (grad,) = rm.interpret(after, "main_adjoint", x)
    expected = np.zeros((5, 2), "float32")
    expected[3] = 1
    np.testing.assert_allclose(loss, 6 + 7)
    np.testing.assert_array_equal(grad, expected)


def test_a_squeeze_of_unknown_rank_is_refused_naming_the_rank():
    x = Var("x", _T(None, "float32", ndim=-1))
    mod = _module([x], lambda bb, x: op.sum(bb.emit(op.squeeze(x), "y")))
    assert _refused(mod) == (
        "Gradient(main): cannot differentiate binding 's' (relax.sum): its gradient rule needs the rank of 'y', "
        "which has struct info R.Tensor(dtype=\"float32\"); match_cast it to a shape first")
    mod = _module([x], lambda bb, x: op.sum(bb.match_cast(bb.emit(op.squeeze(x), "y"), _T((3,), "float32"), "c")))
    assert _refused(mod) == (
        "Gradient(main): cannot differentiate binding 'y' (relax.squeeze): its gradient rule needs the shape of 'x', "
        "which has struct info R.Tensor(dtype=\"float32\"); match_cast it to a shape first")


def test_a_reshape_of_an_unknown_shape_is_refused():
    x = Var("x", _T(None, "float32", ndim=2))
    mod = _module([x], lambda bb, x: op.sum(bb.emit(op.reshape(x, (6,)), "y")))
    assert _refused(mod) == (
        "Gradient(main): cannot differentiate binding 'y' (relax.reshape): its gradient rule needs the shape of 'x', "
        "which has struct info R.Tensor(dtype=\"float32\", ndim=2); match_cast it to a shape first")


def test_a_matmul_of_unknown_ranks_names_both_operands():
    a, b = Var("a", _T(None, "float32", ndim=-1)), Var("b", _T(None, "float32", ndim=-1))
    mod = _module([a, b], lambda bb, a, b: op.sum(bb.match_cast(bb.emit(op.matmul(a, b), "y"),
                                                                   _T((2, 2), "float32"), "c")))
    assert _refused(mod) == (
        "Gradient(main): cannot differentiate binding 'y' (relax.matmul): its gradient rule needs the ranks of 'a' and "
        "'b', which have struct info R.Tensor(dtype=\"float32\") and R.Tensor(dtype=\"float32\"); match_cast them to "
        "shapes first")


def test_a_binary_op_names_only_the_operand_of_unknown_shape():
    x, w = Var("x", _T(None, "float32", ndim=2)), Var("w", _T((3,), "float32"))
    mod = _module([x, w], lambda bb, x, w: op.sum(bb.match_cast(bb.emit(op.multiply(x, w), "y"),
                                                                   _T((2, 3), "float32"), "c")))
    assert _refused(mod) == (
        "Gradient(main): cannot differentiate binding 'y' (relax.multiply): its gradient rule needs the shape of 'x', "
        "which has struct info R.Tensor(dtype=\"float32\", ndim=2); match_cast it to a shape first")


def test_an_einsum_diagonal_over_a_symbolic_size_says_which_label_needs_a_static_size():
    x = Var("x", _T(("n", "n"), "float32"))
    mod = _module([x], lambda bb, x: op.sum(bb.emit(op.einsum((x,), "ii->i"), "y")))
    assert _refused(mod) == (
        "Gradient(main): cannot differentiate binding 'y' (relax.einsum): its gradient rule needs static sizes of 'x', "
        "which has struct info R.Tensor((\"n\", \"n\"), dtype=\"float32\") (the diagonal over label 'i' needs a static "
        "size, got n); match_cast it to static sizes first")


def test_decompositions_and_nn_rules_name_the_arguments_of_unknown_shape():
    """Through a decomposition (group_norm, attention, conv1d's conv2d over a height of 1: the shape missing is that
    of a value the decomposition builds) and an nn rule's own helper (layer_norm), the arguments to cast are named."""
    x = Var("x", _T(None, "float32", ndim=3))
    gamma, beta = Var("gamma", _T((4,), "float32")), Var("beta", _T((4,), "float32"))
    cast = _T((2, 4, 5), "float32")
    mod = _module([x, gamma, beta], lambda bb, x, g, b: op.sum(bb.match_cast(
        bb.emit(op.nn.group_norm(x, g, b, 2, 1, (2,)), "y"), cast, "c")))
    assert _refused(mod) == (
        "Gradient(main): cannot differentiate binding 'y' (relax.nn.group_norm): its gradient rule needs the shape of "
        "'x', which has struct info R.Tensor(dtype=\"float32\", ndim=3); match_cast it to a shape first")
    mod = _module([x, gamma, beta], lambda bb, x, g, b: op.sum(bb.match_cast(
        bb.emit(op.nn.layer_norm(x, g, b, -1), "y"), _T((2, 5, 4), "float32"), "c")))
    assert "binding 'y' (relax.nn.layer_norm): its gradient rule needs the shape of 'x'" in _refused(mod)
    q = Var("q", _T(None, "float32", ndim=4))
    k = Var("k", _T((1, 5, 2, 4), "float32"))
    mod = _module([q, k], lambda bb, q, k: op.sum(bb.match_cast(bb.emit(op.nn.attention(q, k, k), "y"),
                                                                   _T((1, 3, 2, 4), "float32"), "c")))
    assert _refused(mod) == (
        "Gradient(main): cannot differentiate binding 'y' (relax.nn.attention): its gradient rule needs the shape of "
        "'q', which has struct info R.Tensor(dtype=\"float32\", ndim=4); match_cast it to a shape first")
    w = Var("w", _T(None, "float32", ndim=3))
    mod = _module([x, w], lambda bb, x, w: op.sum(bb.match_cast(bb.emit(op.nn.conv1d(x, w), "y"),
                                                                   _T((1, 2, 3), "float32"), "c")))
    assert _refused(mod) == (
        "Gradient(main): cannot differentiate binding 'y' (relax.nn.conv1d): its gradient rule needs the shapes of 'x' "
        "and 'w', which have struct info R.Tensor(dtype=\"float32\", ndim=3) and R.Tensor(dtype=\"float32\", ndim=3); "
        "match_cast them to shapes first")


def test_the_command_line_says_it_in_one_line(tmp_path, capsys):
    from relax_mlir.cli import main

    path = tmp_path / "slice.py"
    path.write_text(NEGATIVE_SLICE)
    assert main(["opt", str(path), "--passes", 'Gradient(func_name="main")']) == 1
    err = capsys.readouterr().err
    assert err == ("relax-mlir opt: error: Gradient(main): cannot differentiate binding 's' (relax.sum): its gradient "
                   "rule needs the shape of 'y', which has struct info R.Tensor(dtype=\"float32\", ndim=2); "
                   "match_cast it to a shape first\n")


def test_a_refusal_whose_arguments_have_the_shape_is_the_rules_bug():
    """A rule asking for the shape of a value it built itself without one: the arguments have theirs, so the user
    has nothing to cast; an internal error naming the op and binding (the command line keeps its traceback)."""
    lost = Var("lost", _T(None, "float32", ndim=1))
    bad = dataclasses.replace(op.exp, gradient=lambda y, call, g: [gu.broadcast_like(g, lost)])
    x = Var("x", _T((3,), "float32"))
    mod = _module([x], lambda bb, x: op.sum(bb.emit(bad(x), "y")))
    with pytest.raises(GradientRuleError, match=r"^Gradient\(main\): the gradient rule of relax.exp is wrong .* at "
                                                r"binding 'y', it refused the call for want of a shape \(gradient "
                                                r"rule: the shape of lost is unknown .*\), which every argument has"):
        transform.Gradient("main")(mod)


def test_other_type_errors_of_a_rule_stay_tracebacks():
    def broken(y, call, g):
        raise TypeError("unsupported operand type(s)")

    x = Var("x", _T(None, "float32", ndim=1))
    mod = _module([x], lambda bb, x: op.sum(bb.match_cast(bb.emit(dataclasses.replace(op.exp, gradient=broken)(x),
                                                                      "y"), _T((3,), "float32"), "c")))
    with pytest.raises(TypeError, match="unsupported operand") as info:
        transform.Gradient("main")(mod)
    assert not isinstance(info.value, (ValueError, gu.ShapeNeeded))


def test_outside_gradient_the_refusal_is_still_the_type_error_it_was():
    """Direct callers of a rule or a decomposition (``DecomposeOps``) see the same exception and words as before."""
    x = Var("x", _T(None, "float32", ndim=2))
    with pytest.raises(TypeError, match=r"^relax.tile decomposition: the shape of x is unknown \(.*\); match_cast it "
                                        r"to a shape first$") as info:
        gu.shape_of(x, "relax.tile decomposition")
    assert info.value.need == "shape" and not isinstance(info.value, ValueError)
    with pytest.raises(gu.ShapeNeeded, match=r"^gradient rule: the rank of x is unknown$"):
        gu.reduced_axes(Var("x", _T(None, "float32", ndim=-1)), None)


def test_a_match_cast_in_a_checkpointed_segment_is_recomputed_as_a_cast():
    """Recomputing a segment (``start_checkpoint`` .. ``end_checkpoint``) bound a match_cast's value without the cast:
    the rules after it saw the unknown shape the cast had given (a refusal), or the adjoint was ill-formed. The
    gradient of ``sum(mean(exp(x), axis=0))`` is ``exp(x) / n`` (hand-derived)."""
    x = Var("x", _T(None, "float32", ndim=2))

    def build(bb, x):
        c = bb.match_cast(bb.emit(markers.start_checkpoint(x), "s"), _T(("n", 3), "float32"), "c")
        m = bb.emit(op.mean(bb.emit(op.exp(c), "e"), axis=0), "m")
        return op.sum(bb.emit(markers.end_checkpoint(m), "end"))

    after = transform.Gradient("main")(_module([x], build))
    data = np.linspace(-1, 1, 12, dtype="float32").reshape(4, 3)
    _, (grad,) = rm.interpret(after, "main_adjoint", data)
    np.testing.assert_allclose(grad, np.exp(data) / 4, rtol=1e-6)
