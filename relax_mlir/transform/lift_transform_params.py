"""``LiftTransformParams``: what a function computes from its weights alone moves into a function of its own, run
once ahead of time, as TVM's pass of that name:

    def main(x, w):                              def main_transform_params(w):
        R.func_attr({"num_input": 1})                wt = R.permute_dims(w)
        with R.dataflow():                           return (wt,)
            wt = R.permute_dims(w)      ->
            y = R.matmul(x, wt)                  def main(x, wt):
            R.output(y)                              R.func_attr({"num_input": 1})
        return y                                     with R.dataflow():
                                                         y = R.matmul(x, wt)
                                                         R.output(y)
                                                     return y

The weights are the parameters after the function's ``num_input`` attribute (TVM's convention; a function without
it is left alone). A binding is lifted when, as in TVM, it is in a dataflow block (a binding of a plain block may be
a host call that must run on every call, so none is lifted), has no effect, reads only weights, constants and lifted
bindings (``R.match_cast`` included) and mentions only sizes the weights (or a lifted ``match_cast``) define.
``<name>_transform_params`` takes the weights and returns, as one tuple, every weight and lifted value the rest of
the function reads, in the order they are first needed; ``<name>`` then takes its inputs followed by those values.
A size variable the rest uses that only the weights define, and that no returned value carries in its shape, is
passed in a tensor's shape: the tuple ends with the weight or lifted value of fewest dimensions that has it as a
dimension (``w: R.Tensor(("m", 3))`` for ``m``, passed as it is), which ``<name>`` takes last, so both functions
compile (the MLIR backend passes only tensors between functions; TVM passes such sizes as an ``R.Shape``). A size no
tensor has as a dimension (a weight ``R.Shape(["m"])`` or ``R.Prim(value="m")``) is passed as TVM does: the tuple
starts with an ``R.shape([...])`` of such sizes, and ``<name>`` takes it after its inputs as the parameter
``vars_from_compile_time_params: R.Shape([...])`` (so ``<name>(x, *transformed)`` still works; the interpreter runs
it, the MLIR backend compiles neither it nor the function before the pass). A function with nothing to lift is
left as it is (so the pass may run twice), and so is one whose weights' shapes use a size only its inputs define
(``w: R.Tensor(("2 * n",))`` with ``x: R.Tensor(("n",))``: unknown ahead of time).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.block_builder import function_result_struct_info
from ..ir.expr import BindingBlock, DataflowBlock, Function, MatchCast, SeqExpr, ShapeExpr, Tuple, Var
from ..ir.module import IRModule
from ..ir.struct_info import ShapeStructInfo, TensorStructInfo, is_base_of
from ..ir.well_formed import plain_size_vars
from .dead_code_elimination import has_effect, sinfo_size_names
from .pass_infra import Pass
from .topological_sort import size_names
from .utils import free_vars, rebind, substitute

#: The lifted function of ``main`` is ``main`` + SUFFIX.
SUFFIX = "_transform_params"
#: The parameter of the sizes only the weights define (TVM's name).
SIZES_PARAM = "vars_from_compile_time_params"


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
                with R.dataflow():
                    wt = R.permute_dims(w, [1, 0])
                    b2 = R.multiply(b, R.const(2.0, "float32"))
                    y = R.matmul(x, wt)
                    z = R.add(y, b2)
                    R.output(z)
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
                with R.dataflow():
                    y: R.Tensor((2, 4), dtype="float32") = R.matmul(x, wt)
                    z: R.Tensor((2, 4), dtype="float32") = R.add(y, b2)
                    R.output(z)
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
            split = _split(func, int(func.attrs["num_input"]), mod)
            if split is not None:
                if name + SUFFIX in mod:
                    raise ValueError(f"LiftTransformParams: the module already has a function {name + SUFFIX!r}")
                out[name + SUFFIX], out[name] = split
                changed = True
        return out if changed else mod


def _split(func: Function, k: int, mod: IRModule):
    """(transform function, new function) for ``func``, or None when nothing is computed from weights alone."""
    inputs, weights = list(func.params[:k]), list(func.params[k:])
    known: set[Var] = set(weights)
    sizes = _LiftedSizes(func.params, weights)
    if any(sinfo_size_names(w.struct_info) - sizes.known for w in weights):
        return None  # a weight's shape uses a size only the inputs define: unknown ahead of time
    local = {b.var: b.value for block in func.blocks for b in block.bindings if isinstance(b.value, Function)}
    lifted, kept_blocks = [], []
    for block in func.body.blocks:
        kept = []
        for b in block.bindings:
            new_sizes = sizes.new_in(b)
            if _liftable(b, block, known, sizes.known | new_sizes, mod, local):
                known.add(b.var)
                lifted.append(b)
                sizes.add_ahead(new_sizes)
            else:
                kept.append(b)
            sizes.add_defined(new_sizes)
        kept_blocks.append((block, kept))
    if not lifted:
        return None
    # What the rest reads of the weights and lifted values, in order of first use
    reads = [v for _, kept in kept_blocks for b in kept for v in _uses(b)] + free_vars(func.body.body)
    needed = list(dict.fromkeys(v for v in reads if v in known))  # once each, R.add(w, w) too
    rest = [b for _, kept in kept_blocks for b in kept]
    passed = sizes.to_pass(inputs, needed, rest, func)
    if passed:  # sizes nothing passed defines: a tensor that has them carries them (compiled code passes tensors
        # only between functions), an R.Shape the rest
        needed += _carriers(passed, weights + [b.var for b in lifted], inputs + needed)
        passed = sizes.to_pass(inputs, needed, rest, func)

    # The transform function: fresh weights, the lifted bindings (as plain ones), the needed values as a tuple
    fresh = {w: Var(w.name_hint, w.struct_info, span=w.span) for w in weights}
    remap: dict[Var, Var] = dict(fresh)
    bindings = []
    for b in lifted:
        var = Var(b.var.name_hint, b.var.struct_info, span=b.var.span)  # a DataflowVar would not escape its block
        bindings.append(rebind(b, substitute(b.value, remap), var))
        remap[b.var] = var
    result = Tuple(([ShapeExpr(passed)] if passed else []) + [remap[v] for v in needed])
    transform = Function([fresh[w] for w in weights], SeqExpr([BindingBlock(bindings)], result),
                         result.struct_info, {}, True, span=func.span)

    # The new function: its inputs, the sizes, then one parameter per needed value
    params = {v: Var(v.name_hint, v.struct_info, span=v.span) for v in needed}
    shape = [Var(SIZES_PARAM, ShapeStructInfo(passed))] if passed else []
    blocks = []
    for block, kept in kept_blocks:
        if not kept:
            continue
        blocks.append(type(block)([rebind(b, substitute(b.value, params)) for b in kept]))
    new_params = inputs + shape + [params[v] for v in needed]
    body = SeqExpr(blocks, substitute(func.body.body, params))
    # a size only the weights defined (erased from the result before) is defined again by the new parameters: the
    # result keeps it, as TVM's Function takes its body's more precise struct info
    ret, refined = func.ret_struct_info, function_result_struct_info(new_params, body.body)
    new = Function(new_params, body, refined if is_base_of(ret, refined) else ret, func.attrs, func.is_pure,
                   span=func.span)
    return transform, new


def _liftable(b, block, known: set[Var], sizes: set[str], mod: IRModule, local: dict) -> bool:
    """Whether ``b`` can run once ahead of time, as in TVM: it is in a dataflow block (a binding of a plain block
    may be a host call that has to run on every call), has no effect, is no local function, reads only weights,
    constants and lifted values, and mentions only sizes the weights define or it defines itself (a size of the
    inputs is not known ahead of time)."""
    return (isinstance(block, DataflowBlock) and not isinstance(b.value, Function)
            and all(v in known for v in _uses(b)) and size_names(b) <= sizes
            and not has_effect(b.value, mod, local))


def _carriers(names: list[str], candidates: list[Var], given: list[Var]) -> list[Var]:
    """Tensors whose shapes define the sizes ``names`` for the new function: for each size no value ``given`` to it
    defines, the candidate (a weight or a lifted value) of fewest dimensions with it as a dimension of its own (a
    bias rather than its matrix: passed as it is, its bytes are kept once more). A tensor with a size that neither
    it nor a passed value defines (``R.Tensor(("2 * j",))``) would leave that size undefined: it carries none."""
    defined = set().union(*(plain_size_vars(v.struct_info) for v in given))
    tensors = sorted((v for v in candidates if isinstance(v.struct_info, TensorStructInfo)),
                     key=lambda v: v.struct_info.ndim)  # stable: weights, then lifted values, at each rank
    out: list[Var] = []
    for name in names:
        for v in tensors:
            own = plain_size_vars(v.struct_info)
            if name not in defined and name in own and sinfo_size_names(v.struct_info) <= own | defined:
                out.append(v)
                defined |= own
    return out


class _LiftedSizes:
    """The size variables of a function being split: those defined so far (by a parameter or a ``match_cast``),
    and, in order of definition, those known ahead of time, which the transform function defines (by a weight or
    a lifted ``match_cast``)."""

    def __init__(self, params: list[Var], weights: list[Var]):
        self.defined = set().union(*(plain_size_vars(p.struct_info) for p in params))
        self.ahead: list[str] = []
        for w in weights:
            self.add_ahead(plain_size_vars(w.struct_info))

    @property
    def known(self) -> set[str]:
        return set(self.ahead)

    def new_in(self, b) -> set[str]:
        """The sizes binding ``b`` defines: a ``match_cast``'s that nothing defined before it."""
        return plain_size_vars(b.struct_info) - self.defined if isinstance(b, MatchCast) else set()

    def add_ahead(self, names: set[str]) -> None:
        self.ahead += sorted(names - self.known)

    def add_defined(self, names: set[str]) -> None:
        self.defined |= names

    def to_pass(self, inputs: list[Var], needed: list[Var], kept: list, func: Function) -> list[str]:
        """The sizes the new function uses that only the transform function defines: neither an input nor a
        value it receives defines them (TVM's ``vars_from_compile_time_params``)."""
        own = set().union(*(plain_size_vars(v.struct_info) for v in inputs + needed))
        used = set().union(*(size_names(b) for b in kept), *(sinfo_size_names(v.struct_info) for v in needed),
                           sinfo_size_names(func.ret_struct_info), sinfo_size_names(func.body.body.struct_info))
        return [name for name in self.ahead if name in used and name not in own]
