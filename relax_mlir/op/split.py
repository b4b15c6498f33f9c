"""``split`` (of :mod:`.manipulate`'s family, re-exported there): a tensor cut along one axis into sections or at
indices, as TVM infers them; its gradient concatenates the adjoints."""

from __future__ import annotations

import functools
from typing import Optional

import numpy as np

from ..ir.expr import Call, Expr, Tuple
from ..ir.struct_info import TensorStructInfo, TupleStructInfo
from . import grad_utils as gu
from .common import fmt, int_tuple, is_int_value, normalize_axis
from .manipulate import concat
from .registry import REQUIRED, BadSample, Op, Sample, fail, register

_T = TensorStructInfo


def _split_canon(attrs: dict) -> dict:
    spec = attrs["indices_or_sections"]
    return attrs if is_int_value(spec) else dict(attrs, indices_or_sections=int_tuple(spec, "indices_or_sections"))


#: The most sections ``split`` makes from one count. Each is a tuple field (and a result of the compiled
#: function), so a 40-byte ``R.split(x, 2147483648)`` of a symbolic (or empty) axis would build billions of them.
MAX_SPLIT_SECTIONS = 1 << 16


def _split_check(attrs: dict) -> None:
    spec = attrs["indices_or_sections"]
    if isinstance(spec, int):
        if spec < 1:
            fail(f"the number of sections must be positive, got {spec}")
        if spec > MAX_SPLIT_SECTIONS:
            fail(f"{spec} sections are too many: a split makes at most {MAX_SPLIT_SECTIONS} (2**16) pieces")


def _split_whole(spec) -> bool:
    """One piece (one section, or no index): TVM's split returns the data itself then, a tensor, not a tuple."""
    return spec == 1 or spec == ()


def _split_infer(args, attrs):
    from .indexing import index_pieces, section_sizes  # the sizes of split's pieces (slices); indexing comes later

    (x,) = args
    spec = attrs["indices_or_sections"]
    if x.ndim != -1:  # a bad axis is refused even where the data comes back whole, as TVM does
        axis = normalize_axis(attrs["axis"], x.ndim)
    if _split_whole(spec):
        return x
    count = spec if isinstance(spec, int) else len(spec) + 1
    if x.ndim == -1 or x.shape is None:
        return TupleStructInfo([_T(None, x.dtype, x.ndim)] * count)
    d = x.shape[axis]
    if isinstance(spec, int):
        sizes = section_sizes(d, spec)
        if isinstance(sizes[-1], int) and sizes[-1] < 0:
            fail(f"cannot split axis {axis} of {fmt(x.shape)} (size {d}) into {spec} sections: {spec - 1} of "
                 f"ceil({d} / {spec}) = {sizes[0]} already take {d - sizes[-1]}")
    else:
        sizes = [size for _, size in index_pieces(spec, d)]
    return TupleStructInfo([_T(x.shape[:axis] + (s,) + x.shape[axis + 1:], x.dtype) for s in sizes])


def _split_ref(x, indices_or_sections, axis):
    """The pieces as slices of ``x`` (``x`` itself for one piece); sections as :func:`section_sizes` says."""
    from .indexing import index_pieces, section_sizes

    if _split_whole(indices_or_sections):
        return x
    d = x.shape[axis]
    if not isinstance(indices_or_sections, int):
        return tuple(np.take(x, np.arange(start, start + size), axis)
                     for start, size in index_pieces(indices_or_sections, d))
    sizes = section_sizes(d, indices_or_sections)
    if sizes[-1] < 0:  # a symbolic size whose value leaves no such split
        raise ValueError(f"axis {axis} of size {d} cannot be split into {indices_or_sections} sections: "
                         f"{indices_or_sections - 1} of ceil({d} / {indices_or_sections}) = {sizes[0]} already "
                         f"take {d - sizes[-1]}")
    return tuple(np.split(x, np.cumsum(sizes[:-1]).tolist(), axis))


def _split_grad(orig, call, grad):
    """The pieces' adjoints joined: concatenated where the pieces tile the axis (sections, ascending indices); each
    put back at its start and summed where indices out of order make them overlap or leave gaps."""
    (x,), spec = call.args, call.attrs["indices_or_sections"]
    if not gu.is_float_expr(x):
        return [None]
    if _split_whole(spec):
        return [grad]
    pieces = list(grad.fields) if isinstance(grad, Tuple) else list(grad)
    starts = [0] + [max(i, 0) for i in ([] if isinstance(spec, int) else spec)]
    if starts == sorted(starts):
        return [pieces[0] if len(pieces) == 1 else concat(pieces, call.attrs["axis"])]
    from . import add
    from .indexing import index_pieces
    from .registry import get_op

    shape = gu.shape_of(x, "relax.split gradient")
    axis, back = normalize_axis(call.attrs["axis"], len(shape)), get_op("relax.grad.strided_slice_backward")
    return [functools.reduce(add, [back(p, axes=(axis,), begin=(b,), end=(b + n,), shape=shape)
                                   for p, (b, n) in zip(pieces, index_pieces(spec, shape[axis]))])]


def _split_unwrapped(call: Call) -> Optional[Expr]:
    """The export's rewrite of a split into one piece: the data itself (the dialect op makes tuples)."""
    return call.args[0] if _split_whole(call.attrs["indices_or_sections"]) else None


split = register(Op(
    name="relax.split", lowering="shape:split", inputs=("x",), attrs={"indices_or_sections": REQUIRED, "axis": 0},
    unsigned="agnostic", export_rewrite=_split_unwrapped,
    infer=_split_infer, canonicalize=_split_canon, check_attrs=_split_check, gradient=_split_grad,
    reference=_split_ref,
    samples=[Sample([_T((4, 3), "float32")], {"indices_or_sections": 2}),
             Sample([_T((2, 6), "int32")], {"indices_or_sections": 3, "axis": -1}),
             Sample([_T((2, 10, 4), "float32")], {"indices_or_sections": 3, "axis": 1}),  # 4, 4, 2
             Sample([_T((5, 2), "float64")], {"indices_or_sections": 3}),  # 2, 2, 1
             Sample([_T((3,), "float32")], {"indices_or_sections": 4}),  # 1, 1, 1, 0
             Sample([_T(("n", 3), "float32")], {"indices_or_sections": 3}),  # (n + 2) // 3, ..., n - 2 * that
             Sample([_T((2, 7), "float32")], {"indices_or_sections": (2, 5), "axis": 1}),
             Sample([_T((5,), "float64")], {"indices_or_sections": (2, 9)}),
             Sample([_T(("n", 6), "float32")], {"indices_or_sections": (1, 4), "axis": 1}),
             Sample([_T(("n", 6), "float32")], {"indices_or_sections": (1,)}),
             Sample([_T(("n", 4), "float32")], {"indices_or_sections": 1}),
             Sample([_T((2, 3), "float32")], {"indices_or_sections": (), "axis": 1}),
             Sample([_T((2, 10), "float32")], {"indices_or_sections": (-2, 2, 6, 4, 8, 12, 9), "axis": 1})],
    bad_samples=[BadSample([_T((5, 3), "float32")], {"indices_or_sections": 4},
                           r"cannot split axis 0 of \(5, 3\) \(size 5\) into 4 sections: 3 of ceil\(5 / 4\) = 2 "
                           r"already take 6"),
                 BadSample([_T((5,), "float32")], {"indices_or_sections": 0}, r"must be positive, got 0"),
                 BadSample([_T((5,), "float32")], {"indices_or_sections": 2, "axis": 1}, r"axis 1 is out of range"),
                 BadSample([_T((5,), "float32")], {"indices_or_sections": 1, "axis": 1}, r"axis 1 is out of range"),
                 BadSample([_T((), "float32")], {"indices_or_sections": 1}, r"out of range for a tensor of rank 0")],
    doc="Split along ``axis`` into ``indices_or_sections`` sections (an int: as TVM, pieces of ``ceil(size / "
        "sections)``, the last one what is left, 10 in 3 is 4, 4, 2) or at the indices given (a tuple: each bound "
        "clamped into ``[0, size]``, a piece ending before its start empty, as TVM infers them: a negative index "
        "is 0); returns a tuple of tensors, or the data itself for one section or no index (TVM's struct info)."))
