"""``SetupTrainer``: turn a backbone module into a training module, as TVM's ``relax.training.SetupTrainer``.

The input module has a function ``backbone(inputs..., params..., states...)`` (or ``main``, as imported models
name it) returning the prediction, or
``(prediction, new_states...)`` when it has states (batch-norm running statistics), and the module attributes
``param_num`` and ``state_num``. The backbone may call other functions of the module (``cls.layer(x, w)``) and
define local ones: it is kept as written, with the functions it calls, and the functions derived from it are made
from it flattened (local functions lifted, calls inlined), which ``Gradient`` needs. The result adds:

* ``predict(inputs..., params..., states...)``: the backbone for inference (``DecomposeOpsForInference``);
* ``loss(inputs..., params..., states..., targets...)``: backbone and loss joined (``AppendLoss``), decomposed
  for training; it returns the loss, or ``(loss, new_states...)``;
* ``loss_adjoint``: its ``Gradient`` with respect to the parameters;
* ``optimizer(params, grads, optim_states) -> (new_params, new_optim_states)``;
* ``update_params(inputs..., params..., states..., targets..., optim_states...)``
  ``-> (loss, (params...), (states...), (optim_states...))``: one whole training step (forward, loss, gradient,
  optimizer update) in one function, with the calls inlined, so it compiles to one native function.

and the module attributes ``input_num``, ``param_num``, ``state_num``, ``optim_state`` (the optimizer's
initial state, a tuple of NumPy arrays), ``optimizer_kind`` (its class name, which ``Trainer.save`` records and
``Trainer.load`` compares), ``rng_key_num`` and ``loss_reduction``.
"""

from __future__ import annotations

import copy
import inspect
from contextlib import contextmanager
from typing import Sequence

from ..ir.block_builder import BlockBuilder
from ..ir.expr import Call, Function, Tuple, TupleGetItem, Var
from ..ir.module import IRModule
from ..ir.struct_info import TupleStructInfo
from .loss import Loss
from .optimizer import Optimizer
from .trainer import is_count


def check_lowerable(mod: IRModule, skip: Sequence[str] = ()) -> None:
    """Raise ``ValueError`` naming every op of ``mod``'s functions (but those in ``skip``) that neither has a
    default lowering nor one recorded in the module by ``LegalizeOps``."""
    from ..ir.visitor import post_order_visit
    from ..op.registry import Op
    from ..transform.legalize_ops import LEGALIZE_MAP_ATTR

    custom = set(mod.attrs.get(LEGALIZE_MAP_ATTR) or {})
    missing: dict[str, list[str]] = {}

    def visit(e) -> None:
        if isinstance(e, Call) and isinstance(e.op, Op) and not e.op.compilable and e.op.name not in custom:
            users = missing.setdefault(e.op.name, [])
            if name not in users:
                users.append(name)

    for name, func in mod.items():
        if name not in skip and isinstance(func, Function):
            post_order_visit(func.body, visit)
    if missing:
        listed = "; ".join(f"{op} (in {', '.join(users)})" for op, users in sorted(missing.items()))
        raise ValueError(f"SetupTrainer: no lowering for {listed}; give one with LegalizeOps, or pass legalize=False")


class SetupTrainer:
    """``SetupTrainer(loss, optimizer, loss_args, legalize=True)``; call it on a backbone module.

    ``loss_args`` are the struct info (or Vars) of the loss function's arguments: the prediction's and the
    targets'. With ``legalize`` the result is checked to be lowerable at once: every op the compiled functions
    (all but ``backbone`` and the functions it calls, which are kept as written) call must have a lowering, or a
    custom one recorded by ``LegalizeOps``; a ``ValueError`` names every op that has none and the functions that
    use it.
    """

    BACKBONE = "backbone"
    # TVM's class constants, so that code reading ``vm[SetupTrainer.ADJOINT_FUNC]`` finds the function here. The
    # names are those of the TVM version of the tutorial (``loss``, ``loss_adjoint``); current TVM spells the
    # last two ``backbone_loss`` and ``backbone_loss_adjoint``.
    BACKBONE_FUNC, BACKBONE_LOSS_FUNC, ADJOINT_FUNC, OPTIMIZER_FUNC = BACKBONE, "loss", "loss_adjoint", "optimizer"
    PARAM_NUM_ATTR_KEY, STATE_NUM_ATTR_KEY = "param_num", "state_num"

    def __init__(self, loss: Loss, optimizer: Optimizer, loss_args: Sequence, legalize: bool = True):
        if not isinstance(loss, Loss):
            raise TypeError(f"SetupTrainer: loss must be a relax_mlir.training.loss.Loss, got {type(loss).__name__}")
        if not isinstance(optimizer, Optimizer):
            raise TypeError("SetupTrainer: optimizer must be a relax_mlir.training.optimizer.Optimizer, "
                            f"got {type(optimizer).__name__}")
        if not isinstance(loss_args, (list, tuple)):
            raise TypeError(f"SetupTrainer: loss_args must be a list of the loss's arguments' struct info (or Vars), "
                            f"[predictions, targets], got {type(loss_args).__name__}")
        self.loss, self.optimizer, self.loss_args, self.legalize = loss, optimizer, list(loss_args), legalize
        _check_loss_arity(loss, self.loss_args)

    # -- checks -------------------------------------------------------------------------------------
    def _check(self, mod: IRModule) -> tuple[int, int, int]:
        if not isinstance(mod, IRModule):
            raise TypeError(f"SetupTrainer: expected an IRModule, got {type(mod).__name__}")
        missing = [k for k in ("param_num", "state_num") if k not in mod.attrs]
        if missing:
            raise ValueError(f"SetupTrainer: the module needs the attributes {', '.join(missing)} "
                             '(e.g. I.module_attrs({"param_num": 6, "state_num": 0}))')
        if self.BACKBONE not in mod:
            raise ValueError(f"SetupTrainer: the module has no function 'backbone' nor 'main' "
                             f"(it has: {', '.join(mod)})")
        param_num, state_num = _count_attr(mod, "param_num"), _count_attr(mod, "state_num")
        n_params = len(mod[self.BACKBONE].params)
        input_num = n_params - param_num - state_num
        if param_num < 1 or state_num < 0 or input_num < 1:
            raise ValueError(f"SetupTrainer: backbone has {n_params} parameters, which cannot be at least one input "
                             f"followed by param_num={param_num} parameters and state_num={state_num} states")
        ret = mod[self.BACKBONE].ret_struct_info
        if state_num and (not isinstance(ret, TupleStructInfo) or len(ret.fields) != 1 + state_num):
            raise ValueError(f"SetupTrainer: with state_num={state_num}, backbone must return (prediction, "
                             f"{state_num} new states), but it returns {ret}")
        return input_num, param_num, state_num

    # -- construction -------------------------------------------------------------------------------
    def __call__(self, mod: IRModule) -> IRModule:
        """The training module made from the backbone module ``mod``. Its internal passes run unchecked: the
        module they are given is checked once on entry and the one they make once at the end (two checks of
        well-formedness instead of one after each of seven passes; see ``_internal_passes``)."""
        from ..ir.well_formed import check_well_formed
        from ..transform.pass_infra import PassContext

        mod = _main_as_backbone(mod)
        input_num, param_num, state_num = self._check(mod)
        helpers = self._helpers(mod)
        # The backbone as written, with the functions it calls; the derived functions from it flattened.
        out = IRModule({name: mod[name] for name in mod if name == self.BACKBONE or name in helpers}, dict(mod.attrs))
        checking = PassContext.current().check_well_formed
        if checking:  # the part of the user's module kept: an ill-formed one is named as such, not as a pass's result
            check_well_formed(out, where="given to SetupTrainer")
        with _internal_passes():
            out = self._derive(out, input_num, param_num, state_num)
        if checking:
            check_well_formed(out, where="made by SetupTrainer")
        if self.legalize:
            check_lowerable(out, skip=(self.BACKBONE, *helpers))
        return out

    def _derive(self, out: IRModule, input_num: int, param_num: int, state_num: int) -> IRModule:
        """The training module's functions and attributes added to ``out`` (the backbone and its helpers)."""
        from .. import transform
        from .utils import append_loss

        backbone = _flat_backbone(out, self.BACKBONE)
        out["predict"] = backbone
        out = transform.DecomposeOpsForInference("predict")(out)

        loss_func = self.loss(*self.loss_args)
        out["loss"] = append_loss(backbone, loss_func, num_backbone_outputs=1)
        appended = len(out["loss"].params)
        out = transform.DecomposeOpsForTraining("loss")(out)
        # Random ops (dropout) add trailing key parameters; Trainer passes a fresh key per step for each.
        rng_key_num = len(out["loss"].params) - appended
        loss = out["loss"]
        params = list(loss.params[input_num:input_num + param_num])
        out = transform.Gradient("loss", require_grads=params, target_index=0)(out)
        out = transform.Sequential([transform.CanonicalizeBindings(), transform.DeadCodeElimination()])(out)

        self.optimizer.init(params)
        out["optimizer"] = self.optimizer.get_function().with_attr("global_symbol", "optimizer")
        out["update_params"] = self._update_params(out, input_num, param_num, state_num)
        out.attrs.update({"input_num": input_num, "param_num": param_num, "state_num": state_num,
                          "optim_state": tuple(self.optimizer.state), "rng_key_num": rng_key_num,
                          "optimizer_kind": type(self.optimizer).__name__,
                          "loss_reduction": self.loss.reduction})  # a data-parallel step reduces by it
        if self.loss.ignore_index is not None:
            out.attrs["ignore_index"] = self.loss.ignore_index
        return out

    def _helpers(self, mod: IRModule) -> list[str]:
        """The functions the backbone calls, directly or not: kept beside it, as the backbone calls them. One named
        as a function the training module adds would be replaced by it: refused, naming it."""
        from ..transform.utils import reachable

        helpers = [name for name in reachable(mod, self.BACKBONE) if name != self.BACKBONE]
        taken = [name for name in helpers if name in _ADDED]
        if taken:
            raise ValueError(f"SetupTrainer: the backbone calls {', '.join(map(repr, taken))}, a name of the functions "
                             f"the training module adds ({', '.join(_ADDED)}); rename it")
        return helpers

    def _update_params(self, mod: IRModule, input_num: int, param_num: int, state_num: int) -> Function:
        """One training step: ``loss_adjoint`` then ``optimizer``, inlined into one function."""
        from ..transform.inline_functions import inline_calls

        loss = mod["loss"]
        args = [Var(p.name_hint, p.struct_info) for p in loss.params]
        params = args[input_num:input_num + param_num]
        opt_sinfo = mod["optimizer"].params[2].struct_info
        opt_states = [Var(f"optim_state_{i}", s) for i, s in enumerate(opt_sinfo.fields)]
        bb = BlockBuilder(mod)
        with bb.function("update_params", args + opt_states):
            with bb.dataflow():
                adjoint = bb.emit(Call(bb.get_global_var("loss_adjoint"), args))
                ret = bb.emit(TupleGetItem(adjoint, 0))
                grads = bb.emit(TupleGetItem(adjoint, 1))
                loss_value = bb.emit(TupleGetItem(ret, 0)) if state_num else ret
                new_states = [bb.emit(TupleGetItem(ret, 1 + i)) for i in range(state_num)]
                step = bb.emit(Call(bb.get_global_var("optimizer"), [Tuple(params), grads, Tuple(opt_states)]))
                new_params, new_opt = bb.emit(TupleGetItem(step, 0)), bb.emit(TupleGetItem(step, 1))
                result = bb.emit_output(Tuple([loss_value, new_params, Tuple(new_states), new_opt]))
            bb.emit_func_output(result)
        from .. import transform

        fused = inline_calls(bb.get()["update_params"], bb.get())
        tmp = IRModule({"update_params": fused})
        tmp = transform.Sequential([transform.CanonicalizeBindings(), transform.DeadCodeElimination()])(tmp)
        return tmp["update_params"]


_ADDED = ("predict", "loss", "loss_adjoint", "optimizer", "update_params")


@contextmanager
def _internal_passes():
    """The passes SetupTrainer runs on the module it builds run under the caller's ``PassContext`` (its disabled
    passes, opt level, config; its instruments see each pass) without the well-formedness check after each: the
    check walks the whole module, and after every one of the seven passes it cost as much as the passes did on a
    warm ``relax-mlir train``. ``SetupTrainer`` checks its input and its result instead. The context is pushed as
    is, not entered: entering would call the instruments' ``enter_pass_ctx`` a second time."""
    from ..transform.pass_infra import PassContext

    ctx = copy.copy(PassContext.current())
    ctx.check_well_formed = False
    PassContext._stack.append(ctx)
    try:
        yield
    finally:
        PassContext._stack.pop()


def _flat_backbone(mod: IRModule, name: str) -> Function:
    """``mod[name]`` as one function: local functions lifted, then every call of a module function inlined.
    ``Gradient`` differentiates the bindings of one function: it refuses calls of other functions, and a local
    function's captured parameters would otherwise be invisible to it. A backbone that calls a layer function
    trains as the same backbone written inline."""
    from ..transform.inline_functions import inline_calls
    from ..transform.lambda_lift import LambdaLift, has_local_functions

    if has_local_functions(mod):
        mod = LambdaLift()(mod)
    return inline_calls(mod[name], mod, (name,))


def _count_attr(mod: IRModule, key: str) -> int:
    """A count among the module's attributes (:func:`is_count`)."""
    value = mod.attrs[key]
    if not is_count(value):
        raise ValueError(f"SetupTrainer: the module attribute {key} must be a count, an int >= 0, got {value!r} "
                         f"({type(value).__name__})")
    return int(value)


def _main_as_backbone(mod):
    """An imported module (``relax_mlir.frontend``) names its function ``main``, as TVM's importers do: without a
    ``backbone``, that is the backbone."""
    if isinstance(mod, IRModule) and SetupTrainer.BACKBONE not in mod and "main" in mod:
        renamed = {SetupTrainer.BACKBONE if name == "main" else name: func for name, func in mod.items()}
        return IRModule(renamed, dict(mod.attrs))
    return mod


def _check_loss_arity(loss: Loss, loss_args: list) -> None:
    """``loss_args`` must fit the loss's call (``(predictions, targets)``, some losses take ``weights`` too):
    said up front, not as Python's "missing 1 required positional argument" from inside SetupTrainer."""
    signature = inspect.signature(loss.__call__)
    try:
        signature.bind(*loss_args)
    except TypeError:
        wanted = ", ".join(p.name if p.default is inspect.Parameter.empty else f"[{p.name}]"
                           for p in signature.parameters.values())
        raise TypeError(f"SetupTrainer: {type(loss).__name__} takes loss_args ({wanted}), got {len(loss_args)} "
                        "struct info(s)") from None
