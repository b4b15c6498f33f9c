"""Struct info: what Relax knows statically about a value (its shape and dtype, or its structure)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from . import sym
from .dtype import check_dtype, is_float, to_numpy
from .sym import Dim, SymDim


class StructInfo:
    """Base class of struct info. Instances are immutable and compared structurally (``==``)."""

    __slots__ = ()


def prim_value_of(dtype: str, value, where: str):
    """``value`` checked as a scalar of ``dtype``: None (unknown); for an integer dtype an int in its range or a
    symbolic size; for bool True/False (or 0/1); for a float dtype a number. NumPy scalars become Python's."""
    import numpy as np

    if value is None:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if dtype == "bool":
        if isinstance(value, int) and value in (0, 1):  # (True and False are ints)
            return value
    elif dtype.startswith(("int", "uint")):
        if isinstance(value, SymDim):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            info = np.iinfo(dtype)
            if info.min <= value <= info.max:
                return value
            raise ValueError(f"{where}: {value} does not fit in {dtype} ({info.min} to {info.max})")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        check_prim_float(dtype, value, where)  # (1e10 in float16 would be inf)
        # every NaN as one object: struct info compares values with ==, and a NaN equals only itself
        return math.nan if value != value else value
    raise ValueError(f"{where}: {value!r} ({type(value).__name__}) is not a value of dtype {dtype}")


def check_prim_float(dtype: str, value, where: str) -> None:
    """Refuse a finite number that a float ``dtype`` cannot hold (it would become inf: ``1e10`` in float16), as
    ``R.const`` refuses it and an integer prim value outside its dtype is refused; inf and nan are values of every
    float dtype. Other dtypes and values are left to ``prim_value_of``'s other checks. (``PrimStructInfo`` runs it
    too; ``PrimValue`` and the parser's ``R.Prim`` run it first, to name themselves in the message.)"""
    import numpy as np

    if isinstance(value, np.generic):
        value = value.item()
    if not is_float(dtype) or isinstance(value, bool) or not isinstance(value, (int, float)) or \
            isinstance(value, float) and not math.isfinite(value):
        return
    try:
        with np.errstate(over="ignore"):
            fits = bool(np.isfinite(np.asarray(float(value), dtype=to_numpy(dtype))))
    except OverflowError:  # an int beyond float64 (10**400)
        fits = False
    if not fits:
        import ml_dtypes  # (NumPy's finfo knows no bfloat16)

        largest = float(ml_dtypes.finfo(to_numpy(dtype)).max)
        raise ValueError(f"{where}: {value!r} does not fit in {dtype} (largest finite value {largest:.8g}; it would "
                         "become inf)")


#: The highest rank a tensor may have (NumPy's limit is 64; MLIR's memref descriptors are generated per rank).
MAX_RANK = 64


def _ndim(ndim, where: str) -> int:
    """A rank: an int from 0 up, or -1 for an unknown one."""
    if type(ndim) is int and -1 <= ndim <= MAX_RANK:  # the common case, first: the op registry makes thousands of
        return ndim  # struct infos at import (its samples), each through here
    import numpy as np

    if isinstance(ndim, np.integer):
        ndim = int(ndim)
    if not isinstance(ndim, int) or isinstance(ndim, bool) or not -1 <= ndim <= MAX_RANK:
        raise ValueError(f"{where}: ndim must be an int from 0 to {MAX_RANK}, or -1 for an unknown rank; "
                         f"got {ndim!r}")
    return ndim


def _dim(d, where: str) -> Dim:
    if type(d) is int and 0 <= d < 2 ** 63:  # the common case, first (see _ndim)
        return d
    if isinstance(d, bool):
        raise TypeError(f"{where}: dimension must be an int or size variable, got bool")
    if isinstance(d, int):
        if d < 0:
            raise ValueError(f"{where}: dimension must be non-negative, got {d}")
        if d >= 2 ** 63:  # sizes are int64 wherever they are compiled (MLIR's shapes, the descriptors)
            raise ValueError(f"{where}: dimension {d} does not fit in int64")
        return d
    if isinstance(d, SymDim):
        return d
    if isinstance(d, str):
        return sym.parse_dim(d)
    try:  # NumPy integers
        import numpy as np

        if isinstance(d, np.integer):
            return int(d)
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"{where}: dimension must be an int, a size variable or its name, got {d!r}")


def make_shape(shape: Iterable, where: str = "shape") -> tuple[Dim, ...]:
    """Normalise a shape given as ints, ``SymDim``s or strings (``("n", 784)``)."""
    if type(shape) is tuple:  # the common case, first (see _ndim): not a ShapeExpr, whose import costs here
        return tuple(_dim(d, where) for d in shape)
    from .expr import ShapeExpr  # local: expr imports this module

    if isinstance(shape, ShapeExpr):
        return shape.values
    if isinstance(shape, (int, str, SymDim)):
        raise TypeError(f"{where}: expected a sequence of dimensions, got {shape!r}")
    return tuple(_dim(d, where) for d in shape)


@dataclass(frozen=True, init=False)
class TensorStructInfo(StructInfo):
    """A tensor: ``shape`` (a tuple of dims, or ``None`` when only the rank ``ndim`` is known) and dtype.

    ``TensorStructInfo((64, 784), "float32")``, ``TensorStructInfo(("n", 784), "float32")``.
    """

    shape: Optional[tuple[Dim, ...]]
    dtype: str
    ndim: int

    def __init__(self, shape: Optional[Sequence] = None, dtype: str = "float32", ndim: int = -1):
        dtype = check_dtype(dtype, "TensorStructInfo")
        ndim = _ndim(ndim, "TensorStructInfo")
        if shape is not None:
            shape = make_shape(shape, "TensorStructInfo")
            if ndim not in (-1, len(shape)):
                raise ValueError(f"TensorStructInfo: ndim {ndim} disagrees with shape {shape}")
            ndim = len(shape)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "ndim", ndim)

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    def free_vars(self) -> set[str]:
        return set().union(*(sym.free_vars(d) for d in self.shape)) if self.shape else set()

    def __str__(self) -> str:
        if self.shape is None:
            return f"Tensor(ndim={self.ndim}, {self.dtype})"
        return f"Tensor({format_shape(self.shape)}, {self.dtype})"


@dataclass(frozen=True, init=False)
class TupleStructInfo(StructInfo):
    """A tuple of values, each with its own struct info."""

    fields: tuple[StructInfo, ...]

    def __init__(self, fields: Iterable[StructInfo]):
        fields = tuple(fields)
        for f in fields:
            if not isinstance(f, StructInfo):
                raise TypeError(f"TupleStructInfo: fields must be StructInfo, got {type(f).__name__}")
        object.__setattr__(self, "fields", fields)

    def __str__(self) -> str:
        return "Tuple(" + ", ".join(map(str, self.fields)) + ")"


@dataclass(frozen=True, init=False)
class ShapeStructInfo(StructInfo):
    """A shape value (``R.shape([n, 4])``): its dims when known, else only its length ``ndim``."""

    values: Optional[tuple[Dim, ...]]
    ndim: int

    def __init__(self, values: Optional[Sequence] = None, ndim: int = -1):
        ndim = _ndim(ndim, "ShapeStructInfo")
        if values is not None:
            values = make_shape(values, "ShapeStructInfo")
            if ndim not in (-1, len(values)):
                raise ValueError(f"ShapeStructInfo: ndim {ndim} disagrees with values {format_shape(values)}")
            ndim = len(values)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "ndim", ndim)

    def __str__(self) -> str:
        return f"Shape({format_shape(self.values)})" if self.values is not None else f"Shape(ndim={self.ndim})"


@dataclass(frozen=True, init=False)
class PrimStructInfo(StructInfo):
    """A scalar of ``dtype`` that is not a tensor (a ``PrimValue``), with its value when known."""

    dtype: str
    value: object

    def __init__(self, dtype: str = "int64", value=None):
        dtype = check_dtype(dtype, "PrimStructInfo")
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "value", prim_value_of(dtype, value, "PrimStructInfo"))

    def __str__(self) -> str:
        return f"Prim({self.dtype})" if self.value is None else f"Prim({self.value}, {self.dtype})"


@dataclass(frozen=True)
class ObjectStructInfo(StructInfo):
    """Any value: nothing is known about it."""

    def __str__(self) -> str:
        return "Object"


@dataclass(frozen=True, init=False)
class FuncStructInfo(StructInfo):
    """The signature of a function: parameter struct info and return struct info."""

    params: tuple[StructInfo, ...]
    ret: StructInfo

    def __init__(self, params: Iterable[StructInfo], ret: StructInfo):
        object.__setattr__(self, "params", tuple(params))
        object.__setattr__(self, "ret", ret)

    def __str__(self) -> str:
        return "Callable((" + ", ".join(map(str, self.params)) + f"), {self.ret})"


def format_shape(shape: Sequence[Dim]) -> str:
    inner = ", ".join(str(d) for d in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def free_vars(sinfo: StructInfo) -> set[str]:
    """Names of the size variables that occur in ``sinfo``."""
    if isinstance(sinfo, TensorStructInfo):
        return sinfo.free_vars()
    if isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
        return set().union(*(sym.free_vars(d) for d in sinfo.values))
    if isinstance(sinfo, TupleStructInfo):
        return set().union(*(free_vars(f) for f in sinfo.fields))
    if isinstance(sinfo, FuncStructInfo):
        return set().union(*(free_vars(f) for f in sinfo.params), free_vars(sinfo.ret))
    return set()


def defined_size_vars(sinfo: Optional[StructInfo]) -> set[str]:
    """The size variables that matching a value against ``sinfo`` defines: those standing alone as a dimension
    (``n``, not ``2 * n``) of a tensor or a shape, or as a Prim's value. A function's signature defines none (its
    sizes are its own)."""
    def of(dims) -> set[str]:
        return {d.name for d in dims or () if isinstance(d, SymDim) and d.is_var()}

    if isinstance(sinfo, TensorStructInfo):
        return of(sinfo.shape)
    if isinstance(sinfo, ShapeStructInfo):
        return of(sinfo.values)
    if isinstance(sinfo, PrimStructInfo):
        return of([sinfo.value])
    if isinstance(sinfo, TupleStructInfo):
        return set().union(*(defined_size_vars(f) for f in sinfo.fields))
    return set()


def erase_to_well_defined(sinfo: StructInfo, defined: Iterable[str]) -> StructInfo:
    """``sinfo`` with every part that names a size outside ``defined`` made coarser, as TVM's ``EraseToWellDefined``
    does: a tensor keeps its rank and dtype, a shape its length, a Prim its dtype; a function's signature is kept.

    A function's result (and a call's) may only name sizes its parameters (the call's arguments) define: a size a
    function defines inside, by its own ``R.match_cast``, means nothing to its callers, and kept it would make two
    calls' different sizes one (``(n,)`` and ``(n,)`` for inputs of 4 and 3)."""
    defined = set(defined)

    def known(dims) -> bool:
        return all(sym.free_vars(d) <= defined for d in dims)

    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None and not known(sinfo.shape):
        return TensorStructInfo(None, sinfo.dtype, len(sinfo.shape))
    if isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None and not known(sinfo.values):
        return ShapeStructInfo(None, len(sinfo.values))
    if isinstance(sinfo, PrimStructInfo) and isinstance(sinfo.value, SymDim) and not known([sinfo.value]):
        return PrimStructInfo(sinfo.dtype)
    if isinstance(sinfo, TupleStructInfo):
        fields = [erase_to_well_defined(f, defined) for f in sinfo.fields]
        return sinfo if all(a is b for a, b in zip(fields, sinfo.fields)) else TupleStructInfo(fields)
    return sinfo


def is_base_of(base: StructInfo, derived: StructInfo) -> bool:
    """True when every value described by ``derived`` is also described by ``base``."""
    if isinstance(base, ObjectStructInfo):
        return True
    if isinstance(base, TensorStructInfo) and isinstance(derived, TensorStructInfo):
        if base.dtype != derived.dtype or (base.ndim != -1 and base.ndim != derived.ndim):
            return False
        return base.shape is None or base.shape == derived.shape
    if isinstance(base, TupleStructInfo) and isinstance(derived, TupleStructInfo):
        return len(base.fields) == len(derived.fields) and all(
            is_base_of(b, d) for b, d in zip(base.fields, derived.fields))
    if isinstance(base, ShapeStructInfo) and isinstance(derived, ShapeStructInfo):
        if base.ndim != -1 and base.ndim != derived.ndim:
            return False
        return base.values is None or base.values == derived.values
    if isinstance(base, PrimStructInfo) and isinstance(derived, PrimStructInfo):
        return base.dtype == derived.dtype and base.value in (None, derived.value)
    return base == derived


def substitute(sinfo: StructInfo, mapping: dict[str, Dim]) -> StructInfo:
    """Replace size variables by dims (used when a call binds a callee's symbolic parameters)."""
    def dim(d: Dim) -> Dim:
        return sym.substitute(d, lambda v: mapping.get(v, sym.SizeVar(v)))

    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None:
        return TensorStructInfo([dim(d) for d in sinfo.shape], sinfo.dtype)
    if isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
        return ShapeStructInfo([dim(d) for d in sinfo.values])
    if isinstance(sinfo, TupleStructInfo):
        return TupleStructInfo(substitute(f, mapping) for f in sinfo.fields)
    return sinfo


def struct_info_lca(a: StructInfo, b: StructInfo) -> StructInfo:
    """The least upper bound of ``a`` and ``b`` (TVM's ``StructInfoLCA``): the most precise struct info describing
    every value either describes, which is an ``R.If``'s (its branches'). Equal parts are kept; tensors of one dtype
    and rank but other dims keep the rank, of other ranks only the dtype; a shape (a Prim) likewise keeps its length
    (its dtype); tuples of one length unify field by field. What has nothing in common is ``R.Object``: kinds that
    differ, tuples of other lengths, and tensors of different dtypes (TVM's LCA has a tensor of unknown dtype there,
    which this IR cannot write: every tensor has a dtype)."""
    if a == b:
        return a
    if isinstance(a, TensorStructInfo) and isinstance(b, TensorStructInfo):
        if a.dtype != b.dtype:
            return ObjectStructInfo()
        return TensorStructInfo(None, a.dtype, a.ndim if a.ndim == b.ndim else -1)
    if isinstance(a, ShapeStructInfo) and isinstance(b, ShapeStructInfo):
        return ShapeStructInfo(None, a.ndim if a.ndim == b.ndim else -1)
    if isinstance(a, PrimStructInfo) and isinstance(b, PrimStructInfo):
        return PrimStructInfo(a.dtype) if a.dtype == b.dtype else ObjectStructInfo()
    if isinstance(a, TupleStructInfo) and isinstance(b, TupleStructInfo) and len(a.fields) == len(b.fields):
        return TupleStructInfo(struct_info_lca(x, y) for x, y in zip(a.fields, b.fields))
    if isinstance(a, FuncStructInfo) and isinstance(b, FuncStructInfo) and a.params == b.params:
        return FuncStructInfo(a.params, struct_info_lca(a.ret, b.ret))
    return ObjectStructInfo()
