"""``relax-mlir train --lr-schedule``: the schedule the options make (each step's rate against PyTorch's
``torch.optim.lr_scheduler`` built from the same options), the CLI's parameters bit for bit those of a Python-API
run with the same schedule, the default run unchanged, refusals in one line, checkpoints that record the schedule
and resumes that continue it exactly (or are refused, as another ``--lr`` is).

The digits run 22 steps an epoch (1438 examples, batch 64); the MLP is narrow (--hidden 16) and runs are 1 to 3
epochs, so the file takes seconds beyond its compiles.
"""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

from relax_mlir.cli import main
from relax_mlir.training import (SGD, CosineAnnealingLR, ExponentialLR, LinearLR, MomentumSGD, MultiStepLR,
                                 SequentialLR, StepLR)
from relax_mlir.training.config import TrainConfig, make_lr, record_problems

SMALL = ["--hidden", "16", "--no-progress"]
STEPS_PER_EPOCH = 22


def _run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["train", *SMALL, *args])
    return code, out.getvalue(), err.getvalue()


def _checkpoint(path) -> dict:
    with np.load(path) as f:
        return {k: f[k] for k in f.files if k != "extra/seconds"}


def _config(**options) -> TrainConfig:
    return TrainConfig(hidden=(16,), **options)


# -- the schedule the options make ---------------------------------------------------------------------------------
# (options, epochs, the schedule expected, written out by hand, PyTorch's scheduler for the same options)
W, LR = 5, 0.01
CASES = {
    "step": (dict(lr_schedule="step", lr_step_size=7), 2, StepLR(LR, 7, 0.1),
             lambda o, n: _torch().StepLR(o, 7, 0.1)),
    "multistep": (dict(lr_schedule="multistep", lr_milestones=(30, 10), lr_gamma=0.5), 2,
                  MultiStepLR(LR, [10, 30], 0.5), lambda o, n: _torch().MultiStepLR(o, [10, 30], 0.5)),
    "exponential": (dict(lr_schedule="exponential", lr_gamma=0.95), 2, ExponentialLR(LR, 0.95),
                    lambda o, n: _torch().ExponentialLR(o, 0.95)),
    "cosine": (dict(lr_schedule="cosine", lr_eta_min=0.001), 2, CosineAnnealingLR(LR, 44, 0.001),
               lambda o, n: _torch().CosineAnnealingLR(o, n, 0.001)),
    "linear": (dict(lr_schedule="linear"), 3, LinearLR(LR, 1.0, 0.0, 66),
               lambda o, n: _torch().LinearLR(o, 1.0, 0.0, n)),
    # with a warm-up: LinearLR from 0.01 * lr (or --warmup-start-factor) over W steps, then the schedule
    "warmup-constant": (dict(warmup_steps=W), 2,
                        SequentialLR([LinearLR(LR, 0.01, 1.0, W), LinearLR(LR, 1.0, 1.0, 1)], [W]),
                        lambda o, n: _torch().LambdaLR(o, lambda t: 1.0)),
    "warmup-cosine": (dict(lr_schedule="cosine", warmup_steps=W, warmup_start_factor=0.1), 2,
                      SequentialLR([LinearLR(LR, 0.1, 1.0, W), CosineAnnealingLR(LR, 44 - W)], [W]),
                      lambda o, n: _torch().CosineAnnealingLR(o, n - W)),
    "warmup-step": (dict(lr_schedule="step", lr_step_size=4, lr_gamma=0.5, warmup_steps=W), 1,
                    SequentialLR([LinearLR(LR, 0.01, 1.0, W), StepLR(LR, 4, 0.5)], [W]),
                    lambda o, n: _torch().StepLR(o, 4, 0.5)),
    "warmup-linear": (dict(lr_schedule="linear", warmup_steps=W), 1,
                      SequentialLR([LinearLR(LR, 0.01, 1.0, W), LinearLR(LR, 1.0, 0.0, 22 - W)], [W]),
                      lambda o, n: _torch().LinearLR(o, 1.0, 0.0, n - W)),
}


def _torch():
    torch = pytest.importorskip("torch")
    return torch.optim.lr_scheduler


def torch_rates(options: dict, make_scheduler, steps: int) -> np.ndarray:
    """The rate of each of ``steps`` PyTorch updates (``scheduler.step()`` after each), plus the rate after the last:
    the options' schedule, after PyTorch's LinearLR warm-up with SequentialLR when there is one."""
    torch = pytest.importorskip("torch")
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], LR)
    scheduler = make_scheduler(optimizer, steps)
    if options.get("warmup_steps"):
        warmup = _torch().LinearLR(optimizer, options.get("warmup_start_factor", 0.01), 1.0, W)
        scheduler = _torch().SequentialLR(optimizer, [warmup, scheduler], [W])
    rates = []
    for _ in range(steps + 1):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return np.array(rates)


@pytest.mark.parametrize("name", CASES)
def test_the_options_make_pytorchs_schedule(name):
    """Each step's rate (``schedule(t)``, what the compiled step computes) is PyTorch's for the same options within
    its recursive updates' rounding; the schedule is the one written out by hand; a cosine reaches --lr-eta-min and a
    linear decay 0 after the run's last step, a warm-up starts at its fraction of --lr."""
    options, epochs, expected, scheduler = CASES[name]
    steps, cfg = epochs * STEPS_PER_EPOCH, _config(epochs=epochs, **options)
    assert cfg.problems() == []
    schedule = make_lr(cfg, steps)
    assert schedule == expected, schedule
    ours = np.array([schedule(t) for t in range(steps + 1)])
    np.testing.assert_allclose(ours, torch_rates(options, scheduler, steps), rtol=1e-13, atol=1e-18)
    if "warmup_steps" in options:
        assert ours[0] == LR * options.get("warmup_start_factor", 0.01) and ours[W] == LR
    if options.get("lr_schedule") == "cosine":
        assert ours[-1] == options.get("lr_eta_min", 0.0) and ours[-2] > ours[-1]
    if options.get("lr_schedule") == "linear":
        assert ours[-1] == 0.0 and ours[-2] > 0


def test_the_default_is_a_float_rate_and_the_record_of_before():
    """A constant rate without warm-up gives the optimizer the float --lr (TVM's optimizer function, unchanged) and
    a record without schedule settings (that of checkpoints written before schedules: they resume as they did)."""
    default = TrainConfig()
    assert type(make_lr(default, 110)) is float and make_lr(default, 110) == 0.01
    assert list(default.trajectory()) == ["model", "hidden", "optimizer", "lr", "weight_decay", "reduction",
                                          "batch_size", "seed"]
    assert TrainConfig(lr_schedule="constant", warmup_steps=0).trajectory() == default.trajectory()
    assert TrainConfig(lr_schedule="cosine", epochs=3).trajectory() == {
        **default.trajectory(), "lr_schedule": "cosine", "lr_eta_min": 0.0, "epochs": 3}
    assert TrainConfig(lr_schedule="step", lr_step_size=3, warmup_steps=2).trajectory() == {
        **default.trajectory(), "lr_schedule": "step", "lr_step_size": 3, "lr_gamma": 0.1, "warmup_steps": 2,
        "warmup_start_factor": 0.01}  # (not epochs: a step schedule does not depend on the run's length)
    assert (TrainConfig(lr_schedule="multistep", lr_milestones=(30, 10)).trajectory()
            == TrainConfig(lr_schedule="multistep", lr_milestones=[10, 30]).trajectory())  # the same schedule


# -- the CLI against the Python API --------------------------------------------------------------------------------
def _python_api_run(optimizer, epochs: int) -> dict[str, np.ndarray]:
    """What `relax-mlir train --hidden 16` does, written with the Python API: the tutorial's MLP on digits, summed
    cross-entropy, Xavier initialisation from seed 0, the (seed, epoch) batch order."""
    from relax_mlir import TensorStructInfo as T
    from relax_mlir.models import mlp
    from relax_mlir.training import SetupTrainer, Trainer
    from relax_mlir.training.data import batches, load_data
    from relax_mlir.training.loss import CrossEntropyLoss

    data = load_data(None)
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), optimizer, [T((64, 10), "float32"), T((64,), "int64")])
    trainer = Trainer(mlp(64, (64, 16, 10)), 4, setup, seed=0)
    trainer.xavier_uniform_init_params()
    trainer.build(target="cpu", opt_level=2)
    for epoch in range(epochs):
        for idx in batches(len(data.x_train), 64, 0, epoch):
            trainer.update_params(data.x_train[idx].reshape(64, -1), data.y_train[idx])
    assert trainer.step == epochs * STEPS_PER_EPOCH
    return {name: value.numpy() for name, value in trainer.export_params().items()}


@pytest.mark.parametrize("args, optimizer, schedule, epochs", [
    (["--lr-schedule", "cosine", "--warmup-steps", "5", "--lr-eta-min", "0.001"],
     lambda lr: SGD(lr, weight_decay=0.01),
     SequentialLR([LinearLR(0.01, 0.01, 1.0, 5), CosineAnnealingLR(0.01, 39, 0.001)], [5]), 2),
    (["--optimizer", "momentum", "--lr", "0.001", "--lr-schedule", "multistep", "--lr-milestones", "8", "15"],
     lambda lr: MomentumSGD(lr, 0.9, 0.0, 0.01), MultiStepLR(0.001, [8, 15]), 1),
], ids=["sgd-warmup-cosine", "momentum-multistep"])
def test_the_cli_trains_as_the_python_api_with_the_schedule(tmp_path, args, optimizer, schedule, epochs):
    """Bit for bit: the same model, data order and schedule; and not the run of a constant --lr (the schedule was
    applied). The header line says the schedule."""
    code, out, err = _run("--epochs", str(epochs), "--save", str(tmp_path / "ckpt.npz"), *args)
    assert code == 0, err
    assert out.splitlines()[0].endswith({1: "; lr 0.001, x0.1 at steps 8, 15",
                                         2: "; lr 0.01, warm-up from 0.01x over 5 steps, then cosine to 0.001 "
                                            "over 39 steps"}[epochs])
    cli = _checkpoint(tmp_path / "ckpt.npz")
    expected = _python_api_run(optimizer(schedule), epochs)
    assert sorted(expected) == ["b0", "b1", "w0", "w1"]
    for name, want in expected.items():
        np.testing.assert_array_equal(cli[f"param/{name}"], want, err_msg=name, strict=True)
    assert not np.array_equal(_python_api_run(optimizer(schedule.lr), epochs)["w0"], expected["w0"])


def test_the_default_run_says_and_writes_what_it_did(tmp_path):
    """The header line of a constant rate is the line of before (no "; lr ..."), the record too, and naming the
    defaults gives the same checkpoint bit for bit."""
    code, out, err = _run("--epochs", "1", "--save", str(tmp_path / "a.npz"))
    assert code == 0, err
    assert out.splitlines()[0].endswith(" s") and "; lr" not in out
    code, _, err = _run("--epochs", "1", "--save", str(tmp_path / "b.npz"), "--lr-schedule", "constant",
                        "--warmup-steps", "0")
    assert code == 0, err
    a, b = _checkpoint(tmp_path / "a.npz"), _checkpoint(tmp_path / "b.npz")
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key, strict=True)
    assert json.loads(str(a["extra/config"])) == {"model": "mlp", "hidden": [16], "optimizer": "sgd", "lr": 0.01,
                                                  "weight_decay": 0.01, "reduction": "sum", "batch_size": 64,
                                                  "seed": 0}


# -- refusals -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args, message", [
    (["--lr-step-size", "5"], "--lr-step-size needs --lr-schedule step"),
    (["--lr-schedule", "cosine", "--lr-milestones", "3", "--lr-gamma", "0.5"],
     "--lr-milestones needs --lr-schedule multistep; --lr-gamma needs --lr-schedule step or multistep or exponential"),
    (["--lr-schedule", "step", "--lr-eta-min", "0"], "--lr-eta-min needs --lr-schedule cosine; --lr-schedule step "
                                                     "needs --lr-step-size"),
    (["--lr-schedule", "multistep"], "--lr-schedule multistep needs --lr-milestones"),
    (["--lr-schedule", "exponential"], "--lr-schedule exponential needs --lr-gamma (a factor per step; PyTorch's "
                                       "ExponentialLR has no default)"),
    (["--lr-schedule", "step", "--lr-step-size", "0", "--lr-gamma", "-1"],
     "--lr-step-size 0: must be at least 1; --lr-gamma -1.0: must be a positive number"),
    (["--lr-schedule", "exponential", "--lr-gamma", "inf"], "--lr-gamma inf: must be a positive number"),
    (["--lr-schedule", "multistep", "--lr-milestones", "5", "0"],
     "--lr-milestones 5 0: expected one or more steps, each at least 1"),
    (["--lr-schedule", "cosine", "--lr-eta-min", "0.02"],
     "--lr-eta-min 0.02: must be in [0, --lr 0.01] (the rate the cosine anneals to)"),
    (["--lr-schedule", "cosine", "--lr-eta-min", "nan"],
     "--lr-eta-min nan: must be in [0, --lr 0.01] (the rate the cosine anneals to)"),
    (["--warmup-start-factor", "0.5"], "--warmup-start-factor needs --warmup-steps"),
    (["--warmup-steps", "-1", "--warmup-start-factor", "0"], "--warmup-steps -1: must be at least 0; "
     "--warmup-start-factor 0.0: must be in (0, 1] (the first warm-up step's fraction of --lr)"),
    (["--warmup-steps", "3", "--warmup-start-factor", "1.5"],
     "--warmup-start-factor 1.5: must be in (0, 1] (the first warm-up step's fraction of --lr)"),
    (["--lr-schedule", "cosine", "--warmup-steps", "44"],
     "--warmup-steps 44: the run has only 44 steps (--epochs 2); --lr-schedule cosine decays over the steps after the "
     "warm-up"),
    (["--lr-schedule", "linear", "--warmup-steps", "50"],
     "--warmup-steps 50: the run has only 44 steps (--epochs 2); --lr-schedule linear decays over the steps after the "
     "warm-up"),
])
def test_bad_schedule_options_are_refused_in_one_line_before_compiling(monkeypatch, args, message):
    """As an optimizer's option given for another optimizer: a setting of another schedule would be ignored, a
    missing one has no sensible default, and a warm-up as long as the run leaves a decay nothing to decay over."""
    from relax_mlir.training.trainer import Trainer

    def refuse(*args, **kwargs):
        raise AssertionError("compiled before the options were checked")

    monkeypatch.setattr(Trainer, "build", refuse)
    code, out, err = _run("--epochs", "2", *args)
    assert (code, out, err) == (1, "", f"relax-mlir train: error: {message}\n")


def test_a_long_warmup_before_a_schedule_that_does_not_span_the_run_is_allowed():
    """Step, multistep, exponential and constant schedules do not depend on the run's length (a run may go on in a
    resumed one), so a warm-up longer than this run is not refused."""
    assert _config(warmup_steps=1000, epochs=1).problems() == []
    from relax_mlir.training.config import schedule_steps_problem

    assert schedule_steps_problem(_config(warmup_steps=1000, lr_schedule="step", lr_step_size=2), 22) is None
    assert schedule_steps_problem(_config(warmup_steps=21, lr_schedule="cosine"), 22) is None


# -- checkpoints and resuming ---------------------------------------------------------------------------------------
def _assert_same_checkpoints(a, b) -> None:
    a, b = _checkpoint(a), _checkpoint(b)
    assert sorted(a) == sorted(b) and any(k.startswith("param/") for k in a)
    for key in a:  # parameters, optimizer state (the step count the schedule reads), the history, the record
        np.testing.assert_array_equal(a[key], b[key], err_msg=key, strict=True)


def test_resume_continues_a_schedule_exactly(tmp_path):
    """2 epochs, then 1 more resumed, are the 3 epochs of one run bit for bit: the step count is in the optimizer
    state, and the schedule (counted from the warm-up's end, which is in the first epoch) goes on from it."""
    schedule = ["--lr-schedule", "step", "--lr-step-size", "10", "--lr-gamma", "0.5", "--warmup-steps", "7"]
    full, part = str(tmp_path / "full.npz"), str(tmp_path / "part.npz")
    assert _run("--epochs", "3", "--save", full, *schedule)[0] == 0
    assert _run("--epochs", "2", "--save", part, *schedule)[0] == 0
    code, out, err = _run("--epochs", "3", "--resume", part, "--save", part, *schedule)
    assert code == 0, err
    assert "resumed from" in out and "after epoch 2 (step 44)" in out
    _assert_same_checkpoints(part, full)
    assert json.loads(str(np.load(part)["extra/config"]))["lr_step_size"] == 10


def test_resume_continues_a_cosine_interrupted_within_its_run(tmp_path, monkeypatch):
    """A cosine decays over the --epochs of its run: 2 epochs then a third is another schedule and refused (the
    record holds epochs), and a run of 3 stopped after 2 (Ctrl-C) and resumed is the run of 3 bit for bit."""
    from relax_mlir.training import run

    schedule = ["--lr-schedule", "cosine", "--warmup-steps", "5"]
    full, part, short = (str(tmp_path / f"{name}.npz") for name in ("full", "part", "short"))
    assert _run("--epochs", "3", "--save", full, *schedule)[0] == 0
    assert _run("--epochs", "2", "--save", short, *schedule)[0] == 0
    code, out, err = _run("--epochs", "3", "--resume", short, *schedule)
    assert (code, out) == (1, "")
    assert err == (f"relax-mlir train: error: --resume {short}: the run would not continue the checkpoint's: epochs: "
                   "2 in the checkpoint, 3 now (a cosine or linear schedule decays over the whole run: another "
                   "--epochs is another schedule)\n")

    run_epoch = run._run_epoch

    def interrupted(trainer, cfg, data, epoch, *rest):
        if epoch == 2:
            raise KeyboardInterrupt
        run_epoch(trainer, cfg, data, epoch, *rest)

    monkeypatch.setattr(run, "_run_epoch", interrupted)
    code, _, err = _run("--epochs", "3", "--save", part, *schedule)
    assert (code, err) == (130, f"relax-mlir train: interrupted; the last checkpoint is {part}\n")
    monkeypatch.setattr(run, "_run_epoch", run_epoch)
    code, out, err = _run("--epochs", "3", "--resume", part, "--save", part, *schedule)
    assert code == 0, err
    assert "after epoch 2 (step 44)" in out
    _assert_same_checkpoints(part, full)


def test_resume_with_other_schedule_settings_is_refused_as_another_lr_is(tmp_path):
    """Every setting that differs, named as the record names them; a checkpoint of a constant rate (as every one
    written before schedules) says "constant"."""
    step = str(tmp_path / "step.npz")
    constant = str(tmp_path / "constant.npz")
    assert _run("--epochs", "1", "--save", step, "--lr-schedule", "step", "--lr-step-size", "7")[0] == 0
    assert _run("--epochs", "1", "--save", constant)[0] == 0
    for resume, args, diffs in [
        (step, ["--lr-schedule", "step", "--lr-step-size", "8", "--lr-gamma", "0.5"],
         "lr_gamma: 0.1 in the checkpoint, 0.5 now; lr_step_size: 7 in the checkpoint, 8 now"),
        (step, [], "lr_gamma: 0.1 in the checkpoint, unused now; lr_schedule: 'step' in the checkpoint, 'constant' "
                   "now; lr_step_size: 7 in the checkpoint, unused now"),
        (constant, ["--lr-schedule", "cosine"], "epochs: unused in the checkpoint, 2 now; lr_eta_min: unused in the "
                                                "checkpoint, 0.0 now; lr_schedule: 'constant' in the checkpoint, "
                                                "'cosine' now"),
        (constant, ["--warmup-steps", "3"], "warmup_start_factor: unused in the checkpoint, 0.01 now; warmup_steps: "
                                            "0 in the checkpoint, 3 now"),
    ]:
        code, out, err = _run("--epochs", "2", "--resume", resume, *args)
        assert (code, out, err) == (1, "", f"relax-mlir train: error: --resume {resume}: the run would not continue "
                                           f"the checkpoint's: {diffs}\n")


def test_every_record_of_a_schedule_is_a_good_one_and_a_bad_one_is_named():
    from relax_mlir.training.config import LR_SCHEDULES

    good = [TrainConfig(**options) for options, _, _, _ in CASES.values()]
    good += [TrainConfig(lr_schedule=s, lr_step_size=3 if s == "step" else None,
                         lr_milestones=(4,) if s == "multistep" else None, lr_gamma=0.9 if s == "exponential" else None)
             for s in LR_SCHEDULES]
    for cfg in good:
        record = json.loads(json.dumps(cfg.trajectory()))
        assert record_problems(record) == [], record
    base = TrainConfig().trajectory()
    for changes, problems in [
        ({"lr_schedule": "cosine", "lr_eta_min": 0.0}, ["it lacks 'epochs' (the cosine schedule decays over the "
                                                        "whole run)"]),
        ({"lr_schedule": "warm"}, ["--lr-schedule 'warm': expected one of constant, step, multistep, exponential, "
                                   "cosine, linear"]),
        ({"lr_step_size": 4}, ["--lr-step-size needs --lr-schedule step"]),
        ({"lr_schedule": "multistep", "lr_milestones": [], "lr_gamma": 0.1},
         ["--lr-milestones (none): expected one or more steps, each at least 1"]),
        ({"lr_schedule": "step", "lr_step_size": 2.5, "lr_gamma": 0.1}, ["'lr_step_size' is 2.5, expected an "
                                                                         "integer"]),
        ({"warmup_steps": 3, "warmup_start_factor": 0}, ["--warmup-start-factor 0: must be in (0, 1] (the first "
                                                         "warm-up step's fraction of --lr)"]),
    ]:
        assert record_problems({**base, **changes}) == problems, changes
