"""Gradient checkpointing, i.e. rematerialization (Chen et al. 2016, "Training deep nets with sublinear memory cost").

``checkpoint(bb, fn, *args)`` emits ``fn``'s bindings between ``grad.start_checkpoint`` markers on its inputs and
``grad.end_checkpoint`` markers on its outputs; the ``Gradient`` pass then keeps only the segment's inputs and
outputs for the backward pass and recomputes everything in between. ``checkpoint_sequential`` splits a sequence
of layers into segments (about sqrt(N) of them by default), as PyTorch's function of that name does.
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

from ..ir import BlockBuilder, Expr, Tuple, Var
from ..op import grad as markers


def checkpoint(bb: BlockBuilder, fn: Callable[..., Expr], *args: Expr) -> Var:
    """Emit ``fn(bb, *args)`` as a checkpointed segment and return its (marked) output."""
    marked = [bb.emit(markers.start_checkpoint(a)) for a in args]
    out = fn(bb, *marked)
    if isinstance(out, (tuple, list, Tuple)):
        raise TypeError("checkpoint: the segment must return one tensor")
    return bb.emit(markers.end_checkpoint(out))


def checkpoint_sequential(bb: BlockBuilder, layers: Sequence[Callable[[BlockBuilder, Expr], Expr]], x: Expr,
                          segments: Optional[int] = None) -> Var:
    """Apply ``layers`` in order to ``x``, in ``segments`` checkpointed segments (default ``ceil(sqrt(N))``).
    The last segment is left unmarked: its activations are needed at once by the backward pass anyway."""
    n = len(layers)
    if n == 0:
        raise ValueError("checkpoint_sequential: no layers")
    segments = segments or max(1, math.isqrt(n - 1) + 1)
    if not 1 <= segments <= n:
        raise ValueError(f"checkpoint_sequential: segments must be in [1, {n}], got {segments}")
    size = math.ceil(n / segments)
    groups = [layers[i:i + size] for i in range(0, n, size)]

    def run(group):
        def body(b: BlockBuilder, h: Expr) -> Expr:
            for layer in group:
                h = layer(b, h)
            return h
        return body

    h = x
    for group in groups[:-1]:
        h = checkpoint(bb, run(group), h)
    return run(groups[-1])(bb, h)
