"""``ir.expr.lift_scalar``: the one rule, public, by which a Python number in an elementwise op takes its partner's
dtype, shared by ``Expr``'s operators (``h * 2``) and the op constructors (``op.multiply(h, 2)``); the op
registry imported the private ``_lift`` for it."""

from __future__ import annotations

import numpy as np
import pytest

from relax_mlir import op
from relax_mlir.ir import TensorStructInfo as T, TupleStructInfo, Var
from relax_mlir.ir.expr import lift_scalar

H = Var("h", T((3,), "float16"))


@pytest.mark.parametrize("value,dtype", [(2, "float16"), (0.5, "float16"),  # a Python number: the partner's dtype
                                         (np.float32(2), "float32"), (True, "bool"),  # their own dtype
                                         (np.array([1, 2], np.int16), "int16")])
def test_a_number_beside_a_tensor(value, dtype):
    lifted = lift_scalar(value, H)
    assert lifted.struct_info.dtype == dtype
    np.testing.assert_array_equal(lifted.data, value)


def test_an_expression_is_itself_and_a_number_beside_a_non_tensor_is_r_const_s():
    assert lift_scalar(H, H) is H
    t = Var("t", TupleStructInfo([]))
    assert [lift_scalar(v, t).struct_info for v in (2, 0.5)] == [T((), "int32"), T((), "float32")]


def test_what_it_refuses():
    with pytest.raises(ValueError, match=r"R.const: 1.5 is not representable in int32"):
        lift_scalar(1.5, Var("x", T((3,), "int32")))
    with pytest.raises(TypeError, match=r"cannot use str as a Relax expression"):
        lift_scalar("2", H)


def test_operators_and_op_constructors_lift_alike():
    for call, position in ((H * 2, 1), (2 * H, 0), (op.multiply(H, 2), 1), (op.multiply(2, H), 0)):
        assert call.args[position].struct_info == T((), "float16")
        assert call.struct_info == T((3,), "float16")
