"""``AppendLoss``: join a loss function to a backbone function, as TVM's ``relax.training.AppendLoss``.

The backbone returns ``(predictions..., other_outputs...)`` (or one prediction); the loss takes
``(predictions..., targets...)`` and returns a scalar. The result takes the backbone's parameters followed by the
loss's remaining ones and returns the loss, or ``(loss, other_outputs...)`` (batch-norm's updated states):

    @R.function                                    @R.function
    def predict(x, w):                             def loss(predictions, targets):
        with R.dataflow():                             with R.dataflow():
            out = R.matmul(x, w)                           lv = R.subtract(predictions, targets)
            R.output(out)                                  lv1 = R.multiply(lv, lv)
        return out                                         gv = R.sum(lv1)
                                                           R.output(gv)
                                                       return gv
AppendLoss("predict", loss) adds

    @R.function
    def predict_loss(x, w, targets):
        R.func_attr({"global_symbol": "predict_loss"})
        with R.dataflow():
            out = R.matmul(x, w)                   # now a DataflowVar: no longer an output
            lv = R.subtract(out, targets)
            lv1 = R.multiply(lv, lv)
            gv = R.sum(lv1)
            R.output(gv)
        return gv

Every variable is copied (the new function shares none with the backbone or the loss). The loss's bindings go
into the backbone's last block when it is a dataflow block (TVM requires exactly one), else into a new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from ..ir.expr import (BindingBlock, DataflowBlock, DataflowVar, Expr, Function, GlobalVar, MatchCast, SeqExpr,
                       Tuple, Var, VarBinding)
from ..ir.module import IRModule
from ..ir.struct_info import TensorStructInfo
from .pass_infra import Pass, PassContext
from .utils import substitute


class AppendLossError(ValueError):
    """The backbone or the loss function does not have the form ``AppendLoss`` needs; the message says which."""


def append_loss_function(backbone: Function, loss: Function, num_backbone_outputs: int = 1,
                         name: Optional[str] = None) -> Function:
    """The backbone joined to the loss (see the module docstring); ``name`` becomes its ``global_symbol``."""
    where = f"AppendLoss({name or 'backbone'})"
    loss_var, loss_bindings = _check_loss(loss, where)
    outputs = _backbone_outputs(backbone, where)
    k = num_backbone_outputs
    if not isinstance(k, int) or k < 1:
        raise AppendLossError(f"{where}: num_backbone_outputs must be a positive int, got {k!r}")
    if len(outputs) < k:
        raise AppendLossError(f"{where}: the backbone returns {len(outputs)} value(s), fewer than "
                              f"num_backbone_outputs={k}")
    if len(loss.params) < k:
        raise AppendLossError(f"{where}: the loss function has {len(loss.params)} parameter(s), fewer than "
                              f"num_backbone_outputs={k}")
    for i, (out, param) in enumerate(zip(outputs[:k], loss.params[:k])):
        if out.struct_info != param.struct_info:
            raise AppendLossError(f"{where}: backbone output {i} ({out.name_hint}) is {out.struct_info} but loss "
                                  f"parameter {i} ({param.name_hint}) is {param.struct_info}")

    # Fresh copies of every variable: the result must not share Vars with the functions it came from.
    remap: dict[Var, Expr] = {p: Var(p.name_hint, p.struct_info) for p in backbone.params}
    extra_params = [Var(p.name_hint, p.struct_info) for p in loss.params[k:]]
    remap.update(zip(loss.params[k:], extra_params))
    blocks = list(backbone.body.blocks)
    merge = bool(blocks) and isinstance(blocks[-1], DataflowBlock)
    # Predictions only the loss uses become dataflow variables of the merged block, as in TVM.
    kept = set(outputs[k:])
    to_dataflow = set(outputs[:k]) - kept if merge else set()
    to_dataflow &= {b.var for b in blocks[-1].bindings} if merge else set()

    new_blocks = []
    for j, block in enumerate(blocks):
        last = merge and j == len(blocks) - 1
        bindings = [_copy(b, remap, to_dataflow=b.var in to_dataflow) for b in block.bindings]
        if last:
            remap.update(zip(loss.params[:k], (remap[o] for o in outputs[:k])))
            bindings += [_copy(b, remap) for b in loss_bindings]
        new_blocks.append(DataflowBlock(bindings) if isinstance(block, DataflowBlock) else BindingBlock(bindings))
    if not merge:
        remap.update(zip(loss.params[:k], (remap[o] for o in outputs[:k])))
        new_blocks.append(DataflowBlock([_copy(b, remap) for b in loss_bindings]))

    results = [remap[loss_var], *(remap[o] for o in outputs[k:])]
    body = results[0] if len(results) == 1 else Tuple(results)
    attrs = dict(backbone.attrs)
    if name is not None:
        attrs["global_symbol"] = name
    params = [remap[p] for p in backbone.params] + extra_params
    return Function(params, SeqExpr(new_blocks, body), None, attrs, backbone.is_pure, span=backbone.span)


def _copy(binding, remap: dict[Var, Expr], to_dataflow: bool = False):
    """``binding`` with its uses remapped and a fresh variable of the same kind (a DataflowVar if ``to_dataflow``)."""
    old = binding.var
    cls = DataflowVar if to_dataflow else type(old)
    var = cls(old.name_hint, old.struct_info, span=old.span)
    value = substitute(binding.value, remap)
    remap[old] = var
    if isinstance(binding, MatchCast):
        return MatchCast(var, value, binding.struct_info, span=binding.span)
    return VarBinding(var, value, span=binding.span)


def _check_loss(loss: Function, where: str) -> tuple[Var, tuple]:
    """The loss must have one dataflow block and return a scalar (0-d tensor) variable bound in it."""
    if not isinstance(loss, Function):
        raise AppendLossError(f"{where}: the loss must be a relax Function, got {type(loss).__name__}")
    body = loss.body
    if not isinstance(body, SeqExpr) or len(body.blocks) != 1 or not isinstance(body.blocks[0], DataflowBlock):
        raise AppendLossError(f"{where}: the loss function should have exactly one DataflowBlock")
    ret = body.body
    sinfo = getattr(ret, "struct_info", None)
    if not isinstance(ret, Var) or not isinstance(sinfo, TensorStructInfo) or sinfo.ndim != 0:
        raise AppendLossError(f"{where}: the loss function must return a scalar (0-d tensor) Var, got "
                              f"{ret} of {sinfo} (use reduction 'mean' or 'sum')")
    if ret in loss.params:
        raise AppendLossError(f"{where}: the loss function returns its parameter {ret.name_hint} unchanged")
    return ret, body.blocks[0].bindings


def _backbone_outputs(backbone: Function, where: str) -> list[Var]:
    """The backbone's return values: one Var or a tuple of Vars (bound in it, or its parameters)."""
    if not isinstance(backbone, Function) or not isinstance(backbone.body, SeqExpr):
        raise AppendLossError(f"{where}: the backbone must be a relax Function with a body of binding blocks")
    ret = backbone.body.body
    fields = list(ret.fields) if isinstance(ret, Tuple) else [ret]
    if not all(isinstance(f, Var) for f in fields):
        raise AppendLossError(f"{where}: the backbone should return a Var or a tuple of Vars, got {ret}")
    return fields


@dataclass(frozen=True)
class AppendLoss(Pass):
    """``AppendLoss(func_name, loss_function, num_backbone_outputs=1, new_func_name=None)``: add
    ``new_func_name`` (default ``func_name + "_loss"``) = the backbone ``func_name`` joined to ``loss_function``.
    ``func_name`` may be a name or a ``GlobalVar``. The module's other functions are unchanged.

    Example, applied as ``AppendLoss("main", before["loss"])``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2, 3), "float32")):
                with R.dataflow():
                    gv = R.nn.relu(x)
                    R.output(gv)
                return gv

            @R.function
            def loss(pred: R.Tensor((2, 3), "float32"), target: R.Tensor((2, 3), "float32")):
                with R.dataflow():
                    d = R.subtract(pred, target)
                    sq = R.multiply(d, d)
                    gv = R.sum(sq)
                    R.output(gv)
                return gv

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
                with R.dataflow():
                    gv: R.Tensor((2, 3), dtype="float32") = R.nn.relu(x)
                    R.output(gv)
                return gv

            @R.function
            def loss(
                pred: R.Tensor((2, 3), dtype="float32"),
                target: R.Tensor((2, 3), dtype="float32"),
            ) -> R.Tensor((), dtype="float32"):
                with R.dataflow():
                    d: R.Tensor((2, 3), dtype="float32") = R.subtract(pred, target)
                    sq: R.Tensor((2, 3), dtype="float32") = R.multiply(d, d)
                    gv: R.Tensor((), dtype="float32") = R.sum(sq)
                    R.output(gv)
                return gv

            @R.function
            def main_loss(
                x: R.Tensor((2, 3), dtype="float32"),
                target: R.Tensor((2, 3), dtype="float32"),
            ) -> R.Tensor((), dtype="float32"):
                R.func_attr({"global_symbol": "main_loss"})
                with R.dataflow():
                    gv: R.Tensor((2, 3), dtype="float32") = R.nn.relu(x)
                    d: R.Tensor((2, 3), dtype="float32") = R.subtract(gv, target)
                    sq: R.Tensor((2, 3), dtype="float32") = R.multiply(d, d)
                    gv_1: R.Tensor((), dtype="float32") = R.sum(sq)
                    R.output(gv_1)
                return gv_1
    """

    name = "AppendLoss"

    func_name: Union[str, GlobalVar]
    loss_function: Function
    num_backbone_outputs: int = 1
    new_func_name: Optional[str] = None

    def __post_init__(self):
        if isinstance(self.func_name, GlobalVar):
            object.__setattr__(self, "func_name", self.func_name.name_hint)
        super().__post_init__()

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        if self.func_name not in mod:
            raise AppendLossError(f"AppendLoss: the module has no function {self.func_name!r} "
                                  f"(it has: {', '.join(mod) or 'none'})")
        name = self.new_func_name or f"{self.func_name}_loss"
        out = mod.copy()
        out[name] = append_loss_function(mod[self.func_name], self.loss_function, self.num_backbone_outputs, name)
        return out
