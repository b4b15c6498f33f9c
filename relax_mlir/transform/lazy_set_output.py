"""``LazySetOutput``: a function hands each of its results to a callback as soon as it is computed, instead of
returning them all at the end, as TVM's pass of that name (so that each can be stored and freed at once):

    def main(x, w):                      ->    def main(x, w, fset_output):          # R.function(pure=False)
        a = R.exp(x)                               a = R.exp(x)
        b = R.matmul(a, w)                         _ = fset_output(R.prim_value(0), a)
        return (a, b)                              b = R.matmul(a, w)
                                                   _1 = fset_output(R.prim_value(1), b)
                                                   return R.tuple()

Every public function gets the parameter ``fset_output: R.Callable([R.Prim("int64"), R.Object], R.Tuple())``
(after the run-time inputs when there is a ``num_input`` attribute, which then grows by one; last otherwise). It is
called with the result's index in the returned tuple (0 for a single result) and the value: right after the
binding that computes it, after the dataflow block whose output it is (a call of the host is not a dataflow
operation), at the start for a parameter and at the end for a constant; once per index when a value is returned
at several. The function then returns the empty tuple and is impure (it calls a host function that does
something). ``relax_mlir.interpret`` calls the callback (any Python callable).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import BindingBlock, Call, DataflowBlock, Function, PrimValue, SeqExpr, Tuple, Var, VarBinding
from ..ir.struct_info import FuncStructInfo, ObjectStructInfo, PrimStructInfo, TupleStructInfo
from .pass_infra import Pass
from .utils import private_functions

#: The callback's signature: (index, value) -> ().
FSET_SINFO = FuncStructInfo([PrimStructInfo("int64"), ObjectStructInfo()], TupleStructInfo([]))


@dataclass(frozen=True)
class LazySetOutput(Pass):
    """Hand each result to a callback as soon as it is computed (TVM's ``LazySetOutput``).

    Example, applied as ``LazySetOutput()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((4,), "float32")):
                a = R.exp(x)
                b = R.negative(a)
                return (a, b)

    becomes::

        @I.ir_module
        class Module:
            @R.function(pure=False)
            def main(
                x: R.Tensor((4,), dtype="float32"),
                fset_output: R.Callable((R.Prim("int64"), R.Object), R.Tuple()),
            ) -> R.Tuple():
                a: R.Tensor((4,), dtype="float32") = R.exp(x)
                _: R.Tuple() = fset_output(R.prim_value(0), a)
                b: R.Tensor((4,), dtype="float32") = R.negative(a)
                __1: R.Tuple() = fset_output(R.prim_value(1), b)
                return ()
    """

    name = "LazySetOutput"

    def transform_module(self, mod, ctx):
        private = private_functions(mod)
        out, changed = mod.copy(), False
        for name, func in mod.items():
            if name in private or not isinstance(func, Function) or not isinstance(func.body, SeqExpr):
                continue
            out[name], changed = lazy_outputs(func), True
        return out if changed else mod


def lazy_outputs(func: Function) -> Function:
    """``func`` handing its results to ``fset_output`` as they are computed."""
    fset = Var("fset_output", FSET_SINFO)
    result = func.body.body
    fields = list(result.fields) if isinstance(result, Tuple) else [result]
    at: dict = {}  # value -> the indices it is returned at
    for i, f in enumerate(fields):
        at.setdefault(f, []).append(i)

    def sets(value) -> list:
        return [VarBinding(Var("_", TupleStructInfo([])),
                           Call(fset, [PrimValue(i, "int64"), value], {}, TupleStructInfo([])))
                for i in at.pop(value, [])]

    blocks = [BindingBlock([b for p in func.params for b in sets(p)])]
    for block in func.body.blocks:
        if isinstance(block, DataflowBlock):
            blocks.append(block)
            blocks.append(BindingBlock([b for binding in block.bindings for b in sets(binding.var)]))
        else:
            bindings = []
            for binding in block.bindings:
                bindings += [binding, *sets(binding.var)]
            blocks.append(BindingBlock(bindings))
    blocks.append(BindingBlock([b for value in list(at) for b in sets(value)]))  # constants, and the rest
    params = list(func.params)
    attrs = dict(func.attrs)
    if "num_input" in attrs:
        params.insert(int(attrs["num_input"]), fset)
        attrs["num_input"] = int(attrs["num_input"]) + 1
    else:
        params.append(fset)
    empty = Tuple([])
    # (SeqExpr merges adjacent plain blocks and drops empty ones)
    return Function(params, SeqExpr(blocks, empty), empty.struct_info, attrs, False, span=func.span)
