"""The training loop behind ``relax-mlir train``: build a model, set it up for training, compile, train, evaluate.

Deterministic for a given seed: the data split, the initial parameters, the batch order of every epoch and
dropout keys all derive from it, and a run resumed from a checkpoint continues exactly where it stopped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from .data import Dataset, batches, load_data


@dataclass
class TrainConfig:
    """Everything a run depends on (the CLI's options)."""

    model: str = "mlp"
    hidden: Sequence[int] = (128, 128)
    channels: Sequence[int] = (8, 16)
    optimizer: str = "sgd"
    lr: float = 0.01
    weight_decay: float = 0.01
    momentum: float = 0.9
    dampening: float = 0.0
    nesterov: bool = False
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    reduction: str = "sum"
    epochs: int = 5
    batch_size: int = 64
    seed: int = 0
    data: Optional[str] = None
    target: str = "cpu"
    opt_level: int = 2
    save: Optional[str] = None
    resume: Optional[str] = None


@dataclass
class History:
    """Per epoch: mean training loss, test accuracy, seconds; plus every step's loss."""

    epoch_loss: list[float] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    step_loss: list[float] = field(default_factory=list)


def make_optimizer(cfg: TrainConfig):
    from .optimizer import SGD, Adam, AdamW, MomentumSGD

    if cfg.optimizer == "sgd":
        return SGD(cfg.lr, weight_decay=cfg.weight_decay)
    if cfg.optimizer == "momentum":
        return MomentumSGD(cfg.lr, cfg.momentum, cfg.dampening, cfg.weight_decay, cfg.nesterov)
    if cfg.optimizer == "adam":
        return Adam(cfg.lr, tuple(cfg.betas), cfg.eps, cfg.weight_decay)
    if cfg.optimizer == "adamw":
        return AdamW(cfg.lr, tuple(cfg.betas), cfg.eps, cfg.weight_decay)
    raise ValueError(f"unknown optimizer {cfg.optimizer!r}; expected sgd, momentum, adam or adamw")


def make_trainer(cfg: TrainConfig, data: Dataset):
    """The backbone for ``cfg.model``, set up with softmax cross-entropy and the optimizer, built."""
    from ..ir.struct_info import TensorStructInfo
    from ..models import cnn, mlp
    from .loss import CrossEntropyLoss
    from .setup_trainer import SetupTrainer
    from .trainer import Trainer

    classes, b = data.num_classes, cfg.batch_size
    if cfg.model == "mlp":
        backbone = mlp(b, (int(np.prod(data.image_shape)), *cfg.hidden, classes))
    elif cfg.model == "cnn":
        backbone = cnn(b, data.image_shape, cfg.channels, classes)
    else:
        raise ValueError(f"unknown model {cfg.model!r}; expected mlp or cnn")
    setup = SetupTrainer(CrossEntropyLoss(reduction=cfg.reduction), make_optimizer(cfg),
                         [TensorStructInfo((b, classes), "float32"), TensorStructInfo((b,), "int64")])
    trainer = Trainer(backbone, int(backbone.attrs["param_num"]), setup, seed=cfg.seed)
    trainer.build(target=cfg.target, opt_level=cfg.opt_level)
    trainer.xavier_uniform_init_params()
    if trainer.state_vars:  # batch-norm running statistics: mean 0, variance 1
        trainer.load_states({v.name_hint: (np.ones if v.name_hint.endswith("_var") else np.zeros)(
            tuple(v.struct_info.shape), np.float32) for v in trainer.state_vars})
    return trainer


def _inputs(cfg: TrainConfig, x: np.ndarray) -> np.ndarray:
    return x.reshape(len(x), -1) if cfg.model == "mlp" else x


def evaluate(trainer, cfg: TrainConfig, x: np.ndarray, y: np.ndarray) -> float:
    """Test accuracy over every example; the last partial batch is padded (the model's batch is static)."""
    correct, b = 0, cfg.batch_size
    for start in range(0, len(x), b):
        chunk = x[start:start + b]
        n = len(chunk)
        if n < b:
            chunk = np.concatenate([chunk, np.zeros((b - n,) + chunk.shape[1:], chunk.dtype)])
        pred = trainer.predict(_inputs(cfg, chunk)).numpy()[:n]
        correct += int(np.sum(pred.argmax(1) == y[start:start + n]))
    return correct / len(x)


def train(cfg: TrainConfig, log: Callable[[str], None] = print, progress: bool = True) -> History:
    """Train as ``cfg`` says; returns the history (and writes ``cfg.save`` after every epoch)."""
    data = load_data(cfg.data, cfg.seed)
    if len(data.x_train) < cfg.batch_size:
        raise ValueError(f"the training set has {len(data.x_train)} examples, fewer than one batch "
                         f"of {cfg.batch_size}")
    start_compile = time.perf_counter()
    trainer = make_trainer(cfg, data)
    log(f"{data.name}: {len(data.x_train)} training / {len(data.x_test)} test examples, "
        f"{data.image_shape} images, {data.num_classes} classes; {cfg.model} compiled for {cfg.target} "
        f"in {time.perf_counter() - start_compile:.2f} s")
    history, first_epoch = History(), 0
    if cfg.resume:
        extra = trainer.load(cfg.resume)
        first_epoch = int(extra.get("epoch", -1)) + 1
        for key in ("epoch_loss", "accuracy", "seconds", "step_loss"):
            if key in extra:
                setattr(history, key, [float(v) for v in extra[key]])
        log(f"resumed from {cfg.resume} after epoch {first_epoch} (step {trainer.step})")
    for epoch in range(first_epoch, cfg.epochs):
        t0, losses = time.perf_counter(), []
        order = list(batches(len(data.x_train), cfg.batch_size, cfg.seed, epoch))
        steps = _progress(order, f"epoch {epoch + 1}/{cfg.epochs}", progress)
        for idx in steps:
            loss = float(trainer.update_params(_inputs(cfg, data.x_train[idx]), data.y_train[idx]).numpy())
            if not np.isfinite(loss):
                raise FloatingPointError(f"the loss became {loss} at step {trainer.step}: lower the learning rate")
            losses.append(loss)
            if progress and hasattr(steps, "set_postfix"):
                steps.set_postfix(loss=f"{loss:.3f}", refresh=False)
        seconds = time.perf_counter() - t0
        accuracy = evaluate(trainer, cfg, data.x_test, data.y_test)
        history.epoch_loss.append(float(np.mean(losses)))
        history.accuracy.append(accuracy)
        history.seconds.append(seconds)
        history.step_loss += losses
        log(f"epoch {epoch + 1}: loss {history.epoch_loss[-1]:.4f}  test accuracy {100 * accuracy:.2f}%  "
            f"({len(order)} steps, {1e3 * seconds / max(len(order), 1):.3f} ms/step)")
        if cfg.save:
            trainer.save(cfg.save, extra={"epoch": epoch, "epoch_loss": history.epoch_loss,
                                          "accuracy": history.accuracy, "seconds": history.seconds,
                                          "step_loss": history.step_loss})
    return history


def _progress(items, desc: str, enabled: bool):
    if not enabled:
        return items
    from tqdm import tqdm

    return tqdm(items, desc=desc, unit="step", leave=False, dynamic_ncols=True)


def plot(history: History, path: str, title: str = "") -> None:
    """Loss per step and per epoch, and test accuracy per epoch, in one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4))
    steps_per_epoch = len(history.step_loss) / max(len(history.epoch_loss), 1)
    ax_loss.plot(np.arange(1, len(history.step_loss) + 1) / steps_per_epoch, history.step_loss,
                 lw=0.6, alpha=0.5, label="per step")
    ax_loss.plot(np.arange(1, len(history.epoch_loss) + 1), history.epoch_loss, "o-", label="epoch mean")
    ax_loss.set(xlabel="epoch", ylabel="training loss", title="Training loss")
    ax_loss.legend()
    ax_loss.grid(alpha=0.3)
    ax_acc.plot(np.arange(1, len(history.accuracy) + 1), [100 * a for a in history.accuracy], "o-", color="C2")
    ax_acc.set(xlabel="epoch", ylabel="test accuracy (%)", title="Test accuracy")
    ax_acc.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
