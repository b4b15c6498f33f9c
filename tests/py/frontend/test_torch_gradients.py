"""``from_exported_program``, trained: what PyTorch's autograd leaves out stays out (``detach``, ``torch.no_grad()``,
frozen parameters), and activations have PyTorch's gradients where ``exp`` overflows.

The oracle is PyTorch itself: the same model trained by ``torch.optim.SGD`` from the same weights, and
``torch.autograd`` for gradients.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import relax_mlir  # noqa: E402
from relax_mlir import transform  # noqa: E402
from relax_mlir.frontend.common import Names  # noqa: E402
from relax_mlir.frontend.torch import _decompose, _stop_gradients, from_exported_program  # noqa: E402
from relax_mlir.ir import TensorStructInfo  # noqa: E402
from relax_mlir.testing import roundtrip  # noqa: E402
from relax_mlir.training import SetupTrainer, Trainer  # noqa: E402
from relax_mlir.training.loss import CrossEntropyLoss, MSELoss  # noqa: E402
from relax_mlir.training.optimizer import SGD, MomentumSGD  # noqa: E402


class _Linear(torch.nn.Module):
    """A linear layer, then ``tail(self, h)``: the part under test."""

    def __init__(self, tail):
        super().__init__()
        self.l, self.l2, self.tail = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4), tail

    def forward(self, x):
        return self.tail(self, self.l(x))


def _no_grad_scale(m, h):
    with torch.no_grad():
        scale = h.abs().max()
    return h / scale


def _no_grad_block_of_several_results(m, h):
    with torch.no_grad():  # a layer (its parameters get no gradient), a max with its int indices, a detach inside
        a = m.l2(h)
        top, index = a.max(dim=1)
        doubled = a.detach() * 2
    return h * top[:, None] + doubled + index[:, None]


_STOPS = {  # each trained the gradient through the stop (run_decompositions made detach an alias, the block inline)
    "straight-through rounding": lambda m, h: h + (torch.round(h) - h).detach(),
    "h * h.detach()": lambda m, h: h * h.detach(),
    "scale computed under no_grad": _no_grad_scale,
    "no_grad block of several results": _no_grad_block_of_several_results,
    "detached parameter": lambda m, h: h * m.l.weight.detach().sum(),
}


def _train_both(model, x, targets, optimizer, torch_optimizer, loss="mse"):
    """``model`` imported and trained by a ``Trainer`` (as the README says), and ``model`` trained by PyTorch, on
    ``targets`` (one step each); returns the trainer and what the import returned."""
    imported = from_exported_program(torch.export.export(copy.deepcopy(model), (x,)))
    mod, params, _ = imported
    roundtrip(mod)
    target = TensorStructInfo(tuple(targets[0].shape), "float32" if loss == "mse" else "int64")
    relax_loss, torch_loss = (MSELoss("mean"), F.mse_loss) if loss == "mse" else (CrossEntropyLoss("mean"),
                                                                                    F.cross_entropy)
    trainer = Trainer(mod, len(params), SetupTrainer(relax_loss, optimizer, [mod["main"].ret_struct_info, target]))
    trainer.build("cpu").load_params(params)
    opt = torch_optimizer(model.parameters())
    for y in targets:
        trainer.update_params(x.numpy(), y.numpy())
        opt.zero_grad()
        torch_loss(model(x), y).backward()
        opt.step()
    return trainer, imported


def _assert_same_parameters(trainer, model, atol=1e-6):
    names = Names()
    want = {names(k): v.detach().numpy() for k, v in model.named_parameters() if v.requires_grad}
    got = trainer.export_params()
    assert set(got) == set(want)
    for key, value in got.items():
        np.testing.assert_allclose(value, want[key], rtol=1e-5, atol=atol, err_msg=key)


@pytest.mark.parametrize("case", list(_STOPS))
def test_stop_gradients_train_as_in_pytorch(case):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    model = _Linear(_STOPS[case])
    x, targets = torch.randn(8, 4, generator=gen), [torch.randn(8, 4, generator=gen) for _ in range(2)]
    mod, params, _ = from_exported_program(torch.export.export(model, (x,)))
    assert "R.grad.no_grad" in mod.script()
    np.testing.assert_allclose(relax_mlir.interpret(mod, "main", x.numpy(), *params.values()),
                               model(x).detach().numpy(), rtol=1e-5, atol=1e-6)  # inference: the identity
    trainer, _ = _train_both(model, x, targets, SGD(0.1), lambda p: torch.optim.SGD(p, lr=0.1))
    _assert_same_parameters(trainer, model)


@pytest.mark.parametrize("decompose_again", [False, True])
def test_a_program_decomposed_beforehand_keeps_its_detach(decompose_again):
    ep = torch.export.export(_Linear(_STOPS["straight-through rounding"]), (torch.randn(8, 4),)).run_decompositions()
    mod, _, _ = from_exported_program(ep, run_decompositions=decompose_again)
    assert "R.grad.no_grad(sub)" in mod.script()


def test_an_alias_that_is_not_a_detach_passes_gradients():
    torch.manual_seed(0)
    model = _Linear(lambda m, h: h * torch.ops.aten.alias(h))
    x, targets = torch.randn(8, 4), [torch.randn(8, 4) for _ in range(2)]
    trainer, (mod, _, _) = _train_both(model, x, targets, SGD(0.1), lambda p: torch.optim.SGD(p, lr=0.1))
    assert "no_grad" not in mod.script()
    _assert_same_parameters(trainer, model)


def test_a_stop_the_decomposition_hides_is_warned_about():
    """Without the nodes' provenance the detach cannot be told from a plain alias: said, not dropped silently."""
    ep = torch.export.export(_Linear(_STOPS["straight-through rounding"]), (torch.randn(8, 4),))
    decomposed = _decompose(ep)
    assert _stop_gradients(ep, decomposed) == {"alias"}
    for node in decomposed.graph.nodes:
        node.meta.pop("from_node", None)
    with pytest.warns(RuntimeWarning, match=r"cannot tell what the decomposition made of detach \(detach or "
                                            r"torch.no_grad\(\)\): trained, gradients would flow through them"):
        assert _stop_gradients(ep, decomposed) == set()


def test_frozen_parameters_are_constants_and_stay_as_they_are():
    """``requires_grad=False`` (a fine-tuned model's fixed first layer): PyTorch's optimizer skips it (no gradient,
    no weight decay either); it was imported as a parameter and trained."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    model[0].requires_grad_(False)
    frozen = model[0].weight.detach().clone()
    x, targets = torch.randn(8, 4, generator=gen), [torch.randint(0, 3, (8,), generator=gen) for _ in range(2)]
    mod, params, _ = from_exported_program(torch.export.export(model, (x,)))
    assert list(params) == ["p2_weight", "p2_bias"] and mod.attrs["param_num"] == 2
    np.testing.assert_allclose(relax_mlir.interpret(mod, "main", x.numpy(), *params.values()),
                               model(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    trainer, _ = _train_both(model, x, targets, MomentumSGD(0.1, 0.9, weight_decay=0.01),
                             lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01), loss="ce")
    assert torch.equal(model[0].weight, frozen)
    _assert_same_parameters(trainer, model)  # the trained layer
    assert not np.allclose(trainer.export_params()["p2_weight"], params["p2_weight"])
    np.testing.assert_allclose(trainer.predict(x.numpy()).numpy(), model(x).detach().numpy(), rtol=1e-5,
                               atol=1e-6)  # the frozen layer is as PyTorch left it


X = torch.tensor([-100.0, -20.0, 0.0, 20.0, 100.0])
_W = torch.tensor([0.3, -0.7, 1.1, 0.5, -1.3])  # weights of the summed outputs: each element's gradient differs

_ACTIVATIONS = {  # ELU, softplus and mish had NaN gradients at 100 (exp overflowed in a where branch not taken),
    # log_sigmoid 1.5 instead of 0.5 at 0; SELU and CELU were refused
    "elu": F.elu, "elu alpha 0.5": lambda x: F.elu(x, 0.5), "selu": F.selu, "celu alpha 0.5": lambda x: F.celu(x, 0.5),
    "softplus": F.softplus, "softplus beta 2 threshold 5": lambda x: F.softplus(x, beta=2.0, threshold=5.0),
    "mish": F.mish, "gelu": F.gelu, "gelu tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
    "sigmoid": torch.sigmoid, "log_sigmoid": F.logsigmoid, "softsign": F.softsign, "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid, "tanh": torch.tanh,
}


class _Activation(torch.nn.Module):
    def __init__(self, fn, summed: bool):
        super().__init__()
        self.fn, self.summed, self.b = fn, summed, torch.nn.Parameter(torch.zeros(5))

    def forward(self, x):
        y = self.fn(x + self.b)
        return (y * _W).sum() if self.summed else y


@pytest.mark.parametrize("case", list(_ACTIVATIONS))
def test_activation_values_and_gradients_match_pytorch_where_exp_overflows(case):
    """At -100, -20, 0, 20 and 100: values (interpreted and compiled) and the gradient through ``Gradient``
    (interpreted and compiled) against torch.autograd."""
    fn = _ACTIVATIONS[case]
    mod, params, _ = from_exported_program(torch.export.export(_Activation(fn, False), (X,)))
    want = fn(X).numpy()
    args = [X.numpy(), *params.values()]
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*args)
    for got in (relax_mlir.interpret(mod, "main", *args), compiled):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    model = _Activation(fn, True)
    summed, _, _ = from_exported_program(torch.export.export(model, (X,)))
    model(X).backward()
    adjoint = transform.Gradient("main", require_grads=summed["main"].params[1:])(summed)
    adjoint = transform.DecomposeOpsForTraining()(adjoint)  # as SetupTrainer does
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(adjoint))["main_adjoint"](*args)
    for _, (grad,) in (relax_mlir.interpret(adjoint, "main_adjoint", *args), compiled):
        np.testing.assert_allclose(grad, model.b.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_elu_mish_and_softplus_train_where_pre_activations_are_large():
    """The hunt's reproducer: a Linear then the activation, pre-activations in the hundreds; the first step raised
    NonFiniteError (a NaN gradient) at any learning rate."""
    torch.manual_seed(0)
    x = torch.tensor([[1000.0, -1000.0, 1000.0, -1000.0]] * 4 + [[-1000.0, 1000.0, -1000.0, 1000.0]] * 4)
    for act in (torch.nn.ELU(), torch.nn.Softplus(), torch.nn.Mish(), torch.nn.SELU(), torch.nn.CELU(0.5)):
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), act)
        trainer, _ = _train_both(model, x, [torch.zeros(8, 4)], SGD(1e-4), lambda p: torch.optim.SGD(p, lr=1e-4))
        _assert_same_parameters(trainer, model, atol=1e-5)
