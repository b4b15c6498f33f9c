"""Helpers the ``relax.nn`` gradient rules share: known shapes and element counts as tensors.

A count (``N`` of a batch mean, the elements a norm averages over) is a constant when the dims are ints; with
size variables it is ``sum(ones(dims))``, so the adjoint stays correct for any batch size.
"""

from __future__ import annotations

import math
from typing import Sequence

from ... import op
from ...ir.expr import Expr
from ...ir.sym import Dim
from ..grad_utils import ShapeNeeded, scalar, sinfo_of


def known_shape(e: Expr, who: str) -> tuple[Dim, ...]:
    """``e``'s shape, or a ``TypeError`` naming the op whose gradient needs it."""
    s = sinfo_of(e)
    if s.shape is None:
        raise ShapeNeeded(f"{who} gradient", f"needs static or symbolic shapes, got {s}")
    return tuple(s.shape)


def count(dims: Sequence[Dim], like: Expr) -> Expr:
    """The product of ``dims`` as a 0-d tensor of ``like``'s dtype."""
    if all(isinstance(d, int) for d in dims):
        return scalar(float(math.prod(dims)), like)
    return op.sum(op.ones(tuple(dims), sinfo_of(like).dtype))


def along(v: Expr, axis: int, shape: Sequence[Dim]) -> Expr:
    """The 1-D ``v`` (size ``shape[axis]``) reshaped to broadcast against ``shape`` along ``axis``."""
    return op.reshape(v, tuple(d if i == axis else 1 for i, d in enumerate(shape)))
