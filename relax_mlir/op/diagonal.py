"""``eye`` and ``eye_like`` (TVM's names and attributes), composites over :func:`.create.arange`: ones on a
diagonal of a matrix, zeros elsewhere. ``n``, ``m`` and ``k`` may be sizes (``R.eye(n, k=k)``)."""

from __future__ import annotations

import numpy as np

from ..ir.dtype import is_bool, to_numpy
from ..ir.expr import Call, Expr, const
from ..ir.struct_info import TensorStructInfo
from ..ir.sym import SymDim
from . import grad_utils as gu
from .common import canonical_dtype, fmt, is_int_value
from .create import _described, _no_inputs, _size_or_number, _value_independent, arange
from .registry import REQUIRED, BadSample, Op, Sample, fail, get_op, register

_T = TensorStructInfo
_Sym = SymDim


def _eye_canon(attrs: dict) -> dict:
    attrs = dict(attrs, **{key: _size_or_number(attrs[key], key) for key in ("n", "m", "k") if key in attrs})
    if "n" in attrs and attrs["m"] is None:  # eye(n): square
        attrs["m"] = attrs["n"]
    return canonical_dtype(attrs)


def _eye_check(attrs: dict) -> None:
    for key in ("n", "m"):
        if key in attrs and not (is_int_value(attrs[key]) and attrs[key] >= 0 or isinstance(attrs[key], _Sym)):
            fail(f"{key} must be a non-negative int or a size, got {_described(attrs[key])}")
    if not (is_int_value(attrs["k"]) or isinstance(attrs["k"], _Sym)):
        fail(f"k must be an int or a size (n, R.prim_value(n - 1)), got {_described(attrs['k'])}")


def _eye_like_infer(args, attrs):
    (x,) = args
    if x.ndim not in (-1, 2):
        fail(f"x must have rank 2 (it gives the matrix's shape), got rank {x.ndim} (shape {fmt(x.shape)})")
    return _T(x.shape, attrs["dtype"] or x.dtype, 2 if x.shape is None else -1)


_INT64_DIAGONALS = (-(2 ** 63 - 1), 2 ** 63 - 1)  # beyond every offset col - row of a matrix of int64 sizes


def diagonal_mask(rows, cols, k) -> Expr:
    """The (rows, cols) boolean matrix of diagonal ``k`` (``col - row == k``); a symbolic ``k`` is the one-element
    ``arange(k, k + 1)``, known at run time. An int ``k`` is an int64 constant, moved (where it lies beyond the
    matrix) to a diagonal just as empty: ``-rows`` or ``cols`` where those are static, else the ends of int64, which
    no offset reaches (so any int is a ``k``, as NumPy's)."""
    offsets = get_op("relax.subtract")(arange(0, cols), get_op("relax.expand_dims")(arange(0, rows), 1))
    if isinstance(k, _Sym):
        return get_op("relax.equal")(offsets, arange(k, k + 1))
    low = -rows if isinstance(rows, int) else _INT64_DIAGONALS[0]
    high = cols if isinstance(cols, int) else _INT64_DIAGONALS[1]
    return get_op("relax.equal")(offsets, const(min(max(k, low), high), "int64"))


def _ones_on(mask: Expr, dtype: str) -> Expr:
    return mask if is_bool(dtype) else get_op("relax.astype")(mask, dtype)


def _eye_decompose(call: Call) -> Expr:
    """``astype(arange(0, m) - arange(0, n)[:, None] == k, dtype)``."""
    a = call.attrs
    return _ones_on(diagonal_mask(a["n"], a["m"], a["k"]), a["dtype"])


def _eye_like_decompose(call: Call) -> Expr:
    x = call.args[0]
    rows, cols = gu.shape_of(x, call.op.name)
    return _ones_on(diagonal_mask(rows, cols, call.attrs["k"]), call.struct_info.dtype)


eye = register(Op(
    name="relax.eye", inputs=(), gradient=_no_inputs, attrs={"n": REQUIRED, "m": None, "k": 0, "dtype": "float32"},
    infer=lambda args, attrs: _T((attrs["n"], attrs["m"]), attrs["dtype"]), canonicalize=_eye_canon,
    check_attrs=_eye_check, reference=lambda n, m, k, dtype: np.eye(n, m, k, to_numpy(dtype)),
    decompose=_eye_decompose,
    samples=[Sample([], {"n": 3}), Sample([], {"n": 2, "m": 4, "dtype": "int64"}),
             Sample([], {"n": 3, "m": 5, "k": 1}), Sample([], {"n": 4, "m": 3, "k": -2, "dtype": "bool"}),
             Sample([], {"n": "n", "k": 1}, sizes={"n": 3}), Sample([], {"n": "n", "m": "m", "k": "k"},
                                                                    sizes={"n": 3, "m": 4, "k": 2}),
             Sample([], {"n": 0, "m": 2})],
    bad_samples=[BadSample([], {"n": -1}, r"n must be a non-negative int or a size, got -1"),
                 BadSample([], {"n": 2, "m": 2.5}, r"m must be a non-negative int or a size, got 2.5"),
                 BadSample([], {"n": 2, "k": 0.5}, r"k must be an int or a size"),
                 BadSample([], {"n": 2, "dtype": "float8"}, r"unknown dtype 'float8'")],
    doc="The (n, m) matrix with ones on diagonal ``k`` and zeros elsewhere (TVM's ``eye(n, m=None, k=0, "
        "dtype='float32')``, NumPy's ``eye``): ``m`` defaults to ``n``; ``k > 0`` is above the main diagonal. ``n``, "
        "``m`` and ``k`` may be sizes. Composite: ``arange(0, m) - arange(0, n)[:, None] == k``, cast."))

eye_like = register(Op(
    name="relax.eye_like", inputs=("x",), gradient=_value_independent, attrs={"k": 0, "dtype": None},
    infer=_eye_like_infer, canonicalize=_eye_canon, check_attrs=_eye_check,
    reference=lambda x, k, dtype: np.eye(x.shape[0], x.shape[1], k, to_numpy(dtype) if dtype else x.dtype),
    decompose=_eye_like_decompose,
    samples=[Sample([_T((3, 4), "float32")]), Sample([_T((2, 5), "int64")], {"k": 1}),
             Sample([_T(("n", "m"), "float32")], {"k": -1, "dtype": "float64"}), Sample([_T((3, 3), "bool")])],
    bad_samples=[BadSample([_T((2, 3, 4), "float32")], {}, r"x must have rank 2 .* got rank 3"),
                 BadSample([_T((2, 3), "float32")], {"k": "k +"}, r"k: malformed dimension")],
    doc="``eye`` with the shape of the 2-D ``x``, and its dtype unless ``dtype`` is given (TVM's ``eye_like(x, k=0, "
        "dtype=None)``). Composite, as ``eye``; no gradient reaches ``x`` (its values are not read)."))
