"""Learning-rate schedules (PyTorch's ``torch.optim.lr_scheduler``), computed inside the optimizer function.

    opt = SGD(StepLR(0.1, step_size=30, gamma=0.1), weight_decay=1e-4)
    opt = AdamW(SequentialLR([LinearLR(1e-3, start_factor=0.01, total_iters=100),   # warm-up, then decay
                              CosineAnnealingLR(1e-3, T_max=900)], milestones=[100]))

Any optimizer's ``lr`` may be a float (a constant of the function, as in TVM) or one of these schedules. A
schedule is the learning rate as a function of the optimizer's step count ``t``: the update the optimizer
function makes from the state whose ``num_steps`` is ``t`` uses ``lr(t)``, so the first update uses ``lr(0)``. That
is PyTorch's convention when ``scheduler.step()`` follows every ``optimizer.step()``: the first update uses the
scheduler's initial rate (``last_epoch`` 0), the ``(t+1)``-th the rate after ``t`` scheduler steps. The function
computes ``lr(t)`` from ``num_steps`` itself, so there is no host work and no recompilation per step, the function's
signature and state layout are those of a float ``lr``, and a Trainer resumed from a checkpoint continues the
schedule from the step count the checkpoint holds (a checkpoint records the optimizer's class, not its rate:
resuming under another schedule is allowed, and that schedule is read from the saved count on). Adam's bias
correction keeps its own count (``beta^(t+1)`` through the running products in its state, PyTorch's
``state["step"]`` incremented before use); the schedule reads ``t``.

The rate is computed in float64 with PyTorch's closed forms (``_get_closed_form_lr``, in the same order of
operations), then rounded once to the parameters' dtype, as PyTorch keeps ``lr`` a Python float and rounds it
to the parameters' dtype when it applies it. ``schedule(t)`` is the same value on the host, for a log or a plot
(bit for bit the compiled function's; the interpreter's NumPy ``power`` may differ from libm's in the last
place). PyTorch's ``step()`` updates most rates recursively (``lr *= gamma``, a ratio of cosines), which differs
from the closed form by rounding only: at most 5e-15 relative in the runs tested against it (3000 steps of a
cosine included).

``schedule.emit(bb, t)`` builds the Relax expression of ``lr(t)`` (float64, 0-d) from an int64 0-d ``t`` inside a
dataflow block: a new schedule subclasses :class:`LRSchedule`, sets ``lr`` and implements ``emit``, ``value``
(the same formula on the host) and ``_args`` (for ``repr`` and ``==``).
"""

from __future__ import annotations

import math
import operator
from bisect import bisect_right
from typing import Sequence

import numpy as np

from .. import op
from ..ir.block_builder import BlockBuilder
from ..ir.expr import Expr, const

__all__ = ["LRSchedule", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LinearLR", "SequentialLR"]


# -- argument checks (the wording of the optimizers' hyper-parameter checks) ------------------------------------------
def _rate(where: str, name: str, value) -> float:
    """A finite float ``>= 0`` (a learning rate, a decay factor): a negative or NaN one would train silently wrong."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: {name} must be a number, got {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{where}: {name} must be a finite number >= 0, got {value!r}")
    return number


def _factor(where: str, name: str, value, low_open: bool) -> float:
    """A float in ``(0, 1]`` (``low_open``) or ``[0, 1]``: LinearLR's factors, with PyTorch's bounds."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: {name} must be a number, got {value!r}") from None
    if not 0 <= number <= 1 or (low_open and number == 0):  # (NaN fails the first test)
        raise ValueError(f"{where}: {name} must be in {'(0' if low_open else '[0'}, 1], got {value!r}")
    return number


def _count(where: str, name: str, value, low: int) -> int:
    """An integer step count ``>= low``; a float (``2.5``, or ``30.0`` from a config) or a bool is refused, as a
    fractional period would make ``t // step_size`` a float."""
    if isinstance(value, bool):
        raise TypeError(f"{where}: {name} must be an integer >= {low}, got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{where}: {name} must be an integer >= {low}, got {value!r}") from None
    if number < low:
        raise ValueError(f"{where}: {name} must be an integer >= {low}, got {value!r}")
    return number


def _counts(where: str, name: str, values, low: int) -> list[int]:
    """A list (or tuple) of integer step counts ``>= low``."""
    if not isinstance(values, (list, tuple, range)):
        raise TypeError(f"{where}: {name} must be a list of step counts, got {values!r}")
    return [_count(where, f"{name}[{i}]", v, low) for i, v in enumerate(values)]


def _f64(value: float) -> Expr:
    return const(value, "float64")


def _as_f64(t: Expr) -> Expr:
    return op.astype(t, "float64")


# -- the schedules --------------------------------------------------------------------------------------------------
class LRSchedule:
    """Base class: a learning rate ``lr(t)`` for the optimizer step ``t`` (0 for the first update), starting from
    ``lr``. ``schedule(t)`` is its float64 value on the host, ``emit(bb, t)`` its Relax expression; two schedules
    are equal when they have the same class and arguments. Subclasses implement :meth:`value` and :meth:`emit`
    with the same float64 operations in the same order, and :meth:`_args` (the constructor's arguments)."""

    lr: float

    def __call__(self, step: int) -> float:
        """The learning rate of the update made from step count ``step`` (an integer >= 0)."""
        return self.value(_count(type(self).__name__, "step", step, 0))

    def value(self, step: int) -> float:
        raise NotImplementedError(f"{type(self).__name__} must implement value")

    def emit(self, bb: BlockBuilder, step: Expr) -> Expr:
        """The float64 0-d expression of the rate at ``step`` (an int64 0-d expression); intermediate values are
        bound in ``bb``'s current dataflow block, the result may be left unbound."""
        raise NotImplementedError(f"{type(self).__name__} must implement emit")

    def _args(self) -> dict:
        raise NotImplementedError(f"{type(self).__name__} must implement _args")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self._args().items())})"

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self._args() == other._args()

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self)))


class StepLR(LRSchedule):
    """``StepLR(lr, step_size, gamma=0.1)``: ``lr * gamma ** (t // step_size)``, the rate multiplied by ``gamma``
    every ``step_size`` steps."""

    def __init__(self, lr: float, step_size: int, gamma: float = 0.1) -> None:
        self.lr = _rate("StepLR", "lr", lr)
        self.step_size = _count("StepLR", "step_size", step_size, 1)
        self.gamma = _rate("StepLR", "gamma", gamma)

    def _args(self):
        return {"lr": self.lr, "step_size": self.step_size, "gamma": self.gamma}

    def value(self, step):
        return self.lr * self.gamma ** (step // self.step_size)

    def emit(self, bb, step):
        decays = _as_f64(op.floor_divide(step, const(self.step_size, "int64")))
        return op.multiply(_f64(self.lr), op.power(_f64(self.gamma), decays))


class MultiStepLR(LRSchedule):
    """``MultiStepLR(lr, milestones, gamma=0.1)``: ``lr * gamma ** k`` with ``k`` the number of milestones ``<= t``
    (a milestone given twice counts twice, as in PyTorch; the order does not matter)."""

    def __init__(self, lr: float, milestones: Sequence[int], gamma: float = 0.1) -> None:
        self.lr = _rate("MultiStepLR", "lr", lr)
        self.milestones = sorted(_counts("MultiStepLR", "milestones", milestones, 0))
        self.gamma = _rate("MultiStepLR", "gamma", gamma)

    def _args(self):
        return {"lr": self.lr, "milestones": self.milestones, "gamma": self.gamma}

    def value(self, step):
        return self.lr * self.gamma ** bisect_right(self.milestones, step)

    def emit(self, bb, step):
        if not self.milestones:
            return _f64(self.lr)
        passed = op.less_equal(const(np.array(self.milestones, np.int64), "int64"), step)
        return op.multiply(_f64(self.lr), op.power(_f64(self.gamma), op.sum(op.astype(passed, "float64"))))


class ExponentialLR(LRSchedule):
    """``ExponentialLR(lr, gamma)``: ``lr * gamma ** t``."""

    def __init__(self, lr: float, gamma: float) -> None:
        self.lr = _rate("ExponentialLR", "lr", lr)
        self.gamma = _rate("ExponentialLR", "gamma", gamma)

    def _args(self):
        return {"lr": self.lr, "gamma": self.gamma}

    def value(self, step):
        return self.lr * self.gamma ** step

    def emit(self, bb, step):
        return op.multiply(_f64(self.lr), op.power(_f64(self.gamma), _as_f64(step)))


class CosineAnnealingLR(LRSchedule):
    """``CosineAnnealingLR(lr, T_max, eta_min=0)``:
    ``eta_min + (lr - eta_min) * (1 + cos(pi * t / T_max)) / 2``, from ``lr`` at 0 down to ``eta_min`` at
    ``T_max``. Past ``T_max`` the cosine goes on (back up to ``lr`` at ``2 * T_max``), as PyTorch's does: make
    ``T_max`` the number of steps of the run."""

    def __init__(self, lr: float, T_max: int, eta_min: float = 0.0) -> None:  # noqa: N803 - PyTorch's name
        self.lr = _rate("CosineAnnealingLR", "lr", lr)
        self.T_max = _count("CosineAnnealingLR", "T_max", T_max, 1)
        self.eta_min = _rate("CosineAnnealingLR", "eta_min", eta_min)

    def _args(self):
        return {"lr": self.lr, "T_max": self.T_max, "eta_min": self.eta_min}

    def value(self, step):
        return self.eta_min + (self.lr - self.eta_min) * (1 + math.cos(math.pi * step / self.T_max)) / 2

    def emit(self, bb, step):
        angle = op.divide(op.multiply(_f64(math.pi), _as_f64(step)), _f64(self.T_max))
        half = op.divide(op.multiply(_f64(self.lr - self.eta_min), op.add(_f64(1.0), op.cos(angle))), _f64(2.0))
        return op.add(_f64(self.eta_min), half)


class LinearLR(LRSchedule):
    """``LinearLR(lr, start_factor=1/3, end_factor=1.0, total_iters=5)``:
    ``lr * (start_factor + (end_factor - start_factor) * min(total_iters, t) / total_iters)``, a linear ramp of the
    factor (a warm-up when it grows), then ``lr * end_factor``. PyTorch's bounds: ``start_factor`` in (0, 1],
    ``end_factor`` in [0, 1]."""

    def __init__(self, lr: float, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5) -> None:
        self.lr = _rate("LinearLR", "lr", lr)
        self.start_factor = _factor("LinearLR", "start_factor", start_factor, low_open=True)
        self.end_factor = _factor("LinearLR", "end_factor", end_factor, low_open=False)
        self.total_iters = _count("LinearLR", "total_iters", total_iters, 1)

    def _args(self):
        return {"lr": self.lr, "start_factor": self.start_factor, "end_factor": self.end_factor,
                "total_iters": self.total_iters}

    def value(self, step):
        ramp = (self.end_factor - self.start_factor) * min(self.total_iters, step) / self.total_iters
        return self.lr * (self.start_factor + ramp)

    def emit(self, bb, step):
        done = _as_f64(op.minimum(step, const(self.total_iters, "int64")))
        ramp = op.divide(op.multiply(_f64(self.end_factor - self.start_factor), done), _f64(self.total_iters))
        return op.multiply(_f64(self.lr), op.add(_f64(self.start_factor), ramp))


class SequentialLR(LRSchedule):
    """``SequentialLR(schedules, milestones)``: ``schedules[i]`` from step ``milestones[i-1]`` on, counting its own
    steps from 0 there (PyTorch's ``SequentialLR``, which restarts each scheduler with ``step(0)``): a warm-up then
    a decay is ``SequentialLR([LinearLR(lr, 0.01, total_iters=w), CosineAnnealingLR(lr, T_max=n - w)], [w])``.

    ``milestones`` are strictly increasing step counts ``>= 1``, one fewer than the schedules. Every schedule
    starts from the same ``lr``: PyTorch's all start from the optimizer's one learning rate."""

    def __init__(self, schedules: Sequence[LRSchedule], milestones: Sequence[int]) -> None:
        where = "SequentialLR"
        if not isinstance(schedules, (list, tuple)) or not schedules:
            raise TypeError(f"{where}: schedules must be a non-empty list of schedules (StepLR, LinearLR, ...), "
                            f"got {schedules!r}")
        for i, s in enumerate(schedules):
            if not isinstance(s, LRSchedule):
                raise TypeError(f"{where}: schedules[{i}] must be a schedule (StepLR, LinearLR, ...), got {s!r}")
        milestones = _counts(where, "milestones", milestones, 1)
        if len(milestones) != len(schedules) - 1:
            raise ValueError(f"{where}: expected one milestone fewer than schedules (the steps where the next "
                             f"schedule starts), got {len(schedules)} schedules and {len(milestones)} milestones")
        for i in range(1, len(milestones)):
            if milestones[i] <= milestones[i - 1]:
                raise ValueError(f"{where}: milestones must be strictly increasing (schedule {i} would never run), "
                                 f"got {milestones}")
        for i, s in enumerate(schedules[1:], 1):
            if s.lr != schedules[0].lr:
                raise ValueError(f"{where}: every schedule must start from the same lr (PyTorch's start from the "
                                 f"optimizer's), but schedules[0] has lr={schedules[0].lr!r} and schedules[{i}] "
                                 f"has lr={s.lr!r}")
        self.lr = schedules[0].lr
        self.schedules, self.milestones = list(schedules), milestones

    def _args(self):
        return {"schedules": self.schedules, "milestones": self.milestones}

    def value(self, step):
        i = bisect_right(self.milestones, step)
        return self.schedules[i].value(step - (self.milestones[i - 1] if i else 0))

    def emit(self, bb, step):
        # Every piece is computed at its own count clamped to the steps it runs (so that none leaves its domain or
        # overflows: an ExponentialLR warm-up with gamma > 1 read at step 10**6), and the last one started is taken.
        starts = [0, *self.milestones]
        pieces = []
        for i, schedule in enumerate(self.schedules):
            local = step
            if i:
                local = bb.emit(op.maximum(op.subtract(local, const(starts[i], "int64")), const(0, "int64")))
            if i < len(self.milestones):
                local = bb.emit(op.minimum(local, const(self.milestones[i] - starts[i] - 1, "int64")))
            pieces.append(bb.emit(schedule.emit(bb, local)))
        rate = pieces[-1]
        for start, piece in reversed(list(zip(self.milestones, pieces[:-1]))):
            rate = op.where(op.less(step, const(start, "int64")), piece, rate)
        return rate
