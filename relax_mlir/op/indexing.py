"""Indexing: take and strided_slice (and the sizes of split's pieces, slices too). Output dtypes equal the input's;
shapes follow TVM Relax (NumPy where TVM does). Their gradients scatter the adjoint into zeros
(``relax.grad.take_backward``, ``strided_slice_backward``).
"""

from __future__ import annotations

import numpy as np

from ..ir import sym
from ..ir.struct_info import TensorStructInfo
from ..ir.sym import Dim, SymDim
from . import grad_utils as gu
from .common import (check_dims_match, index_tuple, int_tuple, is_int_value, normalize_axes, normalize_axis,
                     require_int)
from .registry import REQUIRED, BadSample, Op, Sample, fail, get_op, register

_T = TensorStructInfo
# On a symbolic axis, a static begin or end at least this large in size stands for "beyond the axis": past its end,
# or before its start (TVM users write 2**31 - 1 for "to the end"). NumPy reads it so on every shorter axis.
_BIG = 2**31 - 1
# Bounds are int64 in compiled code: larger ones mean the same as this on every axis (see _slice_canon).
_INT64_MAX = 2**63 - 1


# -- the pieces of split (relax.split is in manipulate.py) ------------------------------------------------------

def section_sizes(d: Dim, sections: int) -> list[Dim]:
    """TVM's sections of a size ``d``: ``sections - 1`` pieces of ``ceil(d / sections)``, the last one what is left
    (``10`` in 3: ``4, 4, 2``; ``n`` in 2: ``(n + 1) // 2, n - (n + 1) // 2``). Where the full pieces alone pass
    the end (``5`` in 4: ``2, 2, 2`` leave ``-1``) there is no such split."""
    piece = sym.floor_div(d + sections - 1, sections)
    return [piece] * (sections - 1) + [d - piece * (sections - 1)]


def index_pieces(spec: tuple, d: Dim) -> list[tuple[Dim, Dim]]:
    """The (start, size) of each piece of a split of a size ``d`` at the indices ``spec``, as TVM infers them: each
    bound clamped into ``[0, d]`` and a piece whose end is before its start empty, so the indices need not be
    ascending or non-negative (``[-2, 2, 6, 4]`` of 10: sizes 0, 2, 4, 0 and 6, the last from 4). A negative
    index is 0, not counted from the end as NumPy's ``split`` counts it. A symbolic ``d`` is assumed to reach past
    every index (compiled code checks the sizes of the results)."""
    bounds = [0, *(max(i, 0) for i in spec)]
    if isinstance(d, int):
        bounds = [min(b, d) for b in bounds]
    ends = bounds[1:] + [d]
    return [(b, max(e - b, 0) if isinstance(e, int) else e - b) for b, e in zip(bounds, ends)]


# -- take, strided_slice -------------------------------------------------------------------------------------

TAKE_MODES = ("fast", "wrap", "clip")


def _take_check(attrs: dict) -> None:
    if attrs["mode"] not in TAKE_MODES:
        fail(f"mode must be one of {', '.join(map(repr, TAKE_MODES))}, got {attrs['mode']!r}")


def take_indices(indices: np.ndarray, n: int, mode: str) -> np.ndarray:
    """``indices`` as positions in ``[0, n)`` under ``mode`` (the reference semantics of take and its adjoint):
    ``fast`` lets ``[-n, n)`` through, negatives counting from the end, and raises ``IndexError`` for the rest;
    ``wrap`` takes them modulo ``n``; ``clip`` clamps them to ``[0, n - 1]`` (negatives become 0)."""
    indices = np.asarray(indices, dtype=np.int64)
    if n == 0 and indices.size:
        raise IndexError(f"cannot take from an empty axis (mode {mode!r})")
    if mode == "wrap":
        return np.mod(indices, n) if indices.size else indices
    if mode == "clip":
        return np.clip(indices, 0, n - 1) if indices.size else indices
    bad = (indices < -n) | (indices >= n)
    if bad.any():
        position = int(np.flatnonzero(bad.reshape(-1))[0])
        raise IndexError(f"index {int(indices.reshape(-1)[position])} at position {position} is out of range "
                         f"for an axis of size {n}")
    return np.where(indices < 0, indices + n, indices)


def _take_ref(x, indices, axis, mode):
    n = x.size if axis is None else x.shape[axis]
    return np.take(x, take_indices(indices, n, mode), axis=axis)

def _take_infer(args, attrs):
    x, indices = args
    require_int(indices, "indices")
    axis = attrs["axis"]
    if axis is None:  # index the flattened tensor
        return _T(indices.shape, x.dtype, indices.ndim)
    if x.ndim == -1:
        return _T(None, x.dtype, -1)
    axis = normalize_axis(axis, x.ndim)
    if indices.ndim == -1:
        return _T(None, x.dtype, -1)
    if x.shape is None or indices.shape is None:
        return _T(None, x.dtype, x.ndim - 1 + indices.ndim)
    return _T(x.shape[:axis] + indices.shape + x.shape[axis + 1:], x.dtype)


def _take_make(rng, sinfos, attrs):
    """Inputs whose indices are valid for ``axis``, negatives included (they count from the end)."""
    x, ind = sinfos
    data = rng.uniform(-2, 2, size=x.shape).astype(x.dtype)
    n = int(np.prod(x.shape)) if attrs["axis"] is None else x.shape[attrs["axis"]]
    return [data, rng.integers(-n, n, size=ind.shape).astype(ind.dtype)]


take = register(Op(
    name="relax.take", lowering="shape:take", inputs=("x", "indices"), attrs={"axis": None, "mode": "fast"},
    unsigned="agnostic", index_inputs=("indices",),
    infer=_take_infer, check_attrs=_take_check, reference=_take_ref, no_grad_inputs=("indices",),
    gradient=gu.tensor_rule(lambda x, g, call: get_op("relax.grad.take_backward")(
        g, call.args[1], call.attrs["axis"], gu.shape_of(x, "relax.take gradient"), call.attrs["mode"])),
    samples=[Sample([_T((5, 3), "float32"), _T((4,), "int64")], {"axis": 0}, make=_take_make),
             Sample([_T((2, 5, 3), "float64"), _T((2, 2), "int32")], {"axis": 1}, make=_take_make),
             Sample([_T((4, 3), "float32"), _T((), "int64")], {"axis": -1}, make=_take_make),
             Sample([_T((3, 4), "float32"), _T((5,), "int64")], make=_take_make),
             Sample([_T((10, "n"), "float32"), _T(("m",), "int64")], {"axis": 0}, make=_take_make),
             Sample([_T((4, 3), "float32"), _T((6,), "int64")], {"axis": 0, "mode": "wrap"}, low=-9, high=9),
             Sample([_T((4, 3), "float64"), _T((2, 3), "int32")], {"axis": 1, "mode": "clip"}, low=-9, high=9),
             # nn.embedding: a (vocabulary, features) weight indexed by (batch, sequence) token ids
             Sample([_T((7, 4), "float32"), _T((2, 3), "int64")], {"axis": 0}, make=_take_make),
             Sample([_T(("m", 3), "float64"), _T(("b", "n"), "int32")], {"axis": 0}, make=_take_make)],
    bad_samples=[BadSample([_T((5, 3), "float32"), _T((4,), "float32")], {"axis": 0},
                           r"indices must have an integer dtype, got float32"),
                 BadSample([_T((5, 3), "float32"), _T((4,), "int64")], {"axis": 2}, r"axis 2 is out of range"),
                 BadSample([_T((), "float32"), _T((4,), "int64")], {"axis": 0}, r"0-d tensor"),
                 BadSample([_T((5, 3), "float32"), _T((4,), "int64")], {"axis": 0, "mode": "raise"},
                           r"mode must be one of 'fast', 'wrap', 'clip', got 'raise'")],
    doc="Gather along ``axis`` (``None``: of the flattened tensor) as ``numpy.take``: the output shape is "
        "``x.shape[:axis] + indices.shape + x.shape[axis+1:]``. ``mode`` says what an index outside ``[0, d)`` "
        "means, as TVM: ``fast`` (the default) lets ``[-d, d)`` through, negatives counting from the end, and any "
        "other index raises ``IndexError`` (checked in compiled code too, where TVM leaves it undefined); ``wrap`` "
        "takes indices modulo ``d``; ``clip`` clamps them to ``[0, d - 1]``."))


def _slice_canon(attrs: dict) -> dict:
    """Bounds beyond int64 (and -2**63, which compiled code reserves) become +-(2**63 - 1): NumPy's slice is the
    same on every axis (an axis has at most 2**63 - 1 elements; only a reverse slice of an axis of exactly that
    many would keep one element less)."""
    keys = ("axes",) + (("strides",) if attrs["strides"] is not None else ())
    return dict(attrs, **{key: int_tuple(attrs[key], key) for key in keys},
                **{key: tuple(i if isinstance(i, SymDim) else max(-_INT64_MAX, min(i, _INT64_MAX))
                              for i in index_tuple(attrs[key], key)) for key in ("begin", "end")})


def _slice_check(attrs: dict) -> None:
    n = len(attrs["axes"])
    if not isinstance(attrs.get("assume_inbound", True), bool):
        fail(f"assume_inbound must be a bool, got {attrs['assume_inbound']!r}")
    if attrs["strides"] is not None and 0 in attrs["strides"]:
        fail(f"strides {attrs['strides']} must be non-zero")
    lengths = {key: len(attrs[key]) for key in ("begin", "end", "strides") if attrs[key] is not None}
    if any(v != n for v in lengths.values()):
        fail(f"axes, begin, end and strides must have the same length, got axes: {n}, "
             + ", ".join(f"{k}: {v}" for k, v in lengths.items()))


def reads_beyond(i: Dim) -> bool:
    """Whether a slice bound ``i`` on a symbolic axis stands for past the axis' end (``i > 0``) or before its start:
    a static one at least 2**31 - 1 in size. The inference reads it so, which is NumPy's reading on an axis of
    fewer elements; compiled code (``backend/legalize/shape.py``) checks that the axis is that short where it
    matters, as the interpreter does."""
    return isinstance(i, int) and abs(i) >= _BIG


def _sym_slice_len(d: Dim, begin: Dim, end: Dim, stride: int) -> Dim:
    """Slice length on a symbolic axis or between symbolic bounds, assuming in-bound indices (TVM's default): a
    symbolic bound is an index from the start (a size is never negative). A bound that :func:`reads_beyond` the
    axis is clamped as Python clamps it per direction; a slice that starts past its end or stops before its start
    (in the stride's direction) is empty."""
    forward = stride > 0
    if (reads_beyond(begin) and (begin > 0) == forward) or (reads_beyond(end) and (end > 0) != forward):
        return 0

    def resolve(i: Dim) -> Dim:
        if isinstance(i, SymDim):
            return i
        if reads_beyond(i):
            return (d if forward else d - 1) if i > 0 else (0 if forward else -1)
        return d + i if i < 0 else i
    b, e = resolve(begin), resolve(end)
    diff, step = (e - b, stride) if stride > 0 else (b - e, -stride)
    if isinstance(diff, int):
        return max(0, -(-diff // step))
    return sym.floor_div(diff + step - 1, step)


def _slice_infer(args, attrs):
    """Static axes and bounds slice as NumPy does. Where an axis or a bound is symbolic, ``assume_inbound`` (the
    default here; TVM's is False) takes the bounds to lie in the axis (:func:`_sym_slice_len`); without it the length
    is NumPy's clamped one, which no size expression here writes (there is no ``min``), so the shape is unknown and
    the rank kept, as TVM infers for a static bound on a symbolic axis; compiled code computes it at run time. (The
    backward op's attributes have no ``assume_inbound``: its slice is the forward one's.)"""
    (x,) = args
    if x.ndim == -1:
        return _T(None, x.dtype, -1)
    axes = normalize_axes(attrs["axes"], x.ndim, "axes")
    if x.shape is None:
        return _T(None, x.dtype, x.ndim)
    strides = attrs["strides"] or (1,) * len(axes)
    out = list(x.shape)
    for a, b, e, s in zip(axes, attrs["begin"], attrs["end"], strides):
        d = x.shape[a]
        static = all(isinstance(v, int) for v in (d, b, e))
        if not static and not attrs.get("assume_inbound", True):
            return _T(None, x.dtype, x.ndim)
        out[a] = len(range(*slice(b, e, s).indices(d))) if static else _sym_slice_len(d, b, e, s)
    return _T(tuple(out), x.dtype)


def _slice_ref(x, axes, begin, end, strides, assume_inbound=True):
    index = [slice(None)] * x.ndim
    for a, b, e, s in zip(axes, begin, end, strides or (1,) * len(axes)):
        index[a] = slice(b, e, s)
    return x[tuple(index)].copy()


strided_slice = register(Op(
    name="relax.strided_slice", unsigned="agnostic", lowering="shape:strided_slice", inputs=("x",),
    attrs={"axes": REQUIRED, "begin": REQUIRED, "end": REQUIRED, "strides": None, "assume_inbound": True},
    infer=_slice_infer, canonicalize=_slice_canon, check_attrs=_slice_check, reference=_slice_ref,
    size_attrs=("begin", "end"),
    gradient=gu.tensor_rule(lambda x, g, call: get_op("relax.grad.strided_slice_backward")(
        g, **{k: v for k, v in call.attrs.items() if k != "assume_inbound"},
        shape=gu.shape_of(x, "relax.strided_slice gradient"))),
    samples=[Sample([_T((5, 6), "float32")], {"axes": (0,), "begin": (1,), "end": (4,)}),
             Sample([_T((5, 6), "int32")], {"axes": (1, 0), "begin": (0, -2), "end": (100, 5), "strides": (2, 1)}),
             Sample([_T((7,), "float64")], {"axes": (0,), "begin": (-1,), "end": (-100,), "strides": (-2,)}),
             Sample([_T((4, 3), "float32")], {"axes": (0,), "begin": (3,), "end": (1,)}),
             Sample([_T(("n", 6), "float32")], {"axes": (1,), "begin": (1,), "end": (5,), "strides": (3,)}),
             Sample([_T(("n", 6), "float32")], {"axes": (0,), "begin": (1,), "end": (_BIG,)}),
             Sample([_T(("n", 2), "float32")], {"axes": (0,), "begin": (-1,), "end": (-_BIG,), "strides": (-1,)}),
             Sample([_T(("m", 2), "float32")], {"axes": (0,), "begin": (-4,), "end": (-1,)}),
             # (n + 1) // 2 rows; bounds that are sizes (TVM's PrimExpr begin and end)
             Sample([_T(("n", 3), "float32")], {"axes": (0,), "begin": (0,), "end": (_BIG,), "strides": (2,)}),
             Sample([_T(("n", "m"), "float32")], {"axes": (0, 1), "begin": (1, 0), "end": ("n", "m - 1"),
                                                  "strides": (1, 2)}),
             Sample([_T(("m", 2, "h"), "float64")], {"axes": (2, 0), "begin": ("h - 4", 1), "end": (-1, "m"),
                                                     "strides": (2, 1)}),
             # without assume_inbound: NumPy's clamped length, unknown where the axis or a bound is symbolic
             Sample([_T(("n", 6), "float32")], {"axes": (0, 1), "begin": (1, 2), "end": (1000, 9),
                                                "assume_inbound": False}),
             Sample([_T((5, 6), "float32")], {"axes": (1,), "begin": (-9,), "end": (4,), "assume_inbound": False})],
    bad_samples=[BadSample([_T((5,), "float32")], {"axes": (0,), "begin": (0,), "end": (3,), "strides": (0,)},
                           r"strides \(0,\) must be non-zero"),
                 BadSample([_T((5,), "float32")], {"axes": (0,), "begin": (0, 1), "end": (3,)},
                           r"same length, got axes: 1, begin: 2, end: 1"),
                 BadSample([_T((5,), "float32")], {"axes": (1,), "begin": (0,), "end": (3,)},
                           r"axes 1 is out of range"),
                 BadSample([_T((5, 2), "float32")], {"axes": (0, 0), "begin": (0, 0), "end": (3, 3)},
                           r"repeats an axis"),
                 BadSample([_T((5,), "float32")], {"axes": (0,), "begin": (0,), "end": (3,), "assume_inbound": 1},
                           r"assume_inbound must be a bool, got 1")],
    doc="Slice ``x[begin:end:stride]`` along each of ``axes``, with Python's clamping of out-of-range "
        "indices and negative strides; on a symbolic axis the indices are assumed in bounds (as TVM's "
        "``assume_inbound``), except a static one at least 2**31 - 1 in size, which means past the end "
        "(positive) or before the start (negative) of the axis, as NumPy reads it on any axis of fewer "
        "elements: a call on a longer axis, where NumPy's slice has another length, raises ``ValueError`` "
        "(use +-(2**63 - 1) there). ``assume_inbound=False`` (TVM's default) assumes nothing: where an axis or a "
        "bound is symbolic the result's shape is unknown (its rank kept) and computed at run time, NumPy's."))


# -- dynamic_strided_slice ----------------------------------------------------------------------------------

def _dyn_slice_infer(args, attrs):
    """TVM's: ``begin``, ``end`` and ``strides`` are 1-D int64 tensors with one entry per axis of ``x`` (a static
    length); the result has ``x``'s rank and dtype, its shape known only at run time."""
    from .common import fmt

    x, *bounds = args
    for name, b in zip(("begin", "end", "strides"), bounds):
        if b.dtype != "int64":
            fail(f"{name} must have dtype int64 (as TVM's), got {b.dtype}")
        if b.ndim not in (-1, 1):
            fail(f"{name} must be a 1-D tensor (one entry per axis), got rank {b.ndim} (shape {fmt(b.shape)})")
        if x.ndim == -1:
            continue
        if b.shape is None or not isinstance(b.shape[0], int):
            fail(f"{name} must have a static length (the rank of x, {x.ndim}), got shape {fmt(b.shape)}")
        if b.shape[0] != x.ndim:
            fail(f"{name} has {b.shape[0]} entries, expected one per axis of x ({x.ndim})")
    return _T(() if x.ndim == 0 else None, x.dtype, x.ndim)  # (a 0-d x has nothing to slice)


def _dyn_slice_ref(x, begin, end, strides):
    """NumPy's slice ``x[b0:e0:s0, b1:e1:s1, ...]`` (Python's clamping of out-of-range bounds, negative ones counted
    from the end); a zero stride raises ``ValueError`` naming the axis."""
    zero = np.flatnonzero(np.asarray(strides) == 0)
    if zero.size:
        raise ValueError(f"stride 0 on axis {int(zero[0])}: strides must be non-zero")
    return x[tuple(slice(int(b), int(e), int(s)) for b, e, s in zip(begin, end, strides))].copy()


def _dyn_slice_grad(x, g, call):
    """The adjoint put back where the slice read: the same slice of the flat positions of ``x`` says where each
    element of ``g`` came from (distinct positions), and a scatter-add into zeros puts it there."""
    from . import arange, flatten, reshape, scatter_elements, zeros

    shape = gu.shape_of(x, "relax.dynamic_strided_slice gradient")
    count = sym.product(shape)
    flat = len(shape) == 1  # a 1-D x is its own flat form
    positions = arange(0, count, 1, "int64")
    read = dynamic_strided_slice(positions if flat else reshape(positions, shape), *call.args[1:])
    summed = scatter_elements(zeros((count,), x.struct_info.dtype), read if flat else flatten(read),
                              g if flat else flatten(g), 0, "add")
    return summed if flat else reshape(summed, shape)


def _dyn_slice_make(bounds):
    def make(rng, sinfos, attrs):
        x = sinfos[0]
        return [rng.uniform(-2, 2, x.shape).astype(x.dtype)] + [np.array(b, np.int64) for b in bounds]
    return make


#: (x's shape, dtype, (begin, end, strides)) of slices the tests run: clamping, negative bounds and strides, empty.
DYNAMIC_SLICE_CASES = [((5, 6), "float32", ((1, 0), (4, 6), (1, 2))),
                       ((5, 6), "int32", ((-1, -2), (-100, 100), (-2, 1))),
                       ((7,), "float64", ((9,), (-9,), (-3,))),
                       ((4, 3), "float32", ((3, 0), (1, 3), (1, 1))),
                       (("n", 3), "float32", ((0, 2), (2**62, -4), (2, -1))),
                       ((2, 3, 4), "float64", ((-2**63, 1, 3), (2**63 - 1, -1, 0), (1, 1, -2)))]


def _dyn_args(shape, dtype="float32", rank=None, bound_dtype="int64"):
    n = len(shape) if rank is None else rank
    return [_T(shape, dtype)] + [_T((n,), bound_dtype)] * 3


dynamic_strided_slice = register(Op(
    name="relax.dynamic_strided_slice", lowering="shape:dynamic_strided_slice", unsigned="agnostic",
    inputs=("x", "begin", "end", "strides"), infer=_dyn_slice_infer, reference=_dyn_slice_ref,
    gradient=gu.tensor_rule(_dyn_slice_grad), no_grad_inputs=("begin", "end", "strides"),
    # The sweeps build each sample's call alone and need its result's shape, which only a 0-d x gives; the slices
    # themselves are DYNAMIC_SLICE_CASES, which tests/py/op/test_tvm_ops_s19.py runs (compiled behind a reduction).
    samples=[Sample(_dyn_args(()), make=_dyn_slice_make([(), (), ()])),
             Sample(_dyn_args((), "int32"), make=_dyn_slice_make([(), (), ()]))],
    bad_samples=[BadSample(_dyn_args((5, 6), bound_dtype="int32"), {}, r"begin must have dtype int64"),
                 BadSample(_dyn_args((5, 6), rank=3), {}, r"begin has 3 entries, expected one per axis of x \(2\)"),
                 BadSample([_T((5,), "float32"), _T(("k",), "int64"), _T((1,), "int64"), _T((1,), "int64")], {},
                           r"begin must have a static length"),
                 BadSample([_T((5,), "float32"), _T((1, 1), "int64"), _T((1,), "int64"), _T((1,), "int64")], {},
                           r"begin must be a 1-D tensor")],
    doc="NumPy's slice ``x[b0:e0:s0, ...]`` with the bounds and strides given as 1-D int64 tensors, one entry per "
        "axis, known only at run time (TVM's ``dynamic_strided_slice``): bounds out of range clamped as Python's, "
        "negative ones counted from the end, negative strides reversing; a zero stride raises ``ValueError``. The "
        "result has ``x``'s rank and an unknown shape. Gradient: the adjoint scattered back where the slice read."))


# -- gather_nd ------------------------------------------------------------------------------------------------------

def _gather_nd_check(attrs: dict) -> None:
    if not (is_int_value(attrs["batch_dims"]) and attrs["batch_dims"] >= 0):
        fail(f"batch_dims must be a non-negative int, got {attrs['batch_dims']!r}")


def _gather_nd_infer(args, attrs):
    data, indices = args
    require_int(indices, "indices")
    b = attrs["batch_dims"]
    if data.ndim == -1 or indices.ndim == -1:
        return _T(None, data.dtype, -1)
    if b > data.ndim or b > indices.ndim - 1:
        fail(f"batch_dims {b} must be at most data's rank ({data.ndim}) and indices' rank - 1 ({indices.ndim - 1})")
    if indices.shape is None or not isinstance(indices.shape[-1], int):
        return _T(None, data.dtype, -1)  # (as TVM: the rank depends on how many axes an index names)
    depth = indices.shape[-1]
    if depth > data.ndim - b:
        fail(f"the last dim of indices ({depth}: the axes each index names) must be at most data's rank minus "
             f"batch_dims ({data.ndim} - {b}), got indices {indices.shape} for data {data.shape or data.ndim}")
    if data.shape is None:
        return _T(None, data.dtype, indices.ndim - 1 + data.ndim - depth - b)
    for i in range(b):
        check_dims_match(indices.shape[i], data.shape[i], f"batch dim {i} of indices ({indices.shape[i]}) differs "
                                                          f"from data's ({data.shape[i]})")
    return _T(tuple(indices.shape[:-1]) + tuple(data.shape[b + depth:]), data.dtype)


def _gather_nd_ref(data, indices, batch_dims):
    """Each index (the last axis of ``indices``) picks ``data[batch..., i0, ..., ik-1]``; negatives count from the
    end, anything else out of range raises ``IndexError`` (``take_indices``'s ``fast`` mode, per axis)."""
    b, depth = batch_dims, indices.shape[-1]
    batches = int(np.prod(data.shape[:b], dtype=np.int64))
    flat = data.reshape((batches,) + data.shape[b:])
    rows = indices.astype(np.int64).reshape((batches, int(np.prod(indices.shape[b:-1], dtype=np.int64)), depth))
    cols = [take_indices(rows[..., j], data.shape[b + j], "fast") for j in range(depth)]
    picked = flat[(np.broadcast_to(np.arange(batches)[:, None], rows.shape[:2]),) + tuple(cols)]
    return np.ascontiguousarray(picked).reshape(indices.shape[:-1] + data.shape[b + depth:])  # (0-d stays 0-d)


def _size_tensor(d: Dim):
    """A size as an int64 tensor: a 0-d constant, or ``arange(d, d + 1)`` (one element) for a symbolic one."""
    from ..ir.expr import const

    return const(d, "int64") if isinstance(d, int) else get_op("relax.arange")(d, d + 1, dtype="int64")


def _gather_nd_decompose(call):
    """``take`` of ``data`` with its batch and indexed axes merged into one, at the row-major position of each index;
    each indexed axis' entries are first read from that axis' positions (:func:`_axis_positions`), which counts
    negatives from the end and refuses one out of range in the user's terms."""
    op = get_op
    data, indices = call.args
    b = call.attrs["batch_dims"]
    shape, ishape = gu.shape_of(data, call.op.name), gu.shape_of(indices, call.op.name)
    depth = ishape[-1]
    idx = indices if gu.sinfo_of(indices).dtype == "int64" else op("relax.astype")(indices, "int64")
    flat = None
    for j in range(depth):
        c = _axis_positions(op("relax.take")(idx, _size_tensor(j), axis=-1), shape, b + j, tuple(ishape[:-1]))
        stride = sym.product(shape[b + j + 1:b + depth])
        term = c if stride == 1 else op("relax.multiply")(c, _size_tensor(stride))
        flat = term if flat is None else op("relax.add")(flat, term)
    batches, block = sym.product(shape[:b]), sym.product(shape[b:b + depth])
    if b:
        offsets = op("relax.multiply")(op("relax.arange")(0, batches, dtype="int64"), _size_tensor(block))
        if b > 1 or len(ishape) - 1 > b:  # (one batch axis and no index axes: already in place)
            offsets = op("relax.reshape")(offsets, tuple(shape[:b]) + (1,) * (len(ishape) - 1 - b))
        flat = offsets if flat is None else op("relax.add")(flat, offsets)
    if flat is None:  # no batch dims, no axes named: every index picks all of data
        flat = op("relax.zeros")(tuple(ishape[:-1]), "int64")
    rows = op("relax.reshape")(data, (batches * block,) + tuple(shape[b + depth:]))
    return op("relax.take")(rows, flat, axis=0)


def _axis_positions(c, shape, axis: int, cshape: tuple):
    """``c`` (entries for ``data``'s axis ``axis``) as positions in ``[0, size)``, read with ``take`` from the axis'
    positions laid along that same axis (``arange(size)`` shaped ``(1, ..., size, ..., 1)``), so that compiled
    code refuses an entry out of range as the user wrote it: its value, its position and ``data``'s axis and size."""
    op = get_op
    rank = len(shape)
    positions = op("relax.arange")(0, shape[axis], dtype="int64")
    if rank == 1:
        return op("relax.take")(positions, c, axis=0)
    laid = op("relax.reshape")(positions, (1,) * axis + (shape[axis],) + (1,) * (rank - axis - 1))
    return op("relax.reshape")(op("relax.take")(laid, c, axis=axis), cshape)


def _gather_nd_make(rng, sinfos, attrs):
    """Indices in ``[-size, size)`` of each axis they name, negatives included."""
    data, ind = sinfos
    b, depth = attrs["batch_dims"], ind.shape[-1]
    cols = [rng.integers(-n, n, size=ind.shape[:-1]) for n in data.shape[b:b + depth]]
    idx = np.stack(cols, axis=-1) if cols else np.zeros(ind.shape, np.int64)
    return [rng.uniform(-2, 2, size=data.shape).astype(data.dtype), idx.astype(ind.dtype)]


gather_nd = register(Op(
    name="relax.gather_nd", inputs=("data", "indices"), attrs={"batch_dims": 0}, infer=_gather_nd_infer,
    check_attrs=_gather_nd_check, reference=_gather_nd_ref, decompose=_gather_nd_decompose,
    gradient=gu.through_decomposition, no_grad_inputs=("indices",),
    samples=[Sample([_T((2, 2), "float32"), _T((2, 2), "int64")], make=_gather_nd_make),
             Sample([_T((2, 2, 2), "float32"), _T((2, 1), "int64")], {"batch_dims": 1}, make=_gather_nd_make),
             Sample([_T((3, 4, 5), "float64"), _T((2, 3, 2), "int32")], make=_gather_nd_make),
             Sample([_T((2, 3, 4, 5), "float32"), _T((2, 3, 6, 1), "int64")], {"batch_dims": 2},
                    make=_gather_nd_make),
             Sample([_T(("n", 4, 3), "float32"), _T(("n", 5, 2), "int64")], {"batch_dims": 1}, make=_gather_nd_make),
             Sample([_T((3, 4), "int32"), _T((5, 1), "int64")], make=_gather_nd_make),
             Sample([_T((3, 4), "float32"), _T((2, 0), "int64")], make=_gather_nd_make)],
    bad_samples=[BadSample([_T((3, 4), "float32"), _T((2, 3), "int64")], {},
                           r"the last dim of indices \(3: the axes each index names\) must be at most data's rank "
                           r"minus batch_dims \(2 - 0\)"),
                 BadSample([_T((3, 4), "float32"), _T((2, 1), "float32")], {}, r"indices must have an integer dtype"),
                 BadSample([_T((3, 4), "float32"), _T((3, 1), "int64")], {"batch_dims": 2},
                           r"batch_dims 2 must be at most data's rank \(2\) and indices' rank - 1 \(1\)"),
                 BadSample([_T((3, 4), "float32"), _T((2, 1), "int64")], {"batch_dims": 1},
                           r"batch dim 0 of indices \(2\) differs from data's \(3\)"),
                 BadSample([_T((3, 4), "float32"), _T((2, 1), "int64")], {"batch_dims": -1},
                           r"batch_dims must be a non-negative int")],
    doc="ONNX's GatherND, TVM's ``gather_nd(data, indices, batch_dims=0)``: the last axis of ``indices`` holds "
        "``k`` positions into the ``k`` axes of ``data`` after its ``batch_dims`` leading ones (which ``indices`` "
        "shares), and each picks what lies there: the result is ``indices.shape[:-1] + data.shape[batch_dims + "
        "k:]``. A negative position counts from the end; one out of range raises ``IndexError`` (compiled: by a "
        "``take`` along the axis it indexes, which names it, its position and the axis). Any integer indices (TVM "
        "takes int64 only). Composite: a ``take`` of ``data`` with those axes merged; its gradient scatters the "
        "adjoint back (``take``'s rule)."))
