"""Train a PyTorch model with relax-mlir: export it with torch.export, import it, train it here.

The CNN below is plain PyTorch. `from_exported_program` turns it into a Relax module whose `main` takes the
images, then the parameters, then the batch-norm running statistics; `SetupTrainer` adds the loss, the gradient
and the optimizer, and `Trainer` runs one compiled native function per step. PyTorch trains a copy of the same
model on the same batches alongside, so the two loss columns can be compared.

    python examples/train_torch_model.py [--epochs 3]
"""

from __future__ import annotations

import argparse
import copy

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn

from relax_mlir import TensorStructInfo
from relax_mlir.frontend.torch import from_exported_program
from relax_mlir.training import SetupTrainer, Trainer
from relax_mlir.training.loss import CrossEntropyLoss
from relax_mlir.training.optimizer import SGD

BATCH, LR = 64, 0.05


def main(epochs: int = 3) -> tuple[list[float], list[float]]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(8 * 4 * 4, 10))
    digits = load_digits()  # 1797 8x8 images, shipped with scikit-learn
    x = torch.tensor(digits.images[:, None] / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target)
    batches = [(x[i:i + BATCH], y[i:i + BATCH]) for i in range(0, len(x) - BATCH + 1, BATCH)]

    # 1. Export (torch.export) and import. params/states: NumPy arrays by argument name.
    mod, params, states = from_exported_program(torch.export.export(copy.deepcopy(model), (batches[0][0],)))

    # 2. Loss and optimizer, as PyTorch's F.cross_entropy and optim.SGD.
    logits = TensorStructInfo((BATCH, 10), "float32")
    setup = SetupTrainer(CrossEntropyLoss(reduction="mean"), SGD(LR), [logits, TensorStructInfo((BATCH,), "int64")])
    trainer = Trainer(mod, len(params), setup).build("cpu")
    trainer.load_params(params)
    trainer.load_states(states)

    # 3. Train here and in PyTorch, step by step.
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    ours, theirs = [], []
    for epoch in range(epochs):
        for xb, yb in batches:
            ours.append(float(trainer.update_params(xb.numpy(), yb.numpy())))
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            theirs.append(loss.item())
        correct = sum(int((trainer.predict(xb.numpy()).argmax(1) == yb.numpy()).sum()) for xb, yb in batches)
        print(f"epoch {epoch + 1}: loss relax-mlir {ours[-1]:.5f}  PyTorch {theirs[-1]:.5f}  "
              f"training accuracy {correct / (len(batches) * BATCH):.1%}")
    print(f"largest relative difference of the {len(ours)} losses: "
          f"{np.max(np.abs(np.subtract(ours, theirs)) / np.abs(theirs)):.1e}")
    return ours, theirs


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    main(parser.parse_args().epochs)
