"""The comparison both importers' tests make: a model trained by PyTorch's own loop and the imported module
trained by a ``Trainer`` from the same initial weights, batches and optimizer (SGD with momentum and weight decay,
mean cross-entropy). Float32 losses must agree step by step within a relative 1e-4, the final parameters within a
relative 1e-4 (plus 1e-6 absolute) and the running means of batch norms likewise. (Running variances differ: PyTorch
updates them with the unbiased batch variance, Relax's batch norm with the biased one; see frontend/torch.py.)"""

from __future__ import annotations

import numpy as np
import torch

from relax_mlir.frontend.common import Names
from relax_mlir.ir import TensorStructInfo
from relax_mlir.training import SetupTrainer, Trainer
from relax_mlir.training.loss import CrossEntropyLoss
from relax_mlir.training.optimizer import MomentumSGD

LR, MOMENTUM, WD = 0.05, 0.9, 0.01


def torch_training(model: torch.nn.Module, batches) -> list[float]:
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def imported_training(mod, params, states, batches) -> Trainer:
    """Train the imported module on ``batches``; returns the trainer (its ``losses`` attribute: one per step)."""
    ret = mod["main"].ret_struct_info
    pred = ret.fields[0] if states else ret
    setup = SetupTrainer(CrossEntropyLoss("mean"), MomentumSGD(LR, MOMENTUM, weight_decay=WD),
                         [pred, TensorStructInfo((len(batches[0][1]),), "int64")])
    trainer = Trainer(mod, len(params), setup).build("cpu")
    trainer.load_params(params)
    if states:
        trainer.load_states(states)
    trainer.losses = [float(trainer.update_params(x.numpy(), y.numpy())) for x, y in batches]
    return trainer


def assert_same_training(model: torch.nn.Module, imported, batches) -> None:
    """``model`` (untrained) and ``imported`` (``mod, params, states`` made from it) train alike on ``batches``."""
    trainer = imported_training(*imported, batches)
    expected = torch_training(model, batches)
    np.testing.assert_allclose(trainer.losses, expected, rtol=1e-4)
    assert trainer.losses[-1] < trainer.losses[0]  # it learnt: the comparison is not between two stuck runs
    names = Names()
    final = {names(k): v.detach().numpy() for k, v in model.named_parameters()}
    got = trainer.export_params()
    assert set(got) == set(final)
    for key, value in got.items():
        np.testing.assert_allclose(value, final[key], rtol=1e-4, atol=1e-6, err_msg=key)
    buffers = {k.replace(".", "_"): v.numpy() for k, v in model.named_buffers()}
    for key, value in trainer.export_states().items():
        if key.endswith("running_mean"):
            np.testing.assert_allclose(value, buffers[key], rtol=1e-4, atol=1e-6, err_msg=key)


def training_batches(model: torch.nn.Module, generator: torch.Generator, steps: int, size: int) -> list:
    """``steps`` batches cycling over 4 random ones: random labels the model can learn, so the loss falls."""
    from .torch_models import batch

    pool = [batch(model, size, generator) for _ in range(4)]
    return [pool[i % len(pool)] for i in range(steps)]


def perturb(model: torch.nn.Module, generator: torch.Generator, example: torch.Tensor) -> None:
    """Move every parameter and running statistic off its initial value (ones, zeros): exporters merge equal
    initializers, and a test on fresh weights would not see a swapped argument."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=generator))
        model.train()(example)
