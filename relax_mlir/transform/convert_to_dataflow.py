"""``ConvertToDataflow(min_size=2)``: runs of pure bindings in plain blocks become dataflow blocks.

    lv = R.add(x, x)              with R.dataflow():
    gv = R.exp(lv)        ->          lv = R.add(x, x)
    return gv                         gv = R.exp(lv)
                                      R.output(gv)
                                  return gv

A run of at least ``min_size`` consecutive pure bindings (pure op calls, calls of pure functions, tuples, tuple
items, aliases, constants, match_casts) is moved into a dataflow block; the variables used after the run stay
plain (the block's outputs), the others become dataflow variables. Shorter runs and impure bindings stay where
they are; existing dataflow blocks are kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import (BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr, Function, GlobalVar,
                       MatchCast, SeqExpr, Tuple, TupleGetItem, Var)
from ..op.registry import Op
from .pass_infra import FunctionPass
from .utils import free_vars, rebind, substitute, with_body


@dataclass(frozen=True)
class ConvertToDataflow(FunctionPass):
    """Move runs of at least ``min_size`` pure bindings of plain blocks into dataflow blocks.

    Example, applied as ``ConvertToDataflow()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((3,), "float32")):
                lv = R.add(x, x)
                gv = R.exp(lv)
                return gv

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
                with R.dataflow():
                    lv: R.Tensor((3,), dtype="float32") = R.add(x, x)
                    gv: R.Tensor((3,), dtype="float32") = R.exp(lv)
                    R.output(gv)
                return gv
    """

    min_size: int = 2
    name = "ConvertToDataflow"

    def __post_init__(self) -> None:
        if not isinstance(self.min_size, int) or isinstance(self.min_size, bool) or self.min_size < 1:
            raise ValueError(f"ConvertToDataflow: min_size must be a positive integer, got {self.min_size!r}")
        super().__post_init__()

    def transform_function(self, func: Function, mod, ctx) -> Function:
        if not isinstance(func.body, SeqExpr):
            return func
        blocks: list[BindingBlock] = []
        for block in func.body.blocks:
            if isinstance(block, DataflowBlock):
                blocks.append(block)
                continue
            run: list = []
            for b in block.bindings:
                if _pure(b, mod):
                    run.append(b)
                    continue
                blocks += self._runs(run)
                run = []
                blocks.append(BindingBlock([b]))
            blocks += self._runs(run)
        blocks = _merge_plain(blocks)
        if len(blocks) == len(func.body.blocks) and all(a.bindings == b.bindings and type(a) is type(b)
                                                        for a, b in zip(blocks, func.body.blocks)):
            return func
        return _with_dataflow_vars(func, blocks)

    def _runs(self, run: list) -> list[BindingBlock]:
        if not run:
            return []
        return [DataflowBlock(run) if len(run) >= self.min_size else BindingBlock(run)]


def _pure(b, mod) -> bool:
    if isinstance(b, MatchCast):
        return True
    value = b.value
    if isinstance(value, (Tuple, TupleGetItem, Var, Constant)):
        return True
    if isinstance(value, Call):
        if isinstance(value.op, Op):
            return value.op.pure
        if isinstance(value.op, GlobalVar) and value.op.name_hint in mod:
            callee = mod[value.op.name_hint]
            return isinstance(callee, Function) and callee.is_pure
    return False


def _merge_plain(blocks: list[BindingBlock]) -> list[BindingBlock]:
    out: list[BindingBlock] = []
    for block in blocks:
        if out and not isinstance(block, DataflowBlock) and not isinstance(out[-1], DataflowBlock):
            out[-1] = BindingBlock(list(out[-1].bindings) + list(block.bindings))
        else:
            out.append(block)
    return out


def _with_dataflow_vars(func: Function, blocks: list[BindingBlock]) -> Function:
    """Variables of the new dataflow blocks that nothing after their block uses become dataflow variables."""
    used_after: list[set] = []
    later: set = set(free_vars(func.body.body))
    for block in reversed(blocks):
        used_after.append(set(later))
        for b in block.bindings:
            later.update(free_vars(b.value))
    used_after.reverse()
    remap: dict[Var, Expr] = {}
    out = []
    for block, after in zip(blocks, used_after):
        bindings = []
        for b in block.bindings:
            var, value = b.var, substitute(b.value, remap)
            if isinstance(block, DataflowBlock) and not isinstance(var, DataflowVar) and var not in after:
                var = DataflowVar(var.name_hint, var.struct_info, span=var.span)
                remap[b.var] = var
            bindings.append(rebind(b, value, var))
        out.append(type(block)(bindings))
    body = SeqExpr(out, substitute(func.body.body, remap))
    return with_body(func, body)
