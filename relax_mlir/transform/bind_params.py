"""``BindParams(func_name, params)``: parameters become constants (weights baked into an inference function).

    def main(x: R.Tensor(("n", 4)), w: R.Tensor((4, 2))):      def main(x: R.Tensor(("n", 4))):
        y = R.matmul(x, w)                              ->          y = R.matmul(x, R.const(<w>))

``params`` maps parameter names (or the parameter ``Var``s) to arrays (anything ``numpy.asarray`` takes, or an
object with ``.numpy()``). Each array must have the parameter's dtype and rank; a symbolic size of the parameter
is bound to the array's (and follows everywhere in the function, as ``BindSymbolicVars``). A name the function
has no parameter of is an error naming its parameters, and so is a function another one calls (its calls would
still pass the bound parameters).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..ir.dtype import to_numpy
from ..ir.expr import Constant, Function, Var
from ..ir.struct_info import TensorStructInfo
from ..ir.sym import SymDim
from .pass_infra import Pass
from .utils import bind_sizes, callees


@dataclass(frozen=True)
class BindParams(Pass):
    """Replace parameters of ``func_name`` by the constant arrays ``params`` gives.

    Example, applied as ``BindParams("main", {"b": [1.0, 2.0]})``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor(("n", 2), "float32"), b: R.Tensor((2,), "float32")):
                y = R.add(x, b)
                return y

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor(("n", 2), dtype="float32")) -> R.Tensor(("n", 2), dtype="float32"):
                y: R.Tensor(("n", 2), dtype="float32") = R.add(x, R.const([1.0, 2.0], "float32"))
                return y
    """

    func_name: str
    params: Mapping[Any, Any]
    name = "BindParams"

    def transform_module(self, mod, ctx):
        if self.func_name not in mod or not isinstance(mod[self.func_name], Function):
            raise ValueError(f"BindParams: the module has no function {self.func_name!r} (it has: {', '.join(mod)})")
        func = mod[self.func_name]
        by_name = {p.name_hint: p for p in func.params}
        bound: dict[Var, np.ndarray] = {}
        for key, value in dict(self.params).items():
            param = key if isinstance(key, Var) and key in func.params else by_name.get(key)
            if param is None:
                raise ValueError(f"BindParams: {self.func_name} has no parameter {getattr(key, 'name_hint', key)!r}; "
                                 f"its parameters: {', '.join(by_name)}")
            bound[param] = _array(param, value, self.func_name)
        sizes = {}
        for param, array in bound.items():
            for d, n in zip(param.struct_info.shape, array.shape):
                if isinstance(d, SymDim) and d.is_var():
                    if sizes.setdefault(d.name, n) != n:
                        raise ValueError(f"BindParams: size {d.name!r} is {sizes[d.name]} by one array and {n} by "
                                         f"{param.name_hint!r}")
        _refuse_callers(mod, self.func_name, [p.name_hint for p in bound])
        kept = [p for p in func.params if p not in bound]
        out = mod.copy()
        out[self.func_name] = bind_sizes(func, sizes, params=kept,
                                         replace={p: Constant(a) for p, a in bound.items()})
        return out


def _refuse_callers(mod, func_name: str, names: list[str]) -> None:
    """A function of the module that calls ``func_name`` (or refers to it) would pass it the arguments it no longer
    takes, and its values for them would be replaced by the arrays: refused, as the calls are not rewritten."""
    callers = [c for c in mod if isinstance(mod[c], Function) and func_name in callees(mod[c])]
    if callers:
        raise ValueError(f"BindParams: {callers[0]!r} calls {func_name!r}, which would no longer take "
                         f"{', '.join(map(repr, names))} (its calls are not rewritten); bind the values in the "
                         f"function they come from, or inline {func_name!r} into {callers[0]!r} first "
                         f"(InlineFunctions([{callers[0]!r}]))")


def _array(param: Var, value: Any, where: str) -> np.ndarray:
    sinfo = param.struct_info
    if not isinstance(sinfo, TensorStructInfo):
        raise TypeError(f"BindParams: {where}: parameter {param.name_hint!r} is {sinfo}, not a tensor")
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        value = value.numpy()
    array = np.asarray(value)
    dtype = to_numpy(sinfo.dtype)
    if array.dtype != dtype:
        if not np.can_cast(array.dtype, dtype, "same_kind"):
            raise TypeError(f"BindParams: {where}: parameter {param.name_hint!r} is {sinfo.dtype}, got an array of "
                            f"{array.dtype}")
        from ..backend.arguments import conform  # the policy of compiled calls: a value the dtype holds, or refused

        converted, problem = conform(array, dtype)
        if converted is None:  # a float beyond float32 (it would become inf), an integer float32 would round
            raise ValueError(f"BindParams: {where}: parameter {param.name_hint!r}: {problem}")
        array = converted
    if sinfo.shape is not None:
        if array.ndim != len(sinfo.shape) or any(isinstance(d, int) and d != n
                                                   for d, n in zip(sinfo.shape, array.shape)):
            raise ValueError(f"BindParams: {where}: parameter {param.name_hint!r} has shape "
                             f"({', '.join(map(str, sinfo.shape))}), got an array of shape {array.shape}")
    return np.array(array, order="C", copy=True)  # (ascontiguousarray would make a 0-d array 1-d)
