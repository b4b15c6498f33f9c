"""The two functions a data-parallel step is split into, added to a module ``SetupTrainer`` made.

``update_params`` does forward, backward and optimizer in one native call, but data parallelism needs the
gradients of every rank summed *between* backward and optimizer. So the step becomes two functions:

* ``grad_flat(inputs..., params..., states..., targets..., [keys])`` -> one flat vector
  ``[grad_0, ..., grad_{P-1}, loss, state_0, ..., state_{S-1}, weight]`` (each raveled): ``loss_adjoint``
  with its outputs packed by the compiled code itself, so the all-reduce runs in place on the buffer the
  native function returned (no per-tensor copies, no Python objects); ``weight`` is a slot the trainer fills
  with this rank's share of a mean loss;
* ``apply_flat(params..., flat, optim_states...) -> ((params...), (optim_states...))``: the optimizer, reading
  each gradient as a slice of the reduced vector.

Both are built from the module's own ``loss_adjoint`` and ``optimizer`` and inlined, so every rank runs the
same compiled optimizer as ``update_params`` does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import op
from ..ir.block_builder import BlockBuilder
from ..ir.expr import Call, Function, Tuple, TupleGetItem, Var
from ..ir.module import IRModule
from ..ir.struct_info import TensorStructInfo

GRAD_FLAT, APPLY_FLAT = "grad_flat", "apply_flat"


@dataclass(frozen=True)
class FlatLayout:
    """Where each piece sits in the flat vector (offsets in elements)."""

    grad_shapes: tuple[tuple[int, ...], ...]
    state_shapes: tuple[tuple[int, ...], ...]
    dtype: str

    @property
    def grad_offsets(self) -> list[int]:
        return list(np.cumsum([0] + [int(np.prod(s)) for s in self.grad_shapes]))

    @property
    def loss_index(self) -> int:
        """The loss sits right after the gradients: ``flat[:loss_index + 1]`` is what a mean loss scales."""
        return self.grad_offsets[-1]

    @property
    def state_offsets(self) -> list[int]:
        return list(self.loss_index + 1 + np.cumsum([0] + [int(np.prod(s)) for s in self.state_shapes]))

    @property
    def size(self) -> int:
        return self.state_offsets[-1] + 1  # the weight slot is last

    def states(self, flat: np.ndarray) -> list[np.ndarray]:
        """Views of the states in ``flat`` (contiguous: each is a slice of a 1-D array)."""
        offsets = self.state_offsets
        return [flat[a:b].reshape(s) for a, b, s in zip(offsets, offsets[1:], self.state_shapes)]


def _shape(v: Var, what: str) -> tuple[int, ...]:
    s = v.struct_info
    if not isinstance(s, TensorStructInfo) or s.shape is None or not all(isinstance(d, int) for d in s.shape):
        raise ValueError(f"DistributedTrainer: {what} {v.name_hint!r} needs a static shape, got {s}")
    return tuple(s.shape)


def layout_of(mod: IRModule) -> FlatLayout:
    """The flat layout of ``mod``'s parameters and states; all of them (and the loss) must share one float
    dtype, since they travel in one buffer."""
    input_num, param_num = int(mod.attrs["input_num"]), int(mod.attrs["param_num"])
    state_num = int(mod.attrs["state_num"])
    predict = mod["predict"].params
    params = predict[input_num:input_num + param_num]
    states = predict[input_num + param_num:input_num + param_num + state_num]
    dtypes = {v.struct_info.dtype for v in [*params, *states]}
    if len(dtypes) != 1 or not next(iter(dtypes)).startswith(("float", "bfloat")):
        raise ValueError("DistributedTrainer: parameters and states must share one float dtype (they are reduced "
                         f"in one buffer), got {', '.join(sorted(dtypes))}")
    return FlatLayout(tuple(_shape(v, "parameter") for v in params), tuple(_shape(v, "state") for v in states),
                      dtypes.pop())


def add_flat_functions(mod: IRModule) -> IRModule:
    """``mod`` (made by ``SetupTrainer``) with ``grad_flat`` and ``apply_flat`` added (see the module docstring)."""
    from .. import transform
    from ..transform.inline_functions import inline_calls

    layout = layout_of(mod)
    out = IRModule(dict(mod.items()), dict(mod.attrs))
    out[GRAD_FLAT] = _grad_flat(out, layout)
    out[APPLY_FLAT] = _apply_flat(out, layout)
    for name in (GRAD_FLAT, APPLY_FLAT):
        out[name] = inline_calls(out[name], out)
    clean = transform.Sequential([transform.CanonicalizeBindings(), transform.DeadCodeElimination()])
    tmp = clean(IRModule({GRAD_FLAT: out[GRAD_FLAT], APPLY_FLAT: out[APPLY_FLAT]}))
    out[GRAD_FLAT], out[APPLY_FLAT] = tmp[GRAD_FLAT], tmp[APPLY_FLAT]
    return out


def _raveled(bb: BlockBuilder, e, shape: tuple[int, ...]):
    return bb.emit(op.reshape(e, (int(np.prod(shape)),)))


def _grad_flat(mod: IRModule, layout: FlatLayout) -> Function:
    state_num = len(layout.state_shapes)
    args = [Var(p.name_hint, p.struct_info) for p in mod["loss_adjoint"].params]
    bb = BlockBuilder(mod)
    with bb.function(GRAD_FLAT, args):
        with bb.dataflow():
            adjoint = bb.emit(Call(bb.get_global_var("loss_adjoint"), args))
            ret, grads = bb.emit(TupleGetItem(adjoint, 0)), bb.emit(TupleGetItem(adjoint, 1))
            loss = bb.emit(TupleGetItem(ret, 0)) if state_num else ret
            pieces = [_raveled(bb, bb.emit(TupleGetItem(grads, i)), s) for i, s in enumerate(layout.grad_shapes)]
            pieces.append(_raveled(bb, loss, ()))
            pieces += [_raveled(bb, bb.emit(TupleGetItem(ret, 1 + i)), s) for i, s in enumerate(layout.state_shapes)]
            pieces.append(bb.emit(op.ones((1,), layout.dtype)))
            flat = bb.emit_output(op.concat(Tuple(pieces), axis=0), "flat")
        bb.emit_func_output(flat)
    return bb.get()[GRAD_FLAT]


def _apply_flat(mod: IRModule, layout: FlatLayout) -> Function:
    optimizer = mod["optimizer"]
    params = [Var(f"param_{i}", s) for i, s in enumerate(optimizer.params[0].struct_info.fields)]
    flat = Var("flat", TensorStructInfo((layout.size,), layout.dtype))
    optim = [Var(f"optim_state_{i}", s) for i, s in enumerate(optimizer.params[2].struct_info.fields)]
    offsets = layout.grad_offsets
    bb = BlockBuilder(mod)
    with bb.function(APPLY_FLAT, [*params, flat, *optim]):
        with bb.dataflow():
            grads = [bb.emit(op.reshape(bb.emit(op.strided_slice(flat, axes=(0,), begin=(a,), end=(b,))), s))
                     for a, b, s in zip(offsets, offsets[1:], layout.grad_shapes)]
            step = bb.emit(Call(bb.get_global_var("optimizer"), [Tuple(params), Tuple(grads), Tuple(optim)]))
            result = bb.emit_output(Tuple([bb.emit(TupleGetItem(step, 0)), bb.emit(TupleGetItem(step, 1))]))
        bb.emit_func_output(result)
    return bb.get()[APPLY_FLAT]
