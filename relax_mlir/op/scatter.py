"""Element-wise indexing: ``gather_elements``, ``scatter_elements`` (TVM's names; ONNX's semantics, which TVM's
docstrings give) and ``one_hot``. Each reads or writes where its integer indices say, so the compiled code checks
every index (``backend/legalize/checks.py``): an out-of-range one raises ``IndexError`` naming the op, the value
and its position, and nothing outside a buffer is touched. The references raise ``IndexError`` as well.

Negative indices: ``gather_elements`` and ``scatter_elements`` take ``[-s, s)`` along ``axis`` (a negative index
counts from the end, as TVM documents for scatter_elements), ``gather_elements(..., negative_indices=False)``
``[0, s)`` (PyTorch's ``gather``, which raises for a negative index); ``one_hot`` takes ``[0, depth)`` only (TVM's
kernel gives an all-``off_value`` row for anything else; here that is an error, as an out-of-range class label is).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir import sym
from ..ir.dtype import check_dtype, is_float, to_numpy
from ..ir.expr import PrimValue
from ..ir.struct_info import TensorStructInfo
from . import grad_utils as gu
from .common import fmt, is_int_value, normalize_axis, require_int, require_same_dtype
from .indexing import take_indices
from .registry import NOT_DIFFERENTIABLE, REQUIRED, BadSample, Op, Sample, fail, register

_T = TensorStructInfo
_REDUCTIONS = ("update", "add", "mul", "mean", "min", "max")


def _check_like(data: TensorStructInfo, indices: TensorStructInfo, axis: int, what: str) -> None:
    """indices has data's rank; off ``axis`` its dims must not exceed data's (static), or be data's own."""
    if data.shape is None or indices.shape is None:
        return
    if len(indices.shape) != len(data.shape):
        fail(f"indices {fmt(indices.shape)} must have the rank of data {fmt(data.shape)}")
    for d, (a, b) in enumerate(zip(indices.shape, data.shape)):
        if d == axis or a == b or (isinstance(a, int) and isinstance(b, int) and a <= b):
            continue
        fail(f"{what}: indices {fmt(indices.shape)} must not be larger than data {fmt(data.shape)} off axis {axis} "
             f"(dim {d}: {sym.format_dim(a)} against {sym.format_dim(b)})")


def _axis_of(data: TensorStructInfo, attrs: dict):
    return None if data.ndim == -1 else normalize_axis(attrs["axis"], data.ndim)


def _make_indices(rng, sinfos, attrs):
    """Random data (and updates) with indices valid for ``axis``, negatives and repeats included."""
    data, ind = sinfos[:2]
    size = data.shape[attrs["axis"] % len(data.shape)]
    return ([rng.uniform(-2, 2, data.shape).astype(to_numpy(data.dtype)),
             rng.integers(-size, size, ind.shape).astype(to_numpy(ind.dtype))]
            + [rng.uniform(-2, 2, s.shape).astype(to_numpy(s.dtype)) for s in sinfos[2:]])


def _non_negative(rng, sinfos, attrs):
    data, ind = sinfos
    size = data.shape[attrs["axis"] % len(data.shape)]
    return [rng.uniform(-2, 2, data.shape).astype(to_numpy(data.dtype)),
            rng.integers(0, size, ind.shape).astype(to_numpy(ind.dtype))]


# -- gather_elements ------------------------------------------------------------------------------------------

def _gather_infer(args, attrs):
    data, indices = args
    require_int(indices, "indices")
    axis = _axis_of(data, attrs)
    if axis is not None:
        _check_like(data, indices, axis, "gather_elements")
    return _T(indices.shape, data.dtype, indices.ndim)


def _gather_check(attrs: dict) -> None:
    if not isinstance(attrs["negative_indices"], bool):
        fail(f"negative_indices must be a bool, got {attrs['negative_indices']!r}")


def range_note(size) -> str:
    """What an index error of ``gather_elements(..., negative_indices=False)`` adds: the indices it takes along an
    axis of ``size`` (a number, or the text standing for a dynamic one)."""
    return f"gather_elements takes [0, {size}) with negative_indices=False, as PyTorch's gather"


def _gather_positions(indices: np.ndarray, size: int, axis: int, negative_indices: bool) -> np.ndarray:
    """``indices`` as positions along ``axis``. Outside ``[-size, size)`` (``[0, size)`` without
    ``negative_indices``: the first such one named with its flat position, the axis and the range, in the words of
    the compiled check) an index raises ``IndexError``."""
    flat = np.asarray(indices, dtype=np.int64).reshape(-1)
    bad = np.flatnonzero((flat < 0) | (flat >= size))
    if not negative_indices and bad.size:
        raise IndexError(f"index {int(flat[bad[0]])} at position {int(bad[0])} of the indices (flat, shape "
                         f"{fmt(np.shape(indices))}) is out of range for axis {axis} of size {size} "
                         f"({range_note(size)})")
    return take_indices(indices, size, "fast")


def _gather_ref(data, indices, axis, negative_indices=True):
    axis %= data.ndim
    ind = _gather_positions(indices, data.shape[axis], axis, negative_indices)
    out = np.empty(indices.shape, data.dtype)
    for pos in np.ndindex(*indices.shape):
        out[pos] = data[pos[:axis] + (ind[pos],) + pos[axis + 1:]]
    return out


def _gather_grad(x, g, call):
    from . import zeros_like

    return scatter_elements(zeros_like(x), call.args[1], g, call.attrs["axis"], "add")


gather_elements = register(Op(
    name="relax.gather_elements", lowering="index:gather_elements", inputs=("data", "indices"),
    attrs={"axis": 0, "negative_indices": True}, unsigned="agnostic", index_inputs=("indices",),
    infer=_gather_infer, check_attrs=_gather_check, reference=_gather_ref, gradient=gu.tensor_rule(_gather_grad),
    no_grad_inputs=("indices",),
    samples=[Sample([_T((3, 4), "float32"), _T((2, 4), "int64")], {"axis": 0}, make=_make_indices),
             Sample([_T((3, 4), "float64"), _T((3, 6), "int32")], {"axis": -1}, make=_make_indices),
             Sample([_T(("n", 5, 2), "float32"), _T(("n", 3, 2), "int64")], {"axis": 1}, make=_make_indices),
             Sample([_T((3, 4), "float32"), _T((3, 2), "int64")], {"axis": 1, "negative_indices": False},
                    make=_non_negative)],
    bad_samples=[BadSample([_T((3, 4), "float32"), _T((2, 4), "float32")], {}, r"indices must have an integer dtype"),
                 BadSample([_T((3, 4), "float32"), _T((2, 5), "int64")], {}, r"must not be larger than data"),
                 BadSample([_T((3, 4), "float32"), _T((2,), "int64")], {}, r"must have the rank of data"),
                 BadSample([_T((3, 4), "float32"), _T((2, 4), "int64")], {"axis": 2}, r"axis 2 is out of range"),
                 BadSample([_T((3, 4), "float32"), _T((2, 4), "int64")], {"negative_indices": 0},
                           r"negative_indices must be a bool, got 0")],
    doc="``out[i][j] = data[indices[i][j]][j]`` for ``axis=0`` (ONNX's GatherElements, TVM's ``gather_elements``): "
        "the output has the indices' shape. Indices in ``[-s, s)`` (negative ones count from the end, as ONNX's); "
        "with ``negative_indices=False`` (PyTorch's ``gather``, which the importer writes) in ``[0, s)``. Others "
        "raise ``IndexError`` naming the index, its position and the axis and its size (and the range ``[0, s)`` "
        "without negative indices). Gradient: a scatter-add of the adjoint into zeros."))


# -- scatter_elements -----------------------------------------------------------------------------------------

def _scatter_check(attrs: dict) -> None:
    if attrs["reduction"] not in _REDUCTIONS:
        fail(f"reduction must be one of {', '.join(_REDUCTIONS)}, got {attrs['reduction']!r}")


def _scatter_infer(args, attrs):
    data, indices, updates = args
    require_int(indices, "indices")
    require_same_dtype([data, updates], ["data", "updates"])
    if attrs["reduction"] == "mean" and not is_float(data.dtype):
        fail(f"reduction 'mean' needs float data (each write halves the sum of the old value and the update), got "
             f"{data.dtype}")
    axis = _axis_of(data, attrs)
    if axis is not None:
        _check_like(data, indices, axis, "scatter_elements")
    if indices.shape is not None and updates.shape is not None:
        if len(indices.shape) != len(updates.shape) or any(
                isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(indices.shape, updates.shape)):
            fail(f"updates {fmt(updates.shape)} must have the shape of indices {fmt(indices.shape)}")
    return data


_NP_REDUCE = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum,
              "mean": lambda old, new: (old + new) / 2}


def _scatter_ref(data, indices, updates, axis, reduction):
    if np.shape(updates) != np.shape(indices):  # (symbolic sizes that differ at run time; compiled code refuses them)
        raise ValueError(f"updates {fmt(np.shape(updates))} must have the shape of indices {fmt(np.shape(indices))}")
    axis %= data.ndim
    ind = take_indices(indices, data.shape[axis], "fast")
    out = data.copy()
    for pos in np.ndindex(*indices.shape):  # row-major order: with reduction 'update' the last write wins
        target = pos[:axis] + (ind[pos],) + pos[axis + 1:]
        out[target] = updates[pos] if reduction == "update" else _NP_REDUCE[reduction](out[target], updates[pos])
    return out


def _scatter_unsupported(call) -> Optional[str]:
    """The reductions without a rule ('mul', 'min', 'max': neither TVM nor this library has one) of float data
    (integer data has no gradient to refuse)."""
    reduction = call.attrs["reduction"]
    if reduction in ("update", "add") or not gu.is_float_expr(call.args[0]):
        return None
    return f"reduction {reduction!r} (only 'update' and 'add' have one)"


@gu.covers(_scatter_unsupported)
def _scatter_grad(orig, call, grad):
    """'update': the data's adjoint is zero where something was written; an update's is the adjoint at its target
    when it is the last write there. 'add': the adjoint passes to data and is gathered for the updates."""
    from ..ir.expr import const
    from . import equal, where, zeros, zeros_like

    data, indices, updates = call.args
    if not gu.is_float_expr(orig):
        return [None, None, None]
    a = call.attrs
    gathered = gather_elements(grad, indices, a["axis"])
    if a["reduction"] == "add":
        return [grad, None, gathered]
    d_data = scatter_elements(grad, indices, zeros_like(updates), a["axis"], "update")
    shape = gu.shape_of(indices, "relax.scatter_elements gradient")
    if not all(isinstance(d, int) for d in shape):  # the last-writer mask numbers the static positions
        raise gu.ShapeNeeded("relax.scatter_elements gradient", "reduction 'update' needs static index shapes, got "
                             f"{fmt(shape)}", "static shape")
    ids = const(np.arange(1, int(np.prod(shape)) + 1, dtype=np.int64).reshape(shape), "int64")
    writer = scatter_elements(zeros(gu.shape_of(data, "relax.scatter_elements gradient"), "int64"), indices, ids,
                              a["axis"], "update")
    last = equal(gather_elements(writer, indices, a["axis"]), ids)
    return [d_data, None, where(last, gathered, zeros_like(gathered))]


def _scatter_args(data, indices, dtype="float32", index_dtype="int64"):
    return [_T(data, dtype), _T(indices, index_dtype), _T(indices, dtype)]


scatter_elements = register(Op(
    name="relax.scatter_elements", lowering="index:scatter_elements", inputs=("data", "indices", "updates"),
    unsigned="agnostic", index_inputs=("indices",),
    attrs={"axis": 0, "reduction": "update"}, infer=_scatter_infer, check_attrs=_scatter_check,
    reference=_scatter_ref, gradient=_scatter_grad, no_grad_inputs=("indices",),
    samples=[Sample(_scatter_args((4, 3), (3, 3)), {"axis": 0}, make=_make_indices),
             Sample(_scatter_args((3, 5), (3, 4), "float64", "int32"), {"axis": 1, "reduction": "add"},
                    make=_make_indices),
             Sample(_scatter_args((2, 6), (2, 5), "float64"), {"axis": -1}, make=_make_indices),
             Sample(_scatter_args(("n", 4), ("n", 2), "float32"), {"axis": 1, "reduction": "add"},
                    make=_make_indices),
             Sample(_scatter_args((3, 3), (2, 3), "int32"), {"reduction": "mul"}, make=_make_indices),
             Sample(_scatter_args((3, 3), (2, 3), "int64"), {"reduction": "max"}, make=_make_indices),
             Sample(_scatter_args((3, 3), (2, 3), "int32"), {"reduction": "min"}, make=_make_indices)],
    bad_samples=[BadSample(_scatter_args((4, 3), (3, 3), index_dtype="float32"), {}, r"indices must have an integer"),
                 BadSample([_T((4, 3), "float32"), _T((3, 3), "int64"), _T((3, 2), "float32")], {},
                           r"updates \(3, 2\) must have the shape of indices \(3, 3\)"),
                 BadSample(_scatter_args((4, 3), (3, 3)), {"reduction": "median"}, r"reduction must be one of update"),
                 BadSample(_scatter_args((4, 3), (3, 3), "int32"), {"reduction": "mean"},
                           r"reduction 'mean' needs float data .*, got int32"),
                 BadSample(_scatter_args((4, 3), (3, 4)), {}, r"must not be larger than data"),
                 BadSample([_T((4, 3), "float32"), _T((3, 3), "int64"), _T((3, 3), "float64")], {}, r"same dtype")],
    doc="A copy of ``data`` with ``updates`` written at ``indices`` along ``axis`` (ONNX's ScatterElements, TVM's "
        "``scatter_elements``): ``out[indices[i][j]][j] = updates[i][j]`` for ``axis=0``, in row-major order (the "
        "last write wins), or combined by ``reduction`` 'add', 'mul', 'min', 'max', or 'mean' (float data: TVM's "
        "kernel's running mean, each write in that order ``(old + update) / 2``, so data 0 with updates 3 then 6 "
        "at one place is 3.75, not PyTorch's ``scatter_reduce`` mean). Indices in ``[-s, s)``; others raise "
        "``IndexError``. Gradient for 'update' (the last writer takes the adjoint) and 'add'."))


# -- one_hot ------------------------------------------------------------------------------------------------

def _one_hot_canon(attrs: dict) -> dict:
    on, off = attrs["on_value"], attrs["off_value"]
    if isinstance(on, PrimValue) and isinstance(off, PrimValue) and on.dtype != off.dtype:
        # as TVM: one of the two dtypes would be dropped silently
        fail(f"on_value ({on.dtype}) and off_value ({off.dtype}) must have the same dtype")
    out = dict(attrs)
    for key in ("on_value", "off_value"):  # TVM passes R.prim_value(...): its value, and its dtype if none is given
        if isinstance(attrs[key], PrimValue):
            out[key] = attrs[key].value
            out["dtype"] = out["dtype"] or attrs[key].dtype
    if out["dtype"] is None:
        out["dtype"] = "float32" if isinstance(out["on_value"], float) else "int64"
    return dict(out, dtype=check_dtype(out["dtype"], "dtype"))


def _one_hot_check(attrs: dict) -> None:
    if not is_int_value(attrs["depth"]) or attrs["depth"] < 1:
        fail(f"depth must be a positive int, got {attrs['depth']!r}")
    for key in ("on_value", "off_value"):
        if isinstance(attrs[key], bool) or not isinstance(attrs[key], (int, float)):
            fail(f"{key} must be a number, got {attrs[key]!r}")
    if not is_int_value(attrs["axis"]):
        fail(f"axis must be an int, got {attrs['axis']!r}")


def _one_hot_infer(args, attrs):
    (indices,) = args
    require_int(indices, "indices")
    if indices.ndim == -1:
        return _T(None, attrs["dtype"], -1)
    axis = normalize_axis(attrs["axis"], indices.ndim + 1)
    if indices.shape is None:
        return _T(None, attrs["dtype"], indices.ndim + 1)
    return _T(indices.shape[:axis] + (attrs["depth"],) + indices.shape[axis:], attrs["dtype"])


def _one_hot_ref(indices, on_value, off_value, depth, axis, dtype):
    negative = np.flatnonzero(indices.reshape(-1) < 0)
    if negative.size:
        raise IndexError(f"relax.one_hot: index {int(indices.reshape(-1)[negative[0]])} at position "
                         f"{int(negative[0])} is out of range [0, {depth})")
    take_indices(indices, depth, "fast")  # raises for an index >= depth
    hot = np.arange(depth).reshape((-1,) + (1,) * indices.ndim) == indices[None]
    out = np.where(hot, on_value, off_value).astype(to_numpy(dtype))
    return np.moveaxis(out, 0, axis % (indices.ndim + 1))


def _classes(rng, sinfos, attrs):
    return [rng.integers(0, attrs["depth"], sinfos[0].shape).astype(to_numpy(sinfos[0].dtype))]


one_hot = register(Op(
    name="relax.one_hot", unsigned="agnostic", index_inputs=("indices",), lowering="index:one_hot", inputs=("indices",),
    attrs={"on_value": 1.0, "off_value": 0.0, "depth": REQUIRED, "axis": -1, "dtype": None},
    infer=_one_hot_infer, canonicalize=_one_hot_canon, check_attrs=_one_hot_check, reference=_one_hot_ref,
    gradient=NOT_DIFFERENTIABLE,
    samples=[Sample([_T((4,), "int64")], {"depth": 3}, make=_classes),
             Sample([_T(("n", 2), "int32")], {"depth": 5, "axis": 0, "on_value": 2.5, "off_value": -1.0,
                                             "dtype": "float64"}, make=_classes),
             Sample([_T((2, 3), "int64")], {"depth": 4, "axis": 1, "on_value": 1, "off_value": 0}, make=_classes)],
    bad_samples=[BadSample([_T((4,), "float32")], {"depth": 3}, r"indices must have an integer dtype"),
                 BadSample([_T((4,), "int64")], {"depth": 0}, r"depth must be a positive int"),
                 BadSample([_T((4,), "int64")], {"depth": 3, "axis": 2}, r"axis 2 is out of range"),
                 BadSample([_T((4,), "int64")], {"depth": 3, "on_value": "x"}, r"on_value must be a number"),
                 BadSample([_T((4,), "int64")], {"depth": 3, "on_value": PrimValue(1.0, "float32"),
                                                 "off_value": PrimValue(0, "int64")},
                           r"on_value \(float32\) and off_value \(int64\) must have the same dtype")],
    doc="One-hot vectors (TVM's ``one_hot(indices, on_value, off_value, depth, axis=-1)``; the values may be "
        "``R.prim_value``s or numbers, ``dtype`` defaults to theirs): a new axis of size ``depth`` at ``axis`` "
        "holding ``on_value`` at each index and ``off_value`` elsewhere. Indices must lie in ``[0, depth)``; others "
        "raise ``IndexError``. Not differentiable (integer input)."))
