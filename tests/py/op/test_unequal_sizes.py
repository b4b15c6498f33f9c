"""Sizes that can never be equal are refused at inference, as TVM refuses them (its analyzer proves ``k != k + 1``):
two symbolic sizes whose difference is a nonzero constant. Sizes that may be equal stay assumed equal (and are
checked at run time), as before."""

from __future__ import annotations

import pytest

from relax_mlir import TensorStructInfo as T, op
from relax_mlir.ir import Var, sym

K = sym.SizeVar("k")


def _v(name, shape, dtype="float32"):
    return Var(name, T(shape, dtype))


def test_matmul_refuses_a_contraction_of_k_against_k_plus_1():
    # TVM's test_matmul_infer_ty_unequal_reduction_length: matmul((3, k), (k + 1, 5)) fails inference.
    with pytest.raises(ValueError, match=r"relax.matmul: reduction dims differ: x1 \(3, k\) has k, x2 \(k \+ 1, 5\) "
                                         r"has k \+ 1"):
        op.matmul(_v("a", (3, K)), _v("b", (K + 1, 5)))
    with pytest.raises(ValueError, match=r"reduction dims differ: x1 \(2 \* k,\) has 2 \* k, x2 \(2 \* k - 2, 4\)"):
        op.matmul(_v("a", (2 * K,)), _v("b", (2 * K - 2, 4)))
    # May be equal: assumed (checked when it runs).
    assert op.matmul(_v("a", (3, K)), _v("b", (K, 5))).struct_info == T((3, 5), "float32")
    assert op.matmul(_v("a", (3, K)), _v("b", ("m", 5))).struct_info == T((3, 5), "float32")
    assert op.matmul(_v("a", (3, K)), _v("b", (4, 5))).struct_info == T((3, 5), "float32")


def test_other_size_checks_refuse_provably_unequal_sizes_too():
    with pytest.raises(ValueError, match=r"relax.concat: tensors\[1\] has shape \(k \+ 2, 3\) but tensors\[0\] has "
                                         r"\(k, 2\): dims other than axis 1 must match"):
        op.concat([_v("a", (K, 2)), _v("b", (K + 2, 3))], axis=1)
    with pytest.raises(ValueError, match=r"relax.nn.conv2d: data has k channels but weight expects k \+ 1 per group"):
        op.nn.conv2d(_v("x", (1, K, 5, 5)), _v("w", (2, K + 1, 3, 3)))
    with pytest.raises(ValueError, match=r"relax.broadcast_to: cannot broadcast \(k,\) to \(k \+ 1,\): dim 0 is k"):
        op.broadcast_to(_v("x", (K,)), (K + 1,))
    assert op.concat([_v("a", (K, 2)), _v("b", ("m", 3))], axis=1).struct_info.shape[1] == 5  # k, m: may be equal


def test_broadcasting_refuses_k_against_k_plus_1_and_keeps_k_against_1():
    # Never equal, yet either may be 1 (k = 1, k = 0): the output size is unknown, so it is refused.
    with pytest.raises(ValueError, match=r"relax.add: cannot broadcast shapes \(k,\) and \(k \+ 1,\): dims k and "
                                         r"k \+ 1 may differ or be 1"):
        op.add(_v("a", (K,)), _v("b", (K + 1,)))
    assert op.add(_v("a", (K,)), _v("b", (1,))).struct_info == T((K,), "float32")
    assert op.add(_v("a", (K + 1, 3)), _v("b", (K + 1, 1))).struct_info == T((K + 1, 3), "float32")
