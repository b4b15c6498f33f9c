"""``RemoveUnusedParameters``: drop the parameters an internal function never uses, and the matching arguments of
its calls, as TVM's pass.

    def helper(x, unused):             def helper(x):
        return R.exp(x)          ->        return R.exp(x)
    ... cls.helper(a, b) ...           ... cls.helper(a) ...

Only internal functions change (see ``utils.private_functions``: no ``global_symbol``, called inside the module);
an entry point keeps its signature. A parameter whose shape alone defines a size variable the function uses (no
other parameter defines it) stays.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import Function
from ..ir.module import IRModule
from ..ir.struct_info import free_vars as struct_free_vars
from ..ir.well_formed import plain_size_vars
from .bind_symbolic_vars import size_names
from .call_sites import rewrite_call_sites
from .pass_infra import Pass, PassContext
from .utils import all_var_uses, private_functions


def unused_positions(func: Function) -> list[int]:
    """Positions of parameters neither the body uses nor needed to define a size variable used elsewhere."""
    used = all_var_uses(func.body)
    out = []
    for i, p in enumerate(func.params):
        if p in used:
            continue
        others = [q for q in func.params if q is not p]
        defined_elsewhere = set().union(*(plain_size_vars(q.struct_info) for q in others)) if others else set()
        needed = struct_free_vars(p.struct_info) - defined_elsewhere
        if needed & size_names(Function(others, func.body, func.ret_struct_info)):
            continue
        out.append(i)
    return out


@dataclass(frozen=True)
class RemoveUnusedParameters(Pass):
    """Remove unused parameters of internal functions and the arguments passed to them.

    Example, applied as ``RemoveUnusedParameters()``::

        @I.ir_module
        class Module:
            @R.function
            def helper(x: R.Tensor((3,), "float32"), unused: R.Tensor((2,), "float32")):
                y = R.exp(x)
                return y

            @R.function
            def main(a: R.Tensor((3,), "float32"), b: R.Tensor((2,), "float32")):
                y = cls.helper(a, b)
                return y

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def helper(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
                y: R.Tensor((3,), dtype="float32") = R.exp(x)
                return y

            @R.function
            def main(
                a: R.Tensor((3,), dtype="float32"),
                b: R.Tensor((2,), dtype="float32"),
            ) -> R.Tensor((3,), dtype="float32"):
                y: R.Tensor((3,), dtype="float32") = cls.helper(a)
                return y
    """

    name = "RemoveUnusedParameters"

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = mod.copy()
        rewrites = {}
        for name in private_functions(mod):
            func = mod[name]
            drop = set(unused_positions(func))
            if not drop:
                continue
            out[name] = Function([p for i, p in enumerate(func.params) if i not in drop], func.body,
                                 func.ret_struct_info, func.attrs, func.is_pure, span=func.span)
            rewrites[name] = lambda args, drop=drop: [a for i, a in enumerate(args) if i not in drop]
        return rewrite_call_sites(out, rewrites)
