"""``InlinePrivateFunctions``: inline every call of an internal function and remove the function, as TVM's pass.

    def helper(a):                      (gone)
        return R.add(a, a)
    def main(x):                 ->     def main(x):
        y = cls.helper(x)                   b = R.add(x, x)
                                            y = b

Internal functions are those ``utils.private_functions`` names (no ``global_symbol``, called inside the module).
A recursive internal function is refused with the cycle named (as InlineFunctions does).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import IRModule
from .inline_functions import inline_calls
from .pass_infra import Pass, PassContext
from .utils import callees, private_functions


@dataclass(frozen=True)
class InlinePrivateFunctions(Pass):
    """Inline the calls of internal functions, then drop those functions.

    Example, applied as ``InlinePrivateFunctions()``::

        @I.ir_module
        class Module:
            @R.function
            def helper(a: R.Tensor((3,), "float32")):
                b = R.add(a, a)
                return b

            @R.function
            def main(x: R.Tensor((3,), "float32")):
                y = cls.helper(x)
                z = R.exp(y)
                return z

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
                b: R.Tensor((3,), dtype="float32") = R.add(x, x)
                y: R.Tensor((3,), dtype="float32") = b
                z: R.Tensor((3,), dtype="float32") = R.exp(y)
                return z
    """

    name = "InlinePrivateFunctions"

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        private = frozenset(private_functions(mod))
        if not private:
            return mod
        out = IRModule({}, mod.attrs)
        for name, func in mod.items():
            if name not in private:
                out[name] = inline_calls(func, mod, (name,), only=private)
        still_used = set().union(*(callees(f) for _, f in out.items())) if len(out) else set()
        for name in private & still_used:  # referenced other than by a call (a function value): kept
            out[name] = mod[name]
        return out
