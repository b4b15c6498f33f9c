"""TVM's layout composites over :mod:`.manipulate`'s ops: ``nn.batch_flatten`` (a reshape), ``meshgrid``
(reshapes and broadcasts) and ``reverse_sequence`` (a ``gather_elements`` at reversed positions)."""

from __future__ import annotations

import numpy as np

from ..ir import sym
from ..ir.expr import Tuple, TupleGetItem, const
from ..ir.struct_info import TensorStructInfo, TupleStructInfo
from . import grad_utils as gu
from .common import check_dims_match, normalize_axis, require_same_dtype
from .manipulate import broadcast_to, reshape
from .registry import BadSample, Op, Sample, fail, register

_T = TensorStructInfo


def _batch_flatten_infer(args, attrs):
    (x,) = args
    if x.ndim == -1:
        return _T(None, x.dtype, 2)
    if x.ndim < 2:
        fail(f"data must have rank >= 2 (a batch axis and the features), got rank {x.ndim}")
    return _T(None if x.shape is None else (x.shape[0], sym.product(x.shape[1:])), x.dtype, 2)


batch_flatten = register(Op(
    name="relax.nn.batch_flatten", inputs=("data",), infer=_batch_flatten_infer,
    reference=lambda x: x.reshape(x.shape[0], int(np.prod(x.shape[1:], dtype=np.int64))),
    decompose=lambda call: reshape(call.args[0], tuple(call.struct_info.shape)), gradient=gu.through_decomposition,
    samples=[Sample([_T((2, 3, 4), "float32")]), Sample([_T(("n", 3, 2, 2), "float64")]),
             Sample([_T((4, 5), "int32")]), Sample([_T(("n", "m", 3), "float32")])],
    bad_samples=[BadSample([_T((3,), "float32")], {}, r"data must have rank >= 2 .* got rank 1")],
    doc="Every axis but the first (the batch) merged into one (TVM's ``nn.batch_flatten``): ``(n, c, h, w)`` -> "
        "``(n, c * h * w)``. Composite: a ``reshape``."))


def _meshgrid_check(attrs: dict) -> None:
    if attrs["indexing"] not in ("ij", "xy"):
        fail(f"indexing must be 'ij' or 'xy', got {attrs['indexing']!r}")


def _meshgrid_order(n: int, indexing: str) -> list[int]:
    """The output axis of each input: its own, except that 'xy' (Cartesian) swaps the first two, as NumPy does."""
    order = list(range(n))
    if indexing == "xy" and n >= 2:
        order[0], order[1] = 1, 0
    return order


def _meshgrid_infer(args, attrs):
    tensors = args[0]
    if not tensors:
        fail("needs at least one 1-D tensor")
    for i, t in enumerate(tensors):
        if t.ndim != 1:
            fail(f"each input must be 1-D, got rank {t.ndim} at index {i}")
    dtype = require_same_dtype(tensors, [f"tensors[{i}]" for i in range(len(tensors))])
    if any(t.shape is None for t in tensors):
        return TupleStructInfo([_T(None, dtype, len(tensors))] * len(tensors))
    lengths = [t.shape[0] for t in tensors]
    order = _meshgrid_order(len(lengths), attrs["indexing"])
    shape = tuple(lengths[order.index(a)] for a in range(len(lengths)))
    return TupleStructInfo([_T(shape, dtype)] * len(tensors))


def _meshgrid_parts(call) -> list:
    tup = call.args[0]
    return list(tup.fields) if isinstance(tup, Tuple) else \
        [TupleGetItem(tup, i) for i in range(len(tup.struct_info.fields))]


def _meshgrid_decompose(call):
    """Each input reshaped to lie along its output axis, then broadcast to the grid."""
    parts = _meshgrid_parts(call)
    shape = tuple(call.struct_info.fields[0].shape)
    order = _meshgrid_order(len(parts), call.attrs["indexing"])
    return Tuple([broadcast_to(reshape(t, tuple(-1 if a == order[i] else 1 for a in range(len(parts)))), shape)
                  for i, t in enumerate(parts)])


def _meshgrid_grad(orig, call, grad):
    """Each input's adjoint: its grid's adjoint summed over every other axis."""
    from . import sum as reduce_sum

    parts = _meshgrid_parts(call)
    order = _meshgrid_order(len(parts), call.attrs["indexing"])
    grads = grad.fields if isinstance(grad, Tuple) else [TupleGetItem(grad, i) for i in range(len(parts))]
    if not gu.is_float_expr(parts[0]):
        return [None]
    others = [tuple(a for a in range(len(parts)) if a != order[i]) for i in range(len(parts))]
    return [Tuple([reduce_sum(g, axes) if axes else g for g, axes in zip(grads, others)])]


meshgrid = register(Op(
    name="relax.meshgrid", inputs=("tensors",), tuple_input=True, attrs={"indexing": "ij"}, infer=_meshgrid_infer,
    check_attrs=_meshgrid_check, reference=lambda ts, indexing: tuple(np.array(g) for g in np.meshgrid(
        *ts, indexing=indexing)), decompose=_meshgrid_decompose, gradient=_meshgrid_grad,
    samples=[Sample([[_T((3,), "float32"), _T((4,), "float32")]]),
             Sample([[_T((3,), "float64"), _T((4,), "float64"), _T((2,), "float64")]], {"indexing": "xy"}),
             Sample([[_T(("n",), "float32"), _T((2,), "float32")]], {"indexing": "xy"}),
             Sample([[_T((5,), "int32")]]), Sample([[_T((2,), "int64"), _T((3,), "int64")]], {"indexing": "ij"})],
    bad_samples=[BadSample([[_T((3, 1), "float32")]], {}, r"each input must be 1-D, got rank 2 at index 0"),
                 BadSample([[_T((3,), "float32"), _T((2,), "float64")]], {}, r"same dtype"),
                 BadSample([[_T((3,), "float32")]], {"indexing": "ji"}, r"indexing must be 'ij' or 'xy', got 'ji'"),
                 BadSample([[]], {}, r"needs at least one 1-D tensor")],
    doc="Coordinate grids from a tuple of 1-D tensors (TVM's ``meshgrid(tensors, indexing='ij')``, NumPy's): "
        "output ``i`` repeats input ``i`` along every other axis. ``'ij'`` gives the grids the inputs' lengths in "
        "order; ``'xy'`` swaps the first two axes, as NumPy and TVM's compiled op (TVM's inference keeps the "
        "``'ij'`` shape). Composite: ``reshape`` and ``broadcast_to``; each input's gradient sums its grid's."))


def _reverse_sequence_infer(args, attrs):
    data, lengths = args
    if lengths.ndim not in (-1, 1):
        fail(f"seq_lengths must be 1-D, got rank {lengths.ndim}")
    if lengths.dtype not in ("int32", "int64"):
        fail(f"seq_lengths must have dtype int32 or int64, got {lengths.dtype}")
    if data.ndim != -1:
        seq = normalize_axis(attrs["seq_axis"], data.ndim, "seq_axis")
        batch = normalize_axis(attrs["batch_axis"], data.ndim, "batch_axis")
        if seq == batch:
            fail(f"seq_axis and batch_axis must differ, got both {seq}")
        if data.shape is not None and lengths.shape is not None:
            check_dims_match(lengths.shape[0], data.shape[batch], f"seq_lengths must have one length per batch "
                             f"(data's axis {batch}: {data.shape[batch]}), got {lengths.shape[0]}")
    return data


def _reverse_sequence_ref(data, lengths, seq_axis, batch_axis):
    """Along ``seq_axis``, batch ``b``'s first ``lengths[b]`` elements reversed (clamped to the axis' length, as
    TVM's; a length of 1 or less changes nothing)."""
    seq, batch = seq_axis % data.ndim, batch_axis % data.ndim
    n = data.shape[seq]
    i = np.arange(n).reshape([n if a == seq else 1 for a in range(data.ndim)])
    stop = np.clip(lengths.astype(np.int64), 0, n).reshape([-1 if a == batch else 1 for a in range(data.ndim)])
    idx = np.broadcast_to(np.where(i < stop, stop - 1 - i, i), data.shape)
    return np.take_along_axis(data, idx, axis=seq)


def _reverse_sequence_decompose(call):
    """``gather_elements`` along ``seq_axis`` at ``where(i < L, L - 1 - i, i)``, ``L`` each batch's length clamped
    into ``[0, n]``."""
    from . import astype, gather_elements, less, maximum, minimum, where
    from .create import arange

    data, lengths = call.args
    shape = gu.shape_of(data, call.op.name)
    seq, batch = (normalize_axis(call.attrs[key], len(shape)) for key in ("seq_axis", "batch_axis"))
    n = shape[seq]
    i = reshape(arange(0, n, dtype="int64"), tuple(n if a == seq else 1 for a in range(len(shape))))
    wide = lengths if gu.sinfo_of(lengths).dtype == "int64" else astype(lengths, "int64")
    stop = minimum(maximum(wide, const(0, "int64")), arange(n, n + 1, dtype="int64"))
    stop = reshape(stop, tuple(shape[batch] if a == batch else 1 for a in range(len(shape))))
    idx = where(less(i, stop), stop - const(1, "int64") - i, i)
    same = tuple(gu.shape_of(idx, call.op.name)) == tuple(shape)  # (both axes all there is: no broadcast)
    return gather_elements(data, idx if same else broadcast_to(idx, shape), seq)


reverse_sequence = register(Op(
    name="relax.reverse_sequence", inputs=("data", "seq_lengths"), attrs={"seq_axis": 1, "batch_axis": 0},
    infer=_reverse_sequence_infer, reference=_reverse_sequence_ref, decompose=_reverse_sequence_decompose,
    gradient=gu.through_decomposition, no_grad_inputs=("seq_lengths",),
    samples=[Sample([_T((4, 5), "float32"), _T((4,), "int64")], low=0, high=6),
             Sample([_T((5, 3, 2), "float64"), _T((3,), "int32")], {"seq_axis": 0, "batch_axis": 1}, low=-1, high=7),
             Sample([_T(("n", 6, 2), "float32"), _T(("n",), "int64")], low=0, high=7),
             Sample([_T((2, 4), "int32"), _T((2,), "int32")], {"seq_axis": -1, "batch_axis": -2}, low=0, high=5)],
    bad_samples=[BadSample([_T((4, 5), "float32"), _T((3,), "int64")], {},
                           r"seq_lengths must have one length per batch \(data's axis 0: 4\), got 3"),
                 BadSample([_T((4, 5), "float32"), _T((4,), "float32")], {}, r"int32 or int64, got float32"),
                 BadSample([_T((4, 5), "float32"), _T((4, 1), "int64")], {}, r"seq_lengths must be 1-D"),
                 BadSample([_T((4, 5), "float32"), _T((4,), "int64")], {"seq_axis": 0},
                           r"seq_axis and batch_axis must differ"),
                 BadSample([_T((4, 5), "float32"), _T((4,), "int64")], {"seq_axis": 2}, r"seq_axis 2 is out of range")],
    doc="Along ``seq_axis``, the first ``seq_lengths[b]`` elements of each batch ``b`` (along ``batch_axis``) "
        "reversed, the rest kept (TVM's ``reverse_sequence(data, seq_lengths, seq_axis=1, batch_axis=0)``, ONNX's "
        "ReverseSequence); a length beyond the axis reverses all of it and one of 1 or less nothing, as TVM's. "
        "Composite: ``gather_elements`` at the reversed positions; its gradient scatters the adjoint back."))
