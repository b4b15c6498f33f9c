"""``MergeCompositeFunctions``: calls of ``Composite`` functions (``FuseOpsByPattern``'s groups) bound for one code
generator are merged into one function per connected group, annotated ``Codegen`` and ``global_symbol``, as TVM's
pass of that name (whose merged functions ``RunCodegen`` then hands to that generator):

    lv = cls.fused_dnnl_conv2d(x, w)       ->    y = cls.fused_relax_nn_conv2d_relax_nn_relu(x, w)
    y = cls.fused_dnnl_relu(lv)
                                                 def fused_relax_nn_conv2d_relax_nn_relu(x, w):
                                                     R.func_attr({"Codegen": "dnnl", "global_symbol": ...})
                                                     @R.function
                                                     def fused_dnnl_conv2d(...): ...   # the composites, local
                                                     ...
                                                     lv = fused_dnnl_conv2d(x, w)
                                                     y = fused_dnnl_relu(lv)
                                                     return y

A composite's code generator is its pattern name up to the first dot (``"dnnl.conv2d_relu"`` -> ``dnnl``; a name
without a dot is refused, as TVM refuses it). Within each dataflow block, a composite call joins the group of an
argument's producer bound for the same generator unless that would make a cycle (a value leaving the group and
coming back through a binding outside it); unconnected calls stay in groups of their own, each merged function
then wrapping one call. A group's values read outside it become the merged function's results (a tuple when
there are several). The block is then put in dependency order (dataflow blocks are pure; plain blocks are left
as they are). The merged function is named ``fused_`` and the ops of its composites (TVM's naming), its
composites become local functions inside it, and composite functions no longer called are removed.

There is no external code generator on this target: ``relax_mlir.compile`` compiles a ``Codegen`` function as any
other (local functions lifted, then inlined by MLIR), so the pass changes structure, not numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import (BindingBlock, Call, DataflowBlock, DataflowVar, Function, GlobalVar, SeqExpr, Tuple,
                       TupleGetItem, Var, VarBinding)
from ..ir.module import IRModule
from ..ir.struct_info import FuncStructInfo, TupleStructInfo
from ..ir.visitor import post_order_visit
from ..dpl import in_dependency_order
from ..op.registry import Op
from .pass_infra import Pass
from .utils import callees, free_vars, group_inputs, substitute, unique_function_name


def codegen_name(composite: str) -> str:
    """The code generator of a composite pattern name: what precedes its first dot."""
    if "." not in composite:
        raise ValueError(f"MergeCompositeFunctions: composite {composite!r} does not name a code generator; pattern "
                         "names should be '<codegen>.<name>', e.g. 'dnnl.conv2d_relu'")
    return composite.split(".", 1)[0]


@dataclass(frozen=True)
class MergeCompositeFunctions(Pass):
    """Merge connected calls of composite functions bound for one code generator into ``Codegen`` functions
    (TVM's ``MergeCompositeFunctions``).

    Example, applied as ``MergeCompositeFunctions()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((4, 3), "float32")):
                with R.dataflow():
                    lv = cls.fused_mm(x, w)
                    y = cls.fused_relu(lv)
                    R.output(y)
                return y

            @R.function
            def fused_mm(a: R.Tensor((2, 4), "float32"), b: R.Tensor((4, 3), "float32")):
                R.func_attr({"Composite": "cpu.matmul", "Primitive": True})
                c = R.matmul(a, b)
                return c

            @R.function
            def fused_relu(a: R.Tensor((2, 3), "float32")):
                R.func_attr({"Composite": "cpu.relu", "Primitive": True})
                c = R.nn.relu(a)
                return c

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((2, 4), dtype="float32"),
                w: R.Tensor((4, 3), dtype="float32"),
            ) -> R.Tensor((2, 3), dtype="float32"):
                with R.dataflow():
                    y: R.Tensor((2, 3), dtype="float32") = cls.fused_relax_matmul_relax_nn_relu(x, w)
                    R.output(y)
                return y

            @R.function
            def fused_relax_matmul_relax_nn_relu(
                x: R.Tensor((2, 4), dtype="float32"),
                w: R.Tensor((4, 3), dtype="float32"),
            ) -> R.Tensor((2, 3), dtype="float32"):
                R.func_attr({"Codegen": "cpu", "global_symbol": "fused_relax_matmul_relax_nn_relu"})
                @R.function
                def fused_mm(a: R.Tensor((2, 4), dtype="float32"), b: R.Tensor((4, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
                    R.func_attr({"Composite": "cpu.matmul", "Primitive": True})
                    c: R.Tensor((2, 3), dtype="float32") = R.matmul(a, b)
                    return c
                @R.function
                def fused_relu(a_1: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
                    R.func_attr({"Composite": "cpu.relu", "Primitive": True})
                    c_1: R.Tensor((2, 3), dtype="float32") = R.nn.relu(a_1)
                    return c_1
                lv: R.Tensor((2, 3), dtype="float32") = fused_mm(x, w)
                y: R.Tensor((2, 3), dtype="float32") = fused_relu(lv)
                return y
    """

    name = "MergeCompositeFunctions"

    def transform_module(self, mod, ctx):
        composites = {name: codegen_name(f.attrs["Composite"]) for name, f in mod.items()
                      if isinstance(f, Function) and "Composite" in f.attrs}
        if not composites:
            return mod
        out = mod.copy()
        for name, func in mod.items():
            if name in composites or not isinstance(func, Function) or not isinstance(func.body, SeqExpr):
                continue
            blocks = [_Merger(mod, out, composites).block(b) if isinstance(b, DataflowBlock) else b
                      for b in func.body.blocks]
            if any(a is not b for a, b in zip(blocks, func.body.blocks)):
                out[name] = Function(func.params, SeqExpr(blocks, func.body.body), func.ret_struct_info, func.attrs,
                                     func.is_pure, span=func.span)
        still_called = set().union(*(callees(f) for n, f in out.items() if n not in composites))
        return IRModule({n: f for n, f in out.items() if n not in composites or n in still_called}, out.attrs)


class _Merger:
    def __init__(self, mod: IRModule, out: IRModule, composites: dict[str, str]):
        self.mod, self.out, self.composites = mod, out, composites

    def codegen_of(self, value) -> str | None:
        if isinstance(value, Call) and isinstance(value.op, GlobalVar):
            return self.composites.get(value.op.name_hint)
        return None

    def block(self, block: DataflowBlock) -> DataflowBlock:
        bindings = list(block.bindings)
        index = {b.var: i for i, b in enumerate(bindings)}
        group_of: dict[int, int] = {}  # binding index -> group id
        members: dict[int, list[int]] = {}
        codegen: dict[int, str] = {}
        for i, b in enumerate(bindings):
            k = self.codegen_of(b.value) if isinstance(b, VarBinding) else None
            if k is None:
                continue
            groups = []
            for v in free_vars(b.value):
                j = index.get(v)
                g = group_of.get(j) if j is not None else None
                if g is not None and codegen[g] == k and g not in groups:
                    groups.append(g)
            merged, joined = [i], []
            for g in groups:
                if not _makes_cycle(set(merged + members[g]), bindings, index):
                    merged += members[g]
                    joined.append(g)
            target = joined[0] if joined else i
            for g in joined[1:]:  # groups joined through this call
                del members[g]
            members[target], codegen[target] = sorted(merged), k
            for j in merged:
                group_of[j] = target
        if not members:
            return block
        return self.rebuild(block, bindings, members, codegen)

    def rebuild(self, block, bindings, members, codegen) -> DataflowBlock:
        placed: dict[int, list] = {}
        dropped: set[int] = set()
        for g, idx in members.items():
            idx = sorted(idx)
            group = [bindings[j] for j in idx]
            outside_users = _used_outside(block, set(idx), bindings)
            outputs = [b.var for b in group if b.var in outside_users or not isinstance(b.var, DataflowVar)]
            placed[idx[-1]] = self.outline(group, outputs, codegen[g])
            dropped.update(idx)
        new = []
        for i, b in enumerate(bindings):
            if i in placed:
                new += placed[i]
            elif i not in dropped:
                new.append(b)
        return DataflowBlock(in_dependency_order(new))  # the cycle check above rules a cycle out

    def outline(self, group: list, outputs: list[Var], codegen: str) -> list:
        inputs = group_inputs(group)
        params = {v: Var(v.name_hint, v.struct_info, span=v.span) for v in inputs}
        remap: dict = dict(params)
        locals_: dict[str, Var] = {}
        body = []
        for b in group:  # the composites first, as local functions
            callee = b.value.op.name_hint
            if callee not in locals_:
                fn = self.mod[callee]
                locals_[callee] = Var(callee, fn.struct_info)
                body.append(VarBinding(locals_[callee], fn))
        for b in group:
            callee = b.value.op.name_hint
            var = Var(b.var.name_hint, b.var.struct_info, span=b.var.span)
            args = [substitute(a, remap) for a in b.value.args]
            body.append(VarBinding(var, Call(locals_[callee], args, {}, b.var.struct_info), span=b.span))
            remap[b.var] = var
        if len(outputs) == 1:
            result, ret = remap[outputs[0]], outputs[0].struct_info
        else:
            result = Tuple([remap[v] for v in outputs])
            ret = TupleStructInfo([v.struct_info for v in outputs])
        name = unique_function_name("fused_" + "_".join(self.op_names(b.value.op.name_hint) for b in group),
                                    self.out)
        fn = Function([params[v] for v in inputs], SeqExpr([BindingBlock(body)], result), ret,
                      {"Codegen": codegen, "global_symbol": name}, True)
        self.out[name] = fn
        gvar = GlobalVar(name, FuncStructInfo([p.struct_info for p in fn.params], ret))
        call = Call(gvar, tuple(inputs), {}, ret)
        if len(outputs) == 1:
            return [VarBinding(outputs[0], call)]
        packed = DataflowVar(f"{name}_out", ret)
        return [VarBinding(packed, call)] + [VarBinding(v, TupleGetItem(packed, i)) for i, v in enumerate(outputs)]

    def op_names(self, composite: str) -> str:
        names: list[str] = []
        post_order_visit(self.mod[composite].body, lambda e: names.append(e.op.name.replace(".", "_"))
                         if isinstance(e, Call) and isinstance(e.op, Op) else None)
        return "_".join(names) or composite


def _makes_cycle(group: set[int], bindings: list, index: dict) -> bool:
    """Whether a binding outside ``group`` reads a value of ``group`` and is read by ``group`` (directly or through
    other bindings outside it): merged into one call, the group would then depend on itself."""
    for i in group:
        stack = [index[v] for v in free_vars(bindings[i].value) if v in index and index[v] not in group]
        seen: set[int] = set()
        while stack:
            j = stack.pop()
            if j in seen:
                continue
            seen.add(j)
            for v in free_vars(bindings[j].value):
                k = index.get(v)
                if k is None:
                    continue
                if k in group:
                    return True
                stack.append(k)
    return False


def _used_outside(block, group: set[int], bindings: list) -> set[Var]:
    used: set[Var] = set()
    for i, b in enumerate(bindings):
        if i not in group:
            used.update(free_vars(b.value))
    return used
