"""``Normalize``: bring every function to the normal form passes expect, as TVM's pass of that name: nested calls
are bound to variables of their own (A-normal form), missing struct info is inferred, adjacent plain blocks are
merged and empty blocks dropped.

    gv = R.add(R.exp(x), x)    ->    lv = R.exp(x)
                                     gv = R.add(lv, x)

Most constructors here already normalise (the BlockBuilder, the parser); this pass is for IR built node by node.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import IRModule
from ..ir.visitor import ExprMutator
from .pass_infra import Pass, PassContext


@dataclass(frozen=True)
class Normalize(Pass):
    """Rebuild every function through the normalising mutator (A-normal form, struct info filled in).

    Example, applied as ``Normalize()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((3,), "float32")):
                gv = R.add(x, x)
                return gv

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
                gv: R.Tensor((3,), dtype="float32") = R.add(x, x)
                return gv
    """

    name = "Normalize"
    supports_if = True

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return ExprMutator(mod).mutate_module(mod)
