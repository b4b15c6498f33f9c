"""``cumprod`` (lowered as ``cumsum`` is, with a product) and ``median`` (a composite over ``argsort``), with TVM's
names, attributes and outputs."""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir import sym
from ..ir.dtype import is_bool, to_numpy
from ..ir.struct_info import TensorStructInfo, TupleStructInfo
from . import grad_utils as gu
from .common import canonical_dtype, canonical_int_tuple, fmt, is_int_value, normalize_axes, normalize_axis
from .reduce import _cumsum_check, _cumsum_infer, _wide
from .registry import BadSample, Op, Sample, fail, register

_T = TensorStructInfo


def _cumprod_ref(x, axis, dtype, exclusive):
    dtype = to_numpy(dtype) if dtype else x.dtype
    data = _wide(x.astype(dtype))  # as cumsum: cast first, then multiply in the output dtype
    if axis is None:
        data, axis = data.reshape(-1), 0
    if exclusive:  # the product of the elements before each position: a leading 1, the last element dropped
        lead = list(data.shape)
        lead[axis] = 1
        ones = np.ones(lead, data.dtype)  # (not a slice of data: the axis may be empty)
        data = np.take(np.concatenate([ones, data], axis=axis), np.arange(data.shape[axis]), axis=axis)
    with np.errstate(over="ignore"):
        return np.cumprod(data, axis=axis).astype(dtype)


def _cumprod_grad(orig, call, grad):
    """Without dividing by ``x`` (zeros): ``dx_k = sum_{i >= k} g_i prod_{j <= i, j != k} x_j`` (``i > k`` and ``j <
    i`` when exclusive). A new leading axis ``k`` holds one copy of ``x`` per position, with its ``k``-th element
    made 1; their running products, times ``g`` where ``i`` is past ``k``, summed over ``i``: quadratic in the
    axis' length, as the scan itself."""
    from . import (astype, cumprod as scan, expand_dims, greater, greater_equal, multiply, permute_dims, reshape,
                   squeeze, sum as reduce_sum, where, zeros_like)
    from .create import arange
    from .diagonal import diagonal_mask

    (x,) = call.args
    if not (gu.is_float_expr(x) and gu.is_float_expr(orig)):
        return [None]
    a = call.attrs
    def reshaped(e, shape):  # (no reshape to the shape it has: the adjoint stays clean)
        return e if tuple(gu.shape_of(e, "relax.cumprod gradient")) == tuple(shape) else reshape(e, shape)

    xs = x if a["axis"] is not None else reshaped(x, (sym.product(gu.shape_of(x, "relax.cumprod gradient")),))
    shape = gu.shape_of(xs, "relax.cumprod gradient")
    axis = 0 if a["axis"] is None else normalize_axis(a["axis"], len(shape))
    n, dtype = shape[axis], gu.sinfo_of(orig).dtype
    xs = xs if gu.sinfo_of(xs).dtype == dtype else astype(xs, dtype)
    g = reshaped(grad, shape)

    def placed(matrix):  # an (n, n) matrix (k, i) on the new axis 0 and on axis + 1
        return reshaped(matrix, (n,) + tuple(n if d == axis else 1 for d in range(len(shape))))

    offsets = arange(0, n) - expand_dims(arange(0, n), 1)  # i - k
    past = placed((greater if a["exclusive"] else greater_equal)(offsets, gu.scalar(0, offsets)))
    copies = where(placed(diagonal_mask(n, n, 0)), gu.scalar(1, xs), expand_dims(xs, 0))
    terms = where(past, multiply(scan(copies, axis + 1, exclusive=a["exclusive"]), expand_dims(g, 0)),
                  zeros_like(expand_dims(g, 0)))
    summed = reduce_sum(terms, axis + 1, keepdims=True)  # (n, ..., 1 at axis + 1, ...)
    order = list(range(len(shape) + 1))
    order[0], order[axis + 1] = axis + 1, 0
    back = squeeze(permute_dims(summed, order), [0])
    return [gu.cast_like(gu.reshape_like(back, x), x)]


cumprod = register(Op(
    name="relax.cumprod", unsigned="aware", lowering="reduce:cumprod",
    inputs=("x",), attrs={"axis": None, "dtype": None, "exclusive": False},
    infer=_cumsum_infer, canonicalize=canonical_dtype, check_attrs=_cumsum_check, reference=_cumprod_ref,
    gradient=_cumprod_grad,
    samples=[Sample([_T((2, 3), "float32")]), Sample([_T((2, 3), "float64")], {"axis": 1}),
             Sample([_T((3, 4), "int32")], {"axis": 0, "exclusive": True}, low=-4, high=4),
             Sample([_T(("n", 4), "float32")], {"axis": -1, "dtype": "float64"}),
             Sample([_T(("n", 4), "float16")], {"exclusive": True}, low=0.5, high=1.5),
             Sample([_T((5,), "bool")], {"dtype": "int32"})],
    bad_samples=[BadSample([_T((5,), "bool")], {}, r"must be numeric, got bool"),
                 BadSample([_T((2, 3), "float32")], {"axis": 2}, r"axis 2 is out of range"),
                 BadSample([_T((2, 3), "float32")], {"exclusive": 1}, r"exclusive must be a bool")],
    doc="Running product along ``axis`` (TVM's ``cumprod(data, axis=None, dtype=None, exclusive=False)``: ``None`` "
        "scans the flattened tensor), in ``dtype`` (default the input's; the input is cast first). ``exclusive`` "
        "multiplies the elements before each position only (1 at the first). Gradient (TVM has none): the sum over "
        "later positions of the adjoint times the product of the others, exact at zeros, quadratic in the axis."))


# -- median -------------------------------------------------------------------------------------------------

def _median_axes(attrs: dict, ndim: int) -> Optional[tuple[int, ...]]:
    return None if attrs["axis"] is None else normalize_axes(attrs["axis"], ndim)


def _median_infer(args, attrs):
    """As TVM's: one axis gives (values, int64 indices); no axis or several give the values alone."""
    (x,) = args
    if is_bool(x.dtype):
        fail("x must be numeric, got bool")
    one = attrs["axis"] is not None and len(attrs["axis"]) == 1
    if x.ndim == -1:
        values = _T(None, x.dtype, -1)
    else:
        axes = _median_axes(attrs, x.ndim)
        axes = range(x.ndim) if axes is None else axes
        if x.shape is not None and any(x.shape[a] == 0 for a in axes):
            fail(f"median over an empty axis of {fmt(x.shape)} has no value")
        keep = [i for i in range(x.ndim) if i not in axes]
        shape = None if x.shape is None else tuple(
            x.shape[i] if i in keep else 1 for i in range(x.ndim) if i in keep or attrs["keepdims"])
        values = _T(shape, x.dtype, len(keep) + (x.ndim - len(keep)) * attrs["keepdims"] if shape is None else -1)
    if not one:
        return values
    return TupleStructInfo([values, _T(values.shape, "int64", values.ndim if values.shape is None else -1)])


def _median_ref(x, axis, keepdims):
    """The lower median (the ``(n - 1) // 2``-th in the stable ascending order, as TVM's and PyTorch's), and with
    one axis its index in ``x``."""
    from .sort import order

    axes = tuple(range(x.ndim)) if axis is None else normalize_axes(axis, x.ndim)
    rest = [i for i in range(x.ndim) if i not in axes]
    moved = np.transpose(x, rest + list(axes))
    flat = moved.reshape(moved.shape[:len(rest)] + (int(np.prod([x.shape[a] for a in axes], dtype=np.int64)),))
    n = flat.shape[-1]
    idx = np.take(order(flat, -1, False), [(n - 1) // 2], axis=-1)
    values = np.take_along_axis(flat, idx, axis=-1)[..., 0]
    if keepdims:
        values = values.reshape(tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
    if axis is None or len(axes) != 1:
        return np.asarray(values, dtype=x.dtype)
    return np.asarray(values, dtype=x.dtype), idx[..., 0].reshape(values.shape).astype(np.int64)


def _median_decompose(call):
    """The reduced axes moved last and merged, ``argsort`` along them, and the ``(n - 1) // 2``-th taken (values
    through ``gather_elements``, so the gradient reaches the median's element)."""
    from . import argsort, gather_elements, permute_dims, reshape, strided_slice
    from ..ir.expr import Tuple

    x, a = call.args[0], call.attrs
    shape = gu.shape_of(x, call.op.name)
    axes = tuple(range(len(shape))) if a["axis"] is None else normalize_axes(a["axis"], len(shape))
    rest = [i for i in range(len(shape)) if i not in axes]
    n = sym.product(shape[i] for i in axes)
    if not isinstance(n, int):
        raise gu.ShapeNeeded(call.op.name, f"the median's position needs a static count of elements, got {n}",
                             "static shape")
    moved = x if rest + list(axes) == list(range(len(shape))) else permute_dims(x, rest + list(axes))
    flat = reshape(moved, tuple(shape[i] for i in rest) + (n,)) if len(axes) != 1 else moved
    last = len(rest)
    idx = strided_slice(argsort(flat, last, False, "int64"), (last,), ((n - 1) // 2,), ((n - 1) // 2 + 1,))
    result = call.struct_info
    shape = tuple((result.fields[0] if isinstance(result, TupleStructInfo) else result).shape)
    values = reshape(gather_elements(flat, idx, last), shape)
    return Tuple([values, reshape(idx, shape)]) if isinstance(result, TupleStructInfo) else values


def _median_canon(attrs: dict) -> dict:
    axis = attrs["axis"]
    return canonical_int_tuple(dict(attrs, axis=(axis,) if is_int_value(axis) else axis), "axis")


median = register(Op(
    name="relax.median", inputs=("x",), attrs={"axis": None, "keepdims": False}, infer=_median_infer,
    canonicalize=_median_canon, reference=_median_ref, decompose=_median_decompose, gradient=gu.through_decomposition,
    samples=[Sample([_T((3, 5), "float32")]), Sample([_T((3, 4), "float64")], {"axis": 1}),
             Sample([_T((2, 3, 4), "float32")], {"axis": [0, 2], "keepdims": True}),
             Sample([_T((4, 3), "int32")], {"axis": 0, "keepdims": True}, low=-3, high=3),
             Sample([_T(("n", 6), "float32")], {"axis": -1}), Sample([_T((5,), "float64")], {"keepdims": True})],
    bad_samples=[BadSample([_T((3, 4), "float32")], {"axis": 2}, r"axis 2 is out of range"),
                 BadSample([_T((3, 0), "float32")], {"axis": 1}, r"median over an empty axis of \(3, 0\)"),
                 BadSample([_T((3,), "bool")], {}, r"x must be numeric, got bool")],
    doc="The lower median (for an even count the smaller middle value, as TVM's and PyTorch's) over ``axis`` (TVM's "
        "``median(x, axis=None, keepdims=False)``: ``None`` for all elements, an int or a list). With one axis it "
        "returns (values, int64 indices into that axis), as TVM; otherwise the values alone. NaN sorts last, as in "
        "``sort``. Composite: ``argsort`` over the reduced axes merged, and the middle position gathered; the values' "
        "gradient goes to the median's element."))
