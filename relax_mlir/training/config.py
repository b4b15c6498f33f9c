"""The configuration of ``relax-mlir train``: every setting of a run, checked and phrased as the CLI's options,
and the optimizer it names."""

from __future__ import annotations

import math
import os
import stat
from dataclasses import dataclass
from typing import Optional, Sequence

OPTIMIZERS = ("sgd", "momentum", "adam", "adamw")
MODELS = ("mlp", "cnn")

# The settings only some optimizers read: those optimizers, and the value a setting left unset (None) stands for.
# A setting given for another optimizer is refused: ignored, the run would not be the one asked for.
OPTIMIZER_SETTINGS = {"momentum": (("momentum",), 0.9), "dampening": (("momentum",), 0.0),
                      "nesterov": (("momentum",), False), "betas": (("adam", "adamw"), (0.9, 0.999)),
                      "eps": (("adam", "adamw"), 1e-8)}

LR_SCHEDULES = ("constant", "step", "multistep", "exponential", "cosine", "linear")
# The settings only some schedules read (PyTorch's scheduler arguments): those schedules, and the value a setting left
# unset (None) stands for, PyTorch's default. A setting given for another schedule is refused, as an optimizer's.
# The required ones have none: StepLR's step_size, MultiStepLR's milestones and ExponentialLR's gamma (StepLR's 0.1,
# applied every step, would leave 1e-10 of the rate after 10 steps).
SCHEDULE_SETTINGS = {"lr_step_size": (("step",), None), "lr_milestones": (("multistep",), None),
                     "lr_gamma": (("step", "multistep", "exponential"), 0.1), "lr_eta_min": (("cosine",), 0.0)}
REQUIRED_SCHEDULE_SETTINGS = {"step": "lr_step_size", "multistep": "lr_milestones", "exponential": "lr_gamma"}
WHOLE_RUN_SCHEDULES = ("cosine", "linear")  # they decay over the run's steps, so --epochs is part of them
WARMUP_START_FACTOR = 0.01


@dataclass
class TrainConfig:
    """Everything a run depends on (the CLI's options); the defaults are the tutorial's settings."""

    model: str = "mlp"
    hidden: Sequence[int] = (128, 128)
    channels: Sequence[int] = (8, 16)
    optimizer: str = "sgd"
    lr: float = 0.01
    weight_decay: float = 0.01
    momentum: Optional[float] = None  # the optimizer-specific settings: None is OPTIMIZER_SETTINGS' default
    dampening: Optional[float] = None
    nesterov: bool = False
    betas: Optional[tuple[float, float]] = None
    eps: Optional[float] = None
    reduction: str = "sum"
    epochs: int = 5
    batch_size: int = 64
    seed: int = 0
    data: Optional[str] = None
    target: str = "cpu"
    opt_level: int = 2
    save: Optional[str] = None
    resume: Optional[str] = None
    sync_batch_norm: bool = False  # under MPI: batch norm with the global batch's statistics (exact, slower)
    lr_schedule: str = "constant"  # and the schedule-specific settings: None is SCHEDULE_SETTINGS' default
    lr_step_size: Optional[int] = None
    lr_milestones: Optional[Sequence[int]] = None
    lr_gamma: Optional[float] = None
    lr_eta_min: Optional[float] = None
    warmup_steps: int = 0
    warmup_start_factor: Optional[float] = None  # (None: WARMUP_START_FACTOR)

    def problems(self) -> list[str]:
        """Every bad setting, phrased as the CLI option it comes from (an optimizer-specific one given for
        another optimizer included: as --hidden for the CNN, it would be ignored without a word)."""
        out = []
        if self.model not in MODELS:
            out.append(f"--model {self.model!r}: expected one of {', '.join(MODELS)}")
        if self.optimizer not in OPTIMIZERS:
            out.append(f"--optimizer {self.optimizer!r}: expected one of {', '.join(OPTIMIZERS)}")
        for name, value, low in (("epochs", self.epochs, 1), ("batch-size", self.batch_size, 1),
                                 ("seed", self.seed, 0), ("opt-level", self.opt_level, 0)):
            if value < low:
                out.append(f"--{name} {value}: must be at least {low}")
        if self.seed >= 2 ** 63:
            out.append(f"--seed {self.seed}: must be below 2**63 (a checkpoint stores it as an int64)")
        for name, sizes in (("hidden", self.hidden), ("channels", self.channels)):
            if not sizes or min(sizes) < 1:
                out.append(f"--{name} {' '.join(map(str, sizes))}: widths must be positive")
        if not (math.isfinite(self.lr) and self.lr > 0):
            out.append(f"--lr {self.lr}: must be a positive number")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            out.append(f"--weight-decay {self.weight_decay}: must be a number >= 0")
        settings = self.optimizer_settings(every=True)
        for name, value in (("momentum", settings["momentum"]), ("dampening", settings["dampening"]),
                            ("betas", settings["betas"][0]), ("betas", settings["betas"][1])):
            if not 0 <= value < 1:
                out.append(f"--{name} {value}: must be in [0, 1)")
        if not (math.isfinite(settings["eps"]) and settings["eps"] > 0):
            out.append(f"--eps {settings['eps']}: must be a positive number")
        for name, (optimizers, _) in OPTIMIZER_SETTINGS.items():
            if _given(getattr(self, name)) and self.optimizer not in optimizers:
                out.append(f"--{name} needs --optimizer {' or '.join(optimizers)}")
        return out + self._schedule_problems()

    def _schedule_problems(self) -> list[str]:
        """The learning-rate schedule's bad settings: an unknown schedule, a setting of another schedule (it would be
        ignored), a required one missing, one out of range. (The warm-up's length against the run's steps needs the
        data: ``schedule_steps_problem``.)"""
        out = []
        if self.lr_schedule not in LR_SCHEDULES:
            out.append(f"--lr-schedule {self.lr_schedule!r}: expected one of {', '.join(LR_SCHEDULES)}")
        for name, (schedules, _) in SCHEDULE_SETTINGS.items():
            if getattr(self, name) is not None and self.lr_schedule not in schedules:
                out.append(f"{_option(name)} needs --lr-schedule {' or '.join(schedules)}")
        required = REQUIRED_SCHEDULE_SETTINGS.get(self.lr_schedule)
        if required and getattr(self, required) is None:
            out.append(f"--lr-schedule {self.lr_schedule} needs {_option(required)}"
                       + (" (a factor per step; PyTorch's ExponentialLR has no default)" if required == "lr_gamma"
                          else ""))
        if self.lr_step_size is not None and self.lr_step_size < 1:
            out.append(f"--lr-step-size {self.lr_step_size}: must be at least 1")
        if self.lr_milestones is not None and (not self.lr_milestones or min(self.lr_milestones) < 1):
            out.append(f"--lr-milestones {' '.join(map(str, self.lr_milestones)) or '(none)'}: expected one or "
                       "more steps, each at least 1")
        if self.lr_gamma is not None and not (math.isfinite(self.lr_gamma) and self.lr_gamma > 0):
            out.append(f"--lr-gamma {self.lr_gamma}: must be a positive number")
        if self.lr_eta_min is not None and not 0 <= self.lr_eta_min <= self.lr:  # (NaN fails it)
            out.append(f"--lr-eta-min {self.lr_eta_min}: must be in [0, --lr {self.lr}] (the rate the cosine "
                       "anneals to)")
        if self.warmup_steps < 0:
            out.append(f"--warmup-steps {self.warmup_steps}: must be at least 0")
        if self.warmup_start_factor is not None:
            if not self.warmup_steps:
                out.append("--warmup-start-factor needs --warmup-steps")
            if not 0 < self.warmup_start_factor <= 1:
                out.append(f"--warmup-start-factor {self.warmup_start_factor}: must be in (0, 1] (the first "
                           "warm-up step's fraction of --lr)")
        return out

    def schedule_settings(self) -> dict:
        """The schedule's settings as a checkpoint records them: nothing for a constant rate without warm-up (the
        records written before schedules existed), else the schedule, the settings it reads (unset ones as their
        defaults), the warm-up's, and ``epochs`` for a schedule that decays over the whole run."""
        out = {}
        if self.lr_schedule != "constant":
            out.update(lr_schedule=self.lr_schedule, **self.lr_settings())
            if "lr_milestones" in out:  # (in order: 30 10 is the schedule of 10 30)
                out["lr_milestones"] = sorted(out["lr_milestones"])
        if self.warmup_steps:
            out.update(warmup_steps=self.warmup_steps, warmup_start_factor=self.warmup_start_factor_or_default)
        if self.lr_schedule in WHOLE_RUN_SCHEDULES:
            out["epochs"] = self.epochs
        return out

    def lr_settings(self, every: bool = False) -> dict:
        """The schedule-specific settings the chosen schedule reads (``every``: all of them), unset ones as their
        defaults (None for a required one)."""
        return {name: default if getattr(self, name) is None else getattr(self, name)
                for name, (schedules, default) in SCHEDULE_SETTINGS.items() if every or self.lr_schedule in schedules}

    @property
    def warmup_start_factor_or_default(self) -> float:
        return WARMUP_START_FACTOR if self.warmup_start_factor is None else self.warmup_start_factor

    def optimizer_settings(self, every: bool = False) -> dict:
        """The optimizer-specific settings the chosen optimizer reads (``every``: all of them), unset ones as
        their defaults."""
        return {name: default if getattr(self, name) is None else getattr(self, name)
                for name, (optimizers, default) in OPTIMIZER_SETTINGS.items() if every or self.optimizer in optimizers}

    def trajectory(self, ranks: int = 1) -> dict:
        """The settings that decide the parameters after each epoch (the ones a resumed run must share), for a
        run on ``ranks`` MPI ranks. The global batch makes the trajectory independent of the ranks, except
        through a CNN's batch norm: without ``--sync-batch-norm`` each of K > 1 ranks normalises with its own
        shard's statistics, so the run depends on K; with it, or in one process, on the global batch's. A
        learning-rate schedule adds its settings (``schedule_settings``: ``epochs`` too for a cosine or linear
        decay, whose rates depend on the run's length)."""
        keys = ["model", "hidden" if self.model == "mlp" else "channels", "optimizer", "lr", "weight_decay",
                "reduction", "batch_size", "seed"]
        settings = {**{k: getattr(self, k) for k in keys}, **self.optimizer_settings(), **self.schedule_settings()}
        out = {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in settings.items()}
        if self.model == "cnn":
            out["batch_norm_statistics"] = batch_norm_statistics(self.sync_batch_norm, ranks)
        return out


# What ``trajectory()`` records, key by key, as its JSON reads back: the kind of value and whether every record has
# it. The model's widths are "hidden" (mlp) or "channels" (cnn); the optimizer-specific settings only for the
# optimizers that read them; "batch_norm_statistics" only for the CNN, and not in records written before it was;
# the learning-rate schedule's settings only for a schedule or a warm-up (``schedule_settings``).
_RECORD = {"model": ("str", True), "hidden": ("widths", False), "channels": ("widths", False),
           "optimizer": ("str", True), "lr": ("number", True), "weight_decay": ("number", True),
           "reduction": ("str", True), "batch_size": ("int", True), "seed": ("int", True),
           "momentum": ("number", False), "dampening": ("number", False), "nesterov": ("bool", False),
           "betas": ("pair", False), "eps": ("number", False), "batch_norm_statistics": ("str", False),
           "lr_schedule": ("str", False), "lr_step_size": ("int", False), "lr_milestones": ("widths", False),
           "lr_gamma": ("number", False), "lr_eta_min": ("number", False), "warmup_steps": ("int", False),
           "warmup_start_factor": ("number", False), "epochs": ("int", False)}
_KINDS = {"str": "a string", "int": "an integer", "number": "a number", "bool": "true or false",
          "widths": "a list of integers", "pair": "a list of two numbers"}
REDUCTIONS = ("sum", "mean")


def record_problems(record) -> list[str]:
    """What is wrong with a checkpoint's record of a run's settings (``trajectory()`` as read back from its JSON):
    not an object, a setting missing, unknown or of another kind, or a value no run can have (``problems()``,
    phrased as the CLI options). Empty for every record ``trajectory()`` writes, and wrote before."""
    if not isinstance(record, dict):
        return [f"it holds {type(record).__name__} {_short(record)}, not an object of settings"]
    out = [f"it lacks {key!r}" for key, (_, required) in _RECORD.items() if required and key not in record]
    out += [f"it has {key!r}, which is not a setting" for key in record if key not in _RECORD]
    out += [f"{key!r} is {_short(record[key])}, expected {_KINDS[_RECORD[key][0]]}"
            for key in record if key in _RECORD and not _is_kind(record[key], _RECORD[key][0])]
    if out:
        return out
    widths = "hidden" if record["model"] == "mlp" else "channels"
    if record["model"] in MODELS and widths not in record:
        out.append(f"it lacks {widths!r} (the {record['model']}'s widths)")
    if record.get("lr_schedule") in WHOLE_RUN_SCHEDULES and "epochs" not in record:
        out.append(f"it lacks 'epochs' (the {record['lr_schedule']} schedule decays over the whole run)")
    if record["reduction"] not in REDUCTIONS:
        out.append(f"'reduction' is {record['reduction']!r}, expected one of {', '.join(REDUCTIONS)}")
    settings = {k: tuple(v) if isinstance(v, list) else v for k, v in record.items() if k != "batch_norm_statistics"}
    return out + TrainConfig(**settings).problems()


def _is_kind(value, kind: str) -> bool:
    if kind in ("int", "number") and isinstance(value, bool):
        return False  # (JSON's true is not a number)
    if kind == "widths":
        return isinstance(value, list) and all(_is_kind(v, "int") for v in value)
    if kind == "pair":
        return isinstance(value, list) and len(value) == 2 and all(_is_kind(v, "number") for v in value)
    return isinstance(value, {"str": str, "int": int, "number": (int, float), "bool": bool}[kind])


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


GLOBAL_BATCH_NORM = "the global batch's (one process, or --sync-batch-norm)"


def batch_norm_statistics(sync_batch_norm: bool, ranks: int) -> str:
    """What a CNN's batch norm normalises with, as ``trajectory`` records it (and a refused resume shows it)."""
    if sync_batch_norm or ranks == 1:
        return GLOBAL_BATCH_NORM
    return f"each rank's shard's ({ranks} ranks without --sync-batch-norm)"


def _given(value) -> bool:
    """Whether an optimizer-specific setting was asked for (None, and --nesterov's False, leave it unset)."""
    return value is not None and value is not False


def _option(name: str) -> str:
    """The CLI option of a setting: ``lr_step_size`` is ``--lr-step-size``."""
    return "--" + name.replace("_", "-")


def schedule_steps_problem(cfg: TrainConfig, steps: int) -> Optional[str]:
    """Why the schedule cannot run over a run of ``steps`` optimizer steps (None if it can): a cosine or linear
    decay needs steps after the warm-up."""
    if cfg.lr_schedule in WHOLE_RUN_SCHEDULES and cfg.warmup_steps >= steps:
        return (f"--warmup-steps {cfg.warmup_steps}: the run has only {steps} steps (--epochs {cfg.epochs}); "
                f"--lr-schedule {cfg.lr_schedule} decays over the steps after the warm-up")
    return None


def make_lr(cfg: TrainConfig, steps: int):
    """The optimizer's ``lr``: the float ``--lr`` for a constant rate without warm-up (the optimizer function of
    a run without a schedule, unchanged), else the schedule (``lr_schedule.py``) over a run of ``steps``
    optimizer steps. A warm-up is a ``LinearLR`` from ``warmup_start_factor * lr`` to ``lr`` over its steps,
    put in front with ``SequentialLR``, which restarts the schedule's count after it: the step size, the
    milestones and the exponential's power count from the warm-up's end, and a cosine or linear decay spans the
    ``steps - warmup_steps`` steps after it (to ``lr_eta_min``, or to 0 for ``linear``, as
    ``get_linear_schedule_with_warmup`` of Hugging Face's transformers does)."""
    from .lr_schedule import CosineAnnealingLR, ExponentialLR, LinearLR, MultiStepLR, SequentialLR, StepLR

    s = cfg.lr_settings(every=True)
    lr, kind, warmup = cfg.lr, cfg.lr_schedule, cfg.warmup_steps
    if kind == "constant" and not warmup:
        return lr
    decay = steps - warmup
    schedule = {"constant": lambda: LinearLR(lr, 1.0, 1.0, total_iters=1),  # lr * (1.0 + 0.0): exactly lr
                "step": lambda: StepLR(lr, s["lr_step_size"], s["lr_gamma"]),
                "multistep": lambda: MultiStepLR(lr, list(s["lr_milestones"]), s["lr_gamma"]),
                "exponential": lambda: ExponentialLR(lr, s["lr_gamma"]),
                "cosine": lambda: CosineAnnealingLR(lr, decay, s["lr_eta_min"]),
                "linear": lambda: LinearLR(lr, 1.0, 0.0, total_iters=decay)}[kind]()
    if not warmup:
        return schedule
    return SequentialLR([LinearLR(lr, cfg.warmup_start_factor_or_default, 1.0, total_iters=warmup), schedule],
                        [warmup])


def describe_lr(cfg: TrainConfig, steps: int) -> str:
    """The schedule in words, for the run's first line ("" for a constant rate without warm-up: that line is
    as it was before schedules)."""
    if cfg.lr_schedule == "constant" and not cfg.warmup_steps:
        return ""
    s = cfg.lr_settings(every=True)
    decay = steps - cfg.warmup_steps
    main = {"constant": "constant",
            "step": f"x{s['lr_gamma']} every {s['lr_step_size']} steps",
            "multistep": f"x{s['lr_gamma']} at steps {', '.join(map(str, s['lr_milestones'] or ()))}",
            "exponential": f"x{s['lr_gamma']} every step",
            "cosine": f"cosine to {s['lr_eta_min']} over {decay} steps",
            "linear": f"linear to 0 over {decay} steps"}[cfg.lr_schedule]
    if not cfg.warmup_steps:
        return f"lr {cfg.lr}, {main}"
    start = cfg.warmup_start_factor_or_default
    return (f"lr {cfg.lr}, warm-up from {start}x over {cfg.warmup_steps} steps, then {main}"
            + (" (counted from the warm-up's end)" if cfg.lr_schedule in ("step", "multistep") else ""))


def make_optimizer(cfg: TrainConfig, steps: Optional[int] = None):
    """The optimizer ``cfg`` names, its ``lr`` as ``make_lr`` makes it for a run of ``steps`` optimizer steps
    (needed for a cosine or linear decay only)."""
    from .optimizer import SGD, Adam, AdamW, MomentumSGD

    if steps is None and cfg.lr_schedule in WHOLE_RUN_SCHEDULES:
        raise ValueError(f"make_optimizer: --lr-schedule {cfg.lr_schedule} decays over the run: expected its "
                         "number of steps")
    s, lr = cfg.optimizer_settings(), make_lr(cfg, steps or 0)
    if cfg.optimizer == "sgd":
        return SGD(lr, weight_decay=cfg.weight_decay)
    if cfg.optimizer == "momentum":
        return MomentumSGD(lr, s["momentum"], s["dampening"], cfg.weight_decay, s["nesterov"])
    if cfg.optimizer == "adam":
        return Adam(lr, tuple(s["betas"]), s["eps"], cfg.weight_decay)
    if cfg.optimizer == "adamw":
        return AdamW(lr, tuple(s["betas"]), s["eps"], cfg.weight_decay)
    raise ValueError(f"unknown optimizer {cfg.optimizer!r}; expected {', '.join(OPTIMIZERS)}")


def check_output_path(path: Optional[str], option: str, *others: tuple[str, Optional[str]]) -> None:
    """Fail before any work, not after it, when ``path`` cannot be written, or names the same file as one of
    ``others``, the (option, path) pairs of the command's inputs and other outputs: writing it would replace that
    file (a model or data set read, a file just written) and the command would still succeed. Every command with
    an output checks it here (``None``: an option not given)."""
    if path is None:
        return
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f"{option} {path}: is a directory; expected a file name")
    if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):  # (write_atomically refuses it too, later)
        raise ValueError(f"{option} {path}: is not a regular file (a device, FIFO or socket); expected a file name")
    if not os.path.isdir(directory):
        raise ValueError(f"{option} {path}: the directory {directory} does not exist")
    if not os.access(directory, os.W_OK):
        raise ValueError(f"{option} {path}: the directory {directory} is not writable")
    for other_option, other in others:
        if other is not None and same_file(path, other):
            raise ValueError(f"{option} {path}: the same file as {other_option} {other}; expected another path "
                             "(writing it would replace that file)")


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file: the same once links and ``..`` are resolved, or, both existing, the same
    file on disk (a hard link, a case-insensitive file system's other spelling)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): not the same file as one that does
        return False
