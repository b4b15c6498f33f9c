"""Data types: the names Relax uses (``"float32"``) and their NumPy and MLIR counterparts."""

from __future__ import annotations

from typing import Any

import numpy as np

try:  # bfloat16 is not a NumPy type; ml_dtypes (a JAX dependency) provides one.
    import ml_dtypes

    BFLOAT16: np.dtype | None = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a declared dependency
    BFLOAT16 = None

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
DTYPES = FLOAT_DTYPES + INT_DTYPES + ("bool",)

_MLIR_NAMES = {
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "ui8", "uint16": "ui16", "uint32": "ui32", "uint64": "ui64", "bool": "i1",
}


def check_dtype(dtype: str, where: str = "dtype") -> str:
    """Return ``dtype`` if it names a Relax dtype, else raise a ``ValueError`` saying what is allowed."""
    if type(dtype) is str and dtype in DTYPES:  # the common case, first: thousands of calls at import (op samples)
        return dtype
    if isinstance(dtype, np.dtype) or (isinstance(dtype, type) and issubclass(dtype, np.generic)):
        dtype = from_numpy(np.dtype(dtype))
    if dtype not in DTYPES:
        raise ValueError(f"{where}: unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
    return dtype


#: Floats of 8 or 11 significant bits: what they compute (norm statistics, optimizer updates, composite
#: activations) is computed in float32 and rounded once, as PyTorch's "opmath".
HALF_FLOATS = ("float16", "bfloat16")


def compute_dtype(dtype: str) -> str:
    """The dtype ``dtype`` values are computed in: float32 for a half float, else ``dtype`` itself."""
    return "float32" if dtype in HALF_FLOATS else dtype


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def is_floating(dtype: Any) -> bool:
    """Whether a NumPy dtype (or anything ``numpy.dtype`` takes) holds floats: float16/32/64 and ml_dtypes'
    bfloat16. The one test for "a float array": bfloat16's kind is ``"V"`` (void), not ``"f"``, and it is no
    subtype of ``numpy.floating``, so ``dtype.kind == "f"`` and ``numpy.issubdtype(dtype, numpy.floating)`` both
    miss it (and a NaN of a bfloat16 model went unseen)."""
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or (BFLOAT16 is not None and dtype == BFLOAT16)


def float_info(dtype: Any):
    """``numpy.finfo`` of a float dtype, bfloat16 included (``numpy.finfo`` knows no bfloat16: ml_dtypes' does)."""
    dtype = np.dtype(dtype)
    return ml_dtypes.finfo(dtype) if BFLOAT16 is not None and dtype == BFLOAT16 else np.finfo(dtype)


def is_int(dtype: str) -> bool:
    return dtype in INT_DTYPES


def is_bool(dtype: str) -> bool:
    return dtype == "bool"


def to_numpy(dtype: str) -> np.dtype:
    """The NumPy dtype that stores values of ``dtype``."""
    if dtype == "bfloat16":
        if BFLOAT16 is None:  # pragma: no cover
            raise ValueError("bfloat16 needs the ml_dtypes package")
        return BFLOAT16
    return np.dtype(dtype)


def from_numpy(dtype: np.dtype) -> str:
    """The Relax dtype name of a NumPy dtype."""
    dtype = np.dtype(dtype)
    if BFLOAT16 is not None and dtype == BFLOAT16:
        return "bfloat16"
    name = dtype.name
    if name not in DTYPES:
        raise ValueError(f"NumPy dtype {name} has no Relax counterpart; expected one of {', '.join(DTYPES)}")
    return name


def to_mlir(dtype: str) -> str:
    """The MLIR element type spelling of ``dtype`` (``f32``, ``i64``, ``i1``)."""
    return _MLIR_NAMES[dtype]
