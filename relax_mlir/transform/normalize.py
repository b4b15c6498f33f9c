"""``Normalize``: bring every function to the normal form passes expect, as TVM's pass of that name: nested calls
are bound to variables of their own (A-normal form), missing struct info is inferred, adjacent plain blocks are
merged and empty blocks dropped.

    gv = R.add(R.exp(x), x)    ->    lv = R.exp(x)
                                     gv = R.add(lv, x)

Most constructors here already normalise (the BlockBuilder, the parser); this pass is for IR built node by node.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.block_builder import _LEAVES
from ..ir.expr import BindingBlock, Function, If, SeqExpr, Tuple, Var, VarBinding
from ..ir.module import IRModule
from ..ir.visitor import ExprMutator
from .pass_infra import Pass, PassContext
from .utils import rebind


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
        out = ExprMutator(mod).mutate_module(mod)
        for name, func in list(out.items()):
            if isinstance(func, Function):
                body = _bind_branch_results(func.body)
                if body is not func.body:
                    out[name] = Function(func.params, body, func.ret_struct_info, func.attrs, func.is_pure,
                                         span=func.span)
        return out


def _is_leaf(expr) -> bool:
    return isinstance(expr, _LEAVES) or isinstance(expr, Tuple) and all(isinstance(f, _LEAVES) for f in expr.fields)


def _bind_branch_results(seq: SeqExpr) -> SeqExpr:
    """``seq`` with each ``R.If`` branch's result that is not a leaf (``R.add(x, x)``) bound to a variable named as
    the If's, as TVM's normaliser binds it and as the text format writes it (``y = R.add(x, x)`` in the branch),
    so that the printed module parses back to this one. Nested Ifs and local functions too."""
    blocks, changed = [], False
    for block in seq.blocks:
        bindings = []
        for b in block.bindings:
            value = getattr(b, "value", None)
            new = value
            if isinstance(value, If):
                branches = [_bind_branch_results(br) for br in (value.true_branch, value.false_branch)]
                branches = [br if _is_leaf(br.body) else _bound_result(br, b.var.name_hint) for br in branches]
                if any(x is not y for x, y in zip(branches, (value.true_branch, value.false_branch))):
                    new = If(value.cond, *branches, span=value.span)
            elif isinstance(value, Function):
                body = _bind_branch_results(value.body)
                if body is not value.body:
                    new = Function(value.params, body, value.ret_struct_info, value.attrs, value.is_pure,
                                   span=value.span)
            changed |= new is not value
            bindings.append(b if new is value else rebind(b, new))
        blocks.append(type(block)(bindings))
    return SeqExpr(blocks, seq.body, span=seq.span) if changed else seq


def _bound_result(branch: SeqExpr, name: str) -> SeqExpr:
    var = Var(name, branch.body.struct_info, span=branch.body.span)
    tail = [VarBinding(var, branch.body, span=branch.body.span)]
    blocks = list(branch.blocks)
    if blocks and type(blocks[-1]) is BindingBlock:
        blocks[-1] = BindingBlock(list(blocks[-1].bindings) + tail)
    else:
        blocks.append(BindingBlock(tail))
    return SeqExpr(blocks, var, span=branch.span)
