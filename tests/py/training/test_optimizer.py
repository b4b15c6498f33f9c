"""Optimizers (relax_mlir.training.optimizer) interpreted against NumPy implementations written here.

Parameters x: (3, 3) and y: (3,) float32, as TVM's test. The references follow the documented order of float32
operations (training_semantics.md), so they agree with the interpreter to rtol = atol = 1e-7 (in fact bit for
bit: every binary op is one rounded float32 op on both sides, and sqrt is correctly rounded on both).
"""

from __future__ import annotations


import numpy as np
import pytest

from relax_mlir import interpret, op
from relax_mlir.ir import DataflowBlock, IRModule, TensorStructInfo, Tuple, TupleStructInfo, Var, VarBinding
from relax_mlir.testing import roundtrip
from relax_mlir.training import SGD, Adam, AdamW, MomentumSGD, Optimizer

T = TensorStructInfo
F32 = np.float32
TOL = dict(rtol=1e-7, atol=1e-7)


def make_vars(dtype="float32"):
    return [Var("x", T((3, 3), dtype)), Var("y", T((3,), dtype))]


def run_steps(opt, rng, steps):
    """Apply ``steps`` updates with fresh random gradients; return the params, state and the gradients used."""
    func = opt.get_function()
    mod = roundtrip(IRModule({opt.name: func}))
    params = (rng.uniform(-1, 1, (3, 3)).astype(F32), rng.uniform(-1, 1, 3).astype(F32))
    grads = [(rng.uniform(-1, 1, (3, 3)).astype(F32), rng.uniform(-1, 1, 3).astype(F32)) for _ in range(steps)]
    start, state = params, opt.state
    for g in grads:
        params, state = interpret(mod, opt.name, params, g, state)
    return start, grads, params, state


def assert_close(got, expected, **tol):
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.dtype == np.asarray(e).dtype and g.shape == np.shape(e)
        np.testing.assert_allclose(g, e, **(tol or TOL))


# -- SGD ------------------------------------------------------------------------------------------------------
def np_sgd(params, grads, lr, wd):
    params = list(params)
    for g_step in grads:
        for i, (p, g) in enumerate(zip(params, g_step)):
            if wd:
                g = F32(wd) * p + g
            params[i] = p - F32(lr) * g
    return params


@pytest.mark.parametrize("steps", [1, 3])
@pytest.mark.parametrize("wd", [0.0, 0.02])
def test_sgd(rng, steps, wd):
    opt = SGD(0.01, weight_decay=wd).init(make_vars())
    start, grads, params, state = run_steps(opt, rng, steps)
    assert_close(params, np_sgd(start, grads, 0.01, wd))
    assert_close(state, (np.array(steps, np.int64),))


# -- MomentumSGD ------------------------------------------------------------------------------------------------
def np_momentum(params, grads, lr, momentum, dampening, wd, nesterov):
    params, velocity = list(params), [np.zeros_like(p) for p in params]
    for g_step in grads:
        for i, (p, g) in enumerate(zip(params, g_step)):
            if wd:
                g = F32(wd) * p + g
            velocity[i] = F32(momentum) * velocity[i] + (F32(1 - dampening) * g if dampening else g)
            d = g + F32(momentum) * velocity[i] if nesterov else velocity[i]
            params[i] = p - F32(lr) * d
    return params, velocity


@pytest.mark.parametrize("steps", [1, 3])
@pytest.mark.parametrize("momentum,dampening,wd,nesterov", [(0.9, 0.0, 0.0, False), (0.9, 0.15, 0.0, False),
                                                            (0.9, 0.0, 0.0, True), (0.8, 0.1, 0.02, True),
                                                            (0.5, 0.3, 0.01, False)])
def test_momentum_sgd(rng, steps, momentum, dampening, wd, nesterov):
    opt = MomentumSGD(0.01, momentum, dampening, wd, nesterov).init(make_vars())  # TVM's positional order
    start, grads, params, state = run_steps(opt, rng, steps)
    expected_params, velocity = np_momentum(start, grads, 0.01, momentum, dampening, wd, nesterov)
    assert_close(params, expected_params)
    assert_close(state, (np.array(steps, np.int64), *velocity))


def test_momentum_first_step_has_no_pytorch_special_case(rng):
    """v starts at 0, so with dampening the first velocity is (1 - dampening) * g (PyTorch would set v = g)."""
    opt = MomentumSGD(0.1, 0.9, dampening=0.5).init(make_vars())
    _, grads, _, state = run_steps(opt, rng, 1)
    np.testing.assert_allclose(state[1], F32(0.5) * grads[0][0], **TOL)


# -- Adam ---------------------------------------------------------------------------------------------------------
def np_adam(params, grads, lr, betas, eps, wd):
    b1, b2 = betas
    params = list(params)
    m, v = [np.zeros_like(p) for p in params], [np.zeros_like(p) for p in params]
    b1_prod, b2_prod = F32(1), F32(1)
    for g_step in grads:
        b1_prod, b2_prod = b1_prod * F32(b1), b2_prod * F32(b2)  # running products, as the state keeps them
        for i, (p, g) in enumerate(zip(params, g_step)):
            if wd:
                g = F32(wd) * p + g
            m[i] = F32(b1) * m[i] + F32(1 - b1) * g
            v[i] = F32(b2) * v[i] + F32(1 - b2) * (g * g)
            m_hat = m[i] / (F32(1) - b1_prod)
            v_hat = v[i] / (F32(1) - b2_prod)
            params[i] = p - F32(lr) * (m_hat / (np.sqrt(v_hat) + F32(eps)))
    return params, (b1_prod, b2_prod, *m, *v)


@pytest.mark.parametrize("steps", [1, 3])
@pytest.mark.parametrize("betas,eps,wd", [((0.9, 0.999), 1e-8, 0.0), ((0.85, 0.99), 1e-6, 0.1)])
def test_adam(rng, steps, betas, eps, wd):
    opt = Adam(0.01, betas, eps, wd).init(make_vars())
    start, grads, params, state = run_steps(opt, rng, steps)
    expected_params, rest = np_adam(start, grads, 0.01, betas, eps, wd)
    assert_close(params, expected_params)
    assert_close(state, (np.array(steps, np.int64), *[np.asarray(a) for a in rest]))


def test_adam_state_layout():
    opt = Adam(0.001).init(make_vars())
    shapes = [a.shape for a in opt.state]
    assert shapes == [(), (), (), (3, 3), (3,), (3, 3), (3,)]
    assert [a.dtype for a in opt.state] == [np.int64] + [np.float32] * 6
    assert opt.state[0] == 0 and opt.state[1] == 1 and opt.state[2] == 1
    assert all(not a.any() for a in opt.state[3:])
    func = opt.get_function()
    assert func.params[2].struct_info == TupleStructInfo(T(a.shape, str(a.dtype)) for a in opt.state)
    assert [p.name_hint for p in func.params] == ["params", "gradients", "optim_states"]
    assert func.ret_struct_info == TupleStructInfo([func.params[0].struct_info, func.params[2].struct_info])


# -- AdamW -------------------------------------------------------------------------------------------------------
def np_adamw_pytorch(params, grads, lr, betas, eps, wd):
    """torch.optim.AdamW's single-tensor step, literally (float32 tensors, Python-float scalars)."""
    b1, b2 = betas
    params = [p.copy() for p in params]
    m, v = [np.zeros_like(p) for p in params], [np.zeros_like(p) for p in params]
    for step, g_step in enumerate(grads, start=1):
        for i, g in enumerate(g_step):
            params[i] = params[i] * F32(1 - lr * wd)                     # param.mul_(1 - lr * weight_decay)
            m[i] = m[i] + F32(1 - b1) * (g - m[i])                       # exp_avg.lerp_(grad, 1 - beta1)
            v[i] = v[i] * F32(b2) + F32(1 - b2) * (g * g)                # exp_avg_sq.mul_(b2).addcmul_(g, g, 1-b2)
            step_size = lr / (1 - b1 ** step)
            denom = np.sqrt(v[i]) / F32(np.sqrt(1 - b2 ** step)) + F32(eps)
            params[i] = params[i] - F32(step_size) * (m[i] / denom)      # param.addcdiv_(exp_avg, denom, -step_size)
    return params, m, v


@pytest.mark.parametrize("steps", [1, 3])
@pytest.mark.parametrize("wd", [0.01, 0.1])
def test_adamw_matches_pytorch_formula(rng, steps, wd):
    """Two documented differences in float32 rounding, hence the tolerances:

    * the bias corrections: the state keeps ``beta2^t`` as a float32 running product of the float32 constant
      0.999 (TVM's Adam state), PyTorch computes ``1 - 0.999 ** step`` in float64. ``1 - beta2^t`` (0.003 at t=3)
      cancels, so its relative error reaches ~1.3e-5; through sqrt and lr = 0.01 that moves a parameter by up to
      ~1e-7 per step: atol 1e-6 on the parameters (about 15x smaller than one step's change, lr * ~1).
    * PyTorch's grouping (lerp for m) rounds the moments differently by an ulp or two: rtol 1e-6 on the states.
    """
    opt = AdamW(0.01, (0.9, 0.999), 1e-8, wd).init(make_vars())
    start, grads, params, state = run_steps(opt, rng, steps)
    expected, m, v = np_adamw_pytorch(start, grads, 0.01, (0.9, 0.999), 1e-8, wd)
    assert_close(params, expected, rtol=0, atol=1e-6)
    assert_close(state[3:], [*m, *v], rtol=1e-6, atol=1e-8)
    assert state[0] == steps


def test_adamw_one_step_exact_order(rng):
    """After one step the running products equal the constants, so the exact-order float32 AdamW formula
    (decay, then this file's Adam step) agrees to rtol = atol = 1e-7."""
    lr, wd = 0.01, 0.1
    opt = AdamW(lr, (0.9, 0.999), 1e-8, wd).init(make_vars())
    start, grads, params, _ = run_steps(opt, rng, 1)
    decayed = [F32(1 - lr * wd) * p for p in start]
    expected, _ = np_adam(decayed, grads, lr, (0.9, 0.999), 1e-8, 0.0)
    assert_close(params, expected)


def test_adamw_is_decoupled(rng):
    """AdamW without weight decay is Adam; with it, the gradient (hence the moments) is not decayed."""
    x = make_vars()
    _, _, p_adam, s_adam = run_steps(Adam(0.01).init(x), np.random.default_rng(1), 3)
    _, _, p_adamw, s_adamw = run_steps(AdamW(0.01, weight_decay=0.0).init(x), np.random.default_rng(1), 3)
    assert_close(p_adamw, p_adam, rtol=0, atol=0)
    _, _, p_wd, s_wd = run_steps(AdamW(0.01, weight_decay=0.1).init(x), np.random.default_rng(1), 3)
    assert_close(s_wd[3:], s_adam[3:], rtol=0, atol=0)
    assert not np.allclose(p_wd[0], p_adam[0], rtol=0, atol=1e-7)
    assert AdamW(0.01).weight_decay == 0.01  # PyTorch's default


def test_adamw_binding_only_with_weight_decay():
    names = binding_names(AdamW(0.01, weight_decay=0.0).init(make_vars()).get_function())
    assert "x_decayed" not in names and "x_grad_new" not in names
    func = AdamW(0.001, weight_decay=0.01).init(make_vars()).get_function()
    assert func.attrs["global_symbol"] == "AdamW"
    decayed = binding(func, "x_decayed")
    assert decayed.value.op is op.multiply and float(decayed.value.args[0].data) == F32(1 - 0.001 * 0.01)
    assert binding(func, "x_new").value.args[0] is decayed.var  # the Adam step starts from the decayed param
    assert "x_grad_new" not in binding_names(func)


# -- the function's form -----------------------------------------------------------------------------------------
def binding_names(func):
    return [b.var.name_hint for b in func.body.blocks[0].bindings]


def binding(func, name):
    (b,) = [b for b in func.body.blocks[0].bindings if b.var.name_hint == name]
    return b


@pytest.mark.parametrize("opt,name", [(SGD(0.1), "SGD"), (MomentumSGD(0.1, 0.9), "MomentumSGD"),
                                      (Adam(0.1), "Adam"), (AdamW(0.1), "AdamW")])
def test_function_form(opt, name):
    func = opt.init(make_vars()).get_function()
    assert func.attrs["global_symbol"] == name == opt.name
    assert len(func.body.blocks) == 1 and isinstance(func.body.blocks[0], DataflowBlock)
    names = binding_names(func)
    assert names[:2] == ["num_steps", "num_steps_new"]
    assert names[-2:] == ["params_new", "optim_states_new"]
    assert isinstance(func.body.body, Tuple)
    assert opt.state[0].dtype == np.int64 and opt.state[0].shape == ()


def test_weight_decay_binding_and_constant_first_multiplication():
    names = binding_names(SGD(0.1).init(make_vars()).get_function())
    assert names == ["num_steps", "num_steps_new", "x", "x_grad", "lv", "x_new", "y", "y_grad", "lv1", "y_new",
                     "params_new", "optim_states_new"]
    func = SGD(0.1, weight_decay=0.02).init(make_vars()).get_function()
    g_new = binding(func, "x_grad_new").value  # add(multiply(wd, x), x_grad)
    assert g_new.op is op.add and g_new.args[1].name_hint == "x_grad"
    wd_times_p = binding(func, g_new.args[0].name_hint).value
    assert wd_times_p.op is op.multiply and wd_times_p.args[1].name_hint == "x"
    assert float(wd_times_p.args[0].data) == F32(0.02)
    lr_times_g = binding(func, binding(func, "x_new").value.args[1].name_hint).value
    assert float(lr_times_g.args[0].data) == F32(0.1) and lr_times_g.args[1].name_hint == "x_grad_new"


def test_one_minus_constants_use_decimal():
    """1 - 0.85 is the float64 constant 0.15, not 0.15000000000000002."""
    func = MomentumSGD(0.1, 0.9, dampening=0.85).init(make_vars("float64")).get_function()
    lv = binding(func, "x_v_new").value.args[1]
    assert binding(func, lv.name_hint).value.args[0].data == np.float64(0.15)
    adam = Adam(0.1, betas=(0.85, 0.9)).init(make_vars("float64")).get_function()
    consts = {float(b.value.args[0].data) for b in adam.body.blocks[0].bindings
              if isinstance(b, VarBinding) and getattr(b.value, "op", None) is op.multiply
              and hasattr(b.value.args[0], "data")}
    assert {0.15, 0.1} <= consts and 0.15000000000000002 not in consts


def test_float64_and_bfloat16_params():
    opt = Adam(0.1).init([Var("w", T((2,), "float64"))])
    assert opt.dtype == "float64" and opt.state[1].dtype == np.float64
    roundtrip(IRModule({"Adam": opt.get_function()}))
    assert SGD(0.1).init(Var("w", T((2,), "bfloat16"))).dtype == "bfloat16"


# -- init() and get_function() checks --------------------------------------------------------------------------
def test_init_errors():
    x, y = make_vars()
    cases = [
        (Tuple([x, y]), r"parameter .* is not a Var \(got Tuple\)"),
        ([x, Tuple([y])], r"is not a Var"),
        (Var("t", TupleStructInfo([x.struct_info])), r"only support Tensor parameters, but parameter t has"),
        (Var("i", T((3,), "int32")), r"of floating point dtype, but dtype of i is int32"),
        ([x, Var("z", T((3,), "float64"))], r"parameter z has dtype float64, which differs from the previous "
                                            r"dtype float32"),
        ([x, y, x], r"parameter x appears more than once"),
        ([], r"no parameters to optimize"),
        (Var("s", T(("n", 3), "float32")), r"parameter s must have a static shape"),
    ]
    for params, message in cases:
        with pytest.raises(ValueError, match=message):
            SGD(0.1).init(params)


def test_get_function_before_init():
    for opt in (SGD(0.1), MomentumSGD(0.1, 0.9), Adam(0.1), AdamW(0.1)):
        with pytest.raises(RuntimeError, match=r"^Please call init\(\) for the optimizer before calling "
                                               r"get_function\(\)$"):
            opt.get_function()


def test_init_returns_self_and_accepts_one_var():
    x = Var("x", T((2,), "float32"))
    opt = SGD(0.1)
    assert opt.init(x) is opt and opt.param_list == [x]
    assert opt.init((x,)).param_list == [x]


class ClippedSGD(Optimizer):
    """The subclassing example of Optimizer's docstring."""

    def __init__(self, lr):
        super().__init__("ClippedSGD")
        self.lr = float(lr)

    def _emit_step(self, bb, params, gradients, optim_states):
        num_steps_new = self._emit_num_steps(bb, optim_states)
        new_params = []
        for i, var in enumerate(self.param_list):
            p, g = self._emit_param(bb, params, gradients, i, weight_decay=0.0)
            clipped = bb.emit(op.clip(g, -1.0, 1.0), var.name_hint + "_clipped")
            step = op.multiply(self._const(self.lr), clipped)
            new_params.append(bb.emit(op.subtract(p, step), var.name_hint + "_new"))
        return new_params, [num_steps_new]


def test_custom_optimizer_subclass(rng):
    opt = ClippedSGD(0.5).init(make_vars())
    start, grads, params, state = run_steps(opt, rng, 2)
    expected = list(start)
    for g_step in grads:
        expected = [p - F32(0.5) * np.clip(g, F32(-1), F32(1)) for p, g in zip(expected, g_step)]
    assert_close(params, expected)
    assert state[0] == 2
    with pytest.raises(NotImplementedError, match="must implement _emit_step"):
        Optimizer("Nothing").init(make_vars()).get_function()


@pytest.mark.parametrize("opt", [SGD(0.1), MomentumSGD(0.1, 0.9), Adam(0.01), AdamW(0.01)], ids=lambda o: o.name)
def test_state_arrays_answer_numpy_as_tvms_do(opt):
    # TVM's test_training_optimizer_numeric reads opt.state[0].numpy(). The Trainer keeps plain copies of them.
    from relax_mlir.training import SetupTrainer, Trainer
    from relax_mlir.training.loss import MSELoss
    from relax_mlir.training.trainer import NDArray
    from relax_mlir.models import mlp

    state = opt.init(make_vars()).state
    assert all(isinstance(a, NDArray) for a in state)
    assert state[0].numpy() == 0 and type(state[0].numpy()) is np.ndarray and state[0].numpy().dtype == np.int64
    assert [a.numpy().shape for a in state[1:]] == [a.shape for a in state[1:]]
    setup = SetupTrainer(MSELoss(), opt, [T((2, 3), "float32"), T((2, 3), "float32")])
    trainer = Trainer(mlp(2, (4, 3)), 2, setup).build(target="numpy")
    assert len(trainer.optim_state) == len(state)
    assert all(a.__class__ is np.ndarray for a in trainer.optim_state)
