"""``RemovePurityChecking``: every pure function is marked ``relax.force_pure`` (TVM's attribute), so later
passes and the VM treat its body as pure without checking it.

In TVM the pass also unwraps ``call_pure_packed``/``invoke_pure_closure`` into their plain forms; relax-mlir's
host calls are ``R.call_packed`` only (impure, nothing to unwrap) and it has no closure objects, so marking is all
there is to do. Functions declared impure stay unmarked.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import Function
from .pass_infra import Pass


@dataclass(frozen=True)
class RemovePurityChecking(Pass):
    """Mark every pure function ``relax.force_pure`` (TVM's ``RemovePurityChecking``).

    Example, applied as ``RemovePurityChecking()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((3,), "float32")):
                y = R.exp(x)
                return y

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
                R.func_attr({"relax.force_pure": True})
                y: R.Tensor((3,), dtype="float32") = R.exp(x)
                return y
    """

    name = "RemovePurityChecking"

    def transform_module(self, mod, ctx):
        out = mod.copy()
        for name, func in mod.items():
            if isinstance(func, Function) and func.is_pure and not func.attrs.get("relax.force_pure"):
                out[name] = func.with_attr("relax.force_pure", True)
        return out
