"""``scatter_nd`` (TVM's and ONNX's; of :mod:`.scatter`'s family, re-exported there): ``data`` with ``updates``
written or reduced at the index tuples in the last axis of ``indices``."""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir import sym
from ..ir.dtype import to_numpy
from ..ir.struct_info import TensorStructInfo
from . import grad_utils as gu
from .common import fmt, require_int, require_same_dtype
from .registry import BadSample, Op, Sample, fail, register
from .scatter import _NP_REDUCE

_T = TensorStructInfo


# -- scatter_nd -----------------------------------------------------------------------------------------------

_ND_REDUCTIONS = ("update", "add", "mul", "min", "max")


def _scatter_nd_check(attrs: dict) -> None:
    if attrs["reduction"] not in _ND_REDUCTIONS:
        fail(f"reduction must be one of {', '.join(_ND_REDUCTIONS)}, got {attrs['reduction']!r}")


def _scatter_nd_infer(args, attrs):
    """As TVM's (ONNX's ScatterND): the last axis of ``indices`` (static, ``K <= data.ndim``) holds one index of
    the first ``K`` axes of ``data``, and ``updates.shape == indices.shape[:-1] + data.shape[K:]``."""
    from .common import check_dims_match

    data, indices, updates = args
    require_int(indices, "indices")
    require_same_dtype([data, updates], ["data", "updates"])
    if indices.ndim == 0:
        fail("indices must have rank 1 or more (its last axis holds the index tuples), got a 0-d tensor")
    if data.shape is None or indices.shape is None or updates.shape is None:
        return data
    k = indices.shape[-1]
    if not isinstance(k, int):
        fail(f"the last axis of indices {fmt(indices.shape)} (the length of each index tuple) must be static, got "
             f"{sym.format_dim(k)}")
    if k > len(data.shape):
        fail(f"the index tuples of indices {fmt(indices.shape)} have {k} entries, more than the {len(data.shape)} "
             f"axes of data {fmt(data.shape)}")
    expected = tuple(indices.shape[:-1]) + tuple(data.shape[k:])
    message = (f"updates {fmt(updates.shape)} must have the shape indices.shape[:-1] + data.shape[{k}:] = "
               f"{fmt(expected)} (indices {fmt(indices.shape)}, data {fmt(data.shape)})")
    if len(updates.shape) != len(expected):
        fail(message)
    for a, b in zip(updates.shape, expected):
        check_dims_match(a, b, message)
    return data


def nd_targets(indices: np.ndarray, shape: tuple) -> np.ndarray:
    """The index tuples of ``indices`` (last axis) as non-negative positions in the first axes of ``shape``: each
    entry in ``[-s, s)`` of its axis (a negative one counts from the end); another raises ``IndexError`` naming the
    entry, its position in the indices and the axis."""
    indices = np.asarray(indices, dtype=np.int64)
    k = indices.shape[-1]
    sizes = np.array(shape[:k], dtype=np.int64).reshape((1,) * (indices.ndim - 1) + (k,))
    bad = (indices < -sizes) | (indices >= sizes)
    if bad.any():
        position = int(np.flatnonzero(bad.reshape(-1))[0])
        axis = position % k
        raise IndexError(f"index {int(indices.reshape(-1)[position])} at position {position} of the indices (flat, "
                         f"shape {fmt(indices.shape)}) is out of range for axis {axis} of size {shape[axis]}")
    return np.where(indices < 0, indices + sizes, indices)


def _scatter_nd_ref(data, indices, updates, reduction):
    k = indices.shape[-1]
    expected = indices.shape[:-1] + data.shape[k:]
    if updates.shape != expected:  # (symbolic sizes that differ at run time; compiled code refuses them)
        raise ValueError(f"updates {fmt(updates.shape)} must have the shape {fmt(expected)}")
    targets = nd_targets(indices, data.shape)
    out = data.copy()
    combine = _NP_REDUCE.get(reduction)
    for pos in np.ndindex(*indices.shape[:-1]):  # row-major order: with 'update' the last write wins
        t = tuple(int(i) for i in targets[pos])
        out[t] = updates[pos] if combine is None else combine(out[t], updates[pos])
    return out


def _nd_flat_targets(indices, data, who: str):
    """The row-major positions, in ``data.shape[:K]`` flattened, that the index tuples of ``indices`` name (negative
    entries counted from the end), built with Relax ops: the gradient reads the adjoint there with ``take``. The
    strides need the first ``K`` sizes of ``data`` static. Tuples of length 0 all name position 0 (all of
    ``data``, one row)."""
    from ..ir.expr import const
    from . import add, less, multiply, take, where, zeros

    shape, k = gu.shape_of(data, who), gu.shape_of(indices, who)[-1]
    if not all(isinstance(d, int) for d in shape[1:k]):
        raise gu.ShapeNeeded(who, f"the first {k} sizes of data {fmt(shape)} must be static (they are strides)",
                             "static shape")
    dtype = indices.struct_info.dtype
    flat = None
    for axis in range(k):
        i = take(indices, const(axis, "int64"), axis=-1)
        if isinstance(shape[axis], int):
            i = where(less(i, const(0, dtype)), add(i, const(shape[axis], dtype)), i)
        stride = int(np.prod(shape[axis + 1:k], dtype=np.int64))
        term = i if stride == 1 else multiply(i, const(stride, dtype))
        flat = term if flat is None else add(flat, term)
    if flat is None:
        flat = zeros(tuple(gu.shape_of(indices, who)[:-1]), dtype)
    rows = sym.product(shape[:k])
    return flat, (rows,) + tuple(shape[k:])


def _scatter_nd_unsupported(call) -> Optional[str]:
    reduction = call.attrs["reduction"]
    if reduction in ("update", "add") or not gu.is_float_expr(call.args[0]):
        return None
    return f"reduction {reduction!r} (only 'update' and 'add' have one)"


@gu.covers(_scatter_nd_unsupported)
def _scatter_nd_grad(orig, call, grad):
    """'add': the adjoint passes to data and is read at each tuple's target for the updates. 'update': the data's
    adjoint is zero where something was written; an update's is the adjoint at its target when it is the last write
    there (its position's number survives a scatter of all the numbers)."""
    from ..ir.expr import const
    from . import equal, reshape, take, where, zeros, zeros_like

    data, indices, updates = call.args
    if not gu.is_float_expr(orig):
        return [None, None, None]
    who = "relax.scatter_nd gradient"
    flat, rows_shape = _nd_flat_targets(indices, data, who)
    rows = grad if gu.shape_of(data, who) == rows_shape else reshape(grad, rows_shape)  # K = 1: data's own rows
    gathered = take(rows, flat, axis=0)
    if call.attrs["reduction"] == "add":
        return [grad, None, gathered]
    d_data = scatter_nd(grad, indices, zeros_like(updates), "update")
    ishape = gu.shape_of(indices, who)
    if not all(isinstance(d, int) for d in ishape):  # the last-writer mask numbers the static positions
        raise gu.ShapeNeeded(who, f"reduction 'update' needs static index shapes, got {fmt(ishape)}", "static shape")
    tuples = ishape[:-1]
    ids = const(np.arange(1, int(np.prod(tuples, dtype=np.int64)) + 1, dtype=np.int64).reshape(tuples), "int64")
    writer = scatter_nd(zeros((rows_shape[0],), "int64"), reshape(flat, tuples + (1,)), ids, "update")
    last = equal(take(writer, flat, axis=0), ids)
    rest = len(rows_shape) - 1
    mask = reshape(last, tuples + (1,) * rest) if rest else last
    return [d_data, None, where(mask, gathered, zeros_like(gathered))]


def _make_nd(rng, sinfos, attrs):
    """Random data and updates, with index tuples valid for data's first axes (negatives and repeats included)."""
    data, ind, upd = sinfos
    k = ind.shape[-1]
    sizes = np.array(data.shape[:k]).reshape((1,) * (len(ind.shape) - 1) + (k,))
    idx = np.floor(rng.uniform(-1, 1, ind.shape) * sizes).astype(to_numpy(ind.dtype))
    return [rng.uniform(-2, 2, data.shape).astype(to_numpy(data.dtype)), idx,
            rng.uniform(-2, 2, upd.shape).astype(to_numpy(upd.dtype))]


def _make_nd_unique(rng, sinfos, attrs):
    """As :func:`_make_nd`, with distinct targets (the finite differences of 'update' are then smooth)."""
    data, ind, upd = sinfos
    k = ind.shape[-1]
    count = int(np.prod(ind.shape[:-1]))
    flat = rng.permutation(int(np.prod(data.shape[:k])))[:count]
    idx = np.stack(np.unravel_index(flat, data.shape[:k]), -1).reshape(ind.shape).astype(to_numpy(ind.dtype))
    return [rng.uniform(-2, 2, data.shape).astype(to_numpy(data.dtype)), idx,
            rng.uniform(-2, 2, upd.shape).astype(to_numpy(upd.dtype))]


def _nd_args(data, indices, updates, dtype="float32", index_dtype="int64"):
    return [_T(data, dtype), _T(indices, index_dtype), _T(updates, dtype)]


scatter_nd = register(Op(
    name="relax.scatter_nd", lowering="index:scatter_nd", inputs=("data", "indices", "updates"),
    unsigned="agnostic", index_inputs=("indices",),
    attrs={"reduction": "update"}, infer=_scatter_nd_infer, check_attrs=_scatter_nd_check,
    reference=_scatter_nd_ref, gradient=_scatter_nd_grad, no_grad_inputs=("indices",),
    samples=[Sample(_nd_args((8,), (4, 1), (4,)), make=_make_nd_unique),
             Sample(_nd_args((4, 5, 3), (2, 2), (2, 3)), make=_make_nd_unique),
             Sample(_nd_args((4, 5, 3), (3, 2, 3), (3, 2), "float64", "int32"), {"reduction": "add"},
                    make=_make_nd),
             Sample(_nd_args((3, 4), (5, 2), (5,), "float64"), {"reduction": "add"}, make=_make_nd),
             Sample(_nd_args((6, "n"), (3, 1), (3, "n")), {"reduction": "add"}, make=_make_nd),
             Sample(_nd_args((3, 3), (4, 2), (4,), "int32"), {"reduction": "mul"}, make=_make_nd),
             Sample(_nd_args((3, 3), (4, 1), (4, 3), "int64"), {"reduction": "max"}, make=_make_nd),
             Sample(_nd_args((3, 3), (4, 2), (4,), "int32"), {"reduction": "min"}, make=_make_nd)],
    bad_samples=[BadSample(_nd_args((4, 3), (2, 1), (2, 3), index_dtype="float32"), {},
                           r"indices must have an integer dtype"),
                 BadSample(_nd_args((4, 3), (2, 1), (2, 4)), {},
                           r"updates \(2, 4\) must have the shape indices.shape\[:-1\] \+ data.shape\[1:\] = \(2, 3\)"),
                 BadSample(_nd_args((4, 3), (2, 3), (2,)), {}, r"have 3 entries, more than the 2 axes of data"),
                 BadSample(_nd_args((4, 3), (2, "k"), (2,)), {}, r"last axis of indices \(2, k\) .* must be static"),
                 BadSample(_nd_args((4, 3), (2, 1), (2, 3)), {"reduction": "mean"}, r"reduction must be one of"),
                 BadSample([_T((4, 3), "float32"), _T((2, 1), "int64"), _T((2, 3), "float64")], {}, r"same dtype")],
    doc="A copy of ``data`` with ``updates`` written at the index tuples of ``indices`` (TVM's ``scatter_nd``, "
        "ONNX's ScatterND): the last axis of ``indices`` (static, ``K <= data.ndim``) holds an index into the first "
        "``K`` axes of ``data``, and ``updates`` has the shape ``indices.shape[:-1] + data.shape[K:]``; "
        "``out[indices[p]] = updates[p]`` for each position ``p`` in row-major order (the last write wins), or "
        "combined by ``reduction`` 'add', 'mul', 'min' or 'max'. Index entries in ``[-s, s)`` of their axis "
        "(negatives count from the end, as ONNX's); others raise ``IndexError``. Gradient for 'update' (the last "
        "writer takes the adjoint) and 'add'."))
