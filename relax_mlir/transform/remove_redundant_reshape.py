"""``RemoveRedundantReshape``: a reshape of a reshape becomes one reshape, and a reshape to the shape its input
already has disappears, as TVM's pass of that name.

    a = R.reshape(x, (6, 4))       ->    a = R.reshape(x, (6, 4))     (dead unless used elsewhere)
    b = R.reshape(a, (24,))              b = R.reshape(x, (24,))
    c = R.reshape(b, (24,))              c = b

A reshape is redundant when its input's shape equals the target (the same sizes, symbolic ones included); the
binding then aliases the input (``CanonicalizeBindings`` and ``DeadCodeElimination`` remove what is left).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import op
from ..dpl import is_op, wildcard
from ..ir.struct_info import TensorStructInfo
from .rewrite_pass import CallRewritePass


def _same_shape(e, shape) -> bool:
    sinfo = getattr(e, "struct_info", None)
    return isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None and tuple(sinfo.shape) == tuple(shape)


@dataclass(frozen=True)
class RemoveRedundantReshape(CallRewritePass):
    """Fold chains of reshapes and drop reshapes that change nothing (TVM's ``RemoveRedundantReshape``).

    Example, applied as ``RemoveRedundantReshape()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2, 3, 4), "float32")):
                a = R.reshape(x, (6, 4))
                b = R.reshape(a, (24,))
                c = R.reshape(b, (24,))
                return c

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2, 3, 4), dtype="float32")) -> R.Tensor((24,), dtype="float32"):
                a: R.Tensor((6, 4), dtype="float32") = R.reshape(x, (6, 4))
                b: R.Tensor((24,), dtype="float32") = R.reshape(x, (24,))
                c: R.Tensor((24,), dtype="float32") = b
                return c
    """

    name = "RemoveRedundantReshape"

    def rules(self, func):
        x = wildcard()
        inner = is_op("relax.reshape")(x)
        outer = is_op("relax.reshape")(inner)
        any_reshape = is_op("relax.reshape")(wildcard())

        def fold(expr, m):
            shape = expr.attrs["shape"]
            return m[x] if _same_shape(m[x], shape) else op.reshape(m[x], shape)

        def drop(expr, m):
            arg = expr.args[0]
            return arg if _same_shape(arg, expr.attrs["shape"]) else expr

        return [(any_reshape, drop), (outer, fold)]
