"""The one argument policy of compiled functions, ``VirtualMachine``, ``load_module`` and ``Trainer``
(``docs/arguments.md``).

An argument that already is what the function takes (a NumPy array of the parameter's dtype, C-contiguous,
aligned, native byte order) is passed by pointer: never copied, never written, read-only ones included. Anything
else that converts *without changing a value the program would see* is converted once, by a copy:

* lists, tuples, Python and NumPy scalars and other array-likes (``numpy.asarray``);
* non-contiguous, Fortran-ordered, misaligned or byte-swapped arrays (a C-contiguous native copy);
* dtype casts NumPy calls ``same_kind`` -- int32 labels for int64, uint8 images for float32, float16 for float32,
  **float64 data for a float32 model** (rounded to nearest, as JAX does with 64-bit off and as a float32 model
  computes anyway) -- except an integer narrowing that would change a value (int64 ``2**40`` for int32 is
  refused, not wrapped), a finite float beyond the parameter's range (it would become inf) and an integer with no
  exact float of the parameter's type (int32 ``16777217`` for float32 is refused, not rounded). ml_dtypes'
  bfloat16 (NumPy kind "V") is a float here like float16, either way, any float to any float.

Refused with an ``ArgumentError`` naming the function, the parameter, what was expected and what came: a float
or complex array where integers are expected (float labels), any cast to ``bool``, object and string arrays,
ragged lists, wrong rank or shape. An array too large to convert raises ``MemoryError`` (NumPy's), before native
code runs. ``out=`` arrays are never converted: they must already be exact and writeable.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ..ir.dtype import float_info, is_floating


class ArgumentError(ValueError, TypeError):
    """A bad argument to a compiled function; names the function, the parameter, what was expected and got.

    Both a ValueError and a TypeError, so callers may catch either."""


_NUMERIC = "biuf"  # bool, signed, unsigned, float: the kinds a parameter's dtype may come from


def _kind(dtype: np.dtype) -> str:
    """``dtype.kind``, with ml_dtypes' bfloat16 (kind "V") counted as the float it is: the same rules as float16."""
    return "f" if is_floating(dtype) else dtype.kind


def _is_exact(a: np.ndarray, dtype: np.dtype) -> bool:
    flags = a.flags
    return a.dtype == dtype and flags.c_contiguous and flags.aligned


def conform(a: Any, dtype: np.dtype) -> tuple[np.ndarray | None, str]:
    """``a`` as a C-contiguous, aligned array of ``dtype`` under the policy above: ``(array, "")``, or
    ``(None, what is wrong)``. The array is ``a`` itself when it already fits (no copy)."""
    masked = sys.modules.get("numpy.ma")  # (no masked array exists unless numpy.ma was imported: not importing it
    # here saves a process 18 ms)
    if masked is not None and isinstance(a, masked.MaskedArray):  # its data alone would be passed: masked values too
        return None, (f"expected an array of {dtype.name}, got a numpy.ma.MaskedArray (compiled code would read the "
                      "masked values too: pass a.filled(value) or a.compressed())")
    if isinstance(a, np.ndarray) and _is_exact(a, dtype):
        if dtype.kind == "b" and a.size and a.view(np.uint8).max() > 1:  # bytes other than 0/1 (np.frombuffer
            return a.view(np.uint8) != 0, ""  # of a 0/255 mask): True to NumPy, and compiled code reads one bit
        return a, ""
    if not isinstance(a, np.ndarray):
        kind = type(a).__name__
        try:
            a = np.asarray(a)
        except Exception as exc:  # a ragged list; a tensor that requires grad; an __array__ that fails
            return None, (f"expected an array of {dtype.name}, got a {kind} NumPy cannot convert "
                          f"({type(exc).__name__}: {exc})")
        if _kind(a.dtype) not in _NUMERIC:
            return None, f"expected an array of {dtype.name}, got a {kind} of {a.dtype}"
    if a.dtype.newbyteorder("=") == dtype and a.dtype != dtype:  # only the byte order differs
        return np.asarray(a, dtype=dtype, order="C"), ""  # keeps a 0-d array 0-d
    if a.dtype != dtype:
        problem = _cast_problem(a, dtype)
        if problem:
            return None, problem
        if dtype.kind in "iu" and a.dtype.kind in "iu" and not np.can_cast(a.dtype, dtype, "safe"):
            info, flat = np.iinfo(dtype), a.ravel()
            outside = np.flatnonzero((flat < info.min) | (flat > info.max))
            if outside.size:
                return None, (f"expected {dtype.name}; the {a.dtype.name} value {flat[outside[0]]} at flat "
                              f"position {outside[0]} does not fit")
        with np.errstate(over="ignore"):  # (a value beyond the range is refused below, with its position)
            converted = a.astype(dtype, order="C")
        if _kind(dtype) == "f" and _kind(a.dtype) == "f" and float_info(dtype).max < float_info(a.dtype).max:
            with np.errstate(invalid="ignore"):
                overflowed = np.flatnonzero(np.isinf(converted) & np.isfinite(a).reshape(converted.shape))
            if overflowed.size:
                value = a.ravel()[overflowed[0]].item()
                return None, (f"expected {dtype.name}; the {a.dtype.name} value {value!r} at flat position "
                              f"{overflowed[0]} is beyond its range (it would become inf)")
        if _kind(dtype) == "f" and a.dtype.kind in "iu" and a.size:
            problem = _inexact_integers(a, converted, dtype)
            if problem:
                return None, problem
        return converted, ""
    copy = np.array(a, dtype=dtype, order="C", copy=True)  # non-contiguous, Fortran-ordered or misaligned
    return (copy.view(np.uint8) != 0 if dtype.kind == "b" and copy.size else copy), ""  # (bool: bytes 0 or 1)


def _inexact_integers(a: np.ndarray, converted: np.ndarray, dtype: np.dtype) -> str:
    """Why integers ``a`` do not convert exactly to the floats ``converted`` (empty if they do: every integer up
    to 2**(mantissa bits + 1) in magnitude is a float; beyond it, 16777217 would become 16777216 in float32)."""
    bits = float_info(dtype).nmant + 1
    if a.dtype.itemsize * 8 - (a.dtype.kind == "i") <= bits:
        return ""  # (uint8 images, int16 audio for float32: every value exact, nothing to scan)
    exact = 1 << bits
    if -exact <= int(a.min()) and int(a.max()) <= exact:
        return ""
    with np.errstate(invalid="ignore", over="ignore"):
        differs = np.flatnonzero(converted.astype(a.dtype).ravel() != a.ravel())
    if not differs.size:
        return ""
    value = a.ravel()[differs[0]].item()
    return (f"expected {dtype.name}; the {a.dtype.name} value {value} at flat position {differs[0]} has no exact "
            f"{dtype.name} (it would become {converted.ravel()[differs[0]].item()!r}): cast explicitly to round it")


def _cast_problem(a: np.ndarray, dtype: np.dtype) -> str:
    """Why ``a``'s dtype may not be cast to ``dtype`` (empty if it may)."""
    got = a.dtype.name if a.dtype.isnative else f"{a.dtype.str} ({a.dtype.name} in non-native byte order)"
    if a.dtype.kind in "iu" and dtype.kind in "iu":
        return ""  # signed to unsigned too (a list of ints is int64): conform refuses a value that does not fit
    if _kind(a.dtype) == "f" and _kind(dtype) == "f":
        return ""  # any float to any float (bfloat16 and float16 included, both ways): conform refuses overflow
    if _kind(a.dtype) not in _NUMERIC or dtype.kind == "b" or not np.can_cast(a.dtype, dtype, "same_kind"):
        hint = (" (an integer parameter takes no floats: cast with .astype if the values are whole)"
                if dtype.kind in "iu" and _kind(a.dtype) == "f" else "")
        return f"expected dtype {dtype.name}, got {got}{hint}"
    return ""


def out_problem(o: Any, shape: tuple[int, ...], dtype: np.dtype) -> str:
    """What is wrong with ``o`` as an ``out=`` array of this shape and dtype (never converted)."""
    if not isinstance(o, np.ndarray):
        return f"expected a numpy.ndarray, got {type(o).__name__}"
    problems = []
    if o.dtype != dtype:
        problems.append(f"expected dtype {dtype.name}, got {o.dtype.str if not o.dtype.isnative else o.dtype.name}")
    if o.shape != tuple(shape):
        problems.append(f"expected shape {_shape_text(shape)}, got {_shape_text(o.shape)}")
    if not o.flags.c_contiguous:
        problems.append(f"expected a C-contiguous array, got strides {o.strides}")
    elif not o.flags.aligned:
        problems.append(f"expected an array aligned to its {o.itemsize}-byte items")
    if not o.flags.writeable:
        problems.append("expected a writeable array")
    return "; ".join(problems)


def _shape_text(shape: Any) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"
