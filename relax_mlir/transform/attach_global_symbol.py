"""``AttachGlobalSymbol``: give every entry function a ``global_symbol`` attribute equal to its name, as TVM's pass.

Entry functions are those ``utils.private_functions`` does not name; internal ones stay without a symbol (in TVM,
``private=True`` functions). A function that already has a symbol keeps it.

    @R.function                    @R.function
    def main(x):           ->      def main(x):
        ...                            R.func_attr({"global_symbol": "main"})
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import IRModule
from .pass_infra import Pass, PassContext
from .utils import private_functions


@dataclass(frozen=True)
class AttachGlobalSymbol(Pass):
    """Attach ``global_symbol`` = the function's name to every entry function without one.

    Example, applied as ``AttachGlobalSymbol()``::

        @I.ir_module
        class Module:
            @R.function
            def helper(a: R.Tensor((3,), "float32")):
                return a

            @R.function
            def main(x: R.Tensor((3,), "float32")):
                y = cls.helper(x)
                return y

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def helper(a: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
                return a

            @R.function
            def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
                R.func_attr({"global_symbol": "main"})
                y: R.Tensor((3,), dtype="float32") = cls.helper(x)
                return y
    """

    name = "AttachGlobalSymbol"

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        private = private_functions(mod)
        out = mod.copy()
        for name, func in mod.items():
            if name not in private and "global_symbol" not in func.attrs:
                out[name] = func.with_attr("global_symbol", name)
        return out
