"""Inlining calls between functions of a module (``InlineFunctions``), used to fuse a training step.

    def step(x, w):                          def step(x, w):
        r = cls.adjoint(x, w)        ->          lv = R.exp(x)           # adjoint's bindings, renamed
        return r                                 r = (lv, ...)
                                                 return r

The callee's bindings are copied into the caller's block (with fresh variables), its parameters replaced by
the call's arguments, and the call's variable bound to the callee's result. Calls are inlined recursively;
a recursive function is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
import itertools
from typing import Optional, Sequence

from ..ir.expr import (BindingBlock, Call, DataflowBlock, DataflowVar, Expr, Function, GlobalVar, MatchCast, SeqExpr,
                       Var, VarBinding)
from ..ir.module import IRModule
from ..ir.struct_info import free_vars as struct_free_vars
from ..ir.struct_info import substitute as substitute_struct_info
from ..ir.sym import SizeVar
from ..op.registry import substitute_attrs
from .pass_infra import Pass, PassContext
from .utils import name_list_option, rebind, substitute


def inline_calls(func: Function, mod: IRModule, _stack: tuple[str, ...] = (),
                 only: Optional[frozenset] = None) -> Function:
    """``func`` with every call to a function of ``mod`` (of ``only``, if given) replaced by the callee's body."""
    if not isinstance(func.body, SeqExpr):
        return func
    remap: dict[Var, Expr] = {}
    blocks = []
    for block in func.body.blocks:
        dataflow = isinstance(block, DataflowBlock)
        out: list = []
        for b in block.bindings:
            value = substitute(b.value, remap)
            if isinstance(b, VarBinding) and isinstance(value, Call) and isinstance(value.op, GlobalVar) \
                    and (only is None or value.op.name_hint in only):
                name = value.op.name_hint
                if name in _stack:
                    raise ValueError(f"InlineFunctions: {name} calls itself (through {' -> '.join(_stack)})")
                callee = inline_calls(mod[name], mod, _stack + (name,), only)
                result = _splice(callee, value.args, out, dataflow)
                out.append(VarBinding(b.var, result, span=b.span))
                continue
            if value is not b.value:
                b = rebind(b, value)
            out.append(b)
        blocks.append(DataflowBlock(out) if dataflow else BindingBlock(out))
    return Function(func.params, SeqExpr(blocks, substitute(func.body.body, remap)), func.ret_struct_info,
                    func.attrs, func.is_pure, span=func.span)


def _splice(callee: Function, args: Sequence[Expr], out: list, dataflow: bool) -> Expr:
    """Append the callee's bindings (renamed, their size variables bound to the caller's) to ``out``; return
    its result expression."""
    remap: dict[Var, Expr] = dict(zip(callee.params, args))
    sizes = _callee_sizes(callee, args)
    for block in callee.blocks:
        for b in block.bindings:
            cls = DataflowVar if dataflow else Var
            var = cls(b.var.name_hint, substitute_struct_info(b.var.struct_info, sizes), span=b.var.span)
            value = _resize(substitute(b.value, remap), sizes)
            out.append(MatchCast(var, value, substitute_struct_info(b.struct_info, sizes), span=b.span)
                       if isinstance(b, MatchCast) else VarBinding(var, value, span=b.span))
            remap[b.var] = var
    body = callee.body.body if isinstance(callee.body, SeqExpr) else callee.body
    return _resize(substitute(body, remap), sizes)


_fresh = itertools.count()


def _callee_sizes(callee: Function, args: Sequence[Expr]) -> dict:
    """The callee's size variables in the caller's terms: bound by the arguments' shapes, and fresh names for
    those a ``match_cast`` of the callee defines (inlining twice must not define one name twice)."""
    from ..ir.block_builder import call_size_bindings

    sizes = call_size_bindings(callee.struct_info, [a.struct_info for a in args])
    for block in callee.blocks:
        for b in block.bindings:
            if isinstance(b, MatchCast):
                for name in sorted(struct_free_vars(b.struct_info) - sizes.keys()):
                    sizes[name] = SizeVar(f"{name}_{next(_fresh)}")
    return sizes


def _resize(e: Expr, sizes: dict) -> Expr:
    """Calls rebuilt with the caller's sizes in their struct info and attributes (a reshape to ``(n, -1)``)."""
    if not sizes or not isinstance(e, Call):
        return e
    attrs = substitute_attrs(e.attrs, sizes) if not isinstance(e.op, GlobalVar) else e.attrs
    return Call(e.op, e.args, attrs, substitute_struct_info(e.struct_info, sizes), span=e.span)


@dataclass(frozen=True)
class InlineFunctions(Pass):
    """Inline every call between functions in the functions named (default: all).

    Example, applied as ``InlineFunctions(["main"])``::

        @I.ir_module
        class Module:
            @R.function
            def double(a: R.Tensor((3,), "float32")):
                b = R.add(a, a)
                return b

            @R.function
            def main(x: R.Tensor((3,), "float32")):
                y = cls.double(x)
                z = R.exp(y)
                return z

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def double(a: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
                b: R.Tensor((3,), dtype="float32") = R.add(a, a)
                return b

            @R.function
            def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
                b: R.Tensor((3,), dtype="float32") = R.add(x, x)
                y: R.Tensor((3,), dtype="float32") = b
                z: R.Tensor((3,), dtype="float32") = R.exp(y)
                return z
    """

    name = "InlineFunctions"

    func_names: Optional[Sequence[str]] = None

    def __post_init__(self):
        object.__setattr__(self, "func_names", name_list_option("InlineFunctions(func_names=...)", self.func_names))
        super().__post_init__()

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = mod.copy()
        missing = [name for name in self.func_names or () if name not in mod]
        if missing:
            raise ValueError(f"InlineFunctions: the module has no function {', '.join(map(repr, missing))} "
                             f"(it has: {', '.join(mod)})")
        for name in self.func_names if self.func_names is not None else list(mod):
            out[name] = inline_calls(mod[name], mod, (name,))
        return out
