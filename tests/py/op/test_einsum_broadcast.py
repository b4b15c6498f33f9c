"""einsum's gradient when an operand's size-1 dim broadcasts against another's (NumPy's rule): each operand's
adjoint has its own shape, against central differences of the interpreted forward function."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import TensorStructInfo as T, op
from relax_mlir.ir import BlockBuilder, Var
from relax_mlir.ir.expr import Tuple, const
from relax_mlir.testing import finite_difference_gradients
from relax_mlir.transform import Gradient


@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,j->i", [(3, 1), (4,)]),  # y's j is broadcast from x's 1: y's adjoint is x's column, the same for every j
    ("ij,jk->ik", [(3, 4), (1, 5)]),  # x's j against y's 1, and y's 1 against x's 4 (summed)
    ("ij,ij->i", [(3, 1), (1, 4)]),  # each broadcasts along the other's dim
    ("...ij,...jk->...ik", [(2, 1, 3, 1), (5, 4, 2)]),  # leading and inner dims alike
    ("bii,bi->bi", [(1, 3, 3), (4, 3)])])  # a diagonal of an operand broadcast over the batch
def test_einsum_gradient_of_broadcast_operands(subscripts, shapes):
    rng = np.random.default_rng(4)
    params = [Var(f"a{i}", T(s, "float64")) for i, s in enumerate(shapes)]
    arrays = [rng.standard_normal(s) for s in shapes]
    out_shape = np.einsum(subscripts, *arrays).shape
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            e = bb.emit(op.einsum(Tuple(params), subscripts))
            weights = const(rng.standard_normal(out_shape), "float64")  # every output element weighs differently
            loss = bb.emit_output(op.sum(op.multiply(e, weights)))
        bb.emit_func_output(loss)
    forward = bb.get()
    mod = Gradient("main")(forward)
    want = finite_difference_gradients(forward, "main", arrays, list(range(len(shapes))))
    _, compiled = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main_adjoint"](*arrays)
    _, interpreted = relax_mlir.interpret(mod, "main_adjoint", *arrays)
    for grads in (compiled, interpreted):
        for g, w, s in zip(grads, want, shapes):
            assert g.shape == s
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-8)
