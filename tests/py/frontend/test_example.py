"""examples/train_torch_model.py runs, and its two loss columns (relax-mlir's, PyTorch's) agree."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

pytest.importorskip("torch")

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "train_torch_model.py"


def test_example_trains_like_pytorch(capsys):
    spec = importlib.util.spec_from_file_location("train_torch_model", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ours, theirs = module.main(epochs=1)
    assert len(ours) == 28 and ours[-1] < ours[0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-4)
    assert "epoch 1: loss relax-mlir" in capsys.readouterr().out
