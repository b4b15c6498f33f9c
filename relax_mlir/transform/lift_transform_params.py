"""``LiftTransformParams``: what a function computes from its weights alone moves into a function of its own, run
once ahead of time, as TVM's pass of that name:

    def main(x, w):                              def main_transform_params(w):
        R.func_attr({"num_input": 1})                wt = R.permute_dims(w)
        wt = R.permute_dims(w)          ->           return (wt,)
        y = R.matmul(x, wt)
        return y                                 def main(x, wt):
                                                     R.func_attr({"num_input": 1})
                                                     y = R.matmul(x, wt)
                                                     return y

The weights are the parameters after the function's ``num_input`` attribute (TVM's convention; a function without
it is left alone). A binding is lifted when everything it reads is a weight, a constant or a lifted binding
(``R.match_cast`` included). ``<name>_transform_params`` takes the weights and returns, as one tuple, every weight
and lifted value the rest of the function reads, in the order they are first needed; ``<name>`` then takes its
inputs followed by those values. A function with nothing to lift is left as it is (so the pass may run twice).
Symbolic sizes that only the weights define are kept: the new parameters carry the same struct info.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import BindingBlock, Function, SeqExpr, Tuple, Var
from ..ir.struct_info import TupleStructInfo
from .pass_infra import Pass
from .utils import free_vars, rebind, substitute

#: The lifted function of ``main`` is ``main`` + SUFFIX.
SUFFIX = "_transform_params"


def _uses(b) -> list[Var]:
    return free_vars(b.value)


@dataclass(frozen=True)
class LiftTransformParams(Pass):
    """Move the weight-only computations of functions with ``num_input`` into ``<name>_transform_params``.

    Example, applied as ``LiftTransformParams()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2, 3), "float32"), w: R.Tensor((4, 3), "float32"), b: R.Tensor((4,), "float32")):
                R.func_attr({"num_input": 1})
                wt = R.permute_dims(w, [1, 0])
                b2 = R.multiply(b, R.const(2.0, "float32"))
                y = R.matmul(x, wt)
                z = R.add(y, b2)
                return z

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((2, 3), dtype="float32"),
                wt: R.Tensor((3, 4), dtype="float32"),
                b2: R.Tensor((4,), dtype="float32"),
            ) -> R.Tensor((2, 4), dtype="float32"):
                R.func_attr({"num_input": 1})
                y: R.Tensor((2, 4), dtype="float32") = R.matmul(x, wt)
                z: R.Tensor((2, 4), dtype="float32") = R.add(y, b2)
                return z

            @R.function
            def main_transform_params(
                w: R.Tensor((4, 3), dtype="float32"),
                b: R.Tensor((4,), dtype="float32"),
            ) -> R.Tuple(R.Tensor((3, 4), dtype="float32"), R.Tensor((4,), dtype="float32")):
                wt: R.Tensor((3, 4), dtype="float32") = R.permute_dims(w, axes=(1, 0))
                b2: R.Tensor((4,), dtype="float32") = R.multiply(b, R.const(2.0, "float32"))
                return (wt, b2)
    """

    name = "LiftTransformParams"

    def transform_module(self, mod, ctx):
        out, changed = mod.copy(), False
        for name, func in mod.items():
            if not isinstance(func, Function) or "num_input" not in func.attrs or not isinstance(func.body, SeqExpr):
                continue
            split = _split(func, int(func.attrs["num_input"]))
            if split is not None:
                if name + SUFFIX in mod:
                    raise ValueError(f"LiftTransformParams: the module already has a function {name + SUFFIX!r}")
                out[name + SUFFIX], out[name] = split
                changed = True
        return out if changed else mod


def _split(func: Function, k: int):
    """(transform function, new function) for ``func``, or None when nothing is computed from weights alone."""
    inputs, weights = list(func.params[:k]), list(func.params[k:])
    known: set[Var] = set(weights)
    lifted, kept_blocks = [], []
    for block in func.body.blocks:
        kept = []
        for b in block.bindings:
            if all(v in known for v in _uses(b)) and not isinstance(b.value, Function):
                known.add(b.var)
                lifted.append(b)
            else:
                kept.append(b)
        kept_blocks.append((block, kept))
    if not lifted:
        return None
    # What the rest reads of the weights and lifted values, in order of first use
    needed: list[Var] = []
    for _, kept in kept_blocks:
        for b in kept:
            needed += [v for v in _uses(b) if v in known and v not in needed]
    needed += [v for v in free_vars(func.body.body) if v in known and v not in needed]

    # The transform function: fresh weights, the lifted bindings (as plain ones), the needed values as a tuple
    fresh = {w: Var(w.name_hint, w.struct_info, span=w.span) for w in weights}
    remap: dict[Var, Var] = dict(fresh)
    bindings = []
    for b in lifted:
        var = Var(b.var.name_hint, b.var.struct_info, span=b.var.span)  # a DataflowVar would not escape its block
        bindings.append(rebind(b, substitute(b.value, remap), var))
        remap[b.var] = var
    result = Tuple([remap[v] for v in needed])
    transform = Function([fresh[w] for w in weights], SeqExpr([BindingBlock(bindings)], result),
                         TupleStructInfo([v.struct_info for v in needed]), {}, True, span=func.span)

    # The new function: its inputs, then one parameter per needed value
    params = {v: Var(v.name_hint, v.struct_info, span=v.span) for v in needed}
    blocks = []
    for block, kept in kept_blocks:
        if not kept:
            continue
        blocks.append(type(block)([rebind(b, substitute(b.value, params)) for b in kept]))
    new = Function(inputs + [params[v] for v in needed], SeqExpr(blocks, substitute(func.body.body, params)),
                   func.ret_struct_info, func.attrs, func.is_pure, span=func.span)
    return transform, new

