"""Trainer and CLI misuse found by a bug hunt (2026-11-27): each was a traceback, a stuck Trainer or a checkpoint
that silently changed the model."""

from __future__ import annotations

import numpy as np
import pytest

from relax_mlir import BlockBuilder, TensorStructInfo, Var, op
from relax_mlir.cli import main
from relax_mlir.models import mlp
from relax_mlir.training import SGD, CrossEntropyLoss, MSELoss, SetupTrainer, Trainer


def _trainer(**kwargs) -> Trainer:
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.1),
                         [TensorStructInfo((4, 3), "float32"), TensorStructInfo((4,), "int64")])
    return Trainer(mlp(4, (5, 3)), 2, setup, **kwargs)


def _batch():
    return np.random.default_rng(0).normal(size=(4, 5)).astype(np.float32), np.array([0, 1, 2, 0])


def test_two_parameters_of_one_name_are_refused():
    """Checkpoints, load_params and export_params key parameters by name: two named 'w' were saved once and both
    loaded from it (the model changed without a word)."""
    x = Var("x", TensorStructInfo((2, 3), "float32"))
    w1, w2 = Var("w", TensorStructInfo((3, 3), "float32")), Var("w", TensorStructInfo((3, 3), "float32"))
    bb = BlockBuilder()
    with bb.function("backbone", [x, w1, w2]):
        with bb.dataflow():
            y = bb.emit_output(op.matmul(bb.emit(op.matmul(x, w1)), w2))
        bb.emit_func_output(y)
    mod = bb.get().with_attrs({"param_num": 2, "state_num": 0})
    setup = SetupTrainer(MSELoss(reduction="sum"), SGD(0.1),
                         [TensorStructInfo((2, 3), "float32"), TensorStructInfo((2, 3), "float32")])
    with pytest.raises(ValueError, match="#0 and #1 are both named 'w'"):
        Trainer(mod, 2, setup)


@pytest.mark.parametrize("seed, error, message", [
    (-1, ValueError, r"seed must be in \[0, 2\*\*63\), got -1"),
    (2 ** 63, ValueError, r"seed must be in \[0, 2\*\*63\), got 9223372036854775808"),
    (1.5, TypeError, "seed must be an int, got float"),
])
def test_seeds_a_checkpoint_cannot_store_are_refused_up_front(seed, error, message):
    with pytest.raises(error, match=message):
        _trainer(seed=seed)
    assert _trainer(seed=np.int64(2 ** 63 - 1)).seed == 2 ** 63 - 1


def test_putting_back_the_arrays_of_an_earlier_step_trains_from_them(tmp_path):
    """``old = list(trainer.params)``, steps, ``trainer.params = old``: the step's spare buffers were those arrays,
    which it would overwrite while reading them (every later step was refused). It now steps from them, exactly as
    a Trainer loaded with the same values."""
    x, y = _batch()
    trainer = _trainer().build("cpu")
    trainer.xavier_uniform_init_params()
    trainer.update_params(x, y)
    trainer.update_params(x, y)
    old = list(trainer.params)
    values = [a.copy() for a in old]
    trainer.update_params(x, y)  # the arrays in `old` are now the next step's spare buffers
    trainer.params = old
    loss = trainer.update_params(x, y)
    fresh = _trainer().build("cpu")
    fresh.load_params(values)
    want = fresh.update_params(x, y)
    np.testing.assert_array_equal(loss, want)
    for got, expected in zip(trainer.params, fresh.params):
        np.testing.assert_array_equal(got, expected)
    for a, v in zip(old, values):  # the arrays put back were read, not written
        np.testing.assert_array_equal(a, v)


@pytest.mark.parametrize("suffix", ["/", ""])
def test_saving_to_a_path_that_names_no_file_says_so(tmp_path, suffix):
    trainer = _trainer().build("cpu")
    trainer.xavier_uniform_init_params()
    path = str(tmp_path / "c.npz") + suffix if suffix else ""
    with pytest.raises(IsADirectoryError, match="names no file; expected a file name"):
        trainer.save(path)
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


def test_cli_refuses_a_seed_beyond_int64_before_training(capsys):
    assert main(["train", "--seed", str(2 ** 63), "--epochs", "1"]) == 1
    assert "--seed 9223372036854775808: must be below 2**63" in capsys.readouterr().err


def test_cli_reports_a_width_that_does_not_fit_in_memory_in_one_line(capsys):
    assert main(["train", "--hidden", "99999999999", "--epochs", "1", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("relax-mlir train: error: not enough memory") and "Traceback" not in err


def test_load_params_refuses_what_load_refuses():
    """NaN parameters (load() refuses them in a checkpoint) and masked arrays (compiled calls refuse them) were taken
    by load_params; a step from NaN then reported a divergence that was not one."""
    trainer = _trainer().build("cpu")
    good = [np.zeros((5, 3), np.float32), np.zeros(3, np.float32)]
    bad = [good[0].copy(), good[1].copy()]
    bad[0][1, 2] = np.nan
    with pytest.raises(ValueError, match=r"load_params: w0 holds 1 NaN \(first at \[1, 2\]\), expected finite"):
        trainer.load_params(bad)
    with pytest.raises(ValueError, match="MaskedArray"):
        trainer.load_params([np.ma.masked_array(good[0], good[0] == 0), good[1]])
    trainer.load_params(good)


@pytest.mark.parametrize("values, got", [(None, "NoneType"), ("abc", "str"), (np.zeros(3), "ndarray")])
def test_load_params_says_what_it_takes(values, got):
    # None gave "object of type 'NoneType' has no len()"; "abc" was read as three arrays
    trainer = _trainer()
    with pytest.raises(TypeError, match=rf"Trainer.load_params: expected a dict by name or a list of 2 arrays "
                                        rf"\(w0, b0\), got {got}$"):
        trainer.load_params(values)


def test_setup_trainer_and_compile_say_what_their_arguments_must_be():
    import relax_mlir

    with pytest.raises(TypeError, match=r"SetupTrainer: loss_args must be a list .*, got TensorStructInfo"):
        SetupTrainer(MSELoss(), SGD(0.1), TensorStructInfo((2, 3), "float32"))
    with pytest.raises(TypeError, match=r"compile: checks must be True or False, got 'no'"):
        relax_mlir.compile(mlp(4, (4, 3)), checks="no")  # a non-empty string was true


def test_cli_refuses_the_other_models_shape_option(capsys):
    # --channels with --model mlp (or --hidden with --model cnn) was ignored without a word
    assert main(["train", "--model", "mlp", "--channels", "4", "8", "--epochs", "1", "--no-progress"]) == 1
    assert "--channels shapes --model cnn; this run trains --model mlp" in capsys.readouterr().err
    assert main(["train", "--model", "cnn", "--hidden", "16", "--epochs", "1", "--no-progress"]) == 1
    assert "--hidden shapes --model mlp; this run trains --model cnn" in capsys.readouterr().err


def test_tvms_trainer_vm_device_form_is_refused_clearly():
    """TVM's Trainer(train_mod, vm, device, False) was refused as "param_num=<VirtualMachine ...> disagrees"."""
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.1),
                         [TensorStructInfo((4, 3), "float32"), TensorStructInfo((4,), "int64")])
    train_mod = setup(mlp(4, (5, 3)).with_attrs({"param_num": 2, "state_num": 0}))
    with pytest.raises(TypeError, match=r"param_num is the backbone's parameter count, an int, got object; TVM's "
                                        r"Trainer\(train_mod, vm, device\) form is not supported"):
        Trainer(train_mod, object(), "cpu", False)
    with pytest.raises(TypeError, match="an int, got bool"):
        Trainer(train_mod, True)
    assert Trainer(train_mod, np.int64(2)).param_num == 2
