"""``ExpandTupleArguments``: an internal function's tuple parameter becomes one parameter per field, and its
calls pass the fields, as TVM's pass.

    def helper(t: R.Tuple(A, B)):             def helper(t_0: A, t_1: B):
        a = t[0]                        ->        t = (t_0, t_1)
                                                  a = t[0]
    ... cls.helper(pair) ...                  ... cls.helper(pair[0], pair[1]) ...

Nested tuples are expanded until no tuple parameter is left. CanonicalizeBindings then folds ``t[0]`` to ``t_0``.
Entry functions (see ``utils.private_functions``) keep their signatures.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import BindingBlock, Function, SeqExpr, Tuple, TupleGetItem, Var, VarBinding
from ..ir.module import IRModule
from ..ir.struct_info import TupleStructInfo
from ..ir.visitor import ExprMutator
from .call_sites import rewrite_call_sites
from .pass_infra import Pass, PassContext
from .utils import private_functions


def expand_params(func: Function) -> Function:
    """``func`` with its tuple parameters flattened (one level) and each tuple rebuilt at the top of the body."""
    params, rebuilt = [], []
    for p in func.params:
        if isinstance(p.struct_info, TupleStructInfo):
            fields = [Var(f"{p.name_hint}_{i}", s) for i, s in enumerate(p.struct_info.fields)]
            params.extend(fields)
            rebuilt.append(VarBinding(p, Tuple(fields)))
        else:
            params.append(p)
    body = SeqExpr([BindingBlock(rebuilt), *func.body.blocks], func.body.body)
    return Function(params, body, func.ret_struct_info, func.attrs, func.is_pure, span=func.span)


def expand_args(sinfos: list, args: list) -> list:
    """The arguments for the expanded parameters: a tuple argument's fields (or items of a tuple variable)."""
    out = []
    for sinfo, a in zip(sinfos, args):
        if isinstance(sinfo, TupleStructInfo):
            out.extend(a.fields if isinstance(a, Tuple) else [TupleGetItem(a, i) for i in range(len(sinfo.fields))])
        else:
            out.append(a)
    return out


@dataclass(frozen=True)
class ExpandTupleArguments(Pass):
    """Flatten the tuple parameters of internal functions.

    Example, applied as ``ExpandTupleArguments()``::

        @I.ir_module
        class Module:
            @R.function
            def helper(t: R.Tuple(R.Tensor((3,), "float32"), R.Tensor((3,), "float32"))):
                a = t[0]
                b = t[1]
                c = R.add(a, b)
                return c

            @R.function
            def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")):
                c = cls.helper((x, y))
                return c

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def helper(
                t_0: R.Tensor((3,), dtype="float32"),
                t_1: R.Tensor((3,), dtype="float32"),
            ) -> R.Tensor((3,), dtype="float32"):
                t: R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32")) = (t_0, t_1)
                a: R.Tensor((3,), dtype="float32") = t[0]
                b: R.Tensor((3,), dtype="float32") = t[1]
                c: R.Tensor((3,), dtype="float32") = R.add(a, b)
                return c

            @R.function
            def main(
                x: R.Tensor((3,), dtype="float32"),
                y: R.Tensor((3,), dtype="float32"),
            ) -> R.Tensor((3,), dtype="float32"):
                c: R.Tensor((3,), dtype="float32") = cls.helper(x, y)
                return c
    """

    name = "ExpandTupleArguments"

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        while True:
            private = private_functions(mod)
            todo = [n for n in private if any(isinstance(p.struct_info, TupleStructInfo) for p in mod[n].params)]
            if not todo:
                return mod
            out = mod.copy()
            rewrites = {}
            for name in todo:
                sinfos = [p.struct_info for p in mod[name].params]
                out[name] = expand_params(mod[name])
                rewrites[name] = lambda args, sinfos=sinfos: expand_args(sinfos, args)
            mod = ExprMutator(out).mutate_module(rewrite_call_sites(out, rewrites))  # binds the new tuple items
