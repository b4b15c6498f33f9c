"""The compiled Trainer step writes into the Trainer's own buffers (no allocation per step for parameters, states
and optimizer state): two sets, swapped when a step is adopted. Checked here: the values equal the NumPy
interpreter's step for step (SGD, Adam, batch-norm states), no new arrays after the second step, a refused step
writes nothing the Trainer keeps, an array a caller handed in is never written, and the native label check
agrees with NumPy's."""

from __future__ import annotations

import numpy as np
import pytest

from relax_mlir.ir import TensorStructInfo
from relax_mlir.models import cnn, mlp
from relax_mlir.training import NonFiniteError, SetupTrainer, Trainer
from relax_mlir.training.loss import CrossEntropyLoss
from relax_mlir.training.optimizer import SGD, Adam

B, SIZES = 8, (6, 5, 3)


def _mlp_trainer(target: str, optimizer=None, policy: str = "raise") -> Trainer:
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), optimizer or SGD(0.05, weight_decay=0.01),
                         [TensorStructInfo((B, SIZES[-1]), "float32"), TensorStructInfo((B,), "int64")])
    trainer = Trainer(mlp(B, SIZES), 4, setup, nan_policy=policy).build(target=target)
    trainer.xavier_uniform_init_params(seed=3)
    return trainer


def _batch(seed: int):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(B, SIZES[0])).astype(np.float32), rng.integers(0, SIZES[-1], size=B)


def _arrays(trainer: Trainer) -> list[np.ndarray]:
    return [*trainer.params, *trainer.states, *trainer.optim_state]


@pytest.mark.parametrize("optimizer", [SGD(0.05, weight_decay=0.01), Adam(0.01)], ids=["sgd", "adam"])
def test_reused_buffers_give_the_interpreters_steps(optimizer):
    compiled, reference = _mlp_trainer("cpu", optimizer), _mlp_trainer("numpy", optimizer)
    seen: list[set[int]] = []
    losses = []
    for step in range(6):
        x, y = _batch(step)
        losses.append(compiled.update_params(x, y))
        want = reference.update_params(x, y)
        assert float(losses[-1]) == pytest.approx(float(want), rel=1e-5)
        for got, ref in zip(_arrays(compiled), _arrays(reference)):
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
        seen.append({id(a) for a in _arrays(compiled)})
    # steps 3, 5 write where step 1 wrote, steps 4, 6 where step 2 wrote: two sets of buffers in all
    assert seen[2] == seen[0] and seen[4] == seen[0] and seen[3] == seen[1] and seen[5] == seen[1]
    assert not seen[0] & seen[1]
    assert len({id(l) for l in losses}) == len(losses)  # each returned loss is the caller's to keep
    assert [float(l) for l in losses] == [float(l) for l in losses]


def test_batch_norm_states_are_reused_too():
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.05),
                         [TensorStructInfo((4, 10), "float32"), TensorStructInfo((4,), "int64")])
    trainers = []
    for target in ("cpu", "numpy"):
        module = cnn(4, (1, 8, 8), channels=(2, 3), classes=10)
        t = Trainer(module, module.attrs["param_num"], setup).build(target=target)
        t.xavier_uniform_init_params(seed=5)
        trainers.append(t)
    rng = np.random.default_rng(0)
    ids = []
    for _ in range(4):
        x, y = rng.normal(size=(4, 1, 8, 8)).astype(np.float32), rng.integers(0, 10, 4)
        for t in trainers:
            t.update_params(x, y)
        assert trainers[0].state_num > 0
        for got, want in zip(_arrays(trainers[0]), _arrays(trainers[1])):
            np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)  # float32 batch statistics, 8x8 CNN
        ids.append([id(a) for a in trainers[0].states])
    assert ids[2] == ids[0] and ids[3] == ids[1]


def test_a_refused_step_leaves_the_current_arrays_and_the_next_step_goes_on():
    trainer, reference = _mlp_trainer("cpu", policy="skip"), _mlp_trainer("numpy")
    for step in range(3):
        trainer.update_params(*_batch(step))
        reference.update_params(*_batch(step))
    current = _arrays(trainer)
    before = [a.copy() for a in current]
    x, y = _batch(10)
    x[2, 3] = np.nan
    with pytest.warns(RuntimeWarning, match="non-finite"):
        trainer.update_params(x, y)
    assert trainer.skipped_steps == 1
    for a, b, kept in zip(_arrays(trainer), before, current):
        assert a is kept
        np.testing.assert_array_equal(a, b, strict=True)
    for step in range(3, 6):  # the spare buffers the refused step wrote are written again, and adopted
        trainer.update_params(*_batch(step))
        reference.update_params(*_batch(step))
    for got, want in zip(_arrays(trainer), _arrays(reference)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    trainer.nan_policy = "raise"
    with pytest.raises(NonFiniteError):
        trainer.update_params(x, y)


def test_arrays_a_caller_gives_are_never_written():
    trainer = _mlp_trainer("cpu")
    for step in range(3):
        trainer.update_params(*_batch(step))
    mine = np.full_like(trainer.params[0], 0.25)
    trainer.params[0] = mine  # assigned, not loaded (load_params would copy)
    for step in range(3, 8):
        trainer.update_params(*_batch(step))
        assert trainer.params[0] is not mine
    np.testing.assert_array_equal(mine, np.full_like(mine, 0.25))
    keep = trainer.export_params()
    trainer.update_params(*_batch(9))
    trainer.update_params(*_batch(10))
    assert all(not np.shares_memory(keep[name], a) for name, a in zip(keep, trainer.params))


@pytest.mark.parametrize("native", [True, False], ids=["native", "numpy"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_labels_are_checked_the_same_with_and_without_the_native_scan(monkeypatch, native, dtype):
    from relax_mlir.training import trainer as trainer_module

    assert trainer_module._native is not None, "relax_mlir._callpath was not built (pip install -e . builds it)"
    if not native:
        monkeypatch.setattr(trainer_module, "_native", None)
    trainer = _mlp_trainer("cpu")
    x, _ = _batch(0)
    trainer.update_params(x, np.array([0, 1, 2, 2, 1, 0, 0, 2], dtype))  # every class, both ends
    for bad in (-1, 3, np.iinfo(dtype).min, np.iinfo(dtype).max):
        for pos in (0, 7):
            y = np.zeros(B, dtype)
            y[pos] = bad
            with pytest.raises(ValueError, match=rf"labels outside the 3 classes \[0, 3\): \[{bad}\]"):
                trainer.update_params(x, y)
    assert trainer.step == 1
    if native:
        assert trainer_module._native.labels_in_range(np.arange(3, dtype=dtype)[::-1][::2], 0, 3) is None
        assert trainer_module._native.labels_in_range(np.arange(3, dtype=np.int16), 0, 3) is None


def test_ignore_adopts_a_non_finite_step_into_the_other_buffers():
    trainer = _mlp_trainer("cpu", policy="ignore")
    for step in range(2):
        trainer.update_params(*_batch(step))
    before = {id(a) for a in trainer.params}
    x, y = _batch(5)
    x[0, 0] = np.nan
    trainer.update_params(x, y)
    assert trainer.step == 3 and not {id(a) for a in trainer.params} & before
    assert all(np.isnan(p).any() for p in trainer.params[:2])  # the first layer's weight and bias took the NaN
