"""Rewriting the calls of module functions when a pass changes their signatures (shared by the passes that drop,
expand or bundle parameters and outputs)."""

from __future__ import annotations

from typing import Callable, Mapping

from ..ir.expr import Call, Expr, GlobalVar
from ..ir.module import IRModule
from ..ir.visitor import ExprMutator


class _CallSiteRewriter(ExprMutator):
    def __init__(self, mod: IRModule, rewrite_args: Mapping[str, Callable[[list], list]]):
        super().__init__(mod)
        self.rewrite_args = rewrite_args

    def visit_call_(self, call: Call) -> Expr:
        new = super().visit_call_(call)
        if isinstance(new.op, GlobalVar) and new.op.name_hint in self.rewrite_args:
            gvar = GlobalVar(new.op.name_hint, self.mod[new.op.name_hint].struct_info)
            return Call(gvar, self.rewrite_args[new.op.name_hint](list(new.args)), new.attrs, span=new.span)
        return new


def rewrite_call_sites(mod: IRModule, rewrite_args: Mapping[str, Callable[[list], list]]) -> IRModule:
    """``mod`` (whose functions already have their new signatures) with the argument list of every call of a
    function named in ``rewrite_args`` passed through its rewrite; results are re-inferred."""
    if not rewrite_args:
        return mod
    return _CallSiteRewriter(mod, rewrite_args).mutate_module(mod)
