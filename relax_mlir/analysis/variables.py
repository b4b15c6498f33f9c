"""Variables of an expression, and what they are bound to (TVM's ``relax.analysis`` names).

* ``free_vars(e)``: the variables ``e`` uses without binding them (a function's free variables exclude its
  parameters and every variable its blocks bind);
* ``bound_vars(e)``: the variables ``e`` binds (parameters, bindings);
* ``all_vars(e)``: both;
* ``get_var2val(func)``: each variable a ``VarBinding`` binds, mapped to its value (``R.match_cast``'s variables
  are left out, as TVM does: their value is the cast, not the expression).

Lists keep the order of first appearance, each variable once (TVM returns them in a post-order walk).
"""

from __future__ import annotations

from typing import Union

from ..ir.expr import Expr, Function, Var, VarBinding
from ..ir.module import IRModule
from ..ir.visitor import ExprVisitor


class _Collector(ExprVisitor):
    def __init__(self) -> None:
        self.used: dict[Var, None] = {}
        self.bound: dict[Var, None] = {}

    def visit_var_(self, var: Var) -> None:
        self.used.setdefault(var)

    def visit_var_def_(self, var: Var) -> None:
        self.bound.setdefault(var)


def _collect(e: Expr) -> _Collector:
    if not isinstance(e, Expr):
        raise TypeError(f"expected a Relax expression (a Function, a Call, ...), got {type(e).__name__}")
    walker = _Collector()
    walker.visit_expr(e)
    return walker


def free_vars(e: Expr) -> list[Var]:
    """The variables ``e`` uses and does not bind."""
    walker = _collect(e)
    return [v for v in walker.used if v not in walker.bound]


def bound_vars(e: Expr) -> list[Var]:
    """The variables ``e`` binds: parameters and bindings' variables."""
    return list(_collect(e).bound)


def all_vars(e: Expr) -> list[Var]:
    """Every variable of ``e``, bound or free."""
    walker = _collect(e)
    return list(dict.fromkeys([*walker.bound, *walker.used]))


def get_var2val(func: Union[Function, IRModule]) -> dict[Var, Expr]:
    """Each variable a ``VarBinding`` of ``func`` (or of every function of a module) binds, mapped to its value."""
    funcs = [f for _, f in func.items()] if isinstance(func, IRModule) else [func]
    out: dict[Var, Expr] = {}
    for f in funcs:
        if not isinstance(f, Function):
            raise TypeError(f"get_var2val: expected a Function or an IRModule, got {type(f).__name__}")
        for block in f.blocks:
            for b in block.bindings:
                if isinstance(b, VarBinding):
                    out[b.var] = b.value
    return out
