"""The training loop behind ``relax-mlir train``: build a model, set it up for training, compile, train, evaluate,
save after every epoch and resume (the settings are in ``config.py``, the plot in ``plot.py``).

Deterministic for a given seed: the initial parameters, the batch order of every epoch (it depends only on
``(seed, epoch)``) and dropout keys all derive from it; the 80/20 split of digits is fixed. A checkpoint
(``save``, written after every epoch) holds parameters, states, optimizer state, step, the history and the
settings that shape the trajectory; ``resume`` checks those settings and continues so that the final
parameters and every epoch's loss and accuracy are bit for bit those of an uninterrupted run. (The same code too:
another ``--target`` or ``--opt-level`` is allowed, with a note, and matches up to float rounding.)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from ..distributed.launch import Ranks, from_environment
from .checkpoint_io import Checkpoint, CheckpointError, read_checkpoint
from .config import (GLOBAL_BATCH_NORM, MODELS, TrainConfig, check_output_path, describe_lr, make_optimizer,
                     record_problems, schedule_steps_problem)
from .data import Dataset, batches, load_data
from .nan_policy import NonFiniteError

@dataclass
class History:
    """Per epoch: mean training loss, test accuracy, seconds of its steps and of its evaluation; plus every step's
    loss and the seconds the Trainer took to set up and compile (this run's)."""

    epoch_loss: list[float] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    step_loss: list[float] = field(default_factory=list)
    eval_seconds: list[float] = field(default_factory=list)
    build_seconds: float = 0.0


def make_trainer(cfg: TrainConfig, data: Dataset, ckpt: Optional[Checkpoint] = None, ranks: Ranks = Ranks()):
    """The backbone for ``cfg.model``, set up with softmax cross-entropy and the optimizer, initialised (or
    restored from ``ckpt``, checked against the model before compiling), built. Under MPI (``ranks.size`` > 1)
    the model takes this rank's part of the global batch and the trainer is data-parallel."""
    from ..ir.struct_info import TensorStructInfo
    from ..models import cnn, mlp
    from .loss import CrossEntropyLoss
    from .setup_trainer import SetupTrainer
    from .trainer import Trainer

    classes, b = data.num_classes, cfg.batch_size // ranks.size
    if cfg.model == "mlp":
        backbone = mlp(b, (int(np.prod(data.image_shape)), *cfg.hidden, classes))
    elif cfg.model == "cnn":
        backbone = cnn(b, data.image_shape, cfg.channels, classes)
    else:
        raise ValueError(f"unknown model {cfg.model!r}; expected {', '.join(MODELS)}")
    setup = SetupTrainer(CrossEntropyLoss(reduction=cfg.reduction), make_optimizer(cfg, run_steps(cfg, data)),
                         [TensorStructInfo((b, classes), "float32"), TensorStructInfo((b,), "int64")])
    if ranks.comm is not None:
        from ..distributed import DistributedTrainer

        trainer = DistributedTrainer(backbone, int(backbone.attrs["param_num"]), setup, seed=cfg.seed,
                                     comm=ranks.comm, sync_batch_norm=cfg.sync_batch_norm and cfg.model == "cnn")
    else:
        trainer = Trainer(backbone, int(backbone.attrs["param_num"]), setup, seed=cfg.seed)
    if ckpt is not None:
        trainer.restore(ckpt, f"--resume {ckpt.path}")  # a checkpoint of another model is refused before compiling
    else:
        trainer.xavier_uniform_init_params()  # states start as the model says (its "state_init" attribute)
    return trainer.build(target=cfg.target, opt_level=cfg.opt_level)


def run_steps(cfg: TrainConfig, data: Dataset) -> int:
    """The optimizer steps of the whole run (every epoch drops the last partial batch), resumed or not: a cosine or
    linear schedule decays over them."""
    return cfg.epochs * (len(data.x_train) // cfg.batch_size)


def _inputs(cfg: TrainConfig, x: np.ndarray) -> np.ndarray:
    return x.reshape(len(x), -1) if cfg.model == "mlp" else x


def evaluate(trainer, cfg: TrainConfig, x: np.ndarray, y: np.ndarray, ranks: Ranks = Ranks()) -> float:
    """Test accuracy over every example; the last partial batch is padded (the model's batch is static).
    Under MPI each rank predicts every K-th chunk of its batch size and the counts are summed."""
    correct, b = 0, cfg.batch_size // ranks.size
    for start in range(ranks.rank * b, len(x), ranks.size * b):
        chunk = x[start:start + b]
        n = len(chunk)
        if n < b:
            chunk = np.concatenate([chunk, np.zeros((b - n,) + chunk.shape[1:], chunk.dtype)])
        pred = trainer.predict(_inputs(cfg, chunk)).numpy()[:n]
        correct += int(np.sum(pred.argmax(1) == y[start:start + n]))
    return ranks.sum(correct) / len(x)


def data_fingerprint(data: Dataset) -> str:
    """A short hash of the training set, so a checkpoint is never resumed on other data."""
    h = hashlib.blake2b(digest_size=8)
    for a in (data.x_train, data.y_train):
        h.update(str(a.shape).encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def _read_resume(path: str) -> Checkpoint:
    """The checkpoint to resume, read and checked before the data are loaded and anything is compiled: its arrays
    (``read_checkpoint``) and every entry of the run's record ``train`` reads (``_check_record``)."""
    ckpt = read_checkpoint(path, f"--resume {path}")
    if "config" not in ckpt.extra or "epoch" not in ckpt.extra:
        raise CheckpointError(f"--resume {path}: a Trainer.save checkpoint without the run's record (extra/config, "
                              "extra/epoch); expected a checkpoint written by `relax-mlir train --save`")
    _check_record(ckpt, f"--resume {path}")
    return ckpt


_HISTORY = ("epoch_loss", "accuracy", "seconds", "step_loss")
_TARGETS = {"cpu": "cpu", "llvm": "cpu", "numpy": "numpy", "interpreter": "numpy"}  # Trainer.build's names


def _check_record(ckpt: Checkpoint, where: str) -> None:
    """The run's record, entry by entry, as ``_save`` writes it: one CheckpointError naming the entry, what it
    holds and what was expected (unchecked, a bad entry was a traceback, a bare ``int()`` or JSON message naming
    no file, or an error from NumPy after compiling). The history, ``target`` and ``opt_level`` may be missing
    (``train`` does without them); the history's lengths must agree with ``epoch`` and ``step``."""
    epoch = _check_epoch(ckpt, where)
    _check_config(ckpt.extra, where)
    _check_fingerprint(ckpt.extra, where)
    for key in _HISTORY:
        if key in ckpt.extra:
            _check_history(ckpt.extra[key], key, ckpt.step if key == "step_loss" else epoch + 1, where)
    _check_code(ckpt.extra, where)


def _check_epoch(ckpt: Checkpoint, where: str) -> int:
    epoch = _scalar(ckpt.extra, "epoch", "iu", where, "an integer >= 0 (the last whole epoch, counted from 0)")
    if not 0 <= epoch < ckpt.step:  # (every epoch takes at least one step)
        raise CheckpointError(f"{where}: extra/epoch is {epoch}, expected an integer in [0, {ckpt.step}) (the last "
                              f"whole epoch, counted from 0: each epoch takes a step or more, and 'step' is "
                              f"{ckpt.step})")
    return epoch


def _check_config(extra: dict, where: str) -> None:
    """The settings as JSON, each of the kind and in the range ``TrainConfig`` allows (``record_problems``)."""
    text = _scalar(extra, "config", "U", where, "the run's settings as a JSON object")
    try:
        problems = record_problems(json.loads(text))
    except (ValueError, RecursionError) as exc:
        problems = [f"it is not JSON ({exc})" if isinstance(exc, ValueError) else "it nests too deeply"]
    if problems:
        raise CheckpointError(f"{where}: extra/config: {'; '.join(problems)}; expected the run's settings as "
                              "`relax-mlir train --save` writes them (a JSON object)")


def _check_fingerprint(extra: dict, where: str) -> None:
    """``data_fingerprint``'s hex digest (missing or another string, ``_check_resumable`` said "the data differ")."""
    if "data" not in extra:
        raise CheckpointError(f"{where}: the run's record lacks extra/data (the training set's fingerprint); expected "
                              "a checkpoint written by `relax-mlir train --save`")
    data = _scalar(extra, "data", "U", where, "the training set's fingerprint (16 hex digits)")
    if not re.fullmatch("[0-9a-f]{16}", data):
        raise CheckpointError(f"{where}: extra/data is {data[:40]!r}, expected the training set's fingerprint (16 "
                              "hex digits)")


def _check_code(extra: dict, where: str) -> None:
    """``target`` and ``opt_level``, both or neither (files written before they were recorded)."""
    if ("target" in extra) != ("opt_level" in extra):
        have, lack = ("target", "opt_level") if "target" in extra else ("opt_level", "target")
        raise CheckpointError(f"{where}: it has extra/{have} without extra/{lack}; expected both or neither")
    if "target" in extra:
        target = _scalar(extra, "target", "U", where, f"one of {', '.join(_TARGETS)}")
        level = _scalar(extra, "opt_level", "iu", where, "an integer in [0, 3]")
        if target not in _TARGETS or not 0 <= level <= 3:
            raise CheckpointError(f"{where}: extra/target {target[:40]!r} and extra/opt_level {level}: expected a "
                                  f"target of {', '.join(_TARGETS)} and an --opt-level in [0, 3]")


def _scalar(extra: dict, key: str, kinds: str, where: str, expected: str):
    """``extra[key]`` as a Python int (dtype kinds "iu") or str ("U"), refused unless it is one scalar of them."""
    value = extra[key]
    if value.shape != () or value.dtype.kind not in kinds:
        raise CheckpointError(f"{where}: extra/{key} holds {_held(value)}; expected {expected}")
    return str(value) if kinds == "U" else int(value)


def _held(value: np.ndarray) -> str:
    """What an entry holds, for a message: "the string 'abc'", "the float 1.7", "an array of int64, shape (2,)"."""
    if value.shape != ():
        return f"an array of {value.dtype}, shape {value.shape}"
    kind = {"U": "string", "S": "bytes", "b": "bool", "f": "float", "i": "integer", "u": "integer"}
    text = str(value)
    return f"the {kind.get(value.dtype.kind, str(value.dtype))} {repr(text[:40]) if value.dtype.kind == 'U' else text}"


def _check_history(value: np.ndarray, key: str, length: int, where: str) -> None:
    """One list of the history: finite real numbers, one per epoch (``step_loss``: per step); accuracy in [0, 1],
    seconds >= 0."""
    expected = (f"{length} finite numbers (one per {'step' if key == 'step_loss' else 'epoch'}"
                + ("" if key != "accuracy" else ", in [0, 1]") + ("" if key != "seconds" else ", >= 0") + ")")
    if value.ndim != 1 or value.dtype.kind not in "iuf" or len(value) != length:
        raise CheckpointError(f"{where}: extra/{key} holds {_held(value)}; expected {expected}")
    low, high = {"accuracy": (0, 1), "seconds": (0, np.inf)}.get(key, (-np.inf, np.inf))
    bad = ~(np.isfinite(value) & (value >= low) & (value <= high))
    if bad.any():
        first = int(np.argmax(bad))
        raise CheckpointError(f"{where}: extra/{key}[{first}] is {value[first]}; expected {expected}")


def _check_resumable(path: str, extra: dict, cfg: TrainConfig, fingerprint: str, ranks: int = 1) -> None:
    """Every setting that differs from the checkpoint's, at once (run on ``ranks`` MPI ranks). The learning-rate
    schedule's are compared as ``--lr`` is: the resumed run must be the one the checkpoint began."""
    saved, now = json.loads(str(extra["config"])), cfg.trajectory(ranks)
    if saved.get("model") == "cnn":
        # written before the record had the batch norm's statistics: taken as one process's, the run such a
        # checkpoint comes from unless an MPI job without --sync-batch-norm wrote it
        saved.setdefault("batch_norm_statistics", GLOBAL_BATCH_NORM)
    for record in (saved, now):  # a constant rate is not recorded (as before schedules): shown as what it is
        record.setdefault("lr_schedule", "constant")
        record.setdefault("warmup_steps", 0)
    diffs = [_difference(k, saved, now) for k in sorted(set(saved) | set(now)) if saved.get(k) != now.get(k)]
    if str(extra.get("data", "")) != fingerprint:
        diffs.append("the training data differ")
    if diffs:
        raise ValueError(f"--resume {path}: the run would not continue the checkpoint's: " + "; ".join(diffs))


def _difference(key: str, saved: dict, now: dict) -> str:
    """One setting a resume would change, as "lr: 0.01 in the checkpoint, 0.02 now" ("unused": a setting of another
    optimizer or schedule); why ``epochs`` matters when both runs decay over it (it is recorded for them only)."""
    shown = lambda d: repr(d[key]) if key in d else "unused"  # noqa: E731
    why = (" (a cosine or linear schedule decays over the whole run: another --epochs is another schedule)"
           if key == "epochs" and key in saved and key in now else "")
    return f"{key}: {shown(saved)} in the checkpoint, {shown(now)} now{why}"


def _code(target: str, opt_level: int) -> str:
    return "--target numpy" if _TARGETS.get(target) == "numpy" else f"--target cpu --opt-level {opt_level}"


def _other_code(cfg: TrainConfig, extra: dict) -> Optional[str]:
    """A note when the run resumes with another ``--target`` or ``--opt-level`` than the checkpoint was trained
    with (None when the same, or not recorded: checkpoints written before it was). Allowed, as PyTorch resumes a
    GPU checkpoint on the CPU: the interpreter helps debug a run, -O0 works around a compiler problem. The
    settings are the same, but the float rounding of another code is not (about 1e-8 on the parameters), so the
    run is then not bit for bit the uninterrupted one."""
    if "target" not in extra:
        return None
    saved, now = _code(str(extra["target"]), int(extra["opt_level"])), _code(cfg.target, cfg.opt_level)
    if saved == now:
        return None
    return (f"note: {cfg.resume} was written by a run with {saved}, this one uses {now}: the same settings, but "
            "other code rounds floats differently, so the run matches an uninterrupted one up to rounding, not bit for "
            "bit")


def _saved_history(extra: dict) -> History:
    return History(*([float(v) for v in extra.get(key, [])] for key in ("epoch_loss", "accuracy", "seconds",
                                                                        "step_loss")))


def train(cfg: TrainConfig, log: Callable[[str], None] = print, progress: bool = True) -> History:
    """Train as ``cfg`` says; returns the history (and writes ``cfg.save`` after every epoch).

    Raises ``ValueError`` (bad settings, data or checkpoint) or ``NonFiniteError`` (a step diverged: the
    checkpoint of the last whole epoch is kept)."""
    ranks = from_environment()
    _check_same_settings(cfg, ranks)
    problems = cfg.problems()
    if cfg.batch_size % ranks.size:
        problems.append(f"--global-batch {cfg.batch_size}: must be a multiple of the {ranks.size} MPI ranks "
                        "(each rank takes an equal part)")
    if not ranks.root:
        log, progress = (lambda line: None), False  # rank 0 speaks for the job
    if problems:
        raise ValueError("; ".join(problems))
    check_output_path(cfg.save, "--save", ("--data", cfg.data))  # (--resume X --save X continues X: allowed)
    ckpt = _read_resume(cfg.resume) if cfg.resume else None
    extra = ckpt.extra if ckpt else None
    data = load_data(cfg.data)
    if len(data.x_train) < cfg.batch_size:
        raise ValueError(f"--batch-size {cfg.batch_size}: the training set has only {len(data.x_train)} examples")
    problem = schedule_steps_problem(cfg, run_steps(cfg, data))
    if problem:
        raise ValueError(problem)
    fingerprint = data_fingerprint(data) if cfg.save or cfg.resume else ""
    history, first_epoch = History(), 0
    if extra is not None:
        _check_resumable(cfg.resume, extra, cfg, fingerprint, ranks.size)
        history, first_epoch = _saved_history(extra), int(extra["epoch"]) + 1
        if first_epoch >= cfg.epochs:
            log(f"nothing to train: {cfg.resume} holds {first_epoch} epochs, --epochs is {cfg.epochs}")
            return history
    start_compile = time.perf_counter()
    trainer = make_trainer(cfg, data, ckpt, ranks)
    history.build_seconds = time.perf_counter() - start_compile
    on = f" on {ranks.size} MPI ranks of {cfg.batch_size // ranks.size} examples" if ranks.size > 1 else ""
    schedule = describe_lr(cfg, run_steps(cfg, data))  # ("" for a constant rate: the line as it was without)
    log(f"{data.name}: {len(data.x_train)} training / {len(data.x_test)} test examples, "
        f"{'x'.join(map(str, data.image_shape))} images, {data.num_classes} classes; {cfg.model} compiled for "
        f"{cfg.target} in {history.build_seconds:.2f} s{on}" + (f"; {schedule}" if schedule else ""))
    if extra is not None:
        log(f"resumed from {cfg.resume} after epoch {first_epoch} (step {trainer.step})")
        note = _other_code(cfg, extra)
        if note:
            log(note)
    resaved = cfg.resume and cfg.save and os.path.exists(cfg.save) and os.path.samefile(cfg.resume, cfg.save)
    saved = first_epoch if resaved else 0  # whole epochs in the file --save names
    for epoch in range(first_epoch, cfg.epochs):
        try:
            _run_epoch(trainer, cfg, data, epoch, history, log, progress, ranks)
        except NonFiniteError as exc:
            raise _diverged(exc, cfg, epoch, saved) from None
        if cfg.save:
            _save(trainer, cfg, epoch, fingerprint, history, ranks)
            saved = epoch + 1
    return history


def _check_same_settings(cfg: TrainConfig, ranks: Ranks) -> None:
    """Under MPI, refuse ranks started with different settings (``mpiexec`` MPMD lines, a per-host wrapper):
    they would wait for each other forever (``--save`` on one rank: its barrier; other ``--epochs``: an
    all-reduce) or train different models silently (``--lr``). One allgather of every setting, first of all,
    so every rank raises the same error, naming each option that differs."""
    if ranks.comm is None:
        return
    mine = dataclasses.asdict(cfg)
    every = ranks.comm.allgather(mine)
    diffs = []
    for key in mine:
        groups: dict = {}
        for rank, settings in enumerate(every):
            groups.setdefault(repr(settings.get(key)), []).append(rank)
        if len(groups) > 1:
            option = "--global-batch" if key == "batch_size" else "--" + key.replace("_", "-")
            diffs.append(f"{option}: " + ", ".join(f"{value} on rank{'s' * (len(r) > 1)} {', '.join(map(str, r))}"
                                                   for value, r in groups.items()))
    if diffs:
        raise ValueError(f"the {ranks.size} MPI ranks were started with different settings (every rank must run "
                         "the same command): " + "; ".join(diffs))


def _diverged(exc: NonFiniteError, cfg: TrainConfig, epoch: int, saved: int) -> NonFiniteError:
    """The Trainer's error with the epoch, the advice and where the last good checkpoint is (the file --save
    wrote after the last whole epoch; a step that diverged never reaches it)."""
    kept = ""
    if cfg.save:
        kept = (f"; the last good checkpoint is {cfg.save} (after epoch {saved}; --resume it with a lower --lr)"
                if saved else f"; no checkpoint was written ({cfg.save} is saved after each whole epoch)")
    return NonFiniteError(f"{exc} (epoch {epoch + 1}); lower the learning rate (--lr {cfg.lr}){kept}",
                          exc.step, exc.tensor, exc.index, exc.batch_index)


def _save(trainer, cfg: TrainConfig, epoch: int, fingerprint: str, history: History, ranks: Ranks = Ranks()) -> None:
    """The checkpoint: the Trainer's arrays plus what ``resume`` checks, the history so far and the code the run
    was compiled to (``target``, ``opt_level``: not part of the trajectory, see ``_other_code``)."""
    config = json.dumps(cfg.trajectory(ranks.size))
    trainer.save(cfg.save, extra={"epoch": epoch, "config": config, "data": fingerprint,
                                  "epoch_loss": history.epoch_loss, "accuracy": history.accuracy,
                                  "seconds": history.seconds, "step_loss": history.step_loss,
                                  "target": cfg.target, "opt_level": cfg.opt_level})


def _run_epoch(trainer, cfg: TrainConfig, data: Dataset, epoch: int, history: History,
               log: Callable[[str], None], progress: bool, ranks: Ranks) -> None:
    """One pass over the training set in the (seed, epoch) order, each global batch split over the ranks,
    then the test accuracy."""
    t0, losses = time.perf_counter(), []
    order = list(batches(len(data.x_train), cfg.batch_size, cfg.seed, epoch))
    steps = _progress(order, f"epoch {epoch + 1}/{cfg.epochs}", progress)
    for idx in steps:
        idx = ranks.shard(idx)
        loss = float(trainer.update_params(_inputs(cfg, data.x_train[idx]), data.y_train[idx]).numpy())
        losses.append(loss)  # finite: the Trainer (nan_policy="raise") refuses a non-finite step
        if progress:
            steps.set_postfix(loss=f"{loss:.3f}", refresh=False)
    seconds = time.perf_counter() - t0
    accuracy = evaluate(trainer, cfg, data.x_test, data.y_test, ranks)
    history.eval_seconds.append(time.perf_counter() - t0 - seconds)
    history.epoch_loss.append(float(np.mean(losses)))
    history.accuracy.append(accuracy)
    history.seconds.append(seconds)
    history.step_loss += losses
    log(f"epoch {epoch + 1}/{cfg.epochs}: loss {history.epoch_loss[-1]:.4f}  test accuracy "
        f"{100 * accuracy:.2f}%  ({len(order)} steps, {1e3 * seconds / len(order):.3f} ms/step)")


def _progress(items, desc: str, enabled: bool):
    if not enabled:
        return items
    from tqdm import tqdm

    return tqdm(items, desc=desc, unit="step", leave=False, dynamic_ncols=True)
