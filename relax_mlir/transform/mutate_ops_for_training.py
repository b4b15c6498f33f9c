"""``MutateOpsForTraining``: put the ops whose training behaviour differs into their training form.

    def main(x: R.Tensor((8, 3), "float32"), gamma, beta, mean, var):       (gamma ... var: R.Tensor((3,)))
        with R.dataflow():
            bn = R.nn.batch_norm(x, gamma, beta, mean, var)
            y = R.nn.dropout(bn[0], rate=0.1)
            z = R.nn.dropout(y[0], rate=0.2)
            ...
->
    def main(x, gamma, beta, mean, var, rng_key: R.Tensor((), "int64")):
        with R.dataflow():
            bn = R.nn.batch_norm(x, gamma, beta, mean, var, training=True)
            y = R.nn.dropout(bn[0], rng_key, rate=0.1)
            lv = R.add(rng_key, R.const(-7046029254386353131, "int64"))      # rng_key + 0x9E3779B97F4A7C15
            z = R.nn.dropout(y[0], lv, rate=0.2)

The pass never names an op: a record with a ``with_mode(call, training, new_key)`` slot (``relax_mlir.op.nn.norm``)
says what its training form is. batch_norm then normalises with the batch statistics and returns the updated
running statistics; dropout draws a random mask from a key (TVM leaves dropout a no-op in training).

**Keys.** A function whose ops ask for randomness gets a last parameter ``rng_key: R.Tensor((), "int64")`` (a
parameter of that name, already there, is used instead). The caller passes a fresh key every step: the trainer
passes ``relax_mlir.op.random.fold_in(seed, step)``, so a run is deterministic for its seed and a resumed run
draws the masks the uninterrupted one would. Each random site ``i`` (in program order) gets its own key
``rng_key + i * 0x9E3779B97F4A7C15`` (mod 2**64; site 0 uses ``rng_key`` itself), so no two dropouts share a mask:
with ``fold_in`` keys a site's key meets another's with probability ~2**-64, and even consecutive integer keys
(step numbers) stay clear of the other sites' offsets. ``relax.random.uniform`` hashes the key before use.

``MutateOpsForInference`` is the reverse (batch_norm with the moving statistics, dropout without a key: the
identity); ``DecomposeOpsForInference`` runs it first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from .. import op
from ..ir.expr import Call, Expr, Function, GlobalVar, Var, const
from ..ir.module import IRModule
from ..ir.struct_info import TensorStructInfo
from ..ir.visitor import ExprMutator, post_order_visit
from ..op.random import GAMMA, to_int64
from .pass_infra import FunctionPass, PassContext

RNG_KEY = "rng_key"
RNG_KEY_STRUCT_INFO = TensorStructInfo((), "int64")


class _ModeMutator(ExprMutator):
    def __init__(self, mod: IRModule, training: bool, key: Optional[Var]):
        super().__init__(mod)
        self.training, self.key, self.sites = training, key, 0
        self.added: Optional[Var] = None

    def new_key(self) -> Expr:
        if self.key is None:
            self.key = self.added = Var(RNG_KEY, RNG_KEY_STRUCT_INFO)
        site, self.sites = self.sites, self.sites + 1
        return self.key if site == 0 else op.add(self.key, const(to_int64(site * GAMMA), "int64"))

    def visit_call_(self, call: Call) -> Expr:
        call = self.visit_expr_post_order(call)
        with_mode = getattr(call.op, "with_mode", None) if isinstance(call, Call) else None
        return call if with_mode is None else with_mode(call, self.training, self.new_key)


def set_mode(func: Function, mod: IRModule, training: bool, where: str) -> Function:
    """``func`` with every op that has a ``with_mode`` slot in its training (or inference) form."""
    key = next((p for p in func.params if p.name_hint == RNG_KEY), None)
    if key is not None and key.struct_info != RNG_KEY_STRUCT_INFO:
        raise ValueError(f"{where}: parameter {RNG_KEY!r} must be R.Tensor((), \"int64\") to serve as the random "
                         f"key, got {key.struct_info}")
    mutator = _ModeMutator(mod, training, key)
    out = mutator.visit_function(func)
    if mutator.added is not None:
        out = Function(out.params + (mutator.added,), out.body, out.ret_struct_info, out.attrs, out.is_pure,
                       span=out.span)
    return out


def _callers(mod: IRModule, name: str) -> list[str]:
    found = []
    for caller, func in mod.items():
        hits: list[bool] = []
        post_order_visit(func, lambda e: hits.append(True) if isinstance(e, Call) and isinstance(e.op, GlobalVar)
                         and e.op.name_hint == name else None)
        if hits:
            found.append(caller)
    return found


def check_callers(before: IRModule, after: IRModule, where: str) -> None:
    """A function that gained an ``rng_key`` parameter must not be called by others (their calls would lack it)."""
    for name in before:
        callers = _callers(after, name) if len(after[name].params) != len(before[name].params) else []
        if callers:
            raise ValueError(f"{where}: {name!r} needs a parameter {RNG_KEY!r} for its random ops, but "
                             f"{', '.join(map(repr, callers))} call(s) it; inline the call, or give {name!r} an "
                             f"{RNG_KEY!r} parameter and pass a key")


@dataclass(frozen=True)
class ModePass(FunctionPass):
    """Base of the passes that put ops in their training (``training = True``) or inference form, in
    ``func_name`` or every function; it refuses to add an ``rng_key`` parameter to a function others call."""

    training: ClassVar[bool] = True

    func_name: Optional[str] = None

    def transform_function(self, func: Function, mod: IRModule, ctx: PassContext) -> Function:
        return set_mode(func, mod, self.training, self.info.name)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = super().transform_module(mod, ctx)
        check_callers(mod, out, self.info.name)
        return out


@dataclass(frozen=True)
class MutateOpsForTraining(ModePass):
    """Training forms of the ops that have one (``func_name``: one function; default all): see the module
    docstring. Functions with random ops get a last parameter ``rng_key``.

    Example, applied as ``MutateOpsForTraining()``::

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
                    gv: R.Tuple(R.Tensor((2, 4), dtype="float32"), R.Tensor((2, 4), dtype="float32")) = R.nn.dropout(x, rng_key)
                    out: R.Tensor((2, 4), dtype="float32") = gv[0]
                    R.output(out)
                return out
    """

    name = "MutateOpsForTraining"
    training = True


@dataclass(frozen=True)
class MutateOpsForInference(ModePass):
    """Inference forms: batch_norm with the moving statistics, dropout without a key (the identity).

    Example, applied as ``MutateOpsForInference()``::

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
                    gv: R.Tuple(R.Tensor((2, 4), dtype="float32"), R.Tensor((2, 4), dtype="float32")) = R.nn.dropout(x)
                    out: R.Tensor((2, 4), dtype="float32") = gv[0]
                    R.output(out)
                return out
    """

    name = "MutateOpsForInference"
    training = False
