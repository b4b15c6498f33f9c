"""``from_exported_program``: activations differentiate as PyTorch's autograd does at their kinks, where Relax's ops
keep TVM's rules (relu'(0) = 1, clip's bounds inclusive, abs'(0) = 1), and compute PyTorch's values there, signed
zeros included (``relu(-0.0)`` is ``-0.0`` in PyTorch).

The hunt's table (relax-mlir's f'(x) against PyTorch's): relu at 0: 1 against 0; leaky_relu(0.01) at 0: 1 against
0.01; relu6 at 0 and 6: 1 against 0; hardtanh(-3, 3) at -3 and 3: 1 against 0; hardswish at -3 and 3: -0.5 and 1.5
against 0 and 1; hardsigmoid at -3 and 3: 1/6 against 0; abs at 0: 1 against 0. A ReLU input is exactly 0 wherever
a zero bias meets a zero patch of an image, so one SGD step gave every conv bias of such a model another value.

Oracles: ``torch.autograd`` and PyTorch's forward on the same values; TVM's rules (hand-derived) for the TVMScript
programs, whose gradients must stay TVM's.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import relax_mlir  # noqa: E402
from relax_mlir import transform  # noqa: E402
from relax_mlir.frontend.torch import from_exported_program  # noqa: E402
from relax_mlir.ir import TensorStructInfo  # noqa: E402
from relax_mlir.script import from_source  # noqa: E402
from relax_mlir.training import SetupTrainer, Trainer  # noqa: E402
from relax_mlir.training.loss import CrossEntropyLoss  # noqa: E402
from relax_mlir.training.optimizer import SGD  # noqa: E402

_NAN, _INF = float("nan"), float("inf")
# Every kink of the activations below, signed zeros, NaN and the infinities, then random values.
_SPECIAL = [0.0, -0.0, 6.0, -3.0, 3.0, -1.0, 1.0, _NAN, _INF, -_INF, 1e-30, -1e-30, -2.5, 2.5, 7.0]
_X = torch.tensor(_SPECIAL + torch.randn(17, generator=torch.Generator().manual_seed(0)).mul(4).tolist())

_ACTIVATIONS = {
    "relu": F.relu, "relu6": F.relu6, "leaky_relu": F.leaky_relu,
    "leaky_relu slope -0.2": lambda x: F.leaky_relu(x, -0.2), "hardtanh(-3, 3)": lambda x: F.hardtanh(x, -3.0, 3.0),
    "hardtanh": F.hardtanh, "abs": torch.abs, "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid,
}
# torch.export's decomposition makes hardswish and hardsigmoid clamps, whose gradient passes on the bounds, as
# PyTorch's own clamp's does: imported whole (not decomposed), they get their converters.
_WHOLE = ("hardswish", "hardsigmoid")
# PyTorch's own gradient at NaN differs between its vectorized loop and its scalar tail for these (hardtanh: 0 in
# a vector, g in the tail; hardswish: NaN and g): not compared.
_NAN_GRADIENT_VARIES = ("relu6", "hardtanh(-3, 3)", "hardtanh", "hardswish")


class _Activation(torch.nn.Module):
    """``fn(x + b)``, or its sum: the gradient of ``b`` is ``fn'(x)``. ``b`` is ``-0.0``: ``x + b`` is ``x``, signed
    zeros included."""

    def __init__(self, fn, summed: bool):
        super().__init__()
        self.fn, self.summed, self.b = fn, summed, torch.nn.Parameter(torch.full((len(_X),), -0.0))

    def forward(self, x):
        y = self.fn(x + self.b)
        return y.sum() if self.summed else y


def _import(model, decompose: bool = True):
    return from_exported_program(torch.export.export(model, (_X,)), run_decompositions=decompose)


def _bits(a) -> np.ndarray:
    """The float32 bit patterns, every NaN made one (PyTorch's and MLIR's NaNs may differ in sign and payload)."""
    a = np.array(np.asarray(a), np.float32)
    a[np.isnan(a)] = np.nan
    return a.view(np.uint32)


@pytest.mark.parametrize("case", list(_ACTIVATIONS))
def test_values_are_pytorchs_bit_for_bit(case):
    """Interpreted and compiled: ``relu(-0.0)`` and ``relu6(-0.0)`` were ``0.0`` (PyTorch keeps ``-0.0``), and
    ``leaky_relu(x, -0.2)`` of ``-0.0``/``0.0`` had the other sign."""
    fn = _ACTIVATIONS[case]
    model = _Activation(fn, False)
    mod, params, _ = _import(model, decompose=case not in _WHOLE)
    args = [_X.numpy(), *params.values()]
    want = _bits(model(_X).detach())
    assert np.signbit(params["b"]).all()
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*args)
    with np.errstate(invalid="ignore"):  # hardswish(-inf) is -inf * 0, NaN (as PyTorch's)
        interpreted = relax_mlir.interpret(mod, "main", *args)
    for got in (interpreted, compiled):
        np.testing.assert_array_equal(_bits(got), want)


def _gradients(mod, params):
    """The gradient of the parameter ``b`` through ``Gradient``, interpreted and compiled (as ``SetupTrainer``
    makes it: the composites decomposed for training)."""
    adjoint = transform.Gradient("main", require_grads=mod["main"].params[1:])(mod)
    adjoint = transform.DecomposeOpsForTraining()(adjoint)
    args = [_X.numpy(), *params.values()]
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(adjoint))["main_adjoint"](*args)
    with np.errstate(invalid="ignore", divide="ignore"):  # the sum of NaN and infinities; sqrt'(0)
        interpreted = relax_mlir.interpret(adjoint, "main_adjoint", *args)
    return [np.asarray(grads[0]) for _, grads in (interpreted, compiled)]


@pytest.mark.parametrize("case", list(_ACTIVATIONS))
def test_gradients_are_pytorchs_at_the_kinks(case):
    """``fn'(x)`` at every kink, at the infinities and at random points equals ``torch.autograd``'s: 0, 1 and the
    slopes exactly (``-0.0`` and ``0.0`` alike: PyTorch's ``abs'(0)`` is ``g * sgn(0)``, ``-0.0`` for a negative
    ``g``); at NaN too, where PyTorch's is one value."""
    model = _Activation(_ACTIVATIONS[case], True)
    model(_X).backward()
    want, x = model.b.grad.numpy(), _X.numpy()
    compared = ~np.isnan(x) if case in _NAN_GRADIENT_VARIES else np.ones(len(x), bool)
    for got in _gradients(*_import(model, decompose=case not in _WHOLE)[:2]):
        if case == "hardswish":
            # PyTorch's backward is g * (x / 3 + 0.5) inside (-3, 3), this the chain rule of x * clip(x + 3) / 6: the
            # same to rounding; exactly so at the kinks and outside
            exact = np.abs(x) >= 3
            np.testing.assert_array_equal(got[exact], want[exact])
            np.testing.assert_allclose(got[compared], want[compared], rtol=1e-6, atol=1e-7)
        else:
            np.testing.assert_array_equal(got[compared], want[compared])


@pytest.mark.parametrize("case", ["sqrt(relu(x))", "1 / (relu(x) + 1)"])
def test_relus_zero_gradient_at_0_stops_what_comes_after(case):
    """PyTorch's relu backward is a ``where``: relu'(0) = 0 drops sqrt's infinite gradient at 0 (it was inf here) and
    the -1 of ``1 / (relu(x) + 1)`` (it was -1 here)."""
    fn = {"sqrt(relu(x))": lambda x: torch.sqrt(F.relu(x)), "1 / (relu(x) + 1)": lambda x: 1 / (F.relu(x) + 1)}[case]
    model = _Activation(fn, True)
    model(_X).backward()
    want, x = model.b.grad.numpy(), _X.numpy()
    for got in _gradients(*_import(model)[:2]):
        assert (got[x == 0] == 0).all() and (want[x == 0] == 0).all()
        np.testing.assert_allclose(got, want, rtol=1e-6)  # PyTorch's sqrt is not correctly rounded: 1 ulp apart


@pytest.mark.parametrize("case", _WHOLE)
def test_hardswish_and_hardsigmoid_kinks_by_default(case):
    """The default import keeps them whole (``_KEEP_WHOLE``): torch.export's decomposition makes them ``clamp``,
    whose gradient passes on its bounds, as PyTorch's own ``clamp``'s does: hardswish'(-3) was -0.5 and
    hardswish'(3) 1.5 (PyTorch 0 and 1), hardsigmoid' 1/6 at -3 and 3 (PyTorch 0)."""
    model = _Activation(_ACTIVATIONS[case], True)
    model(_X).backward()
    kinks = np.isin(_X.numpy(), [-3.0, 3.0])
    for got in _gradients(*_import(model)[:2]):
        np.testing.assert_array_equal(got[kinks], model.b.grad.numpy()[kinks])


def test_imported_activations_are_still_their_relax_ops():
    """The kinks add a ``where`` (and ``grad.no_grad``) after the op; the op stays in the program, readable."""
    model = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.ReLU6(), torch.nn.LeakyReLU(0.1))
    mod, _, _ = from_exported_program(torch.export.export(model, (_X,)))
    script = mod.script()
    for call in ("R.nn.relu(", "R.clip(", "R.nn.leakyrelu(", "R.grad.no_grad(", "R.where("):
        assert call in script, call


def test_integer_relu_and_abs_stay_the_plain_ops():
    """No gradient flows through integers: their relu and abs need no ``where``."""

    class Int(torch.nn.Module):
        def forward(self, i):
            return torch.relu(i) + torch.abs(i)

    i = torch.tensor([-3, 0, 2], dtype=torch.int32)
    mod, _, _ = from_exported_program(torch.export.export(Int(), (i,)))
    assert "R.where" not in mod.script()
    np.testing.assert_array_equal(relax_mlir.interpret(mod, "main", i.numpy()), [3, 0, 4])


def test_one_sgd_step_of_a_cnn_on_zero_bordered_images_is_pytorchs():
    """The hunt's reproducer: a conv with a zero bias over images with zero borders (digits) puts ReLU inputs at
    exactly 0; one SGD step gave every conv bias another value than PyTorch's (some of the other sign)."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 64, 10))
    torch.nn.init.zeros_(model[0].bias)
    x = torch.zeros(16, 1, 8, 8)
    x[:, :, 2:6, 2:6] = torch.rand(16, 1, 4, 4, generator=gen)  # a 4x4 digit in a zero border
    y = torch.randint(0, 10, (16,), generator=gen)
    assert (model[0](x) == 0).any()  # the kink is hit
    mod, params, _ = from_exported_program(torch.export.export(copy.deepcopy(model), (x,)))
    setup = SetupTrainer(CrossEntropyLoss("mean"), SGD(0.1), [mod["main"].ret_struct_info,
                                                              TensorStructInfo((16,), "int64")])
    trainer = Trainer(mod, len(params), setup).build("cpu")
    trainer.load_params(params)
    trainer.update_params(x.numpy(), y.numpy())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    F.cross_entropy(model(x), y).backward()
    opt.step()
    got = trainer.export_params()
    for name, p in (("p0_bias", model[0].bias), ("p0_weight", model[0].weight), ("p3_weight", model[3].weight)):
        np.testing.assert_allclose(got[name], p.detach().numpy(), rtol=1e-5, atol=1e-7, err_msg=name)


class _ReluRNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.RNN(2, 3, nonlinearity="relu", batch_first=True)
        torch.nn.init.zeros_(self.rnn.bias_ih_l0)
        torch.nn.init.zeros_(self.rnn.bias_hh_l0)

    def forward(self, x):
        return (self.rnn(x)[0] * torch.arange(1.0, 4.0)).sum()


def test_a_relu_rnn_over_zero_padded_steps_has_pytorchs_gradients():
    """``nn.RNN(nonlinearity="relu")`` is unrolled with the same relu: over leading zero steps (left padding), with
    zero biases and a zero ``h0``, the pre-activations are exactly 0, where PyTorch's relu passes no gradient."""
    torch.manual_seed(0)
    model = _ReluRNN()
    x = torch.randn(2, 4, 2, generator=torch.Generator().manual_seed(2))
    x[:, :2] = 0.0  # padding
    mod, params, _ = from_exported_program(torch.export.export(model, (x,)))
    model(x).backward()
    adjoint = transform.Gradient("main", require_grads=mod["main"].params[1:])(mod)
    _, grads = relax_mlir.interpret(adjoint, "main_adjoint", x.numpy(), *params.values())
    for got, p in zip(grads, model.parameters()):
        np.testing.assert_allclose(got, p.grad.numpy(), rtol=1e-5, atol=1e-7)


_TVM_KINKS = from_source("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((5,), "float32"), b: R.Tensor((5,), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            z = R.add(x, b)
            out = R.sum(R.nn.relu(z) + R.abs(z) * R.const(10.0, "float32")
                        + R.clip(z, min=-1.0, max=1.0) * R.const(100.0, "float32")
                        + R.nn.leakyrelu(z, alpha=0.25) * R.const(1000.0, "float32"))
            R.output(out)
        return out
""")


def test_relax_programs_keep_tvms_gradients_at_the_kinks():
    """TVM's rules, which the project's ``Gradient`` follows on TVM's programs: relu'(0) = 1, abs'(0) = 1, clip
    passes on its bounds, leakyrelu'(0) = 1. At x = 0, -1, 1, 2, -2 (b = 0) the gradient of b is
    relu' + 10 abs' + 100 clip' + 1000 leakyrelu'."""
    x, b = np.array([0.0, -1.0, 1.0, 2.0, -2.0], np.float32), np.zeros(5, np.float32)
    relu, abs_, clip, leaky = [1, 0, 1, 1, 0], [1, -1, 1, 1, -1], [1, 1, 1, 0, 0], [1, 0.25, 1, 1, 0.25]
    want = np.array(relu) + 10 * np.array(abs_) + 100 * np.array(clip) + 1000 * np.array(leaky)
    adjoint = transform.Gradient("main", require_grads=[_TVM_KINKS["main"].params[1]])(_TVM_KINKS)
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(adjoint))["main_adjoint"](x, b)
    for _, (grad,) in (relax_mlir.interpret(adjoint, "main_adjoint", x, b), compiled):
        np.testing.assert_array_equal(grad, want.astype(np.float32))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", _WHOLE)
def test_half_hardswish_and_hardsigmoid_round_once_as_pytorch(case, dtype):
    """In float16 and bfloat16 PyTorch computes them in float32 and rounds once; rounded at every step, 750
    (hardswish) and 403 (hardsigmoid) of these 4097 bfloat16 values differed. Compiled and interpreted."""
    fn = _ACTIVATIONS[case]

    class Half(torch.nn.Module):
        def forward(self, x):
            return fn(x)

    x = torch.linspace(-6, 6, 4097).to(dtype)
    mod, params, _ = from_exported_program(torch.export.export(Half(), (x,)))
    want = Half()(x).float().numpy()
    arg = x.view(torch.int16).numpy().view(relax_mlir.ir.dtype.BFLOAT16) if dtype == torch.bfloat16 else x.numpy()
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](arg)
    interpreted = relax_mlir.interpret(mod, "main", arg)
    for got in (interpreted, compiled):
        np.testing.assert_array_equal(np.asarray(got).astype(np.float32), want)
