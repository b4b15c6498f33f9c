"""Losses (relax_mlir.training.loss) interpreted against NumPy implementations written here.

The references compute in float64 from the float32 inputs; the interpreter computes each op in float64 and rounds
to float32 after every op, so results agree to a few float32 ulps: rtol 1e-6, atol 1e-7.
"""

from __future__ import annotations

import numpy as np
import pytest

from relax_mlir import interpret, op
from relax_mlir.ir import DataflowBlock, IRModule, TensorStructInfo, Var, const
from relax_mlir.testing import finite_difference_gradients, roundtrip
from relax_mlir.training import CategoricalCrossEntropyLoss, CrossEntropyLoss, L1Loss, Loss, MSELoss
from relax_mlir.transform import Gradient

N, C = 5, 4
T = TensorStructInfo
REDUCTIONS = ["mean", "sum", "none"]
TOL = dict(rtol=1e-6, atol=1e-7)


def run(func, *args):
    """Round-trip the loss function's module, then interpret it."""
    name = func.attrs["global_symbol"]
    mod = roundtrip(IRModule({name: func}))
    return interpret(mod, name, *args)


def np_log_softmax(x):
    x = x.astype(np.float64)
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def np_reduce(x, reduction):
    return {"mean": np.mean, "sum": np.sum, "none": lambda a: a}[reduction](x)


def np_nll(logp, t, w, reduction, ignore_index):
    """PyTorch's nll_loss, written out per sample."""
    w = np.ones(logp.shape[1]) if w is None else w.astype(np.float64)
    losses, weights = np.zeros(len(t)), np.zeros(len(t))
    for n, c in enumerate(t):
        if c != ignore_index:
            losses[n], weights[n] = -logp[n, c] * w[c], w[c]
    if reduction == "none":
        return losses
    return losses.sum() if reduction == "sum" else losses.sum() / weights.sum()


@pytest.fixture
def data(rng):
    pred = rng.normal(size=(N, C)).astype(np.float32)
    labels = rng.integers(0, C, size=N).astype(np.int64)
    onehot = np.eye(C, dtype=np.int64)[labels]
    probs = rng.random((N, C)).astype(np.float32)
    probs /= probs.sum(axis=1, keepdims=True)
    weights = rng.uniform(0.5, 2.0, size=C).astype(np.float32)
    return pred, labels, onehot, probs, weights


# -- L1 / MSE ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_l1_loss(rng, reduction):
    p, t = rng.normal(size=(N, C)).astype(np.float32), rng.normal(size=(N, C)).astype(np.float32)
    func = L1Loss(reduction)(T((N, C)), T((N, C)))
    got = run(func, p, t)
    expected = np_reduce(np.abs(p.astype(np.float64) - t), reduction)
    assert got.shape == np.shape(expected) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, **TOL)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mse_loss(rng, reduction):
    p, t = rng.normal(size=(N, C)).astype(np.float32), rng.normal(size=(N, C)).astype(np.float32)
    got = run(MSELoss(reduction)(T((N, C)), T((N, C))), p, t)
    expected = np_reduce((p.astype(np.float64) - t) ** 2, reduction)  # no 1/2 factor; mean over N*C
    np.testing.assert_allclose(got, expected, **TOL)


# -- CrossEntropyLoss, class indices ------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_class_indices(data, reduction, weighted):
    pred, labels, _, _, weights = data
    sinfos = [T((N, C)), T((N,), "int64")] + ([T((C,))] if weighted else [])
    func = CrossEntropyLoss(reduction)(*sinfos)
    got = run(func, pred, labels, *([weights] if weighted else []))
    expected = np_nll(np_log_softmax(pred), labels, weights if weighted else None, reduction, -100)
    np.testing.assert_allclose(got, expected, **TOL)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("ignore_index", [-100, 2])
def test_cross_entropy_ignore_index(data, reduction, ignore_index):
    pred, labels, _, _, weights = data
    labels = labels.copy()
    labels[[1, 3]] = ignore_index
    func = CrossEntropyLoss(reduction, ignore_index=ignore_index)(T((N, C)), T((N,), "int64"), T((C,)))
    got = run(func, pred, labels, weights)
    expected = np_nll(np_log_softmax(pred), labels, weights, reduction, ignore_index)
    np.testing.assert_allclose(got, expected, **TOL)
    if reduction == "none":
        assert got[1] == 0 and got[3] == 0


def test_cross_entropy_everything_ignored_mean_is_nan(data):
    pred = data[0]
    func = CrossEntropyLoss("mean", ignore_index=0)(T((N, C)), T((N,), "int64"))
    assert np.isnan(run(func, pred, np.zeros(N, np.int64)))


# -- CrossEntropyLoss, probabilities / one-hot targets of the predictions' shape ------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("form", ["onehot_int", "onehot_float", "soft"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_probability_targets(data, reduction, form, weighted):
    pred, _, onehot, probs, weights = data
    target = {"onehot_int": onehot, "onehot_float": onehot.astype(np.float32), "soft": probs}[form]
    sinfos = [T((N, C)), T((N, C), str(target.dtype))] + ([T((C,))] if weighted else [])
    got = run(CrossEntropyLoss(reduction)(*sinfos), pred, target, *([weights] if weighted else []))
    # PyTorch's CrossEntropyLoss with class-probability targets: l_n = -sum_c w_c y_nc log p_nc, mean over N.
    w = weights.astype(np.float64) if weighted else np.ones(C)
    per_sample = -(w * target.astype(np.float64) * np_log_softmax(pred)).sum(axis=1)
    np.testing.assert_allclose(got, np_reduce(per_sample, reduction), **TOL)
    assert got.shape == ((N,) if reduction == "none" else ())


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_one_hot_targets_equal_class_indices_without_weights(data, reduction):
    pred, labels, onehot, _, _ = data
    a = run(CrossEntropyLoss(reduction)(T((N, C)), T((N, C), "int64")), pred, onehot)
    b = run(CrossEntropyLoss(reduction)(T((N, C)), T((N,), "int64")), pred, labels)
    np.testing.assert_allclose(a, b, **TOL)


def test_probability_targets_gradient_is_softmax_minus_targets(data):
    pred, _, _, probs, _ = data
    mod = IRModule({"loss": CrossEntropyLoss("sum")(T((N, C), "float64"), T((N, C), "float64"))})
    mod = roundtrip(Gradient("loss", require_grads=mod["loss"].params[0])(mod))
    pred64, probs64 = pred.astype(np.float64), probs.astype(np.float64)
    _, (grad,) = interpret(mod, "loss_adjoint", pred64, probs64)
    softmax = np.exp(np_log_softmax(pred64))
    # d/dx -sum(y * log_softmax(x)) = softmax(x) * sum(y) - y (sum(y) is 1 up to the float32 rounding of probs)
    np.testing.assert_allclose(grad, softmax * probs64.sum(axis=1, keepdims=True) - probs64, rtol=1e-12, atol=1e-15)
    (fd,) = finite_difference_gradients(mod, "loss", [pred64, probs64], [0])
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-7)


# -- CrossEntropyLoss with predictions (N, C, d1, ...): the class axis is 1, as PyTorch's --------------------------
def _class_last(x):
    """(N, C, d1, ...) -> rows (N * d1 * ..., C): each row one item's class scores, for the (N, C) references."""
    return np.moveaxis(x, 1, -1).reshape(-1, x.shape[1])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [-100, 2])
@pytest.mark.parametrize("shape", [(2, C, 3), (3, C, 2, 3)])
def test_cross_entropy_class_indices_of_rank_3_and_more_pick_along_axis_1(rng, reduction, weighted, ignore_index,
                                                                          shape):
    # log_softmax ran over the last axis while nll_loss picked the class along axis 1: neither PyTorch's value
    # nor the class-last one
    pred = rng.normal(size=shape).astype(np.float32)
    labels = rng.integers(0, C, size=shape[:1] + shape[2:])
    labels.flat[::3] = ignore_index
    weights = rng.uniform(0.5, 2.0, size=C).astype(np.float32)
    sinfos = [T(shape), T(labels.shape, "int64")] + ([T((C,))] if weighted else [])
    got = run(CrossEntropyLoss(reduction, ignore_index)(*sinfos), pred, labels, *([weights] if weighted else []))
    expected = np_nll(np_log_softmax(_class_last(pred)), labels.reshape(-1), weights if weighted else None,
                      reduction, ignore_index)
    np.testing.assert_allclose(got, expected.reshape(labels.shape) if reduction == "none" else expected, **TOL)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_probability_targets_of_rank_3_sum_over_axis_1(rng, reduction, weighted):
    shape = (2, C, 3, 2)
    pred = rng.normal(size=shape).astype(np.float32)
    probs = rng.random(shape).astype(np.float32)
    probs /= probs.sum(axis=1, keepdims=True)
    weights = rng.uniform(0.5, 2.0, size=C).astype(np.float32)
    sinfos = [T(shape), T(shape)] + ([T((C,))] if weighted else [])
    got = run(CrossEntropyLoss(reduction)(*sinfos), pred, probs, *([weights] if weighted else []))
    w = weights.astype(np.float64) if weighted else np.ones(C)
    per_item = -(w * _class_last(probs).astype(np.float64) * np_log_softmax(_class_last(pred))).sum(axis=1)
    per_item = per_item.reshape(2, 3, 2)  # PyTorch: l[n, d1, d2], "mean" over all of them
    np.testing.assert_allclose(got, np_reduce(per_item, reduction), **TOL)


@pytest.mark.parametrize("form", ["indices", "probabilities"])
def test_cross_entropy_gradient_of_rank_3_is_softmax_minus_targets_along_axis_1(rng, form):
    shape = (2, C, 3)
    pred = rng.normal(size=shape)
    labels = rng.integers(0, C, size=(2, 3))
    labels[0, 1] = -100
    onehot = np.moveaxis(np.eye(C)[np.where(labels < 0, 0, labels)], -1, 1)  # (N, C, d), ignored items below
    targets = labels if form == "indices" else onehot
    mod = IRModule({"loss": CrossEntropyLoss("sum")(T(shape, "float64"), T(targets.shape, str(targets.dtype)))})
    mod = roundtrip(Gradient("loss", require_grads=mod["loss"].params[0])(mod))
    _, (grad,) = interpret(mod, "loss_adjoint", pred, targets)
    softmax = np.exp(pred - pred.max(axis=1, keepdims=True))
    softmax /= softmax.sum(axis=1, keepdims=True)
    expected = softmax - onehot
    if form == "indices":
        expected[0, :, 1] = 0  # an ignored target contributes nothing
    np.testing.assert_allclose(grad, expected, rtol=1e-12, atol=1e-14)
    (fd,) = finite_difference_gradients(mod, "loss", [pred, targets], [0])
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-7)


def test_cross_entropy_class_last_targets_are_refused_naming_the_class_axis():
    with pytest.raises(ValueError, match=r"cross_entropy_loss: class-index targets .* do not fit predictions .*: the "
                                         r"class axis is axis 1 \(predictions \(N, C, d1, \.\.\.\), targets \(N, d1, "
                                         r"\.\.\.\), as PyTorch\), so the targets' shape must be \(2, 3\); move a last "
                                         r"class axis to axis 1 first"):
        CrossEntropyLoss()(T((2, 4, 3)), T((2, 4), "int64"))


# -- CategoricalCrossEntropyLoss --------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_categorical_cross_entropy_product_form(data, reduction, weighted):
    pred, _, onehot, _, weights = data
    sinfos = [T((N, C)), T((N, C), "int64")] + ([T((C,))] if weighted else [])
    got = run(CategoricalCrossEntropyLoss(reduction)(*sinfos), pred, onehot, *([weights] if weighted else []))
    lv = -np_log_softmax(pred) * onehot
    if weighted:
        lv = lv * weights
    np.testing.assert_allclose(got, np_reduce(lv, reduction), **TOL)  # "mean" over N*C elements


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_categorical_cross_entropy_ignore_index_uses_nll(data, reduction):
    pred, labels, onehot, _, weights = data
    func = CategoricalCrossEntropyLoss(reduction, ignore_index=1)(T((N, C)), T((N, C), "int32"), T((C,)))
    got = run(func, pred, onehot.astype(np.int32), weights)
    expected = np_nll(np_log_softmax(pred), onehot.argmax(axis=1), weights, reduction, 1)
    np.testing.assert_allclose(got, expected, **TOL)


def test_categorical_cross_entropy_float64_predictions(data):
    pred, _, onehot, _, _ = data
    got = run(CategoricalCrossEntropyLoss("sum")(T((N, C), "float64"), T((N, C), "int64")), pred.astype(np.float64),
              onehot)
    np.testing.assert_allclose(got, (-np_log_softmax(pred.astype(np.float64)) * onehot).sum(), rtol=1e-12)


# -- the function's form and the checks ---------------------------------------------------------------------
def test_function_form():
    func = CrossEntropyLoss()(T((N, C)), T((N,), "int64"), T((C,)))
    assert func.attrs["global_symbol"] == "cross_entropy_loss"
    assert [p.name_hint for p in func.params] == ["predictions", "targets", "weights"]
    assert len(func.body.blocks) == 1 and isinstance(func.body.blocks[0], DataflowBlock)
    assert func.ret_struct_info == T((), "float32")
    names = {L1Loss(): "l1_loss", MSELoss(): "mse_loss",
             CategoricalCrossEntropyLoss(): "categorical_cross_entropy_loss"}
    for loss, name in names.items():
        f = loss(T((N, C)), T((N, C), "int64" if name.startswith("categorical") else "float32"))
        assert f.attrs["global_symbol"] == name == loss.loss_name
        assert loss.num_backbone_outputs == 1


def test_vars_keep_their_names_and_are_copied():
    pred, labels = Var("logits", T((N, C))), Var("labels", T((N,), "int64"))
    func = CrossEntropyLoss()(pred, labels)
    assert [p.name_hint for p in func.params] == ["logits", "labels"]
    assert func.params[0] is not pred and func.params[0].struct_info == pred.struct_info


def test_bad_arguments():
    with pytest.raises(ValueError, match="reduction must be one of 'mean', 'sum', 'none', got 'avg'"):
        CrossEntropyLoss("avg")
    with pytest.raises(ValueError, match="reduction must be one of"):
        Loss("my_loss", 1, "max")
    with pytest.raises(TypeError, match="targets must be one-hot int/uint tensors, got dtype float32"):
        CategoricalCrossEntropyLoss()(T((N, C)), T((N, C)))
    with pytest.raises(TypeError, match="targets must be class indices"):
        CrossEntropyLoss()(T((N, C)), T((N,), "float32"))
    with pytest.raises(ValueError, match=r"must have the predictions' shape"):
        CrossEntropyLoss()(T((N, C)), T((N, C + 1), "int64"))
    with pytest.raises(TypeError, match="predictions must be a relax Var or StructInfo, got tuple"):
        L1Loss()((N, C), T((N, C)))
    with pytest.raises(TypeError, match="ignore_index must be an int"):
        CrossEntropyLoss(ignore_index=1.5)
    with pytest.raises(NotImplementedError, match="must implement compute"):
        Loss("my_loss", 1)(T((N,)), T((N,)))


class LogSquareLoss(Loss):
    """The subclassing example of Loss's docstring."""

    def __init__(self, reduction="mean"):
        super().__init__("log_square_loss", 1, reduction)

    def compute(self, bb, predictions, targets):
        d = bb.emit(op.subtract(predictions, targets), "diff")
        return self._with_reduction(op.log(op.add(op.multiply(d, d), const(1.0, "float32"))))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_custom_loss_subclass(rng, reduction):
    p, t = rng.normal(size=(N, C)).astype(np.float32), rng.normal(size=(N, C)).astype(np.float32)
    func = LogSquareLoss(reduction)(T((N, C)), T((N, C)))
    assert func.attrs["global_symbol"] == "log_square_loss"
    expected = np_reduce(np.log((p.astype(np.float64) - t) ** 2 + 1), reduction)
    np.testing.assert_allclose(run(func, p, t), expected, **TOL)


@pytest.mark.parametrize("loss", [MSELoss, L1Loss])
@pytest.mark.parametrize("pred, targ", [((4, 1), (4,)), ((4,), (4, 1)), ((4, 3), (1, 3)), (("n", 1), ("n", 3)),
                                        ((4, 3), (4, 2))])
def test_regression_losses_refuse_targets_that_would_broadcast(loss, pred, targ):
    # predictions (4, 1) and targets (4,) made a (4, 4) loss: 2.5 for equal values instead of 0 (PyTorch warns)
    with pytest.raises(ValueError, match=r"_loss: targets .* and predictions .* differ in shape"):
        loss()(T(pred), T(targ))


def test_regression_losses_take_symbolic_sizes(rng):
    p = rng.standard_normal((5, 3)).astype(np.float32)
    t = rng.standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(run(MSELoss("sum")(T(("n", 3)), T(("n", 3))), p, t), np.sum((p - t) ** 2), rtol=1e-5)
