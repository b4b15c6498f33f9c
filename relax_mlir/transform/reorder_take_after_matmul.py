"""``ReorderTakeAfterMatmul``: ``matmul(x, take(w, idx, axis=-1))`` becomes ``take(matmul(x, w), idx, axis=-1)``,
as TVM's pass of that name: the columns are picked from the product instead of from the weight, so the weight is
used as it is (in TVM, for mixture-of-experts and LoRA weights chosen per batch).

    wi = R.take(w, idx, axis=1)       ->    wi = R.take(w, idx, axis=1)     (dead unless used elsewhere)
    y = R.matmul(x, wi)                     gv = R.matmul(x, w)
                                            y = R.take(gv, idx, axis=1)

Only for a 2-D weight, 1-D indices and the take on the weight's last axis (the product's columns).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import op
from ..dpl import is_op, wildcard
from ..ir.struct_info import TensorStructInfo
from .rewrite_pass import CallRewritePass


def _ndim(e) -> int:
    sinfo = getattr(e, "struct_info", None)
    return sinfo.ndim if isinstance(sinfo, TensorStructInfo) else -1


@dataclass(frozen=True)
class ReorderTakeAfterMatmul(CallRewritePass):
    """Move a take of a weight's columns after the matmul (TVM's ``ReorderTakeAfterMatmul``).

    Example, applied as ``ReorderTakeAfterMatmul()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((4, 8), "float32"), idx: R.Tensor((3,), "int64")):
                wi = R.take(w, idx, axis=1)
                y = R.matmul(x, wi)
                return y

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((2, 4), dtype="float32"),
                w: R.Tensor((4, 8), dtype="float32"),
                idx: R.Tensor((3,), dtype="int64"),
            ) -> R.Tensor((2, 3), dtype="float32"):
                wi: R.Tensor((4, 3), dtype="float32") = R.take(w, idx, axis=1)
                gv: R.Tensor((2, 8), dtype="float32") = R.matmul(x, w)
                y: R.Tensor((2, 3), dtype="float32") = R.take(gv, idx, axis=1)
                return y
    """

    name = "ReorderTakeAfterMatmul"

    def rules(self, func):
        x, w, idx = wildcard(), wildcard(), wildcard()
        taken = is_op("relax.take")(w, idx)

        def rewrite(expr, m):
            weight, indices, take = m[w], m[idx], m[taken]
            if _ndim(weight) != 2 or _ndim(indices) != 1 or _ndim(m[x]) < 1:
                return expr
            if take.attrs.get("axis") not in (1, -1):
                return expr
            product = op.matmul(m[x], weight, out_dtype=expr.attrs.get("out_dtype"))
            return op.take(product, indices, axis=_ndim(product) - 1, mode=take.attrs.get("mode", "fast"))

        return [(is_op("relax.matmul")(x, taken), rewrite)]
