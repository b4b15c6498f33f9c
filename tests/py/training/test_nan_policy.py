"""Trainer(nan_policy=...): a step that produces a NaN or an infinity (hand-made NaN inputs; inputs so large that
Adam's second moment overflows while the loss stays finite) leaves parameters, states and optimizer state bit for
bit as before with "raise" and "skip"; the error names the step, the tensor and the batch index; "ignore" adopts
the outputs; `relax-mlir train` stops with the message and keeps the last good checkpoint."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

from relax_mlir.ir import TensorStructInfo
from relax_mlir.models import mlp
from relax_mlir.training import NonFiniteError, SetupTrainer, Trainer
from relax_mlir.training.loss import CrossEntropyLoss
from relax_mlir.training.nan_policy import FiniteCheck
from relax_mlir.training.optimizer import Adam

B, SIZES = 8, (6, 5, 3)


def _trainer(target: str, policy: str = "raise") -> Trainer:
    setup = SetupTrainer(CrossEntropyLoss(), Adam(0.01),
                         [TensorStructInfo((B, 3), "float32"), TensorStructInfo((B,), "int64")])
    trainer = Trainer(mlp(B, SIZES), 4, setup, nan_policy=policy).build(target=target)
    trainer.xavier_uniform_init_params(seed=1)
    return trainer


def _batch(seed: int):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(B, 6)).astype(np.float32), rng.integers(0, 3, B)


def _state(trainer: Trainer) -> list[np.ndarray]:
    return [a.copy() for a in trainer.params + trainer.states + trainer.optim_state]


def _assert_same(before: list[np.ndarray], trainer: Trainer) -> None:
    after = trainer.params + trainer.states + trainer.optim_state
    assert len(before) == len(after)
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b, strict=True)


def _nan_row(x: np.ndarray, row: int = 3) -> np.ndarray:
    x = x.copy()
    x[row, 1] = np.nan
    return x


def _huge_row(x: np.ndarray, row: int = 3) -> np.ndarray:
    """1e25 in a whole row: the loss (~1e24) and the gradient stay finite in float32, the gradient's square in
    Adam's second moment overflows to inf."""
    x = x.copy()
    x[row, :] = 1e25
    return x


@pytest.mark.parametrize("target", ["numpy", "cpu"])
def test_raise_names_step_tensor_and_batch_index_and_keeps_the_state(target):
    trainer = _trainer(target)
    for i in range(2):
        trainer.update_params(*_batch(i))
    before = _state(trainer)
    x, y = _batch(2)
    with pytest.raises(NonFiniteError, match=r"^Trainer.update_params: step 2 produced a non-finite loss \(nan\); "
                                             r"input 'x' holds nan at \[3, 1\]: batch index 3; parameters, states "
                                             r"and optimizer state are left as before the step$") as info:
        trainer.update_params(_nan_row(x), y)
    assert isinstance(info.value, FloatingPointError)
    assert (info.value.step, info.value.tensor, info.value.index, info.value.batch_index) == (2, "loss", [], 3)
    _assert_same(before, trainer)
    assert trainer.step == 2


@pytest.mark.parametrize("target", ["numpy", "cpu"])
def test_a_non_finite_update_with_a_finite_loss_is_caught(target):
    trainer = _trainer(target)
    trainer.update_params(*_batch(0))
    before = _state(trainer)
    x, y = _batch(1)
    adam_v_w0 = 3 + 4  # Adam's state: num_steps, beta1**t, beta2**t, m (4 arrays), v (4 arrays)
    with pytest.raises(NonFiniteError, match=rf"step 1 produced a non-finite optimizer state {adam_v_w0} \(inf at "
                                             r"\[\d, \d\]\); the batch's inputs are finite") as info:
        with np.errstate(over="ignore", invalid="ignore"):
            trainer.update_params(_huge_row(x), y)
    assert info.value.batch_index is None
    _assert_same(before, trainer)


@pytest.mark.parametrize("target", ["numpy", "cpu"])
def test_a_batch_whose_targets_are_all_ignored_names_the_empty_mean(target):
    # mean over no targets: 0/0 = NaN (as TVM's nll_loss and PyTorch); the message blamed the learning rate
    trainer = _trainer(target)
    trainer.update_params(*_batch(0))
    before = _state(trainer)
    x, y = _batch(1)
    with pytest.raises(NonFiniteError, match=r"^Trainer.update_params: step 1 produced a non-finite loss \(nan\); "
                                             r"every target of the batch is ignore_index \(-100\): the loss's mean "
                                             r"over no targets is 0/0 = NaN; leave such batches out, or use reduction "
                                             r"'sum'; parameters, states and optimizer state are left as before the "
                                             r"step$") as info:
        trainer.update_params(x, np.full_like(y, -100))
    assert info.value.batch_index is None
    _assert_same(before, trainer)
    y[1:] = -100  # one target left: a mean over one
    assert np.isfinite(trainer.update_params(x, y).numpy())


@pytest.mark.parametrize("target", ["numpy", "cpu"])
def test_an_empty_batch_names_the_empty_mean(target):
    setup = SetupTrainer(CrossEntropyLoss(), Adam(0.01),
                         [TensorStructInfo(("n", 3), "float32"), TensorStructInfo(("n",), "int64")])
    trainer = Trainer(mlp("n", SIZES), 4, setup).build(target=target)
    trainer.xavier_uniform_init_params(seed=1)
    with pytest.raises(NonFiniteError, match=r"step 0 produced a non-finite loss \(nan\); the batch is empty: the "
                                             r"loss's mean over no examples is 0/0 = NaN; parameters"):
        trainer.update_params(np.zeros((0, 6), np.float32), np.zeros(0, np.int64))


@pytest.mark.parametrize("target", ["numpy", "cpu"])
def test_skip_warns_counts_and_continues_as_if_the_batch_was_never_seen(target):
    skipping, clean = _trainer(target, "skip"), _trainer(target)
    for trainer in (skipping, clean):
        trainer.update_params(*_batch(0))
    before = _state(skipping)
    x, y = _batch(1)
    with pytest.warns(RuntimeWarning, match=r"step 1 produced a non-finite loss .*batch index 5.*\(skipped: 1 so "
                                            r"far\)"):
        loss = skipping.update_params(_nan_row(x, 5), y)
    assert np.isnan(loss.numpy())
    _assert_same(before, skipping)
    assert (skipping.step, skipping.skipped_steps) == (1, 1)
    for trainer in (skipping, clean):
        trainer.update_params(*_batch(2))
    _assert_same(_state(clean), skipping)  # bit for bit the run that never saw the bad batch


def test_ignore_adopts_the_outputs_as_before_the_policy_existed():
    trainer = _trainer("numpy", "ignore")
    x, y = _batch(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning either
        loss = trainer.update_params(_nan_row(x), y)
    assert np.isnan(loss.numpy()) and trainer.step == 1
    assert np.isnan(trainer.params[0]).any()


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError, match=r"nan_policy='warn'; expected one of 'raise', 'skip', 'ignore'"):
        _trainer("numpy", "warn")


@pytest.mark.parametrize("native", [True, False], ids=["native scan", "blas dot"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_finite_check_finds_one_bad_element_anywhere(monkeypatch, dtype, native):
    """The check (the native bit scan, or the dot-with-zeros route without it) against np.isfinite, on every
    position of a few shapes, NaN and both infinities, and across the scan's 4096-element blocks; finite values of
    every magnitude (overflowing a plain sum) are finite."""
    from relax_mlir.training import nan_policy

    assert nan_policy._native is not None, "relax_mlir._callpath was not built (pip install -e . builds it)"
    if not native:
        monkeypatch.setattr(nan_policy, "_native", None)
    check = FiniteCheck()
    big = np.full((4, 3), np.finfo(dtype).max, dtype)
    tiny = np.full(5, np.finfo(dtype).smallest_subnormal, dtype)
    assert check.all_finite([big, -big, tiny, np.zeros(0, dtype), np.arange(5), np.ones(3, bool)])  # ints: ignored
    for shape in [(), (7,), (3, 4)]:
        for pos in range(int(np.prod(shape))):
            for bad in (np.nan, np.inf, -np.inf):
                a = np.ones(shape, dtype)
                a.flat[pos] = bad
                assert not check.all_finite([big, a]) and not np.isfinite(a).all()
    for pos in (0, 4095, 4096, 9999):
        a = np.ones(10000, dtype)
        a[pos] = -np.nan
        assert not check.all_finite([a, big])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_large_scans_split_across_threads_find_every_bad_element(dtype):
    """With two threads a scan of 4 MiB or more is split across the OpenMP runtime's threads: a NaN or infinity at
    either end of every array, at the middle (where the split falls) and next to it is found, whichever array
    holds it; all-finite arrays are finite. The answers are np.isfinite's and the one-thread scan's."""
    from relax_mlir.backend.openmp import openmp_library

    if openmp_library() is None:
        pytest.fail("no OpenMP runtime found (intel-openmp is a dependency on Linux x86-64)")
    check = FiniteCheck(threads=2)
    assert check.threads == 2
    sizes = (3 << 20) // np.dtype(dtype).itemsize, 5, (2 << 20) // np.dtype(dtype).itemsize  # 5 MiB and more
    arrays = [np.ones(n, dtype) for n in sizes]
    total = sum(sizes)
    assert check.all_finite(arrays) and FiniteCheck().all_finite(arrays)
    positions = sorted({0, total // 2 - 1, total // 2, total // 2 + 1, total - 1}
                       | {offset for offset in np.cumsum((0,) + sizes[:-1])}
                       | {offset - 1 for offset in np.cumsum(sizes)})
    for pos in positions:
        for bad in (np.nan, -np.inf):
            which = int(np.searchsorted(np.cumsum(sizes), pos, side="right"))
            index = pos - int(np.cumsum((0,) + sizes)[which])
            arrays[which][index] = bad
            assert not check.all_finite(arrays), (pos, bad)
            assert not FiniteCheck().all_finite(arrays)
            arrays[which][index] = 1


def test_finite_check_reads_every_layout_and_dtype():
    """Arrays the native scan does not read (strided, byte-swapped, long double, complex) are checked by the
    dot-with-zeros route instead: the answer is np.isfinite's either way."""
    from relax_mlir.training import nan_policy

    check = FiniteCheck()
    for a in (np.ones((6, 4), np.float32)[:, ::2], np.ones(5, ">f4"), np.ones(5, np.longdouble),
              np.ones(5, np.float32).view(np.int32)):
        assert check.all_finite([a])
        if a.dtype.kind == "f":
            a[..., 1] = np.inf  # (in the strided view: what is checked is what the view shows)
            assert not check.all_finite([a])
    assert nan_policy._native.all_finite([np.ones(5, ">f4")]) is None  # left to NumPy, as said


def test_train_stops_with_the_message_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    """`relax-mlir train`'s loop with a NaN injected into the 3rd batch of epoch 2: it stops with the Trainer's
    message plus the epoch and the checkpoint, which is still epoch 1's (bit for bit) and resumable."""
    from relax_mlir.training import run
    from relax_mlir.training.config import TrainConfig

    rng = np.random.default_rng(0)
    x, y = rng.uniform(0, 1, (200, 8, 8)).astype(np.float32), rng.integers(0, 10, 200)
    np.savez(tmp_path / "data.npz", x_train=x[:160], y_train=y[:160], x_test=x[160:], y_test=y[160:])
    cfg = TrainConfig(data=str(tmp_path / "data.npz"), hidden=(16,), batch_size=32, target="numpy", epochs=3,
                      save=str(tmp_path / "ckpt.npz"))
    calls, inputs = [], run._inputs

    def poisoned(cfg, x):  # calls 1-5 train epoch 1, 6-7 evaluate it, 8-12 train epoch 2
        calls.append(1)
        return _nan_row(inputs(cfg, x), 7) if len(calls) == 10 else inputs(cfg, x)

    monkeypatch.setattr(run, "_inputs", poisoned)
    with pytest.raises(NonFiniteError, match=r"^Trainer.update_params: step 7 produced a non-finite loss \(nan\); "
                                             r"input 'x' holds nan at \[7, 1\]: batch index 7; .* \(epoch 2\); lower "
                                             r"the learning rate \(--lr 0.01\); the last good checkpoint is "
                                             rf"{cfg.save} \(after epoch 1; --resume it with a lower --lr\)$"):
        run.train(cfg, log=lambda s: None, progress=False)
    trainer = run.make_trainer(cfg, run.load_data(cfg.data))
    extra = trainer.load(cfg.save)
    assert int(extra["epoch"]) == 0 and trainer.step == 5  # epoch 1's checkpoint, untouched by the failure
    monkeypatch.setattr(run, "_inputs", inputs)
    cfg.resume = cfg.save
    assert len(run.train(cfg, log=lambda s: None, progress=False).accuracy) == 3


def test_train_without_a_checkpoint_says_none_was_written(tmp_path, monkeypatch):
    from relax_mlir.training import run
    from relax_mlir.training.config import TrainConfig

    rng = np.random.default_rng(0)
    np.savez(tmp_path / "data.npz", x=rng.uniform(0, 1, (100, 8, 8)).astype(np.float32),
             y=rng.integers(0, 10, 100))
    cfg = TrainConfig(data=str(tmp_path / "data.npz"), hidden=(16,), batch_size=16, target="numpy",
                      save=str(tmp_path / "ckpt.npz"), lr=1e30)
    with pytest.raises(NonFiniteError, match=r"step \d+ produced a non-finite .*\(epoch 1\); lower the learning "
                                             r"rate \(--lr 1e\+30\); no checkpoint was written \(.*ckpt.npz is "
                                             r"saved after each whole epoch\)$"):
        with np.errstate(all="ignore"):
            run.train(cfg, log=lambda s: None, progress=False)
    assert not os.path.exists(cfg.save)
