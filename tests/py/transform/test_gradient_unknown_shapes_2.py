"""Unknown shapes and attribute values that Gradient and DecomposeOps must answer with a message, not a crash:

* a parameter of unknown shape whose gradient is zero (through ``ceil``, an input without a gradient, or no path to
  the target) got ``relax.zeros`` of shape ``None``: a ``ValueError`` naming neither function nor parameter. Its
  gradient is now ``zeros_like`` of the value itself: zeros of the runtime shape, with the parameter's struct info;
* ``nn.pad``'s gradient and ``topk``'s decomposition of a tensor of unknown rank failed op inference in words about
  "rank -1"; they now refuse for want of the rank, which Gradient and DecomposeOps name;
* ``DecomposeOps*`` let a decomposition's ``ShapeNeeded`` through as a ``TypeError`` traceback; it is now a
  ``DecomposeError`` (a ``ValueError``: one line on the command line) naming the function, binding, op and the
  arguments to ``match_cast``;
* a full reduction of a tensor of unknown shape has the shape ``()`` (and ``keepdims`` over every axis a shape of
  1s), as TVM infers it, not just a rank: such a result can be compiled;
* ``scatter_elements`` with a reduction that has no gradient rule ('mul', 'min', 'max') raised a bare ``TypeError``;
  Gradient now lists it with the ops that have no rule, before differentiating anything.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import op, transform
from relax_mlir.ir import TensorStructInfo, TupleStructInfo, Var
from relax_mlir.ir.expr import TupleGetItem
from relax_mlir.op import grad_utils as gu
from relax_mlir.script import from_source
from relax_mlir.transform import GradientError
from relax_mlir.transform.decompose_ops import DecomposeError

from .test_gradient_unknown_shapes import _module

_T = TensorStructInfo
_F32 = "float32"
X = np.array([[-1.3, 0.2, 2.7], [0.6, -0.4, 1.1]], _F32)
W = np.array([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0]], _F32)


def _cast(bb, value, shape=(2, 3)):
    """``value`` bound as ``y``, then match_cast to ``shape`` (``c``): what a rule after it needs."""
    return bb.match_cast(bb.emit(value, "y"), _T(shape, _F32), "c")


def _adjoint_sinfo(mod, i: int):
    return mod["main_adjoint"].ret_struct_info.fields[1].fields[i]


# -- 1. zero gradients of unknown shape ---------------------------------------------------------------------------

@pytest.mark.parametrize("name, numpy_fn", [("ceil", np.ceil), ("round", np.round), ("sign", np.sign),
                                            ("ones_like", np.ones_like)])
def test_a_parameter_of_unknown_shape_whose_gradient_is_zero_gets_zeros_of_its_runtime_shape(name, numpy_fn):
    """``sum(cast(f(x)) * w)`` with ``f`` piecewise constant: ``x``'s gradient is zero, ``w``'s is ``f(x)``."""
    x, w = Var("x", _T(None, _F32, ndim=2)), Var("w", _T((2, 3), _F32))
    mod = _module([x, w], lambda bb, x, w: op.sum(op.multiply(_cast(bb, getattr(op, name)(x)), w)))
    after = transform.Gradient("main")(mod)
    assert _adjoint_sinfo(after, 0) == x.struct_info
    assert 'x_adjoint: R.Tensor(dtype="float32", ndim=2) = R.zeros_like(x)' in after.script()
    _, (gx, gw) = rm.interpret(after, "main_adjoint", X, W)
    np.testing.assert_array_equal(gx, np.zeros((2, 3), _F32))
    np.testing.assert_array_equal(gw, numpy_fn(X))


def test_a_parameter_that_never_reaches_the_target_gets_zeros_of_any_rank():
    x, w = Var("x", _T(None, _F32, ndim=-1)), Var("w", _T((2, 3), _F32))
    after = transform.Gradient("main")(_module([x, w], lambda bb, x, w: op.sum(w)))
    assert _adjoint_sinfo(after, 0) == _T(None, _F32, ndim=-1)
    data = np.ones((2, 1, 4), _F32)
    _, (gx, gw) = rm.interpret(after, "main_adjoint", data, W)
    np.testing.assert_array_equal(gx, np.zeros((2, 1, 4), _F32))
    np.testing.assert_array_equal(gw, np.ones((2, 3), _F32))


def test_zero_gradients_of_unknown_shape_compile_to_zeros_of_the_runtime_shape():
    """Compiled results need shapes: the adjoint's parameters get size variables (``UpdateParamStructInfo``), which
    the ``zeros_like`` gradients take on; their values are zeros of the arrays passed."""
    x, y, w = Var("x", _T(None, _F32, ndim=2)), Var("y", _T(None, _F32, ndim=2)), Var("w", _T((2, 3), _F32))
    mod = _module([x, y, w], lambda bb, x, y, w: op.sum(op.multiply(_cast(bb, op.ceil(x)), w)))
    after = transform.Gradient("main")(mod)
    sizes = {"x": _T(("n", "m"), _F32), "y": _T(("p", "q"), _F32)}
    fixed = transform.UpdateParamStructInfo(lambda v: sizes.get(v.name_hint))(after)
    assert _adjoint_sinfo(fixed, 0) == sizes["x"] and _adjoint_sinfo(fixed, 1) == sizes["y"]
    other = np.ones((4, 1), _F32)
    loss, (gx, gy, gw) = rm.VirtualMachine(rm.compile(fixed))["main_adjoint"](X, other, W)
    np.testing.assert_allclose(loss, np.sum(np.ceil(X) * W))
    np.testing.assert_array_equal(gx, np.zeros((2, 3), _F32))
    np.testing.assert_array_equal(gy, np.zeros((4, 1), _F32))
    np.testing.assert_array_equal(gw, np.ceil(X))


def test_an_unused_piece_of_a_split_of_unknown_shape_gets_zeros_of_its_runtime_shape():
    """``sum(cast(split(x, 2, axis=1)[0]) * w)``: ``w`` on the first half of ``x``'s columns, zeros on the second."""
    x, w = Var("x", _T(None, _F32, ndim=2)), Var("w", _T((2, 3), _F32))

    def build(bb, x, w):
        pieces = bb.emit(op.split(x, 2, axis=1), "t")
        return op.sum(op.multiply(bb.match_cast(bb.emit(TupleGetItem(pieces, 0), "p"), _T((2, 3), _F32), "c"), w))

    after = transform.Gradient("main")(_module([x, w], build))
    _, (gx, _) = rm.interpret(after, "main_adjoint", np.ones((2, 6), _F32), W)
    np.testing.assert_array_equal(gx, np.concatenate([W, np.zeros((2, 3), _F32)], axis=1))


def test_an_unused_field_of_an_ops_tuple_result_of_unknown_shape():
    """Dropout's mask: its adjoint is zeros of the mask's runtime shape (the rule reads the output's only). Not in
    training form, dropout passes ``x`` on with a mask of ones: the gradient is ones (as PyTorch's in eval mode)."""
    x = Var("x", _T(None, _F32, ndim=2))

    def build(bb, x):
        out = bb.emit(op.nn.dropout(x, 0.5), "d")
        return op.sum(bb.match_cast(bb.emit(TupleGetItem(out, 0), "o"), _T((2, 3), _F32), "c"))

    after = transform.Gradient("main")(_module([x], build))
    _, (gx,) = rm.interpret(after, "main_adjoint", X)
    np.testing.assert_array_equal(gx, np.ones((2, 3), _F32))


def test_a_tuple_parameter_with_an_unused_field_of_unknown_shape():
    tp = Var("tp", TupleStructInfo([_T(None, _F32, ndim=2), _T((2, 3), _F32)]))
    after = transform.Gradient("main")(_module([tp], lambda bb, tp: op.sum(bb.emit(TupleGetItem(tp, 1), "q"))))
    assert _adjoint_sinfo(after, 0) == tp.struct_info
    _, ((g0, g1),) = rm.interpret(after, "main_adjoint", (np.ones((5, 2), _F32), W))
    np.testing.assert_array_equal(g0, np.zeros((5, 2), _F32))
    np.testing.assert_array_equal(g1, np.ones((2, 3), _F32))


def test_inputs_without_a_gradient_of_unknown_shape_get_zeros():
    """``batch_norm``'s moving statistics and ``nll_loss``'s class weights: every float parameter is required by
    default, these get zeros (of the runtime shape) as in TVM."""
    x, gamma, beta = Var("x", _T((2, 3), _F32)), Var("gamma", _T((3,), _F32)), Var("beta", _T((3,), _F32))
    mean, var = Var("mean", _T(None, _F32, ndim=1)), Var("var", _T(None, _F32, ndim=1))

    def bn(bb, x, gamma, beta, mean, var):
        out = bb.emit(op.nn.batch_norm(x, gamma, beta, mean, var, training=True), "bn")
        return op.sum(bb.emit(TupleGetItem(out, 0), "o"))

    after = transform.Gradient("main")(_module([x, gamma, beta, mean, var], bn))
    assert _adjoint_sinfo(after, 3) == mean.struct_info
    stats = np.ones((3,), _F32)
    _, grads = rm.interpret(after, "main_adjoint", X, stats, stats, stats, stats)
    np.testing.assert_array_equal(grads[3], np.zeros((3,), _F32))
    np.testing.assert_array_equal(grads[4], np.zeros((3,), _F32))

    targets, weights = Var("t", _T((2,), "int64")), Var("wt", _T(None, _F32, ndim=1))
    after = transform.Gradient("main")(_module([x, targets, weights],
                                               lambda bb, x, t, wt: bb.emit(op.nn.nll_loss(x, t, wt), "l")))
    _, (_, gw) = rm.interpret(after, "main_adjoint", X, np.array([0, 2]), stats)
    np.testing.assert_array_equal(gw, np.zeros((3,), _F32))


def test_a_required_bound_variable_of_unknown_shape_that_never_reaches_the_target():
    """Its zeros are those of its own value, kept in the adjoint for them (it was dropped as dead: a KeyError)."""
    x, w = Var("x", _T(None, _F32, ndim=2)), Var("w", _T((2, 3), _F32))

    def build(bb, x, w):
        bb.emit(op.exp(x), "v")
        return op.sum(op.multiply(bb.match_cast(x, _T((2, 3), _F32), "c"), w))

    after = transform.Gradient("main", require_grads=["v", "w"])(_module([x, w], build))
    _, (gv, gw) = rm.interpret(after, "main_adjoint", X, W)
    np.testing.assert_array_equal(gv, np.zeros((2, 3), _F32))
    np.testing.assert_array_equal(gw, X)


# -- 2. rules and decompositions that need a rank -----------------------------------------------------------------

def _refused(mod) -> str:
    with pytest.raises(GradientError) as info:
        transform.Gradient("main")(mod)
    return str(info.value)


def test_pad_and_topk_of_unknown_rank_are_refused_naming_the_rank():
    x = Var("x", _T(None, _F32, ndim=-1))
    mod = _module([x], lambda bb, x: op.sum(_cast(bb, op.nn.pad(x, (1, 1, 0, 0)), (4, 3))))
    assert _refused(mod) == (
        "Gradient(main): cannot differentiate binding 'y' (relax.nn.pad): its gradient rule needs the rank of 'x', "
        "which has struct info R.Tensor(dtype=\"float32\"); match_cast it to a shape first")
    mod = _module([x], lambda bb, x: op.sum(_cast(bb, op.topk(x, 2, ret_type="values"), (2, 2))))
    assert _refused(mod) == (
        "Gradient(main): cannot differentiate binding 'y' (relax.topk): its gradient rule needs the rank of 'x', "
        "which has struct info R.Tensor(dtype=\"float32\"); match_cast it to a shape first")
    with pytest.raises(gu.ShapeNeeded, match=r"^relax.topk decomposition: the rank of x is unknown$"):
        op.topk.decompose(op.topk(x, 2))


# -- 3. DecomposeOps ----------------------------------------------------------------------------------------------

TOPK = '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(dtype="float32")) -> R.Tensor(dtype="float32"):
        with R.dataflow():
            y = R.topk(x, k=2, ret_type="values")
            R.output(y)
        return y
'''


@pytest.mark.parametrize("pass_", [transform.DecomposeOps(), transform.DecomposeOpsForTraining(),
                                   transform.DecomposeOpsForInference(func_name="main")], ids=lambda p: p.info.name)
def test_decompositions_of_unknown_shapes_name_the_function_binding_and_argument(pass_):
    with pytest.raises(DecomposeError) as info:
        pass_(from_source(TOPK))
    assert isinstance(info.value, ValueError)
    assert str(info.value) == (
        f"{pass_.info.name}(main): cannot decompose binding 'y' (relax.topk): its decomposition needs the rank of 'x', "
        "which has struct info R.Tensor(dtype=\"float32\"); match_cast it to a shape first")
    x = Var("x", _T(None, _F32, ndim=2))
    with pytest.raises(DecomposeError, match=r"\(main\): cannot decompose binding 'y' \(relax.tile\): its "
                                             r"decomposition needs the shape of 'x', which has struct info "
                                             r"R.Tensor\(dtype=\"float32\", ndim=2\); match_cast it to a shape first$"):
        pass_(_module([x], lambda bb, x: bb.emit(op.tile(x, (2, 1)), "y")))


def test_a_composite_inside_a_decomposition_names_the_bindings_own_arguments():
    """The composite that refuses reads a value the outer decomposition built (``lv``): the user can only cast the
    binding's own arguments, so those are named; a refusal none of them lacks is the decomposition's bug (its
    ``ShapeNeeded`` goes on)."""
    x = Var("x", _T(None, _F32, ndim=2))
    nested = dataclasses.replace(op.exp, decompose=lambda call: op.tile(op.exp(call.args[0]), (2, 1)))
    with pytest.raises(DecomposeError) as info:
        transform.DecomposeOps()(_module([x], lambda bb, x: bb.emit(nested(x), "y")))
    assert str(info.value) == (
        "DecomposeOps(main): cannot decompose binding 'y' (relax.exp, through relax.tile): its decomposition needs the "
        "shape of 'x', which has struct info R.Tensor(dtype=\"float32\", ndim=2); match_cast it to a shape first")
    lost = Var("lost", _T(None, _F32, ndim=2))
    buggy = dataclasses.replace(op.exp, decompose=lambda call: op.tile(lost, (2, 1)))
    with pytest.raises(gu.ShapeNeeded, match=r"^relax.tile decomposition: the shape of lost is unknown") as info:
        transform.DecomposeOps()(_module([Var("x", _T((2, 3), _F32))], lambda bb, x: bb.emit(buggy(x), "y")))
    assert not isinstance(info.value, ValueError)


def test_the_command_line_says_it_in_one_line(tmp_path, capsys):
    from relax_mlir.cli import main

    path = tmp_path / "topk.py"
    path.write_text(TOPK)
    assert main(["opt", str(path), "--passes", "DecomposeOpsForTraining"]) == 1
    assert capsys.readouterr().err == (
        "relax-mlir opt: error: DecomposeOpsForTraining(main): cannot decompose binding 'y' (relax.topk): its "
        "decomposition needs the rank of 'x', which has struct info R.Tensor(dtype=\"float32\"); match_cast it to a "
        "shape first\n")


# -- 4. full reductions of unknown shapes -------------------------------------------------------------------------

def test_a_full_reduction_of_an_unknown_shape_has_the_shape_of_a_scalar_as_tvm_infers_it():
    x = Var("x", _T(None, _F32, ndim=2))
    assert op.sum(x).struct_info == _T((), _F32)
    assert op.mean(x, axis=(0, 1)).struct_info == _T((), _F32)
    assert op.std(x).struct_info == _T((), _F32)
    assert op.argmax(x).struct_info == _T((), "int64")
    assert op.max(x, keepdims=True).struct_info == _T((1, 1), _F32)
    assert op.argmin(x, keepdims=True).struct_info == _T((1, 1), "int64")
    # as TVM: only axis=None is known to give 1s; a partial reduction keeps only the rank
    assert op.sum(x, axis=(0, 1), keepdims=True).struct_info == _T(None, _F32, ndim=2)
    assert op.sum(x, axis=0).struct_info == _T(None, _F32, ndim=1)
    assert op.sum(Var("r", _T(None, _F32, ndim=-1))).struct_info == _T((), _F32)


def test_a_full_reduction_of_an_unknown_shape_compiles():
    """Its result had only a rank: the compiler could not allocate it (``result[0] has an unknown shape``)."""
    mod = from_source('''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(dtype="float32", ndim=2)):
        with R.dataflow():
            s = R.sum(x)
            k = R.max(x, keepdims=True)
            R.output(s, k)
        return (s, k)
''')
    assert 's: R.Tensor((), dtype="float32") = R.sum(x)' in mod.script()
    s, k = rm.VirtualMachine(rm.compile(mod))["main"](X)
    np.testing.assert_allclose(s, X.sum(), rtol=1e-6)
    np.testing.assert_array_equal(k, X.max(keepdims=True))


# -- 5. attribute values without a gradient rule ------------------------------------------------------------------

def _scatter_module(*reductions):
    x, i, u = Var("x", _T((3, 3), _F32)), Var("i", _T((2, 3), "int64")), Var("u", _T((2, 3), _F32))

    def build(bb, x, i, u):
        value = x
        for n, reduction in enumerate(reductions):
            value = bb.emit(op.scatter_elements(value, i, u, reduction=reduction), f"y{n}")
        return op.sum(value)

    return _module([x, i, u], build)


def test_scatter_reductions_without_a_rule_are_listed_with_the_ops_without_one():
    assert _refused(_scatter_module("mul", "add", "max")) == (
        "Gradient(main): cannot differentiate: no gradient rule for relax.scatter_elements with reduction 'mul' (only "
        "'update' and 'add' have one) (used by y0); no gradient rule for relax.scatter_elements with reduction 'max' "
        "(only 'update' and 'add' have one) (used by y2)")


def test_the_scatter_rule_called_directly_still_raises_a_type_error():
    call = _scatter_module("min")["main"].body.blocks[0].bindings[0].value
    with pytest.raises(gu.NoGradientRule, match=r"^relax.scatter_elements gradient: no gradient rule for reduction "
                                                  r"'min' \(only 'update' and 'add' have one\)$") as info:
        op.scatter_elements.gradient(call, call, call)
    assert isinstance(info.value, TypeError)
    data, indices = Var("d", _T((3, 3), "int32")), Var("i", _T((2, 3), "int64"))
    int_call = op.scatter_elements(data, indices, Var("u", _T((2, 3), "int32")), reduction="mul")
    assert op.scatter_elements.gradient(int_call, int_call, int_call) == [None, None, None]


def test_a_reduction_without_a_rule_inside_a_decomposition_names_the_binding():
    x, i, u = Var("x", _T((3, 3), _F32)), Var("i", _T((2, 3), "int64")), Var("u", _T((2, 3), _F32))
    composite = dataclasses.replace(op.exp, gradient=gu.through_decomposition,
                                    decompose=lambda call: op.scatter_elements(call.args[0], i, u, reduction="mul"))
    mod = _module([x, i, u], lambda bb, x, i, u: op.sum(bb.emit(composite(x), "y")))
    assert _refused(mod) == (
        "Gradient(main): cannot differentiate binding 'y' (relax.exp): relax.scatter_elements gradient: no gradient "
        "rule for reduction 'mul' (only 'update' and 'add' have one)")


def test_batch_norm_of_unknown_rank_names_the_binding_and_the_data():
    """Training batch norm reduces over every axis but the channel's: without the data's rank it cannot say which, so
    the decomposition refuses naming the binding and ``x`` (it was a bare ``TypeError``)."""
    x = Var("x", _T(None, _F32, ndim=-1))
    stats = [Var(n, _T((3,), _F32)) for n in ("gamma", "beta", "mean", "var")]
    mod = _module([x, *stats], lambda bb, x, *s: bb.emit(op.nn.batch_norm(x, *s, axis=1), "y")[0])
    with pytest.raises(DecomposeError, match=r"^DecomposeOpsForTraining\(main\): cannot decompose binding 'y' "
                                             r"\(relax.nn.batch_norm\): its decomposition needs the rank of 'x'"):
        transform.DecomposeOpsForTraining()(mod)
