"""``DeadCodeElimination``: drop bindings whose values are never used, and functions nothing calls.

    lv1 = R.exp(x)          lv2 = R.add(x, x)
    lv2 = R.add(x, x)  ->   return lv2
    return lv2

An unused binding goes when its value is pure, as in TVM: calls of Relax ops (all pure but those whose record
says ``pure=False``), of pure module or local functions, tuples and projections. A binding with an effect stays
even when nothing reads its variable, and so do the bindings it reads: an ``R.call_packed`` of a host function, a
call of a function declared ``@R.function(pure=False)``, a call of a callback parameter (``R.Callable``, whose
purity the signature does not say: LazySetOutput's ``fset_output`` is one). Functions the entries do not reach
(through calls or references, in local functions too) are removed, as TVM does. The entries are every function
not declared ``@R.function(private=True)`` (TVM's externally visible ones) and the private ones ``entry_functions``
names: naming ``["main"]`` keeps the other public functions as well, as in TVM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from ..ir.expr import Call, Expr, ExternFunc, Function, GlobalVar, If, MatchCast, SeqExpr, Tuple, TupleGetItem, Var
from ..ir.module import IRModule
from ..ir.struct_info import PrimStructInfo, StructInfo, TupleStructInfo, free_vars as struct_free_vars
from ..ir.sym import free_vars as dim_free_vars
from .pass_infra import Pass, PassContext
from .utils import callees, free_vars, name_list_option, rebind, with_body


@dataclass(frozen=True)
class DeadCodeElimination(Pass):
    """Remove unused bindings, and the functions the entries (every function not declared private, and those
    ``entry_functions`` names) do not reach.

    Example, applied as ``DeadCodeElimination(["main"])``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((3,), "float32")):
                with R.dataflow():
                    unused = R.exp(x)
                    gv = R.nn.relu(x)
                    R.output(gv)
                return gv

            @R.function(private=True)
            def unreachable(x: R.Tensor((3,), "float32")):
                return x

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
                with R.dataflow():
                    gv: R.Tensor((3,), dtype="float32") = R.nn.relu(x)
                    R.output(gv)
                return gv
    """

    name = "DeadCodeElimination"
    supports_if = True

    entry_functions: Optional[Sequence[str]] = None

    def __post_init__(self):
        object.__setattr__(self, "entry_functions", name_list_option("DeadCodeElimination(entry_functions=...)", self.entry_functions))
        super().__post_init__()

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = mod.copy()
        for name, func in mod.items():
            out[name] = remove_unused_bindings(func, mod)
        for missing in set(self.entry_functions or ()) - set(mod):
            raise ValueError(f"DeadCodeElimination: entry function {missing!r} is not in the module")
        # as TVM: the named entries add to the public functions, which stay whatever the option says
        public = [name for name, func in out.items() if not getattr(func, "is_private", False)]
        reached = _reachable(out, [*(self.entry_functions or ()), *public])
        for name in list(out):
            if name not in reached:
                del out[name]
        return out


def size_defining_casts(func: Function) -> set:
    """The ``match_cast`` bindings that define a size variable (one no parameter defines): later struct info
    may mention it, so they stay even when their variable is unused. A size an ``R.If`` branch defines is that
    branch's own (the other branch may define it again)."""
    out: set = set()
    if isinstance(func.body, SeqExpr):
        _size_defining(func.body, set().union(*(sinfo_size_names(p.struct_info) for p in func.params)), out)
    return out


def _size_defining(seq: SeqExpr, known: set, out: set) -> None:
    for block in seq.blocks:
        for b in block.bindings:
            if isinstance(b, MatchCast):
                new = sinfo_size_names(b.struct_info) - known
                if new:
                    out.add(b.var)
                    known |= new
            elif isinstance(b.value, If):
                for branch in (b.value.true_branch, b.value.false_branch):
                    _size_defining(branch, set(known), out)


def bindings_within(seq: Expr) -> list:
    """Every binding of ``seq`` in order, those of the branches of its ``R.If``s included (after the If's own)."""
    out = []
    for block in seq.blocks if isinstance(seq, SeqExpr) else ():
        for b in block.bindings:
            out.append(b)
            if isinstance(b.value, If):
                out += bindings_within(b.value.true_branch) + bindings_within(b.value.false_branch)
    return out


def impure_bindings(func: Function, mod: Optional[IRModule] = None) -> set:
    """The variables of ``func``'s bindings whose values have an effect beyond their result (see the module
    docstring), so that running them matters even when nothing reads them. ``mod`` says whether a called module
    function is pure; without it (or for a name it lacks) such a call counts as impure, which only keeps more.
    Bindings in ``R.If`` branches count, and so does the If of a branch that has one."""
    bindings = bindings_within(func.body)
    local = {b.var: b.value for b in bindings if isinstance(b.value, Function)}
    return {b.var for b in bindings if has_effect(b.value, mod, local)}


def has_effect(value: Expr, mod: Optional[IRModule], local: dict) -> bool:
    """Whether evaluating ``value`` may do something besides computing it. ``local`` maps the variables bound to
    local functions to those functions (their own ``pure`` flag decides a call of them). Defining a local
    function does nothing; calling one, or anything else, is judged by its callee."""
    if isinstance(value, Tuple):
        return any(has_effect(f, mod, local) for f in value.fields)
    if isinstance(value, TupleGetItem):
        return has_effect(value.tuple_value, mod, local)
    if isinstance(value, If):
        return any(has_effect(b.value, mod, local) for branch in (value.true_branch, value.false_branch)
                   for b in bindings_within(branch))
    if not isinstance(value, Call):
        return False
    if any(has_effect(a, mod, local) for a in value.args):
        return True
    callee = value.op
    if isinstance(callee, ExternFunc):
        return True
    if isinstance(callee, GlobalVar):
        target = mod[callee.name_hint] if mod is not None and callee.name_hint in mod else None
        return not (isinstance(target, Function) and target.is_pure)
    if isinstance(callee, Var):  # a local function is judged by its flag; a callback parameter may do anything
        target = local.get(callee)
        return not (isinstance(target, Function) and target.is_pure)
    return not getattr(callee, "pure", True)  # an op: its record says


def sinfo_size_names(sinfo: Optional[StructInfo]) -> set[str]:
    """The size variables ``sinfo`` mentions, a ``R.Prim(value="n")``'s included."""
    if isinstance(sinfo, PrimStructInfo):
        return dim_free_vars(sinfo.value)
    if isinstance(sinfo, TupleStructInfo):
        return set().union(*(sinfo_size_names(f) for f in sinfo.fields))
    return struct_free_vars(sinfo) if sinfo is not None else set()


def remove_unused_bindings(func: Function, mod: Optional[IRModule] = None) -> Function:
    """``func`` without the pure bindings nothing uses (the same object if there are none); bindings with an
    effect stay, with what they read (``mod`` tells the purity of called module functions)."""
    if not isinstance(func.body, SeqExpr):
        return func
    body = _prune(func.body, impure_bindings(func, mod) | size_defining_casts(func))
    return func if body is func.body else with_body(func, body)


def _prune(seq: SeqExpr, keep_anyway: set) -> SeqExpr:
    """``seq`` without the bindings nothing after them uses (nor ``keep_anyway``), the branches of the ``R.If``s
    it keeps pruned too, as TVM's pass does (each branch's result is what it uses)."""
    used = set(free_vars(seq.body))
    keep_blocks = []
    changed = False
    for block in reversed(seq.blocks):
        kept = []
        for b in reversed(block.bindings):
            if b.var in used or b.var in keep_anyway:
                if isinstance(b.value, If):
                    branches = [_prune(x, keep_anyway) for x in (b.value.true_branch, b.value.false_branch)]
                    if any(a is not x for a, x in zip(branches, (b.value.true_branch, b.value.false_branch))):
                        b = rebind(b, If(b.value.cond, *branches, span=b.value.span))
                        changed = True
                kept.append(b)
                used.update(free_vars(b.value))
            else:
                changed = True
        keep_blocks.append(type(block)(list(reversed(kept))))
    if not changed:
        return seq
    return SeqExpr([b for b in reversed(keep_blocks) if b.bindings], seq.body, span=seq.span)


def _reachable(mod: IRModule, entries: Sequence[str]) -> set[str]:
    """The functions ``entries`` reach: every module function a reached one refers to, called or passed as a value,
    in its local functions too (a private helper only a local function calls is still needed)."""
    seen: set[str] = set()
    todo = list(entries)
    while todo:
        name = todo.pop()
        if name in seen or name not in mod:
            continue
        seen.add(name)
        if isinstance(mod[name], Function):
            todo += callees(mod[name])
    return seen
