"""Backward ops of the shape ops: ``relax.grad.take_backward`` (the adjoint of ``take``, a scatter-add) and
``relax.grad.strided_slice_backward`` (of ``strided_slice``, a scatter into zeros)."""

from __future__ import annotations

import numpy as np

from ...ir.dtype import is_floating
from ...ir.struct_info import TensorStructInfo
from ..common import check_dims_match, fmt, normalize_axis, require_int, shape_attr
from ..indexing import _BIG, _slice_canon, _slice_check, _slice_infer, _take_check, take_indices
from ..registry import REQUIRED, SECOND_ORDER_UNSUPPORTED, BadSample, Op, Sample, fail, register

_T = TensorStructInfo


def _check_grad_shape(grad: TensorStructInfo, expected, what: str) -> None:
    if grad.shape is None or expected is None:
        return
    if len(grad.shape) != len(expected):
        fail(f"output_grad has shape {fmt(grad.shape)}, expected {fmt(expected)} ({what})")
    for d, e in zip(grad.shape, expected):
        check_dims_match(d, e, f"output_grad has shape {fmt(grad.shape)}, expected {fmt(expected)} ({what})")


# -- take_backward -----------------------------------------------------------------------------------------

def _take_backward_infer(args, attrs):
    grad, indices = args
    require_int(indices, "indices")
    shape, axis = attrs["shape"], attrs["axis"]
    if indices.shape is None:
        return _T(shape, grad.dtype)
    if axis is None:
        expected = indices.shape
    else:
        a = normalize_axis(axis, len(shape))
        expected = shape[:a] + tuple(indices.shape) + shape[a + 1:]
    _check_grad_shape(grad, expected, f"take of {fmt(shape)} at indices {fmt(indices.shape)}, axis {axis}")
    return _T(shape, grad.dtype)


def _take_backward_ref(output_grad, indices, axis, shape, mode):
    wide = np.float64 if is_floating(output_grad.dtype) else np.int64  # (bfloat16 too)
    out = np.zeros(shape, dtype=wide)
    n = int(np.prod(shape)) if axis is None else shape[axis % len(shape)]
    flat_indices = take_indices(indices.reshape(-1), n, mode)
    if axis is None:
        np.add.at(out.reshape(-1), flat_indices, output_grad.reshape(-1))  # reshape(-1) of out is a view
    else:
        a = axis % len(shape)
        values = output_grad.reshape(tuple(shape[:a]) + (flat_indices.size,) + tuple(shape[a + 1:]))
        np.add.at(out, (slice(None),) * a + (flat_indices,), values)
    return out.astype(output_grad.dtype)


def _take_backward_make(rng, sinfos, attrs):
    grad, indices = sinfos
    shape, axis = attrs["shape"], attrs["axis"]
    n = int(np.prod(shape)) if axis is None else shape[axis]
    # Few distinct indices, so that repeated ones (which must accumulate) occur.
    return [rng.uniform(-2, 2, size=grad.shape).astype(grad.dtype),
            rng.integers(-n, min(n, 2), size=indices.shape).astype(indices.dtype)]


take_backward = register(Op(
    name="relax.grad.take_backward", lowering="grad:take_backward",
    inputs=("output_grad", "indices"), attrs={"axis": None, "shape": REQUIRED, "mode": "fast"},
    infer=_take_backward_infer, reference=_take_backward_ref, gradient=SECOND_ORDER_UNSUPPORTED,
    check_attrs=_take_check,
    canonicalize=lambda attrs: dict(attrs, shape=shape_attr(attrs["shape"])),
    samples=[Sample([_T((4, 3), "float32"), _T((4,), "int64")], {"axis": 0, "shape": (5, 3)},
                    make=_take_backward_make),
             Sample([_T((2, 2, 2, 3), "float64"), _T((2, 2), "int32")], {"axis": 1, "shape": (2, 5, 3)},
                    make=_take_backward_make),
             Sample([_T((4,), "float32"), _T((), "int64")], {"axis": -1, "shape": (4, 3)}, make=_take_backward_make),
             Sample([_T((6,), "float32"), _T((6,), "int64")], {"shape": (3, 4)}, make=_take_backward_make),
             Sample([_T(("m", "n"), "float32"), _T(("m",), "int64")], {"axis": 0, "shape": (10, "n")},
                    make=_take_backward_make),
             Sample([_T((6, 3), "float32"), _T((6,), "int64")], {"axis": 0, "shape": (4, 3), "mode": "wrap"},
                    low=-9, high=9),
             Sample([_T((4, 5), "float64"), _T((5,), "int32")], {"axis": 1, "shape": (4, 3), "mode": "clip"},
                    low=-9, high=9)],
    bad_samples=[BadSample([_T((4, 3), "float32"), _T((4,), "float32")], {"axis": 0, "shape": (5, 3)},
                           r"indices must have an integer dtype, got float32"),
                 BadSample([_T((4, 2), "float32"), _T((4,), "int64")], {"axis": 0, "shape": (5, 3)},
                           r"output_grad has shape \(4, 2\), expected \(4, 3\)"),
                 BadSample([_T((4, 3), "float32"), _T((4,), "int64")], {"axis": 2, "shape": (5, 3)},
                           r"axis 2 is out of range"),
                 BadSample([_T((4, 3), "float32"), _T((4,), "int64")], {"axis": 0}, r"missing required attribute")],
    doc="The adjoint of ``take(x, indices, axis)`` for ``x`` of shape ``shape``: zeros of that shape with "
        "each slice of ``output_grad`` added at its index (repeated indices accumulate); ``mode`` as take's: "
        "an index ``fast`` does not allow raises ``IndexError``."))


# -- strided_slice_backward ---------------------------------------------------------------------------------

def _slice_backward_infer(args, attrs):
    (grad,) = args
    shape = attrs["shape"]
    expected = _slice_infer([_T(shape, grad.dtype)], attrs).shape
    _check_grad_shape(grad, expected, f"the slice of {fmt(shape)}")
    return _T(shape, grad.dtype)


def _slice_backward_ref(output_grad, axes, begin, end, strides, shape):
    out = np.zeros(shape, dtype=output_grad.dtype)
    view = [slice(None)] * len(shape)
    for a, b, e, s in zip(axes, begin, end, strides or (1,) * len(axes)):
        view[a] = slice(b, e, s)
    out[tuple(view)] = output_grad  # a slice holds no position twice: assignment, not accumulation
    return out


strided_slice_backward = register(Op(
    name="relax.grad.strided_slice_backward", lowering="grad:strided_slice_backward", inputs=("output_grad",),
    attrs={"axes": REQUIRED, "begin": REQUIRED, "end": REQUIRED, "strides": None, "shape": REQUIRED},
    infer=_slice_backward_infer, reference=_slice_backward_ref, gradient=SECOND_ORDER_UNSUPPORTED,
    canonicalize=lambda attrs: dict(_slice_canon(attrs), shape=shape_attr(attrs["shape"])),
    check_attrs=_slice_check, size_attrs=("begin", "end"),
    samples=[Sample([_T((3, 6), "float32")], {"axes": (0,), "begin": (1,), "end": (4,), "shape": (5, 6)}),
             Sample([_T((2, 3), "float64")],
                    {"axes": (1, 0), "begin": (0, -2), "end": (100, 5), "strides": (2, 1), "shape": (5, 6)}),
             Sample([_T((4,), "float64")], {"axes": (0,), "begin": (-1,), "end": (-100,), "strides": (-2,),
                                            "shape": (7,)}),
             Sample([_T((0, 3), "float32")], {"axes": (0,), "begin": (3,), "end": (1,), "shape": (4, 3)}),
             Sample([_T(("n", 2), "float32")], {"axes": (1,), "begin": (1,), "end": (5,), "strides": (3,),
                                                "shape": ("n", 6)}),
             Sample([_T(("n", 2), "float32")], {"axes": (0,), "begin": (-1,), "end": (-_BIG,), "strides": (-1,),
                                                "shape": ("n", 2)}),
             Sample([_T(("n - 1", "(m + 1) // 2"), "float32")], {"axes": (0, 1), "begin": (1, 0), "end": ("n", "m"),
                                                                "strides": (1, 2), "shape": ("n", "m")})],
    bad_samples=[BadSample([_T((2, 6), "float32")], {"axes": (0,), "begin": (1,), "end": (4,), "shape": (5, 6)},
                           r"output_grad has shape \(2, 6\), expected \(3, 6\)"),
                 BadSample([_T((3,), "float32")], {"axes": (0,), "begin": (0,), "end": (3,), "strides": (0,),
                                                   "shape": (5,)}, r"strides \(0,\) must be non-zero"),
                 BadSample([_T((3,), "float32")], {"axes": (1,), "begin": (0,), "end": (3,), "shape": (5,)},
                           r"axes 1 is out of range")],
    doc="The adjoint of ``strided_slice(x, axes, begin, end, strides)`` for ``x`` of shape ``shape``: zeros "
        "of that shape with ``output_grad`` written into the sliced positions."))
