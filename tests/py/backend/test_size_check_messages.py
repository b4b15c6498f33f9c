"""The runtime check of sizes an op's inference assumed equal names both sizes: the operand's and the other
operand's of the same loop dimension (it said only "another size")."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir.script import from_source

MATMUL = """
@I.ir_module
class Module:
    @R.function
    def main(x0: R.Tensor((2,), "float64"), x1: R.Tensor(("n",), "float64"), w: R.Tensor(("k", 3), "float64")):
        with R.dataflow():
            twice = R.concat((x1, x1))
            y = R.matmul(x0, twice)
            z = R.matmul(R.reshape(x1, R.shape([1, "n"])), w)
            R.output(y, z)
        return (y, z)
"""


@pytest.mark.parametrize("n,k,size,other", [(3, 3, 6, 2), (1, 5, 5, 1)])
def test_a_matmul_size_check_names_both_sizes(n, k, size, other):
    """``matmul((2,), (2 * n,))`` with n = 3 (a static size against a dynamic one), and ``(1, n) @ (k, 3)`` with
    n = 1, k = 5 (two dynamic ones)."""
    f = rm.VirtualMachine(rm.compile(from_source(MATMUL), num_threads=1))["main"]
    x0, x1, w = np.ones(2), np.ones(n), np.ones((k, 3))
    binding = "y" if 2 * n != 2 else "z"  # y is fine with n = 1, z with k = n
    with pytest.raises(ValueError, match=rf"^main: binding '{binding}': matmul: an operand's dimension \d is {size}, "
                                         rf"but another operand of the same loop dimension has size {other} \(sizes "
                                         r"the op's inference assumed equal\)$"):
        f(x0, x1, w)
