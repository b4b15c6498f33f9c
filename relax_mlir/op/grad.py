"""Gradient markers: identity ops that tell the ``Gradient`` pass what to do with a value.

``grad.start_checkpoint`` / ``grad.end_checkpoint`` delimit a segment whose activations the backward pass
recomputes instead of keeping (Chen et al. 2016); ``grad.no_grad`` stops gradients from flowing through.
All three are the identity in the forward computation.
"""

from __future__ import annotations

from ..ir.struct_info import TensorStructInfo
from .registry import BadSample, Op, Sample, register

_T = TensorStructInfo


def _identity(args, attrs):
    return args[0]


def _marker(name: str, doc: str) -> Op:
    return register(Op(
        name=f"relax.grad.{name}", inputs=("x",), infer=_identity, reference=lambda x: x.copy(),
        samples=[Sample([_T((2, 3), "float32")]), Sample([_T(("n",), "int64")], low=-4, high=4)],
        bad_samples=[BadSample([[_T((2,), "float32")]], {}, r"argument 'x' must be a tensor")], doc=doc))


start_checkpoint = _marker("start_checkpoint", "Marks the input of a checkpointed segment (identity).")
end_checkpoint = _marker("end_checkpoint", "Marks the output of a checkpointed segment (identity).")
no_grad = _marker("no_grad", "Identity whose gradient is zero: gradients do not flow through it.")
