"""``FuseOps``: chains of operators in a dataflow block are grouped into private ``Primitive`` functions by the kind
of each op, as TVM's pass of that name (whose groups ``FuseTIR`` then compiles as one kernel):

    lv = R.matmul(x, w)                  ->    y = cls.fused_matmul_add_relu(x, w, b)
    lv1 = R.add(lv, b)
    y = R.nn.relu(lv1)

Kinds, from the op records: an op whose lowering is an elementwise family (``add``, ``exp``, ``relu``, ...,
broadcasting included) is *elementwise*; ``matmul`` and the convolutions are *anchors* (TVM's
"out-elementwise-fusable"); every other op is *opaque*. An anchor starts a group; an elementwise op joins the group
of an argument computed in the same block whose value nothing else reads (an anchor's or an elementwise chain's),
else starts its own; opaque ops (reductions, reshapes, ...) stay outside groups. A group of two or more bindings
becomes ``fused_<op>_<op>...`` with the attribute ``Primitive``, called where its last binding stood. TVM also fuses
injective ops (reshape, transpose) and reductions at the end of a chain; here they stay opaque.

What it buys here: the grouping is visible in the Relax text; the backend inlines the functions again and MLIR's
elementwise fusion (the ``fused`` stage) fuses the loops it can, so the compiled code is the same.
``fuse_opt_level`` (-1: the pass context's opt level) below 1 fuses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..ir.expr import Call, DataflowBlock, Function, MatchCast, SeqExpr, Var
from ..op.registry import Elementwise, Op
from .fuse_ops_by_pattern import outline_group
from .pass_infra import Pass
from .utils import free_vars

#: The ops that start a group (TVM's out-elementwise-fusable kind).
ANCHORS = frozenset({"relax.matmul", "relax.nn.conv1d", "relax.nn.conv2d", "relax.nn.conv2d_transpose"})


def op_kind(call: Call) -> str:
    """``"anchor"``, ``"elementwise"`` or ``"opaque"`` for a call (see the module docstring)."""
    op = call.op
    if not isinstance(op, Op):
        return "opaque"
    if op.name in ANCHORS:
        return "anchor"
    return "elementwise" if isinstance(op.lowering, Elementwise) else "opaque"


@dataclass(frozen=True)
class FuseOps(Pass):
    """Group anchor + elementwise chains of dataflow blocks into ``Primitive`` functions (TVM's ``FuseOps``).

    Example, applied as ``FuseOps()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((4, 3), "float32"), b: R.Tensor((3,), "float32")):
                with R.dataflow():
                    lv = R.matmul(x, w)
                    lv1 = R.add(lv, b)
                    y = R.nn.relu(lv1)
                    s = R.sum(y)
                    R.output(s)
                return s

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((2, 4), dtype="float32"),
                w: R.Tensor((4, 3), dtype="float32"),
                b: R.Tensor((3,), dtype="float32"),
            ) -> R.Tensor((), dtype="float32"):
                with R.dataflow():
                    y: R.Tensor((2, 3), dtype="float32") = cls.fused_matmul_add_relu(x, w, b)
                    s: R.Tensor((), dtype="float32") = R.sum(y)
                    R.output(s)
                return s

            @R.function
            def fused_matmul_add_relu(
                x: R.Tensor((2, 4), dtype="float32"),
                w: R.Tensor((4, 3), dtype="float32"),
                b: R.Tensor((3,), dtype="float32"),
            ) -> R.Tensor((2, 3), dtype="float32"):
                R.func_attr({"Primitive": True})
                lv: R.Tensor((2, 3), dtype="float32") = R.matmul(x, w)
                lv1: R.Tensor((2, 3), dtype="float32") = R.add(lv, b)
                y: R.Tensor((2, 3), dtype="float32") = R.nn.relu(lv1)
                return y
    """

    name = "FuseOps"
    fuse_opt_level: int = -1

    def transform_module(self, mod, ctx):
        level = ctx.opt_level if self.fuse_opt_level < 0 else self.fuse_opt_level
        if level < 1:
            return mod
        out, changed = mod.copy(), False
        for name, func in mod.items():
            if not isinstance(func, Function) or not isinstance(func.body, SeqExpr) or "Primitive" in func.attrs \
                    or "Composite" in func.attrs:
                continue
            new = self._function(func, out)
            if new is not func:
                out[name], changed = new, True
        return out if changed else mod

    def _function(self, func: Function, out) -> Function:
        users: dict[Var, int] = {}
        for block in func.body.blocks:
            for b in block.bindings:
                for v in free_vars(b.value):
                    users[v] = users.get(v, 0) + 1
        for v in free_vars(func.body.body):
            users[v] = users.get(v, 0) + 1
        blocks, changed = [], False
        for block in func.body.blocks:
            new = self._block(block, users, out) if isinstance(block, DataflowBlock) else block
            changed |= new is not block
            blocks.append(new)
        if not changed:
            return func
        return Function(func.params, SeqExpr(blocks, func.body.body), func.ret_struct_info, func.attrs, func.is_pure,
                        span=func.span)

    @staticmethod
    def _block(block, users: dict, out):
        bindings = list(block.bindings)
        group_of: dict[int, int] = {}          # binding index -> group id (its first binding's index)
        members: dict[int, list[int]] = {}
        index = {b.var: i for i, b in enumerate(bindings)}
        for i, b in enumerate(bindings):
            if isinstance(b, MatchCast) or not isinstance(b.value, Call):
                continue
            kind = op_kind(b.value)
            joined: Optional[int] = None
            if kind == "elementwise":
                for a in b.value.args:
                    j = index.get(a) if isinstance(a, Var) else None
                    if j is not None and j < i and j in group_of and users.get(a, 0) == 1 \
                            and members[group_of[j]][-1] == j:  # the chain's end feeds this op, and only it
                        joined = group_of[j]
                        break
            if kind == "opaque":
                continue
            gid = joined if joined is not None else i
            group_of[i] = gid
            members.setdefault(gid, []).append(i)
        groups = {gid: m for gid, m in members.items() if len(m) >= 2}
        if not groups:
            return block
        roots = {m[-1]: m for m in groups.values()}
        taken = {i for m in groups.values() for i in m}
        new = []
        for i, b in enumerate(bindings):
            if i in roots:
                group = [bindings[j] for j in roots[i]]
                name = "fused_" + "_".join(g.value.op.name.split(".")[-1] for g in group)
                new.append(outline_group(name, group, b, out, {"Primitive": True}))
            elif i not in taken:
                new.append(b)
        return type(block)(new)
