"""``ToNonDataflow``: dataflow blocks become plain binding blocks, their dataflow variables plain variables.

    with R.dataflow():                  lv = R.add(x, x)
        lv = R.add(x, x)        ->      gv = R.exp(lv)
        gv = R.exp(lv)
        R.output(gv)

TVM runs it before lowering passes that do not distinguish the two kinds of block. Adjacent plain blocks merge.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import BindingBlock, DataflowVar, Function, SeqExpr, Var
from .pass_infra import FunctionPass
from .utils import rebind, substitute, with_body


@dataclass(frozen=True)
class ToNonDataflow(FunctionPass):
    """Turn every dataflow block into a plain binding block (dataflow variables into plain variables).

    Example, applied as ``ToNonDataflow()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((3,), "float32")):
                with R.dataflow():
                    lv = R.add(x, x)
                    gv = R.exp(lv)
                    R.output(gv)
                return gv

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
                lv: R.Tensor((3,), dtype="float32") = R.add(x, x)
                gv: R.Tensor((3,), dtype="float32") = R.exp(lv)
                return gv
    """

    name = "ToNonDataflow"

    def transform_function(self, func: Function, mod, ctx) -> Function:
        if not isinstance(func.body, SeqExpr) or not func.body.blocks:
            return func
        remap: dict[Var, Var] = {}
        bindings = []
        for block in func.body.blocks:
            for b in block.bindings:
                var = b.var
                if isinstance(var, DataflowVar):
                    remap[var] = Var(var.name_hint, var.struct_info, span=var.span)
                    var = remap[var]
                value = substitute(b.value, remap)
                bindings.append(rebind(b, value, var))
        body = SeqExpr([BindingBlock(bindings)], substitute(func.body.body, remap))
        return with_body(func, body)
