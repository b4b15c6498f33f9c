"""Integer and boolean values carry no gradient, so Gradient leaves them off the differentiable path, even in a
tuple beside a float value the target reads. It used to count such a field as on the path and refuse the op that
made it ("relax.argmax is not differentiable"), so ``torch.topk(...).values`` (``R.topk`` values and indices, which
DecomposeOpsForTraining turns into a tuple of a gather and an integer argsort slice) could not be trained.
Gradients are checked against hand-derived ones, interpreted and compiled."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import transform
from relax_mlir.ir import Tuple
from relax_mlir.script import from_source

ARGMAX_BESIDE = '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 6), "float64")) -> R.Tensor((), "float64"):
        with R.dataflow():
            t = (R.multiply(x, x), R.argmax(x, axis=1))
            v = t[0]
            s = R.sum(v)
            R.output(s)
        return s
'''
TOPK_VALUES = '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 6), "float64")) -> R.Tensor((), "float64"):
        with R.dataflow():
            t = R.topk(x, 3, axis=-1, ret_type="both")
            v = t[0]
            w = R.multiply(v, v)
            s = R.sum(w)
            R.output(s)
        return s
'''
# The integer path (argmax, cast back to float) adds nothing to the gradient: it is piecewise constant.
ARGMAX_CAST_TO_FLOAT = '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 6), "float64")) -> R.Tensor((), "float64"):
        with R.dataflow():
            i = R.astype(R.argmax(x, axis=1), "float64")
            y = R.multiply(x, R.expand_dims(i, 1))
            s = R.sum(y)
            R.output(s)
        return s
'''


def _x() -> np.ndarray:
    return np.random.default_rng(0).permutation(24).reshape(4, 6) / 7.0 - 1.5  # distinct: no ties in topk


def _top3_mask(x: np.ndarray) -> np.ndarray:
    mask = np.zeros_like(x)
    np.put_along_axis(mask, np.argsort(-x, axis=1)[:, :3], 1.0, axis=1)
    return mask


def _gradients(mod, x):
    after = transform.Gradient("main")(mod)
    interpreted = relax_mlir.interpret(after, "main_adjoint", x)
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(after))["main_adjoint"](x)
    return [(float(loss), grad) for loss, (grad,) in (interpreted, compiled)]


@pytest.mark.parametrize("decompose", [False, True], ids=["as-is", "decomposed-for-training"])
@pytest.mark.parametrize("src, loss, grad", [
    (ARGMAX_BESIDE, lambda x: np.sum(x * x), lambda x: 2 * x),
    (TOPK_VALUES, lambda x: np.sum(x * x * _top3_mask(x)), lambda x: 2 * x * _top3_mask(x)),
    (ARGMAX_CAST_TO_FLOAT, lambda x: np.sum(x * np.argmax(x, 1)[:, None]),
     lambda x: np.broadcast_to(np.argmax(x, 1)[:, None], x.shape).astype(np.float64)),
], ids=["argmax-beside", "topk-values", "argmax-cast-to-float"])
def test_integer_values_are_off_the_path(src, loss, grad, decompose):
    mod = from_source(src)
    if decompose:  # topk becomes (gather_elements(x, idx), astype(idx)) with idx an argsort slice
        mod = transform.DecomposeOpsForTraining()(mod)
    x = _x()
    for got_loss, got_grad in _gradients(mod, x):
        np.testing.assert_allclose(got_loss, loss(x), rtol=1e-12)
        np.testing.assert_allclose(got_grad, grad(x), rtol=1e-12, atol=1e-12)


def test_the_decomposed_topk_keeps_its_integer_field_in_the_tuple():
    # What the fix is about: a Tuple binding whose second field is made by an op without a gradient.
    mod = transform.DecomposeOpsForTraining()(from_source(TOPK_VALUES))
    assert "R.argsort" in mod.script() and "R.gather_elements" in mod.script()
    tuples = [b for b in mod["main"].blocks[0].bindings if isinstance(b.value, Tuple)]
    assert tuples and tuples[0].value.fields[1].struct_info.dtype.startswith("int")
