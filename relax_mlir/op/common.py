"""Shared helpers of the op families: broadcasting, axes, dtype checks, attribute normalisation and the
NumPy pieces several references need. Messages say what was expected."""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from ..ir import sym
from ..ir.dtype import check_dtype, is_float, is_int
from ..ir.expr import ShapeExpr
from ..ir.struct_info import TensorStructInfo, format_shape
from ..ir.sym import Dim, SymDim
from .registry import fail


def fmt(shape) -> str:
    return "unknown" if shape is None else format_shape(shape)


def broadcast_shapes(*shapes: Optional[Sequence[Dim]]) -> Optional[tuple[Dim, ...]]:
    """NumPy broadcasting of static and symbolic shapes; ``None`` (unknown) if any input is unknown.

    A symbolic dim against an int ``k > 1``, or two different symbolic dims, are refused: at run time the
    symbolic one could be 1 (and broadcast) or equal the other, two programs that compiled code cannot both be;
    ``R.match_cast`` the operand to the size it has first. ``k`` against ``k + 1`` is refused so too: never equal,
    yet either may be 1 (``k = 1``, ``k = 0``), which leaves the output size unknown (TVM infers the rank only).
    """
    if any(s is None for s in shapes):
        return None
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        dims = [s[len(s) - ndim + i] for s in shapes if len(s) - ndim + i >= 0]
        result: Dim = 1
        for d in dims:
            if d == 1 or d == result:
                continue
            if result == 1:
                result = d
            elif isinstance(d, int) and isinstance(result, int):
                fail(f"cannot broadcast shapes {', '.join(fmt(s) for s in shapes[:-1])} and {fmt(shapes[-1])}"
                     if len(shapes) > 1 else "cannot broadcast")
            else:
                fail(f"cannot broadcast shapes {' and '.join(fmt(s) for s in shapes)}: dims {result} and {d} "
                     "may differ or be 1; match_cast an operand to the size it has")
        out.append(result)
    return tuple(out)


def normalize_axis(axis: int, ndim: int, what: str = "axis") -> int:
    """``axis`` in ``[0, ndim)``, counting a negative one from the end. A 0-d tensor has no axes (as TVM)."""
    if not is_int_value(axis):
        fail(f"{what} must be an int, got {axis!r}")
    if ndim == 0:
        fail(f"{what} {axis} is out of range for a tensor of rank 0 (a 0-d tensor has no axes)")
    if not -ndim <= axis < ndim:
        fail(f"{what} {axis} is out of range for a tensor of rank {ndim} (expected {-ndim} <= {what} < {ndim})")
    return axis % ndim


def normalize_axes(axes, ndim: int, what: str = "axis") -> tuple[int, ...]:
    """``None`` means all axes; an int or a sequence of ints otherwise; duplicates are refused."""
    if axes is None:
        return tuple(range(ndim))
    if isinstance(axes, int):
        axes = (axes,)
    out = tuple(normalize_axis(a, ndim, what) for a in axes)
    if len(set(out)) != len(out):
        fail(f"{what} {tuple(axes)} repeats an axis")
    return out


def require_float(s: TensorStructInfo, what: str = "input") -> None:
    if not is_float(s.dtype):
        fail(f"{what} must have a float dtype, got {s.dtype}")


def require_int(s: TensorStructInfo, what: str = "input") -> None:
    if not is_int(s.dtype):
        fail(f"{what} must have an integer dtype, got {s.dtype}")


def require_same_dtype(sinfos: Sequence[TensorStructInfo], names: Sequence[str]) -> str:
    dtypes = {s.dtype for s in sinfos}
    if len(dtypes) > 1:
        listed = ", ".join(f"{n}: {s.dtype}" for n, s in zip(names, sinfos))
        fail(f"operands must have the same dtype, got {listed}")
    return sinfos[0].dtype


def require_ndim(s: TensorStructInfo, ndims, what: str = "input") -> None:
    if s.ndim == -1:
        return
    ndims = (ndims,) if isinstance(ndims, int) else tuple(ndims)
    if s.ndim not in ndims:
        want = " or ".join(map(str, ndims))
        fail(f"{what} must have rank {want}, got rank {s.ndim} (shape {fmt(s.shape)})")


def check_dims_match(a: Dim, b: Dim, message: str) -> None:
    """Sizes that differ whatever their variables' values are an error: different ints, and symbolic sizes whose
    difference is a nonzero constant (``k`` and ``k + 1``), which TVM's analyzer also proves unequal. Other symbolic
    sizes are assumed equal, as TVM does: compiled code checks the assumption at run time
    (``backend/legalize/size_checks.py``: a ValueError), the interpreter as it runs."""
    difference = a - b
    if isinstance(difference, int) and difference != 0:
        fail(message)


def is_sym(d: Dim) -> bool:
    return isinstance(d, SymDim)


# -- attributes --------------------------------------------------------------------------------------------

def is_int_value(v) -> bool:
    """A Python int that is not a bool (attribute values are frozen, so NumPy ints are already ints)."""
    return isinstance(v, int) and not isinstance(v, bool)


def shape_attr(value, what: str = "shape", allow_infer: bool = False) -> tuple[Dim, ...]:
    """Normalise a shape attribute: ints, ``SymDim``s or their names (``("n", 4)``), or a ``ShapeExpr``.

    Size-variable names become ``SymDim`` so that equal shapes compare equal; ``-1`` is kept when
    ``allow_infer`` (reshape's "infer this dim"). Idempotent, as a canonicalizer must be."""
    if isinstance(value, ShapeExpr):
        return value.values
    if not isinstance(value, (tuple, list)):
        fail(f"{what} must be a sequence of dimensions, got {value!r}")
    out = []
    for d in value:
        if isinstance(d, np.integer):
            d = int(d)
        if isinstance(d, str):
            try:
                d = sym.parse_dim(d)
            except ValueError as exc:
                fail(f"{what}: {exc}")
        if isinstance(d, bool) or not isinstance(d, (int, SymDim)):
            fail(f"{what} {tuple(value)} has a dimension {d!r} that is not an int or a size variable")
        if isinstance(d, int) and d < 0 and not (allow_infer and d == -1):
            fail(f"{what} {tuple(value)} has a negative dimension {d}"
                 + (" (only -1 means infer)" if allow_infer else ""))
        out.append(d)
    return tuple(out)


def index_tuple(value, what: str) -> tuple[Dim, ...]:
    """An int, a size or a sequence of them, as a tuple: indices that may be symbolic (``strided_slice``'s
    ``begin=(0, "h")``); names become ``SymDim``s, as in shapes."""
    items = (value,) if isinstance(value, (int, np.integer, str, SymDim)) and not isinstance(value, bool) else value
    if not isinstance(items, (tuple, list)):
        fail(f"{what} must be an int, a size or a sequence of them, got {value!r}")
    out = []
    for v in items:
        if isinstance(v, str):
            try:
                v = sym.parse_dim(v)
            except ValueError as exc:
                fail(f"{what}: {exc}")
        if isinstance(v, bool) or not isinstance(v, (int, np.integer, SymDim)):
            fail(f"{what} must be an int, a size or a sequence of them, got {value!r}")
        out.append(v if isinstance(v, SymDim) else int(v))
    return tuple(out)


def int_tuple(value, what: str) -> tuple[int, ...]:
    """An int or a sequence of ints, as a tuple (attributes such as ``axes`` and ``begin``)."""
    items = (value,) if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else value
    if not isinstance(items, (tuple, list)) or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in items):
        fail(f"{what} must be an int or a sequence of ints, got {value!r}")
    return tuple(int(v) for v in items)


def canonical_dtype(attrs: dict, key: str = "dtype") -> dict:
    """``attrs`` with the dtype attribute ``key`` in its canonical spelling (None stays None); a canonicalizer
    step. ``check_dtype`` raises ``ValueError`` on an unknown dtype, which the op record prefixes."""
    return attrs if attrs[key] is None else dict(attrs, **{key: check_dtype(attrs[key], key)})


def canonical_int_tuple(attrs: dict, key: str) -> dict:
    """``attrs`` with attribute ``key`` (an int or a sequence of ints) as a tuple of ints; None stays None."""
    return attrs if attrs[key] is None else dict(attrs, **{key: int_tuple(attrs[key], key)})


def check_number(attrs: dict, key: str, low: float = -math.inf, high: float = math.inf) -> None:
    """Attribute ``key`` must be an int or float (not a bool) in ``[low, high]``."""
    v = attrs[key]
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not low <= v <= high:
        fail(f"attribute {key!r} must be a number in [{low}, {high}], got {v!r}")


def check_bool(attrs: dict, *keys: str) -> None:
    """Each attribute in ``keys`` must be a bool."""
    for key in keys:
        if not isinstance(attrs[key], bool):
            fail(f"attribute {key!r} must be a bool, got {attrs[key]!r}")


# -- references --------------------------------------------------------------------------------------------

def np_erf(x: np.ndarray) -> np.ndarray:
    """The error function elementwise, in float64 (NumPy has none; ``math.erf`` is exact to an ulp)."""
    return np.vectorize(math.erf, otypes=[np.float64])(x)


__all__ = ["broadcast_shapes", "normalize_axis", "normalize_axes", "require_float", "require_int",
           "require_same_dtype", "require_ndim", "check_dims_match", "fmt", "sym", "is_sym", "is_int_value",
           "shape_attr", "int_tuple", "canonical_dtype", "canonical_int_tuple",
           "check_number", "check_bool", "np_erf"]
