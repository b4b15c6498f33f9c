"""``UpdateParamStructInfo(sinfo_func)``: give parameters new struct info and re-infer the functions, as TVM's
pass (used, e.g., to make a batch size symbolic).

    sinfo_func(x) -> R.Tensor(("n", 3)) for x: R.Tensor((8, 3))

``sinfo_func(param)`` returns the parameter's new struct info, or None to keep it. Every binding's struct info
is inferred again from the new parameters; a declared return type that merely restated the old body's struct info
follows the new one. Applies to every function.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from ..ir.expr import Function, Var
from ..ir.module import IRModule
from ..ir.struct_info import StructInfo
from ..ir.visitor import ExprMutator
from .pass_infra import Pass, PassContext


@dataclass(frozen=True)
class UpdateParamStructInfo(Pass):
    """Replace parameter struct info with ``sinfo_func(param)`` and re-infer.

    Example, applied as ``UpdateParamStructInfo(lambda v: relax_mlir.TensorStructInfo(("n", 3), "float32"))``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((8, 3), "float32")):
                y = R.exp(x)
                return y

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor(("n", 3), dtype="float32")) -> R.Tensor(("n", 3), dtype="float32"):
                y: R.Tensor(("n", 3), dtype="float32") = R.exp(x)
                return y
    """

    name = "UpdateParamStructInfo"

    sinfo_func: Callable[[Var], Optional[StructInfo]]

    def __post_init__(self):
        if not callable(self.sinfo_func):
            raise TypeError(f"UpdateParamStructInfo: sinfo_func must be callable (param -> StructInfo or None), "
                            f"got {type(self.sinfo_func).__name__}")

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = mod.copy()
        for name, func in mod.items():
            out[name] = self._update(func, mod, name)
        return out

    def _update(self, func: Function, mod: IRModule, name: str) -> Function:
        mutator = ExprMutator(mod)
        for p in func.params:
            new = self.sinfo_func(p)
            if new is not None and not isinstance(new, StructInfo):
                raise TypeError(f"UpdateParamStructInfo: sinfo_func({p.name_hint}) in {name} returned "
                                f"{type(new).__name__}; expected StructInfo or None")
            if new is not None and new != p.struct_info:
                mutator.var_remap_[p] = Var(p.name_hint, new, span=p.span)
        if not mutator.var_remap_:
            return func
        params = [mutator.var_remap_.get(p, p) for p in func.params]
        body = mutator.visit_expr(func.body)
        ret = body.struct_info if func.ret_struct_info == func.body.struct_info else func.ret_struct_info
        return Function(params, body, ret, func.attrs, func.is_pure, span=func.span)
