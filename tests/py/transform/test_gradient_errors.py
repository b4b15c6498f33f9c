"""Gradient refuses what it cannot do, naming the function and the culprit."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import op, transform
from relax_mlir.ir import BlockBuilder, TensorStructInfo, Var, const
from relax_mlir.op.registry import NOT_DIFFERENTIABLE, Op, Sample
from relax_mlir.transform import GradientError


def _module(build, params):
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = build(bb)
        bb.emit_func_output(out)
    return bb.get()


def _x(shape=(3,), dtype="float32", name="x"):
    return Var(name, TensorStructInfo(shape, dtype))


def test_unknown_function():
    x = _x()
    mod = _module(lambda bb: bb.emit_output(op.sum(x)), [x])
    with pytest.raises(GradientError, match=r"no function 'nope' \(it has: main\)"):
        transform.Gradient("nope")(mod)


def test_target_must_be_a_float_scalar():
    x = _x()
    mod = _module(lambda bb: bb.emit_output(op.exp(x)), [x])
    with pytest.raises(GradientError, match=r"Gradient\(main\): the target \(the return value\) must be a scalar "
                                            r"\(a 0-d tensor\), got R.Tensor\(\(3,\)"):
        transform.Gradient("main")(mod)
    i = _x(dtype="int32", name="i")
    mod = _module(lambda bb: bb.emit_output(op.sum(i)), [i, x])
    with pytest.raises(GradientError, match=r"must have a float dtype, got int32"):
        transform.Gradient("main", require_grads=[x])(mod)


def test_target_index_out_of_range():
    x = _x()
    mod = _module(lambda bb: bb.emit_output((op.sum(x), op.sum(x))), [x])
    with pytest.raises(GradientError, match=r"target_index 2 is out of range: the function returns a tuple of 2"):
        transform.Gradient("main", target_index=2)(mod)
    single = _module(lambda bb: bb.emit_output(op.sum(x)), [x])
    with pytest.raises(GradientError, match=r"target_index 1 given, but the function returns a single value"):
        transform.Gradient("main", target_index=1)(single)


def test_require_grads_must_belong_to_the_function():
    x, stranger = _x(), _x(name="stranger")
    mod = _module(lambda bb: bb.emit_output(op.sum(x)), [x])
    with pytest.raises(GradientError, match=r"'stranger' is neither a parameter nor a variable bound in"):
        transform.Gradient("main", require_grads=[stranger])(mod)
    with pytest.raises(GradientError, match=r"'x' is listed twice"):
        transform.Gradient("main", require_grads=[x, x])(mod)


def test_integer_parameter_is_refused():
    x, labels = _x(), _x(dtype="int64", name="labels")
    mod = _module(lambda bb: bb.emit_output(op.sum(x)), [x, labels])
    with pytest.raises(GradientError, match=r"'labels' has struct info R.Tensor\(\(3,\), dtype=\"int64\"\); "
                                            r"only float tensors"):
        transform.Gradient("main", require_grads=[x, labels])(mod)


def _fake(name: str, gradient=None) -> Op:
    # Not registered: the registry tests must not see it.
    return Op(name=name, inputs=("x",), infer=lambda args, attrs: args[0], reference=lambda x: x,
              gradient=gradient, samples=[Sample([])], doc="test op")


def test_every_op_without_a_rule_is_listed_at_once():
    x = _x()
    foo, bar = _fake("relax.test_foo"), _fake("relax.test_bar")
    # A float result marked as carrying no gradient. (An integer one, argmax's, is off the path: see
    # test_gradient_integer_values.py.)
    baz = _fake("relax.test_baz", NOT_DIFFERENTIABLE)

    def build(bb):
        a = bb.emit(foo(x), "a")
        b = bb.emit(bar(a), "b")
        c = bb.emit(foo(b), "c")
        d = bb.emit(baz(c), "d")
        return bb.emit_output(op.sum(d))

    mod = _module(build, [x])
    with pytest.raises(GradientError) as info:
        transform.Gradient("main")(mod)
    message = str(info.value)
    assert "no gradient rule for relax.test_foo (used by a, c)" in message
    assert "no gradient rule for relax.test_bar (used by b)" in message
    assert "relax.test_baz is not differentiable (used by d)" in message


def test_ops_off_the_differentiable_path_need_no_rule():
    x = _x()
    foo = _fake("relax.test_foo")

    def build(bb):
        cond = bb.emit(op.greater(x, op.zeros((3,), "float32")))  # only reaches where's condition
        unused = bb.emit(foo(x))  # does not reach the target
        sel = bb.emit(op.where(cond, x, op.zeros_like(x)))
        return bb.emit_output(op.sum(sel))

    mod = _module(build, [x])
    out = transform.Gradient("main")(mod)
    assert "main_adjoint" in out


def _weighted_nll():
    p, w = Var("p", TensorStructInfo((3, 5), "float64")), Var("w", TensorStructInfo((5,), "float64"))
    bb = BlockBuilder()
    with bb.function("main", [p, w]):
        with bb.dataflow():
            scaled = bb.emit(op.multiply(p, op.sum(w)))  # w also reaches the loss differentiably
            targets = const(np.array([0, 4, 2], "int64"))
            loss = bb.emit_output(op.nn.nll_loss(op.nn.log_softmax(scaled), targets, w, reduction="sum"))
        bb.emit_func_output(loss)
    return bb.get(), p, w


def test_a_required_variable_read_through_an_input_without_a_rule_is_refused():
    # nll_loss does not differentiate its class weights (TVM's rule; PyTorch raises): asked for w's gradient,
    # Gradient would return the multiply path's alone, silently short of the weights' (finite differences differ).
    mod, p, w = _weighted_nll()
    with pytest.raises(GradientError, match=r"require_grads names variables the target reads through inputs that "
                                            r"have no gradient rule .*relax.nn.nll_loss's weights \(binding "
                                            r"'\w+'\) depends on 'w'"):
        transform.Gradient("main", require_grads=[w])(mod)
    # not asked for w: fine; every float parameter (None): TVM's gradient, the weights' path left out
    assert "main_adjoint" in transform.Gradient("main", require_grads=[p])(mod)
    assert "main_adjoint" in transform.Gradient("main")(mod)


def test_a_function_with_effects_is_refused():
    """Gradient's adjoint is a pure dataflow function running the forward bindings the result needs: a host call
    nothing reads was dropped from it, silently (helper found; TVM cannot have effects in a dataflow block)."""
    from relax_mlir.script import from_source

    mod = from_source('''
@I.ir_module
class M:
    @R.function(pure=False)
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((), "float32"):
        logged = R.call_packed("log", x, sinfo_args=R.Object)
        y = R.sum(R.multiply(x, x))
        return y

    @R.function(pure=False)
    def declared(x: R.Tensor((3,), "float32")) -> R.Tensor((), "float32"):
        y = R.sum(R.multiply(x, x))
        return y
''')
    with pytest.raises(GradientError, match=r"Gradient\(main\): cannot differentiate a function with effects "
                                            r"\(bindings 'logged'\): its adjoint is a pure dataflow function"):
        transform.Gradient("main")(mod)
    with pytest.raises(GradientError, match=r"Gradient\(declared\): .* \(it is declared pure=False\)"):
        transform.Gradient("declared")(mod)


def test_require_grads_by_name_is_the_parameter_or_bound_variable_of_that_name():
    """Names are how the command line gives them (``--passes 'Gradient(func_name="main", require_grads=["w"])'``)."""
    x, w = _x(name="x"), _x(name="w")
    mod = _module(lambda bb: bb.emit_output(op.sum(bb.emit(op.multiply(x, w), name_hint="lv"))), [x, w])
    by_var = transform.Gradient("main", require_grads=[w])(mod)["main_adjoint"]
    by_name = transform.Gradient("main", require_grads=["w"])(mod)["main_adjoint"]
    assert len(by_name.ret_struct_info.fields[1].fields) == 1
    xs, ws = np.arange(3, dtype=np.float32), np.full(3, 2.0, np.float32)
    for adjoint in (by_var, by_name):
        loss, (grad,) = rm.interpret(rm.ir.IRModule({"f": adjoint}), "f", xs, ws)
        np.testing.assert_array_equal(grad, xs)  # d sum(x * w) / dw = x
    bound = transform.Gradient("main", require_grads="lv")(mod)["main_adjoint"]
    assert bound.ret_struct_info.fields[1].fields[0].shape == (3,)
    with pytest.raises(GradientError, match=r"require_grads: the function has no parameter or bound variable "
                                            r"named 'q' \(its parameters: x, w\)"):
        transform.Gradient("main", require_grads=["q"])(mod)
