"""``repeat``, ``tile`` and ``flip`` (TVM's names and attributes, NumPy's semantics). ``repeat`` and ``tile`` are
composites of reshape and broadcast_to, so they compile and differentiate through their decompositions
(``grad_utils.through_decomposition``: the adjoint of a repeat or tile is a sum over the copies). ``flip`` has a
lowering of its own (its adjoint is a flip).
"""

from __future__ import annotations

import numpy as np

from ..ir import sym
from ..ir.expr import Call, Expr
from ..ir.struct_info import TensorStructInfo
from . import grad_utils as gu
from .common import int_tuple, is_int_value, normalize_axis
from .registry import REQUIRED, BadSample, Op, Sample, fail, register

_T = TensorStructInfo


def _shape(e: Expr, who: str) -> tuple:
    return gu.shape_of(e, f"{who} decomposition")


# -- repeat -------------------------------------------------------------------------------------------------

def _repeat_check(attrs: dict) -> None:
    if not is_int_value(attrs["repeats"]) or attrs["repeats"] < 1:
        fail(f"repeats must be a positive int, got {attrs['repeats']!r}")
    if attrs["axis"] is not None and not is_int_value(attrs["axis"]):
        fail(f"axis must be None or an int, got {attrs['axis']!r}")


def _repeat_infer(args, attrs):
    (x,) = args
    r, axis = attrs["repeats"], attrs["axis"]
    if axis is None:
        return _T(None if x.shape is None else (sym.product(x.shape) * r,), x.dtype, 1)
    if x.ndim == -1:
        return x
    axis = normalize_axis(axis, x.ndim)
    if x.shape is None:
        return x
    return _T(tuple(d * r if i == axis else d for i, d in enumerate(x.shape)), x.dtype)


def _repeat_decompose(call: Call) -> Expr:
    """``x`` with a size-1 axis after ``axis``, broadcast to ``repeats`` there, merged into ``axis``."""
    from . import broadcast_to, expand_dims, reshape

    x, r, axis = call.args[0], call.attrs["repeats"], call.attrs["axis"]
    shape = _shape(x, call.op.name)
    if axis is None:
        x, shape, axis = reshape(x, (sym.product(shape),)), (sym.product(shape),), 0
    axis = normalize_axis(axis, len(shape))
    wide = shape[:axis + 1] + (r,) + shape[axis + 1:]
    out = shape[:axis] + (shape[axis] * r,) + shape[axis + 1:]
    return reshape(broadcast_to(expand_dims(x, (axis + 1,)), wide), out)


repeat = register(Op(
    name="relax.repeat", inputs=("data",), attrs={"repeats": REQUIRED, "axis": None}, infer=_repeat_infer,
    unsigned="agnostic",
    check_attrs=_repeat_check, reference=lambda data, repeats, axis: np.repeat(data, repeats, axis=axis),
    decompose=_repeat_decompose, gradient=gu.through_decomposition,
    samples=[Sample([_T((2, 3), "float32")], {"repeats": 2, "axis": 1}),
             Sample([_T((2, 3), "float64")], {"repeats": 3}),
             Sample([_T(("n", 2), "float32")], {"repeats": 2, "axis": 0}),
             Sample([_T((3,), "int32")], {"repeats": 4, "axis": -1}, low=-5, high=5)],
    bad_samples=[BadSample([_T((2, 3), "float32")], {"repeats": 0}, r"repeats must be a positive int"),
                 BadSample([_T((2, 3), "float32")], {"repeats": 2, "axis": 2}, r"axis 2 is out of range"),
                 BadSample([_T((2, 3), "float32")], {"repeats": (1, 2)}, r"repeats must be a positive int")],
    doc="Repeat each element ``repeats`` times along ``axis`` (``None``: of the flattened tensor), as "
        "``numpy.repeat`` with one count. Composite: decomposed into reshape/broadcast_to."))


# -- tile ---------------------------------------------------------------------------------------------------

def _tile_canon(attrs: dict) -> dict:
    return dict(attrs, repeats=int_tuple(attrs["repeats"], "repeats"))


def _tile_check(attrs: dict) -> None:
    if any(r < 1 for r in attrs["repeats"]):
        fail(f"repeats {attrs['repeats']} must be positive")


def _tiled(shape: tuple, reps: tuple) -> tuple[tuple, tuple]:
    """NumPy's alignment: both padded with leading 1s to one length."""
    n = max(len(shape), len(reps))
    return (1,) * (n - len(shape)) + tuple(shape), (1,) * (n - len(reps)) + tuple(reps)


def _tile_infer(args, attrs):
    (x,) = args
    if x.shape is None:
        return _T(None, x.dtype, -1 if x.ndim == -1 else max(x.ndim, len(attrs["repeats"])))
    shape, reps = _tiled(x.shape, attrs["repeats"])
    return _T(tuple(d * r for d, r in zip(shape, reps)), x.dtype)


def _tile_decompose(call: Call) -> Expr:
    """``x`` reshaped to ``(1, d0, 1, d1, ...)``, broadcast to ``(r0, d0, r1, d1, ...)``, reshaped to
    ``(r0 * d0, ...)``."""
    from . import broadcast_to, reshape

    shape, reps = _tiled(_shape(call.args[0], call.op.name), call.attrs["repeats"])
    spread = tuple(v for d in shape for v in (1, d))
    wide = tuple(v for d, r in zip(shape, reps) for v in (r, d))
    return reshape(broadcast_to(reshape(call.args[0], spread), wide), tuple(d * r for d, r in zip(shape, reps)))


tile = register(Op(
    name="relax.tile", inputs=("data",), attrs={"repeats": REQUIRED}, infer=_tile_infer, canonicalize=_tile_canon,
    unsigned="agnostic",
    check_attrs=_tile_check, reference=lambda data, repeats: np.tile(data, repeats),
    decompose=_tile_decompose, gradient=gu.through_decomposition,
    samples=[Sample([_T((2, 3), "float32")], {"repeats": (2, 1)}),
             Sample([_T((2, 3), "float64")], {"repeats": 2}),
             Sample([_T((3,), "float64")], {"repeats": (2, 2)}),
             Sample([_T(("n", 2, 2), "float32")], {"repeats": (3, 1)}),
             Sample([_T((2, 2), "int64")], {"repeats": (1, 2, 3)}, low=-5, high=5)],
    bad_samples=[BadSample([_T((2, 3), "float32")], {"repeats": (0, 1)}, r"repeats \(0, 1\) must be positive"),
                 BadSample([_T((2, 3), "float32")], {"repeats": "x"}, r"repeats must be an int or a sequence")],
    doc="Tile the tensor ``repeats`` times per axis, as ``numpy.tile`` (the shorter of the shape and ``repeats`` "
        "gets leading 1s). Composite: decomposed into reshape/broadcast_to."))


# -- flip ---------------------------------------------------------------------------------------------------

def _flip_infer(args, attrs):
    (x,) = args
    if x.ndim != -1:
        normalize_axis(attrs["axis"], x.ndim)
    return x


flip = register(Op(
    name="relax.flip", unsigned="agnostic", inputs=("data",), attrs={"axis": REQUIRED}, infer=_flip_infer,
    reference=lambda data, axis: np.flip(data, axis).copy(), lowering="shape:flip",
    gradient=gu.tensor_rule(lambda x, g, call: flip(g, call.attrs["axis"])),
    samples=[Sample([_T((2, 3), "float32")], {"axis": 1}), Sample([_T(("n", 4), "float64")], {"axis": 0}),
             Sample([_T((2, 3, 2), "int32")], {"axis": -2}, low=-5, high=5)],
    bad_samples=[BadSample([_T((2, 3), "float32")], {"axis": 2}, r"axis 2 is out of range"),
                 BadSample([_T((2, 3), "float32")], {}, r"missing required attribute 'axis'")],
    doc="Reverse the order of the elements along ``axis`` (TVM's ``flip(data, axis)``), on an axis of any "
        "size."))
