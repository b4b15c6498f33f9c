"""``EliminateCommonSubexpr(call_only=False)``: a binding whose value was computed before reuses that variable.

    lv0 = R.add(x, y)           lv0 = R.add(x, y)
    lv1 = R.add(x, y)    ->     gv = R.multiply(lv0, lv0)
    gv = R.multiply(lv0, lv1)

Values are compared structurally (same op, attributes and operands). Calls without effects (of pure ops, and of
pure functions, local or of the module, as TVM's), tuples and tuple items are candidates (``call_only``: calls
only); host calls, callbacks and calls of ``pure=False`` functions are left alone. Local functions are searched
too, each on its own (a value of the enclosing function is not reused inside one, nor the other way). A value
computed in a dataflow block into a dataflow variable is reused only inside that block; when a block's output
would be replaced by one of the block's dataflow variables, it becomes an alias of it instead (``CanonicalizeBindings``
keeps such aliases too), the rest of the block reads the dataflow variable, and the code after the block reuses
the output. So does a variable declared less precisely than the earlier one (its users' struct info was inferred
from it), which stays an alias. A binding whose variable declares more than the earlier variable's struct info (``b:
R.Tensor((4, 3)) = R.add(x, x)`` after ``a = R.add(x, x)`` with ``x`` of any 2-d shape) is kept as it is: its
declared sizes are checked at run time, and its users were inferred from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..ir.expr import Call, DataflowVar, Expr, Function, If, SeqExpr, Tuple, TupleGetItem, Var, VarBinding
from ..ir.struct_info import is_base_of
from ..ir.structural_equal import structural_equal, structural_hash
from ..ir.visitor import post_order_visit
from .dead_code_elimination import bindings_within, has_effect
from .pass_infra import Pass
from .utils import rebind, substitute, with_body


@dataclass(frozen=True)
class EliminateCommonSubexpr(Pass):
    """Reuse the first variable bound to each repeated value (TVM's ``EliminateCommonSubexpr``).

    Example, applied as ``EliminateCommonSubexpr()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")):
                with R.dataflow():
                    lv0 = R.add(x, y)
                    lv1 = R.add(x, y)
                    gv = R.multiply(lv0, lv1)
                    R.output(gv)
                return gv

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((3,), dtype="float32"),
                y: R.Tensor((3,), dtype="float32"),
            ) -> R.Tensor((3,), dtype="float32"):
                with R.dataflow():
                    lv0: R.Tensor((3,), dtype="float32") = R.add(x, y)
                    gv: R.Tensor((3,), dtype="float32") = R.multiply(lv0, lv0)
                    R.output(gv)
                return gv
    """

    call_only: bool = False
    name = "EliminateCommonSubexpr"
    supports_if = True

    def __post_init__(self) -> None:
        if not isinstance(self.call_only, bool):
            raise TypeError(f"EliminateCommonSubexpr: call_only must be True or False, got {self.call_only!r}")
        super().__post_init__()

    def transform_module(self, mod, ctx):
        out = mod.copy()
        for name, func in mod.items():
            if isinstance(func, Function):
                out[name] = self.transform_function(func, mod)
        return out

    def candidate(self, value: Expr, mod=None, functions: Optional[dict] = None) -> bool:
        """Whether ``value`` may be shared: a call without effects (``functions`` maps local function variables to
        the functions, whose ``pure`` flag decides their calls), or unless ``call_only`` a tuple or tuple item."""
        if isinstance(value, Call):
            return not has_effect(value, mod, functions or {})
        return not self.call_only and isinstance(value, (Tuple, TupleGetItem))

    def transform_function(self, func: Function, mod=None, functions: Optional[dict] = None) -> Function:
        """``func`` with repeated values shared; ``mod`` tells which called module functions are pure, ``functions``
        the local functions of enclosing scopes. A local function is searched with tables of its own."""
        if not isinstance(func.body, SeqExpr):
            return func
        inner = {b.var: b.value for b in bindings_within(func.body) if isinstance(b.value, Function)}
        functions = {**(functions or {}), **inner}
        body = self._share(func.body, mod, functions, {}, _Table())
        return func if body is func.body else with_body(func, body)

    def _share(self, seq: SeqExpr, mod, functions: dict, remap: dict, seen: "_Table") -> SeqExpr:
        """``seq`` with repeated values shared, starting from what is known before it: ``remap`` (replaced
        variables) and ``seen`` (values bound to plain variables), which it does not change. The branches of an
        ``R.If`` start from what is known before the If and keep their own findings, as TVM's pass does: a value
        of one branch is not reused in the other, nor after the If."""
        remap, seen = dict(remap), seen.copy()
        blocks, changed = [], False
        for block in seq.blocks:
            local = _Table()  # values bound to this block's dataflow variables
            in_block = dict(remap)  # remap, plus outputs read as the block's dataflow variable inside it
            kept = []
            for b in block.bindings:
                value = substitute(b.value, in_block)
                if isinstance(value, Function):
                    value = self.transform_function(value, mod, functions)
                if isinstance(value, If):
                    branches = [self._share(x, mod, functions, in_block, seen)
                                for x in (value.true_branch, value.false_branch)]
                    if any(a is not x for a, x in zip(branches, (value.true_branch, value.false_branch))):
                        value = If(value.cond, *branches, span=value.span)
                if isinstance(b, VarBinding) and self.candidate(value, mod, functions):
                    prior = local.find(value) or seen.find(value)
                    if prior is not None and _describes(b.var, prior):
                        changed = True
                        less_precise = b.var.struct_info not in (None, prior.struct_info)
                        if less_precise or (isinstance(prior, DataflowVar) and not isinstance(b.var, DataflowVar)):
                            # a block output stays a variable (the code after the block reuses it; inside, the
                            # dataflow variable is read); so does one declared less precisely (its users' struct
                            # info was inferred from it)
                            kept.append(VarBinding(b.var, prior, span=b.span))
                            if not isinstance(b.var, DataflowVar):
                                seen.add(value, b.var)
                            if not less_precise:
                                in_block[b.var] = prior
                        else:
                            remap[b.var] = in_block[b.var] = prior
                        continue
                    (local if isinstance(b.var, DataflowVar) else seen).add(value, b.var)
                if value is not b.value:
                    changed = True
                    b = rebind(b, value)
                kept.append(b)
            blocks.append(type(block)(kept))
        body = substitute(seq.body, remap)
        if not changed and body is seq.body:
            return seq
        return SeqExpr([b for b in blocks if b.bindings], body, span=seq.span)


def _describes(var: Var, prior: Var) -> bool:
    """Whether ``var``'s struct info holds for ``prior`` (equal, or less precise), so that ``var`` may be bound to
    ``prior``. A narrower one (declared sizes) is a run-time check, and what later bindings were inferred from."""
    if var.struct_info is None or prior.struct_info is None:
        return var.struct_info is None
    return is_base_of(var.struct_info, prior.struct_info)


class _Table:
    """Values seen so far, by structural hash and the variables they read (equal values read the same ones: the
    hash alone put every ``add(v_i, x)`` of a chain in one bucket, and the pass took quadratic time), each with the
    variable first bound to it."""

    def __init__(self) -> None:
        self.entries: dict[tuple, list[tuple[Expr, Var]]] = {}

    @staticmethod
    def _key(value: Expr) -> tuple:
        read: list[int] = []
        post_order_visit(value, lambda e: read.append(id(e)) if isinstance(e, Var) else None)
        return structural_hash(value), tuple(read)

    def find(self, value: Expr) -> Optional[Var]:
        for seen, var in self.entries.get(self._key(value), ()):
            if structural_equal(seen, value):
                return var
        return None

    def add(self, value: Expr, var: Var) -> None:
        self.entries.setdefault(self._key(value), []).append((value, var))

    def copy(self) -> "_Table":
        out = _Table()
        out.entries = {key: list(found) for key, found in self.entries.items()}
        return out
