"""``ExpandMatmulOfSum``: ``matmul(x, a + b)`` becomes ``matmul(x, a) + matmul(x, b)``, as TVM's pass of that
name (for LoRA: ``matmul(x, base + lora_a @ lora_b)`` splits into a base product and a low-rank one, which
``AdjustMatmulOrder`` then computes as ``(x @ lora_a) @ lora_b``).

    s = R.add(a, b)                      ->    s = R.add(a, b)          (dead unless used elsewhere)
    y = R.matmul(x, s)                         gv = R.matmul(x, a)
                                               gv_1 = R.matmul(x, b)
                                               y = R.add(gv, gv_1)

Only when ``a`` and ``b`` have the same shape and dtype (a broadcast operand would change what ``matmul`` means),
and not when the sum depends on weights alone (the parameters after the function's ``num_input`` attribute, TVM's
convention): a sum of weights is computed once, ahead of time, and the expansion would only double the products.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import op
from ..dpl import is_op, wildcard
from ..ir.structural_equal import structural_equal
from .rewrite_pass import CallRewritePass, bindings_of, compile_time


@dataclass(frozen=True)
class ExpandMatmulOfSum(CallRewritePass):
    """Distribute a matmul over a sum on its right (TVM's ``ExpandMatmulOfSum``).

    Example, applied as ``ExpandMatmulOfSum()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2, 4), "float32"), a: R.Tensor((4, 3), "float32"), b: R.Tensor((4, 3), "float32")):
                s = R.add(a, b)
                y = R.matmul(x, s)
                return y

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((2, 4), dtype="float32"),
                a: R.Tensor((4, 3), dtype="float32"),
                b: R.Tensor((4, 3), dtype="float32"),
            ) -> R.Tensor((2, 3), dtype="float32"):
                s: R.Tensor((4, 3), dtype="float32") = R.add(a, b)
                gv: R.Tensor((2, 3), dtype="float32") = R.matmul(x, a)
                gv_1: R.Tensor((2, 3), dtype="float32") = R.matmul(x, b)
                y: R.Tensor((2, 3), dtype="float32") = R.add(gv, gv_1)
                return y
    """

    name = "ExpandMatmulOfSum"

    def rules(self, func):
        x, a, b = wildcard(), wildcard(), wildcard()
        total = is_op("relax.add")(a, b)
        bound = bindings_of(func)

        def rewrite(expr, m):
            lhs, rhs, s = m[a], m[b], m[total]
            same = structural_equal(lhs.struct_info, rhs.struct_info) and structural_equal(
                lhs.struct_info, s.struct_info)
            if not same or compile_time(s, func, bound):
                return expr
            out_dtype = expr.attrs.get("out_dtype")
            return op.add(op.matmul(m[x], lhs, out_dtype=out_dtype), op.matmul(m[x], rhs, out_dtype=out_dtype))

        return [(is_op("relax.matmul")(x, total), rewrite)]
