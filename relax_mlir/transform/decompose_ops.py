"""``DecomposeOpsForTraining`` / ``DecomposeOpsForInference``: composite ops into primitive ops (TVM's names).

    bn = R.nn.batch_norm(x, gamma, beta, mean, var)          (x: R.Tensor((8, 3), "float32"); for training:)
->
    lv = R.mean(x, axis=(0,))
    lv1 = R.expand_dims(lv, (0,))
    lv2 = R.subtract(x, lv1)
    lv3 = R.variance(x, axis=(0,))
    ...                                                      (/ sqrt(var + eps), * gamma, + beta: lv11)
    lv12 = R.multiply(R.const(0.9, "float32"), mean)
    lv13 = R.multiply(R.const(0.1, "float32"), lv)
    lv14 = R.add(lv12, lv13)
    ...                                                      (the running variance likewise: lv17)
    bn = (lv11, lv14, lv17)

``DecomposeOps`` replaces every call whose op record has a ``decompose(call) -> Expr`` slot by that expression
(``relax_mlir.op.nn.norm`` documents the contract); the pass never names an op. A decomposition may use other
composites: they are decomposed in turn.

* ``DecomposeOpsForTraining(func_name=None)``: ``MutateOpsForTraining`` then ``DecomposeOps``: batch_norm with the
  batch statistics (and updated running statistics), layer_norm, dropout with a random mask (the function gets an
  ``rng_key`` parameter, see ``MutateOpsForTraining``).
* ``DecomposeOpsForInference(func_name=None)``: ``MutateOpsForInference`` then ``DecomposeOps``: batch_norm with the
  moving statistics (returned unchanged), layer_norm, dropout as the identity (``(data, ones_like(data))``).

With ``func_name`` only that function changes (TVM's ``ApplyDecomposeToFunction``); the result is well formed
(the pass infrastructure checks). A decomposition that needs a rank or a shape the call's arguments do not have
(``topk`` of a tensor of unknown rank, ``tile`` of one of unknown shape) is refused with a :class:`DecomposeError`
naming the function, the binding, the op and the arguments to ``match_cast``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..ir.expr import Call, Expr, Function, Tuple, TupleGetItem
from ..ir.module import IRModule
from ..ir.printer import format_struct_info
from ..ir.struct_info import StructInfo, TensorStructInfo, TupleStructInfo
from ..ir.visitor import ExprMutator
from ..op.grad_utils import ShapeNeeded, cast_advice
from ..op.registry import Op
from .mutate_ops_for_training import ModePass, set_mode
from .pass_infra import FunctionPass, PassContext
from .utils import free_vars

_MAX_DEPTH = 32


class DecomposeError(ValueError):
    """A decomposition needs a rank or a shape that the arguments' struct info does not give: the message names the
    function, the binding, the op and the arguments to ``match_cast`` (the command line prints it in one line)."""


class _Decomposer(ExprMutator):
    """Replaces each call of an op with a ``decompose`` slot by its decomposition (arguments first). ``where`` (the
    pass and function), the binding being rewritten and its call (``outer``: the function's own, whose arguments the
    user can cast, even when a composite inside its decomposition refuses) name a refusal."""

    def __init__(self, mod: IRModule, where: str):
        super().__init__(mod)
        self.depth, self.where, self.binding, self.outer = 0, where, None, None

    def visit_binding(self, binding) -> None:
        self.binding = binding.var
        super().visit_binding(binding)

    def visit_call_(self, call: Call) -> Expr:
        call = self.visit_expr_post_order(call)
        decompose = call.op.decompose if isinstance(call, Call) and isinstance(call.op, Op) else None
        if self.depth == 0:
            self.outer = call
        try:
            new = decompose(call) if decompose is not None else None
        except ShapeNeeded as exc:
            self._refuse(call, exc)
        if new is None:
            return call
        if self.depth >= _MAX_DEPTH:
            raise ValueError(f"DecomposeOps: decomposing {call.op.name} keeps producing composites "
                             f"(nested {_MAX_DEPTH} deep); a decomposition must not use its own op")
        self.depth += 1
        try:
            out = self._bind(new, {}, top=True)
        finally:
            self.depth -= 1
        if not _compatible(out.struct_info, call.struct_info):
            raise ValueError(f"DecomposeOps: the decomposition of {call.op.name} gives "
                             f"{format_struct_info(out.struct_info)}, but the call has "
                             f"{format_struct_info(call.struct_info)}")
        return out

    def _refuse(self, call: Call, exc: ShapeNeeded):
        """The user's to fix with a ``match_cast`` of the binding's arguments that lack the rank or shape; when none
        lacks it, the decomposition lost it itself (its bug): the ``ShapeNeeded`` goes on, with its traceback."""
        outer = self.outer if self.depth else call
        advice = cast_advice(exc, free_vars(Tuple(list(outer.args))))
        if advice is None:
            raise exc
        binding = f"binding {self.binding.name_hint!r}" if self.binding is not None else "the function's body"
        through = "" if outer is call else f", through {call.op.name}"
        raise DecomposeError(f"{self.where}: cannot decompose {binding} ({outer.op.name}{through}): its decomposition "
                             f"{advice}") from None

    def _bind(self, e: Expr, memo: dict, top: bool = False) -> Expr:
        """Emit a decomposition's nested calls, each once: a subexpression object used twice (a mask that is
        both multiplied and returned) is bound once. Composites inside it are decomposed in turn."""
        if id(e) in memo:
            return memo[id(e)]
        if isinstance(e, Call):
            e2: Expr = Call(e.op, [self._bind(a, memo) for a in e.args], e.attrs, span=e.span)
        elif isinstance(e, Tuple):
            e2 = Tuple([self._bind(f, memo) for f in e.fields], span=e.span)
        elif isinstance(e, TupleGetItem):
            e2 = TupleGetItem(self._bind(e.tuple_value, memo), e.index, span=e.span)
        else:
            return self.visit_expr(e)
        out = self.visit_expr(e2)
        if not top and isinstance(out, (Call, TupleGetItem)):
            out = self.emit(out)
        memo[id(e)] = out
        return out


def _compatible(a: Optional[StructInfo], b: Optional[StructInfo]) -> bool:
    """Same tuple structure, dtypes and ranks (shapes may come out more refined)."""
    if isinstance(a, TupleStructInfo) and isinstance(b, TupleStructInfo):
        return len(a.fields) == len(b.fields) and all(_compatible(x, y) for x, y in zip(a.fields, b.fields))
    if isinstance(a, TensorStructInfo) and isinstance(b, TensorStructInfo):
        return a.dtype == b.dtype and (a.ndim == b.ndim or -1 in (a.ndim, b.ndim))
    return a == b


def decompose_function(func: Function, mod: IRModule, where: str = "DecomposeOps") -> Function:
    """``func`` with every call of an op that has a ``decompose`` slot replaced by its decomposition; ``where`` begins
    a refusal's message."""
    return _Decomposer(mod, where).visit_function(func)


def _where(pass_name: str, func: Function, mod: IRModule) -> str:
    """``"Pass(name)"`` for messages. A FunctionPass hands over the function, not its name; ``mod`` still holds it
    under that name (the result replaces it afterwards)."""
    name = next((n for n, f in mod.items() if f is func), None)
    return pass_name if name is None else f"{pass_name}({name})"


@dataclass(frozen=True)
class DecomposeOps(FunctionPass):
    """Decompose every composite op (``func_name``: in one function; default all), in whatever mode it is.

    Example, applied as ``DecomposeOps()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2, 4), "float32"), gamma: R.Tensor((4,), "float32"), beta: R.Tensor((4,), "float32")):
                with R.dataflow():
                    gv = R.nn.layer_norm(x, gamma, beta, axes=[1])
                    R.output(gv)
                return gv

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((2, 4), dtype="float32"),
                gamma: R.Tensor((4,), dtype="float32"),
                beta: R.Tensor((4,), dtype="float32"),
            ) -> R.Tensor((2, 4), dtype="float32"):
                with R.dataflow():
                    lv: R.Tensor((2, 1), dtype="float32") = R.mean(x, axis=(1,), keepdims=True)
                    lv_1: R.Tensor((2, 4), dtype="float32") = R.subtract(x, lv)
                    lv_2: R.Tensor((2, 1), dtype="float32") = R.variance(x, axis=(1,), keepdims=True)
                    lv_3: R.Tensor((2, 1), dtype="float32") = R.add(lv_2, R.const(1.0e-05, "float32"))
                    lv_4: R.Tensor((2, 1), dtype="float32") = R.sqrt(lv_3)
                    lv_5: R.Tensor((2, 4), dtype="float32") = R.divide(lv_1, lv_4)
                    lv_6: R.Tensor((2, 4), dtype="float32") = R.multiply(lv_5, gamma)
                    gv: R.Tensor((2, 4), dtype="float32") = R.add(lv_6, beta)
                    R.output(gv)
                return gv
    """

    name = "DecomposeOps"

    func_name: Optional[str] = None

    def transform_function(self, func: Function, mod: IRModule, ctx: PassContext) -> Function:
        return decompose_function(func, mod, _where(self.info.name, func, mod))


class _ModeThenDecompose(ModePass):
    """The training (inference) forms, then the decompositions: one pass, as TVM's Sequential of the two, so the
    well-formedness check runs once, on the result."""

    def transform_function(self, func: Function, mod: IRModule, ctx: PassContext) -> Function:
        where = _where(self.info.name, func, mod)
        return decompose_function(set_mode(func, mod, self.training, self.info.name), mod, where)


@dataclass(frozen=True)
class DecomposeOpsForTraining(_ModeThenDecompose):
    """``MutateOpsForTraining`` then ``DecomposeOps``, on ``func_name`` or every function.

    Example, applied as ``DecomposeOpsForTraining()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2, 4), "float32")):
                with R.dataflow():
                    gv = R.nn.dropout(x, rate=0.5)
                    out = gv[0]
                    R.output(out)
                return out

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((2, 4), dtype="float32"),
                rng_key: R.Tensor((), dtype="int64"),
            ) -> R.Tensor((2, 4), dtype="float32"):
                with R.dataflow():
                    lv: R.Tensor((2, 4), dtype="float32") = R.random.uniform(rng_key, (2, 4))
                    lv_1: R.Tensor((2, 4), dtype="bool") = R.greater_equal(lv, R.const(0.5, "float32"))
                    lv_2: R.Tensor((2, 4), dtype="float32") = R.where(lv_1, R.const(2.0, "float32"), R.const(0.0, "float32"))
                    lv_3: R.Tensor((2, 4), dtype="float32") = R.multiply(x, lv_2)
                    gv: R.Tuple(R.Tensor((2, 4), dtype="float32"), R.Tensor((2, 4), dtype="float32")) = (lv_3, lv_2)
                    out: R.Tensor((2, 4), dtype="float32") = gv[0]
                    R.output(out)
                return out
    """

    name = "DecomposeOpsForTraining"
    training = True


@dataclass(frozen=True)
class DecomposeOpsForInference(_ModeThenDecompose):
    """``MutateOpsForInference`` then ``DecomposeOps``, on ``func_name`` or every function.

    Example, applied as ``DecomposeOpsForInference()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2, 4), "float32")):
                with R.dataflow():
                    gv = R.nn.dropout(x, rate=0.5)
                    out = gv[0]
                    R.output(out)
                return out

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2, 4), dtype="float32")) -> R.Tensor((2, 4), dtype="float32"):
                with R.dataflow():
                    lv: R.Tensor((2, 4), dtype="float32") = R.ones_like(x)
                    gv: R.Tuple(R.Tensor((2, 4), dtype="float32"), R.Tensor((2, 4), dtype="float32")) = (x, lv)
                    out: R.Tensor((2, 4), dtype="float32") = gv[0]
                    R.output(out)
                return out
    """

    name = "DecomposeOpsForInference"
    training = False
