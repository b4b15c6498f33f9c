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

``shared_transform=True`` (or ``[]``) makes one ``transform_params`` for every function with ``num_input`` (in
order of name), ``shared_transform=["f", "g"]`` for those named, as TVM's option: functions that take the same
weights from one set of prepared values (a model's ``prefill`` and ``decode``). They must take as many weights,
of the same struct info in the same positions. A binding is lifted only when every one of them computes it alike
(compared after mapping the weights, and the lifted values it reads, onto the first function's; two alike in one
function are one); the rest stays in each function. ``transform_params`` takes the weights and returns those some
function still reads, then the lifted values some function reads, in the first function's order (sizes as above:
a carrying tensor, else a leading ``R.shape``); every function takes its inputs followed by all of them.
``R.match_cast`` is not lifted in this mode (refused, as TVM). When nothing is shared the module is left as it
is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Union

from ..ir.block_builder import function_result_struct_info
from ..ir.expr import BindingBlock, DataflowBlock, Function, MatchCast, SeqExpr, ShapeExpr, Tuple, Var
from ..ir.module import IRModule
from ..ir.printer import format_struct_info
from ..ir.struct_info import ShapeStructInfo, TensorStructInfo, is_base_of
from ..ir.structural_equal import structural_equal, structural_hash
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
    #: False: ``<name>_transform_params`` per function; True, or a list of names: one shared ``transform_params``
    shared_transform: Union[bool, Sequence[str]] = False

    def transform_module(self, mod, ctx):
        if self.shared_transform is not False:
            return _lift_shared(mod, _targets(mod, self.shared_transform))
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


@dataclass
class _Plan:
    """One function split in two: its inputs and weights, the bindings lifted (in order) and, per block, those
    kept; ``known`` holds the weights and lifted variables, ``sizes`` the size variables known ahead of time."""

    func: Function
    inputs: list[Var]
    weights: list[Var]
    sizes: "_LiftedSizes"
    lifted: list
    kept_blocks: list
    known: set[Var]

    @property
    def rest(self) -> list:
        return [b for _, kept in self.kept_blocks for b in kept]

    def reads(self) -> list[Var]:
        """The variables the rest of the function reads, in order (with repeats)."""
        return [v for b in self.rest for v in _uses(b)] + free_vars(self.func.body.body)

    def to_pass(self, needed: list[Var]) -> list[str]:
        return self.sizes.to_pass(self.inputs, needed, self.rest, self.func)


def _plan(func: Function, k: int, mod: IRModule, allowed=None) -> Optional[_Plan]:
    """What of ``func`` runs ahead of time (only the bindings ``allowed`` accepts, when given), or None when its
    weights' shapes use a size only the inputs define (unknown ahead of time)."""
    inputs, weights = list(func.params[:k]), list(func.params[k:])
    known: set[Var] = set(weights)
    sizes = _LiftedSizes(func.params, weights)
    if any(sinfo_size_names(w.struct_info) - sizes.known for w in weights):
        return None
    local = {b.var: b.value for block in func.blocks for b in block.bindings if isinstance(b.value, Function)}
    lifted, kept_blocks = [], []
    for block in func.body.blocks:
        kept = []
        for b in block.bindings:
            new_sizes = sizes.new_in(b)
            if _liftable(b, block, known, sizes.known | new_sizes, mod, local) and (allowed is None or allowed(b)):
                known.add(b.var)
                lifted.append(b)
                sizes.add_ahead(new_sizes)
            else:
                kept.append(b)
            sizes.add_defined(new_sizes)
        kept_blocks.append((block, kept))
    return _Plan(func, inputs, weights, sizes, lifted, kept_blocks, known)


def _split(func: Function, k: int, mod: IRModule):
    """(transform function, new function) for ``func``, or None when nothing is computed from weights alone."""
    plan = _plan(func, k, mod)
    if plan is None or not plan.lifted:
        return None
    # What the rest reads of the weights and lifted values, in order of first use
    needed = list(dict.fromkeys(v for v in plan.reads() if v in plan.known))  # once each, R.add(w, w) too
    passed = plan.to_pass(needed)
    if passed:  # sizes nothing passed defines: a tensor that has them carries them (compiled code passes tensors
        # only between functions), an R.Shape the rest
        needed += _carriers(passed, plan.weights + [b.var for b in plan.lifted], plan.inputs + needed)
        passed = plan.to_pass(needed)
    transform = _transform_function(plan.weights, plan.lifted, needed, passed, func.span)
    params = {v: Var(v.name_hint, v.struct_info, span=v.span) for v in needed}
    return transform, _rest_function(plan, passed, [params[v] for v in needed], params)


def _transform_function(weights: list[Var], lifted: list, results: list[Var], passed: list[str], span) -> Function:
    """The transform function: fresh weights, the lifted bindings (as plain ones), ``results`` as a tuple (after
    an ``R.shape`` of the sizes ``passed``, if any)."""
    fresh = {w: Var(w.name_hint, w.struct_info, span=w.span) for w in weights}
    remap: dict[Var, Var] = dict(fresh)
    bindings = []
    for b in lifted:
        var = Var(b.var.name_hint, b.var.struct_info, span=b.var.span)  # a DataflowVar would not escape its block
        bindings.append(rebind(b, substitute(b.value, remap), var))
        remap[b.var] = var
    result = Tuple(([ShapeExpr(passed)] if passed else []) + [remap[v] for v in results])
    return Function([fresh[w] for w in weights], SeqExpr([BindingBlock(bindings)], result),
                    result.struct_info, {}, True, span=span)


def _rest_function(plan: _Plan, passed: list[str], new_params: list[Var], remap: dict[Var, Var]) -> Function:
    """The new function: its inputs, the sizes ``passed``, then ``new_params`` (what the transform function
    returns), which replace the weights and lifted values as ``remap`` says."""
    func = plan.func
    shape = [Var(SIZES_PARAM, ShapeStructInfo(passed))] if passed else []
    blocks = []
    for block, kept in plan.kept_blocks:
        if not kept:
            continue
        blocks.append(type(block)([rebind(b, substitute(b.value, remap)) for b in kept]))
    new_params = plan.inputs + shape + new_params
    body = SeqExpr(blocks, substitute(func.body.body, remap))
    # a size only the weights defined (erased from the result before) is defined again by the new parameters: the
    # result keeps it, as TVM's Function takes its body's more precise struct info
    ret, refined = func.ret_struct_info, function_result_struct_info(new_params, body.body)
    return Function(new_params, body, refined if is_base_of(ret, refined) else ret, func.attrs, func.is_pure,
                    span=func.span)


# -- shared_transform: one transform_params for several functions ---------------------------------------------


def _targets(mod: IRModule, shared) -> list[tuple[str, Function]]:
    """The functions sharing ``transform_params``: True (or an empty list) takes every function with
    ``num_input`` (but a ``*transform_params`` one), in order of name, as TVM; a list takes those it names."""
    if shared is True or (not isinstance(shared, bool) and len(shared) == 0):
        return sorted(((name, f) for name, f in mod.items() if isinstance(f, Function) and "num_input" in f.attrs
                       and not name.endswith("transform_params")), key=lambda item: item[0])
    where = "LiftTransformParams(shared_transform=[...])"
    out = []
    for name in shared:
        if name not in mod:
            raise ValueError(f"{where}: the module has no function {name!r} (it has: {', '.join(mod) or 'none'})")
        func = mod[name]  # a module holds Relax functions only
        if "num_input" not in func.attrs:
            raise ValueError(f"{where}: function {name!r} has no num_input attribute, so its weights are unknown "
                             f"(add R.func_attr({{\"num_input\": <number of inputs>}}))")
        out.append((name, func))
    return out


def _check_weights(targets: list[tuple[str, Function]]) -> None:
    """The functions must take the same weights (as TVM): as many, each of the same struct info as the first
    function's (size names included: sizes are named per function)."""
    first, func0 = targets[0]
    w0 = func0.params[int(func0.attrs["num_input"]):]
    for name, func in targets[1:]:
        ws = func.params[int(func.attrs["num_input"]):]
        if len(ws) != len(w0):
            raise ValueError(f"LiftTransformParams(shared_transform): {name!r} takes {len(ws)} weights (parameters "
                             f"after its num_input), {first!r} takes {len(w0)}: the functions sharing "
                             f"transform_params must take the same weights")
        for i, (w, v) in enumerate(zip(ws, w0)):
            if not structural_equal(w.struct_info, v.struct_info):
                raise ValueError(f"LiftTransformParams(shared_transform): weight {i} of {name!r}, {w.name_hint}: "
                                 f"{format_struct_info(w.struct_info)}, differs from {first!r}'s, {v.name_hint}: "
                                 f"{format_struct_info(v.struct_info)}: the functions sharing transform_params must "
                                 f"take the same weights")


class _Group:
    """One lifted computation and the bindings of the functions that compute it: ``value`` in the first
    function's variables, ``var`` the variable of its first binding."""

    def __init__(self, binding, value):
        self.binding, self.value, self.var = binding, value, binding.var
        self.members: list[tuple[int, object]] = []

    def same(self, b, value) -> bool:
        return structural_equal(value, self.value) and structural_equal(b.var.struct_info, self.var.struct_info)


def _groups(plans: list[_Plan], names: list[str]) -> tuple[list[_Group], list[dict[Var, Var]]]:
    """The lifted bindings of all functions grouped by what they compute, in order of first appearance (a binding
    compared after mapping the weights, and the lifted variables it reads, onto the first function's), and, per
    function, its weights and lifted variables mapped onto the groups' (the first function's) variables."""
    groups: list[_Group] = []
    buckets: dict[int, list[_Group]] = {}
    remaps: list[dict[Var, Var]] = []
    for i, plan in enumerate(plans):
        remap = dict(zip(plan.weights, plans[0].weights))
        for b in plan.lifted:
            if isinstance(b, MatchCast):
                raise ValueError(f"LiftTransformParams(shared_transform): {names[i]!r}, binding "
                                 f"{b.var.name_hint!r}: R.match_cast is not lifted into a shared transform_params "
                                 f"(as TVM); lift without shared_transform, or cast the weights' parameters")
            value = substitute(b.value, remap)
            bucket = buckets.setdefault(structural_hash(value), [])
            group = next((g for g in bucket if g.same(b, value)), None)
            if group is None:
                group = _Group(b, value)
                bucket.append(group)
                groups.append(group)
            group.members.append((i, b))
            remap[b.var] = group.var
        remaps.append(remap)
    return groups, remaps


def _lift_shared(mod: IRModule, targets: list[tuple[str, Function]]) -> IRModule:
    """``mod`` with the computations every target makes alike from its weights moved into one
    ``transform_params``, as TVM's ``shared_transform``. It returns the weights some function still reads, then
    the lifted values some function reads, in order; every target takes its inputs and all of those."""
    if not targets:
        return mod
    _check_weights(targets)
    names = [name for name, _ in targets]
    plans = [_plan(f, int(f.attrs["num_input"]), mod) if isinstance(f.body, SeqExpr) else None for _, f in targets]
    if any(p is None for p in plans):
        return mod  # a function that lifts nothing shares nothing
    groups, remaps = _groups(plans, names)
    everyone = set(range(len(plans)))
    shared = [g for g in groups if {i for i, _ in g.members} == everyone]
    if not shared:
        return mod
    if "transform_params" in mod:
        raise ValueError("LiftTransformParams: the module already has a function 'transform_params'")
    members = {b for g in shared for _, b in g.members}
    plans = [_plan(p.func, len(p.inputs), mod, members.__contains__) for p in plans]  # only the shared lifted
    # what some function still reads: the weights in order, then the shared values in order
    read = {remaps[i][v] for i, p in enumerate(plans) for v in p.reads() if v in p.known}
    results = [w for w in plans[0].weights if w in read] + [g.var for g in shared if g.var in read]
    local = [{v0: v for v, v0 in reversed(remaps[i].items())} for i in range(len(plans))]  # first binding of each

    def to_pass() -> list[str]:
        wanted = set().union(*(p.to_pass([local[i][v] for v in results]) for i, p in enumerate(plans)))
        return [name for name in plans[0].sizes.ahead if name in wanted]

    passed = to_pass()
    if passed:  # as _split: tensors carry the sizes they can, an R.Shape the rest
        results += _carriers(passed, plans[0].weights + [g.var for g in shared], results)
        passed = to_pass()
    out = mod.copy()
    out["transform_params"] = _transform_function(plans[0].weights, [rebind(g.binding, g.value) for g in shared],
                                                  results, passed, targets[0][1].span)
    for i, (name, plan) in enumerate(zip(names, plans)):
        params = [Var(local[i][v].name_hint, v.struct_info, span=local[i][v].span) for v in results]
        by_result = dict(zip(results, params))
        remap = {v: by_result[v0] for v, v0 in remaps[i].items() if v0 in by_result}
        out[name] = _rest_function(plan, passed, params, remap)
    return out


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
