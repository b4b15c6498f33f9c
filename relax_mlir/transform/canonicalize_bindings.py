"""``CanonicalizeBindings``: remove trivial bindings by using the value they name directly.

    lv1 = R.add(x, y)            lv1 = R.add(x, y)
    lv2 = lv1                    gv = R.exp(lv1)
    gv = R.exp(lv2)        ->
    t = (lv1, gv)                (the tuple item t[1] is gv itself)
    out = t[1]

A binding ``y = x`` (or a ``match_cast`` that refines nothing, or a field of a tuple built in the function, which
may itself be a tuple) is dropped and ``y`` replaced by its value, unless that would let a dataflow variable escape its block (then the
binding stays, as TVM does).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import DataflowBlock, DataflowVar, Expr, Function, MatchCast, SeqExpr, Tuple, TupleGetItem, Var
from .pass_infra import FunctionPass
from .utils import rebind, substitute, with_body


@dataclass(frozen=True)
class CanonicalizeBindings(FunctionPass):
    """Replace trivial bindings (aliases, no-op casts, fields of known tuples) by their values.

    Example, applied as ``CanonicalizeBindings()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")):
                with R.dataflow():
                    lv1 = R.add(x, y)
                    lv2 = lv1
                    gv = R.exp(lv2)
                    t = (lv1, gv)
                    out = t[1]
                    R.output(out)
                return out

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((3,), dtype="float32"),
                y: R.Tensor((3,), dtype="float32"),
            ) -> R.Tensor((3,), dtype="float32"):
                with R.dataflow():
                    lv1: R.Tensor((3,), dtype="float32") = R.add(x, y)
                    gv: R.Tensor((3,), dtype="float32") = R.exp(lv1)
                    t: R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32")) = (lv1, gv)
                    out: R.Tensor((3,), dtype="float32") = gv
                    R.output(out)
                return out
    """

    name = "CanonicalizeBindings"

    def transform_function(self, func: Function, mod, ctx) -> Function:
        if not isinstance(func.body, SeqExpr):
            return func
        remap: dict[Var, Expr] = {}
        tuples: dict[Var, Tuple] = {}
        blocks, changed = [], False
        for block in func.body.blocks:
            kept = []
            local: set[Var] = set()  # the dataflow variables of this block: the only ones it may refer to
            for b in block.bindings:
                value = self._resolve_field(substitute(b.value, remap), tuples, local)
                target = self._trivial(b, value, tuples)
                if target is not None and self._may_replace(b.var, target, block, local):
                    remap[b.var] = target
                    changed = True
                    continue
                if isinstance(value, Tuple):
                    tuples[b.var] = value
                if value is not b.value:
                    changed = True
                    b = rebind(b, value)
                if isinstance(b.var, DataflowVar):
                    local.add(b.var)
                kept.append(b)
            blocks.append(type(block)(kept))
        if not changed:
            return func
        body = SeqExpr([b for b in blocks if b.bindings], substitute(func.body.body, remap))
        return with_body(func, body)

    @staticmethod
    def _trivial(b, value: Expr, tuples: dict):
        if isinstance(b, MatchCast):
            return value if isinstance(value, Var) and value.struct_info == b.struct_info else None
        if isinstance(value, Var) and value.struct_info == b.var.struct_info:
            return value
        return None

    @staticmethod
    def _resolve_field(value: Expr, tuples: dict, local: set) -> Expr:
        """``t[i]`` of a tuple built in the function (or written out in place) is its field, unless the field
        is a dataflow variable of another block (a tuple built in a dataflow block and projected after it)."""
        if isinstance(value, TupleGetItem):
            tup = value.tuple_value
            tup = tuples.get(tup, tup) if isinstance(tup, Var) else tup
            if isinstance(tup, Tuple):
                field = tup.fields[value.index]
                if not (isinstance(field, DataflowVar) and field not in local):
                    return field
        return value

    @staticmethod
    def _may_replace(var: Var, target: Expr, block, local: set) -> bool:
        # An output of a dataflow block may not become a dataflow variable of it, and nothing may become a
        # dataflow variable of another block.
        if isinstance(target, DataflowVar):
            return target in local and (isinstance(var, DataflowVar) or not isinstance(block, DataflowBlock))
        return True
