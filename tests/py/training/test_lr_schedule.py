"""Learning-rate schedules (``relax_mlir.training.lr_schedule``) against PyTorch's ``torch.optim.lr_scheduler``.

Every schedule with every optimizer trains a small tutorial MLP for 30 steps, compiled and interpreted, beside
``torch.optim`` driven by the scheduler of the same name (``scheduler.step()`` after each ``optimizer.step()``),
from the same weights on the same batches: float64 parameters agree within 1e-12 of each parameter's largest
entry (measured: below 1e-15). The rates themselves are compared with PyTorch's over long runs (its recursive
updates agree with the closed forms the function computes to a few float64 units in the last place), the rates the
function computes with the host's ``schedule(t)`` bit for bit, and the first updates with hand-derived ones (the
first update uses ``lr(0)``; Adam's bias correction counts from 1).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import relax_mlir  # noqa: E402
from relax_mlir import interpret, op  # noqa: E402
from relax_mlir.ir import Constant, IRModule, TensorStructInfo, Tuple, TupleGetItem, Var  # noqa: E402
from relax_mlir.ir.block_builder import BlockBuilder  # noqa: E402
from relax_mlir.ir.dtype import to_numpy  # noqa: E402
from relax_mlir.ir.expr import const  # noqa: E402
from relax_mlir.models import mlp  # noqa: E402
from relax_mlir.testing import roundtrip  # noqa: E402
from relax_mlir.training import (SGD, Adam, AdamW, CheckpointError, CosineAnnealingLR, ExponentialLR,  # noqa: E402
                                 LinearLR, LRSchedule, MomentumSGD, MultiStepLR, Optimizer, SequentialLR,
                                 SetupTrainer, StepLR, Trainer)
from relax_mlir.training.loss import CrossEntropyLoss  # noqa: E402

T = TensorStructInfo
SIZES, BATCH, STEPS = (6, 16, 4), 8, 30


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """PyTorch's thread pool on tiny tensors costs 50 ms a step on two shared cores; one thread costs nothing."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# -- PyTorch's side -------------------------------------------------------------------------------------------------
def torch_scheduler(optimizer, schedule: LRSchedule):
    """The ``torch.optim.lr_scheduler`` of the same name and arguments (the rate is the optimizer's)."""
    schedulers = torch.optim.lr_scheduler
    if isinstance(schedule, SequentialLR):
        return schedulers.SequentialLR(optimizer, [torch_scheduler(optimizer, s) for s in schedule.schedules],
                                       schedule.milestones)
    args = {k: v for k, v in schedule._args().items() if k != "lr"}
    return getattr(schedulers, type(schedule).__name__)(optimizer, **args)


def torch_rates(schedule: LRSchedule, steps: int) -> np.ndarray:
    """The rate each of ``steps`` PyTorch updates uses, the scheduler stepped after every update."""
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], schedule.lr)
    scheduler = torch_scheduler(optimizer, schedule)
    rates = []
    for _ in range(steps):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return np.array(rates)


def schedules(lr: float) -> dict[str, LRSchedule]:
    """One of each, changing within 30 steps (a cosine past its T_max, a sequence of three)."""
    return {
        "step": StepLR(lr, 7, gamma=0.5),
        "multistep": MultiStepLR(lr, [12, 5, 12, 20], gamma=0.5),  # 12 twice: decays twice there, as PyTorch
        "exponential": ExponentialLR(lr, 0.93),
        "cosine": CosineAnnealingLR(lr, 12, eta_min=lr / 10),
        "linear": LinearLR(lr, 0.25, 1.0, total_iters=10),
        "sequential": SequentialLR([LinearLR(lr, 0.2, total_iters=4), ExponentialLR(lr, 0.9), StepLR(lr, 4, 0.5)],
                                   milestones=[4, 15]),
    }


# optimizer name -> (ours from a schedule, PyTorch's from parameters and a rate, the base rate)
OPTIMIZERS = {
    "SGD": (lambda s: SGD(s, weight_decay=0.01),
            lambda p, lr: torch.optim.SGD(p, lr, weight_decay=0.01), 0.1),
    # dampening 0: PyTorch's first step sets the buffer to g, ours starts it at 0 (training_semantics.md)
    "MomentumSGD": (lambda s: MomentumSGD(s, 0.9, weight_decay=0.01, nesterov=True),
                    lambda p, lr: torch.optim.SGD(p, lr, momentum=0.9, weight_decay=0.01, nesterov=True), 0.1),
    "Adam": (lambda s: Adam(s, weight_decay=0.01),
             lambda p, lr: torch.optim.Adam(p, lr, weight_decay=0.01), 0.01),
    "AdamW": (lambda s: AdamW(s, weight_decay=0.05),
              lambda p, lr: torch.optim.AdamW(p, lr, weight_decay=0.05), 0.01),
}


def train_both(optimizer: str, schedule: LRSchedule, dtype: str, target: str):
    """Train ours and PyTorch's from the same weights on the same batches; return both final parameter lists."""
    ours, theirs, _ = OPTIMIZERS[optimizer]
    setup = SetupTrainer(CrossEntropyLoss(), ours(schedule), [T((BATCH, SIZES[-1]), dtype), T((BATCH,), "int64")])
    trainer = Trainer(mlp(BATCH, SIZES, dtype), 2 * len(SIZES) - 2, setup).build(target)
    trainer.xavier_uniform_init_params(seed=1)
    params = [torch.tensor(a.copy(), requires_grad=True) for a in trainer.params]
    torch_optimizer = theirs(params, schedule.lr)
    scheduler = torch_scheduler(torch_optimizer, schedule)
    rng = np.random.default_rng(0)
    for _ in range(STEPS):
        x, y = rng.normal(size=(BATCH, SIZES[0])).astype(dtype), rng.integers(0, SIZES[-1], BATCH)
        trainer.update_params(x, y)
        h = torch.tensor(x)
        for i in range(0, len(params), 2):
            h = h @ params[i] + params[i + 1]
            h = torch.relu(h) if i + 2 < len(params) else h
        torch_optimizer.zero_grad()
        torch.nn.functional.cross_entropy(h, torch.tensor(y)).backward()
        torch_optimizer.step()
        scheduler.step()
    assert int(trainer.optim_state[0]) == STEPS
    return trainer.params, [p.detach().numpy() for p in params]


def assert_params_close(got, expected, tol):
    """Each parameter within ``tol`` of its largest entry (entries near 0 have no meaningful relative error)."""
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype and g.shape == e.shape
        error = np.abs(g - e).max() / np.abs(e).max()
        assert error <= tol, f"relative error {error:.3g} > {tol:g}"


# -- the rates ------------------------------------------------------------------------------------------------------
LONG_RUNS = [
    (StepLR(0.1, 3, 0.7), 300),
    (MultiStepLR(0.1, [30, 10, 30, 80], 0.3), 120),
    (ExponentialLR(0.1, 0.99), 1000),
    (CosineAnnealingLR(0.1, 50, eta_min=0.001), 250),  # 2.5 periods: PyTorch's cosine goes back up past T_max
    (CosineAnnealingLR(0.1, 1000), 3000),
    (LinearLR(0.1, 0.1, 0.9, 40), 100),
    (LinearLR(0.1, 1.0, 0.0, 40), 100),  # a linear decay to 0
    (SequentialLR([LinearLR(0.1, 0.01, total_iters=10), CosineAnnealingLR(0.1, 50, 1e-3),
                   ExponentialLR(0.1, 0.97)], [10, 60]), 200),
]


@pytest.mark.parametrize("schedule,steps", LONG_RUNS, ids=lambda x: type(x).__name__ if isinstance(x, LRSchedule)
                         else str(x))
def test_rates_match_pytorch(schedule, steps):
    # PyTorch's step() multiplies the previous rate (by gamma, by a ratio of cosines): it agrees with the closed
    # form up to rounding only. Measured: 34 units in the last place at most (the cosine over 3000 steps).
    ours = np.array([schedule(t) for t in range(steps)])
    np.testing.assert_allclose(ours, torch_rates(schedule, steps), rtol=1e-13, atol=1e-16)


def rate_module(schedules_: list[LRSchedule]) -> IRModule:
    """``s<i>(t: int64) -> float64``: the expression each schedule emits."""
    functions = {}
    for i, schedule in enumerate(schedules_):
        t = Var("t", T((), "int64"))
        bb = BlockBuilder()
        with bb.function(f"s{i}", [t]):
            with bb.dataflow():
                out = bb.emit_output(schedule.emit(bb, t))
            bb.emit_func_output(out)
        functions[f"s{i}"] = bb.get()[f"s{i}"]
    return roundtrip(IRModule(functions))


def test_function_rates_equal_host_rates():
    """The compiled rates are ``schedule(t)`` bit for bit: the same float64 operations in the same order, libm's
    pow and cos on both sides. The interpreter's are within a few units in the last place: NumPy's ``power`` is
    not libm's (``np.power(0.3, 4.0)`` is 0.008099999999999998, ``0.3 ** 4`` is 0.0081)."""
    # (a growing warm-up read far past its end: the pieces not running are clamped to their steps, no overflow)
    schedules_ = [s for s, _ in LONG_RUNS] + [MultiStepLR(0.1, []),
                                              SequentialLR([ExponentialLR(0.1, 1.5), StepLR(0.1, 5)], [10])]
    mod = rate_module(schedules_)
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod))
    for i, schedule in enumerate(schedules_):
        for t in [*range(0, 130), 999, 1000, 1001, 2999, 10**6]:
            expected, step = schedule(t), np.array(t, np.int64)
            compiled, interpreted = vm[f"s{i}"](step), interpret(mod, f"s{i}", step)
            assert compiled.dtype == np.float64 and float(compiled) == expected, (schedule, t, float(compiled))
            assert interpreted.dtype == np.float64 and math.isclose(float(interpreted), expected, rel_tol=1e-15), \
                (schedule, t, float(interpreted))


# -- training against PyTorch ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["cpu", "numpy"])
@pytest.mark.parametrize("schedule", list(schedules(1.0)))
@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_training_matches_pytorch(optimizer, schedule, target):
    got, expected = train_both(optimizer, schedules(OPTIMIZERS[optimizer][2])[schedule], "float64", target)
    assert_params_close(got, expected, 1e-12)


@pytest.mark.parametrize("optimizer,tol", [("SGD", 1e-6), ("MomentumSGD", 1e-6), ("Adam", 1e-5), ("AdamW", 1e-5)])
def test_float32_training_matches_pytorch(optimizer, tol):
    """A warm-up then a cosine, float32, compiled. The rate is rounded to float32 once, as PyTorch rounds its
    Python-float rate. Adam's tolerance is TVM's float32 state, not the schedule: its bias correction uses the
    float32 running product ``beta2^t`` (``1 - float32(0.999)`` is 1.3e-5 off 0.001), where PyTorch computes
    ``1 - 0.999^t`` in float64; the same run with a constant rate differs as much (2e-6 here)."""
    lr = OPTIMIZERS[optimizer][2]
    schedule = SequentialLR([LinearLR(lr, 0.1, total_iters=5), CosineAnnealingLR(lr, 25, eta_min=lr / 100)], [5])
    got, expected = train_both(optimizer, schedule, "float32", "cpu")
    assert_params_close(got, expected, tol)


# -- which step count: hand-derived updates -------------------------------------------------------------------------
def run_optimizer(opt: Optimizer, params, grads):
    mod = roundtrip(IRModule({opt.name: opt.get_function()}))
    state = opt.state
    for g in grads:
        params, state = interpret(mod, opt.name, params, g, state)
    return params, state


def test_first_update_uses_the_initial_rate():
    # LinearLR(1.0, 0.5, total_iters=2): the updates use 0.5, 0.75, 1.0, 1.0 (PyTorch's initial rate first).
    rng = np.random.default_rng(3)
    p0 = rng.normal(size=3)
    grads = [(rng.normal(size=3),) for _ in range(4)]
    opt = SGD(LinearLR(1.0, 0.5, total_iters=2)).init(Var("w", T((3,), "float64")))
    (p,), state = run_optimizer(opt, (p0,), grads)
    expected = p0
    for rate, (g,) in zip([0.5, 0.75, 1.0, 1.0], grads):
        expected = expected - rate * g
    np.testing.assert_array_equal(p, expected)
    assert state[0] == 4


def test_adam_bias_correction_keeps_its_own_count():
    # The rate of update k (0-based) is lr(k); Adam's bias correction is 1 - beta^(k+1) (PyTorch's state["step"]
    # is incremented before use). StepLR(0.1, 1, 0.5): 0.1, 0.05, 0.025.
    rng = np.random.default_rng(4)
    p0 = rng.normal(size=5)
    grads = [(rng.normal(size=5),) for _ in range(3)]
    opt = Adam(StepLR(0.1, 1, gamma=0.5)).init(Var("w", T((5,), "float64")))
    (p,), state = run_optimizer(opt, (p0,), grads)
    expected, m, v = p0, np.zeros(5), np.zeros(5)
    for k, (g,) in enumerate(grads):
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        m_hat, v_hat = m / (1 - 0.9 ** (k + 1)), v / (1 - 0.999 ** (k + 1))
        expected = expected - 0.1 * 0.5 ** k * (m_hat / (np.sqrt(v_hat) + 1e-8))
    np.testing.assert_allclose(p, expected, rtol=1e-13)
    assert state[0] == 3 and math.isclose(float(state[1]), 0.9 ** 3, rel_tol=1e-15)


# -- the functions --------------------------------------------------------------------------------------------------
def _arg(a) -> str:
    if isinstance(a, Constant):
        x = a.data[()]
        return (np.format_float_positional(x, trim="-") if a.data.dtype.kind == "f" else str(x)) + f":{a.data.dtype}"
    return a.name_hint


def describe(func) -> list[str]:
    """The bindings of an optimizer function, one line each, constants with their dtypes."""
    out = []
    for b in func.body.blocks[0].bindings:
        v = b.value
        if isinstance(v, TupleGetItem):
            rhs = f"{v.tuple_value.name_hint}[{v.index}]"
        elif isinstance(v, Tuple):
            rhs = "(" + ", ".join(a.name_hint for a in v.fields) + ")"
        else:
            args = [_arg(a) for a in v.args] + [str(a) for a in v.attrs.values()]  # astype's dtype
            rhs = f"{v.op.name.removeprefix('relax.')}({', '.join(args)})"
        out.append(f"{b.var.name_hint} = {rhs}")
    return out


# Written by the optimizers before schedules existed (the code of the previous commit): a float rate gives the
# same function, binding for binding and constant for constant (test_optimizer.py checks the rest of the form).
SGD_BEFORE = [
    "num_steps = optim_states[0]",
    "num_steps_new = add(num_steps, 1:int64)",
    "x = params[0]",
    "x_grad = gradients[0]",
    "lv = multiply(0.02:float32, x)",
    "x_grad_new = add(lv, x_grad)",
    "lv1 = multiply(0.1:float32, x_grad_new)",
    "x_new = subtract(x, lv1)",
    "params_new = (x_new)",
    "optim_states_new = (num_steps_new)",
]
ADAMW_BEFORE = [
    "num_steps = optim_states[0]",
    "num_steps_new = add(num_steps, 1:int64)",
    "lv = optim_states[1]",
    "beta1_prod = multiply(lv, 0.9:float32)",
    "lv1 = optim_states[2]",
    "beta2_prod = multiply(lv1, 0.999:float32)",
    "x = params[0]",
    "x_grad = gradients[0]",
    "x_decayed = multiply(0.9997:float32, x)",
    "x_m = optim_states[3]",
    "x_v = optim_states[4]",
    "lv2 = multiply(0.9:float32, x_m)",
    "lv3 = multiply(0.1:float32, x_grad)",
    "x_m_new = add(lv2, lv3)",
    "lv4 = multiply(0.999:float32, x_v)",
    "lv5 = multiply(x_grad, x_grad)",
    "lv6 = multiply(0.001:float32, lv5)",
    "x_v_new = add(lv4, lv6)",
    "lv7 = subtract(1:float32, beta1_prod)",
    "x_m_hat = divide(x_m_new, lv7)",
    "lv8 = subtract(1:float32, beta2_prod)",
    "x_v_hat = divide(x_v_new, lv8)",
    "lv9 = sqrt(x_v_hat)",
    "lv10 = add(lv9, 0.00000001:float32)",
    "lv11 = divide(x_m_hat, lv10)",
    "lv12 = multiply(0.003:float32, lv11)",
    "x_new = subtract(x_decayed, lv12)",
    "params_new = (x_new)",
    "optim_states_new = (num_steps_new, beta1_prod, beta2_prod, x_m_new, x_v_new)",
]


def test_float_rate_gives_the_same_function_as_before():
    x = Var("x", T((2,), "float32"))
    assert describe(SGD(0.1, weight_decay=0.02).init(x).get_function()) == SGD_BEFORE
    assert describe(AdamW(0.003, weight_decay=0.1).init(x).get_function()) == ADAMW_BEFORE


@pytest.mark.parametrize("make", [lambda lr: SGD(lr), lambda lr: MomentumSGD(lr, 0.9), lambda lr: Adam(lr),
                                  lambda lr: AdamW(lr)], ids=["SGD", "MomentumSGD", "Adam", "AdamW"])
def test_schedule_keeps_signature_and_state(make):
    params = [Var("w", T((3, 2), "float32")), Var("b", T((2,), "float32"))]
    plain, scheduled = make(0.1).init(params), make(CosineAnnealingLR(0.1, 10)).init(params)
    f, g = plain.get_function(), scheduled.get_function()
    assert [p.struct_info for p in f.params] == [p.struct_info for p in g.params]
    assert f.ret_struct_info == g.ret_struct_info
    assert [(a.dtype, a.shape) for a in plain.state] == [(a.dtype, a.shape) for a in scheduled.state]
    lines = describe(g)
    assert lines[:2] == describe(f)[:2]  # num_steps, num_steps_new
    (lr,) = [line for line in lines if line.startswith("lr = ")]
    assert lr.startswith("lr = astype(")  # computed in float64, rounded once to float32
    # the rate is computed once per step, before the parameters, from num_steps (not num_steps_new)
    assert lines.index(lr) < lines.index("w = params[0]")
    assert not any("num_steps_new" in line for line in lines[2:-2])
    roundtrip(IRModule({scheduled.name: g}))


def test_adamw_shrink_from_the_float64_rate():
    """``1 - lr * wd`` from the float64 rate, once per step, rounded once (PyTorch computes it in Python floats)."""
    lines = describe(AdamW(ExponentialLR(0.01, 0.9), weight_decay=0.1).init(Var("x", T((2,), "float32")))
                     .get_function())
    assert lines[2:9] == ["lv = astype(num_steps, float64)",
                          "lv1 = power(0.9:float64, lv)",
                          "lv2 = multiply(0.01:float64, lv1)",
                          "lr = astype(lv2, float32)",
                          "lv3 = multiply(0.1:float64, lv2)",
                          "lv4 = subtract(1:float64, lv3)",
                          "shrink = astype(lv4, float32)"]
    assert "x_decayed = multiply(shrink, x)" in lines and sum(" = multiply(lr, " in line for line in lines) == 1
    lines = describe(AdamW(ExponentialLR(0.01, 0.9), weight_decay=0.0).init(Var("x", T((2,), "float32")))
                     .get_function())
    assert not any(line.startswith(("shrink", "x_decayed")) for line in lines)
    # float64 parameters: the float64 rate is bound as lr itself, no cast
    lines = describe(AdamW(ExponentialLR(0.01, 0.9)).init(Var("x", T((2,), "float64"))).get_function())
    assert lines[4:7] == ["lr = multiply(0.01:float64, lv1)", "lv2 = multiply(0.01:float64, lr)",
                          "shrink = subtract(1:float64, lv2)"]


def test_bfloat16_parameters():
    """The float64 rate rounded to bfloat16 once: 0.5, 0.25, 0.125 are exact there."""
    opt = SGD(StepLR(0.5, 1, 0.5)).init(Var("w", T((4,), "bfloat16")))
    assert "lr = astype(" in "\n".join(describe(opt.get_function()))
    bf16 = to_numpy("bfloat16")
    p0, g = np.full(4, 2.0, bf16), np.ones(4, bf16)
    (p,), _ = run_optimizer(opt, (p0,), [(g,)] * 3)
    assert p.dtype == bf16 and np.all(p.astype(np.float32) == 2.0 - 0.5 - 0.25 - 0.125)


def test_custom_optimizer_and_schedule():
    """The subclassing example of Optimizer's docstring, with a schedule written here (a switch at step 3)."""

    class ClippedSGD(Optimizer):
        def __init__(self, lr):
            super().__init__("ClippedSGD")
            self.lr = lr

        def _emit_step(self, bb, params, gradients, optim_states):
            num_steps, num_steps_new = self._emit_steps(bb, optim_states)
            lr = self._emit_lr(bb, num_steps)
            new_params = []
            for i, var in enumerate(self.param_list):
                p, g = self._emit_param(bb, params, gradients, i, weight_decay=0.0)
                clipped = bb.emit(op.clip(g, -1.0, 1.0), var.name_hint + "_clipped")
                new_params.append(bb.emit(op.subtract(p, op.multiply(lr, clipped)), var.name_hint + "_new"))
            return new_params, [num_steps_new]

    schedule = Switch(StepLR(1.0, 1, 0.5), ExponentialLR(1.0, 0.1), 3)
    assert [schedule(t) for t in range(5)] == [1.0, 0.5, 0.25, 1.0 * 0.1 ** 3, 1.0 * 0.1 ** 4]
    rng = np.random.default_rng(5)
    p0 = rng.normal(size=3)
    grads = [(3 * rng.normal(size=3),) for _ in range(5)]
    (p,), _ = run_optimizer(ClippedSGD(schedule).init(Var("w", T((3,), "float64"))), (p0,), grads)
    expected = p0
    for t, (g,) in enumerate(grads):
        expected = expected - schedule(t) * np.clip(g, -1, 1)
    np.testing.assert_array_equal(p, expected)
    (p,), _ = run_optimizer(ClippedSGD(0.5).init(Var("w", T((3,), "float64"))), (p0,), grads[:1])
    np.testing.assert_array_equal(p, p0 - 0.5 * np.clip(grads[0][0], -1, 1))


class Switch(LRSchedule):
    """``first`` before step ``at``, ``then`` from it, at the global count (a schedule written outside the module)."""

    def __init__(self, first, then, at):
        self.lr, self.first, self.then, self.at = first.lr, first, then, at

    def _args(self):
        return {"first": self.first, "then": self.then, "at": self.at}

    def value(self, step):
        return self.first.value(step) if step < self.at else self.then.value(step)

    def emit(self, bb, step):
        return op.where(op.less(step, const(self.at, "int64")), self.first.emit(bb, step), self.then.emit(bb, step))


# -- checkpoints ----------------------------------------------------------------------------------------------------
def _trainer(schedule, optimizer=MomentumSGD, target="numpy") -> Trainer:
    opt = optimizer(schedule, 0.9) if optimizer is MomentumSGD else optimizer(schedule)
    setup = SetupTrainer(CrossEntropyLoss(), opt, [T((BATCH, 3), "float64"), T((BATCH,), "int64")])
    return Trainer(mlp(BATCH, (6, 5, 3), "float64"), 4, setup).build(target)


def _batches(n):
    rng = np.random.default_rng(6)
    return [(rng.normal(size=(BATCH, 6)), rng.integers(0, 3, BATCH)) for _ in range(n)]


def _train(trainer, batches):
    for x, y in batches:
        trainer.update_params(x, y)


def test_resume_continues_the_schedule(tmp_path):
    """The step count is in the optimizer state, so a resumed run goes on exactly where it stopped, in the middle
    of a warm-up and a cosine (as PyTorch's scheduler state_dict restores last_epoch)."""
    schedule = SequentialLR([LinearLR(0.1, 0.1, total_iters=4), CosineAnnealingLR(0.1, 8)], [4])
    batches = _batches(12)
    whole = _trainer(schedule)
    whole.xavier_uniform_init_params()
    _train(whole, batches)
    first = _trainer(schedule)
    first.xavier_uniform_init_params()
    _train(first, batches[:6])
    first.save(str(tmp_path / "ckpt.npz"))
    with np.load(tmp_path / "ckpt.npz") as f:
        assert str(f["optimizer"]) == "MomentumSGD"  # the class is recorded, not the schedule
    second = _trainer(schedule)
    second.load(str(tmp_path / "ckpt.npz"))
    _train(second, batches[6:])
    for a, b in zip(second.params + second.optim_state, whole.params + whole.optim_state):
        np.testing.assert_array_equal(a, b)


def test_resume_with_another_schedule(tmp_path):
    """Allowed, as PyTorch allows a new scheduler after load_state_dict: the new schedule is read at the step
    count of the checkpoint (here a StepLR run resumed under a cosine from step 5 on)."""
    first_schedule, then = StepLR(0.1, 2, 0.5), CosineAnnealingLR(0.1, 8)
    batches = _batches(10)
    first = _trainer(first_schedule)
    first.xavier_uniform_init_params()
    _train(first, batches[:5])
    first.save(str(tmp_path / "ckpt.npz"))
    resumed = _trainer(then)
    resumed.load(str(tmp_path / "ckpt.npz"))
    _train(resumed, batches[5:])
    whole = _trainer(Switch(first_schedule, then, 5))
    whole.xavier_uniform_init_params()
    _train(whole, batches)
    for a, b in zip(resumed.params, whole.params):
        np.testing.assert_array_equal(a, b)


def test_resume_into_another_optimizer_class_is_still_refused(tmp_path):
    adam = _trainer(ExponentialLR(0.01, 0.9), Adam)
    adam.xavier_uniform_init_params()
    _train(adam, _batches(2))
    adam.save(str(tmp_path / "adam.npz"))
    _trainer(CosineAnnealingLR(0.01, 10), Adam).load(str(tmp_path / "adam.npz"))  # another schedule: fine
    with pytest.raises(CheckpointError, match=r"saved with the optimizer Adam, but this trainer's is AdamW"):
        _trainer(ExponentialLR(0.01, 0.9), AdamW).load(str(tmp_path / "adam.npz"))


# -- arguments ------------------------------------------------------------------------------------------------------
ARGUMENT_ERRORS = [
    (lambda: StepLR(-0.1, 3), ValueError, r"^StepLR: lr must be a finite number >= 0, got -0.1$"),
    (lambda: StepLR(float("inf"), 3), ValueError, r"^StepLR: lr must be a finite number >= 0, got inf$"),
    (lambda: StepLR("0.1x", 3), TypeError, r"^StepLR: lr must be a number, got '0.1x'$"),
    (lambda: StepLR(0.1, 0), ValueError, r"^StepLR: step_size must be an integer >= 1, got 0$"),
    (lambda: StepLR(0.1, 2.5), TypeError, r"^StepLR: step_size must be an integer >= 1, got 2.5$"),
    (lambda: StepLR(0.1, True), TypeError, r"^StepLR: step_size must be an integer >= 1, got True$"),
    (lambda: StepLR(0.1, 3, gamma=float("nan")), ValueError, r"^StepLR: gamma must be a finite number >= 0, got nan$"),
    (lambda: MultiStepLR(0.1, 5), TypeError, r"^MultiStepLR: milestones must be a list of step counts, got 5$"),
    (lambda: MultiStepLR(0.1, [3, -1]), ValueError, r"^MultiStepLR: milestones\[1\] must be an integer >= 0, got -1$"),
    (lambda: MultiStepLR(0.1, [3], gamma=-0.5), ValueError, r"^MultiStepLR: gamma must be a finite number >= 0"),
    (lambda: ExponentialLR(0.1, -0.5), ValueError, r"^ExponentialLR: gamma must be a finite number >= 0, got -0.5$"),
    (lambda: ExponentialLR(0.1, None), TypeError, r"^ExponentialLR: gamma must be a number, got None$"),
    (lambda: CosineAnnealingLR(0.1, 0), ValueError, r"^CosineAnnealingLR: T_max must be an integer >= 1, got 0$"),
    (lambda: CosineAnnealingLR(0.1, 10, eta_min=-1), ValueError,
     r"^CosineAnnealingLR: eta_min must be a finite number >= 0, got -1$"),
    (lambda: LinearLR(0.1, start_factor=0), ValueError, r"^LinearLR: start_factor must be in \(0, 1\], got 0$"),
    (lambda: LinearLR(0.1, start_factor=1.5), ValueError, r"^LinearLR: start_factor must be in \(0, 1\], got 1.5$"),
    (lambda: LinearLR(0.1, end_factor=-0.1), ValueError, r"^LinearLR: end_factor must be in \[0, 1\], got -0.1$"),
    (lambda: LinearLR(0.1, end_factor=float("nan")), ValueError,
     r"^LinearLR: end_factor must be in \[0, 1\], got nan$"),
    (lambda: LinearLR(0.1, total_iters=0), ValueError, r"^LinearLR: total_iters must be an integer >= 1, got 0$"),
    (lambda: SequentialLR([], []), TypeError, r"^SequentialLR: schedules must be a non-empty list of schedules"),
    (lambda: SequentialLR([StepLR(0.1, 2), 0.1], [3]), TypeError,
     r"^SequentialLR: schedules\[1\] must be a schedule \(StepLR, LinearLR, ...\), got 0.1$"),
    (lambda: SequentialLR([StepLR(0.1, 2), ExponentialLR(0.1, 0.9)], []), ValueError,
     r"^SequentialLR: expected one milestone fewer than schedules .*got 2 schedules and 0 milestones$"),
    (lambda: SequentialLR([StepLR(0.1, 2), ExponentialLR(0.1, 0.9)], [0]), ValueError,
     r"^SequentialLR: milestones\[0\] must be an integer >= 1, got 0$"),
    (lambda: SequentialLR([StepLR(0.1, 2)] * 3, [5, 5]), ValueError,
     r"^SequentialLR: milestones must be strictly increasing \(schedule 1 would never run\), got \[5, 5\]$"),
    (lambda: SequentialLR([StepLR(0.1, 2), ExponentialLR(0.01, 0.9)], [3]), ValueError,
     r"^SequentialLR: every schedule must start from the same lr \(PyTorch's start from the optimizer's\), but "
     r"schedules\[0\] has lr=0.1 and schedules\[1\] has lr=0.01$"),
    (lambda: StepLR(0.1, 3)(-1), ValueError, r"^StepLR: step must be an integer >= 0, got -1$"),
    (lambda: StepLR(0.1, 3)(1.5), TypeError, r"^StepLR: step must be an integer >= 0, got 1.5$"),
    (lambda: SGD("fast"), TypeError, r"^SGD: lr must be a number or a learning-rate schedule \(relax_mlir.training."
                                     r"lr_schedule: StepLR, CosineAnnealingLR, ...\), got 'fast'$"),
    (lambda: Adam(StepLR), TypeError, r"^Adam: lr must be a number or a schedule object, got the class StepLR "
                                      r"\(write StepLR\(lr, ...\)\)$"),
    (lambda: MomentumSGD(-0.1, 0.9), ValueError, r"^MomentumSGD: lr must be a finite number >= 0, got -0.1$"),
]


@pytest.mark.parametrize("make,error,message", ARGUMENT_ERRORS, ids=[m for _, _, m in ARGUMENT_ERRORS])
def test_argument_errors(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_arguments_as_pytorch_takes_them():
    assert MultiStepLR(0.1, (30, 10, 30)).milestones == [10, 30, 30]  # any order, repeats count
    assert MultiStepLR(0.1, range(3)).milestones == [0, 1, 2]
    assert StepLR(0.1, np.int64(3)).step_size == 3 and type(StepLR(0.1, np.int64(3)).step_size) is int
    assert LinearLR(0.1).start_factor == 1 / 3 and LinearLR(0.1).total_iters == 5
    assert ExponentialLR(0, 0.5)(3) == 0.0 and ExponentialLR(0.1, 0)(0) == 0.1  # 0 ** 0 is 1, as in Python
    assert SequentialLR([StepLR(0.1, 2)], [])(5) == StepLR(0.1, 2)(5)


def test_repr_and_equality():
    s = SequentialLR([LinearLR(0.1, 0.01, total_iters=5), CosineAnnealingLR(0.1, 95)], [5])
    assert repr(s) == ("SequentialLR(schedules=[LinearLR(lr=0.1, start_factor=0.01, end_factor=1.0, total_iters=5), "
                       "CosineAnnealingLR(lr=0.1, T_max=95, eta_min=0.0)], milestones=[5])")
    assert repr(SGD(StepLR(0.1, 30))) == "SGD(lr=StepLR(lr=0.1, step_size=30, gamma=0.1), weight_decay=0.0)"
    assert StepLR(0.1, 30) == StepLR(0.1, 30, 0.1) and hash(StepLR(0.1, 30)) == hash(StepLR(0.1, 30, 0.1))
    assert StepLR(0.1, 30) != StepLR(0.1, 31) and StepLR(0.1, 30) != MultiStepLR(0.1, [30])
    assert s == SequentialLR([LinearLR(0.1, 0.01, 1.0, 5), CosineAnnealingLR(0.1, 95, 0)], (5,))
