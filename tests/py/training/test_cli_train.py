"""``relax-mlir train`` in-process: the tutorial's settings reach 95% on digits, every optimizer and the CNN run,
--data reads IDX directories and npz archives, --plot writes a PNG, --save/--resume continues bit for bit, runs
are deterministic, and bad options end with status 1 and a one-line message.

Compiled modules are cached in-process, so runs sharing a configuration (model, sizes, optimizer settings) compile
once; the file stays well under a minute on two cores.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import re

import numpy as np
import pytest

from relax_mlir.cli import main

MOMENTUM = ["--optimizer", "momentum", "--lr", "0.001"]  # summed loss: SGD with momentum needs a smaller step


def _run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["train", *args])
    return code, out.getvalue(), err.getvalue()


def _final_accuracy(out: str) -> float:
    return float(re.search(r"final test accuracy: ([\d.]+)%", out).group(1))


def _figures(out: str) -> list[str]:
    """The per-epoch lines without their timings and the run's epoch count ("epoch 3: loss ...")."""
    return [re.sub(r"^epoch (\d+)/\d+|\s*\(\d+ steps.*\)", lambda m: f"epoch {m.group(1)}" if m.group(1) else "",
                   line) for line in out.splitlines() if line.startswith("epoch ")]


def _checkpoint(path) -> dict:
    with np.load(path) as f:
        return {k: f[k] for k in f.files if k != "extra/seconds"}


@pytest.fixture(scope="module")
def tutorial_run(tmp_path_factory):
    """The default settings (the tutorial's), 5 epochs, compiled, with a plot and a checkpoint."""
    tmp = tmp_path_factory.mktemp("tutorial")
    code, out, err = _run("--plot", str(tmp / "curves.png"), "--save", str(tmp / "full.npz"))
    assert code == 0, err
    return tmp, out


def test_tutorial_settings_reach_95_percent(tutorial_run):
    _, out = tutorial_run
    assert "digits: 1438 training / 359 test examples" in out and "mlp compiled for cpu" in out
    figures = _figures(out)
    assert [f.split(":")[0] for f in figures] == [f"epoch {i}" for i in range(1, 6)]
    assert "epoch 5/5: loss" in out
    losses = [float(re.search(r"loss ([\d.]+)", f).group(1)) for f in figures]
    assert losses[-1] < losses[0] / 4
    assert _final_accuracy(out) >= 95.0


def test_plot_writes_a_png(tutorial_run):
    tmp, out = tutorial_run
    png = (tmp / "curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 30_000
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width > height > 300
    assert f"wrote {tmp / 'curves.png'}" in out


def test_resume_equals_uninterrupted_run(tutorial_run):
    tmp, out = tutorial_run
    part = str(tmp / "part.npz")
    code, first, _ = _run("--epochs", "2", "--save", part)
    assert code == 0
    code, rest, _ = _run("--resume", part, "--save", part)
    assert code == 0 and "resumed from" in rest and "after epoch 2 (step 44)" in rest
    assert _figures(first) == _figures(out)[:2]
    assert _figures(rest) == _figures(out)[2:]
    full, resumed = _checkpoint(tmp / "full.npz"), _checkpoint(part)
    assert sorted(full) == sorted(resumed) and any(k.startswith("param/") for k in full)
    for key in full:  # parameters, optimizer state, step, the history: bit for bit
        np.testing.assert_array_equal(resumed[key], full[key], err_msg=key, strict=True)


@pytest.mark.parametrize("options", [[], MOMENTUM, MOMENTUM + ["--nesterov"], ["--optimizer", "adam", "--lr", "0.001"],
                                     ["--optimizer", "adamw", "--lr", "0.001", "--weight-decay", "0.05"]],
                         ids=["sgd", "momentum", "nesterov", "adam", "adamw"])
def test_each_optimizer_trains_one_epoch(options):
    code, out, err = _run("--epochs", "1", *options)
    assert code == 0, err
    [figure] = _figures(out)
    assert re.fullmatch(r"epoch 1: loss [\d.]+  test accuracy [\d.]+%", figure)
    assert _final_accuracy(out) > 50.0


def test_cnn_one_epoch():
    code, out, err = _run("--model", "cnn", "--epochs", "1", "--progress")
    assert code == 0, err
    assert "cnn compiled for cpu" in out and len(_figures(out)) == 1
    assert "epoch 1/1" in err and "step" in err  # the tqdm bar, on standard error
    assert _final_accuracy(out) > 30.0


def _write_idx(path, array: np.ndarray) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def test_data_idx_directory(tmp_path):
    """Digits written as MNIST-style gzipped IDX files (uint8 pixels 0..240)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x, y = (digits.images * 15).astype(np.uint8), digits.target.astype(np.uint8)
    for name, a in (("train-images-idx3-ubyte", x[:1400]), ("train-labels-idx1-ubyte", y[:1400]),
                    ("t10k-images-idx3-ubyte", x[1400:]), ("t10k-labels-idx1-ubyte", y[1400:])):
        _write_idx(tmp_path / (name + ".gz"), a)
    code, out, err = _run("--data", str(tmp_path), "--epochs", "2", *MOMENTUM)
    assert code == 0, err
    assert f"{tmp_path.name}: 1400 training / 397 test examples, 1x8x8 images, 10 classes" in out
    assert _final_accuracy(out) > 80.0


def test_data_npz(tmp_path):
    """256 random 8x8 images, each a class prototype plus noise; labels one-hot, split 80/20 by the loader."""
    rng = np.random.default_rng(0)
    prototypes = rng.uniform(0, 1, (10, 8, 8))
    y = rng.integers(0, 10, 256)
    x = (0.5 * prototypes[y] + 0.5 * rng.uniform(0, 1, (256, 8, 8))).astype(np.float32)
    np.savez(tmp_path / "blobs.npz", x=x, y=np.eye(10, dtype=np.float32)[y])
    code, out, err = _run("--data", str(tmp_path / "blobs.npz"), "--epochs", "10", *MOMENTUM)
    assert code == 0, err
    assert "blobs.npz: 205 training / 51 test examples" in out
    assert _final_accuracy(out) >= 80.0


def test_deterministic_for_a_seed():
    runs = [_run("--epochs", "2", "--seed", str(seed)) for seed in (7, 7, 8)]
    assert all(code == 0 for code, _, _ in runs)
    (_, a, _), (_, b, _), (_, c, _) = runs
    assert _figures(a) == _figures(b) and len(_figures(a)) == 2
    assert _figures(a) != _figures(c)


@pytest.fixture
def bad_data(tmp_path):
    """Paths to malformed data sets, by name."""
    good = {"train-images-idx3-ubyte": np.zeros((64, 8, 8)), "train-labels-idx1-ubyte": np.zeros(64),
            "t10k-images-idx3-ubyte": np.zeros((8, 8, 8)), "t10k-labels-idx1-ubyte": np.zeros(8)}
    paths = {}
    for case in ("magic", "truncated"):
        d = tmp_path / case
        d.mkdir()
        for name, a in good.items():
            _write_idx(d / (name + ".gz"), a)
        paths[case] = str(d)
    (tmp_path / "magic" / "train-labels-idx1-ubyte.gz").write_bytes(gzip.compress(b"\x08\x03\x00\x00" + bytes(68)))
    raw = gzip.decompress((tmp_path / "truncated" / "train-images-idx3-ubyte.gz").read_bytes())
    (tmp_path / "truncated" / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(raw[:-100]))
    np.savez(tmp_path / "missing.npz", x_train=np.zeros((64, 64)), y_train=np.zeros(64))
    np.savez(tmp_path / "labels.npz", x=np.zeros((100, 64)), y=np.arange(100) % 10 - 1)
    paths.update(missing=str(tmp_path / "missing.npz"), labels=str(tmp_path / "labels.npz"), dir=str(tmp_path))
    return paths


@pytest.mark.parametrize("args, message", [
    (["--data", "{dir}/nowhere"], "no such file or directory"),
    (["--data", "{magic}"], "train-labels-idx1-ubyte.gz: not an IDX file (bad magic number"),
    (["--data", "{truncated}"], "train-images-idx3-ubyte.gz: truncated: the header promises 64x8x8 uint8"),
    (["--data", "{missing}"], "missing arrays x_test, y_test"),
    (["--data", "{labels}"], "labels out of range: negative class indices [-1]"),
    (["--batch-size", "5000"], "--batch-size 5000: the training set has only 1438 examples"),
    (["--epochs", "0", "--lr", "-1", "--nesterov"], "--epochs 0: must be at least 1; --lr -1.0: must be a "
                                                    "positive number; --nesterov needs --optimizer momentum"),
    (["--lr", "1e6", "--epochs", "1"], "produced a non-finite"),
    (["--resume", "{dir}/absent.npz"], "--resume {dir}/absent.npz: no such file"),
    (["--resume", "{missing}"], "an .npz without a 'format' entry (it holds x_train, y_train); expected a "
                               "relax-mlir checkpoint (format 1)"),
    (["--plot", "{dir}/no/such/dir/curves.png"], "does not exist"),
    (["--save", "{dir}"], "is a directory"),
])
def test_errors_exit_1_with_one_line(bad_data, args, message):
    code, out, err = _run(*[a.format(**bad_data) for a in args])
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("relax-mlir train: error: ")
    assert message.format(**bad_data) in err


@pytest.mark.parametrize("args, message", [
    (["--save", "{dir}/ck.npz", "--plot", "{dir}/ck.npz"], "--plot {dir}/ck.npz: the same file as --save {dir}/ck.npz"),
    (["--data", "{labels}", "--save", "{labels}"], "--save {labels}: the same file as --data {labels}"),
    (["--data", "{labels}", "--save", "{dir}/link.npz"], "--save {dir}/link.npz: the same file as --data {labels}"),
    (["--data", "{labels}", "--plot", "{dir}/magic/../labels.npz"], "--plot {dir}/magic/../labels.npz: the same "
                                                                     "file as --data {labels}"),
    (["--resume", "{missing}", "--plot", "{missing}"], "--plot {missing}: the same file as --resume {missing}"),
])
def test_an_output_naming_an_input_or_the_other_output_is_refused_before_any_work(bad_data, args, message):
    """They exited 0: `--save ck.npz --plot ck.npz` replaced the checkpoint with the PNG, `--data d.npz --save
    d.npz` the data set with a checkpoint. (`--resume X --save X` continues X: test_resume_equals_uninterrupted_run.)"""
    import os

    os.link(bad_data["labels"], f"{bad_data['dir']}/link.npz")  # a hard link: another path, the same file
    files = {path: open(path, "rb").read() for path in (bad_data["labels"], bad_data["missing"])}
    code, out, err = _run(*[a.format(**bad_data) for a in args])
    assert code == 1 and out == ""
    assert err == (f"relax-mlir train: error: {message.format(**bad_data)}; expected another path (writing it "
                   "would replace that file)\n")
    assert {path: open(path, "rb").read() for path in files} == files
    assert not os.path.exists(f"{bad_data['dir']}/ck.npz")


@pytest.mark.parametrize("args, message", [
    (["--momentum", "0.5"], "--momentum needs --optimizer momentum"),
    (["--optimizer", "adam", "--dampening", "0.5"], "--dampening needs --optimizer momentum"),
    (["--optimizer", "momentum", "--betas", "0.5", "0.5"], "--betas needs --optimizer adam or adamw"),
    (["--optimizer", "momentum", "--eps", "1"], "--eps needs --optimizer adam or adamw"),
    (["--betas", "0.5", "0.5", "--eps", "1.0", "--momentum", "0.1", "--dampening", "0.5", "--nesterov"],
     "--momentum needs --optimizer momentum; --dampening needs --optimizer momentum; --nesterov needs --optimizer "
     "momentum; --betas needs --optimizer adam or adamw; --eps needs --optimizer adam or adamw"),
])
def test_options_of_another_optimizer_are_refused(args, message):
    """As --nesterov without momentum: the run trained with plain SGD (or Adam without momentum's settings) and
    said nothing, which is not what was asked for."""
    code, out, err = _run("--epochs", "1", *args)
    assert (code, out, err) == (1, "", f"relax-mlir train: error: {message}\n")


def test_unset_optimizer_settings_are_the_defaults_and_checkpoints_record_them_as_before():
    """An optimizer-specific setting left unset (None) is its default: the optimizer gets it and a checkpoint's
    record of the run holds it, as checkpoints written when the settings defaulted to the values did."""
    from relax_mlir.training.config import TrainConfig, make_optimizer

    momentum, adam = TrainConfig(optimizer="momentum").trajectory(), TrainConfig(optimizer="adamw").trajectory()
    assert [momentum[k] for k in ("momentum", "dampening", "nesterov")] == [0.9, 0.0, False]
    assert [adam[k] for k in ("betas", "eps")] == [[0.9, 0.999], 1e-8] and "momentum" not in adam
    assert not {"momentum", "dampening", "nesterov", "betas", "eps"} & set(TrainConfig().trajectory())
    sgd = make_optimizer(TrainConfig(optimizer="momentum", momentum=0.5, dampening=0.25, nesterov=True))
    assert (sgd.momentum, sgd.dampening, sgd.nesterov) == (0.5, 0.25, True)
    adamw = make_optimizer(TrainConfig(optimizer="adamw", betas=(0.8, 0.9), eps=1e-6))
    assert (adamw.beta1, adamw.beta2, adamw.eps) == (0.8, 0.9, 1e-6)
    assert make_optimizer(TrainConfig(optimizer="adam")).eps == 1e-8
    assert TrainConfig(momentum=0.5).problems() == ["--momentum needs --optimizer momentum"]
    assert TrainConfig(optimizer="momentum", momentum=0.5, nesterov=True).problems() == []


def test_resume_refuses_other_settings(tutorial_run):
    tmp, _ = tutorial_run
    code, _, err = _run("--resume", str(tmp / "full.npz"), "--lr", "0.02", "--seed", "1", "--epochs", "6")
    assert code == 1 and err.count("\n") == 1
    assert "lr: 0.01 in the checkpoint, 0.02 now; seed: 0 in the checkpoint, 1 now" in err


def test_resume_compares_what_batch_norm_normalises_with():
    """The settings a checkpoint records hold what a CNN's batch norm normalises with: the global batch's
    statistics in one process or with --sync-batch-norm (the run is then the same on any number of MPI ranks),
    each rank's shard's without it (the run depends on the ranks). The MLP's run never depends on them."""
    from relax_mlir.training.config import TrainConfig
    from relax_mlir.training.run import _check_resumable

    mlp, cnn, synced = TrainConfig(), TrainConfig(model="cnn"), TrainConfig(model="cnn", sync_batch_norm=True)
    assert mlp.trajectory(2) == mlp.trajectory(1) and "batch_norm_statistics" not in mlp.trajectory(2)
    assert synced.trajectory(2) == synced.trajectory(1) == cnn.trajectory(1)
    assert len({json.dumps(cnn.trajectory(k)) for k in (1, 2, 4)}) == 3
    record = {"config": json.dumps(synced.trajectory(2)), "data": "same"}
    _check_resumable("ckpt.npz", record, cnn, "same", 1)  # 2 synchronized ranks -> one process: accepted
    _check_resumable("ckpt.npz", record, synced, "same", 4)
    with pytest.raises(ValueError, match=r"batch_norm_statistics: .* in the checkpoint, \"each rank's shard's "
                                         r"\(2 ranks without --sync-batch-norm\)\" now"):
        _check_resumable("ckpt.npz", record, cnn, "same", 2)
    # A record written before it held the batch norm's statistics is taken as one process's.
    old = {k: v for k, v in cnn.trajectory(1).items() if k != "batch_norm_statistics"}
    _check_resumable("ckpt.npz", {"config": json.dumps(old), "data": "same"}, cnn, "same", 1)
    with pytest.raises(ValueError, match="batch_norm_statistics"):
        _check_resumable("ckpt.npz", {"config": json.dumps(old), "data": "same"}, cnn, "same", 2)


def test_timing_says_where_the_wall_time_went():
    """``--timing`` ends the report with the wall time (since the process started: here pytest's, so far longer),
    the steps', evaluations' and set-up's seconds, the rest, and the ratio issue 9's target is about."""
    code, out, err = _run("--epochs", "2", "--timing")
    assert code == 0, err
    line = out.splitlines()[-1]
    m = re.fullmatch(r"timing: ([\d.]+) s since the process started: steps ([\d.]+) s, evaluation ([\d.]+) s, "
                     r"set-up and compile ([\d.]+) s, the rest \(Python, imports, data\) (-?[\d.]+) s; the wall "
                     r"time is ([\d.]+)x the steps and evaluation", line)
    assert m, line
    wall, steps, evaluation, build, rest, ratio = map(float, m.groups())
    assert 0 < steps and 0 < evaluation and 0 < build and steps + evaluation + build <= wall
    assert rest == pytest.approx(wall - steps - evaluation - build, abs=2e-3)
    done = steps + evaluation  # (each printed to 0.0005 s: the ratio is checked within what that rounding allows)
    assert wall / (done + 1e-3) * 0.99 <= ratio <= wall / max(done - 1e-3, 1e-9) * 1.01
    code, out, _ = _run("--epochs", "1")
    assert "timing:" not in out  # only when asked


def _record(tmp, **changes) -> str:
    """The tutorial run's checkpoint (5 epochs of 22 steps) with some of its run record replaced (None: removed)."""
    with np.load(tmp / "full.npz") as f:
        arrays = {k: f[k] for k in f.files}
    for key, value in changes.items():
        if value is None:
            del arrays[f"extra/{key}"]
        else:
            arrays[f"extra/{key}"] = np.asarray(value)
    path = tmp / "record.npz"
    np.savez(path, **arrays)
    return str(path)


def _config(tmp, **changes) -> str:
    with np.load(tmp / "full.npz") as f:
        config = json.loads(str(f["extra/config"]))
    return json.dumps({k: v for k, v in {**config, **changes}.items() if v is not None})


EXPECTED_EPOCH = "expected an integer >= 0 (the last whole epoch, counted from 0)"
IN_RANGE = ("expected an integer in [0, 110) (the last whole epoch, counted from 0: each epoch takes a step or more, "
            "and 'step' is 110)")
EXPECTED_CONFIG = "expected the run's settings as `relax-mlir train --save` writes them (a JSON object)"


@pytest.mark.parametrize("changes, message", [
    (dict(epoch=[1, 2]), f"extra/epoch holds an array of int64, shape (2,); {EXPECTED_EPOCH}"),
    (dict(epoch="abc"), f"extra/epoch holds the string 'abc'; {EXPECTED_EPOCH}"),
    (dict(epoch=1.7), f"extra/epoch holds the float 1.7; {EXPECTED_EPOCH}"),
    (dict(epoch=True), f"extra/epoch holds the bool True; {EXPECTED_EPOCH}"),
    (dict(epoch=-5), f"extra/epoch is -5, {IN_RANGE}"),
    (dict(epoch=10**12), f"extra/epoch is 1000000000000, {IN_RANGE}"),
    (dict(config="[1, 2]"), f"extra/config: it holds list [1, 2], not an object of settings; {EXPECTED_CONFIG}"),
    (dict(config="{lr: 1}"), "extra/config: it is not JSON (Expecting property name enclosed in double quotes: line 1 "
                             f"column 2 (char 1)); {EXPECTED_CONFIG}"),
    (dict(config="[" * 100_000), f"extra/config: it nests too deeply; {EXPECTED_CONFIG}"),
    (dict(config=3), "extra/config holds the integer 3; expected the run's settings as a JSON object"),
    (dict(config={"seed": None, "lr": "0.01", "colour": 1}),
     f"extra/config: it lacks 'seed'; it has 'colour', which is not a setting; 'lr' is '0.01', expected a number; "
     f"{EXPECTED_CONFIG}"),
    (dict(config={"hidden": [128, 1.5], "nesterov": 1, "batch_size": True}),
     "extra/config: 'hidden' is [128, 1.5], expected a list of integers; 'batch_size' is True, expected an integer; "
     f"'nesterov' is 1, expected true or false; {EXPECTED_CONFIG}"),
    (dict(config={"lr": -1.0, "batch_size": 0, "reduction": "max", "hidden": None}),
     "extra/config: it lacks 'hidden' (the mlp's widths); 'reduction' is 'max', expected one of sum, mean; "
     f"--batch-size 0: must be at least 1; --lr -1.0: must be a positive number; {EXPECTED_CONFIG}"),
    (dict(config={"momentum": 0.9}), f"extra/config: --momentum needs --optimizer momentum; {EXPECTED_CONFIG}"),
    (dict(data=None), "the run's record lacks extra/data (the training set's fingerprint); expected a checkpoint "
                      "written by `relax-mlir train --save`"),
    (dict(data="xyz"), "extra/data is 'xyz', expected the training set's fingerprint (16 hex digits)"),
    (dict(data=[1, 2]), "extra/data holds an array of int64, shape (2,); expected the training set's fingerprint "
                        "(16 hex digits)"),
    (dict(epoch_loss=["a"] * 5), "extra/epoch_loss holds an array of <U1, shape (5,); expected 5 finite numbers (one "
                                 "per epoch)"),
    (dict(epoch_loss=[1.0] * 4), "extra/epoch_loss holds an array of float64, shape (4,); expected 5 finite numbers "
                                 "(one per epoch)"),
    (dict(accuracy=[0.5, 0.5, 1.5, 0.5, 0.5]), "extra/accuracy[2] is 1.5; expected 5 finite numbers (one per epoch, "
                                               "in [0, 1])"),
    (dict(seconds=[-1.0] * 5), "extra/seconds[0] is -1.0; expected 5 finite numbers (one per epoch, >= 0)"),
    (dict(step_loss=[np.nan] * 110), "extra/step_loss[0] is nan; expected 110 finite numbers (one per step)"),
    (dict(step_loss=[1.0] * 22), "extra/step_loss holds an array of float64, shape (22,); expected 110 finite numbers "
                                 "(one per step)"),
    (dict(target="gpu"), "extra/target 'gpu' and extra/opt_level 2: expected a target of cpu, llvm, numpy, "
                         "interpreter and an --opt-level in [0, 3]"),
    (dict(opt_level=7), "extra/target 'cpu' and extra/opt_level 7: expected a target of cpu, llvm, numpy, "
                        "interpreter and an --opt-level in [0, 3]"),
    (dict(opt_level=None), "it has extra/target without extra/opt_level; expected both or neither"),
], ids=lambda v: "" if isinstance(v, str) else "-".join(v))
def test_a_bad_run_record_is_one_checkpoint_error_before_the_data_and_compiling(tutorial_run, monkeypatch, changes,
                                                                             message):
    """Only the entries' presence was checked: extra/epoch [1, 2] or a config "[1, 2]" were tracebacks, "abc" or
    text that is not JSON a bare int() or json message naming no file, -5 failed in NumPy after compiling, 1.7 was
    taken as 1. Every entry train reads is now checked when the checkpoint is read."""
    from relax_mlir.training import run
    from relax_mlir.training.checkpoint_io import CheckpointError
    from relax_mlir.training.trainer import Trainer

    def refuse(*args, **kwargs):
        raise AssertionError("the data were loaded or the model compiled before the run record was checked")

    tmp, _ = tutorial_run
    if isinstance(changes.get("config"), dict):
        changes["config"] = _config(tmp, **changes["config"])
    path = _record(tmp, **changes)
    monkeypatch.setattr(run, "load_data", refuse)
    monkeypatch.setattr(Trainer, "build", refuse)
    code, out, err = _run("--resume", path, "--epochs", "6")
    assert (code, out, err) == (1, "", f"relax-mlir train: error: --resume {path}: {message}\n")
    with pytest.raises(CheckpointError):
        run._read_resume(path)


def test_every_record_trajectory_writes_is_a_good_one():
    """The check of a record and ``trajectory()`` agree: every model, optimizer (its settings given or not) and
    batch-norm setting, and the records written before batch_norm_statistics was."""
    from relax_mlir.training.config import OPTIMIZERS, TrainConfig, record_problems

    configs = [TrainConfig(model=m, optimizer=o, sync_batch_norm=s) for m in ("mlp", "cnn") for o in OPTIMIZERS
               for s in (False, True)]
    configs += [TrainConfig(optimizer="momentum", momentum=0.5, dampening=0.1, nesterov=True, reduction="mean"),
                TrainConfig(optimizer="adamw", betas=(0.5, 0.6), eps=1e-3, lr=1, weight_decay=0, hidden=(3,))]
    for cfg in configs:
        for ranks in (1, 2):
            record = json.loads(json.dumps(cfg.trajectory(ranks)))
            assert record_problems(record) == [], record
            record.pop("batch_norm_statistics", None)
            assert record_problems(record) == [], record


def test_a_checkpoint_written_before_the_record_held_the_code_still_resumes(tutorial_run):
    """Files without extra/target and extra/opt_level (nor the history, which train does without) resume; no note
    is said about the code, which they do not record."""
    from relax_mlir.training import run
    from relax_mlir.training.config import TrainConfig

    tmp, _ = tutorial_run
    with np.load(tmp / "full.npz") as f:
        assert (str(f["extra/target"]), int(f["extra/opt_level"])) == ("cpu", 2)  # what a run now writes
    path = _record(tmp, target=None, opt_level=None, epoch_loss=None, accuracy=None, seconds=None, step_loss=None)
    ckpt = run._read_resume(path)
    assert run._other_code(TrainConfig(target="numpy", resume=path), ckpt.extra) is None
    code, out, err = _run("--resume", path, "--epochs", "5")
    assert (code, err) == (0, "") and f"nothing to train: {path} holds 5 epochs, --epochs is 5" in out


def test_resume_with_another_target_or_opt_level_is_allowed_with_a_note(tutorial_run, tmp_path):
    """--target and --opt-level are not in the trajectory: the settings and data decide it, the code only rounds
    floats otherwise (as PyTorch resumes a GPU checkpoint on the CPU). The run then matches the uninterrupted one up
    to rounding, and says so; with the same code it stays bit for bit (test_resume_equals_uninterrupted_run)."""
    from relax_mlir.training import run
    from relax_mlir.training.config import TrainConfig

    tmp, out = tutorial_run
    part = str(tmp_path / "part.npz")
    assert _run("--epochs", "4", "--save", part)[0] == 0
    code, rest, err = _run("--resume", part, "--save", part, "--target", "numpy")
    assert (code, err) == (0, "")
    assert (f"note: {part} was written by a run with --target cpu --opt-level 2, this one uses --target numpy: the "
            "same settings, but other code rounds floats differently, so the run matches an uninterrupted one up to "
            "rounding, not bit for bit") in rest.splitlines()
    full, resumed = _checkpoint(tmp / "full.npz"), _checkpoint(part)
    assert sorted(full) == sorted(resumed)
    for key in full:
        if key.startswith(("param/", "optim/")):
            np.testing.assert_allclose(resumed[key], full[key], rtol=1e-4, atol=1e-6, err_msg=key)
    assert str(resumed["extra/target"]) == "numpy"  # the code of the run that wrote it last
    extra = {"target": np.array("cpu"), "opt_level": np.array(2)}
    assert run._other_code(TrainConfig(opt_level=0, resume="c.npz"), extra).startswith(
        "note: c.npz was written by a run with --target cpu --opt-level 2, this one uses --target cpu --opt-level 0:")
    assert run._other_code(TrainConfig(target="llvm", resume="c.npz"), extra) is None  # (the same code)
    assert run._other_code(TrainConfig(target="numpy", opt_level=0, resume="c.npz"),
                           {"target": np.array("interpreter"), "opt_level": np.array(3)}) is None
