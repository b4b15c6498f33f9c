"""Tensor creation: zeros, ones, full (from a shape attribute, no tensor inputs), their ``*_like``
variants, triu/tril, and arange (``eye``/``eye_like`` are in :mod:`.diagonal`).

TVM passes arange's bounds and triu/tril's ``k`` as ``PrimExpr``s: here each is a number or a size (a ``SymDim``:
``n``, ``n - 1``, what ``R.prim_value(n)`` or an ``R.Prim(value="n")`` parameter holds).

Gradients: the ops without inputs have none to give (``[]``); the ``*_like`` ops' results do not depend on
the input's values (``[None]``); triu/tril pass the same triangle of the adjoint back.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import sym
from ..ir.dtype import check_dtype, is_bool, is_int, to_numpy
from ..ir.expr import Call, Constant, Expr, PrimValue, const
from ..ir.struct_info import TensorStructInfo
from . import grad_utils as gu
from .common import canonical_dtype, fmt, is_int_value, shape_attr
from .manipulate import shape_value
from .registry import REQUIRED, BadSample, Op, Sample, fail, get_op, register

_T = TensorStructInfo
_Sym = sym.SymDim


def _size_or_number(value, key: str):
    """A value TVM passes as a ``PrimExpr`` as stored: a number, or a size as a ``SymDim`` (a name or an expression
    as text, ``"n - 1"``, as the printer writes it; an ``R.prim_value`` is its value)."""
    if isinstance(value, PrimValue):
        value = value.value
    if isinstance(value, str):
        try:
            value = sym.parse_dim(value)
        except ValueError as exc:
            fail(f"{key}: {exc}")
    return value


def _described(value) -> str:
    """An attribute value in an error: an expression by its struct info (a tensor ``k``), else its repr."""
    return f"{type(value).__name__} of {value.struct_info}" if isinstance(value, Expr) else repr(value)


def _check_fill(attrs: dict) -> None:
    value = attrs["fill_value"]
    if not isinstance(value, (int, float)):  # bool is an int
        fail(f"fill_value must be a number, got {value!r}")


def _check_fits(value, dtype: str) -> None:
    """Refuse a fill value ``dtype`` cannot hold, as ``R.const`` does: NaN, inf or a number outside an integer
    dtype's range (NumPy and the compiled code would wrap or saturate it differently), a finite float that
    overflows a float dtype. A fraction made an integer is truncated toward zero, as NumPy, PyTorch and TVM do."""
    if isinstance(value, bool) or is_bool(dtype):
        return
    if is_int(dtype):
        info = np.iinfo(to_numpy(dtype))
        if (isinstance(value, float) and not math.isfinite(value)) or not info.min <= math.trunc(value) <= info.max:
            fail(f"fill_value {value!r} is not representable in {dtype} (expected {info.min} <= value <= {info.max})")
    elif dtype in ("float16", "bfloat16", "float32") and isinstance(value, (int, float)):
        with np.errstate(over="ignore"):
            if math.isfinite(float(value)) and not np.isfinite(np.float64(np.asarray(value, to_numpy(dtype)))):
                fail(f"fill_value {value!r} overflows {dtype} (largest {float(np.finfo(to_numpy(dtype)).max):.4g})")


def _fill_dtype(value) -> str:
    """The dtype ``full`` gives a fill value when none is named: that of ``R.const(value)``."""
    if isinstance(value, bool):
        return "bool"
    return "int32" if isinstance(value, int) else "float32"  # (TVM: a Python int is int32, a float float32)


# -- zeros, ones, full ----------------------------------------------------------------------------------

def _from_shape_canon(attrs: dict) -> dict:
    # Names in the shape become size variables, so equal shapes compare equal.
    return _fill_canon(canonical_dtype(dict(attrs, shape=shape_attr(shape_value(attrs["shape"], "full")))))


def _scalar_fill(value):
    """(number, dtype) of a fill value given as a scalar expression, or None: a 0-d array (the parser's
    ``R.const(1.5, "float32")``), a 0-d ``Constant`` (``relax.const`` in the Python API) or a ``PrimValue``
    holding a number (``R.prim_value(2)``; a size variable is no attribute)."""
    if isinstance(value, Constant):
        value = value.data
    if isinstance(value, (np.ndarray, np.generic)) and np.ndim(value) == 0:
        return np.asarray(value).item(), str(np.asarray(value).dtype)
    if isinstance(value, PrimValue) and isinstance(value.value, (int, float, np.generic)):
        return (value.value.item() if isinstance(value.value, np.generic) else value.value), value.dtype
    return None


def _fill_canon(attrs: dict, value_dtype: bool = True) -> dict:
    """TVM passes the fill value as a scalar expression (``R.const(1.5, "float32")``, a ``PrimValue``): its number
    is the value, and (``value_dtype``: full's, not full_like's, whose default is the input's) its dtype the
    default dtype."""
    scalar = _scalar_fill(attrs.get("fill_value"))
    if scalar is not None:
        attrs = dict(attrs, fill_value=scalar[0])
        if value_dtype and attrs.get("dtype") is None:
            attrs["dtype"] = scalar[1]
    return attrs


def _runtime_fill(value) -> bool:
    """Whether ``value`` is a fill value known only at run time: a tensor expression no constant holds (a parameter,
    a computed value), which no attribute can store."""
    return (isinstance(value, Expr) and not isinstance(value, (Constant, PrimValue))
            and isinstance(value.struct_info, TensorStructInfo))


class _FillOp(Op):
    """``full``/``full_like``, whose fill value TVM passes as an expression. A number or a constant is the record's
    ``fill_value`` attribute; a 0-d tensor known only at run time makes the call ``broadcast_to(astype(v, dtype),
    shape)``: the values TVM's op gives, and the form the parser writes for ``R.full(shape, v)``, so the Python API
    and the text build the same module."""

    def __call__(self, *args, **kwargs):
        names = (*self.inputs, *self.attrs)
        position = names.index("fill_value")
        value = args[position] if len(args) > position else kwargs.get("fill_value")
        if not _runtime_fill(value):
            return super().__call__(*args, **kwargs)
        args = tuple(0 if i == position else a for i, a in enumerate(args))
        kwargs = dict(kwargs, fill_value=0) if "fill_value" in kwargs else kwargs
        tensors, attrs = self.bind_arguments(args, kwargs)  # the other arguments checked and canonical
        sinfo = value.struct_info
        if sinfo.ndim != 0:
            raise ValueError(f"{self.name}: fill_value must be a 0-d tensor (TVM's zero-rank fill value) or a number, "
                             f"got {sinfo}")
        if self.inputs:  # full_like: the shape of x, and its dtype unless one is given
            x = tensors[0].struct_info if isinstance(tensors[0], Expr) else None
            if not isinstance(x, TensorStructInfo) or x.shape is None:
                raise ValueError(f"{self.name}: a fill value known only at run time needs the shape of x, got {x}")
            shape, dtype = x.shape, attrs["dtype"] or x.dtype
        else:
            shape, dtype = attrs["shape"], attrs["dtype"] or sinfo.dtype
        if dtype != sinfo.dtype:
            value = get_op("relax.astype")(value, dtype)
        return get_op("relax.broadcast_to")(value, shape)


def _zeros_ones_canon(name: str):
    def canon(attrs: dict) -> dict:
        # Unlike full's, their dtype cannot be left to a fill value: None is refused.
        return dict(attrs, shape=shape_attr(shape_value(attrs["shape"], name)),
                    dtype=check_dtype(attrs["dtype"], "dtype"))
    return canon


def _from_shape_infer(args, attrs):
    if "fill_value" not in attrs:
        return _T(attrs["shape"], attrs["dtype"])
    dtype = attrs["dtype"] or _fill_dtype(attrs["fill_value"])
    _check_fits(attrs["fill_value"], dtype)
    return _T(attrs["shape"], dtype)


def _constant_samples(extra: dict) -> list[Sample]:
    return [Sample([], {"shape": (2, 3), "dtype": "float32", **extra}),
            Sample([], {"shape": [4], "dtype": "int32", **extra}),
            Sample([], {"shape": (), "dtype": "float64", **extra}),
            Sample([], {"shape": (2, 0, 3), "dtype": "bool", **extra}),
            Sample([], {"shape": ("n", 4), "dtype": "float32", **extra}, sizes={"n": 3}),
            Sample([], {"shape": ("2 * n", "m"), "dtype": "int64", **extra}, sizes={"n": 2, "m": 5})]


def _constant_bad(extra: dict) -> list[BadSample]:
    return [BadSample([], {"shape": (2, -1), "dtype": "float32", **extra}, r"negative dimension -1"),
            BadSample([], {"shape": 3, "dtype": "float32", **extra}, r"shape must be a sequence of dimensions"),
            BadSample([], {"shape": (2,), "dtype": "float8", **extra}, r"unknown dtype 'float8'"),
            BadSample([], {"shape": ("n +",), "dtype": "float32", **extra}, r"malformed dimension")]


def _no_inputs(orig, call, grad):
    return []


def _value_independent(orig, call, grad):
    return [None]


_NO_DTYPE = BadSample([], {"shape": (2,), "dtype": None}, r"unknown dtype None")


zeros = register(Op(
    name="relax.zeros", unsigned="agnostic", lowering="shape:zeros",
    inputs=(), gradient=_no_inputs, attrs={"shape": REQUIRED, "dtype": REQUIRED},
    infer=_from_shape_infer, canonicalize=_zeros_ones_canon("zeros"),
    reference=lambda shape, dtype: np.zeros(shape, to_numpy(dtype)),
    samples=_constant_samples({}),
    bad_samples=_constant_bad({}) + [BadSample([], {"shape": (2,)}, r"missing required attribute 'dtype'"), _NO_DTYPE],
    doc="A tensor of zeros: ``R.zeros((n, 4), \"float32\")``; the shape may name size variables."))

ones = register(Op(
    name="relax.ones", unsigned="agnostic", lowering="shape:ones",
    inputs=(), gradient=_no_inputs, attrs={"shape": REQUIRED, "dtype": REQUIRED},
    infer=_from_shape_infer, canonicalize=_zeros_ones_canon("ones"),
    reference=lambda shape, dtype: np.ones(shape, to_numpy(dtype)),
    samples=_constant_samples({}),
    bad_samples=_constant_bad({}) + [_NO_DTYPE],
    doc="A tensor of ones: ``R.ones((), \"float32\")``; the shape may name size variables."))

full = register(_FillOp(
    name="relax.full", unsigned="agnostic", lowering="shape:full",
    inputs=(), gradient=_no_inputs, attrs={"shape": REQUIRED, "fill_value": REQUIRED, "dtype": None},
    infer=_from_shape_infer, canonicalize=_from_shape_canon, check_attrs=_check_fill,
    reference=lambda shape, fill_value, dtype: np.full(shape, fill_value, to_numpy(dtype or _fill_dtype(fill_value))),
    samples=_constant_samples({"fill_value": 1})
    + [Sample([], {"shape": (2, 2), "fill_value": 2.5}), Sample([], {"shape": (3,), "fill_value": -7}),
       Sample([], {"shape": (1,), "fill_value": True}),
       Sample([], {"shape": (2,), "fill_value": 0.5, "dtype": "float16"})],
    bad_samples=_constant_bad({"fill_value": 0})
    + [BadSample([], {"shape": (2,), "fill_value": "one"}, r"fill_value must be a number, got 'one'"),
       BadSample([], {"shape": (2,), "fill_value": 300, "dtype": "int8"},
                 r"fill_value 300 is not representable in int8 \(expected -128 <= value <= 127\)"),
       BadSample([], {"shape": (2,), "fill_value": float("nan"), "dtype": "int32"}, r"fill_value nan is not repr"),
       BadSample([], {"shape": (2,), "fill_value": 1e5, "dtype": "float16"}, r"100000.0 overflows float16")],
    doc="A tensor filled with ``fill_value``; ``dtype`` defaults to the fill value's (bool, int32 or "
        "float32, as ``R.const``). A value the dtype cannot hold is refused; a fraction made an integer is "
        "truncated toward zero. A 0-d tensor known only at run time (TVM's fill value is an expression) makes the "
        "call ``broadcast_to(astype(v, dtype), shape)``, as the parser writes ``R.full(shape, v)``."))


# -- zeros_like, ones_like, full_like -------------------------------------------------------------------

def _like_infer(args, attrs):
    (x,) = args
    dtype = attrs["dtype"] or x.dtype
    if "fill_value" in attrs and dtype:
        _check_fits(attrs["fill_value"], dtype)
    return _T(x.shape, dtype, x.ndim if x.shape is None else -1)


def _like_samples(extra: dict) -> list[Sample]:
    return [Sample([_T((2, 3), "float32")], dict(extra)),
            Sample([_T(("n", 4), "float64")], dict(extra)),
            Sample([_T((3,), "int32")], {**extra, "dtype": "float32"}),
            Sample([_T((), "float32")], {**extra, "dtype": "bool"})]


def _like_bad(extra: dict) -> list[BadSample]:
    return [BadSample([_T((2,), "float32")], {**extra, "dtype": "complex64"}, r"unknown dtype 'complex64'"),
            BadSample([[_T((2,), "float32")]], dict(extra), r"argument 'x' must be a tensor")]


zeros_like = register(Op(
    name="relax.zeros_like", unsigned="agnostic", lowering="shape:zeros_like",
    inputs=("x",), gradient=_value_independent, attrs={"dtype": None}, infer=_like_infer,
    canonicalize=canonical_dtype,
    reference=lambda x, dtype: np.zeros(x.shape, to_numpy(dtype) if dtype else x.dtype),
    samples=_like_samples({}), bad_samples=_like_bad({}),
    doc="Zeros with the shape of ``x`` and its dtype unless ``dtype`` is given."))

ones_like = register(Op(
    name="relax.ones_like", unsigned="agnostic", lowering="shape:ones_like",
    inputs=("x",), gradient=_value_independent, attrs={"dtype": None}, infer=_like_infer,
    canonicalize=canonical_dtype,
    reference=lambda x, dtype: np.ones(x.shape, to_numpy(dtype) if dtype else x.dtype),
    samples=_like_samples({}), bad_samples=_like_bad({}),
    doc="Ones with the shape of ``x`` and its dtype unless ``dtype`` is given."))

full_like = register(_FillOp(
    name="relax.full_like", unsigned="agnostic", lowering="shape:full_like",
    inputs=("x",), gradient=_value_independent, attrs={"fill_value": REQUIRED, "dtype": None},
    infer=_like_infer, canonicalize=lambda attrs: _fill_canon(canonical_dtype(attrs), False), check_attrs=_check_fill,
    reference=lambda x, fill_value, dtype: np.full(x.shape, fill_value, to_numpy(dtype) if dtype else x.dtype),
    samples=_like_samples({"fill_value": 3}) + [Sample([_T((2, 2), "float16")], {"fill_value": -0.25}),
                                                 Sample([_T((3,), "int8")], {"fill_value": 2.75})],
    bad_samples=_like_bad({"fill_value": 0})
    + [BadSample([_T((2,), "float32")], {"fill_value": None}, r"fill_value must be a number, got None"),
       BadSample([_T((2,), "uint8")], {"fill_value": -1}, r"fill_value -1 is not representable in uint8"),
       BadSample([_T((2,), "float32")], {"fill_value": float("inf"), "dtype": "int64"}, r"inf is not repr")],
    doc="``fill_value`` everywhere, with the shape of ``x`` and its dtype unless ``dtype`` is given "
        "(as TVM, the dtype of ``x``, not of the fill value). A 0-d tensor known only at run time makes the call "
        "``broadcast_to(astype(v, dtype), x's shape)``."))


# -- triu, tril -----------------------------------------------------------------------------------------

def _tri_canon(attrs: dict) -> dict:
    return dict(attrs, k=_size_or_number(attrs["k"], "k"))


def _tri_check(attrs: dict) -> None:
    k = attrs["k"]
    if not (is_int_value(k) or isinstance(k, _Sym)):  # (TVM refuses a tensor k too: it takes a PrimExpr)
        fail(f"k must be an int or a size (n, R.prim_value(n - 1)), got {_described(k)}")


def _tri_infer(args, attrs):
    (x,) = args
    if x.ndim != -1 and x.ndim < 2:
        fail(f"input must have rank >= 2 (the last two dims form the matrix), got rank {x.ndim} "
             f"(shape {fmt(x.shape)})")
    return x


def _tri_mask(call: Call, keep: str) -> Expr:
    """The (rows, cols) mask of the kept triangle, ``col - row <keep> k``, with ``k`` a size known at run time:
    ``arange(k, k + 1)`` is the one-element tensor holding it (a negative ``k`` too)."""
    rows, cols = gu.shape_of(call.args[0], f"{call.op.name} with the symbolic k {call.attrs['k']}")[-2:]
    k = call.attrs["k"]
    offsets = get_op("relax.subtract")(arange(0, cols), get_op("relax.expand_dims")(arange(0, rows), 1))
    return get_op(f"relax.{keep}")(offsets, arange(k, k + 1))


def _triangle(name: str, fn, side: str) -> Op:
    def gradient(orig, call, grad):
        return [gu.only_float(orig, op(grad, call.attrs["k"]))]

    def exported(call: Call):
        """A symbolic ``k`` is no attribute compiled code has: ``where(mask, x, 0)`` with the mask built at run
        time; an int ``k`` is lowered as it is (None)."""
        if not isinstance(call.attrs["k"], _Sym):
            return None
        x = call.args[0]
        mask = _tri_mask(call, "greater_equal" if side == "upper" else "less_equal")
        return get_op("relax.where")(mask, x, get_op("relax.zeros_like")(x))

    op = register(Op(
        name=f"relax.{name}", inputs=("x",), attrs={"k": 0}, infer=_tri_infer, canonicalize=_tri_canon,
        check_attrs=_tri_check, unsigned="agnostic", export_rewrite=exported,
        gradient=gradient, lowering=f"shape:{name}",
        reference=lambda x, k: fn(x, k),
        samples=[Sample([_T((4, 4), "float32")]), Sample([_T((3, 5), "float64")], {"k": 1}),
                 Sample([_T((2, 4, 3), "int32")], {"k": -1}), Sample([_T(("n", 4), "float32")], {"k": 2}),
                 Sample([_T((3, 3), "bool")], {"k": -5})],
        bad_samples=[BadSample([_T((4,), "float32")], {}, r"must have rank >= 2 .* got rank 1"),
                     BadSample([_T((4, 4), "float32")], {"k": 0.5}, r"k must be an int or a size .*, got 0.5"),
                     BadSample([_T((4, 4), "float32")], {"k": "n +"}, r"k: malformed dimension")],
        doc=f"Keep the {side} triangle of the last two dims (on and {'above' if side == 'upper' else 'below'} "
            f"diagonal ``k``; ``k > 0`` is above the main diagonal) and zero the rest. ``k`` is an int or a size "
            f"(``R.prim_value(n - 1)``; as TVM, not a tensor). Its gradient is the same triangle of the adjoint."))
    return op


triu = _triangle("triu", np.triu, "upper")
tril = _triangle("tril", np.tril, "lower")


# -- arange ---------------------------------------------------------------------------------------------

_BOUNDS = ("start", "end", "step")


def _integral(attrs: dict) -> bool:
    return all(is_int_value(attrs[k]) or isinstance(attrs[k], _Sym) for k in _BOUNDS)


def _symbolic(attrs: dict) -> bool:
    return any(isinstance(attrs[k], _Sym) for k in _BOUNDS)


def _arange_canon(attrs: dict) -> dict:
    attrs = dict(attrs, **{k: _size_or_number(attrs[k], k) for k in _BOUNDS})
    if attrs["end"] is None:  # arange(stop), as NumPy
        attrs = dict(attrs, start=0, end=attrs["start"])
    if attrs["dtype"] is None:  # (a size is an int64 PrimExpr in TVM: integral)
        attrs = dict(attrs, dtype="int64" if _integral(attrs) else "float32")
    return canonical_dtype(attrs)


def _arange_check(attrs: dict) -> None:
    for key in _BOUNDS:
        value = attrs[key]
        if isinstance(value, bool) or not isinstance(value, (int, float, _Sym)):
            fail(f"{key} must be an int, a float or a size, got {_described(value)}")
    if attrs["step"] == 0:
        fail("step must be non-zero")
    if isinstance(attrs["step"], _Sym):  # TVM's length (end - start + step - 1) // step then divides by a size
        fail(f"step must be a static int, got the size {attrs['step']} (a length divided by a size has no "
             "size expression here)")
    if _symbolic(attrs) and not _integral(attrs):
        fail(f"a symbolic start or end needs an integer start, end and step (TVM's length for floats, "
             f"ceil((end - start) / step), has no size expression here), got {attrs['start']}, {attrs['end']}, "
             f"{attrs['step']}")
    if is_bool(attrs["dtype"]):
        fail("dtype must be numeric, got bool")
    if is_int(attrs["dtype"]) and not _integral(attrs):
        fail(f"integer dtype {attrs['dtype']} needs integer start, end and step, "
             f"got {attrs['start']}, {attrs['end']}, {attrs['step']}")


def _arange_len(start, end, step):
    """The number of values: ``ceil((end - start) / step)``, at least 0 for numbers. Between sizes it is TVM's
    ``(end - start + step - 1) // step`` (for a negative step the same ceiling, ``(start - end - step - 1) //
    -step``, where TVM's formula counts one more when ``step`` divides the span): not clamped, as TVM's, since a
    size has no ``max``; compiled code and the interpreter refuse a negative length at run time."""
    if isinstance(start, _Sym) or isinstance(end, _Sym):
        n = sym.floor_div(end - start + step - 1, step) if step > 0 else sym.floor_div(start - end - step - 1, -step)
        return max(0, n) if isinstance(n, int) else n  # (bounds a constant apart: arange(n, n - 2) is empty)
    if all(isinstance(v, int) for v in (start, end, step)):
        return max(0, -((start - end) // step))  # exact ceil division on ints
    return max(0, math.ceil((end - start) / step))


def _arange_run_length(sinfo, attrs: dict, sizes: dict) -> str | None:
    """Between sizes the inferred length is TVM's, not clamped at 0 (the reference's, NumPy's, is): a negative one
    at run time is refused, as the lowering refuses it."""
    length = sinfo.shape[0] if isinstance(sinfo, _T) and sinfo.shape else None
    if not isinstance(length, _Sym) or not length.free_vars() <= sizes.keys():
        return None
    n = sym.evaluate(length, sizes)
    if n >= 0:
        return None
    return (f"the length ceil((end - start) / {attrs['step']}) from start {attrs['start']} to end {attrs['end']} is "
            f"{n}, a negative size (as TVM's, the inferred length is not clamped at 0)")


def _arange_ref(start, end, step, dtype):
    n = _arange_len(start, end, step)
    wide = np.int64 if is_int(dtype) else np.float64
    return (wide(start) + np.arange(n, dtype=wide) * wide(step)).astype(to_numpy(dtype))


_INDEX_RANGE = range(-2 ** 63 + 1, 2 ** 63)  # (-2**63 marks a symbolic entry of a size attribute)


def _arange_exported(call: Call):
    """Symbolic bounds are passed to compiled code as ``index`` operands (``size_attrs``), which hold tuples of ints:
    the exported call stores ``start`` and ``end`` as 1-tuples. Bounds such a tuple cannot hold (floats, ints
    beyond int64: never beside a size) are ``start + iota * step`` in 64 bits, as the reference computes, with
    ``iota`` an ``arange(0, length)``. None: the call is exported as it is (already in that form)."""
    start, end, step = (call.attrs[k] for k in _BOUNDS)
    if isinstance(start, tuple):
        return None
    if all(isinstance(v, _Sym) or is_int_value(v) and v in _INDEX_RANGE for v in (start, end)):
        return Call(call.op, [], dict(call.attrs, start=(start,), end=(end,)), call.struct_info)
    (length,) = call.struct_info.shape
    dtype = call.attrs["dtype"]
    wide = "int64" if _integral(call.attrs) else "float64"
    iota, first, stride = arange(0, length, dtype=wide), _wide_const(start, wide), _wide_const(step, wide)
    values = get_op("relax.add")(get_op("relax.multiply")(iota, stride), first)
    return values if dtype == wide else get_op("relax.astype")(values, dtype)


def _wide_const(value, wide: str) -> Expr:
    """``value`` as a 0-d constant of ``wide``; an int wraps into int64 (2**63 for uint64), as the lowering's does."""
    return const(np.asarray(value % 2 ** 64, np.uint64).astype(np.int64) if wide == "int64" else value, wide)


arange = register(Op(
    name="relax.arange", unsigned="agnostic", lowering="shape:arange", inputs=(), gradient=_no_inputs,
    attrs={"start": REQUIRED, "end": None, "step": 1, "dtype": None}, size_attrs=("start", "end"),
    infer=lambda args, attrs: _T((_arange_len(attrs["start"], attrs["end"], attrs["step"]),), attrs["dtype"]),
    canonicalize=_arange_canon, check_attrs=_arange_check, reference=_arange_ref, export_rewrite=_arange_exported,
    check_sizes=_arange_run_length,
    samples=[Sample([], {"start": 5}), Sample([], {"start": 2, "end": 11, "step": 3}),
             Sample([], {"start": 10, "end": 0, "step": -4, "dtype": "int32"}),
             Sample([], {"start": 0.0, "end": 1.0, "step": 0.3}),
             Sample([], {"start": 0, "end": 4, "dtype": "float64"}),
             Sample([], {"start": 3, "end": 1})],
    bad_samples=[BadSample([], {"start": 0, "end": 4, "step": 0}, r"step must be non-zero"),
                 BadSample([], {"start": 0, "end": "n", "step": "m"}, r"step must be a static int, got the size m"),
                 BadSample([], {"start": 0.5, "end": "n"}, r"a symbolic start or end needs an integer start, end"),
                 BadSample([], {"start": 0, "end": "n +"}, r"end: malformed dimension"),
                 BadSample([], {"start": 0, "end": [4]}, r"end must be an int, a float or a size, got \(4,\)"),
                 BadSample([], {"start": 0.5, "end": 4, "dtype": "int32"}, r"integer dtype int32 needs integer"),
                 BadSample([], {"start": 0, "end": 4, "dtype": "bool"}, r"dtype must be numeric")],
    doc="``[start, start + step, ...)`` up to ``end`` (exclusive): ``ceil((end - start) / step)`` values; "
        "``arange(n)`` counts from 0. ``start`` and ``end`` may be sizes (``R.arange(0, n)``, an int ``step``): "
        "the length is then TVM's ``(end - start + step - 1) // step``, unclamped; a negative one is refused at "
        "run time. ``dtype`` defaults to int64 for int arguments and sizes, else float32."))
