"""``FuseTransposeMatmul``: ``matmul(x, permute_dims(w))`` where the permutation swaps the last two axes is grouped
into one private ``Composite`` function ``transpose_matmul_fuse`` (TVM's pass of that name, whose group TVM then
compiles to one ``NT_matmul`` kernel):

    wt = R.permute_dims(w)               ->    y = cls.fused_transpose_matmul_fuse(w, x)
    y = R.matmul(x, wt)
                                               def fused_transpose_matmul_fuse(w, x):   # {"Composite":
                                                   wt = R.permute_dims(w)              #  "transpose_matmul_fuse"}
                                                   y = R.matmul(x, wt)
                                                   return y

It is ``FuseOpsByPattern`` with one fixed pattern: the transpose is grouped only when the matmul is its only user
(a transpose used elsewhere must still be computed) and only when it swaps the last two axes of a tensor of rank 2
or more (``axes=None`` on a matrix, or ``[0, .., n-1, n-2]``); any other permutation is left alone. The backend
inlines the group again and MLIR compiles the transpose and the product as before: the grouping names the
``x @ wᵀ`` form (the form of ``nn.Linear`` weights and of the gradients ``g @ wᵀ``) for later passes and kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dpl import is_op, wildcard
from ..ir.struct_info import TensorStructInfo
from .fuse_ops_by_pattern import FuseOpsByPattern, FusionPattern, PatternCheckContext
from .pass_infra import Pass

COMPOSITE_NAME = "transpose_matmul_fuse"


def swaps_last_two_axes(transpose) -> bool:
    """Whether the ``permute_dims`` call ``transpose`` swaps its input's last two axes and keeps the others."""
    sinfo = getattr(transpose.args[0], "struct_info", None)
    if not isinstance(sinfo, TensorStructInfo) or sinfo.ndim < 2:
        return False
    n, axes = sinfo.ndim, transpose.attrs.get("axes")
    if axes is None:
        return n == 2
    return [int(a) % n for a in axes] == [*range(n - 2), n - 1, n - 2]


def _check(context: PatternCheckContext) -> bool:
    return swaps_last_two_axes(context.annotated_expr["transpose"])


def _fusion_pattern() -> FusionPattern:
    transpose = is_op("relax.permute_dims")(wildcard())
    return FusionPattern(COMPOSITE_NAME, is_op("relax.matmul")(wildcard(), transpose), {"transpose": transpose},
                         _check)


@dataclass(frozen=True)
class FuseTransposeMatmul(Pass):
    """Group ``matmul(x, permute_dims(w))`` (last two axes swapped) into a ``transpose_matmul_fuse`` composite
    function (TVM's ``FuseTransposeMatmul``).

    Example, applied as ``FuseTransposeMatmul()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((3, 4), "float32")):
                wt = R.permute_dims(w)
                y = R.matmul(x, wt)
                return y

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((2, 4), dtype="float32"),
                w: R.Tensor((3, 4), dtype="float32"),
            ) -> R.Tensor((2, 3), dtype="float32"):
                y: R.Tensor((2, 3), dtype="float32") = cls.fused_transpose_matmul_fuse(w, x)
                return y

            @R.function
            def fused_transpose_matmul_fuse(
                w: R.Tensor((3, 4), dtype="float32"),
                x: R.Tensor((2, 4), dtype="float32"),
            ) -> R.Tensor((2, 3), dtype="float32"):
                R.func_attr({"Composite": "transpose_matmul_fuse", "Primitive": True})
                wt: R.Tensor((4, 3), dtype="float32") = R.permute_dims(w)
                y: R.Tensor((2, 3), dtype="float32") = R.matmul(x, wt)
                return y
    """

    name = "FuseTransposeMatmul"

    def transform_module(self, mod, ctx):
        return FuseOpsByPattern(patterns=[_fusion_pattern()]).transform_module(mod, ctx)
