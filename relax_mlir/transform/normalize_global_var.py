"""``NormalizeGlobalVar``: give every public function the name of its ``global_symbol``, as TVM's pass.

A function whose ``global_symbol`` attribute differs from its name in the module is renamed to it (and every call
follows); a function without one (private) that holds the name a public one needs moves aside to ``name_1``
(``_2``, ...). Two public functions claiming one symbol are an error naming both.

    @R.function                                        @R.function
    def f(x):                                 ->       def main(x):
        R.func_attr({"global_symbol": "main"})             R.func_attr({"global_symbol": "main"})
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import IRModule
from .pass_infra import Pass, PassContext
from .utils import rename_functions


def fresh_name(base: str, taken) -> str:
    """``base_1``, ``base_2``, ...: the first not in ``taken``."""
    i = 1
    while f"{base}_{i}" in taken:
        i += 1
    return f"{base}_{i}"


@dataclass(frozen=True)
class NormalizeGlobalVar(Pass):
    """Rename public functions to their ``global_symbol``; private ones in the way move aside.

    Example, applied as ``NormalizeGlobalVar()``::

        @I.ir_module
        class Module:
            @R.function
            def f(x: R.Tensor((3,), "float32")):
                R.func_attr({"global_symbol": "main"})
                y = cls.main(x)
                return y

            @R.function
            def main(x: R.Tensor((3,), "float32")):
                y = R.exp(x)
                return y

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
                R.func_attr({"global_symbol": "main"})
                y: R.Tensor((3,), dtype="float32") = cls.main_1(x)
                return y

            @R.function
            def main_1(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
                y: R.Tensor((3,), dtype="float32") = R.exp(x)
                return y
    """

    name = "NormalizeGlobalVar"

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        wanted: dict[str, str] = {}  # symbol -> current name
        for name, func in mod.items():
            symbol = func.attrs.get("global_symbol")
            if isinstance(symbol, str):
                if symbol in wanted:
                    raise ValueError(f"NormalizeGlobalVar: functions {wanted[symbol]!r} and {name!r} both have "
                                     f"global_symbol {symbol!r}; expected one function per symbol")
                wanted[symbol] = name
        renames = {name: symbol for symbol, name in wanted.items() if name != symbol}
        taken = set(mod) | set(wanted)
        for symbol in list(renames.values()):
            if symbol in mod and symbol not in renames:  # a private function holds the public name
                renames[symbol] = new = fresh_name(symbol, taken)
                taken.add(new)
        return rename_functions(mod, renames) if renames else mod
