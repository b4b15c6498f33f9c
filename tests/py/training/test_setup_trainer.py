"""SetupTrainer and Trainer: the training module's structure, one step against a hand-written NumPy step,
states (batch norm), dropout keys, checkpoints that resume bit for bit, and bad batches."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

from relax_mlir.ir import Call, GlobalVar, TensorStructInfo
from relax_mlir.models import cnn, mlp
from relax_mlir.testing import roundtrip
from relax_mlir.training import SetupTrainer, Trainer
from relax_mlir.training.loss import CrossEntropyLoss
from relax_mlir.training.optimizer import SGD, Adam

B, SIZES = 8, (6, 5, 3)


def _setup(optimizer=None, reduction="sum"):
    return SetupTrainer(CrossEntropyLoss(reduction=reduction), optimizer or SGD(0.05, weight_decay=0.01),
                        [TensorStructInfo((B, SIZES[-1]), "float32"), TensorStructInfo((B,), "int64")])


def _batch(seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(B, SIZES[0])).astype(np.float32), rng.integers(0, SIZES[-1], size=B)


def test_training_module_structure():
    mod = _setup()(mlp(B, SIZES))
    for name in ("backbone", "predict", "loss", "loss_adjoint", "optimizer", "update_params"):
        assert name in mod, name
    assert mod.attrs["input_num"] == 1 and mod.attrs["param_num"] == 4 and mod.attrs["state_num"] == 0
    assert [a.shape for a in mod.attrs["optim_state"]] == [()]  # SGD: num_steps
    step = mod["update_params"]
    calls = [b for blk in step.blocks for b in blk.bindings
             if isinstance(b.value, Call) and isinstance(b.value.op, GlobalVar)]
    assert not calls, "update_params must be one function (calls inlined), to compile to one native function"
    roundtrip(mod)


def _numpy_step(x, y, params, lr, wd):
    """The MLP's summed softmax cross-entropy, its gradient and SGD with coupled weight decay, by hand."""
    w0, b0, w1, b1 = [p.astype(np.float64) for p in params]
    h_pre = x @ w0 + b0
    h = np.maximum(h_pre, 0)
    z = h @ w1 + b1
    z = z - z.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    loss = -logp[np.arange(len(y)), y].sum()
    dz = np.exp(logp)
    dz[np.arange(len(y)), y] -= 1
    gw1, gb1 = h.T @ dz, dz.sum(0)
    dh = (dz @ w1.T) * (h_pre >= 0)
    gw0, gb0 = x.T @ dh, dh.sum(0)
    new = [p - lr * (wd * p + g) for p, g in zip((w0, b0, w1, b1), (gw0, gb0, gw1, gb1))]
    return loss, new


@pytest.mark.parametrize("target", ["numpy", "cpu"])
def test_one_step_matches_a_hand_written_numpy_step(target):
    trainer = Trainer(mlp(B, SIZES), 4, _setup()).build(target=target)
    trainer.xavier_uniform_init_params(seed=3)
    before = [a.copy() for a in trainer.params]
    x, y = _batch()
    loss = trainer.update_params(x, y)
    want_loss, want_params = _numpy_step(x.astype(np.float64), y, before, 0.05, 0.01)
    # float32 arithmetic against a float64 reference: relative error ~1e-6 on these magnitudes
    assert float(loss.numpy()) == pytest.approx(want_loss, rel=1e-5)
    for got, want in zip(trainer.params, want_params):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert trainer.step == 1 and int(trainer.optim_state[0]) == 1


@pytest.mark.parametrize("form", ["lists", "arrays", "tuple"])
def test_tvm_update_takes_inputs_and_targets_as_lists_or_arrays(form):
    trainer = Trainer(mlp(B, SIZES), 4, _setup()).build(target="numpy")
    trainer.xavier_uniform_init_params(seed=3)
    before = [a.copy() for a in trainer.params]
    x, y = _batch()
    call = {"lists": lambda: trainer.update([x], [y]), "arrays": lambda: trainer.update(x, y),
            "tuple": lambda: trainer.update((x,), (y,))}[form]
    loss = call()
    want_loss, want_params = _numpy_step(x.astype(np.float64), y, before, 0.05, 0.01)
    assert float(loss.numpy()) == pytest.approx(want_loss, rel=1e-5)  # float32 against float64, as above
    for got, want in zip(trainer.params, want_params):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"^Trainer.update: expected 1 input\(s\) \(x\) and 1 target\(s\) "
                                         r"\(targets\), got 2 and 1$"):
        trainer.update([x, x], [y])


def test_compiled_and_interpreted_training_agree():
    runs = []
    for target in ("numpy", "cpu"):
        trainer = Trainer(mlp(B, SIZES), 4, _setup(Adam(0.01))).build(target=target)
        trainer.xavier_uniform_init_params(seed=1)
        runs.append([float(trainer.update_params(*_batch(i)).numpy()) for i in range(5)])
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-5)  # float32, different summation orders


def test_states_are_updated_and_used_for_prediction():
    classes = 3
    setup = SetupTrainer(CrossEntropyLoss(reduction="mean"), SGD(0.1),
                         [TensorStructInfo((4, classes), "float32"), TensorStructInfo((4,), "int64")])
    trainer = Trainer(cnn(4, (1, 4, 4), (2,), classes), None, setup).build(target="numpy")
    assert trainer.state_num == 2 and [v.name_hint for v in trainer.state_vars] == ["bn0_mean", "bn0_var"]
    trainer.xavier_uniform_init_params()
    trainer.load_states({"bn0_mean": np.zeros(2, np.float32), "bn0_var": np.ones(2, np.float32)})
    rng = np.random.default_rng(0)
    x = rng.normal(2.0, 3.0, size=(4, 1, 4, 4)).astype(np.float32)
    p0 = trainer.predict(x).numpy()
    trainer.update_params(x, np.array([0, 1, 2, 0]))
    mean = trainer.export_states()["bn0_mean"].numpy()
    assert np.all(mean != 0), "the running mean moves toward the batch mean (momentum 0.1)"
    p1 = trainer.predict(x).numpy()
    assert not np.allclose(p0, p1)


def test_save_load_continue_is_bit_identical(tmp_path):
    def make():
        t = Trainer(mlp(B, SIZES), 4, _setup(Adam(0.01))).build(target="cpu")
        t.xavier_uniform_init_params(seed=5)
        return t

    straight = make()
    for i in range(6):
        straight.update_params(*_batch(i))
    first = make()
    for i in range(3):
        first.update_params(*_batch(i))
    path = str(tmp_path / "ckpt.npz")
    first.save(path)
    resumed = make()
    resumed.load(path)
    assert resumed.step == 3
    for i in range(3, 6):
        resumed.update_params(*_batch(i))
    for a, b in zip(straight.params + straight.optim_state, resumed.params + resumed.optim_state):
        np.testing.assert_array_equal(a, b)


def test_save_is_atomic(tmp_path, monkeypatch):
    trainer = Trainer(mlp(B, SIZES), 4, _setup()).build(target="numpy")
    trainer.xavier_uniform_init_params()
    path = str(tmp_path / "ckpt.npz")
    trainer.save(path)
    before = open(path, "rb").read()

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", broken)
    trainer.update_params(*_batch())
    with pytest.raises(OSError, match="disk full"):
        trainer.save(path)
    assert open(path, "rb").read() == before, "a failed save must leave the old checkpoint intact"
    assert [f for f in os.listdir(tmp_path) if f != "ckpt.npz"] == [], "no temporary file left behind"


def test_bad_batches_are_refused_before_native_code():
    trainer = Trainer(mlp(B, SIZES), 4, _setup()).build(target="cpu")
    trainer.zero_init_params()
    x, y = _batch()
    with pytest.raises(ValueError, match=r"'x': expected shape \(8, 6\), got \(8, 7\)"):
        trainer.update_params(np.zeros((B, 7), np.float32), y)
    with pytest.raises(ValueError, match=r"'x': expected dtype float32, got complex64"):
        trainer.update_params(x.astype(np.complex64), y)
    with pytest.raises(ValueError, match=r"labels outside the 3 classes \[0, 3\): \[3, 7\]"):
        trainer.update_params(x, np.array([0, 1, 3, 7, 0, 0, 0, 0]))
    with pytest.raises(ValueError, match=r"expected 1 input\(s\) and 1 target\(s\)"):
        trainer.update_params(x)
    assert trainer.step == 0


def test_misuse_is_reported():
    with pytest.raises(ValueError, match="needs the attributes param_num, state_num"):
        _setup()(mlp(B, SIZES).without_attr("param_num").without_attr("state_num"))
    trainer = Trainer(mlp(B, SIZES), 4, _setup())
    with pytest.raises(RuntimeError, match="call build\\(\\) first"):
        trainer.update_params(*_batch())
    trainer.build(target="numpy")
    with pytest.raises(RuntimeError, match="initialise or load the parameters first"):
        trainer.predict(_batch()[0])
    with pytest.raises(KeyError, match="unknown name\\(s\\) 'w9'"):
        trainer.load_params({"w9": np.zeros(1)})
    with pytest.raises(ValueError, match="'w0' must be float32 of shape \\(6, 5\\), got float64 \\(5, 6\\)"):
        trainer.load_params([np.zeros((5, 6)), np.zeros(5), np.zeros((5, 3)), np.zeros(3)])
    with pytest.raises(ValueError, match="'b0' must be float32 of shape \\(5,\\): expected dtype float32, got str32"):
        trainer.load_params([np.zeros((6, 5)), np.array(["a"] * 5), np.zeros((5, 3)), np.zeros(3)])
    # float64 values (NumPy's default) are rounded to the parameter's float32 once, as compiled calls convert them
    trainer.load_params([np.full((6, 5), 0.1), [0.5] * 5, np.zeros((5, 3)), np.zeros(3, np.float16)])
    w0 = trainer.export_params()["w0"].numpy()
    assert w0.dtype == np.float32 and (w0 == np.float32(0.1)).all()
    assert trainer.xaiver_uniform_init_params.__func__ is Trainer.xavier_uniform_init_params


def test_models_say_how_their_states_start_and_foreign_checkpoints_are_refused(tmp_path):
    setup = SetupTrainer(CrossEntropyLoss(), SGD(0.1),
                         [TensorStructInfo((4, 3), "float32"), TensorStructInfo((4,), "int64")])
    trainer = Trainer(cnn(4, (1, 4, 4), (2,), 3), None, setup)
    states = trainer.export_states()
    np.testing.assert_array_equal(states["bn0_var"], [1, 1])
    np.testing.assert_array_equal(states["bn0_mean"], [0, 0])
    other = Trainer(mlp(B, SIZES), 4, _setup()).build(target="numpy")
    other.zero_init_params()
    path = str(tmp_path / "mlp.npz")
    other.save(path)
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask, "a checkpoint gets the usual file permissions"
    with pytest.raises(ValueError, match=r"checkpoint of another model: it lacks param/conv0_weight"):
        trainer.load(path)


def test_legalize_check_names_every_op_without_a_lowering():
    from relax_mlir.ir import BlockBuilder, TensorStructInfo, Var
    from relax_mlir.op import nn
    from relax_mlir.op.registry import Op
    from relax_mlir.training.setup_trainer import check_lowerable
    from relax_mlir.transform import LegalizeOps

    # Not registered (the registry tests must not see it): an op with neither a lowering nor a decomposition.
    opaque = Op(name="relax.test_opaque", inputs=("x",), infer=lambda args, attrs: args[0], reference=lambda x: x)
    x = Var("x", TensorStructInfo((2, 4), "float32"))
    g, b = Var("g", TensorStructInfo((4,), "float32")), Var("b", TensorStructInfo((4,), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x, g, b]):
        y = bb.emit(nn.layer_norm(x, g, b, axes=[1]))  # a composite: compiled through its decomposition
        bb.emit_func_output(bb.emit(opaque(y)))
    mod = bb.get()
    with pytest.raises(ValueError, match=r"no lowering for relax\.test_opaque \(in main\); give one"):
        check_lowerable(mod)
    check_lowerable(mod, skip=("main",))
    check_lowerable(LegalizeOps({opaque: lambda lc, op: lc.inputs[0]})(mod))


DROPOUT_BACKBONE = '''
@I.ir_module
class Module:
    I.module_attrs({"param_num": 1, "state_num": 0})

    @R.function
    def backbone(x: R.Tensor((8, 6), "float32"), w: R.Tensor((6, 3), "float32")):
        with R.dataflow():
            h = R.nn.dropout(x, rate=0.5)
            h0 = h[0]
            out = R.matmul(h0, w)
            R.output(out)
        return out
'''


def test_setup_trainer_records_dropout_keys_and_ignore_index_for_trainer():
    from relax_mlir.script import from_source

    plain = _setup()(mlp(B, SIZES))
    assert plain.attrs["rng_key_num"] == 0 and plain.attrs["ignore_index"] == -100
    mod = SetupTrainer(CrossEntropyLoss(ignore_index=7), SGD(0.1),
                       [TensorStructInfo((B, 3), "float32"), TensorStructInfo((B,), "int64")])(
        from_source(DROPOUT_BACKBONE))
    assert mod.attrs["rng_key_num"] == 1 and mod.attrs["ignore_index"] == 7
    roundtrip(mod)
    trainer = Trainer(mod).build("numpy")
    assert trainer.has_rng_key
    trainer.xavier_uniform_init_params(0)
    x, y = _batch()
    y = y % 3
    y[0] = 7  # outside the 3 classes, but the ignored label: accepted because the module records it
    assert np.isfinite(trainer.update_params(x, y))
    y[1] = 5
    with pytest.raises(ValueError, match=r"labels outside the 3 classes \[0, 3\): \[5\]"):
        trainer.update_params(x, y)


# A TVM-style batch-norm backbone: the dataflow block builds batch_norm's tuple, the function projects its fields
# after the block. CanonicalizeBindings used to resolve ``bn[1]`` to a dataflow variable of the block (after
# DecomposeOpsForTraining the tuple is written out in place) and SetupTrainer failed with a WellFormedError.
BN_BACKBONE = """
@I.ir_module
class Module:
    I.module_attrs({"param_num": 3, "state_num": 2})

    @R.function
    def backbone(x: R.Tensor((4, 3), "float32"), w: R.Tensor((3, 2), "float32"), g: R.Tensor((2,), "float32"),
                 b: R.Tensor((2,), "float32"), mean: R.Tensor((2,), "float32"), var: R.Tensor((2,), "float32")):
        with R.dataflow():
            lv = R.matmul(x, w)
            bn = R.nn.batch_norm(lv, g, b, mean, var, axis=1)
            out = R.nn.relu(bn[0])
            R.output(out, bn)
        return (out, bn[1], bn[2])
"""


def _bn_numpy_step(x, y, w, g, b, mean, var):
    """Loss and new running statistics of BN_BACKBONE + summed cross-entropy, by hand (float64)."""
    h = x @ w
    mu, sigma2 = h.mean(axis=0), h.var(axis=0)
    z = np.maximum((h - mu) / np.sqrt(sigma2 + 1e-5) * g + b, 0)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return -logp[np.arange(len(y)), y].sum(), 0.9 * mean + 0.1 * mu, 0.9 * var + 0.1 * sigma2


def test_a_tuple_built_in_a_block_and_projected_after_it_trains():
    from relax_mlir.script import from_source

    mod = from_source(BN_BACKBONE, "bn_backbone")
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.1),
                         [TensorStructInfo((4, 2), "float32"), TensorStructInfo((4,), "int64")])
    rng = np.random.default_rng(5)
    x = rng.normal(size=(4, 3)).astype(np.float32)
    y = np.array([0, 1, 1, 0])
    params = [rng.normal(size=(3, 2)).astype(np.float32), np.ones(2, np.float32), np.zeros(2, np.float32)]
    losses = {}
    for target in ("numpy", "cpu"):
        trainer = Trainer(mod, None, setup).build(target=target)
        trainer.load_params([p.copy() for p in params])
        trainer.load_states({"mean": np.zeros(2, np.float32), "var": np.ones(2, np.float32)})
        losses[target] = [float(trainer.update_params(x, y).numpy())]
        want_loss, want_mean, want_var = _bn_numpy_step(x.astype(np.float64), y, *params, np.zeros(2), np.ones(2))
        assert losses[target][0] == pytest.approx(want_loss, rel=1e-5)
        states = trainer.export_states()
        np.testing.assert_allclose(states["mean"].numpy(), want_mean, rtol=1e-5, atol=1e-6)
        # batch_norm's running variance is the biased batch variance here, as TVM's (no n/(n-1) correction)
        np.testing.assert_allclose(states["var"].numpy(), want_var, rtol=1e-5, atol=1e-6)
        losses[target] += [float(trainer.update_params(x, y).numpy()) for _ in range(4)]
    np.testing.assert_allclose(losses["cpu"], losses["numpy"], rtol=1e-5)  # float32, summation orders differ
    assert losses["cpu"][-1] < losses["cpu"][0]


# Per-item classes (a segmentation's per-pixel classes): predictions (N, C, d), class-index targets (N, d).
PER_ITEM_BACKBONE = """
@I.ir_module
class Module:
    I.module_attrs({"param_num": 1, "state_num": 0})

    @R.function
    def backbone(x: R.Tensor((2, 6), "float32"), w: R.Tensor((6, 15), "float32")):
        with R.dataflow():
            h = R.matmul(x, w)
            out = R.reshape(h, (2, 5, 3))
            R.output(out)
        return out
"""


@pytest.mark.parametrize("target", ["numpy", "cpu"])
def test_per_item_class_indices_train_along_class_axis_1(target):
    # the Trainer checked labels against the last axis (3) and the loss normalised over it while picking along
    # axis 1: label 4 of 5 classes was refused, and the loss mixed two axes
    from relax_mlir.script import from_source

    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.1),
                         [TensorStructInfo((2, 5, 3), "float32"), TensorStructInfo((2, 3), "int64")])
    trainer = Trainer(from_source(PER_ITEM_BACKBONE), None, setup).build(target=target)
    rng = np.random.default_rng(3)
    x, w = rng.normal(size=(2, 6)).astype(np.float32), rng.normal(size=(6, 15)).astype(np.float32)
    y = np.array([[4, 0, 2], [1, 4, 3]])
    trainer.load_params([w])
    loss = float(trainer.update_params(x, y).numpy())
    z = (x.astype(np.float64) @ w).reshape(2, 5, 3)  # by hand: log_softmax over the 5 classes of axis 1
    logp = z - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True)) - z.max(1, keepdims=True)
    n, i = np.meshgrid(np.arange(2), np.arange(3), indexing="ij")
    dz = np.exp(logp)
    dz[n, y, i] -= 1
    assert loss == pytest.approx(-logp[n, y, i].sum(), rel=1e-5)
    np.testing.assert_allclose(trainer.params[0], w - 0.1 * x.T @ dz.reshape(2, 15), rtol=1e-5, atol=1e-6)
    y[1, 2] = 5
    with pytest.raises(ValueError, match=r"'targets' holds labels outside the 5 classes \[0, 5\): \[5\]"):
        trainer.update_params(x, y)


def test_tvms_class_constants_name_the_functions_setup_trainer_adds():
    mod = _setup()(mlp(B, SIZES))
    names = (SetupTrainer.BACKBONE_FUNC, SetupTrainer.BACKBONE_LOSS_FUNC, SetupTrainer.ADJOINT_FUNC,
             SetupTrainer.OPTIMIZER_FUNC)
    assert all(name in mod for name in names), (names, list(mod))
    adjoint = mod[SetupTrainer.ADJOINT_FUNC].ret_struct_info  # (loss, (one gradient per parameter))
    assert len(adjoint.fields) == 2 and len(adjoint.fields[1].fields) == 4
    assert mod.attrs[SetupTrainer.PARAM_NUM_ATTR_KEY] == 4 and mod.attrs[SetupTrainer.STATE_NUM_ATTR_KEY] == 0


@pytest.mark.parametrize("key", ["param_num", "state_num"])
@pytest.mark.parametrize("value", [1.5, True, "4", float("nan"), float("inf"), None, (1,), -1])
def test_param_num_and_state_num_attributes_must_be_counts(key, value):
    """A bare int() took 1.5 and True for 1 (training only the last parameter) and "4" for 4, and leaked raw
    errors for nan, inf, None and (1,)."""
    attrs = {"param_num": 4, "state_num": 0, key: value}
    with pytest.raises(ValueError, match=rf"SetupTrainer: the module attribute {key} must be a count, an int >= 0, "
                                         rf"got {re.escape(repr(value))} \({type(value).__name__}\)"):
        _setup()(mlp(B, SIZES).with_attrs(attrs))


def test_numpy_integer_counts_are_accepted():
    mod = _setup()(mlp(B, SIZES).with_attrs({"param_num": np.int64(4), "state_num": np.int32(0)}))
    assert (mod.attrs["input_num"], mod.attrs["param_num"], mod.attrs["state_num"]) == (1, 4, 0)
    assert type(mod.attrs["param_num"]) is int  # the text format prints it as a plain int
