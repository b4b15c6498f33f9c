"""The ``relax.grad.*`` ops: gradient markers here, and the backward ops gradient rules emit.

``grad.start_checkpoint`` / ``grad.end_checkpoint`` delimit a segment whose activations the backward pass
recomputes instead of keeping (Chen et al. 2016); ``grad.no_grad`` stops gradients from flowing through.
All three are the identity in the forward computation.

The backward ops only appear inside gradients; differentiating them again is not supported
(``SECOND_ORDER_UNSUPPORTED``). :mod:`.shape`: ``take_backward`` (a scatter-add) and ``strided_slice_backward``
(a scatter into zeros); :mod:`.nn`: ``nll_loss_backward``, ``max_pool2d_backward``, ``avg_pool2d_backward``.
"""


from __future__ import annotations

from ...ir.struct_info import TensorStructInfo
from .. import grad_utils as gu
from ..registry import BadSample, Op, Sample, register

_T = TensorStructInfo


def _identity(args, attrs):
    return args[0]


def _marker(name: str, doc: str, gradient, no_grad_inputs: tuple[str, ...] = ()) -> Op:
    return register(Op(
        name=f"relax.grad.{name}", inputs=("x",), infer=_identity, reference=lambda x: x.copy(),
        gradient=gradient, no_grad_inputs=no_grad_inputs, lowering="elementwise:identity", unsigned="agnostic",
        samples=[Sample([_T((2, 3), "float32")]), Sample([_T(("n",), "int64")], low=-4, high=4)],
        bad_samples=[BadSample([[_T((2,), "float32")]], {}, r"argument 'x' must be a tensor")], doc=doc))


def _pass_through(orig, call, grad):
    return [gu.only_float(call.args[0], grad)]


start_checkpoint = _marker("start_checkpoint", "Marks the input of a checkpointed segment (identity).",
                           _pass_through)
end_checkpoint = _marker("end_checkpoint", "Marks the output of a checkpointed segment (identity).", _pass_through)
no_grad = _marker("no_grad", "Identity whose gradient is zero: gradients do not flow through it.",
                  lambda orig, call, grad: [None], no_grad_inputs=("x",))


__all__ = ["start_checkpoint", "end_checkpoint", "no_grad", "take_backward", "strided_slice_backward",
           "nll_loss_backward", "max_pool2d_backward", "avg_pool2d_backward"]

# The backward ops build on their forward ops' modules, which are imported by now.
from .shape import strided_slice_backward, take_backward  # noqa: E402
from .nn import avg_pool2d_backward, max_pool2d_backward, nll_loss_backward  # noqa: E402
