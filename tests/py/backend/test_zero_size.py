"""Static 0-size dims through the lowerings that insert one tensor into another (``tensor.insert_slice``):
MLIR's verifier refuses a static offset into a 0-size dim (``offset 0 is out-of-bounds: 0 >= 0``), so an insert
that writes nothing is the destination itself (``legalize/core.py: writes_nothing``). Values against NumPy and
hand-derived ones (an empty batch contributes nothing: a weight's gradient is zeros)."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import BlockBuilder, TensorStructInfo, Var, op
from relax_mlir.ir.expr import Tuple
from relax_mlir.transform import Gradient


def _compiled(shapes, call, grad=False):
    """``main(params) = call(*params)`` (or the ``main_adjoint`` of its sum), compiled; with its function name."""
    params = [Var(f"a{i}", TensorStructInfo(s, "float32")) for i, s in enumerate(shapes)]
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit(call(*params))
            gv = bb.emit_output(op.sum(out) if grad else out)
        bb.emit_func_output(gv)
    mod = Gradient("main")(bb.get()) if grad else bb.get()
    name = "main_adjoint" if grad else "main"
    return rm.VirtualMachine(rm.compile(mod, num_threads=1))[name]


@pytest.mark.parametrize("shapes,axis", [([(0, 4), (0, 2)], 1), ([(2, 0), (2, 0), (2, 3)], 1), ([(0, 3), (0, 3)], 0)])
def test_concat_of_empty_pieces(shapes, axis):
    run = _compiled(shapes, lambda *xs: op.concat(Tuple(list(xs)), axis=axis))
    arrays = [np.arange(np.prod(s), dtype=np.float32).reshape(s) for s in shapes]
    got = run(*arrays)
    want = np.concatenate(arrays, axis=axis)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_conv2d_transpose_of_an_empty_batch():
    run = _compiled([(0, 2, 5, 5), (2, 3, 3, 3)], lambda x, w: op.nn.conv2d_transpose(x, w, strides=(2, 2)))
    got = run(np.zeros((0, 2, 5, 5), np.float32), np.ones((2, 3, 3, 3), np.float32))
    assert got.shape == (0, 3, 11, 11)  # (5 - 1) * 2 + 3


@pytest.mark.parametrize("x_shape,w_shape,conv", [((0, 2, 5, 5), (3, 2, 3, 3), op.nn.conv2d),
                                                  ((0, 2, 5), (3, 2, 3), op.nn.conv1d)])
def test_convolution_gradient_of_an_empty_batch(x_shape, w_shape, conv):
    """The data gradient is a transposed convolution (its input dilated by an insert) of an empty adjoint."""
    run = _compiled([x_shape, w_shape], conv, grad=True)
    loss, (dx, dw) = run(np.zeros(x_shape, np.float32), np.ones(w_shape, np.float32))
    assert float(loss) == 0.0 and dx.shape == x_shape
    np.testing.assert_array_equal(dw, np.zeros(w_shape, np.float32))
