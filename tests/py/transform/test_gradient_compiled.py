"""Gradients of whole models, compiled through MLIR, agree with the interpreter (and so, by
test_gradient_models / test_decompose_ops, with finite differences). Everything in float64: the compiled code
and the interpreter differ only in summation order, about 1e-15 relative; rtol 1e-9 leaves room for it."""

from __future__ import annotations

import numpy as np

from relax_mlir import VirtualMachine, compile, interpret, transform

from .test_decompose_ops import cnn_loss_module
from .test_gradient_models import mlp_loss_module


def _same(compiled, interpreted, where=""):
    if isinstance(interpreted, tuple):
        assert isinstance(compiled, tuple) and len(compiled) == len(interpreted), where
        for i, (c, r) in enumerate(zip(compiled, interpreted)):
            _same(c, r, f"{where}[{i}]")
        return
    np.testing.assert_allclose(compiled, interpreted, rtol=1e-9, atol=1e-12, err_msg=where)


def test_mlp_gradient_compiled():
    mod, params = mlp_loss_module()
    after = transform.Gradient("loss", require_grads=params)(mod)
    rng = np.random.default_rng(0)
    args = [rng.normal(size=(4, 5))] + [rng.normal(size=tuple(p.struct_info.shape)) for p in params] + \
        [rng.integers(0, 3, size=4)]
    vm = VirtualMachine(compile(after))
    _same(vm["loss_adjoint"](*args), interpret(after, "loss_adjoint", *args))


def test_cnn_gradient_after_decomposition_compiled():
    mod, _ = cnn_loss_module()
    decomposed = transform.DecomposeOpsForTraining("loss")(mod)
    params = decomposed["loss"].params[1:5]
    after = transform.Gradient("loss", require_grads=params)(decomposed)
    rng = np.random.default_rng(5)
    args = ([rng.normal(size=(4, 2, 6, 6))] + [rng.normal(size=tuple(p.struct_info.shape)) for p in params]
            + [np.zeros(3), np.ones(3), rng.integers(0, 5, size=4)])
    vm = VirtualMachine(compile(after))
    _same(vm["loss_adjoint"](*args), interpret(after, "loss_adjoint", *args))
