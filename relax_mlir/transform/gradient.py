"""``Gradient``: reverse-mode automatic differentiation of one function, as TVM's ``relax.transform.Gradient``.

For ``func_name`` it adds ``<func_name>_adjoint``, returning ``(original_return, (grad_1, ..., grad_k))``:

    @R.function
    def main(x: R.Tensor((3, 3), "float32"), y: R.Tensor((3, 3), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            lv1 = R.add(x, y)
            lv2 = R.sum(lv1)
            R.output(lv2)
        return lv2

becomes, next to ``main``:

    @R.function
    def main_adjoint(x, y) -> R.Tuple(R.Tensor((), "float32"), R.Tuple(R.Tensor((3, 3)), R.Tensor((3, 3)))):
        with R.dataflow():
            lv1 = R.add(x, y)
            lv2 = R.sum(lv1)
            lv2_adjoint = R.ones((), "float32")
            lv1_adjoint = R.broadcast_to(lv2_adjoint, (3, 3))
            x_adjoint = lv1_adjoint
            y_adjoint = lv1_adjoint
            R.output(lv2, x_adjoint, y_adjoint)
        return (lv2, (x_adjoint, y_adjoint))

Beyond TVM: the function may have several binding blocks, dataflow or not (they are merged into the adjoint's
one dataflow block), tuple-typed parameters, and gradients of intermediate variables. Every op without a
gradient rule is reported at once. The adjoint comes out cleaned as CanonicalizeBindings and
DeadCodeElimination would leave it; with ``matmul(x, permute_dims(w))`` the transpose of the transpose is ``w``
itself (no new op). Segments marked with ``grad.start_checkpoint`` / ``grad.end_checkpoint``
are recomputed in the backward pass instead of being kept (see :mod:`relax_mlir.training.remat`). Every adjoint an
op's gradient rule returns is checked against its argument's struct info (dtype, rank, sizes not provably
different): a rule that breaks that contract is a bug in relax-mlir, raised as a :class:`GradientRuleError` naming
the op, the binding and the argument, instead of an ill-typed adjoint function. A rule that needs a rank, a shape or
static sizes the arguments' struct info does not give (a ``strided_slice`` of a tensor of unknown shape) is refused
with a :class:`GradientError` naming the binding and the arguments to ``match_cast``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Union

from ..ir.block_builder import BlockBuilder
from ..ir.dtype import is_float
from ..ir.expr import (Call, Constant, DataflowVar, Expr, Function, GlobalVar, MatchCast, SeqExpr, Tuple,
                       TupleGetItem, Var, VarBinding)
from ..ir.module import IRModule
from ..ir.printer import format_struct_info
from ..ir.struct_info import PrimStructInfo, StructInfo, TensorStructInfo, TupleStructInfo
from ..op.grad_utils import NoGradientRule, ShapeNeeded, cast_advice, missing_rule
from ..op.registry import NOT_DIFFERENTIABLE, SECOND_ORDER_UNSUPPORTED, Op
from .pass_infra import Pass, PassContext
from .canonicalize_bindings import CanonicalizeBindings
from .dead_code_elimination import impure_bindings, remove_unused_bindings, size_defining_casts
from .utils import free_vars, substitute, substitute_with, with_body


class GradientError(ValueError):
    """Gradient was asked for something it cannot do; the message names the function and the culprit."""


class GradientRuleError(RuntimeError):
    """An op's gradient rule returned an adjoint that cannot be its input's (another dtype, rank or size): a bug in
    relax-mlir's op record, not in the function being differentiated. Not a ``ValueError``, so that the command line
    shows its traceback (what a report of the bug needs) instead of one line blaming the input."""


class _AdjointCleanup(CanonicalizeBindings):
    """CanonicalizeBindings as TVM's Gradient leaves its adjoints: each ``x_adjoint = lv_adjoint`` output alias
    stays (its documented examples show them), not merged into the binding it names."""

    promote_outputs = False


@dataclass(frozen=True)
class Gradient(Pass):
    """Reverse-mode AD: ``Gradient(func_name, require_grads=None, target_index=0)``.

    ``func_name`` is the function's name or ``GlobalVar``. ``require_grads`` is a Var or a list of Vars: parameters
    of the function or variables it binds; by default every parameter with a float type. A name (a ``str``) stands
    for the parameter, or else the bound variable, of that name: the only way to name one on the command line
    (``relax-mlir opt --passes 'Gradient(func_name="main", require_grads=["w"])'``). The target is the return
    value, or its ``target_index``-th field when the function returns a tuple; it must be a float scalar.

    Example, applied as ``Gradient("main")``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")):
                with R.dataflow():
                    lv = R.multiply(x, y)
                    gv = R.sum(lv)
                    R.output(gv)
                return gv

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((3,), dtype="float32"),
                y: R.Tensor((3,), dtype="float32"),
            ) -> R.Tensor((), dtype="float32"):
                with R.dataflow():
                    lv: R.Tensor((3,), dtype="float32") = R.multiply(x, y)
                    gv: R.Tensor((), dtype="float32") = R.sum(lv)
                    R.output(gv)
                return gv

            @R.function
            def main_adjoint(
                x: R.Tensor((3,), dtype="float32"),
                y: R.Tensor((3,), dtype="float32"),
            ) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32"))):
                with R.dataflow():
                    lv: R.Tensor((3,), dtype="float32") = R.multiply(x, y)
                    gv: R.Tensor((), dtype="float32") = R.sum(lv)
                    gv_adjoint: R.Tensor((), dtype="float32") = R.ones((), "float32")
                    lv_adjoint: R.Tensor((3,), dtype="float32") = R.broadcast_to(gv_adjoint, (3,))
                    x_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(lv_adjoint, y)
                    y_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(lv_adjoint, x)
                    R.output(gv, x_adjoint, y_adjoint)
                return (gv, (x_adjoint, y_adjoint))
    """

    name = "Gradient"

    func_name: Union[str, GlobalVar]
    require_grads: Union[Var, str, Sequence[Union[Var, str]], None] = None
    target_index: int = 0

    def __post_init__(self):
        super().__post_init__()
        if isinstance(self.func_name, GlobalVar):
            object.__setattr__(self, "func_name", self.func_name.name_hint)
        if isinstance(self.require_grads, (Var, str)):
            object.__setattr__(self, "require_grads", [self.require_grads])

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        name = self.func_name
        if name not in mod:
            raise GradientError(f"Gradient: the module has no function {name!r} (it has: {', '.join(mod) or 'none'})")
        adjoint = _Differentiator(name, mod[name], self.require_grads, self.target_index, mod).run()
        out = mod.copy()
        out[f"{name}_adjoint"] = adjoint
        return out


class _Adjoint:
    """The contributions to one variable's adjoint: a list of expressions for a tensor, a dict of field
    adjoints for a tuple. ``like`` is the value itself in the adjoint function (a variable, or a field of one): with
    no contribution its adjoint is zeros, of its runtime shape when its struct info has none."""

    def __init__(self, sinfo: StructInfo, like: Expr):
        self.sinfo, self.like = sinfo, like
        self.terms: list[Expr] = []
        self.fields: dict[int, "_Adjoint"] = {}

    def add(self, grad: Expr) -> None:
        if isinstance(self.sinfo, TupleStructInfo) and isinstance(grad, Tuple):
            for i, g in enumerate(grad.fields):
                self.field(i).add(g)
        else:
            self.terms.append(grad)

    def field(self, i: int) -> "_Adjoint":
        if i not in self.fields:
            self.fields[i] = _Adjoint(self.sinfo.fields[i], _field(self.like, i))
        return self.fields[i]

    def empty(self) -> bool:
        return not self.terms and all(f.empty() for f in self.fields.values())


class _Differentiator:
    def __init__(self, name: str, func: Function, require_grads, target_index: int, mod: Optional[IRModule] = None):
        self.name, self.func, self.mod = name, func, mod
        self.bindings = [b for block in func.blocks for b in block.bindings]
        self.binding_of = {b.var: b for b in self.bindings}
        self.ret = func.body.body if isinstance(func.body, SeqExpr) else func.body
        self.target = self._target(target_index)
        self.requires = self._requires(require_grads)
        self.explicit = require_grads is not None
        self.finished: dict[Var, Var] = {}
        self.checkpointed = self._checkpointed()
        self.recomputed: dict[Var, Expr] = {}

    def fail(self, message: str):
        raise GradientError(f"Gradient({self.name}): {message}")

    # -- checks -------------------------------------------------------------------------------------
    def _refuse_effects(self) -> None:
        """The adjoint is a pure dataflow function that runs the forward bindings it needs: a host call or a call
        of an impure function would be dropped or moved into it (as in TVM, where effects cannot be in the dataflow
        blocks Gradient differentiates)."""
        effects = impure_bindings(self.func, self.mod)
        if not self.func.is_pure or effects:
            named = ", ".join(repr(v.name_hint) for v in sorted(effects, key=lambda v: v.name_hint))
            self.fail("cannot differentiate a function with effects" + (f" (bindings {named})" if named else
                                                                         " (it is declared pure=False)")
                      + ": its adjoint is a pure dataflow function; move host calls out of it")

    def _target(self, index: int) -> Var:
        ret, sinfo = self.ret, self.func.ret_struct_info
        what = "the return value"
        if isinstance(sinfo, TupleStructInfo):
            if not -len(sinfo.fields) <= index < len(sinfo.fields):
                self.fail(f"target_index {index} is out of range: the function returns a tuple of "
                          f"{len(sinfo.fields)} values")
            ret = ret.fields[index] if isinstance(ret, Tuple) else self._field_of(ret, index)
            sinfo, what = sinfo.fields[index], f"return value {index}"
        elif index != 0:
            self.fail(f"target_index {index} given, but the function returns a single value")
        if not isinstance(sinfo, TensorStructInfo) or sinfo.ndim != 0:
            self.fail(f"the target ({what}) must be a scalar (a 0-d tensor), got {format_struct_info(sinfo)}")
        if not is_float(sinfo.dtype):
            self.fail(f"the target ({what}) must have a float dtype, got {sinfo.dtype}")
        if not isinstance(ret, Var):
            self.fail(f"the target ({what}) must be a variable, got a constant")
        return ret

    def _field_of(self, tup: Expr, index: int) -> Expr:
        binding = self.binding_of.get(tup) if isinstance(tup, Var) else None
        if binding is not None and isinstance(binding.value, Tuple):
            return binding.value.fields[index]
        self.fail("the target must be a field of a tuple built in the function")

    def _requires(self, require_grads) -> list[Var]:
        params = list(self.func.params)
        if require_grads is None:
            return [p for p in params if _is_float_like(p.struct_info)]
        if not require_grads:
            self.fail("require_grads is empty: name at least one parameter (or None for every float parameter)")
        out: list[Var] = []
        for v in require_grads:
            if isinstance(v, str):
                v = self._named(v, params)
            if not isinstance(v, Var):
                self.fail(f"require_grads must hold Vars (or their names), got {type(v).__name__}")
            if v not in params and v not in self.binding_of:
                self.fail(f"require_grads: {v.name_hint!r} is neither a parameter nor a variable bound in the "
                          "function")
            if v in out:
                self.fail(f"require_grads: {v.name_hint!r} is listed twice")
            if not _is_float_like(v.struct_info):
                self.fail(f"require_grads: {v.name_hint!r} has struct info {format_struct_info(v.struct_info)}; "
                          "only float tensors (or tuples of them) have gradients")
            out.append(v)
        return out

    def _named(self, name: str, params: list[Var]) -> Var:
        """The parameter named ``name``, or else the one variable the function binds under that name."""
        found = [p for p in params if p.name_hint == name] or [v for v in self.binding_of if v.name_hint == name]
        if len(found) != 1:
            where = "no parameter or bound variable" if not found else f"{len(found)} bound variables"
            self.fail(f"require_grads: the function has {where} named {name!r} (its parameters: "
                      f"{', '.join(p.name_hint for p in params) or 'none'})")
        return found[0]

    # -- analysis -----------------------------------------------------------------------------------
    def _checkpointed(self) -> set[Var]:
        """Variables computed inside ``start_checkpoint`` .. ``end_checkpoint`` segments: the backward pass
        recomputes them from the segment's inputs instead of keeping them alive (Chen et al. 2016)."""
        from ..op import grad as markers

        inside: set[Var] = set()
        for b in self.bindings:
            value = b.value
            if isinstance(value, Call) and value.op is markers.start_checkpoint:
                inside.add(b.var)
            elif isinstance(value, Call) and value.op is markers.end_checkpoint:
                continue  # a segment's output is kept
            elif any(v in inside for v in free_vars_of([value])):
                inside.add(b.var)
        return inside

    def _edges(self, binding) -> list[Var]:
        """The variables a binding's value depends on differentiably."""
        value = binding.value
        if isinstance(value, Function):  # a local function: what it captures reaches its calls' results
            return free_vars_of([value])
        if isinstance(value, Call):
            if not isinstance(value.op, Op):  # a module function, a local function (and its captures) or a host one
                return free_vars_of([value.op, *value.args])
            op: Op = value.op
            return [v for i, a in enumerate(value.args)
                    if _input_name(op, i) not in op.no_grad_inputs for v in free_vars_of([a])]
        return free_vars_of([value])

    def relevant(self) -> set[Var]:
        """Variables on a differentiable path from a required variable to the target. An integer or boolean
        value is on none: it carries no gradient (argmax's result, topk's indices in a tuple beside its values),
        though the adjoint may still read it (the indices a gather's gradient scatters to)."""
        forward = set(self.requires)
        for b in self.bindings:
            if b.var in forward or _carries_gradient(b.var.struct_info) and any(v in forward for v in self._edges(b)):
                forward.add(b.var)
        backward = {self.target}
        for b in reversed(self.bindings):
            if b.var in backward:
                backward.update(self._edges(b))
        return forward & backward

    def check_rules(self, relevant: set[Var]) -> None:
        """One error listing every op on a differentiable path that cannot be differentiated."""
        problems: dict[str, list[str]] = {}
        for b in self.bindings:
            if b.var not in relevant or not isinstance(b.value, Call) or b.var in self.requires and \
                    not any(v in relevant for v in self._edges(b)):
                continue
            op = b.value.op
            if isinstance(op, GlobalVar):
                key = f"calls to other functions (cls.{op.name_hint}) are not differentiated; inline them first"
            elif isinstance(op, Var):
                key = (f"calls of local functions ({op.name_hint}) are not differentiated; lift and inline them "
                       "first (LambdaLift, then InlineFunctions)")
            elif not isinstance(op, Op):
                key = f"{op.name} calls a host function, which has no gradient"
            elif op.gradient is None:
                key = f"no gradient rule for {op.name}"
            elif op.gradient is NOT_DIFFERENTIABLE:
                key = f"{op.name} is not differentiable"
            elif op.gradient is SECOND_ORDER_UNSUPPORTED:
                key = f"{op.name} is itself a gradient (second-order gradients are not supported)"
            elif (missing := missing_rule(b.value)) is not None:  # a rule for some attribute values only
                key = f"no gradient rule for {op.name} with {missing}"
            else:
                continue
            problems.setdefault(key, []).append(b.var.name_hint)
        if problems:
            listed = "; ".join(f"{k} (used by {', '.join(v)})" for k, v in problems.items())
            self.fail(f"cannot differentiate: {listed}")

    def check_undifferentiated_inputs(self) -> None:
        """A variable named in ``require_grads`` that the target reads through an input its op does not
        differentiate (``nll_loss``'s class weights, inference ``batch_norm``'s moving statistics: as TVM's rules,
        and PyTorch's, which raise) would get a gradient short of that path, zeros if it is the only one: refused,
        every such use listed. With ``require_grads=None`` (every float parameter) such a parameter gets the
        gradient of its other paths, as in TVM."""
        roots: dict[Var, set[str]] = {v: {v.name_hint} for v in self.requires}
        for b in self.bindings:  # which required variables each variable depends on, through any argument
            found = set().union(*(roots.get(v, set()) for v in free_vars_of([b.value])))
            if found:
                roots[b.var] = roots.get(b.var, set()) | found
        needed = {self.target}
        for b in reversed(self.bindings):
            if b.var in needed:
                needed.update(free_vars_of([b.value]))
        uses = []
        for b in self.bindings:
            # An op none of whose inputs takes a gradient (grad.no_grad) is a stop written on purpose.
            if b.var in needed and isinstance(b.value, Call) and isinstance(b.value.op, Op) and \
                    not set(b.value.op.inputs) <= set(b.value.op.no_grad_inputs):
                op = b.value.op
                for i, a in enumerate(b.value.args):
                    names = sorted(set().union(*(roots.get(v, set()) for v in free_vars_of([a]))))
                    if names and _input_name(op, i) in op.no_grad_inputs and _is_float_like(a.struct_info):
                        uses.append(f"{op.name}'s {_input_name(op, i)} (binding {b.var.name_hint!r}) depends on "
                                    f"{', '.join(map(repr, names))}")
        if uses:
            self.fail("require_grads names variables the target reads through inputs that have no gradient rule "
                      f"(the gradient would leave those paths out): {'; '.join(uses)}")

    # -- construction -------------------------------------------------------------------------------
    def run(self) -> Function:
        relevant = self.relevant()
        self.check_rules(relevant)
        self._refuse_effects()  # (after the rules: a host call on the path has a message of its own)
        if self.explicit:
            self.check_undifferentiated_inputs()
        keep = self._live_forward()
        remap: dict[Var, Var] = {p: Var(p.name_hint, p.struct_info, span=p.span) for p in self.func.params}
        outputs = set(free_vars_of([self.ret]))
        bb = BlockBuilder()
        with bb.function(f"{self.name}_adjoint", [remap[p] for p in self.func.params], dict(self.func.attrs)):
            with bb.dataflow():
                for b in self.bindings:
                    if b.var in keep:
                        self._copy(bb, b, remap, b.var in outputs)
                grads = self._backward(bb, relevant, remap)
                grad_vars = [self._output_grad(bb, v, grads.get(v)) for v in self.requires]
            bb.emit_func_output(Tuple([substitute(self.ret, remap), Tuple(grad_vars)]))
        # Clean up as CanonicalizeBindings + DeadCodeElimination would: transposes of transposes the rules made
        # (a linear layer's weight gradient) and aliases left by the checkpoint markers go, and so do
        # recomputations no rule used (rules receive the forward result even when they do not need it). Output
        # aliases such as TVM's documented `x_adjoint = lv1_adjoint` stay: a dataflow variable may not leave its
        # block.
        adjoint = _fold_transpose_pairs(bb.get()[f"{self.name}_adjoint"])
        return remove_unused_bindings(_AdjointCleanup().transform_function(adjoint, None, None))

    def _live_forward(self) -> set[Var]:
        """Forward bindings the return value needs (the rest would be dead in the adjoint), and the required variables
        (the zero gradient of one that does not reach the target has its runtime shape when its struct info has none;
        the clean-up removes those that no gradient reads)."""
        live = set(free_vars_of([self.ret])) | size_defining_casts(self.func) | set(self.requires)
        for b in reversed(self.bindings):
            if b.var in live:
                live.update(free_vars_of([b.value]))
        return live

    def _copy(self, bb: BlockBuilder, b, remap: dict, output: bool) -> None:
        from ..op import grad as markers

        value = substitute(b.value, remap)
        if isinstance(value, Call) and value.op in (markers.start_checkpoint, markers.end_checkpoint):
            value = value.args[0]  # the markers have done their job: the adjoint needs no identity ops
        cls = Var if output else DataflowVar
        var = cls(b.var.name_hint, b.var.struct_info, span=b.var.span)
        if isinstance(b, MatchCast):
            bb.emit_normalized(MatchCast(var, value, b.struct_info, span=b.span))
        else:
            bb.emit_normalized(VarBinding(var, value, span=b.span))
        remap[b.var] = var

    def _backward(self, bb: BlockBuilder, relevant: set[Var], remap: dict) -> dict[Var, _Adjoint]:
        from .. import op

        adjoints: dict[Var, _Adjoint] = {v: _Adjoint(v.struct_info, remap[v]) for v in relevant}
        t = self.target.struct_info
        if self.target in adjoints:  # else no required variable reaches the target (a constant loss)
            seed = bb.emit(op.ones((), t.dtype), f"{self.target.name_hint}_adjoint")
            adjoints[self.target].add(seed)
        for v in self.requires:  # no path to the target: zero gradients, stated up front
            if v not in relevant:
                self.finished[v] = bb.emit_output(_zeros(v.struct_info, remap[v]), f"{v.name_hint}_adjoint")
        # A parameter's gradient is complete once the backward pass has passed its first use; binding it
        # there (not at the end) lets the values it is computed from die early. A parameter that is the target
        # itself (``return x``) has no use on the way: its gradient is the seed, bound after the loop.
        last_contribution: dict[int, list[Var]] = {}
        for v in self.requires:
            if v in relevant and v not in self.binding_of:
                uses = [i for i, b in enumerate(self.bindings) if v in self._edges(b) and b.var in relevant]
                last_contribution.setdefault(min(uses) if uses else -1, []).append(v)
        for i in reversed(range(len(self.bindings))):
            b = self.bindings[i]
            v = b.var
            if v in relevant and not adjoints[v].empty() and self._edges(b):
                grad = self._finish(bb, v, adjoints[v])
                self._propagate(bb, b, grad, adjoints, remap)
            for p in last_contribution.get(i, ()):
                self.finished[p] = bb.emit_output(_materialize(adjoints[p], bb), f"{p.name_hint}_adjoint")
        for p in last_contribution.get(-1, ()):
            self.finished[p] = bb.emit_output(_materialize(adjoints[p], bb), f"{p.name_hint}_adjoint")
        return adjoints

    def _finish(self, bb: BlockBuilder, v: Var, adj: _Adjoint) -> Expr:
        """Bind the adjoint of ``v`` (``v_adjoint``) once all its contributions are in. A required variable's
        is bound to an output variable at once; a lone variable or constant needs no binding of its own."""
        value = _materialize(adj, bb)
        if v in self.requires:
            self.finished[v] = bb.emit_output(value, f"{v.name_hint}_adjoint")
            return self.finished[v]
        if isinstance(value, (Var, Constant)) or (isinstance(value, Tuple) and
                                                    all(isinstance(f, (Var, Constant)) for f in value.fields)):
            return value
        return bb.emit(value, f"{v.name_hint}_adjoint")

    def _forward_value(self, bb: BlockBuilder, e: Expr, remap: dict) -> Expr:
        """A forward value for a gradient rule: the kept variable, or, inside a checkpointed segment, a
        recomputation of it (made once, when the backward pass first reaches the segment)."""
        if isinstance(e, (Tuple, TupleGetItem, Call)):
            return substitute_with(e, lambda v: self._forward_value(bb, v, remap))
        if not isinstance(e, Var) or e not in self.checkpointed:
            return substitute(e, remap)
        if e not in self.recomputed:
            from ..op import grad as markers

            binding = self.binding_of[e]
            value = binding.value
            if isinstance(value, Call) and value.op is markers.start_checkpoint:
                self.recomputed[e] = self._forward_value(bb, value.args[0], remap)
            elif isinstance(binding, MatchCast):  # cast again: what follows was typed (and rules see it) by the cast
                again = self._forward_value(bb, value, remap)
                self.recomputed[e] = bb.match_cast(again, binding.struct_info, f"{e.name_hint}_recompute")
            else:
                again = self._forward_value(bb, value, remap)
                self.recomputed[e] = bb.emit(again, f"{e.name_hint}_recompute")
        return self.recomputed[e]

    def _propagate(self, bb: BlockBuilder, b, grad: Expr, adjoints: dict, remap: dict) -> None:
        value = b.value

        def give(target: Expr, g: Optional[Expr]) -> None:
            if g is None:
                return
            if isinstance(target, Var) and target in adjoints:
                adjoints[target].add(g)
            elif isinstance(target, Tuple) and isinstance(g, Tuple):
                for f, fg in zip(target.fields, g.fields):
                    give(f, fg)
            elif isinstance(target, Tuple):
                for i, f in enumerate(target.fields):
                    give(f, TupleGetItem(g, i))

        if isinstance(b, MatchCast) and value.struct_info != b.struct_info:
            # The cast's adjoint has the cast's struct info (maybe with sizes only the cast defines): cast it
            # back, so that the value's adjoint (a parameter's gradient, say) has the value's own.
            give(value, bb.match_cast(grad, value.struct_info, f"{b.var.name_hint}_adjoint_cast"))
        elif isinstance(value, Var) or isinstance(b, MatchCast):
            give(value, grad)
        elif isinstance(value, Tuple):
            give(value, grad)
        elif isinstance(value, TupleGetItem):
            src = value.tuple_value
            if isinstance(src, Var) and src in adjoints:
                adjoints[src].field(value.index).add(grad)
        elif isinstance(value, Call):
            call = Call(value.op, [self._forward_value(bb, a, remap) for a in value.args], value.attrs,
                        value.struct_info)
            orig = self._forward_value(bb, b.var, remap)
            try:
                grads = value.op.gradient(orig, call, grad)
            except ShapeNeeded as exc:
                self._shape_needed(b, exc)
            except NoGradientRule as exc:  # (inside a decomposition: check_rules saw the binding's own op only)
                self.fail(f"cannot differentiate binding {b.var.name_hint!r} ({value.op.name}): {exc}")
            if len(grads) != len(value.args):
                self._rule_bug(b, f"it returned {len(grads)} adjoints for {len(value.args)} arguments")
            for i, (arg, g) in enumerate(zip(value.args, grads)):
                if g is not None:
                    self._check_adjoint(b, i, arg, g)
                give(arg, g)

    def _check_adjoint(self, b: VarBinding, i: int, arg: Expr, g: Expr) -> None:
        """Refuse an adjoint the op's rule returned for argument ``i`` that provably cannot be that argument's (the
        registry's contract: the argument's struct info). Summed with the other contributions and returned as a
        gradient, it would make an ill-typed adjoint function, or a wrong gradient that no check after this sees.
        Sizes that may be equal (``n`` against 4) pass, as op inference lets them; sizes whose difference is a
        nonzero constant do not. Rules fit their results themselves (``unbroadcast`` sums a broadcast operand's
        adjoint down), so the check sees what Gradient will add up."""
        why = _adjoint_mismatch(arg.struct_info, g.struct_info)
        if why is None:
            return
        what = f"{arg.name_hint!r}" if isinstance(arg, Var) else f"a {type(arg).__name__}"
        self._rule_bug(b, f"the adjoint it returned for argument {i} ({_input_name(b.value.op, i)}, {what}) has "
                          f"struct info {format_struct_info(g.struct_info)}, but the argument has "
                          f"{format_struct_info(arg.struct_info)} ({why})")

    def _shape_needed(self, b: VarBinding, exc: ShapeNeeded):
        """A rule refused the binding for want of a rank, a shape or static sizes (``exc.need``): the user's to give by
        a ``match_cast`` of the arguments that lack it, named here with their struct info. When none lacks it, the rule
        lost it itself (a value it built): a bug in the rule."""
        advice = cast_advice(exc, free_vars_of(b.value.args))
        if advice is None:
            self._rule_bug(b, f"it refused the call for want of a {exc.need} ({exc}), which every argument has")
        raise GradientError(f"Gradient({self.name}): cannot differentiate binding {b.var.name_hint!r} "
                            f"({b.value.op.name}): its gradient rule {advice}") from None

    def _rule_bug(self, b: VarBinding, detail: str):
        """A rule broke the registry's contract: an internal error naming the op and binding, not a refusal of the
        input (which would blame the user's function)."""
        raise GradientRuleError(
            f"Gradient({self.name}): the gradient rule of {b.value.op.name} is wrong (an internal error: a bug in that "
            f"op's record, not in the function): at binding {b.var.name_hint!r}, {detail}; please report it")

    def _output_grad(self, bb: BlockBuilder, v: Var, adj: Optional[_Adjoint]) -> Var:
        """``v_adjoint``: the gradient of a required variable, bound to an output variable (zeros when no
        contribution reached it)."""
        if v in self.finished:
            return self.finished[v]
        return bb.emit_output(_materialize(adj, bb), f"{v.name_hint}_adjoint")


# -- helpers ---------------------------------------------------------------------------------------------

def _permutation(call: Call) -> Optional[tuple[int, ...]]:
    """The axes of a ``permute_dims`` call of known rank (``None`` axes: reversed), or ``None``."""
    from ..op import permute_dims

    ndim = call.struct_info.ndim if isinstance(call.struct_info, TensorStructInfo) else -1
    if call.op is not permute_dims or ndim < 0:
        return None
    axes = call.attrs["axes"]
    return tuple(reversed(range(ndim))) if axes is None else tuple(a % ndim for a in axes)


def _fold_transpose_pairs(func: Function) -> Function:
    """``y = permute_dims(x, p)`` where ``x = permute_dims(a, q)`` and ``q`` undoes ``p`` becomes ``y = a`` (an alias
    CanonicalizeBindings then removes): the matmul rule transposes its operands, which are often transposes."""
    values: dict[Var, Expr] = {}
    blocks = []
    for block in func.body.blocks:
        bindings = []
        for b in block.bindings:
            value = getattr(b, "value", None)
            if isinstance(b, VarBinding) and isinstance(value, Call) and _permutation(value) is not None:
                inner = values.get(value.args[0])
                outer_axes, inner_axes = _permutation(value), _permutation(inner) if isinstance(inner, Call) else None
                if inner_axes is not None and all(inner_axes[a] == i for i, a in enumerate(outer_axes)):
                    b = VarBinding(b.var, inner.args[0], span=b.span)
            if isinstance(b, VarBinding):
                values[b.var] = b.value
            bindings.append(b)
        blocks.append(type(block)(bindings))
    body = SeqExpr(blocks, func.body.body)
    return with_body(func, body)


def _adjoint_mismatch(want: Optional[StructInfo], got: Optional[StructInfo]) -> Optional[str]:
    """Why an adjoint of struct info ``got`` cannot be that of a value of struct info ``want``, or ``None`` when it
    may be: the same dtype (a rule casts back itself: ``cast_like``), rank and fields, and sizes not provably
    different. What is unknown on either side (a shape, a rank) is not held against it; values other than tensors
    and tuples of them (sizes, prim values: no rule returns an adjoint for one) are not checked."""
    if want is None or got is None or got == want:  # (most adjoints: the comparison of two shape tuples)
        return None
    if isinstance(want, TupleStructInfo):
        if not isinstance(got, TupleStructInfo):
            return "not a tuple"
        if len(got.fields) != len(want.fields):
            return f"{len(got.fields)} fields, not {len(want.fields)}"
        for i, (w, g) in enumerate(zip(want.fields, got.fields)):
            why = _adjoint_mismatch(w, g)
            if why is not None:
                return f"field {i}: {why}"
        return None
    if not isinstance(want, TensorStructInfo):
        return None
    if not isinstance(got, TensorStructInfo):
        return "not a tensor"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, not {want.dtype}"
    if -1 not in (got.ndim, want.ndim) and got.ndim != want.ndim:
        return f"rank {got.ndim}, not {want.ndim}"
    if got.shape is not None and want.shape is not None:
        for axis, (g, w) in enumerate(zip(got.shape, want.shape)):
            if g != w and isinstance(g - w, int):  # a nonzero constant difference: 3 and 4, n and n + 1
                return f"axis {axis} has {g} elements, not {w}"
    return None


def _is_float_like(s: StructInfo) -> bool:
    if isinstance(s, TupleStructInfo):
        return all(_is_float_like(f) for f in s.fields)
    return isinstance(s, TensorStructInfo) and is_float(s.dtype)


def _carries_gradient(s: StructInfo) -> bool:
    """Whether a value of struct info ``s`` can have a nonzero adjoint: not an integer or boolean tensor or
    scalar, nor a tuple of only such values."""
    if isinstance(s, TupleStructInfo):
        return any(_carries_gradient(f) for f in s.fields)
    if isinstance(s, (TensorStructInfo, PrimStructInfo)):
        return is_float(s.dtype)
    return True


def _input_name(op: Op, i: int) -> str:
    return op.inputs[min(i, len(op.inputs) - 1)]


def _zeros(s: StructInfo, like: Expr) -> Expr:
    """The adjoint of a value ``like`` of struct info ``s`` that nothing contributed to: ``zeros`` of its shape, or
    ``zeros_like(like)`` when the struct info has none (a parameter of unknown shape whose gradient is zero, through
    ``ceil`` or an input without a gradient, or that never reaches the target)."""
    from .. import op

    if isinstance(s, TupleStructInfo):
        return Tuple([_zeros(f, _field(like, i)) for i, f in enumerate(s.fields)])
    if s.shape is None:
        return op.zeros_like(like)
    return op.zeros(s.shape, s.dtype)


def _field(e: Expr, i: int) -> Expr:
    return e.fields[i] if isinstance(e, Tuple) else TupleGetItem(e, i)


#: Contributions summed in one nested expression at most; past it, each partial sum is bound (a weight shared
#: by hundreds of unrolled steps nested its sum as deep, past Python's recursion limit). The order is the same.
MAX_NESTED_TERMS = 16


def _materialize(adj: _Adjoint, bb: BlockBuilder) -> Expr:
    """The sum of the contributions in order (no addition for a single one), or zeros; tuples field by field."""
    if isinstance(adj.sinfo, TupleStructInfo) and not adj.terms:
        return Tuple([_materialize(adj.fields[i], bb) if i in adj.fields and not adj.fields[i].empty()
                      else _zeros(f, _field(adj.like, i)) for i, f in enumerate(adj.sinfo.fields)])
    terms = list(adj.terms)
    if isinstance(adj.sinfo, TupleStructInfo) and adj.fields:
        terms.append(Tuple([_materialize(adj.fields[i], bb) if i in adj.fields else _zeros(f, _field(adj.like, i))
                            for i, f in enumerate(adj.sinfo.fields)]))
    if not terms:
        return _zeros(adj.sinfo, adj.like)
    total = terms[0]
    for i, t in enumerate(terms[1:], 1):
        total = _add(total, t)
        if i % MAX_NESTED_TERMS == 0 and i < len(terms) - 1:
            total = bb.emit(total)
    return total


def _add(a: Expr, b: Expr) -> Expr:
    from .. import op

    if isinstance(a.struct_info, TupleStructInfo):
        return Tuple([_add(TupleGetItem(a, i), TupleGetItem(b, i)) for i in range(len(a.struct_info.fields))])
    return op.add(a, b)


def free_vars_of(exprs) -> list[Var]:
    return [v for e in exprs for v in free_vars(e)]
