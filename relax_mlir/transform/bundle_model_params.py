"""``BundleModelParams(param_tuple_name=None)``: the model parameters of a function become one tuple parameter, as
TVM's pass.

    def main(x, w, b):                         def main(x, model_params: R.Tuple(W, B)):
        R.func_attr({"num_input": 1})   ->         R.func_attr({"num_input": 1})
        ...                                        w = model_params[0]
                                                   b = model_params[1]
                                                   ...

A function with the attribute ``num_input = k`` (TVM's convention) keeps its first ``k`` parameters; the rest are
bundled into a tuple named ``param_tuple_name`` (default ``"model_params"``) and read back by the first bindings
of the body. Calls of it inside the module pass a tuple. Functions without ``num_input`` are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..ir.expr import BindingBlock, Function, SeqExpr, Tuple, TupleGetItem, Var, VarBinding
from ..ir.module import IRModule
from ..ir.struct_info import TupleStructInfo
from ..ir.visitor import ExprMutator
from .call_sites import rewrite_call_sites
from .pass_infra import Pass, PassContext


def bundle(func: Function, k: int, name: str) -> Function:
    """``func`` with the parameters after the first ``k`` bundled into one tuple parameter ``name``."""
    kept, rest = list(func.params[:k]), list(func.params[k:])
    bundled = Var(name, TupleStructInfo([p.struct_info for p in rest]))
    unpack = [VarBinding(p, TupleGetItem(bundled, i)) for i, p in enumerate(rest)]
    body = SeqExpr([BindingBlock(unpack), *func.body.blocks], func.body.body)
    return Function(kept + [bundled], body, func.ret_struct_info, func.attrs, func.is_pure, span=func.span)


@dataclass(frozen=True)
class BundleModelParams(Pass):
    """Bundle the parameters after ``num_input`` into one tuple parameter.

    Example, applied as ``BundleModelParams()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2, 3), "float32"), w: R.Tensor((3, 4), "float32"), b: R.Tensor((4,), "float32")):
                R.func_attr({"num_input": 1})
                y = R.matmul(x, w)
                z = R.add(y, b)
                return z

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((2, 3), dtype="float32"),
                model_params: R.Tuple(R.Tensor((3, 4), dtype="float32"), R.Tensor((4,), dtype="float32")),
            ) -> R.Tensor((2, 4), dtype="float32"):
                R.func_attr({"num_input": 1})
                w: R.Tensor((3, 4), dtype="float32") = model_params[0]
                b: R.Tensor((4,), dtype="float32") = model_params[1]
                y: R.Tensor((2, 4), dtype="float32") = R.matmul(x, w)
                z: R.Tensor((2, 4), dtype="float32") = R.add(y, b)
                return z
    """

    name = "BundleModelParams"

    param_tuple_name: Optional[str] = None

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out, rewrites = mod.copy(), {}
        for fname, func in mod.items():
            k = func.attrs.get("num_input")
            if k is None:
                continue
            if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= len(func.params):
                raise ValueError(f"BundleModelParams: {fname} has num_input={k!r}; expected an integer from 0 to "
                                 f"its {len(func.params)} parameters")
            out[fname] = bundle(func, k, self.param_tuple_name or "model_params")
            rewrites[fname] = lambda args, k=k: list(args[:k]) + [Tuple(args[k:])]
        if not rewrites:
            return mod
        return ExprMutator(out).mutate_module(rewrite_call_sites(out, rewrites))
