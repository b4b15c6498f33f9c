"""Sorting: ``sort``, ``argsort`` and ``topk`` (TVM's names, attributes and defaults). The order is stable: equal
elements keep their order of position (with ``descending``/``largest`` too), so the indices are deterministic. NaN
counts as the largest value, as in PyTorch: last ascending, first descending (``topk`` picks it first).

``argsort`` is lowered (``backend/legalize/sort.py``); ``sort`` and ``topk`` are composites of it:
``gather_elements(x, argsort(x))``, the first ``k`` of the order for topk.

Gradients: TVM registers none for these ops. ``argsort`` (integer output) is not differentiable; the values of
``sort`` and ``topk`` are a permutation (a selection) of the input's, so their gradient is the adjoint scattered
back to where each value came from (as PyTorch's), which is what their decompositions' gradients are (the
``gather_elements`` rule); ``topk``'s indices output carries none.
"""

from __future__ import annotations

import numpy as np

from ..ir.dtype import check_dtype, is_bool, is_int, to_numpy
from ..ir.expr import Tuple
from ..ir.struct_info import TensorStructInfo, TupleStructInfo
from . import grad_utils as gu
from .common import is_int_value, normalize_axis
from .registry import NOT_DIFFERENTIABLE, BadSample, Op, Sample, fail, register

_T = TensorStructInfo
_RET_TYPES = ("both", "values", "indices")


def order(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """The stable sorting permutation along ``axis`` (ties in order of position, also descending). NaN counts as
    the largest value: last ascending, first descending (PyTorch's order; ``argsort(-x)`` put it last)."""
    if x.dtype.kind in "biu":  # integers as they are (int64 and uint64 beyond 2**53 tie as float64); ~x reverses
        return np.argsort(~x if descending else x, axis=axis, kind="stable")  # their order and keeps the ties
    key = x.astype(np.float64)
    if not descending:
        return np.argsort(key, axis=axis, kind="stable")
    return np.lexsort((-key, ~np.isnan(key)), axis=axis)  # NaN first (the last key leads), each key stable


def _sort_infer(args, attrs):
    (x,) = args
    if x.ndim != -1:
        normalize_axis(attrs["axis"], x.ndim)
    return x


def _check_flag(attrs: dict, key: str) -> None:
    if not isinstance(attrs[key], bool):
        fail(f"{key} must be a bool, got {attrs[key]!r}")


def _check_index_dtype(attrs: dict) -> None:
    if not is_int(attrs["dtype"]) or is_bool(attrs["dtype"]):
        fail(f"dtype must be an integer dtype for indices, got {attrs['dtype']!r}")


def _canon_dtype(attrs: dict) -> dict:
    return dict(attrs, dtype=check_dtype(attrs["dtype"], "dtype"))


def _sort_decompose(call):
    """``gather_elements(x, argsort(x, axis, descending, "int64"), axis)``."""
    from . import gather_elements

    a = call.attrs
    return gather_elements(call.args[0], argsort(call.args[0], a["axis"], a["descending"], "int64"), a["axis"])


def _samples(extra: dict) -> list[Sample]:
    return [Sample([_T((3, 5), "float32")], dict(extra)), Sample([_T((4, 3), "float64")], {"axis": 0, **extra}),
            Sample([_T(("n", 6), "float32")], {"descending": True, **extra} if "k" not in extra else extra),
            Sample([_T((2, 7), "int32")], dict(extra), low=-3, high=3),  # many ties: the order must be stable
            Sample([_T((8,), "float16")], dict(extra))]


def _bad(extra: dict) -> list[BadSample]:
    return [BadSample([_T((3, 5), "float32")], {"axis": 2, **extra}, r"axis 2 is out of range")]


sort = register(Op(
    name="relax.sort", inputs=("x",), attrs={"axis": -1, "descending": False},
    infer=_sort_infer, check_attrs=lambda attrs: _check_flag(attrs, "descending"),
    reference=lambda x, axis, descending: np.take_along_axis(x, order(x, axis, descending), axis),
    decompose=_sort_decompose, gradient=gu.through_decomposition, samples=_samples({}),
    bad_samples=_bad({}) + [BadSample([_T((3,), "float32")], {"descending": 1}, r"descending must be a bool")],
    doc="The elements sorted along ``axis`` (TVM's ``sort(x, axis=-1, descending=False)``), stably. Composite: "
        "``gather_elements`` at ``argsort``; its gradient (the decomposition's) scatters the adjoint back to each "
        "value's position."))


def _argsort_check(attrs: dict) -> None:
    _check_flag(attrs, "descending")
    _check_index_dtype(attrs)


def _argsort_infer(args, attrs):
    return _T(_sort_infer(args, attrs).shape, attrs["dtype"], args[0].ndim)


argsort = register(Op(
    name="relax.argsort", unsigned="aware", lowering="sort:argsort", inputs=("data",),
    attrs={"axis": -1, "descending": False, "dtype": "int32"}, infer=_argsort_infer, canonicalize=_canon_dtype,
    check_attrs=_argsort_check,
    reference=lambda data, axis, descending, dtype: order(data, axis, descending).astype(to_numpy(dtype)),
    gradient=NOT_DIFFERENTIABLE, samples=_samples({"dtype": "int64"}) + [Sample([_T((2, 4), "float32")])],
    bad_samples=_bad({}) + [BadSample([_T((3,), "float32")], {"dtype": "float32"}, r"dtype must be an integer")],
    doc="The indices that sort ``data`` along ``axis`` (TVM's ``argsort(data, axis=-1, descending=False, "
        "dtype='int32')``), stably. Not differentiable (integer output)."))


def _topk_check(attrs: dict) -> None:
    _check_flag(attrs, "largest")
    _check_index_dtype(attrs)
    if not is_int_value(attrs["k"]):
        fail(f"k must be an int, got {attrs['k']!r}")
    if attrs["ret_type"] not in _RET_TYPES:
        fail(f"ret_type must be 'both', 'values' or 'indices', got {attrs['ret_type']!r}")


def _topk_infer(args, attrs):
    (x,) = args
    values, indices = _T(None, x.dtype, x.ndim), _T(None, attrs["dtype"], x.ndim)
    if x.shape is not None:
        axis = normalize_axis(attrs["axis"], x.ndim)
        k = _taken(attrs["k"], x.shape[axis])
        shape = tuple(k if i == axis else d for i, d in enumerate(x.shape))
        values, indices = _T(shape, x.dtype), _T(shape, attrs["dtype"])
    elif x.ndim != -1:
        normalize_axis(attrs["axis"], x.ndim)
    return {"both": TupleStructInfo([values, indices]), "values": values, "indices": indices}[attrs["ret_type"]]


def _taken(k: int, size):
    """How many elements topk takes from an axis of ``size``: ``k``, the whole axis for ``k < 1`` or, as TVM clamps
    it, for a ``k`` beyond a static size; a symbolic size is assumed to hold ``k`` (checked at run time)."""
    if k < 1 or isinstance(size, int) and k > size:
        return size
    return k


def _topk_ref(data, k, axis, ret_type, largest, dtype):
    idx = order(data, axis, largest)
    idx = np.take(idx, np.arange(_taken(k, data.shape[axis])), axis=axis)
    values, indices = np.take_along_axis(data, idx, axis), idx.astype(to_numpy(dtype))
    return {"both": (values, indices), "values": values, "indices": indices}[ret_type]


def _topk_decompose(call):
    """The first ``k`` of ``argsort(data, descending=largest)`` (a ``strided_slice``), and ``gather_elements`` at
    them."""
    from . import astype, gather_elements, strided_slice

    x, a = call.args[0], call.attrs
    axis = normalize_axis(a["axis"], gu.rank_of(x, "relax.topk decomposition"))
    shape = gu.sinfo_of(x).shape
    size = shape[axis] if shape is not None else None  # (an unknown size: k is assumed to fit, as a symbolic one)
    end = gu.SLICE_END if _taken(a["k"], size) == size else a["k"]
    first = strided_slice(argsort(x, axis, a["largest"], "int64"), (axis,), (0,), (end,))
    values, indices = gather_elements(x, first, axis), astype(first, a["dtype"])
    return {"both": Tuple([values, indices]), "values": values, "indices": indices}[a["ret_type"]]


topk = register(Op(
    name="relax.topk", inputs=("data",),
    attrs={"k": 1, "axis": -1, "ret_type": "both", "largest": True, "dtype": "int32"}, infer=_topk_infer,
    canonicalize=_canon_dtype, check_attrs=_topk_check, reference=_topk_ref, decompose=_topk_decompose,
    gradient=gu.through_decomposition,
    samples=[Sample([_T((3, 5), "float32")], {"k": 2}),
             Sample([_T((4, 3), "float64")], {"k": 3, "axis": 0, "ret_type": "values"}),
             Sample([_T((2, 6), "float64")], {"k": 2, "largest": False, "ret_type": "values"}),
             Sample([_T(("n", 6), "float32")], {"k": 4, "dtype": "int64"}),
             Sample([_T((2, 7), "int32")], {"k": 3, "ret_type": "indices"}, low=-3, high=3),
             Sample([_T((3, 4), "float32")], {"k": 0, "ret_type": "values"}),
             Sample([_T((2, 10, 4), "float32")], {"k": 6}),  # k beyond the axis: all of it, as TVM clamps k
             Sample([_T((3, 5), "float32")], {"k": -2, "largest": False})],
    bad_samples=[BadSample([_T((3, 5), "float32")], {"ret_type": "all"}, r"ret_type must be 'both'"),
                 BadSample([_T((3, 5), "float32")], {"dtype": "float32"}, r"dtype must be an integer"),
                 BadSample([_T((3, 5), "float32")], {"axis": 2}, r"axis 2 is out of range")],
    doc="The ``k`` largest (``largest=False``: smallest) elements along ``axis`` in order, and their indices "
        "(TVM's ``topk(data, k=1, axis=-1, ret_type='both', largest=True, dtype='int32')``; ``k < 1``, or a ``k`` "
        "larger than a static axis (TVM clamps it), takes all; "
        "``ret_type`` 'values' or 'indices' returns one of them). Ties: the lower position first. Composite: the "
        "first ``k`` of ``argsort``, gathered; the values' gradient scatters the adjoint back to their positions."))
