"""An elementwise op that reads its initial value (``parallel_inits.py``): MLIR 22's elementwise fusion kept it as
an output of its consumer written once per iteration of the consumer's summed loop, accumulating; einsum ``i->i``
read by a contraction came out squared, and so did the gradient of a diagonal einsum (found by a bug hunt)."""

from __future__ import annotations

import numpy as np

import relax_mlir as rm
from relax_mlir.backend.runtime import compile_module
from relax_mlir.interpreter import interpret
from relax_mlir.script import from_source
from relax_mlir.transform import Gradient

# ``out + x`` on zeros (every loop parallel), then read along the summed axis of a vector-matrix product.
READS_ITS_ZEROS = """
#id = affine_map<(i) -> (i)>
func.func @main(%w: tensor<3xf64>, %m: tensor<3x3xf64>) -> tensor<3xf64> {
  %zero = arith.constant 0.0 : f64
  %e = tensor.empty() : tensor<3xf64>
  %z = linalg.fill ins(%zero : f64) outs(%e : tensor<3xf64>) -> tensor<3xf64>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%w : tensor<3xf64>) outs(%z : tensor<3xf64>) {
  ^bb0(%x: f64, %o: f64):
    %s = arith.addf %o, %x : f64
    linalg.yield %s : f64
  } -> tensor<3xf64>
  %r = linalg.generic {indexing_maps = [affine_map<(j, i) -> (i)>, affine_map<(j, i) -> (i, j)>,
                                        affine_map<(j, i) -> (j)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%a, %m : tensor<3xf64>, tensor<3x3xf64>) outs(%z : tensor<3xf64>) {
  ^bb0(%x: f64, %y: f64, %o: f64):
    %p = arith.mulf %x, %y : f64
    %s = arith.addf %o, %p : f64
    linalg.yield %s : f64
  } -> tensor<3xf64>
  return %r : tensor<3xf64>
}
"""

W = np.array([1.0, 2.0, 3.0])
M = np.arange(9, dtype=np.float64).reshape(3, 3) - 4


def test_an_elementwise_op_reading_its_zeros_fuses_into_a_contraction():
    np.testing.assert_allclose(compile_module(READS_ITS_ZEROS)["main"](W, M), W @ M, rtol=1e-15)


DIAGONAL = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 3), "float64"), w: R.Tensor((3,), "float64")):
        a = R.einsum((x,), "ii->i")
        s = R.sum(R.multiply(a, w))
        return s

    @R.function
    def identity_then_contract(w: R.Tensor((3,), "float64"), m: R.Tensor((3, 3), "float64")):
        lv = R.einsum((w,), "i->i")
        r = R.einsum((lv, m), "i,ij->j")
        return r

    @R.function
    def identity(w: R.Tensor((3,), "float64")):
        lv = R.einsum((w,), "i->i")
        return lv
"""


def test_an_identity_einsum_read_by_a_contraction_and_a_diagonal_gradient():
    mod = Gradient("main")(from_source(DIAGONAL))
    vm = rm.VirtualMachine(rm.compile(mod))
    np.testing.assert_allclose(vm["identity_then_contract"](W, M), W @ M, rtol=1e-15)
    x = np.arange(9, dtype=np.float64).reshape(3, 3)
    _, (grad_x, grad_w) = vm["main_adjoint"](x, W)
    np.testing.assert_array_equal(grad_x, np.diag(W))  # d/dx sum(diag(x) * w) = diag(w), by hand
    np.testing.assert_array_equal(grad_w, np.diag(x))
    np.testing.assert_array_equal(grad_x, interpret(mod, "main_adjoint", x, W)[1][0])


def test_an_identity_einsum_keeps_negative_zero():
    mod = from_source(DIAGONAL)
    w = np.array([-0.0, 1.0, -2.0])
    got = rm.VirtualMachine(rm.compile(mod))["identity"](w)
    assert np.signbit(got).tolist() == np.signbit(np.einsum("i->i", w)).tolist() == [True, False, True]
