"""``DeadCodeElimination``: drop bindings whose values are never used, and functions nothing calls.

    lv1 = R.exp(x)          lv2 = R.add(x, x)
    lv2 = R.add(x, x)  ->   return lv2
    return lv2

Relax ops are pure, so an unused binding can go. Functions not reachable from ``entry_functions`` (default:
every function not declared ``@R.function(private=True)``) are removed, as TVM does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from ..ir.expr import Call, Function, GlobalVar, MatchCast, SeqExpr
from ..ir.module import IRModule
from ..ir.struct_info import free_vars as struct_free_vars
from .pass_infra import Pass, PassContext
from .utils import free_vars, name_list_option, with_body


@dataclass(frozen=True)
class DeadCodeElimination(Pass):
    """Remove unused bindings, and the functions the entries (``entry_functions``, default: every function not
    declared private) do not reach.

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

            @R.function
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

    entry_functions: Optional[Sequence[str]] = None

    def __post_init__(self):
        object.__setattr__(self, "entry_functions", name_list_option("DeadCodeElimination(entry_functions=...)", self.entry_functions))

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = mod.copy()
        for name, func in mod.items():
            out[name] = remove_unused_bindings(func)
        if self.entry_functions is not None:
            for missing in set(self.entry_functions) - set(mod):
                raise ValueError(f"DeadCodeElimination: entry function {missing!r} is not in the module")
            entries = list(self.entry_functions)
        else:  # every function not declared private is an entry
            entries = [name for name, func in out.items() if not getattr(func, "is_private", False)]
        reached = _reachable(out, entries)
        for name in list(out):
            if name not in reached:
                del out[name]
        return out


def size_defining_casts(func: Function) -> set:
    """The ``match_cast`` bindings that define a size variable (one no parameter defines): later struct info
    may mention it, so they stay even when their variable is unused."""
    known = set().union(*(struct_free_vars(p.struct_info) for p in func.params)) if func.params else set()
    out = set()
    for block in func.blocks:
        for b in block.bindings:
            if isinstance(b, MatchCast):
                new = struct_free_vars(b.struct_info) - known
                if new:
                    out.add(b.var)
                    known |= new
    return out


def remove_unused_bindings(func: Function) -> Function:
    """``func`` without the bindings nothing uses (the same object if there are none)."""
    if not isinstance(func.body, SeqExpr):
        return func
    used = set(free_vars(func.body.body)) | size_defining_casts(func)
    keep_blocks = []
    changed = False
    for block in reversed(func.body.blocks):
        kept = []
        for b in reversed(block.bindings):
            if b.var in used:
                kept.append(b)
                used.update(free_vars(b.value))
            else:
                changed = True
        keep_blocks.append(type(block)(list(reversed(kept))))
    if not changed:
        return func
    body = SeqExpr([b for b in reversed(keep_blocks) if b.bindings], func.body.body)
    return with_body(func, body)


def _reachable(mod: IRModule, entries: Sequence[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(entries)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for block in mod[name].blocks:
            for b in block.bindings:
                if isinstance(b.value, Call) and isinstance(b.value.op, GlobalVar):
                    todo.append(b.value.op.name_hint)
    return seen
