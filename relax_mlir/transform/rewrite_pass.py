"""What the algebraic rewrites share: a pass made of ``dpl`` patterns and rewriters, applied to every function's
bindings (``dpl.rewrite_call``), the result brought back to normal form (a rewriter may return nested calls,
``R.add(R.matmul(x, a), R.matmul(x, b))``; each becomes a binding of its own, as after ``Normalize``).

A subclass lists its rules: ``rules(func)`` returns ``(pattern, rewriter)`` pairs (the function is given so that a
rewriter can ask what a variable is bound to, or which parameters are weights). Passes that rewrite whole binding
blocks instead (``CombineParallelMatmul``, ``ToMixedPrecision``) derive from ``FunctionRewritePass``.
"""

from __future__ import annotations

from typing import Callable, Optional

from ..dpl import Pattern, rewrite_call_once, rewrite_to_fixpoint
from ..ir.expr import Constant, Expr, Function, MatchCast, SeqExpr, Var
from ..ir.struct_info import TensorStructInfo
from ..ir.visitor import ExprMutator
from .pass_infra import Pass
from .utils import free_vars

Rule = tuple[Pattern, Callable[[Expr, dict], Expr]]


class FunctionRewritePass(Pass):
    """Base of the passes that rewrite each Relax function on its own (no ``name``: not registered itself):
    ``rewrite_function(func)`` returns the function, or the same object when nothing changed; the module is then
    brought back to normal form once (new nested calls bound, struct info inferred)."""

    def rewrite_function(self, func: Function) -> Function:
        raise NotImplementedError(f"{type(self).__name__} does not define rewrite_function()")

    def transform_module(self, mod, ctx):
        out, changed = mod.copy(), False
        for name, func in mod.items():
            if isinstance(func, Function) and isinstance(func.body, SeqExpr):
                new = self.rewrite_function(func)
                if new is not func:
                    out[name], changed = new, True
        return ExprMutator(out).mutate_module(out) if changed else mod


class CallRewritePass(FunctionRewritePass):
    """Base of the passes that rewrite single bindings by pattern (no ``name``: not registered itself)."""

    def rules(self, func: Function) -> list[Rule]:
        raise NotImplementedError(f"{type(self).__name__} does not define rules()")

    def rewrite_function(self, func: Function) -> Function:
        """Every rule, round after round until nothing changes (as ``rewrite_call``), so that one run does the whole
        rewrite and a second changes nothing. Each round asks ``rules`` again, of the function as it now is: a
        rewriter that looks up bindings sees those the earlier rounds made."""
        def one_round(current: Function) -> Function:
            new = current
            for pattern, rewriter in self.rules(current):
                new = rewrite_call_once(pattern, _no_aliases(rewriter), new)
            return new

        return rewrite_to_fixpoint(one_round, func, self.name)


def _no_aliases(rewriter: Callable[[Expr, dict], Expr]) -> Callable[[Expr, dict], Expr]:
    """The rewriter, for bindings whose value is not a variable (the pattern language also matches an alias
    ``b = a`` of a matching call through ``a``; rewriting the alias would compute the value twice)."""
    return lambda expr, matches: expr if isinstance(expr, Var) else rewriter(expr, matches)


def bindings_of(func: Function) -> dict[Var, Expr]:
    """Every variable of ``func`` bound by a plain binding, to its value."""
    return {b.var: b.value for block in func.body.blocks for b in block.bindings if not isinstance(b, MatchCast)}


def static_shape(e: Expr) -> Optional[tuple[int, ...]]:
    """``e``'s shape when it is a tensor of known rank and integer sizes, else None."""
    sinfo = getattr(e, "struct_info", None)
    if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None:
        return None
    dims = tuple(sinfo.shape)
    return dims if all(isinstance(d, int) for d in dims) else None


def compile_time(e: Expr, func: Function, bound: dict[Var, Expr]) -> bool:
    """Whether ``e`` depends on weights and constants only: the parameters after the function's ``num_input``
    attribute (TVM's convention; without it every parameter is a run-time input)."""
    num_input = func.attrs.get("num_input")
    weights = set(func.params[int(num_input):]) if num_input is not None else set()
    seen: set[Var] = set()

    def known(x: Expr) -> bool:
        if isinstance(x, Constant):
            return True
        for v in free_vars(x):
            if v in seen:
                continue
            seen.add(v)
            if v in weights:
                continue
            if v not in bound or not known(bound[v]):
                return False
        return True

    return known(e)
