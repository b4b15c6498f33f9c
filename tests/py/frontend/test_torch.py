"""``from_exported_program``: imported models compute what PyTorch computes, and train as PyTorch trains them.

Training: the same initial weights, batches and optimizer (SGD with momentum and weight decay, mean
cross-entropy) in PyTorch's own loop and in a ``Trainer`` built from the imported module; the float32 losses agree
step by step within a relative 1e-4 and the final parameters within 1e-4 (relative, plus 1e-6 absolute).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import relax_mlir  # noqa: E402
from relax_mlir.frontend import UnsupportedOpsError  # noqa: E402
from relax_mlir.frontend.torch import TorchImportError, from_exported_program  # noqa: E402
from relax_mlir.ir import TensorStructInfo  # noqa: E402
from relax_mlir.testing import roundtrip  # noqa: E402
from relax_mlir.training import SetupTrainer, Trainer  # noqa: E402
from relax_mlir.training.loss import CrossEntropyLoss  # noqa: E402
from relax_mlir.training.optimizer import MomentumSGD  # noqa: E402

from .torch_models import batch, make  # noqa: E402

MODELS = ["mlp", "cnn", "encoder"]
STEPS, BATCH, LR, MOMENTUM, WD = 20, 8, 0.05, 0.9, 0.01


def _import(model, example):
    mod, params, states = from_exported_program(torch.export.export(model, (example,)))
    roundtrip(mod)
    return mod, params, states


@pytest.mark.parametrize("name", MODELS)
def test_inference_matches_pytorch(name):
    gen = torch.Generator().manual_seed(1)
    model = make(name)
    for _ in range(2):  # move batch-norm running statistics away from (0, 1)
        model.train()(batch(model, BATCH, gen)[0])
    model.eval()
    x = batch(model, BATCH, gen)[0]
    mod, params, states = _import(model, x)
    expected = model(x).detach().numpy()
    args = [x.numpy(), *params.values(), *states.values()]
    out = relax_mlir.interpret(mod, "main", *args)
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*args)
    for got in (out, compiled):
        got = got[0] if states else got
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def _torch_training(model, batches):
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("name", MODELS)
def test_training_matches_pytorch(name):
    gen = torch.Generator().manual_seed(2)
    model = make(name).train()
    batches = [batch(model, BATCH, gen) for _ in range(STEPS)]
    mod, params, states = _import(copy.deepcopy(model), batches[0][0])
    expected = _torch_training(model, batches)

    ret = mod["main"].ret_struct_info
    pred = ret.fields[0] if states else ret
    setup = SetupTrainer(CrossEntropyLoss("mean"), MomentumSGD(LR, MOMENTUM, weight_decay=WD),
                         [pred, TensorStructInfo((BATCH,), "int64")])
    trainer = Trainer(mod, len(params), setup).build("cpu")
    trainer.load_params(params)
    if states:
        trainer.load_states(states)
    losses = [float(trainer.update_params(x.numpy(), y.numpy())) for x, y in batches]
    np.testing.assert_allclose(losses, expected, rtol=1e-4)
    assert losses[-1] < losses[0]  # it learnt something: the comparison is not between two stuck runs
    final = dict(zip(params, (p.detach().numpy() for p in model.parameters())))
    for key, value in trainer.export_params().items():
        np.testing.assert_allclose(value, final[key], rtol=1e-4, atol=1e-6, err_msg=key)
    if states:  # running means match; running variances differ by PyTorch's unbiased update (see frontend/torch.py)
        buffers = {k.replace(".", "_"): v.numpy() for k, v in model.named_buffers()}
        for key, value in trainer.export_states().items():
            if key.endswith("running_mean"):
                np.testing.assert_allclose(value, buffers[key], rtol=1e-4, atol=1e-6, err_msg=key)


def test_parameters_in_torch_order_and_names():
    model = make("cnn").eval()
    mod, params, states = _import(model, torch.zeros(2, 1, 8, 8))
    assert list(params) == [n.replace(".", "_") for n, _ in model.named_parameters()]
    assert list(states) == ["bn1_running_mean", "bn1_running_var", "bn2_running_mean", "bn2_running_var"]
    assert (mod.attrs["param_num"], mod.attrs["state_num"]) == (len(params), 4)
    np.testing.assert_array_equal(params["conv1_weight"], model.conv1.weight.detach().numpy())


def test_params_as_constants():
    model = make("mlp").eval()
    x = torch.randn(3, 12)
    mod, params, states = from_exported_program(torch.export.export(model, (x,)), keep_params_as_input=False)
    assert (params, states, len(mod["main"].params)) == ({}, {}, 1)
    np.testing.assert_allclose(relax_mlir.interpret(mod, "main", x.numpy()), model(x).detach().numpy(), rtol=1e-5,
                               atol=1e-6)


class _Unsupported(torch.nn.Module):
    def forward(self, x):
        return torch.cumprod(torch.sort(x)[0], 1) + torch.sort(x * 2)[0] + torch.fft.fft(x).real


def test_every_unsupported_op_listed_at_once():
    ep = torch.export.export(_Unsupported(), (torch.randn(2, 3),))
    with pytest.raises(UnsupportedOpsError) as info:
        from_exported_program(ep)
    message = str(info.value)
    assert "aten.sort.default (used by sort, sort_1)" in message
    assert "aten.cumprod.default (used by cumprod)" in message
    assert "aten._fft_r2c.default (used by _fft_r2c)" in message and "4 unsupported op(s)" in message
    assert set(info.value.ops) >= {"aten.sort.default", "aten.cumprod.default"}


def test_bad_argument_names_node():
    class MaxPoolIndices(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.max_pool2d(x, 2, return_indices=True)[1].float()
    ep = torch.export.export(MaxPoolIndices(), (torch.randn(1, 1, 4, 4),))
    with pytest.raises(TorchImportError, match=r"node getitem_1 .*result 1 of max_pool2d_with_indices.*max-pool"):
        from_exported_program(ep)


def test_not_an_exported_program():
    with pytest.raises(TypeError, match=r"expected a torch.export.ExportedProgram .* got Linear"):
        from_exported_program(torch.nn.Linear(2, 2))
