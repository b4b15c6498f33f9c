"""append_loss / AppendLoss: the joined function equals the loss applied to the backbone's output, takes its
parameters in the documented order, and keeps the backbone's extra outputs (states) after the loss.

Numbers are float64 compositions of the interpreter's own results (agree to 1e-12) or independent NumPy
(float32 inputs, computed in float64: rtol 1e-5 for sums over a batch).
"""

from __future__ import annotations

import numpy as np
import pytest

from relax_mlir import interpret, op, transform
from relax_mlir.ir import (BlockBuilder, DataflowBlock, DataflowVar, IRModule, TensorStructInfo, Tuple, Var,
                           post_order_visit)
from relax_mlir.testing import roundtrip
from relax_mlir.training import SGD, CrossEntropyLoss, Loss, MSELoss, append_loss
from relax_mlir.transform import AppendLoss, AppendLossError

T = TensorStructInfo
B, D, H, K = 4, 5, 6, 3


def mlp_backbone(dtype="float32", with_state=False, dataflow=True):
    """(x, w0, b0, w1, b1[, running]) -> prediction (or (prediction, new_running))."""
    x = Var("x", T((B, D), dtype))
    params = [Var("w0", T((D, H), dtype)), Var("b0", T((H,), dtype)), Var("w1", T((H, K), dtype)),
              Var("b1", T((K,), dtype))]
    state = [Var("running", T((K,), dtype))] if with_state else []
    bb = BlockBuilder()
    with bb.function("backbone", [x, *params, *state]):
        if dataflow:
            bb.begin_dataflow_block()
        emit_out = bb.emit_output if dataflow else bb.emit
        h = bb.emit(op.nn.relu(op.add(op.matmul(x, params[0]), params[1])))
        out = emit_out(op.add(op.matmul(h, params[2]), params[3]), "out")
        outputs = [out]
        if with_state:
            outputs.append(emit_out(op.add(state[0], op.mean(out, axis=0)), "new_running"))
        if dataflow:
            bb.end_block()
        bb.emit_func_output(outputs[0] if len(outputs) == 1 else Tuple(outputs))
    return bb.get()["backbone"]


def inputs(rng, dtype=np.float32, with_state=False):
    arrays = [rng.normal(size=(B, D)), rng.normal(size=(D, H)) * 0.5, rng.normal(size=H) * 0.1,
              rng.normal(size=(H, K)) * 0.5, rng.normal(size=K) * 0.1]
    if with_state:
        arrays.append(rng.normal(size=K))
    return [a.astype(dtype) for a in arrays]


def test_composition_and_param_order(rng):
    backbone = mlp_backbone("float64")
    loss = MSELoss("sum")(T((B, K), "float64"), T((B, K), "float64"))
    joined = append_loss(backbone, loss)
    mod = roundtrip(IRModule({"backbone": backbone, "mse_loss": loss, "backbone_loss": joined}))
    assert [p.name_hint for p in joined.params] == ["x", "w0", "b0", "w1", "b1", "targets"]
    assert len(joined.body.blocks) == 1 and isinstance(joined.body.blocks[0], DataflowBlock)
    args = inputs(rng, np.float64)
    targets = rng.normal(size=(B, K))
    expected = interpret(mod, "mse_loss", interpret(mod, "backbone", *args), targets)
    np.testing.assert_allclose(interpret(mod, "backbone_loss", *args, targets), expected, rtol=1e-12)
    # The prediction is no longer an output: it became a dataflow variable; the loss is the only output.
    out_binding = [b for b in joined.body.blocks[0].bindings if b.var.name_hint == "out"][0]
    assert isinstance(out_binding.var, DataflowVar)
    assert joined.body.body.name_hint == "loss" and not isinstance(joined.body.body, DataflowVar)


def test_fresh_variables(rng):
    backbone, loss = mlp_backbone(), MSELoss()(T((B, K)), T((B, K)))
    joined = append_loss(backbone, loss)
    seen: set = set()
    post_order_visit(joined, lambda e: seen.add(e) if isinstance(e, Var) else None)
    original: set = set()
    for f in (backbone, loss):
        post_order_visit(f, lambda e: original.add(e) if isinstance(e, Var) else None)
    assert not seen & original


def test_extra_targets_and_weights_follow_backbone_params(rng):
    backbone = mlp_backbone()
    loss = CrossEntropyLoss("mean")(T((B, K)), T((B,), "int64"), T((K,)))
    joined = append_loss(backbone, loss)
    roundtrip(IRModule({"f": joined}))
    assert [p.name_hint for p in joined.params] == ["x", "w0", "b0", "w1", "b1", "targets", "weights"]


def test_states_are_returned_after_the_loss(rng):
    backbone = mlp_backbone("float64", with_state=True)
    loss = MSELoss("mean")(T((B, K), "float64"), T((B, K), "float64"))
    joined = append_loss(backbone, loss, num_backbone_outputs=1, new_func_name="train_loss")
    mod = roundtrip(IRModule({"backbone": backbone, "loss": loss, "train_loss": joined}))
    assert joined.attrs["global_symbol"] == "train_loss"
    args, targets = inputs(rng, np.float64, with_state=True), rng.normal(size=(B, K))
    pred, new_running = interpret(mod, "backbone", *args)
    got_loss, got_running = interpret(mod, "train_loss", *args, targets)
    np.testing.assert_allclose(got_loss, interpret(mod, "loss", pred, targets), rtol=1e-12)
    np.testing.assert_allclose(got_running, new_running, rtol=1e-12)


class TwoOutputLoss(Loss):
    """A loss of two backbone outputs: sum((a - t)^2) + sum(b)."""

    def __init__(self):
        super().__init__("two_output_loss", 2, "sum")

    def __call__(self, a, b, targets):
        return self._make_function([Var("a", a), Var("b", b), Var("targets", targets)])

    def compute(self, bb, a, b, targets):
        d = bb.emit(op.subtract(a, targets))
        return op.add(op.sum(op.multiply(d, d)), op.sum(b))


def test_num_backbone_outputs_two(rng):
    backbone = mlp_backbone("float64", with_state=True)  # returns (out, new_running)
    loss = TwoOutputLoss()(T((B, K), "float64"), T((K,), "float64"), T((B, K), "float64"))
    joined = append_loss(backbone, loss, num_backbone_outputs=2)
    mod = roundtrip(IRModule({"backbone": backbone, "loss": loss, "joined": joined}))
    assert [p.name_hint for p in joined.params] == ["x", "w0", "b0", "w1", "b1", "running", "targets"]
    args, targets = inputs(rng, np.float64, with_state=True), rng.normal(size=(B, K))
    pred, running = interpret(mod, "backbone", *args)
    expected = ((pred - targets) ** 2).sum() + running.sum()
    np.testing.assert_allclose(interpret(mod, "joined", *args, targets), expected, rtol=1e-12)


def test_backbone_without_dataflow_block(rng):
    backbone = mlp_backbone("float64", dataflow=False)
    loss = MSELoss("sum")(T((B, K), "float64"), T((B, K), "float64"))
    joined = append_loss(backbone, loss)
    mod = roundtrip(IRModule({"backbone": backbone, "loss": loss, "joined": joined}))
    assert [type(b) for b in joined.body.blocks][-1] is DataflowBlock
    args, targets = inputs(rng, np.float64), rng.normal(size=(B, K))
    expected = interpret(mod, "loss", interpret(mod, "backbone", *args), targets)
    np.testing.assert_allclose(interpret(mod, "joined", *args, targets), expected, rtol=1e-12)


def test_append_loss_pass():
    mod = IRModule({"predict": mlp_backbone()})
    loss = MSELoss()(T((B, K)), T((B, K)))
    out = AppendLoss("predict", loss)(mod)
    roundtrip(out)
    assert list(out) == ["predict", "predict_loss"] and out["predict"] is mod["predict"]
    assert out["predict_loss"].attrs["global_symbol"] == "predict_loss"
    assert AppendLoss("predict", loss).info.name == "AppendLoss"
    named = transform.AppendLoss(mod.get_global_var("predict"), loss, new_func_name="loss")(mod)
    assert "loss" in named and named["loss"].attrs["global_symbol"] == "loss"


def test_errors():
    backbone = mlp_backbone()
    with pytest.raises(AppendLossError, match=r"must return a scalar \(0-d tensor\) Var"):
        append_loss(backbone, MSELoss("none")(T((B, K)), T((B, K))))
    with pytest.raises(AppendLossError, match=r"backbone output 0 \(out\) is .*\(4, 3\).* but loss parameter 0 "
                                              r"\(predictions\) is .*\(4, 2\)"):
        append_loss(backbone, MSELoss()(T((B, 2)), T((B, 2))))
    with pytest.raises(AppendLossError, match="returns 1 value\\(s\\), fewer than num_backbone_outputs=2"):
        append_loss(backbone, TwoOutputLoss()(T((B, K)), T((K,)), T((B, K))), num_backbone_outputs=2)
    with pytest.raises(AppendLossError, match="the module has no function 'main'"):
        AppendLoss("main", MSELoss()(T((B, K)), T((B, K))))(IRModule({"predict": backbone}))


# -- the tutorial's low-level path (Method 2), at the level of these pieces ----------------------------------
def test_tutorial_low_level_path(rng):
    """CrossEntropyLoss(sum) on one-hot int labels, append_loss, Gradient, SGD(0.1) on all-ones parameters, one
    step; checked against a NumPy MLP forward/backward written here."""
    backbone = mlp_backbone()
    out_sinfo, label_sinfo = T((B, K), "float32"), T((B, K), "int64")
    func = CrossEntropyLoss(reduction="sum")(out_sinfo, label_sinfo)
    mod = IRModule({"backbone": backbone})
    mod["loss"] = append_loss(mod["backbone"], func)
    params = mod["loss"].params[1:5]  # params[0] is x
    mod = transform.Gradient(mod.get_global_var("loss"), require_grads=params)(mod)
    opt = SGD(0.1).init(list(params))
    mod["SGD"] = opt.get_function()
    mod = roundtrip(mod)

    param_arrays = tuple(np.ones(tuple(p.struct_info.shape), np.float32) * 0.1 for p in params)
    x = rng.normal(size=(B, D)).astype(np.float32)
    y = np.eye(K, dtype=np.int64)[rng.integers(0, K, size=B)]
    loss, grads = interpret(mod, "loss_adjoint", x, *param_arrays, y)  # the loss's own order: (x, params, y)
    new_params, opt.state = interpret(mod, "SGD", param_arrays, grads, opt.state)

    w0, b0, w1, b1 = (a.astype(np.float64) for a in param_arrays)
    pre = x @ w0 + b0
    h = np.maximum(pre, 0)
    logits = h @ w1 + b1
    logp = logits - logits.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    np.testing.assert_allclose(loss, -(y * logp).sum(), rtol=1e-5)
    d_logits = np.exp(logp) - y
    d_h = d_logits @ w1.T * (pre >= 0)  # relu'(0) = 1, as TVM
    expected_grads = [x.T @ d_h, d_h.sum(0), h.T @ d_logits, d_logits.sum(0)]
    for g, e in zip(grads, expected_grads):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    for p, g, new in zip(param_arrays, grads, new_params):
        np.testing.assert_allclose(new, p - np.float32(0.1) * g, rtol=1e-7, atol=1e-7)
    assert int(opt.state[0]) == 1 and len(new_params) == len(grads) == 4
