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

from ..ir.expr import (BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr, Function, GlobalVar, If,
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
    supports_if = True

    def __post_init__(self) -> None:
        if not isinstance(self.min_size, int) or isinstance(self.min_size, bool) or self.min_size < 1:
            raise ValueError(f"ConvertToDataflow: min_size must be a positive integer, got {self.min_size!r}")
        super().__post_init__()

    def transform_function(self, func: Function, mod, ctx) -> Function:
        if not isinstance(func.body, SeqExpr):
            return func
        body = self._convert(func.body, mod, {})
        return func if body is func.body else with_body(func, body)

    def _convert(self, seq: SeqExpr, mod, local_funcs: dict) -> SeqExpr:
        blocks = self._streaks(self._with_nested_converted(seq.blocks, mod, local_funcs), mod, local_funcs)
        if len(blocks) == len(seq.blocks) and all(a is b for a, b in zip(blocks, seq.blocks)):
            return seq
        return _with_dataflow_vars(seq, blocks, set(map(id, seq.blocks)))

    def _with_nested_converted(self, blocks, mod, local_funcs: dict) -> list[BindingBlock]:
        """The blocks with each local function's body, and each ``R.If``'s branches, converted too (as TVM does;
        the If itself stays in a plain block: a dataflow block may not hold one), keeping unchanged blocks."""
        out = []
        for block in blocks:
            bindings = []
            for b in block.bindings:
                if isinstance(b.value, Function):
                    b = rebind(b, self.transform_function(b.value, mod, None))
                    local_funcs[b.var] = b.value
                elif isinstance(b.value, If):
                    branches = [self._convert(x, mod, local_funcs) for x in (b.value.true_branch,
                                                                              b.value.false_branch)]
                    if any(a is not x for a, x in zip(branches, (b.value.true_branch, b.value.false_branch))):
                        b = rebind(b, If(b.value.cond, *branches, span=b.value.span))
                bindings.append(b)
            same = all(a is b for a, b in zip(bindings, block.bindings))
            out.append(block if same else type(block)(bindings))
        return out

    def _streaks(self, blocks, mod, local_funcs: dict) -> list[BindingBlock]:
        """Runs of pure bindings become dataflow blocks. As in TVM, an existing dataflow block joins the run it is
        in: pure bindings just before or after it (and dataflow blocks next to it) merge into it, whatever the
        run's length."""
        out: list[BindingBlock] = []
        plain: list = []  # bindings that stay in a plain block, before the run
        run: list = []
        existing: list[DataflowBlock] = []  # the dataflow blocks the run holds

        def flush():
            nonlocal plain, run, existing
            if run and (existing or len(run) >= self.min_size):
                if plain:
                    out.append(BindingBlock(plain))
                    plain = []
                same = len(existing) == 1 and list(existing[0].bindings) == run
                out.append(existing[0] if same else DataflowBlock(run))
            else:
                plain += run
            run, existing = [], []

        for block in blocks:
            if isinstance(block, DataflowBlock):
                run += block.bindings
                existing.append(block)
                continue
            for b in block.bindings:
                if _pure(b, mod, local_funcs):
                    run.append(b)
                else:
                    flush()
                    plain.append(b)
        flush()
        if plain:
            out.append(BindingBlock(plain))
        return out


def _pure(b, mod, local_funcs: dict) -> bool:
    if isinstance(b, MatchCast):
        return True
    value = b.value
    if isinstance(value, (Tuple, TupleGetItem, Var, Constant, Function)):  # defining a local function does nothing
        return True
    if isinstance(value, Call):
        if isinstance(value.op, Op):
            return value.op.pure
        if isinstance(value.op, GlobalVar) and value.op.name_hint in mod:
            callee = mod[value.op.name_hint]
            return isinstance(callee, Function) and callee.is_pure
        if isinstance(value.op, Var) and value.op in local_funcs:
            return local_funcs[value.op].is_pure
    return False


def _with_dataflow_vars(seq: SeqExpr, blocks: list[BindingBlock], kept: set) -> SeqExpr:
    """``seq`` with ``blocks``, in which variables of the new (or merged) dataflow blocks that nothing after their
    block uses become dataflow variables; ``kept``: the ids of the blocks that are ``seq``'s own, left as they
    are."""
    used_after: list[set] = []
    later: set = set(free_vars(seq.body))
    for block in reversed(blocks):
        used_after.append(set(later))
        for b in block.bindings:
            later.update(free_vars(b.value))
    used_after.reverse()
    remap: dict[Var, Expr] = {}
    out = []
    for block, after in zip(blocks, used_after):
        # a local function that captures a variable uses it after the block, wherever it is defined (TVM's rule)
        after = after | {v for b in block.bindings if isinstance(b.value, Function) for v in free_vars(b.value)}
        bindings = []
        for b in block.bindings:
            var, value = b.var, substitute(b.value, remap)
            if (isinstance(block, DataflowBlock) and id(block) not in kept and not isinstance(var, DataflowVar)
                    and var not in after):
                var = DataflowVar(var.name_hint, var.struct_info, span=var.span)
                remap[b.var] = var
            bindings.append(rebind(b, value, var))
        out.append(type(block)(bindings))
    return SeqExpr(out, substitute(seq.body, remap), span=seq.span)
