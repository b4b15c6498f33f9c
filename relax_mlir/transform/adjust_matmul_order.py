"""``AdjustMatmulOrder``: a product of three matrices is computed in the cheaper order, as TVM's pass of that
name (``(x @ a) @ b`` for a low-rank ``a @ b``: LoRA's weights).

    ab = R.matmul(a, b)           ->    gv = R.matmul(x, a)        when M·K·R + M·R·N < K·R·N + M·K·N
    y = R.matmul(x, ab)                 y = R.matmul(gv, b)

and the other way (``(x @ a) @ b`` to ``x @ (a @ b)``) when that is cheaper. Costs are multiply-adds from static
shapes (2-D operands; a batch of leading dimensions multiplies both orders alike); a symbolic size leaves the
product as it is. A product that depends on weights alone (``num_input``, as for ``ExpandMatmulOfSum``) is
computed once ahead of time, so it is never split up.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import op
from ..dpl import is_op, wildcard
from .rewrite_pass import CallRewritePass, bindings_of, compile_time, static_shape


def _mk(e):
    shape = static_shape(e)
    return shape[-2:] if shape is not None and len(shape) == 2 else None


@dataclass(frozen=True)
class AdjustMatmulOrder(CallRewritePass):
    """Reassociate chains of two matmuls to the order with fewer multiply-adds (TVM's ``AdjustMatmulOrder``).

    Example, applied as ``AdjustMatmulOrder()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((8, 64), "float32"), a: R.Tensor((64, 2), "float32"), b: R.Tensor((2, 64), "float32")):
                ab = R.matmul(a, b)
                y = R.matmul(x, ab)
                return y

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((8, 64), dtype="float32"),
                a: R.Tensor((64, 2), dtype="float32"),
                b: R.Tensor((2, 64), dtype="float32"),
            ) -> R.Tensor((8, 64), dtype="float32"):
                ab: R.Tensor((64, 64), dtype="float32") = R.matmul(a, b)
                gv: R.Tensor((8, 2), dtype="float32") = R.matmul(x, a)
                y: R.Tensor((8, 64), dtype="float32") = R.matmul(gv, b)
                return y
    """

    name = "AdjustMatmulOrder"

    def rules(self, func):
        bound = bindings_of(func)
        x, a, b = wildcard(), wildcard(), wildcard()
        right = is_op("relax.matmul")(a, b)
        left = is_op("relax.matmul")(x, a)

        def plain(call) -> bool:
            return call.attrs.get("out_dtype") in (None, "", "void")

        def costs(m):
            shapes = [_mk(m[x]), _mk(m[a]), _mk(m[b])]
            if None in shapes or shapes[0][1] != shapes[1][0] or shapes[1][1] != shapes[2][0]:
                return None
            (rows, k), (_, r), (_, n) = shapes
            return rows * k * r + rows * r * n, k * r * n + rows * k * n  # (x @ a) @ b, x @ (a @ b)

        def x_times_ab(expr, m):        # x @ (a @ b) -> (x @ a) @ b
            cost = costs(m)
            if cost is None or not (plain(expr) and plain(m[right])) or compile_time(m[right], func, bound):
                return expr
            return op.matmul(op.matmul(m[x], m[a]), m[b]) if cost[0] < cost[1] else expr

        def xa_times_b(expr, m):        # (x @ a) @ b -> x @ (a @ b)
            cost = costs(m)
            if cost is None or not (plain(expr) and plain(m[left])):
                return expr
            return op.matmul(m[x], op.matmul(m[a], m[b])) if cost[1] < cost[0] else expr

        return [(is_op("relax.matmul")(x, right), x_times_ab), (is_op("relax.matmul")(left, b), xa_times_b)]
