"""``ReorderPermuteDimsAfterConcat``: a concatenation of tensors permuted the same way becomes one permutation of
their concatenation, as TVM's pass of that name (two small transposes become one, which then may fold into what
uses it).

    pa = R.permute_dims(a, [1, 0])      ->    gv = R.concat((a, b), axis=0)
    pb = R.permute_dims(b, [1, 0])            y = R.permute_dims(gv, [1, 0])
    y = R.concat((pa, pb), axis=1)

Every field must be a ``permute_dims`` with the same axes (an omitted ``axes``, the reversal, counts as written
out); the concatenation axis is mapped through the permutation.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import op
from ..dpl import is_op, wildcard
from ..ir.expr import Call, Tuple, Var
from ..ir.struct_info import TensorStructInfo
from .rewrite_pass import CallRewritePass, bindings_of


def _axes(call: Call):
    sinfo = call.args[0].struct_info
    if not isinstance(sinfo, TensorStructInfo) or sinfo.ndim < 0:
        return None
    axes = call.attrs.get("axes")
    n = sinfo.ndim
    return tuple(a % n for a in axes) if axes is not None else tuple(reversed(range(n)))


@dataclass(frozen=True)
class ReorderPermuteDimsAfterConcat(CallRewritePass):
    """Concatenate before permuting (TVM's ``ReorderPermuteDimsAfterConcat``).

    Example, applied as ``ReorderPermuteDimsAfterConcat()``::

        @I.ir_module
        class Module:
            @R.function
            def main(a: R.Tensor((2, 3), "float32"), b: R.Tensor((2, 5), "float32")):
                pa = R.permute_dims(a, [1, 0])
                pb = R.permute_dims(b, [1, 0])
                y = R.concat((pa, pb), axis=0)
                return y

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                a: R.Tensor((2, 3), dtype="float32"),
                b: R.Tensor((2, 5), dtype="float32"),
            ) -> R.Tensor((8, 2), dtype="float32"):
                pa: R.Tensor((3, 2), dtype="float32") = R.permute_dims(a, axes=(1, 0))
                pb: R.Tensor((5, 2), dtype="float32") = R.permute_dims(b, axes=(1, 0))
                gv: R.Tensor((2, 8), dtype="float32") = R.concat((a, b), axis=1)
                y: R.Tensor((8, 2), dtype="float32") = R.permute_dims(gv, axes=(1, 0))
                return y
    """

    name = "ReorderPermuteDimsAfterConcat"

    def rules(self, func):
        fields = wildcard()
        bound = bindings_of(func)

        def rewrite(expr, m):
            tup = m[fields]
            while isinstance(tup, Var) and tup in bound:
                tup = bound[tup]
            if not isinstance(tup, Tuple) or not tup.fields:
                return expr
            calls = []
            for f in tup.fields:
                value = bound.get(f, f) if isinstance(f, Var) else f
                if not (isinstance(value, Call) and getattr(value.op, "name", "") == "relax.permute_dims"):
                    return expr
                calls.append(value)
            axes = {_axes(c) for c in calls}
            if len(axes) != 1 or None in axes:
                return expr
            (perm,) = axes
            axis = expr.attrs.get("axis", 0) % len(perm)
            inner = op.concat(Tuple([c.args[0] for c in calls]), axis=perm[axis])
            return op.permute_dims(inner, list(perm))

        return [(is_op("relax.concat")(fields), rewrite)]
