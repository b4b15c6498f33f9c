"""``LazyGetInput``: a function's weights are asked for through a callback instead of being parameters, as TVM's
pass of that name (for weights that do not all fit in memory at once):

    def main(x, w):                      ->    def main(x, fget_param):
        R.func_attr({"num_input": 1})              R.func_attr({"num_input": 2})
        y = R.matmul(x, w)                         w_untyped = fget_param(R.prim_value(0), R.str("w"))
        return y                                   w = R.match_cast(w_untyped, R.Tensor((4, 3), "float32"))
                                                   y = R.matmul(x, w)
                                                   return y

The weights are the parameters after ``num_input`` (a function without the attribute, or a private one, is left
alone). They are replaced by one parameter ``fget_param: R.Callable([R.Prim("int64"), R.Object], R.Object)``
placed after the run-time inputs (``num_input`` grows by one); the function asks for each weight it reads, at its
start, with the weight's index among the weights and its name, and checks the answer with ``R.match_cast``
against the weight's struct info (its symbolic sizes defined there). ``relax_mlir.interpret`` calls the callback
(any Python callable); compiled code cannot call back into Python.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import BindingBlock, Call, Function, MatchCast, PrimValue, SeqExpr, StringImm, Var, VarBinding
from ..ir.struct_info import FuncStructInfo, ObjectStructInfo, PrimStructInfo
from .pass_infra import Pass
from .utils import all_var_uses, private_functions

#: The callback's signature: (index, name) -> the value.
FGET_SINFO = FuncStructInfo([PrimStructInfo("int64"), ObjectStructInfo()], ObjectStructInfo())


@dataclass(frozen=True)
class LazyGetInput(Pass):
    """Replace a function's weights by a callback that loads each one (TVM's ``LazyGetInput``).

    Example, applied as ``LazyGetInput()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((4, 3), "float32")):
                R.func_attr({"num_input": 1})
                y = R.matmul(x, w)
                return y

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((2, 4), dtype="float32"),
                fget_param: R.Callable((R.Prim("int64"), R.Object), R.Object),
            ) -> R.Tensor((2, 3), dtype="float32"):
                R.func_attr({"num_input": 2})
                w_untyped: R.Object = fget_param(R.prim_value(0), R.str("w"))
                w = R.match_cast(w_untyped, R.Tensor((4, 3), dtype="float32"))
                y: R.Tensor((2, 3), dtype="float32") = R.matmul(x, w)
                return y
    """

    name = "LazyGetInput"

    def transform_module(self, mod, ctx):
        private = private_functions(mod)
        out, changed = mod.copy(), False
        for name, func in mod.items():
            if name in private or not isinstance(func, Function) or "num_input" not in func.attrs:
                continue
            out[name], changed = lazy_inputs(func), True
        return out if changed else mod


def lazy_inputs(func: Function) -> Function:
    """``func`` with its weights (parameters after ``num_input``) loaded through ``fget_param``."""
    num_input = int(func.attrs["num_input"])
    inputs, weights = list(func.params[:num_input]), list(func.params[num_input:])
    fget = Var("fget_param", FGET_SINFO)
    used = all_var_uses(func.body)
    prologue = []
    for index, w in enumerate(weights):
        if w not in used:
            continue
        untyped = Var(f"{w.name_hint}_untyped", ObjectStructInfo())
        ask = Call(fget, [PrimValue(index, "int64"), StringImm(w.name_hint)], {}, ObjectStructInfo())
        prologue += [VarBinding(untyped, ask), MatchCast(w, untyped, w.struct_info)]
    body = func.body
    if prologue:
        body = SeqExpr([BindingBlock(prologue), *body.blocks], body.body, span=body.span)
    attrs = dict(func.attrs, num_input=num_input + 1)
    return Function(inputs + [fget], body, func.ret_struct_info, attrs, func.is_pure, span=func.span)
