"""``CombineParallelMatmul``: matmuls that share their left operand become one matmul against the weights
concatenated, followed by a split, as TVM's pass of that name (the query, key and value projections of attention;
LoRA's base and low-rank products after ``ExpandMatmulOfSum``): one larger product keeps the vector units busier
and reads ``x`` once.

    q = R.matmul(x, wq)        ->    combined_weight = R.concat((wq, wk, wv), axis=1)
    k = R.matmul(x, wk)              combined = R.matmul(x, combined_weight)
    v = R.matmul(x, wv)              combined_parts = R.split(combined, (64, 128), axis=1)
                                     q = combined_parts[0]
                                     k = combined_parts[1]
                                     v = combined_parts[2]

Within one binding block: the matmuls with the same left operand (the same variable), 2-D right operands of one
dtype with the same number of rows and static column counts, and the same ``out_dtype``; every right operand must
be defined before the first of them (the combined product takes the first one's place). ``check(x, weights)``, if
given, decides per group (TVM's ``check`` callback: e.g. only for weights that are parameters). TVM also merges the
bias additions and activations that follow every branch alike; here they stay per branch (MLIR's elementwise
fusion then fuses each with the slice it reads).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from .. import op
from ..ir.expr import Call, DataflowBlock, DataflowVar, Function, MatchCast, SeqExpr, Tuple, TupleGetItem, Var, \
    VarBinding
from .rewrite_pass import FunctionRewritePass, static_shape


def _candidate(binding) -> Optional[tuple[Var, Var, Any]]:
    """(x, w, out_dtype) of a binding ``y = R.matmul(x, w)`` with variables on both sides and a static 2-D ``w``."""
    if isinstance(binding, MatchCast) or not isinstance(binding.value, Call):
        return None
    call = binding.value
    if getattr(call.op, "name", "") != "relax.matmul" or not all(isinstance(a, Var) for a in call.args):
        return None
    x, w = call.args
    shape = static_shape(w)
    if shape is None or len(shape) != 2:
        return None
    return x, w, call.attrs.get("out_dtype")


@dataclass(frozen=True)
class CombineParallelMatmul(FunctionRewritePass):
    """Merge matmuls sharing a left operand into one (TVM's ``CombineParallelMatmul``).

    Example, applied as ``CombineParallelMatmul()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2, 4), "float32"), a: R.Tensor((4, 3), "float32"), b: R.Tensor((4, 5), "float32")):
                with R.dataflow():
                    ya = R.matmul(x, a)
                    yb = R.matmul(x, b)
                    y = R.add(R.sum(ya), R.sum(yb))
                    R.output(y)
                return y

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((2, 4), dtype="float32"),
                a: R.Tensor((4, 3), dtype="float32"),
                b: R.Tensor((4, 5), dtype="float32"),
            ) -> R.Tensor((), dtype="float32"):
                with R.dataflow():
                    combined_weight: R.Tensor((4, 8), dtype="float32") = R.concat((a, b), axis=1)
                    combined: R.Tensor((2, 8), dtype="float32") = R.matmul(x, combined_weight)
                    combined_parts: R.Tuple(R.Tensor((2, 3), dtype="float32"), R.Tensor((2, 5), dtype="float32")) = R.split(combined, (3,), axis=1)
                    ya: R.Tensor((2, 3), dtype="float32") = combined_parts[0]
                    yb: R.Tensor((2, 5), dtype="float32") = combined_parts[1]
                    lv: R.Tensor((), dtype="float32") = R.sum(ya)
                    lv1: R.Tensor((), dtype="float32") = R.sum(yb)
                    y: R.Tensor((), dtype="float32") = R.add(lv, lv1)
                    R.output(y)
                return y
    """

    name = "CombineParallelMatmul"
    check: Optional[Callable[[Var, list], bool]] = None

    def rewrite_function(self, func: Function) -> Function:
        blocks = [self._block(block, set(func.params)) for block in func.body.blocks]
        if all(a is b for a, b in zip(blocks, func.body.blocks)):
            return func
        return Function(func.params, SeqExpr(blocks, func.body.body), func.ret_struct_info, func.attrs, func.is_pure,
                        span=func.span)

    def _block(self, block, params: set):
        bindings = list(block.bindings)
        position = {b.var: i for i, b in enumerate(bindings)}
        groups: dict[tuple, list[int]] = {}
        for i, b in enumerate(bindings):
            found = _candidate(b)
            if found is None:
                continue
            x, w, out_dtype = found
            rows, _ = static_shape(w)
            groups.setdefault((x, rows, w.struct_info.dtype, out_dtype), []).append(i)
        replace: dict[int, list] = {}
        drop: set[int] = set()
        dataflow = isinstance(block, DataflowBlock)
        for (x, _, _, out_dtype), members in groups.items():
            members = [i for i in members
                       if bindings[i].value.args[1] in params or position.get(bindings[i].value.args[1], len(bindings))
                       < members[0]]
            weights = [bindings[i].value.args[1] for i in members]
            if len(members) < 2 or (self.check is not None and not self.check(x, weights)):
                continue
            replace[members[0]] = self._combined(x, weights, [bindings[i].var for i in members], out_dtype, dataflow)
            drop.update(members[1:])
        if not replace:
            return block
        new = []
        for i, b in enumerate(bindings):
            if i in replace:
                new += replace[i]
            elif i not in drop:
                new.append(b)
        return type(block)(new)

    @staticmethod
    def _combined(x: Var, weights: list, outs: list, out_dtype, dataflow: bool) -> list:
        make = DataflowVar if dataflow else Var
        cat = op.concat(Tuple(weights), axis=1)
        wv = make("combined_weight", cat.struct_info)
        prod = op.matmul(x, wv, out_dtype=out_dtype)
        pv = make("combined", prod.struct_info)
        cuts, total = [], 0
        for w in weights[:-1]:
            total += static_shape(w)[1]
            cuts.append(total)
        axis = len(static_shape(prod) or prod.struct_info.shape) - 1
        parts = op.split(pv, cuts, axis=axis)
        sv = make("combined_parts", parts.struct_info)
        out = [VarBinding(wv, cat), VarBinding(pv, prod), VarBinding(sv, parts)]
        for i, var in enumerate(outs):
            out.append(VarBinding(var, TupleGetItem(sv, i)))
        return out
