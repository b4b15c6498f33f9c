"""Synchronized batch norm: every rank normalises with the statistics of the *global* batch, exactly.

A compiled function cannot talk to MPI, so the statistics enter as inputs. Each ``nn.batch_norm`` of the
backbone is rewritten to take its layer's global sums ``S1 = sum(x - c)`` and ``S2 = sum((x - c)^2)`` over the
batch (per channel; the shift ``c`` is the running mean, the same on every rank, for float32 accuracy) and to
return this rank's own sums ``s1, s2``. Layer k's sums depend only on the statistics of layers before it, so
B calls of the forward pass (each followed by an all-reduce of the sums) give every layer's global sums.

Gradients: with ``S`` held fixed, the gradient of this rank's loss misses the paths through the other ranks'
use of the statistics. The surrogate ``scale * loss_r + sum_k <G_k, s_k,r>``, where ``G_k`` is the total
adjoint of ``S_k`` (summed over ranks), has, summed over the ranks, exactly the gradient of the global loss
(reverse mode through the sum nodes ``S_k = sum_r s_k,r``). ``G`` is itself the all-reduced gradient of the
surrogate with respect to ``S``; since ``G_k`` depends only on ``G_j`` for j > k, B rounds from ``G = 0``
reach it. A step costs B forward passes and B + 1 backward passes (and 2B + 2 all-reduces) instead of one.
The running statistics are updated from the global ones, so they are the same on every rank.

A float16/bfloat16 model's statistics are computed, summed over the ranks and used in float32, as one process's
batch norm computes them (``op.nn.norm.compute_dtype``): ``S``, ``s``, ``G`` and the surrogate are float32, and
only the layer's output and new running statistics are rounded to the model's dtype, once. (Summed in bfloat16,
the running mean of the first layer ended 12 times farther from a float32 run's than one process's.)
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace

import numpy as np

from .. import op
from ..ir.block_builder import BlockBuilder
from ..ir.expr import Call, Function, Tuple, TupleGetItem, Var
from ..ir.module import IRModule
from ..ir.struct_info import TensorStructInfo
from ..op.grad_utils import scalar
from ..op.nn.norm import cast_dtype, compute_dtype
from .flat import FlatLayout, _raveled

BATCH_NORM = "relax.nn.batch_norm"
SYNC_STATS, SYNC_ADJOINT_STATS, SYNC_GRAD_FLAT = "sync_stats", "sync_adjoint_stats", "sync_grad_flat"


@dataclass(frozen=True)
class SyncLayout:
    """The statistics vector: ``[S1_0, S2_0, S1_1, S2_1, ...]``, one (C_k,) pair per batch-norm layer, in ``dtype``
    (the statistics', the adjoints' and the surrogate's: float32 for a float16/bfloat16 model)."""

    channels: tuple[int, ...]
    dtype: str
    summed_loss: bool = False  # the surrogate's loss is reduced by "sum" in place of a "mean" (see add_sync_functions)

    @property
    def layers(self) -> int:
        return len(self.channels)

    @property
    def size(self) -> int:
        return 2 * sum(self.channels)

    def views(self, flat: np.ndarray) -> list[np.ndarray]:
        """The per-layer (C_k,) vectors of a statistics (or adjoint) vector."""
        out, at = [], 0
        for c in self.channels:
            out += [flat[at:at + c], flat[at + c:at + 2 * c]]
            at += 2 * c
        return out


def _bn_bindings(func: Function) -> list:
    return [b for block in func.body.blocks for b in block.bindings
            if isinstance(b.value, Call) and getattr(b.value.op, "name", None) == BATCH_NORM]


def _cast(bb: BlockBuilder, e, dtype: str):
    """``e`` as ``dtype``: ``e`` itself when it has that dtype (a float32 model's IR is unchanged), else a bound
    ``astype``."""
    cast = cast_dtype(e, dtype)
    return e if cast is e else bb.emit(cast)


def _synced_bn(bb: BlockBuilder, call: Call, s1_total: Var, s2_total: Var, world: int):
    """``call`` (a batch_norm) with global statistics: returns ``(value, s1, s2)``. Computed in the statistics'
    dtype (``s1_total``'s: float32 for a half-precision ``x``, as the decomposed batch_norm), with the value and
    the new running statistics rounded to ``x``'s dtype once."""
    x, gamma, beta, moving_mean, moving_var = call.args
    a = call.attrs
    shape = x.struct_info.shape
    axis = a["axis"] % len(shape)
    others = tuple(i for i in range(len(shape)) if i != axis)
    count = world * int(np.prod([shape[i] for i in others]))
    dtype, ct = x.struct_info.dtype, s1_total.struct_info.dtype
    x, gamma, beta, moving_mean, moving_var = (_cast(bb, v, ct) for v in call.args)

    def expand(v):
        return bb.emit(op.expand_dims(v, others))

    d = bb.emit(x - expand(moving_mean))
    s1, s2 = bb.emit(op.sum(d, others)), bb.emit(op.sum(d * d, others))
    mean_d = bb.emit(s1_total * scalar(1.0 / count, x))
    var = bb.emit(s2_total * scalar(1.0 / count, x) - mean_d * mean_d)
    y = bb.emit((d - expand(mean_d)) * expand(op.rsqrt(var + scalar(a["epsilon"], x))))
    if a["scale"]:
        y = bb.emit(y * expand(gamma))
    if a["center"]:
        y = bb.emit(y + expand(beta))
    m = a["momentum"]
    new_mean = bb.emit(scalar(1 - m, x) * moving_mean + scalar(m, x) * (mean_d + moving_mean))
    new_var = bb.emit(scalar(1 - m, x) * moving_var + scalar(m, x) * var)
    return Tuple([_cast(bb, e, dtype) for e in (y, new_mean, new_var)]), s1, s2


def sync_backbone(backbone: Function, world: int) -> tuple[Function, SyncLayout]:
    """``backbone_sync(inputs..., params..., states..., S...) -> (outputs..., s...)``: ``backbone`` with every
    batch_norm taking its global sums and returning this rank's (see the module docstring)."""
    from ..transform.utils import substitute

    bns = _bn_bindings(backbone)
    if not bns:
        raise ValueError("DistributedTrainer: sync_batch_norm=True, but the backbone has no nn.batch_norm")
    channels = tuple(int(b.var.struct_info.fields[1].shape[0]) for b in bns)
    dtype = compute_dtype(bns[0].var.struct_info.fields[1].dtype)
    params = [Var(p.name_hint, p.struct_info) for p in backbone.params]
    totals = [Var(f"bn{k}_{which}_total", TensorStructInfo((c,), dtype))
              for k, c in enumerate(channels) for which in ("s1", "s2")]
    remap, sums = dict(zip(backbone.params, params)), []
    bb = BlockBuilder()
    with bb.function("backbone_sync", params + totals):
        with bb.dataflow():
            for block in backbone.body.blocks:
                for b in block.bindings:
                    value = substitute(b.value, remap)
                    if any(b is bn for bn in bns):
                        k = len(sums) // 2
                        value, s1, s2 = _synced_bn(bb, value, totals[2 * k], totals[2 * k + 1], world)
                        sums += [s1, s2]
                    remap[b.var] = bb.emit(value, b.var.name_hint)
            ret = substitute(backbone.body.body, remap)
            fields = list(ret.fields) if isinstance(ret, Tuple) else [ret]
            outputs = [bb.emit_output(f) for f in fields + sums]
        bb.emit_func_output(tuple(outputs))
    return bb.get()["backbone_sync"], SyncLayout(channels, dtype)


def add_sync_functions(mod: IRModule, setup_trainer, layout: FlatLayout, world: int,
                       summed_loss: bool = False) -> tuple[IRModule, SyncLayout]:
    """``mod`` with ``sync_stats``, ``sync_adjoint_stats`` and ``sync_grad_flat``, all taking
    ``(inputs..., params..., states..., targets..., S..., G..., scale)``: this rank's sums (one vector), the
    surrogate's gradient with respect to ``S`` (one vector), and ``grad_flat``'s vector of the surrogate.

    ``summed_loss``: the loss is a mean over the rank's targets' weights (nll_loss's), and the surrogate uses
    its ``"sum"`` reduction instead, which is the mean times this rank's share of the denominator (the caller
    passes ``scale`` 1). A rank whose targets are all ignored then contributes a loss of exactly 0 and no NaN:
    its mean would be 0 / 0, and ``0 * NaN`` in the surrogate would spread NaN through the adjoints ``G`` to
    every rank, although its inputs still shape the batch-norm statistics (the ``<G, s>`` terms)."""
    from .. import transform
    from ..training.utils import append_loss

    if setup_trainer is None:
        raise ValueError("DistributedTrainer: sync_batch_norm=True needs the backbone and its SetupTrainer "
                         "(Trainer(backbone, param_num, setup_trainer, ...))")
    if int(mod.attrs.get("rng_key_num", 0)):
        raise ValueError("DistributedTrainer: sync_batch_norm=True does not support random ops (dropout) yet")
    backbone, sync = sync_backbone(mod["backbone"], world)
    sync = replace(sync, summed_loss=summed_loss)
    loss_fn = setup_trainer.loss
    if summed_loss:
        loss_fn = copy.copy(loss_fn)
        loss_fn._reduction = "sum"  # (Loss keeps its reduction there; the rest of the loss is unchanged)
    loss = append_loss(backbone, loss_fn(*setup_trainer.loss_args), 1, "sync_loss")
    out = IRModule(dict(mod.items()), dict(mod.attrs))
    out["sync_loss"] = loss
    out["sync_step"] = _surrogate(out, mod, sync)
    out["sync_step"] = _inlined(out, out["sync_step"], "sync_step")  # Gradient differentiates no calls
    out = transform.DecomposeOpsForTraining("sync_step")(out)
    n_in, n_p = int(mod.attrs["input_num"]), int(mod.attrs["param_num"])
    step = out["sync_step"]
    require = list(step.params[n_in:n_in + n_p]) + [p for p in step.params if p.name_hint.endswith("_total")]
    out = transform.Gradient("sync_step", require_grads=require, target_index=0)(out)
    for name, build in ((SYNC_STATS, _stats), (SYNC_ADJOINT_STATS, _adjoint_stats), (SYNC_GRAD_FLAT, _grad_flat)):
        out[name] = _inlined(out, build(out, sync, layout, n_p), name)
    return out, sync


def _inlined(mod: IRModule, func: Function, name: str) -> Function:
    from .. import transform
    from ..transform.inline_functions import inline_calls

    clean = transform.Sequential([transform.CanonicalizeBindings(), transform.DeadCodeElimination()])
    return clean(IRModule({name: inline_calls(func, mod)}))[name]


def _surrogate(mod: IRModule, train_mod: IRModule, sync: SyncLayout) -> Function:
    """``sync_step(inputs, params, states, targets, S..., G..., scale) -> (surrogate, scale * loss, states...,
    s...)``: the surrogate and ``scale`` in the statistics' dtype, ``scale * loss`` rounded to the loss's."""
    loss = mod["sync_loss"]
    n_in, n_p, n_s = (int(train_mod.attrs[k]) for k in ("input_num", "param_num", "state_num"))
    n_back = n_in + n_p + n_s
    args = [Var(p.name_hint, p.struct_info) for p in loss.params]
    front, totals, targets = args[:n_back], args[n_back:n_back + 2 * sync.layers], args[n_back + 2 * sync.layers:]
    adjoints = [Var(t.name_hint.replace("_total", "_adjoint"), t.struct_info) for t in totals]
    scale = Var("scale", TensorStructInfo((), sync.dtype))
    bb = BlockBuilder(mod)
    with bb.function("sync_step", [*front, *targets, *totals, *adjoints, scale]):
        with bb.dataflow():
            ret = bb.emit(Call(bb.get_global_var("sync_loss"), [*front, *totals, *targets]))
            fields = [bb.emit(TupleGetItem(ret, i)) for i in range(1 + n_s + 2 * sync.layers)]
            scaled = bb.emit(scale * cast_dtype(fields[0], sync.dtype))
            total = scaled
            for g, s in zip(adjoints, fields[1 + n_s:]):
                total = bb.emit(total + op.sum(g * s))
            scaled = cast_dtype(scaled, fields[0].struct_info.dtype)
            outputs = [bb.emit_output(e) for e in [total, scaled, *fields[1:]]]
        bb.emit_func_output(tuple(outputs))
    return bb.get()["sync_step"]


def _wrapper(mod: IRModule, name: str, body) -> Function:
    """A function with ``sync_step``'s parameters whose result ``body(bb, args)`` builds."""
    args = [Var(p.name_hint, p.struct_info) for p in mod["sync_step"].params]
    bb = BlockBuilder(mod)
    with bb.function(name, args):
        with bb.dataflow():
            result = bb.emit_output(body(bb, args))
        bb.emit_func_output(result)
    return bb.get()[name]


def _stats(mod: IRModule, sync: SyncLayout, layout: FlatLayout, n_p: int) -> Function:
    def body(bb, args):
        ret = bb.emit(Call(bb.get_global_var("sync_step"), args))
        first = 2 + len(layout.state_shapes)
        return op.concat(Tuple([bb.emit(TupleGetItem(ret, first + i)) for i in range(2 * sync.layers)]), axis=0)
    return _wrapper(mod, SYNC_STATS, body)


def _adjoint_stats(mod: IRModule, sync: SyncLayout, layout: FlatLayout, n_p: int) -> Function:
    def body(bb, args):
        grads = bb.emit(TupleGetItem(bb.emit(Call(bb.get_global_var("sync_step_adjoint"), args)), 1))
        return op.concat(Tuple([bb.emit(TupleGetItem(grads, n_p + i)) for i in range(2 * sync.layers)]), axis=0)
    return _wrapper(mod, SYNC_ADJOINT_STATS, body)


def _grad_flat(mod: IRModule, sync: SyncLayout, layout: FlatLayout, n_p: int) -> Function:
    """``grad_flat``'s layout (see flat.py), of the surrogate: gradients, ``scale * loss``, states, a slot."""
    def body(bb, args):
        adjoint = bb.emit(Call(bb.get_global_var("sync_step_adjoint"), args))
        ret, grads = bb.emit(TupleGetItem(adjoint, 0)), bb.emit(TupleGetItem(adjoint, 1))
        pieces = [_raveled(bb, bb.emit(TupleGetItem(grads, i)), s) for i, s in enumerate(layout.grad_shapes)]
        pieces.append(_raveled(bb, bb.emit(TupleGetItem(ret, 1)), ()))
        pieces += [_raveled(bb, bb.emit(TupleGetItem(ret, 2 + i)), s) for i, s in enumerate(layout.state_shapes)]
        pieces.append(bb.emit(op.ones((1,), layout.dtype)))
        return op.concat(Tuple(pieces), axis=0)
    return _wrapper(mod, SYNC_GRAD_FLAT, body)
