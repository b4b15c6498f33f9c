"""Reductions (one line each through :func:`reduction`): sum, mean, variance, max, min, prod; argmax and
argmin; cumsum. ``axis=None`` reduces every axis; ``keepdims`` keeps reduced axes as size 1.

Gradient rules are ``grad(x, y, g, call) -> x_grad`` with ``g`` already reshaped to broadcast against ``x``
(the reduced axes put back as size 1). Conventions: ``max``/``min`` split the gradient evenly among the
elements equal to the result (as TVM Relay's ``max`` gradient, JAX and ``torch.amax``); ``prod``'s is the product
of the other elements (``y / x`` where ``x`` is not 0, as TVM's, and defined at 0); ``variance`` is the population variance,
``2/N * g * (x - mean(x))``.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir import sym
from ..ir.dtype import is_bool, is_float, is_floating, to_numpy
from ..ir.struct_info import TensorStructInfo
from . import grad_utils as gu
from .common import canonical_dtype, canonical_int_tuple, fmt, is_int_value, normalize_axes, normalize_axis, shape_attr
from .manipulate import shape_value
from .registry import NOT_DIFFERENTIABLE, REQUIRED, BadSample, Op, Sample, fail, register

_T = TensorStructInfo
# This module defines ops named sum, max and min: its functions must not use those builtins
# (tests/py/op/test_modules.py checks that none of them is called here).


def _wide(x: np.ndarray) -> np.ndarray:
    """Accumulate in float64/int64 and cast back, so the reference is not limited by float16 sums."""
    if is_floating(x.dtype):
        return x.astype(np.float64)
    return x.astype(np.uint64 if x.dtype.kind == "u" else np.int64)


def _check_numeric(x: TensorStructInfo, float_only: bool, bool_ok: bool = False) -> None:
    if float_only and not is_float(x.dtype):
        fail(f"input must have a float dtype, got {x.dtype}")
    if is_bool(x.dtype) and not bool_ok:
        fail("input must be numeric, got bool")


def reduced(x: TensorStructInfo, axis, keepdims: bool, dtype: str) -> TensorStructInfo:
    """The struct info of reducing ``x`` over ``axis`` (None, an int or a tuple). Of an ``x`` of unknown shape, as
    TVM infers it: a result of rank 0 has the shape ``()`` (a full reduction has exactly one shape), and every axis
    reduced with ``keepdims`` (``axis=None``) gives a shape of 1s."""
    if x.ndim == -1:
        return _T((), dtype) if axis is None and not keepdims else _T(None, dtype, -1)
    axes = normalize_axes(axis, x.ndim)
    out_ndim = x.ndim if keepdims else x.ndim - len(axes)
    if x.shape is None:
        if out_ndim == 0:
            return _T((), dtype)
        return _T((1,) * out_ndim, dtype) if axis is None and keepdims else _T(None, dtype, out_ndim)
    if keepdims:
        return _T(tuple(1 if i in axes else d for i, d in enumerate(x.shape)), dtype)
    return _T(tuple(d for i, d in enumerate(x.shape) if i not in axes), dtype)


def _keepdims_check(attrs: dict) -> None:
    if not isinstance(attrs["keepdims"], bool):
        fail(f"keepdims must be a bool, got {attrs['keepdims']!r}")


def _samples(float_only: bool, low: float, high: float, bool_ok: bool = False) -> list[Sample]:
    dtypes = ("float32", "float64", "float16") if float_only else ("float32", "float64", "int32", "int64")
    out = [Sample([_T((2, 3, 4), d)], low=low, high=high) for d in dtypes]
    out += [Sample([_T((2, 3, 4), "float32")], {"axis": 1}, low=low, high=high),
            Sample([_T((2, 3, 4), "float64")], {"axis": (0, 2), "keepdims": True}, low=low, high=high),
            Sample([_T((2, 3, 4), "float32")], {"axis": [-1, 0]}, low=low, high=high),
            Sample([_T((2, 3), "float32")], {"keepdims": True}, low=low, high=high),
            Sample([_T(("n", 4), "float32")], {"axis": 0}, low=low, high=high),
            Sample([_T(("n", "m"), "float32")], {"axis": -1, "keepdims": True}, low=low, high=high),
            Sample([_T((3,), "float32")], {"axis": ()}, low=low, high=high),
            Sample([_T((), "float32")], low=low, high=high),
            Sample([_T((), "float32")], {"axis": (), "keepdims": True}, low=low, high=high)]
    if bool_ok:
        out += [Sample([_T((3, 4), "bool")], {"axis": 1}), Sample([_T((2, 3, 4), "bool")], {"keepdims": True})]
    return out


def _bad(float_only: bool, bool_ok: bool = False) -> list[BadSample]:
    out = [BadSample([_T((2, 3), "float32")], {"axis": 2}, r"axis 2 is out of range for a tensor of rank 2"),
           BadSample([_T((2, 3), "float32")], {"axis": (1, -1)}, r"axis \(1, -1\) repeats an axis"),
           BadSample([_T((2, 3), "float32")], {"axis": "x"}, r"axis must be an int or a sequence of ints"),
           BadSample([_T((2, 3), "float32")], {"keepdims": 1}, r"keepdims must be a bool"),
           BadSample([_T((), "float32")], {"axis": 0}, r"axis 0 is out of range for a tensor of rank 0")]
    if not bool_ok:
        out.append(BadSample([_T((2,), "bool")], {}, r"must (be numeric|have a float dtype), got bool"))
    if float_only:
        out.append(BadSample([_T((2, 3), "int32")], {}, r"must have a float dtype, got int32"))
    return out


def _reduction_rule(rule):
    def gradient(orig, call, grad):
        (x,) = call.args
        if not gu.is_float_expr(x):
            return [None]
        g = gu.unreduce(grad, x, call.attrs["axis"], call.attrs["keepdims"])
        return [rule(x, gu.unreduce(orig, x, call.attrs["axis"], call.attrs["keepdims"]), g, call)]
    return gradient


def reduction(name: str, fn, *, float_only: bool = False, widen: bool = True, low: float = -2.0,
              high: float = 2.0, doc: str = "", grad=None, lowering: str = "", decompose=None,
              samples=None, unsigned: Optional[str] = None, bool_ok: bool = False) -> Op:
    """Register ``relax.<name>(x, axis=None, keepdims=False)`` computing ``fn(x, axis=, keepdims=)``,
    with the input's dtype. ``float_only`` refuses integer inputs (mean, variance); ``widen`` computes in
    float64/int64 before casting back (integer results wrap as the native reduction does). ``grad`` is the
    gradient rule (see the module docstring); ``lowering`` names the backend's (default ``reduce:reduce_<name>``).
    A composite gives ``decompose`` instead (its gradient is the decomposition's); ``samples`` replace the
    generated ones; ``unsigned`` is the record's field (``registry.Op``). ``bool_ok`` takes bool tensors and
    gives bool, as TVM infers it: the widened sum or product cast back to bool is then ``any`` or ``all``."""
    def infer(args, attrs):
        (x,) = args
        _check_numeric(x, float_only, bool_ok)
        return reduced(x, attrs["axis"], attrs["keepdims"], x.dtype)

    def ref(x, axis, keepdims):
        out = fn(_wide(x) if widen else x, axis=axis, keepdims=keepdims)
        return np.asarray(out).astype(x.dtype)

    return register(Op(
        name=f"relax.{name}", inputs=("x",), attrs={"axis": None, "keepdims": False}, infer=infer,
        canonicalize=lambda attrs: canonical_int_tuple(attrs, "axis"), check_attrs=_keepdims_check,
        reference=ref, samples=_samples(float_only, low, high, bool_ok) if samples is None else samples,
        bad_samples=_bad(float_only, bool_ok), doc=doc, decompose=decompose, unsigned=unsigned,
        gradient=gu.through_decomposition if decompose else None if grad is None else _reduction_rule(grad),
        lowering=None if decompose else lowering or f"reduce:reduce_{name}"))


def _mean_grad(x, y, g, call):
    return gu.broadcast_like(gu.scale_by_count(g, 1.0, gu.reduce_count(x, call.attrs["axis"])), x)


def _variance_grad(x, y, g, call):
    from . import subtract

    axis = call.attrs["axis"]
    centered = subtract(x, mean(x, axis, keepdims=True))
    return gu.scale_by_count(g, 2.0, gu.reduce_count(x, axis)) * centered


def _sqrt(x):
    from . import sqrt

    return sqrt(x)


def _extremum_grad(x, y, g, call):
    """Split ``g`` evenly among the elements equal to the result (ties share it)."""
    from . import astype, equal, sum as reduce_sum

    if gu.reduce_count(x, call.attrs["axis"]) == 1:  # nothing reduced: the identity
        return gu.broadcast_like(g, x)
    hit = astype(equal(x, y), gu.sinfo_of(x).dtype)
    return hit * (g / reduce_sum(hit, call.attrs["axis"], keepdims=True))


sum = reduction("sum", np.sum, bool_ok=True,  # noqa: A001 - the op is called sum, as in TVM
                doc="Sum over ``axis``; of bool data a bool, true where any element is (TVM's ``any``).",
                grad=lambda x, y, g, call: gu.broadcast_like(g, x), unsigned="aware")
mean = reduction("mean", np.mean, float_only=True, doc="Arithmetic mean over ``axis`` (float inputs).",
                 grad=_mean_grad)
variance = reduction("variance", np.var, float_only=True, grad=_variance_grad, lowering="reduce:variance",
                     doc="Population variance ``mean((x - mean(x))**2)`` over ``axis`` (float inputs), as TVM.")
std = reduction("std", np.std, float_only=True,
                decompose=lambda call: _sqrt(variance(*call.args, **call.attrs)),
                samples=[Sample([_T((2, 3, 4), d)]) for d in ("float32", "float64", "float16")]
                + [Sample([_T((2, 3, 4), "float64")], {"axis": (0, 2), "keepdims": True}),
                   Sample([_T(("n", "m"), "float32")], {"axis": -1, "keepdims": True}),
                   Sample([_T(("n", 4), "float64")], {"axis": 0})],
                doc="Population standard deviation ``sqrt(variance(x, axis))`` over ``axis`` (float inputs), as "
                    "TVM's ``R.std``. Composite: decomposed into ``sqrt(variance)``; its gradient is the "
                    "decomposition's, infinite where the deviation is 0 (one element, or all equal).")


def _identity(x: np.ndarray, highest: bool):
    """What a maximum (``highest``: a minimum) of no elements is: the reduction's identity, -inf (+inf) or the
    integer dtype's lowest (highest), False (True) for bool, as ONNX defines ReduceMax/ReduceMin from opset 18
    (NumPy refuses; TVM starts float maxima from the lowest finite value, which is no identity)."""
    if is_floating(x.dtype):
        return x.dtype.type(np.inf if highest else -np.inf)
    if x.dtype.kind == "b":
        return highest
    info = np.iinfo(x.dtype)
    return info.max if highest else info.min


def _from_identity(fn, highest: bool):
    """``fn`` (np.max, np.min) starting from its identity, which is what an empty reduced axis gives."""
    return lambda x, axis, keepdims: fn(x, axis=axis, keepdims=keepdims, initial=_identity(x, highest))


max = reduction("max", _from_identity(np.max, highest=False), widen=False, grad=_extremum_grad,  # noqa: A001
                unsigned="aware", bool_ok=True,
                doc="Maximum over ``axis`` (of bool data: any). Its gradient is shared evenly by the elements equal to "
                    "the maximum.")
min = reduction("min", _from_identity(np.min, highest=True), widen=False, grad=_extremum_grad,  # noqa: A001
                unsigned="aware", bool_ok=True,
                doc="Minimum over ``axis`` (of bool data: all). Its gradient is shared evenly by the elements equal to "
                    "the minimum.")
def _prod_grad(x, y, g, call):
    """The product of the other elements: ``y / x`` (TVM's rule) where ``x`` is not 0; where it is, the product of
    the others' non-zero values if it is the only 0 of its reduction, else 0 (``y / x`` would be NaN there)."""
    from . import astype, equal, where, sum as reduce_sum

    axis = call.attrs["axis"]
    zero = equal(x, gu.scalar(0, x))
    one = gu.scalar(1, x)
    nonzero = where(zero, one, x)
    zeros = reduce_sum(astype(zero, gu.sinfo_of(x).dtype), axis, keepdims=True)
    others = prod(nonzero, axis, keepdims=True)  # the product without the zeros
    at_zero = where(equal(zeros, one), others, gu.scalar(0, x))
    return g * where(zero, at_zero, y / nonzero)


prod = reduction("prod", np.prod, low=0.5, high=1.5, grad=_prod_grad, unsigned="aware", bool_ok=True,
                 doc="Product over ``axis`` (of bool data: a bool, true where all elements are, as TVM's). Its "
                     "gradient is the product of the other elements (``g * y / x`` where ``x`` is not 0, as TVM's; "
                     "defined at 0 too).")


# -- argmax, argmin ----------------------------------------------------------------------------------------

def _arg_check(attrs: dict) -> None:
    if attrs["axis"] is not None and not is_int_value(attrs["axis"]):
        fail(f"axis must be None or an int, got {attrs['axis']!r}")
    _keepdims_check(attrs)


def _arg_infer(args, attrs):
    (x,) = args
    _check_numeric(x, float_only=False)
    return reduced(x, attrs["axis"], attrs["keepdims"], "int64")


def _arg_reduction(name: str, fn, doc: str) -> Op:
    def ref(x, axis, keepdims):
        return np.asarray(fn(x, axis=axis, keepdims=keepdims)).astype(np.int64)

    return register(Op(
        name=f"relax.{name}", inputs=("x",), attrs={"axis": None, "keepdims": False}, infer=_arg_infer,
        unsigned="aware",
        check_attrs=_arg_check, reference=ref, gradient=NOT_DIFFERENTIABLE, lowering=f"reduce:{name}",
        samples=[Sample([_T((3, 4), "float32")]), Sample([_T((3, 4), "float64")], {"axis": 1}),
                 Sample([_T((2, 3, 4), "int32")], {"axis": -2, "keepdims": True}, low=-50, high=50),
                 Sample([_T((2, 3), "float16")], {"keepdims": True}),
                 Sample([_T(("n", 5), "float32")], {"axis": 0}), Sample([_T((), "float32")])],
        bad_samples=[BadSample([_T((3, 4), "float32")], {"axis": (0, 1)}, r"axis must be None or an int"),
                     BadSample([_T((3, 4), "float32")], {"axis": -3}, r"axis -3 is out of range"),
                     BadSample([_T((), "float32")], {"axis": 0}, r"axis 0 is out of range for a tensor of rank 0"),
                     BadSample([_T((3,), "bool")], {}, r"must be numeric, got bool")],
        doc=doc))


argmax = _arg_reduction("argmax", np.argmax, "Index (int64) of the first maximum along ``axis`` "
                                             "(``None``: of the flattened tensor).")
argmin = _arg_reduction("argmin", np.argmin, "Index (int64) of the first minimum along ``axis`` "
                                             "(``None``: of the flattened tensor).")


# -- cumsum ---------------------------------------------------------------------------------------------------

def _cumsum_check(attrs: dict) -> None:
    if attrs["axis"] is not None and not is_int_value(attrs["axis"]):
        fail(f"axis must be None or an int, got {attrs['axis']!r}")
    if not isinstance(attrs["exclusive"], bool):
        fail(f"exclusive must be a bool, got {attrs['exclusive']!r}")


def _cumsum_infer(args, attrs):
    (x,) = args
    dtype = attrs["dtype"] or x.dtype
    if is_bool(dtype):
        fail(f"cannot sum {x.dtype} into bool; give a numeric dtype" if attrs["dtype"]
             else "input must be numeric, got bool (give dtype to count booleans)")
    if attrs["axis"] is None:  # TVM: the flattened tensor is scanned
        return _T(None if x.shape is None else (sym.product(x.shape),), dtype, 1)
    if x.ndim != -1:
        normalize_axis(attrs["axis"], x.ndim)
    return _T(x.shape, dtype, x.ndim if x.shape is None else -1)


def _cumsum_ref(x, axis, dtype, exclusive):
    dtype = to_numpy(dtype) if dtype else x.dtype
    data = _wide(x.astype(dtype))  # as TVM: cast first, then sum in the output dtype
    if axis is None:
        data, axis = data.reshape(-1), 0
    out = np.cumsum(data, axis=axis)
    return (out - data if exclusive else out).astype(dtype)


def _cumsum_grad(orig, call, grad):
    """The sum from each position to the end (the reversed running sum), as ``total - running sum``: an
    inclusive scan's adjoint subtracts the exclusive scan of ``g`` and vice versa. Cast back to the input's
    dtype; the flattened scan (``axis=None``) is reshaped back."""
    from . import cumsum as scan, subtract, sum as reduce_sum

    (x,) = call.args
    if not (gu.is_float_expr(x) and gu.is_float_expr(orig)):
        return [None]
    axis = 0 if call.attrs["axis"] is None else call.attrs["axis"]
    total = reduce_sum(grad, axis, keepdims=True)
    back = subtract(total, scan(grad, axis, exclusive=not call.attrs["exclusive"]))
    return [gu.cast_like(gu.reshape_like(back, x), x)]


cumsum = register(Op(
    name="relax.cumsum", unsigned="aware", lowering="reduce:cumsum",
    inputs=("x",), attrs={"axis": None, "dtype": None, "exclusive": False},
    infer=_cumsum_infer, canonicalize=canonical_dtype, check_attrs=_cumsum_check, reference=_cumsum_ref,
    gradient=_cumsum_grad,
    samples=[Sample([_T((2, 3), "float32")]), Sample([_T((2, 3), "float64")], {"axis": 1}),
             Sample([_T((3, 4), "int32")], {"axis": 0, "exclusive": True}, low=-9, high=9),
             Sample([_T(("n", 4), "float32")], {"axis": -1, "dtype": "float64"}),
             Sample([_T(("n", 4), "float16")], {"exclusive": True}),
             Sample([_T((5,), "bool")], {"dtype": "int32"})],
    bad_samples=[BadSample([_T((5,), "bool")], {}, r"must be numeric, got bool"),
                 BadSample([_T((2, 3), "float32")], {"axis": 2}, r"axis 2 is out of range"),
                 BadSample([_T((2, 3), "float32")], {"axis": (0, 1)}, r"axis must be None or an int"),
                 BadSample([_T((), "float32")], {"axis": 0}, r"0-d tensor"),
                 BadSample([_T((3,), "float32")], {"dtype": "bool"}, r"cannot sum float32 into bool")],
    doc="Running sum along ``axis`` (``None``: of the flattened tensor, as TVM), in ``dtype`` (default the "
        "input's; the input is cast first). ``exclusive`` sums the elements before each position only."))


# -- collapse_sum_to: the adjoint of broadcasting --------------------------------------------------------

def collapse_axes(shape, target) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Axes of ``shape`` to sum so that it becomes ``target`` (NumPy broadcasting read backwards): the
    leading axes ``target`` lacks, and the axes where ``target`` has 1 but ``shape`` does not."""
    lead = len(shape) - len(target)
    keep = tuple(i for i, t in enumerate(target) if t == 1 and shape[lead + i] != 1)
    return tuple(range(lead)), tuple(lead + i for i in keep)


def _collapse_infer(args, attrs):
    # A symbolic dim against another dim is assumed equal, as check_dims_match does (the matmul of a (2,) vector
    # and a (2 * n,) one is accepted, so its gradient collapses (2 * n,) to (2,)).
    (x,) = args
    target = attrs["shape"]
    if x.shape is not None:
        if len(target) > len(x.shape):
            fail(f"cannot collapse {fmt(x.shape)} to the longer shape {fmt(target)}")
        lead = len(x.shape) - len(target)
        if any(t != 1 and isinstance(t, int) and isinstance(d, int) and t != d
               for t, d in zip(target, x.shape[lead:])):
            fail(f"shape {fmt(target)} does not broadcast to the input's {fmt(x.shape)}")
    return _T(target, x.dtype)


def _collapse_ref(x, shape):
    lead, ones = collapse_axes(x.shape, shape)
    out = np.sum(_wide(x), axis=lead + ones, keepdims=True) if lead + ones else _wide(x)
    return out.reshape(shape).astype(x.dtype)


def _collapse_canon(attrs: dict) -> dict:
    return {**attrs, "shape": shape_attr(shape_value(attrs["shape"], "collapse_sum_to"))}


collapse_sum_to = register(Op(
    name="relax.collapse_sum_to", unsigned="aware", lowering="reduce:collapse_sum_to",
    inputs=("x",), attrs={"shape": REQUIRED}, infer=_collapse_infer,
    canonicalize=_collapse_canon, reference=_collapse_ref,
    gradient=lambda orig, call, grad: [gu.only_float(orig, gu.broadcast_like(grad, call.args[0]))],
    samples=[Sample([_T((2, 3, 4), "float32")], {"shape": (3, 1)}),
             Sample([_T((2, 3, 4), "float64")], {"shape": (4,)}),
             Sample([_T((2, 3), "float32")], {"shape": (2, 3)}),
             Sample([_T((2, 3), "float32")], {"shape": ()}),
             Sample([_T(("n", 5), "float32")], {"shape": (5,)}),
             Sample([_T(("n", 5), "int32")], {"shape": ("n", 1)})],
    bad_samples=[BadSample([_T((2, 3), "float32")], {"shape": (4,)}, r"\(4,\) does not broadcast to"),
                 BadSample([_T((3,), "float32")], {"shape": (1, 3)}, r"cannot collapse \(3,\) to the longer")],
    doc="Sum ``x`` down to ``shape``, which must broadcast to ``x``'s shape: the adjoint of broadcasting, "
        "used by gradients of broadcasting ops. Its own gradient broadcasts back."))


def _collapse_like_infer(args, attrs):
    x, target = args
    if target.shape is None:
        return _T(None, x.dtype, target.ndim)
    return _collapse_infer([x], {"shape": tuple(target.shape)})


def _collapse_like_decompose(call):
    data, target = call.args
    return collapse_sum_to(data, gu.shape_of(target, call.op.name))


collapse_sum_like = register(Op(
    name="relax.collapse_sum_like", inputs=("data", "collapse_target"), infer=_collapse_like_infer,
    reference=lambda x, target: _collapse_ref(x, target.shape), decompose=_collapse_like_decompose,
    gradient=lambda orig, call, grad: [gu.only_float(orig, gu.broadcast_like(grad, call.args[0])), None],
    no_grad_inputs=("collapse_target",),
    samples=[Sample([_T((2, 3, 4), "float32"), _T((3, 1), "float32")]),
             Sample([_T(("n", 5), "float64"), _T((5,), "float64")]),
             Sample([_T((2, 3), "int32"), _T((), "float32")]),
             Sample([_T(("n", 4), "float32"), _T(("n", 1), "int64")])],
    bad_samples=[BadSample([_T((2, 3), "float32"), _T((4,), "float32")], {}, r"\(4,\) does not broadcast to"),
                 BadSample([_T((3,), "float32"), _T((1, 3), "float32")], {}, r"cannot collapse \(3,\) to the longer")],
    doc="``collapse_sum_to(data, collapse_target's shape)`` (TVM's ``collapse_sum_like``): the sum of ``data`` down "
        "to the shape of ``collapse_target``, whose values are not read; the result has ``data``'s dtype. Composite; "
        "its gradient broadcasts back to ``data``."))
