"""``LambdaLift``: every local function (an ``@R.function`` defined inside another) becomes a function of the
module, as TVM's pass of that name:

    def main(x, w):                              def main(x, w):
        @R.function                      ->          a = cls.main_scale(w, x)
        def scale(y):                                return a
            z = R.multiply(y, w)
            return z                             def main_scale(w, y):     # the captured w first
        a = scale(x)                                 z = R.multiply(y, w)
        return a                                     return z

The lifted function is named ``<enclosing>_<local>`` (``_1``, ``_2``, ... when taken) and keeps the local one's
attributes and purity. The enclosing function's variables it reads (its captures) become its leading parameters,
in order of first use, and every call ``scale(x)`` becomes ``cls.main_scale(w, x)``. Local functions nested in
local functions are lifted innermost first, so a capture can pass through several levels; a local function calling
an earlier one captures what that one captures. A local function used as a value (returned, put in a tuple)
would need a function object (TVM's ``make_closure``), which this IR and its text format do not have: the pass
refuses it with the function named, as it refuses a local function that calls itself. ``relax_mlir.compile`` runs this pass itself when a module has local
functions (MLIR receives module functions only).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.block_builder import call_return_struct_info
from ..ir.expr import Call, Expr, Function, GlobalVar, If, SeqExpr, Var, VarBinding
from ..ir.module import IRModule
from ..ir.visitor import ExprMutator, post_order_visit
from .pass_infra import Pass
from .utils import rebind, substitute, unique_function_name


class LambdaLiftError(ValueError):
    """A local function that cannot become a module function (a function used as a value, recursion)."""


def has_local_functions(mod: IRModule) -> bool:
    """Whether any function of ``mod`` defines a function inside it."""
    found = []
    for _, func in mod.items():
        if isinstance(func, Function):
            post_order_visit(func.body, lambda e: found.append(e) if isinstance(e, Function) else None)
    return bool(found)


@dataclass(frozen=True)
class LambdaLift(Pass):
    """Lift local functions to module functions, their captured variables as leading parameters (TVM's
    ``LambdaLift``).

    Example, applied as ``LambdaLift()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((4,), "float32"), w: R.Tensor((4,), "float32")):
                @R.function
                def scale(y: R.Tensor((4,), "float32")):
                    z = R.multiply(y, w)
                    return z
                a = scale(x)
                return a

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((4,), dtype="float32"),
                w: R.Tensor((4,), dtype="float32"),
            ) -> R.Tensor((4,), dtype="float32"):
                a: R.Tensor((4,), dtype="float32") = cls.main_scale(w, x)
                return a

            @R.function
            def main_scale(
                w: R.Tensor((4,), dtype="float32"),
                y: R.Tensor((4,), dtype="float32"),
            ) -> R.Tensor((4,), dtype="float32"):
                z: R.Tensor((4,), dtype="float32") = R.multiply(y, w)
                return z
    """

    name = "LambdaLift"
    supports_if = True

    def transform_module(self, mod, ctx):
        if not has_local_functions(mod):
            return mod
        out = mod.copy()
        for name, func in mod.items():
            if isinstance(func, Function) and isinstance(func.body, SeqExpr):
                out[name] = _Lifter(out).lift(func, name, {})
        return out


class _Lifter:
    def __init__(self, out: IRModule):
        self.out = out

    def lift(self, func: Function, prefix: str, outer: dict) -> Function:
        """``func`` with its local functions (and theirs) moved into the module; ``outer`` maps the enclosing
        functions' lifted locals to (GlobalVar, captures)."""
        return Function(func.params, self.lift_seq(func.body, prefix, dict(outer)), func.ret_struct_info,
                        func.attrs, func.is_pure, span=func.span)

    def lift_seq(self, seq: SeqExpr, prefix: str, lifted: dict) -> SeqExpr:
        """``seq``'s local functions lifted and their calls rewritten, an ``R.If``'s branches each in a scope of
        their own (a function a branch defines is that branch's)."""
        blocks = []
        for block in seq.blocks:
            bindings = []
            for b in block.bindings:
                if isinstance(b, VarBinding) and isinstance(b.value, Function):
                    lifted[b.var] = self.lift_one(b.var, b.value, f"{prefix}_{b.var.name_hint}", lifted)
                    continue
                if isinstance(b, VarBinding) and isinstance(b.value, If):
                    cond = _Calls(lifted, prefix).visit_expr(b.value.cond)
                    value = If(cond, self.lift_seq(b.value.true_branch, prefix, dict(lifted)),
                               self.lift_seq(b.value.false_branch, prefix, dict(lifted)), span=b.value.span)
                    bindings.append(rebind(b, value))
                    continue
                bindings.append(_Calls(lifted, prefix).rewrite_binding(b))
            blocks.append(type(block)(bindings))
        return SeqExpr(blocks, _Calls(lifted, prefix).visit_expr(seq.body), span=seq.span)

    def lift_one(self, var: Var, local: Function, name: str, lifted: dict) -> tuple[GlobalVar, list[Var]]:
        inner = self.lift(local, name, lifted)
        captured = _captures(inner)
        if var in captured:
            raise LambdaLiftError(f"LambdaLift: local function {var.name_hint!r} calls itself; recursive local "
                                  "functions are not supported (define it as a module function)")
        params = [Var(v.name_hint, v.struct_info, span=v.span) for v in captured]
        body = _substitute_function_body(inner.body, dict(zip(captured, params)))
        fn = Function(params + list(inner.params), body, inner.ret_struct_info, inner.attrs, inner.is_pure,
                      span=local.span)
        unique = unique_function_name(name, self.out)
        self.out[unique] = fn
        return GlobalVar(unique, fn.struct_info), captured


def _bound(seq: SeqExpr, into: set) -> set:
    """The variables ``seq`` binds, in an ``R.If``'s branches too."""
    for block in seq.blocks:
        for b in block.bindings:
            into.add(b.var)
            if isinstance(b, VarBinding) and isinstance(b.value, If):
                _bound(b.value.true_branch, into)
                _bound(b.value.false_branch, into)
    return into


def _captures(func: Function) -> list[Var]:
    """The variables ``func`` reads but does not define, in order of first use."""
    defined = _bound(func.body, set(func.params))
    seen: list[Var] = []
    post_order_visit(func.body, lambda e: seen.append(e) if isinstance(e, Var) and e not in defined
                     and e not in seen else None)
    return seen


def _substitute_function_body(body: SeqExpr, remap: dict) -> SeqExpr:
    """``body`` with the variables of ``remap`` replaced in every binding and the result."""
    blocks = []
    for block in body.blocks:
        bindings = []
        for b in block.bindings:
            value = substitute(b.value, remap)
            bindings.append(b if value is b.value else rebind(b, value))
        blocks.append(type(block)(bindings))
    return SeqExpr(blocks, substitute(body.body, remap), span=body.span)


class _Calls(ExprMutator):
    """Calls of lifted local functions become calls of the module functions, with the captures first."""

    def __init__(self, lifted: dict, where: str):
        super().__init__()
        self.lifted, self.where = lifted, where

    def rewrite_binding(self, b):
        value = self.visit_expr(b.value)
        return b if value is b.value else rebind(b, value)

    def visit_call_(self, call: Call) -> Expr:
        if isinstance(call.op, Var) and call.op in self.lifted:
            gvar, captured = self.lifted[call.op]
            args = [*captured, *(self.visit_expr(a) for a in call.args)]
            # Inferred again: the captures now bind sizes the local call could not (its erased result, a closure's
            # size, is the enclosing function's again), and well_formed infers the new call so.
            sinfo = call_return_struct_info(gvar.name_hint, gvar.struct_info, [a.struct_info for a in args])
            return Call(gvar, args, {}, sinfo, span=call.span)
        return super().visit_call_(call)

    def visit_var_(self, var: Var) -> Expr:
        if var in self.lifted:
            raise LambdaLiftError(f"LambdaLift: {self.where}: local function {var.name_hint!r} is used as a value "
                                  "(returned, or put in a tuple), not only called; a function value needs a closure "
                                  "object, which this IR does not have")
        return var


__all__ = ["LambdaLift", "LambdaLiftError", "has_local_functions"]
