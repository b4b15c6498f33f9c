"""Optimizers (TVM's ``relax.training.optimizer``): each emits a Relax function that updates parameters.

    opt = SGD(0.01, weight_decay=0.01).init([w, b])      # the parameter Vars (float, one dtype)
    mod["SGD"] = opt.get_function()
    params, opt.state = interpret(mod, "SGD", params, grads, opt.state)

The function is ``name(params: Tuple, gradients: Tuple, optim_states: Tuple) -> (params_new, optim_states_new)``
with one dataflow block and ``global_symbol`` = the optimizer's name. ``opt.state`` is the initial state, a tuple
of NumPy arrays that answer ``.numpy()`` as TVM's do (:class:`~relax_mlir.training.trainer.NDArray`); it always
starts with ``num_steps`` (int64, 0-d). Hyper-parameters become scalar constants of the compute dtype (the
parameters' dtype, as TVM's; float32 for float16/bfloat16 parameters, see below), written first in
multiplications (``multiply(lr, g)``); ``1 - beta`` and ``1 - dampening`` are computed with ``Decimal`` so that
``1 - 0.9`` is the constant ``0.1``. The exact formulas are in
``shared/reference/training_semantics.md``; AdamW (decoupled weight decay) is beyond TVM.

Beyond TVM too, ``lr`` may be a learning-rate schedule (``lr_schedule``: ``StepLR``, ``CosineAnnealingLR``, ...,
PyTorch's): the function then computes the rate from ``num_steps`` (the count before the step, 0 for the first
update) in float64 and binds it, cast to the parameters' dtype, as ``lr``; its signature and state are unchanged.
A float ``lr`` gives the same function as before, constant for constant.

float16 and bfloat16 parameters are updated as PyTorch updates them ("opmath"): in float32. In their own dtype
Adam could not run (``beta2 = 0.999`` rounds to 1.0 in bfloat16, so ``1 - beta2^t`` is 0). The function widens
each parameter, gradient and state buffer to float32 (``x_f32 = astype(x, "float32")``), computes the whole update
there with float32 constants, and rounds each result once to the parameters' dtype (``x_new_bf16``). The buffers
(momentum, Adam's moments) stay in the parameters' dtype, as ``torch.optim``'s do; Adam's running products
``beta^t`` (0-d) are float32, as PyTorch's ``step`` is. PyTorch rounds after every in-place op, this fused update
rounds once, so the two differ by a few units in the last place of a step (``test_optimizer_half.py``).
float32 and float64 functions have no cast and are unchanged.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Optional, Sequence, Union

import numpy as np

from .. import op
from ..ir.block_builder import BlockBuilder
from ..ir.dtype import compute_dtype, is_float, to_numpy
from ..ir.expr import Constant, Expr, Function, Tuple, TupleGetItem, Var, const
from ..ir.struct_info import TensorStructInfo, TupleStructInfo
from .lr_schedule import LRSchedule
from .trainer import NDArray

__all__ = ["Optimizer", "SGD", "MomentumSGD", "Adam", "AdamW"]

# float16/bfloat16 parameters are updated in float32 (``ir.dtype.compute_dtype``: their 8 or 11 significant bits
# round ``beta2 = 0.999`` to 1.0 or lose small steps); the short names name the casts.
_SHORT_NAMES = {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}


def _high_precision_subtract(lhs: Union[float, Decimal], rhs: Union[float, Decimal]) -> float:
    """``lhs - rhs`` in decimal, so hyper-parameters like ``1 - 0.85`` give ``0.15`` and not 0.15000000000000002."""
    return float(Decimal(str(lhs)) - Decimal(str(rhs)))


def _hyper(where: str, name: str, value, low: float = 0.0, below: Optional[float] = None) -> float:
    """A hyper-parameter as a float, refused unless it is a finite number ``>= low`` (and ``< below``): a
    negative learning rate or a beta of 1.5 would train silently wrong (PyTorch refuses the same)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: {name} must be a number, got {value!r}") from None
    if not np.isfinite(number) or number < low or (below is not None and number >= below):
        bound = f"in [{low:g}, {below:g})" if below is not None else f"a finite number >= {low:g}"
        raise ValueError(f"{where}: {name} must be {bound}, got {value!r}")
    return number


def _learning_rate(where: str, lr) -> Union[float, LRSchedule]:
    """``lr`` as a float checked as :func:`_hyper` checks it, or a schedule (``lr_schedule``), kept as it is."""
    if isinstance(lr, LRSchedule):
        return lr
    if isinstance(lr, type) and issubclass(lr, LRSchedule):
        raise TypeError(f"{where}: lr must be a number or a schedule object, got the class {lr.__name__} (write "
                        f"{lr.__name__}(lr, ...))")
    try:
        return _hyper(where, "lr", lr)
    except TypeError:
        raise TypeError(f"{where}: lr must be a number or a learning-rate schedule (relax_mlir.training."
                        f"lr_schedule: StepLR, CosineAnnealingLR, ...), got {lr!r}") from None


class Optimizer:
    """Base class: ``Optimizer(name)``; ``init(params)`` then ``get_function()``, with ``state`` the initial state.

    Attributes set by :meth:`init`: ``param_list`` (the Vars), ``dtype`` (theirs, and that of the per-parameter
    state), ``compute_dtype`` (that of the constants and the arithmetic: ``dtype``, or float32 for
    float16/bfloat16) and ``state``. Write your own by subclassing: call ``super().__init__(name)``,
    override :meth:`_initial_state` if the state holds more than ``num_steps`` (shapes of the parameters via
    ``self._zeros_like_params()``), and implement :meth:`_emit_step`, which emits the update inside the
    function's dataflow block and returns ``(new_params, new_states)``. Helpers: :meth:`_const`,
    :meth:`_emit_steps` (``num_steps`` and ``num_steps_new``; :meth:`_emit_num_steps` gives only the latter),
    :meth:`_emit_lr` (the constant rate, or a schedule's at ``num_steps``), :meth:`_emit_param` (param, gradient
    and the coupled weight decay), :meth:`_emit_state` (a state buffer); these three give values of the compute
    dtype, and :meth:`get_function` rounds what ``_emit_step`` returns to the dtypes of the parameters and of
    ``state``. For example::

        class ClippedSGD(Optimizer):
            # SGD on gradients clipped to [-1, 1]; lr a float or a schedule

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
                    step = op.multiply(lr, clipped)
                    new_params.append(bb.emit(op.subtract(p, step), var.name_hint + "_new"))
                return new_params, [num_steps_new]
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.param_list: Optional[list[Var]] = None
        self.state: Optional[tuple[np.ndarray, ...]] = None
        self.dtype: Optional[str] = None
        self.compute_dtype: Optional[str] = None

    # -- init -----------------------------------------------------------------------------------------
    def init(self, params: Union[Var, Sequence[Var]]) -> "Optimizer":
        """Set the parameters (a Var or a list of Vars) and the dtype, and make the initial ``state``.

        ``ValueError`` unless every parameter is a ``Var`` (not a ``relax.Tuple``) of tensor struct info with a
        static shape and a float/bfloat dtype, all of one dtype, none given twice. Returns the optimizer.
        """
        # As TVM: anything but a Python list (or tuple) is one parameter, so a relax Tuple fails the Var check.
        params = list(params) if isinstance(params, (list, tuple)) else [params]
        self._set_params_and_dtype(params)
        # NDArray views (NumPy arrays with .numpy()), as TVM's optimizer state answers opt.state[0].numpy().
        self.state = tuple(np.asarray(a).view(NDArray) for a in self._initial_state())
        return self

    def _set_params_and_dtype(self, params: list) -> None:
        if not params:
            raise ValueError(f"{self.name}.init: no parameters to optimize")
        seen: set[Var] = set()
        dtype: Optional[str] = None
        for x in params:
            if not isinstance(x, Var):
                raise ValueError(f"{self.name}.init: parameter {x} is not a Var (got {type(x).__name__})")
            sinfo = x.struct_info
            if not isinstance(sinfo, TensorStructInfo):
                raise ValueError(f"{self.name}.init: optimizers only support Tensor parameters, but parameter "
                                 f"{x.name_hint} has struct info {sinfo}")
            if not is_float(sinfo.dtype):
                raise ValueError(f"{self.name}.init: optimizers only support Tensor parameters of floating point "
                                 f"dtype, but dtype of {x.name_hint} is {sinfo.dtype}")
            if not sinfo.is_static:
                raise ValueError(f"{self.name}.init: parameter {x.name_hint} must have a static shape (the state is "
                                 f"made of arrays of its shape), got {sinfo}")
            if dtype is not None and sinfo.dtype != dtype:
                raise ValueError(f"{self.name}.init: all parameters should have the same dtype, but parameter "
                                 f"{x.name_hint} has dtype {sinfo.dtype}, which differs from the previous dtype "
                                 f"{dtype}")
            if x in seen:
                raise ValueError(f"{self.name}.init: parameter {x.name_hint} appears more than once")
            dtype = sinfo.dtype
            seen.add(x)
        self.param_list, self.dtype, self.compute_dtype = params, dtype, compute_dtype(dtype)

    def _initial_state(self) -> tuple[np.ndarray, ...]:
        """The state after ``init``: ``(num_steps,)``; subclasses with per-parameter buffers extend it."""
        return (np.zeros((), np.int64),)

    def _zeros_like_params(self) -> list[np.ndarray]:
        return [np.zeros(tuple(p.struct_info.shape), to_numpy(self.dtype)) for p in self.param_list]

    def _check_init(self) -> None:
        if self.param_list is None or self.state is None or self.dtype is None:
            raise RuntimeError("Please call init() for the optimizer before calling get_function()")

    # -- the function ---------------------------------------------------------------------------------
    def get_function(self) -> Function:
        """The update function ``(params, gradients, optim_states) -> (params_new, optim_states_new)``.

        ``RuntimeError`` before :meth:`init`. The states' struct info follows ``state`` (shapes and dtypes).
        """
        self._check_init()
        param_sinfo = TupleStructInfo(p.struct_info for p in self.param_list)
        state_sinfo = TupleStructInfo(TensorStructInfo(a.shape, _dtype_name(a)) for a in self.state)
        params = Var("params", param_sinfo)
        gradients = Var("gradients", param_sinfo)
        optim_states = Var("optim_states", state_sinfo)
        bb = BlockBuilder()
        with bb.function(self.name, [params, gradients, optim_states], attrs={"global_symbol": self.name}):
            with bb.dataflow():
                new_params, new_states = self._emit_step(bb, params, gradients, optim_states)
                if len(new_states) != len(self.state):
                    raise ValueError(f"{self.name}.get_function: _emit_step returned {len(new_states)} new states, "
                                     f"but the optimizer's state has {len(self.state)} arrays")
                new_params = [self._narrow(bb, x, p.struct_info.dtype) for x, p in zip(new_params, self.param_list)]
                new_states = [self._narrow(bb, x, _dtype_name(a)) for x, a in zip(new_states, self.state)]
                params_new = bb.emit_output(Tuple(new_params), "params_new")
                optim_states_new = bb.emit_output(Tuple(new_states), "optim_states_new")
            bb.emit_func_output((params_new, optim_states_new))
        return bb.get()[self.name]

    def _emit_step(self, bb: BlockBuilder, params: Var, gradients: Var,
                   optim_states: Var) -> tuple[list[Expr], list[Expr]]:
        """Emit the update; return the new parameters and the new states (subclasses implement it)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _emit_step")

    # -- helpers for subclasses -----------------------------------------------------------------------
    def _const(self, value: float) -> Constant:
        """A scalar constant of the optimizer's compute dtype."""
        return const(value, self.compute_dtype)

    def _widen(self, bb: BlockBuilder, x: Var) -> Var:
        """``x`` in the compute dtype: itself, or ``x_f32 = astype(x, "float32")`` for a float16/bfloat16 value."""
        if x.struct_info.dtype == self.compute_dtype:
            return x
        return bb.emit(op.astype(x, self.compute_dtype), f"{x.name_hint}_{_SHORT_NAMES[self.compute_dtype]}")

    def _narrow(self, bb: BlockBuilder, x: Expr, dtype: str) -> Expr:
        """A result of the update as stored: itself, or rounded once to ``dtype`` (``x_new_bf16``) when it was
        computed in float32 for a float16/bfloat16 parameter or buffer."""
        sinfo = getattr(x, "struct_info", None)
        if not isinstance(sinfo, TensorStructInfo) or sinfo.dtype == dtype:
            return x
        name = x.name_hint if isinstance(x, Var) else "lv"
        return bb.emit(op.astype(x, dtype), f"{name}_{_SHORT_NAMES.get(dtype, dtype)}")

    def _emit_state(self, bb: BlockBuilder, optim_states: Var, index: int, name: str) -> Var:
        """``name = optim_states[index]``, in the compute dtype (see :meth:`_widen`)."""
        return self._widen(bb, bb.emit(TupleGetItem(optim_states, index), name))

    def _emit_steps(self, bb: BlockBuilder, optim_states: Var) -> tuple[Var, Var]:
        """``num_steps = optim_states[0]; num_steps_new = num_steps + 1``; returns both."""
        num_steps = bb.emit(TupleGetItem(optim_states, 0), "num_steps")
        return num_steps, bb.emit(op.add(num_steps, const(1, "int64")), "num_steps_new")

    def _emit_num_steps(self, bb: BlockBuilder, optim_states: Var) -> Var:
        """As :meth:`_emit_steps`, returning only ``num_steps_new`` (for an optimizer without a schedule)."""
        return self._emit_steps(bb, optim_states)[1]

    def _emit_lr(self, bb: BlockBuilder, num_steps: Var) -> Expr:
        """The learning rate of this step: ``self.lr`` as a constant (nothing emitted), or its schedule's value at
        ``num_steps`` (the count before this step), bound as ``lr`` in the optimizer's compute dtype."""
        return self._in_dtype(bb, self._emit_lr64(bb, num_steps), "lr")

    def _emit_lr64(self, bb: BlockBuilder, num_steps: Var) -> Union[float, Expr]:
        """``self.lr`` (a float), or the float64 expression of its schedule at ``num_steps``: PyTorch keeps the
        rate a Python float, so derived values (AdamW's ``1 - lr * wd``) are computed from it in float64."""
        if isinstance(self.lr, LRSchedule):
            return self.lr.emit(bb, num_steps)
        return float(self.lr)

    def _in_dtype(self, bb: BlockBuilder, value: Union[float, Expr], name: str) -> Expr:
        """A float as a constant of the optimizer's compute dtype; a float64 expression bound as ``name`` in that
        dtype (rounded once, as PyTorch rounds its Python-float rate when it applies it)."""
        if isinstance(value, float):
            return self._const(value)
        if self.compute_dtype == "float64":
            return value if isinstance(value, Var) else bb.emit(value, name)
        return bb.emit(op.astype(value, self.compute_dtype), name)

    def _emit_param(self, bb: BlockBuilder, params: Var, gradients: Var, i: int,
                    weight_decay: float) -> tuple[Var, Var]:
        """``x = params[i]; x_grad = gradients[i]`` (in the compute dtype, see :meth:`_widen`), then, only when
        ``weight_decay != 0``, the coupled L2 term ``x_grad_new = wd * x + x_grad``. Returns the parameter and the
        gradient to use."""
        name = self.param_list[i].name_hint
        p = self._widen(bb, bb.emit(TupleGetItem(params, i), name))
        g = self._widen(bb, bb.emit(TupleGetItem(gradients, i), name + "_grad"))
        if weight_decay:
            g = bb.emit(op.add(op.multiply(self._const(weight_decay), p), g), name + "_grad_new")
        return p, g

    def __repr__(self) -> str:
        hyper = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if k not in ("name", "param_list", "state",
                                                                                  "dtype", "compute_dtype"))
        return f"{type(self).__name__}({hyper})"


def _dtype_name(a: np.ndarray) -> str:
    from ..ir.dtype import from_numpy

    return from_numpy(a.dtype)


class SGD(Optimizer):
    """Stochastic gradient descent: ``SGD(lr, weight_decay=0)``; state ``(num_steps,)``.

        num_steps_new = num_steps + 1
        g = wd * p + g             # x_grad_new, only when weight_decay != 0
        p_new = p - lr * g         # x_new

    IR for one parameter ``x`` (lr 0.01, no weight decay)::

        num_steps = optim_states[0]
        num_steps_new = R.add(num_steps, R.const(1, "int64"))
        x = params[0]
        x_grad = gradients[0]
        lv = R.multiply(R.const(0.01, "float32"), x_grad)
        x_new = R.subtract(x, lv)
        params_new = (x_new,)
        optim_states_new = (num_steps_new,)
    """

    def __init__(self, lr: Union[float, LRSchedule], weight_decay: float = 0) -> None:
        super().__init__("SGD")
        self.lr = _learning_rate("SGD", lr)
        self.weight_decay = _hyper("SGD", "weight_decay", weight_decay)

    def _emit_step(self, bb, params, gradients, optim_states):
        num_steps, num_steps_new = self._emit_steps(bb, optim_states)
        lr = self._emit_lr(bb, num_steps)
        new_params = []
        for i, var in enumerate(self.param_list):
            p, g = self._emit_param(bb, params, gradients, i, self.weight_decay)
            new_params.append(bb.emit(op.subtract(p, op.multiply(lr, g)), var.name_hint + "_new"))
        return new_params, [num_steps_new]


class MomentumSGD(Optimizer):
    """SGD with momentum: ``MomentumSGD(lr, momentum, dampening=0, weight_decay=0, nesterov=False)``
    (dampening before weight_decay, as TVM). State ``(num_steps, v_0, ..., v_{n-1})``, velocities start at 0.

        g = wd * p + g                                       # x_grad_new, only when weight_decay != 0
        v_new = momentum * v + ((1 - dampening) * g if dampening != 0 else g)      # x_v_new
        d = g + momentum * v_new if nesterov else v_new      # x_g_nest
        p_new = p - lr * d                                   # x_new

    Unlike PyTorch the first step has no ``v = g`` special case: with dampening it gives ``v = (1-dampening)*g``.
    IR for ``x`` (nesterov)::

        x_v = optim_states[1]
        lv = R.multiply(R.const(0.9, "float32"), x_v)
        x_v_new = R.add(lv, x_grad)
        lv1 = R.multiply(R.const(0.9, "float32"), x_v_new)
        x_g_nest = R.add(x_grad, lv1)
        lv2 = R.multiply(R.const(0.01, "float32"), x_g_nest)
        x_new = R.subtract(x, lv2)
    """

    def __init__(self, lr: Union[float, LRSchedule], momentum: float, dampening: float = 0, weight_decay: float = 0,
                 nesterov: bool = False) -> None:
        super().__init__("MomentumSGD")
        self.lr = _learning_rate("MomentumSGD", lr)
        self.momentum = _hyper("MomentumSGD", "momentum", momentum)
        self.dampening = _hyper("MomentumSGD", "dampening", dampening, below=1.0)
        self.weight_decay = _hyper("MomentumSGD", "weight_decay", weight_decay)
        self.nesterov = bool(nesterov)

    def _initial_state(self):
        return (np.zeros((), np.int64), *self._zeros_like_params())

    def _emit_step(self, bb, params, gradients, optim_states):
        num_steps, num_steps_new = self._emit_steps(bb, optim_states)
        lr, momentum = self._emit_lr(bb, num_steps), self._const(self.momentum)
        dampening_inv = self._const(_high_precision_subtract(1, self.dampening))
        new_params, new_states = [], [num_steps_new]
        for i, var in enumerate(self.param_list):
            name = var.name_hint
            p, g = self._emit_param(bb, params, gradients, i, self.weight_decay)
            v = self._emit_state(bb, optim_states, i + 1, name + "_v")
            damped = op.multiply(dampening_inv, g) if self.dampening else g
            v_new = bb.emit(op.add(op.multiply(momentum, v), damped), name + "_v_new")
            d = bb.emit(op.add(g, op.multiply(momentum, v_new)), name + "_g_nest") if self.nesterov else v_new
            new_params.append(bb.emit(op.subtract(p, op.multiply(lr, d)), name + "_new"))
            new_states.append(v_new)
        return new_params, new_states


class Adam(Optimizer):
    """Adam: ``Adam(lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0)`` with coupled (L2) weight decay.

    State ``(num_steps, beta1_prod, beta2_prod, m_0..m_{n-1}, v_0..v_{n-1})``, initially ``(0, 1, 1, 0...)``
    (the products in the compute dtype: float32 for float16/bfloat16 parameters, whose ``m`` and ``v`` are of
    their own dtype); the bias corrections use the running products ``beta^t`` kept in the state::

        beta1_prod = optim_states[1] * beta1;  beta2_prod = optim_states[2] * beta2
        g = wd * p + g                                   # x_grad_new, only when weight_decay != 0
        m_new = beta1 * m + (1 - beta1) * g              # x_m_new
        v_new = beta2 * v + (1 - beta2) * (g * g)        # x_v_new
        m_hat = m_new / (1 - beta1_prod)                 # x_m_hat
        v_hat = v_new / (1 - beta2_prod)                 # x_v_hat
        p_new = p - lr * (m_hat / (sqrt(v_hat) + eps))   # x_new

    IR for ``x`` (excerpt)::

        lv = R.multiply(R.const(0.9, "float32"), x_m)
        lv1 = R.multiply(R.const(0.1, "float32"), x_grad)
        x_m_new = R.add(lv, lv1)
    """

    def __init__(self, lr: Union[float, LRSchedule], betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0) -> None:
        where = type(self).__name__
        super().__init__(where)
        self.lr = _learning_rate(where, lr)
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise TypeError(f"{where}: betas must be a pair (beta1, beta2), got {betas!r}")
        self.beta1, self.beta2 = (_hyper(where, f"betas[{i}]", b, below=1.0) for i, b in enumerate(betas))
        self.eps = _hyper(where, "eps", eps)
        self.weight_decay = _hyper(where, "weight_decay", weight_decay)

    def _initial_state(self):
        zeros = self._zeros_like_params()
        one = np.ones((), to_numpy(self.compute_dtype))
        return (np.zeros((), np.int64), one, one.copy(), *zeros, *[z.copy() for z in zeros])

    def _emit_shrink(self, bb: BlockBuilder, lr64: Union[float, Expr]) -> Optional[Expr]:
        """The factor that decays the parameters before the step (AdamW's ``1 - lr * wd``); None for Adam."""
        return None

    def _emit_decay(self, bb: BlockBuilder, params: Var, gradients: Var, i: int,
                    shrink: Optional[Expr]) -> tuple[Var, Var]:
        """The parameter the Adam step starts from and the gradient it uses: here ``(p, wd * p + g)`` (L2)."""
        return self._emit_param(bb, params, gradients, i, self.weight_decay)

    def _emit_step(self, bb, params, gradients, optim_states):
        n = len(self.param_list)
        c = self._const
        beta1, beta2, eps, one = c(self.beta1), c(self.beta2), c(self.eps), c(1)
        beta1_inv = c(_high_precision_subtract(1, self.beta1))
        beta2_inv = c(_high_precision_subtract(1, self.beta2))

        num_steps, num_steps_new = self._emit_steps(bb, optim_states)
        lr64 = self._emit_lr64(bb, num_steps)
        if not isinstance(lr64, float):
            lr64 = bb.emit(lr64, "lr" if self.compute_dtype == "float64" else "")  # AdamW's shrink reads it too
        lr, shrink = self._in_dtype(bb, lr64, "lr"), self._emit_shrink(bb, lr64)
        beta1_prod = bb.emit(op.multiply(TupleGetItem(optim_states, 1), beta1), "beta1_prod")
        beta2_prod = bb.emit(op.multiply(TupleGetItem(optim_states, 2), beta2), "beta2_prod")
        new_params, ms, vs = [], [], []
        for i, var in enumerate(self.param_list):
            name = var.name_hint
            p, g = self._emit_decay(bb, params, gradients, i, shrink)
            m = self._emit_state(bb, optim_states, 3 + i, name + "_m")
            v = self._emit_state(bb, optim_states, 3 + n + i, name + "_v")
            m_new = bb.emit(op.add(op.multiply(beta1, m), op.multiply(beta1_inv, g)), name + "_m_new")
            v_new = bb.emit(op.add(op.multiply(beta2, v), op.multiply(beta2_inv, op.multiply(g, g))),
                            name + "_v_new")
            m_hat = bb.emit(op.divide(m_new, op.subtract(one, beta1_prod)), name + "_m_hat")
            v_hat = bb.emit(op.divide(v_new, op.subtract(one, beta2_prod)), name + "_v_hat")
            step = op.multiply(lr, op.divide(m_hat, op.add(op.sqrt(v_hat), eps)))
            new_params.append(bb.emit(op.subtract(p, step), name + "_new"))
            ms.append(m_new)
            vs.append(v_new)
        return new_params, [num_steps_new, beta1_prod, beta2_prod, *ms, *vs]


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter 2019; PyTorch's ``torch.optim.AdamW``):
    ``AdamW(lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)``. State and moments exactly as :class:`Adam`;
    the gradient is *not* decayed, the parameter is, first (PyTorch's order: ``p.mul_(1 - lr * wd)`` and then
    the Adam step on the decayed parameter)::

        p_decayed = (1 - lr * wd) * p                           # x_decayed, only when weight_decay != 0
        m_new = beta1 * m + (1 - beta1) * g
        v_new = beta2 * v + (1 - beta2) * (g * g)
        m_hat = m_new / (1 - beta1_prod);  v_hat = v_new / (1 - beta2_prod)
        p_new = p_decayed - lr * (m_hat / (sqrt(v_hat) + eps))

    With a float ``lr``, ``1 - lr * wd`` is one constant computed in ``Decimal``; with a schedule it is computed
    from the float64 rate, once per step (bound as ``shrink``), as PyTorch computes it in Python floats. (PyTorch
    writes the last step as ``p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)``: the same value up
    to rounding.)
    """

    def __init__(self, lr: Union[float, LRSchedule], betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01) -> None:
        super().__init__(lr, betas, eps, weight_decay)

    def _emit_shrink(self, bb, lr64):
        if not self.weight_decay:
            return None
        if isinstance(lr64, float):
            return self._const(float(Decimal(1) - Decimal(str(lr64)) * Decimal(str(self.weight_decay))))
        shrink = op.subtract(const(1.0, "float64"), op.multiply(const(self.weight_decay, "float64"), lr64))
        return self._in_dtype(bb, shrink, "shrink")

    def _emit_decay(self, bb, params, gradients, i, shrink):
        p, g = self._emit_param(bb, params, gradients, i, weight_decay=0.0)
        if shrink is not None:
            p = bb.emit(op.multiply(shrink, p), self.param_list[i].name_hint + "_decayed")
        return p, g
