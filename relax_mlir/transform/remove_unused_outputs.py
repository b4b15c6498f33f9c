"""``RemoveUnusedOutputs``: an internal function that returns a tuple stops returning the fields no caller reads,
as TVM's pass.

    def helper(x):                              def helper(x):
        return (R.exp(x), R.sin(x))     ->          return (R.exp(x),)
    ... t = cls.helper(a); u = t[0] ...         ... t = cls.helper(a); u = t[0] ...

Applies when the function's result is a tuple written out and every call's result is only read through tuple
items (a caller using the whole tuple keeps every field). The items are renumbered; DeadCodeElimination then drops
what computed the removed fields. Entry functions (see ``utils.private_functions``) keep their results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..ir.expr import Call, Expr, Function, GlobalVar, SeqExpr, Tuple, TupleGetItem, Var
from ..ir.module import IRModule
from ..ir.visitor import ExprMutator, ExprVisitor
from .pass_infra import Pass, PassContext
from .utils import private_functions


def used_fields(mod: IRModule, name: str) -> Optional[set[int]]:
    """The result fields of ``name`` its callers read, or None if some caller uses a result whole."""
    calls = _CallResults(name)
    calls.visit_module(mod)
    results = calls.results
    fields: set[int] = set()
    whole = calls.whole

    def look(e: Expr) -> None:
        nonlocal whole
        if isinstance(e, TupleGetItem) and e.tuple_value in results:
            fields.add(e.index)
        elif isinstance(e, Var) and e in results:
            whole = True

    for _, func in mod.items():
        _visit_uses(func, look)
    return None if whole else fields


class _CallResults(ExprVisitor):
    """The variables bound to a call of ``name``, in every function and local function (``_Renumber`` renumbers
    the items read from them wherever they are). ``whole`` is set when ``name`` appears anywhere else: a call
    that is not a binding's whole value, or the function passed as a value; its result may then be used whole."""

    def __init__(self, name: str):
        self.name, self.results, self.whole = name, set(), False

    def visit_var_binding_(self, binding) -> None:
        value = binding.value
        if isinstance(value, Call) and isinstance(value.op, GlobalVar) and value.op.name_hint == self.name:
            self.results.add(binding.var)
            for arg in value.args:
                self.visit_expr(arg)
        else:
            self.visit_expr(value)

    def visit_global_var_(self, gvar: GlobalVar) -> None:
        self.whole = self.whole or gvar.name_hint == self.name


def _visit_uses(func: Function, fn) -> None:
    """Calls ``fn`` on every use position: items ``t[i]`` as a whole (not their tuple ``t``), other variables."""
    class _Uses(ExprMutator):
        def visit_tuple_getitem_(self, item: TupleGetItem) -> Expr:
            fn(item)
            if not isinstance(item.tuple_value, Var):
                self.visit_expr(item.tuple_value)
            return item

        def visit_var_(self, var: Var) -> Expr:
            fn(var)
            return var

    _Uses().visit_expr(func)


class _Renumber(ExprMutator):
    def __init__(self, mod: IRModule, renumber: dict[str, dict[int, int]]):
        super().__init__(mod)
        self.renumber, self.results = renumber, {}

    def visit_var_binding_(self, binding) -> None:
        value = binding.value
        if isinstance(value, Call) and isinstance(value.op, GlobalVar) and value.op.name_hint in self.renumber:
            self.results[binding.var] = self.renumber[value.op.name_hint]
        super().visit_var_binding_(binding)

    def visit_call_(self, call: Call) -> Expr:
        new = super().visit_call_(call)
        if isinstance(new.op, GlobalVar) and new.op.name_hint in self.renumber:  # the result type changed
            gvar = GlobalVar(new.op.name_hint, self.mod[new.op.name_hint].struct_info)
            return Call(gvar, new.args, new.attrs, span=new.span)
        return new

    def visit_tuple_getitem_(self, item: TupleGetItem) -> Expr:
        table = self.results.get(item.tuple_value)
        inner = self.visit_expr(item.tuple_value)
        index = table[item.index] if table is not None else item.index
        if inner is item.tuple_value and index == item.index:
            return item
        return TupleGetItem(inner, index, span=item.span)


@dataclass(frozen=True)
class RemoveUnusedOutputs(Pass):
    """Drop the result fields of internal functions that no caller reads.

    Example, applied as ``RemoveUnusedOutputs()``::

        @I.ir_module
        class Module:
            @R.function
            def helper(x: R.Tensor((3,), "float32")):
                a = R.exp(x)
                b = R.sin(x)
                return (a, b)

            @R.function
            def main(x: R.Tensor((3,), "float32")):
                t = cls.helper(x)
                u = t[1]
                return u

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def helper(x: R.Tensor((3,), dtype="float32")) -> R.Tuple(R.Tensor((3,), dtype="float32")):
                a: R.Tensor((3,), dtype="float32") = R.exp(x)
                b: R.Tensor((3,), dtype="float32") = R.sin(x)
                return (b,)

            @R.function
            def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
                t: R.Tuple(R.Tensor((3,), dtype="float32")) = cls.helper(x)
                u: R.Tensor((3,), dtype="float32") = t[0]
                return u
    """

    name = "RemoveUnusedOutputs"

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out, renumber = mod.copy(), {}
        for name in sorted(private_functions(mod)):
            func = mod[name]
            result = func.body.body if isinstance(func.body, SeqExpr) else None
            keep = used_fields(mod, name)
            if not isinstance(result, Tuple) or keep is None or len(keep) == len(result.fields):
                continue
            order = sorted(keep)
            body = SeqExpr(func.body.blocks, Tuple([result.fields[i] for i in order]))
            out[name] = Function(func.params, body, None, func.attrs, func.is_pure, span=func.span)
            renumber[name] = {old: new for new, old in enumerate(order)}
        return _Renumber(out, renumber).mutate_module(out) if renumber else mod


