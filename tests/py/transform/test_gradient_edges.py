"""Gradient of targets that are not computed from the required variables through ops: a constant loss (zero
gradients, as for an unused parameter) and a parameter returned as it is (a gradient of ones). Both crashed inside
the pass (``KeyError``, ``min() arg is an empty sequence``); values checked by hand, interpreted and compiled."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir.script import from_source
from relax_mlir.transform import Gradient

CONSTANT_LOSS = '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((), "float32"):
        c = R.const(2.0, "float32")
        return c
'''
PARAMETER_TARGET = '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((), "float32"), y: R.Tensor((3,), "float32")):
        s = R.sum(y)
        return (s, x)
'''


def _both(mod, *args):
    return [relax_mlir.interpret(mod, "main_adjoint", *args),
            relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main_adjoint"](*args)]


def test_a_constant_loss_has_zero_gradients():
    mod = Gradient("main")(from_source(CONSTANT_LOSS))
    for value, (grad,) in _both(mod, np.arange(3, dtype=np.float32)):
        assert float(value) == 2.0
        np.testing.assert_array_equal(grad, np.zeros(3, np.float32))


@pytest.mark.parametrize("target_index, want_x, want_y", [(1, 1.0, 0.0), (0, 0.0, 1.0)])
def test_a_parameter_returned_as_the_target_has_a_gradient_of_one(target_index, want_x, want_y):
    mod = Gradient("main", target_index=target_index)(from_source(PARAMETER_TARGET))
    x, y = np.float32(5.0), np.arange(3, dtype=np.float32)
    for (s, x_out), (dx, dy) in _both(mod, np.asarray(x), y):
        assert float(s) == 3.0 and float(x_out) == 5.0
        assert float(dx) == want_x
        np.testing.assert_array_equal(dy, np.full(3, want_y, np.float32))


def test_a_backbone_that_ignores_its_weights_trains_with_zero_gradients():
    from relax_mlir.ir import BlockBuilder, TensorStructInfo as T, Var
    from relax_mlir import op
    from relax_mlir.training import SGD, MSELoss, SetupTrainer, Trainer

    x, w = Var("x", T((4, 2), "float32")), Var("w", T((2, 2), "float32"))
    bb = BlockBuilder()
    with bb.function("backbone", [x, w]):
        with bb.dataflow():
            out = bb.emit_output(op.multiply(x, x))
        bb.emit_func_output(out)
    setup = SetupTrainer(MSELoss(reduction="sum"), SGD(0.1), [T((4, 2), "float32"), T((4, 2), "float32")])
    trainer = Trainer(bb.get(), 1, setup)
    trainer.build()
    trainer.load_params([np.ones((2, 2), np.float32)])
    xs = np.arange(8, dtype=np.float32).reshape(4, 2)
    loss = trainer.update_params(xs, xs)
    np.testing.assert_allclose(float(np.asarray(loss)), float(np.sum((xs * xs - xs) ** 2)), rtol=1e-6)
    np.testing.assert_array_equal(trainer.export_params()["w"], np.ones((2, 2), np.float32))
