"""``CanonicalizeBindings``: remove trivial bindings by using the value they name directly.

    lv1 = R.add(x, y)            lv1 = R.add(x, y)
    lv2 = lv1                    out = R.exp(lv1)
    gv = R.exp(lv2)        ->    t = (lv1, out)
    t = (lv1, gv)                (the tuple item t[1] is gv itself, and the output
    out = t[1]                   out of a dataflow block takes gv's binding)

A binding ``y = x`` (or a ``match_cast`` that refines nothing, or a field of a tuple built in the function, which
may itself be a tuple) is dropped and ``y`` replaced by its value. As in TVM:

- an output ``gv = lv`` of a dataflow block, where ``lv`` is a dataflow variable of the block, binds ``gv``
  where ``lv`` was bound (``lv = R.const(1); gv = lv`` becomes ``gv = R.const(1)``), so no dataflow variable
  escapes its block;
- a variable bound to a constant (or to a constant field of a tuple) keeps its binding, and its uses get the
  constant (``n = R.const(1); return n`` returns ``R.const(1)``; DeadCodeElimination removes what is left);
- a block output that nothing after its block uses becomes a dataflow variable;
- ``match_cast``s that give one size variable two different static values (``A: (16, 16)`` cast to ``(N, M)``,
  ``B: (32, 32)`` to ``(K, M)``) are refused with a ValueError: the second cast could only fail at run time.
"""

from __future__ import annotations

from typing import ClassVar

from dataclasses import dataclass

from ..ir.expr import (Constant, DataflowBlock, DataflowVar, Expr, Function, If, MatchCast, SeqExpr, Tuple,
                       TupleGetItem, Var, VarBinding)
from ..ir.struct_info import ShapeStructInfo, TensorStructInfo, TupleStructInfo
from ..ir.sym import SymDim
from .pass_infra import FunctionPass
from .utils import free_vars, rebind, substitute, with_body


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
                    out: R.Tensor((3,), dtype="float32") = R.exp(lv1)
                    t: R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32")) = (lv1, out)
                    R.output(out)
                return out
    """

    name = "CanonicalizeBindings"
    supports_if = True
    #: Whether an output aliasing a dataflow variable takes over its binding (TVM's pass does; the adjoints TVM's
    #: Gradient documents keep ``x_adjoint = lv1_adjoint``: ``gradient.py`` cleans up without it).
    promote_outputs: ClassVar[bool] = True

    def transform_function(self, func: Function, mod, ctx) -> Function:
        if not isinstance(func.body, SeqExpr):
            return func
        _check_match_casts(func, _function_name(func, mod))
        blocks, body, changed, consts = self._fold(func.body)
        blocks, demoted = _demote_unused_outputs(blocks, body, set(consts))
        if not (changed or demoted):
            return func
        return with_body(func, SeqExpr([b for b in blocks if b.bindings], body))

    def _fold(self, seq: SeqExpr, remap=None, consts=None, tuples=None):
        """One pass over the bindings: aliases dropped (``remap``), constants recorded for their uses
        (``consts``), outputs that alias a dataflow variable moved to its binding. An ``R.If``'s branches are
        folded the same way, each starting from what is known before the If (their own findings stay in them)."""
        remap: dict[Var, Expr] = dict(remap or {})
        consts: dict[Var, Constant] = dict(consts or {})
        tuples: dict[Var, Tuple] = dict(tuples or {})
        blocks, changed = [], False
        for block in seq.blocks:
            kept = []
            local: set[Var] = set()  # the dataflow variables of this block: the only ones it may refer to
            for b in block.bindings:
                aliased = substitute(b.value, remap)
                if isinstance(aliased, If):
                    aliased = self._fold_if(aliased, remap, consts, tuples)
                value = self._resolve_field(aliased, tuples, local)
                target = self._trivial(b, value)
                if target is not None and self._may_replace(b.var, target, block, local):
                    remap[b.var] = target
                    changed = True
                    continue
                if target is not None and self.promote_outputs and isinstance(block, DataflowBlock) \
                        and _promote(kept, b.var, target):
                    remap[target] = b.var
                    consts.pop(target, None)  # later uses name the output, as TVM's do
                    local.discard(target)
                    changed = True
                    continue
                if isinstance(b, VarBinding) and isinstance(value, Constant):
                    consts[b.var] = value
                    value = aliased  # ``x = t[0]`` of a constant field stays; its uses get the constant
                if isinstance(value, Tuple):
                    tuples[b.var] = value
                value = substitute(value, consts)
                if value is not b.value:
                    changed = True
                    b = rebind(b, value)
                if isinstance(b.var, DataflowVar):
                    local.add(b.var)
                kept.append(b)
            blocks.append(type(block)(kept))
        body = substitute(substitute(seq.body, remap), consts)
        return blocks, body, changed or body is not seq.body, consts

    def _fold_if(self, if_: If, remap: dict, consts: dict, tuples: dict) -> If:
        branches = []
        for branch in (if_.true_branch, if_.false_branch):
            blocks, body, changed, found = self._fold(branch, remap, consts, tuples)
            blocks, demoted = _demote_unused_outputs(blocks, body, set(found))
            branches.append(SeqExpr([b for b in blocks if b.bindings], body, span=branch.span)
                            if changed or demoted else branch)
        if all(a is b for a, b in zip(branches, (if_.true_branch, if_.false_branch))):
            return if_
        return If(if_.cond, *branches, span=if_.span)

    @staticmethod
    def _trivial(b, value: Expr):
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


def _promote(kept: list, output: Var, lv: Expr) -> bool:
    """``output = lv`` ends a dataflow block's chain of aliases of its dataflow variable ``lv``: bind ``output``
    where ``lv`` is bound, and name it in ``lv``'s uses in the block so far."""
    if isinstance(output, DataflowVar) or not isinstance(lv, DataflowVar) or output.struct_info != lv.struct_info:
        return False
    at = next((i for i, b in enumerate(kept) if b.var is lv), None)
    if at is None:
        return False
    kept[at] = rebind(kept[at], kept[at].value, output)
    for i in range(at + 1, len(kept)):
        value = substitute(kept[i].value, {lv: output})
        if value is not kept[i].value:
            kept[i] = rebind(kept[i], value)
    return True


def _demote_unused_outputs(blocks: list, body: Expr, constants: set):
    """Outputs of a dataflow block that nothing after it uses become dataflow variables of it (a local function
    that captures one counts as a use after it). An output bound to a constant stays one: its uses got the
    constant (TVM decides before they do)."""
    used: set[Var] = set(free_vars(body))
    out, demoted = [], False
    for block in reversed(blocks):
        captured = {v for b in block.bindings if isinstance(b.value, Function) for v in free_vars(b.value)}
        if isinstance(block, DataflowBlock):
            remap = {b.var: DataflowVar(b.var.name_hint, b.var.struct_info, span=b.var.span)
                     for b in block.bindings
                     if not isinstance(b.var, DataflowVar) and b.var not in used | captured | constants}
            if remap:
                demoted = True
                block = DataflowBlock([rebind(b, substitute(b.value, remap), remap.get(b.var, b.var))
                                       for b in block.bindings])
        for b in block.bindings:
            used.update(free_vars(b.value))
        out.append(block)
    out.reverse()
    return out, demoted


def _function_name(func: Function, mod) -> str:
    names = [name for name in (mod or ()) if mod[name] is func]
    return names[0] if names else "a function"


def _check_match_casts(func: Function, where: str) -> None:
    """Refuse ``match_cast``s that give a size variable two different static values: the later cast would fail
    whenever the function runs (TVM's CanonicalizeBindings raises this ValueError too)."""
    known: dict[str, tuple[int, str]] = {}
    for block in func.body.blocks:
        for b in block.bindings:
            if not isinstance(b, MatchCast):
                continue
            for name, size in _static_sizes(b.value.struct_info, b.struct_info):
                first = known.setdefault(name, (size, b.var.name_hint))
                if first[0] != size:
                    raise ValueError(f"CanonicalizeBindings: {where}: MatchCast statements must be consistent: "
                                     f"binding {first[1]!r} implies size variable {name} = {first[0]}, but the "
                                     f"later binding {b.var.name_hint!r} implies {name} = {size}")


def _static_sizes(value, cast):
    """(size variable, static value) pairs that casting a value of struct info ``value`` to ``cast`` binds."""
    if isinstance(value, TupleStructInfo) and isinstance(cast, TupleStructInfo):
        if len(value.fields) == len(cast.fields):
            for v, c in zip(value.fields, cast.fields):
                yield from _static_sizes(v, c)
        return
    have, want = _dims(value), _dims(cast)
    if have is not None and want is not None and type(value) is type(cast) and len(have) == len(want):
        for h, w in zip(have, want):
            if isinstance(h, int) and isinstance(w, SymDim) and w.is_var():
                yield w.name, h


def _dims(sinfo):
    if isinstance(sinfo, TensorStructInfo):
        return sinfo.shape
    return sinfo.values if isinstance(sinfo, ShapeStructInfo) else None
