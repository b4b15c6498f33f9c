"""Linear algebra: ``matmul`` with NumPy's semantics (1-D operands, batched broadcasting).

Its gradient is ``[g @ x2^T, x1^T @ g]`` on the last two axes, summed over broadcast batch dims; a 1-D
operand is the row or column NumPy makes of it. With ``out_dtype`` the gradient is computed in the output's
dtype and cast back to each operand's.
"""

from __future__ import annotations

import numpy as np

from ..ir.dtype import is_bool, is_float, to_numpy
from ..ir.struct_info import TensorStructInfo
from . import grad_utils as gu
from .common import broadcast_shapes, canonical_dtype, check_dims_match, fmt, require_same_dtype
from .registry import BadSample, InferError, Op, Sample, fail, get_op, register

_T = TensorStructInfo


def _matmul_infer(args, attrs):
    a, b = args
    if is_bool(a.dtype) or is_bool(b.dtype):
        fail(f"operands must be numeric, got x1: {a.dtype}, x2: {b.dtype}")
    # As TVM: without out_dtype the operands must agree; with it they may differ (mixed precision).
    dtype = attrs["out_dtype"] or require_same_dtype([a, b], ["x1", "x2"])
    if 0 in (a.ndim, b.ndim):
        fail(f"operands must have rank >= 1, got x1 rank {a.ndim}, x2 rank {b.ndim}")
    if -1 in (a.ndim, b.ndim):
        return _T(None, dtype, -1)
    # NumPy: a 1-D x1 is a row (1, k), a 1-D x2 a column (k, 1); the added dim is dropped again.
    out_ndim = max(a.ndim, b.ndim, 2) - (a.ndim == 1) - (b.ndim == 1)
    if a.shape is None or b.shape is None:
        return _T(None, dtype, out_ndim)
    sa = (1,) + a.shape if a.ndim == 1 else a.shape
    sb = b.shape + (1,) if b.ndim == 1 else b.shape
    check_dims_match(sa[-1], sb[-2], f"reduction dims differ: x1 {fmt(a.shape)} has {sa[-1]}, "
                                     f"x2 {fmt(b.shape)} has {sb[-2]}")
    try:
        batch = broadcast_shapes(sa[:-2], sb[:-2])
    except InferError as exc:
        fail(f"batch dims of x1 {fmt(a.shape)} and x2 {fmt(b.shape)} do not broadcast: {exc}")
    rows = (sa[-2],) if a.ndim > 1 else ()
    cols = (sb[-1],) if b.ndim > 1 else ()
    return _T(batch + rows + cols, dtype)


def _matmul_ref(x1, x2, out_dtype):
    out = to_numpy(out_dtype) if out_dtype else x1.dtype
    # Accumulate wide; integer results wrap to the output width as native integer arithmetic does.
    wide = np.float64 if is_float(str(x1.dtype)) or is_float(str(x2.dtype)) else np.int64
    return np.asarray(np.matmul(x1.astype(wide), x2.astype(wide))).astype(out)


def _matmul_vjp(a, b, g):
    """The adjoints of ``a @ b`` before the batch dims are summed away (operands of ``g``'s dtype)."""
    from . import expand_dims, multiply

    na, nb = gu.sinfo_of(a).ndim, gu.sinfo_of(b).ndim
    if na == 1 and nb == 1:  # dot product: g is 0-d
        return multiply(g, b), multiply(g, a)
    if na == 1:  # (k,) @ (..., k, m) -> (..., m): an outer product for b
        row = expand_dims(g, -2)  # one expression object for both uses, should the builder share it
        da = matmul(b, g) if nb == 2 else matmul(row, gu.transpose_last_two(b))
        return da, multiply(expand_dims(a, 1), row)
    if nb == 1:  # (..., n, k) @ (k,) -> (..., n)
        db = matmul(g, a) if na == 2 else matmul(expand_dims(g, -2), a)
        return multiply(expand_dims(g, -1), b), db
    return matmul(g, gu.transpose_last_two(b)), matmul(gu.transpose_last_two(a), g)


def _matmul_grad(orig, call, grad):
    a, b = call.args
    if not gu.is_float_expr(orig):
        return [None, None]
    if -1 in (gu.sinfo_of(a).ndim, gu.sinfo_of(b).ndim):
        raise gu.ShapeNeeded("relax.matmul gradient", f"the operands' ranks must be known, got {a.struct_info} "
                             f"and {b.struct_info}", "rank")
    grads = _matmul_vjp(gu.cast_like(a, grad), gu.cast_like(b, grad), grad)
    return [gu.cast_like(gu.unbroadcast(d, x.struct_info), x) if gu.is_float_expr(x) else None
            for x, d in zip((a, b), grads)]


matmul = register(Op(
    name="relax.matmul", lowering="linalg:matmul", inputs=("x1", "x2"), attrs={"out_dtype": None}, infer=_matmul_infer,
    unsigned="aware",
    canonicalize=lambda attrs: canonical_dtype(attrs, "out_dtype"), reference=_matmul_ref, gradient=_matmul_grad,
    samples=[Sample([_T((2, 3), "float32"), _T((3, 4), "float32")]),
             Sample([_T((2, 3), "float64"), _T((3, 4), "float64")]),
             Sample([_T((2, 3), "float16"), _T((3, 4), "float16")]),
             Sample([_T((2, 3), "int32"), _T((3, 4), "int32")], low=-5, high=5),
             Sample([_T(("n", 784), "float32"), _T((784, 128), "float32")]),
             Sample([_T((5, 2, 3), "float32"), _T((3, 4), "float32")]),
             Sample([_T((2, 1, 2, 3), "float32"), _T((5, 3, 4), "float32")]),
             Sample([_T((3,), "float32"), _T((3, 4), "float32")]),
             Sample([_T((2, 2, 3), "float32"), _T((3,), "float32")]),
             Sample([_T((3,), "float32"), _T((3,), "float32")]),
             Sample([_T(("b", "n", "k"), "float32"), _T(("k", "m"), "float32")]),
             Sample([_T(("n", 3), "float16"), _T((3, 2), "float16")], {"out_dtype": "float32"}),
             Sample([_T((2, 3), "int32"), _T((3, 2), "float32")], {"out_dtype": "float32"}, low=-5, high=5)],
    bad_samples=[BadSample([_T((2, 3), "float32"), _T((4, 5), "float32")], {},
                           r"reduction dims differ: x1 \(2, 3\) has 3, x2 \(4, 5\) has 4"),
                 BadSample([_T((3,), "float32"), _T((4,), "float32")], {},
                           r"reduction dims differ: x1 \(3,\) has 3, x2 \(4,\) has 4"),
                 BadSample([_T((2, 2, 3), "float32"), _T((3, 3, 4), "float32")], {},
                           r"batch dims of x1 \(2, 2, 3\) and x2 \(3, 3, 4\) do not broadcast"),
                 BadSample([_T((2, 3), "float32"), _T((3, 4), "int32")], {}, r"same dtype, got x1: float32"),
                 BadSample([_T((), "float32"), _T((3,), "float32")], {}, r"rank >= 1, got x1 rank 0"),
                 BadSample([_T((2, 3), "bool"), _T((3, 2), "bool")], {}, r"must be numeric"),
                 BadSample([_T((2, 3), "float32"), _T((3, 2), "float32")], {"out_dtype": "f32"},
                           r"unknown dtype 'f32'")],
    doc="Matrix product with NumPy's semantics: leading (batch) dims broadcast, a 1-D ``x1`` is a row and a "
        "1-D ``x2`` a column whose added dim is dropped. ``out_dtype`` names the result's dtype (then the "
        "operands may differ), else both operands' dtype. ``R.matmul(x: (n, 784), w: (784, 128))`` is "
        "``(n, 128)``."))


# -- linear: TVM's sugar for matmul(data, permute_dims(weight)) + bias -----------------------------------------

def _transposed(w: TensorStructInfo) -> TensorStructInfo:
    """``permute_dims(w)``'s struct info: every axis reversed (a 1-D weight is itself)."""
    return w if w.shape is None else _T(tuple(reversed(w.shape)), w.dtype)


def _linear_infer(args, attrs):
    data, weight, *bias = args
    out = _matmul_infer([data, _transposed(weight)], attrs)
    return out if not bias else get_op("relax.add").infer([out, bias[0]], {})


def _linear_ref(data, weight, bias=None, out_dtype=None):
    out = _matmul_ref(data, weight.T, out_dtype)
    return out if bias is None else np.asarray(out + bias).astype(out.dtype)


def _linear_decompose(call):
    data, weight, *bias = call.args
    w = weight if gu.sinfo_of(weight).ndim == 1 else get_op("relax.permute_dims")(weight)
    out = matmul(data, w, call.attrs["out_dtype"])
    return out if not bias else get_op("relax.add")(out, bias[0])


linear = register(Op(
    name="relax.linear", inputs=("data", "weight", "bias"), num_optional=1, attrs={"out_dtype": None},
    infer=_linear_infer, canonicalize=lambda attrs: canonical_dtype(attrs, "out_dtype"), reference=_linear_ref,
    decompose=_linear_decompose, gradient=gu.through_decomposition,
    samples=[Sample([_T((2, 3, 4), "float32"), _T((5, 4), "float32"), _T((5,), "float32")]),
             Sample([_T((2, 3, 4), "float32"), _T((5, 4), "float32"), _T((), "float32")]),
             Sample([_T((2, 3, 4), "float64"), _T((4,), "float64"), _T((), "float64")]),
             Sample([_T(("n", 4), "float32"), _T((3, 4), "float32")]),
             Sample([_T((2, 4), "float16"), _T((3, 4), "float16")], {"out_dtype": "float32"})],
    bad_samples=[BadSample([_T((2, 3, 4), "float32"), _T((4,), "float32"), _T((5,), "float32")], {},
                           r"relax.linear: cannot broadcast shapes \(2, 3\) and \(5,\)"),
                 BadSample([_T((2, 4), "float32"), _T((3, 5), "float32")], {},
                           r"reduction dims differ: x1 \(2, 4\) has 4, x2 \(5, 3\) has 5")],
    doc="``data @ weight^T + bias`` (TVM's ``linear(data, weight, bias=None, out_dtype=None)``, PyTorch's "
        "``nn.functional.linear``): ``permute_dims(weight)`` reverses its axes, so a 1-D weight is a vector; the "
        "bias broadcasts against the product. Composite (TVM writes these ops in its place): ``matmul`` of the "
        "transposed weight, then ``add``; its gradient is theirs."))
