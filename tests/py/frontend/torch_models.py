"""The three models the importers are shown on (issue 13), in PyTorch: an MLP, the CNN (conv, batch norm, ReLU,
max pooling, dense) and a small transformer encoder block (embedding, multi-head attention, layer norm, GELU,
residuals), each with a function making a batch of its inputs and class labels."""

from __future__ import annotations

import torch
from torch import nn

CLASSES = 5


class MLP(nn.Sequential):
    def __init__(self) -> None:
        super().__init__(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, CLASSES))


class CNN(nn.Module):
    """conv 3x3 -> batch norm -> relu -> max pool 2x2, twice, then flatten and a dense layer (1x8x8 images)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4)
        self.conv2, self.bn2 = nn.Conv2d(4, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 2 * 2, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        x = nn.functional.max_pool2d(torch.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(torch.flatten(x, 1))


class Encoder(nn.Module):
    """Token embedding + one post-norm transformer encoder layer (2 heads, GELU) + mean pooling + dense."""

    VOCAB, SEQ = 20, 6

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(self.VOCAB, 16)
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, activation="gelu", batch_first=True)
        self.fc = nn.Linear(16, CLASSES)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.fc(self.layer(self.embed(tokens)).mean(1))


def batch(model: nn.Module, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Random inputs for ``model`` and random labels."""
    if isinstance(model, MLP):
        x = torch.randn(n, 12, generator=generator)
    elif isinstance(model, CNN):
        x = torch.randn(n, 1, 8, 8, generator=generator)
    else:
        x = torch.randint(0, Encoder.VOCAB, (n, Encoder.SEQ), generator=generator)
    return x, torch.randint(0, CLASSES, (n,), generator=generator)


def make(name: str, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return {"mlp": MLP, "cnn": CNN, "encoder": Encoder}[name]()
