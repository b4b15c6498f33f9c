"""Plotting a training run's history (``relax-mlir train --plot``)."""

from __future__ import annotations

import numpy as np

from .run import History


def plot(history: History, path: str, title: str = "", loss_label: str = "training loss") -> None:
    """Training loss (per step and per epoch) and test accuracy per epoch, side by side, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    epochs = np.arange(1, len(history.epoch_loss) + 1)
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4.2))
    steps_per_epoch = len(history.step_loss) / max(len(history.epoch_loss), 1)
    ax_loss.plot(np.arange(1, len(history.step_loss) + 1) / steps_per_epoch, history.step_loss,
                 lw=0.7, alpha=0.45, color="C0", label="each step")
    ax_loss.plot(epochs, history.epoch_loss, "o-", color="C1", label="mean over the epoch")
    ax_loss.set(xlabel="epoch", ylabel=loss_label, title="Training loss")
    ax_loss.set_ylim(bottom=0)
    acc = [100 * a for a in history.accuracy]
    ax_acc.plot(epochs, acc, "o-", color="C2", label="test accuracy")
    if acc:
        ax_acc.annotate(f"{acc[-1]:.2f}%", (epochs[-1], acc[-1]), textcoords="offset points", xytext=(0, -16),
                        ha="center")
        ax_acc.set_ylim(max(0.0, min(acc) - 5), 100.5)
    ax_acc.set(xlabel="epoch", ylabel="test accuracy (%)", title="Test accuracy after each epoch")
    for ax in (ax_loss, ax_acc):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(0 if ax is ax_loss else 0.5, len(epochs) + 0.5)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right" if ax is ax_loss else "lower right")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120, format="png")
    plt.close(fig)
