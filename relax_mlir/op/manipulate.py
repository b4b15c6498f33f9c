"""Shape manipulation: reshape, permute_dims, expand_dims, squeeze, flatten, broadcast_to, concat (split in
:mod:`.split`; batch_flatten, meshgrid, reverse_sequence in :mod:`.grid`; take, strided_slice in :mod:`.indexing`).
Output dtypes equal the input's; shapes follow TVM Relax (NumPy where TVM does).

Gradients move the adjoint back: reshaped, squeezed, inversely permuted, summed over broadcast axes,
sliced at concat's boundaries, concatenated for split.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir import sym
from ..ir.expr import Call, Expr, ShapeExpr, Tuple, TupleGetItem, Var, const
from ..ir.struct_info import ShapeStructInfo, TensorStructInfo
from . import grad_utils as gu
from .common import (canonical_int_tuple, check_dims_match, fmt, normalize_axes,
                     normalize_axis, require_same_dtype, shape_attr)
from .registry import REQUIRED, BadSample, Op, Sample, fail, register

_T = TensorStructInfo


def _tensor_like(x: TensorStructInfo, shape: Optional[tuple], ndim: int) -> TensorStructInfo:
    return _T(shape, x.dtype, ndim if shape is None else -1)


# -- reshape ------------------------------------------------------------------------------------------

def _reshape_canon(attrs: dict) -> dict:
    return dict(attrs, shape=shape_attr(shape_value(attrs["shape"], "reshape"), allow_infer=True))


def shape_value(shape, op_name: str):
    """TVM's ops take a shape as a Relax value too (``reshape``, ``broadcast_to``, ``zeros``, ``full``,
    ``collapse_sum_to``): a variable of shape struct info stands for the dims that struct info gives
    (``s: R.Shape(["n", "m"])``: ``(n, m)``, sizes ``s`` defines); a shape known only by its length has none to
    build the op's result from when the program is built, and is refused. (A ``ShapeExpr`` is read by
    ``shape_attr``.)"""
    if not isinstance(shape, Expr) or isinstance(shape, ShapeExpr):
        return shape
    sinfo = shape.struct_info
    if isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
        return sinfo.values
    fail(f"shape {shape.name_hint if isinstance(shape, Var) else type(shape).__name__} is {sinfo}: {op_name} needs "
         "its dims (a variable of R.Shape([\"n\", \"m\"]), R.shape([...]) or a tuple)")


def _reshape_check(attrs: dict) -> None:
    if sum(1 for d in attrs["shape"] if isinstance(d, int) and d == -1) > 1:
        fail(f"shape {fmt(attrs['shape'])} has more than one -1")


def _reshape_infer(args, attrs):
    (x,) = args
    target = attrs["shape"]
    infer_at = [i for i, d in enumerate(target) if isinstance(d, int) and d == -1]
    if x.shape is None:
        return _tensor_like(x, None if infer_at else target, len(target))
    size = sym.product(x.shape)
    if not infer_at:
        # As TVM, only sizes that provably differ are refused; (3, 28, 28) -> (n, 784) holds when n == 3.
        if isinstance(sym.product(target) - size, int) and sym.product(target) != size:
            fail(f"cannot reshape {fmt(x.shape)} ({size} elements) to {fmt(target)} "
                 f"({sym.product(target)} elements)")
        return _T(target, x.dtype)
    known = sym.product(d for i, d in enumerate(target) if i != infer_at[0])
    inferred = _inferred_dim(size, known)
    shape = None if inferred is None else tuple(inferred if i == infer_at[0] else d for i, d in enumerate(target))
    if shape is None or isinstance(sym.product(shape) - size, int) and sym.product(shape) != size:
        fail(f"cannot reshape {fmt(x.shape)} ({size} elements) to {fmt(target)}: "
             f"{size} is not an exact multiple of {known}")
    return _T(shape, x.dtype)


def _inferred_dim(size, known):
    """The -1 dim: ``size / known`` where it divides exactly, else TVM's floor quotient ``size // known`` when
    ``known`` is an int times a product of sizes dividing ``size`` (``(a, b, c, d)`` to ``(2, -1, a)``: ``(b * c *
    d) // 2``; compiled code and the interpreter check the element count at run time); None where no size
    expression holds it (a divisor that is a sum or a size ``size`` lacks, zero elements beside the -1)."""
    exact = sym.exact_div(size, known)
    if exact is not None or isinstance(size, int) or known == 0:
        return exact
    if isinstance(known, int):
        return sym.floor_div(size, known)
    if len(known.terms) != 1:
        return None
    coefficient = known.terms[0][1]
    quotient = sym.exact_div(size, sym.exact_div(known, coefficient))
    return None if quotient is None else sym.floor_div(quotient, coefficient)


def _reshape_bind_inferred(sinfo, attrs: dict, sizes: dict) -> None:
    """The interpreter's ``check_sizes`` hook, which refuses nothing: it puts the inferred size, evaluated, in place
    of the -1 in the bound attributes the interpreter then hands the reference. Compiled code reshapes to the
    inferred shape, and NumPy cannot resolve a -1 beside a 0 (``(n, m, 2)`` to ``(-1, m)`` at ``m = 0`` is ``(2 * n,
    0)``, which only the inference knows)."""
    infer_at = [i for i, d in enumerate(attrs["shape"]) if isinstance(d, int) and d == -1]
    if not infer_at or not isinstance(sinfo, _T) or sinfo.shape is None:
        return None
    inferred = sinfo.shape[infer_at[0]]
    if isinstance(inferred, sym.SymDim) and not inferred.free_vars() <= sizes.keys():
        return None
    shape = list(attrs["shape"])
    shape[infer_at[0]] = sym.evaluate(inferred, sizes)
    attrs["shape"] = tuple(shape)
    return None


reshape = register(Op(
    name="relax.reshape", lowering="shape:reshape", inputs=("x",), attrs={"shape": REQUIRED}, infer=_reshape_infer,
    unsigned="agnostic", check_sizes=_reshape_bind_inferred,
    canonicalize=_reshape_canon, check_attrs=_reshape_check, reference=lambda x, shape: x.reshape(shape),
    gradient=gu.tensor_rule(lambda x, g, call: gu.reshape_like(g, x)),
    samples=[Sample([_T((2, 3), "float32")], {"shape": (3, 2)}),
             Sample([_T((2, 3, 4), "int32")], {"shape": (-1, 4)}),
             Sample([_T(("n", 28, 28), "float32")], {"shape": (-1, 784)}),
             Sample([_T(("n", 28, 28), "float64")], {"shape": (-1, 28, 2, 14)}),
             Sample([_T(("n", 6), "float32")], {"shape": (-1, 2, 3)}),
             Sample([_T(("n", "m"), "float32")], {"shape": (-1,)}),
             Sample([_T((), "float32")], {"shape": (1, 1)}),
             Sample([_T((4,), "bool")], {"shape": [2, 2]}),
             Sample([_T(("n", 6), "float32")], {"shape": ("n", 2, 3)}),
             Sample([_T(("n", 2, 3), "int32")], {"shape": ("n", -1)}),
             Sample([_T(("n", "m"), "float32")], {"shape": ("m", "n")}),
             Sample([_T((2, 3, 4), "float32")], {"shape": ("k", 12)}, sizes={"k": 2}),
             Sample([_T(("k", "c", "h", "w"), "float32")], {"shape": (2, -1, "k")}),  # (c * h * w) // 2, as TVM
             Sample([_T(("k", 6), "float32")], {"shape": (-1, 4)})],  # (3 * k) // 2: k even at run time
    bad_samples=[BadSample([_T((2, 3), "float32")], {"shape": (4, 2)},
                           r"cannot reshape \(2, 3\) \(6 elements\) to \(4, 2\) \(8 elements\)"),
                 BadSample([_T((2, 3), "float32")], {"shape": (-1, 4)},
                           r"cannot reshape \(2, 3\) \(6 elements\) to \(-1, 4\): 6 is not an exact multiple of 4"),
                 BadSample([_T(("n", 4), "float32")], {"shape": (-1, "m")},
                           r"cannot reshape \(n, 4\) \(4 \* n elements\) to \(-1, m\): .* not an exact multiple of m"),
                 BadSample([_T((2, 3), "float32")], {"shape": (-1, -1)}, r"more than one -1"),
                 BadSample([_T((2, 3), "float32")], {"shape": (-2, -3)}, r"negative dimension -2"),
                 BadSample([_T((2, 3), "float32")], {"shape": 6}, r"must be a sequence of dimensions")],
    doc="Reshape to ``shape`` (same number of elements); one dim may be -1 and is inferred, symbolically "
        "too: ``reshape(x: (n, 28, 28), (-1, 784))`` has shape ``(n, 784)``. Where the other dims do not divide "
        "the count exactly, the -1 is TVM's floor quotient (``(a, b, c, d)`` to ``(2, -1, a)``: ``(b * c * d) // "
        "2``) and the element count is checked at run time; a divisor with no such form (a sum, a size the input "
        "lacks) is refused."))


# -- permute_dims, expand_dims, squeeze, flatten -------------------------------------------------------

def _permute_infer(args, attrs):
    (x,) = args
    axes = attrs["axes"]
    if x.ndim == -1:
        return _T(None, x.dtype, -1 if axes is None else len(axes))
    if axes is None:
        axes = tuple(reversed(range(x.ndim)))
    elif len(axes) != x.ndim:
        fail(f"axes {axes} is not a permutation of the {x.ndim} axes of {fmt(x.shape)}")
    axes = normalize_axes(axes, x.ndim, "axes")
    return _tensor_like(x, None if x.shape is None else tuple(x.shape[a] for a in axes), x.ndim)


def _permute_grad(x, g, call):
    inverse = call.attrs["axes"] and gu.inverse_permutation(call.attrs["axes"])  # None (reverse) is self-inverse
    return g if inverse == tuple(range(gu.sinfo_of(x).ndim)) else permute_dims(g, inverse)


permute_dims = register(Op(
    name="relax.permute_dims", lowering="shape:permute_dims", inputs=("x",), attrs={"axes": None}, infer=_permute_infer,
    unsigned="agnostic",
    canonicalize=lambda attrs: canonical_int_tuple(attrs, "axes"),
    reference=lambda x, axes: np.transpose(x, axes).copy(), gradient=gu.tensor_rule(_permute_grad),
    samples=[Sample([_T((2, 3), "float32")]),
             Sample([_T((2, 3, 4), "float64")], {"axes": (1, 0, 2)}),
             Sample([_T(("n", 3, 4), "int32")], {"axes": (2, -3, 1)}),
             Sample([_T((), "float32")], {"axes": ()})],
    bad_samples=[BadSample([_T((2, 3, 4), "float32")], {"axes": (0, 1)}, r"axes \(0, 1\) is not a permutation"),
                 BadSample([_T((2, 3), "float32")], {"axes": (0, 0)}, r"repeats an axis"),
                 BadSample([_T((2, 3), "float32")], {"axes": (0, 2)}, r"axes 2 is out of range")],
    doc="Permute the axes: output axis ``i`` is input axis ``axes[i]``; ``axes=None`` reverses them."))


def _expand_dims_infer(args, attrs):
    (x,) = args
    if x.ndim == -1:
        return _T(None, x.dtype, -1)
    out_ndim = x.ndim + len(attrs["axis"])
    axes = normalize_axes(attrs["axis"], out_ndim)
    if x.shape is None:
        return _T(None, x.dtype, out_ndim)
    rest = iter(x.shape)
    return _T(tuple(1 if i in axes else next(rest) for i in range(out_ndim)), x.dtype)


expand_dims = register(Op(
    name="relax.expand_dims", unsigned="agnostic", lowering="shape:expand_dims",
    inputs=("x",), attrs={"axis": REQUIRED}, infer=_expand_dims_infer,
    canonicalize=lambda attrs: canonical_int_tuple(attrs, "axis"),
    reference=lambda x, axis: np.expand_dims(x, axis),
    gradient=gu.tensor_rule(lambda x, g, call: squeeze(g, call.attrs["axis"])),
    samples=[Sample([_T((2, 3), "float32")], {"axis": 0}),
             Sample([_T((2, 3), "int64")], {"axis": -1}),
             Sample([_T(("n", 3), "float32")], {"axis": (0, 3)}),
             Sample([_T((), "float16")], {"axis": (0, 1)})],
    bad_samples=[BadSample([_T((2, 3), "float32")], {"axis": 3}, r"axis 3 is out of range .* rank 3"),
                 BadSample([_T((2, 3), "float32")], {"axis": (1, -3)}, r"repeats an axis"),
                 BadSample([_T((2, 3), "float32")], {"axis": 1.5}, r"axis must be an int or a sequence")],
    doc="Insert size-1 axes at the positions ``axis`` (an int or a tuple), counted in the output's rank."))


def _squeeze_infer(args, attrs):
    """As current TVM (and PyTorch): an axis of ``axis`` whose static size is not 1 stays (its squeeze is a no-op);
    a symbolic one is assumed to be 1 (compiled code checks it, the interpreter as it runs)."""
    (x,) = args
    axis = attrs["axis"]
    if x.ndim == -1 or (axis is None and (x.shape is None or not all(isinstance(d, int) for d in x.shape))):
        # As in TVM: which symbolic dims are 1 is only known at run time.
        return _T(None, x.dtype, -1)
    if axis is None:
        return _T(tuple(d for d in x.shape if d != 1), x.dtype)
    axes = normalize_axes(axis, x.ndim)
    if x.shape is None:
        return _T(None, x.dtype, x.ndim - len(axes))
    dropped = squeezed_axes(x.shape, axes)
    return _T(tuple(d for i, d in enumerate(x.shape) if i not in dropped), x.dtype)


def squeezed_axes(shape, axes) -> tuple[int, ...]:
    """The axes of ``axes`` (normalized) a squeeze of ``shape`` removes: all but those of a static size other than
    1, which TVM and PyTorch keep. A symbolic size is assumed to be 1."""
    return tuple(a for a in axes if not (isinstance(shape[a], int) and shape[a] != 1))


def _squeeze_ref(x, axis):
    """NumPy's squeeze of the axes ``axis`` of size 1; the others stay (TVM's and PyTorch's no-op). A symbolic size
    the inference took for 1 that is not makes a result of another rank, which the interpreter reports."""
    if axis is None:
        return np.squeeze(x)
    return np.squeeze(x, squeezed_axes(x.shape, tuple(a % x.ndim for a in axis)))


squeeze = register(Op(
    name="relax.squeeze", lowering="shape:squeeze", inputs=("x",), attrs={"axis": None}, infer=_squeeze_infer,
    unsigned="agnostic",
    canonicalize=lambda attrs: canonical_int_tuple(attrs, "axis"), reference=_squeeze_ref,
    gradient=gu.tensor_rule(lambda x, g, call: gu.reshape_like(g, x)),
    samples=[Sample([_T((1, 3, 1), "float32")]),
             Sample([_T((1, 3, 1), "int32")], {"axis": 2}),
             Sample([_T(("n", 1, 1), "float32")], {"axis": (1, -1)}),
             Sample([_T((2, 3), "float64")], {"axis": ()}),
             Sample([_T((), "float32")]),
             Sample([_T(("n", 1, 3), "float32")]),  # which of n is 1 is unknown: the rank is unknown
             Sample([_T((2, 1, 3), "float32")], {"axis": (0, 1)})],  # axis 0 (size 2) stays, as TVM
    bad_samples=[BadSample([_T((1, 3), "float32")], {"axis": 2}, r"axis 2 is out of range"),
                 BadSample([_T((), "float32")], {"axis": 0}, r"axis 0 is out of range for a tensor of rank 0")],
    doc="Remove the size-1 axes ``axis`` (an int or a tuple), or all size-1 axes when ``axis`` is None "
        "(then a symbolic input shape gives an output of unknown rank, as in TVM). An axis of ``axis`` whose static "
        "size is not 1 stays, as in TVM and PyTorch; a symbolic one is assumed to be 1 (checked at run time)."))


def _flatten_infer(args, attrs):
    (x,) = args
    return _T(None if x.shape is None else (sym.product(x.shape),), x.dtype, 1)


flatten = register(Op(
    name="relax.flatten", unsigned="agnostic", lowering="shape:flatten",
    inputs=("x",), infer=_flatten_infer, reference=lambda x: x.reshape(-1),
    gradient=gu.tensor_rule(lambda x, g, call: gu.reshape_like(g, x)),
    samples=[Sample([_T((2, 3, 4), "float32")]), Sample([_T(("n", 784), "float32")]),
             Sample([_T(("n", "m"), "int32")]), Sample([_T((), "float64")])],
    bad_samples=[BadSample([[_T((2,), "float32")]], {}, r"argument 'x' must be a tensor")],
    doc="Flatten all dimensions into one (TVM's ``relax.flatten``): ``(n, 28, 28)`` -> ``(n * 784,)``; "
        "a 0-d tensor becomes ``(1,)``."))


# -- broadcast_to --------------------------------------------------------------------------------------

def _broadcast_to_infer(args, attrs):
    (x,) = args
    target = attrs["shape"]
    if x.ndim != -1 and x.ndim > len(target):
        fail(f"cannot broadcast {fmt(x.shape) if x.shape else f'rank {x.ndim}'} to {fmt(target)}: "
             f"the target has lower rank")
    if x.shape is not None:
        offset = len(target) - len(x.shape)
        for i, d in enumerate(x.shape):
            t = target[offset + i]
            if d != 1:
                check_dims_match(d, t, f"cannot broadcast {fmt(x.shape)} to {fmt(target)}: "
                                       f"dim {i} is {d}, expected 1 or {t}")
    return _T(target, x.dtype)


def _decided_sums(g: Expr, x: Expr, target: tuple) -> Expr:
    """The adjoint ``g`` with each axis where ``x`` has a symbolic size and the target a static one other than 1
    (``n`` to 5: the lowering decides at run time whether ``n`` is 1 or 5) brought to ``x``'s size: summed when it is
    1, kept when it is the target's. ``where(n == 1, sum(g, axis, keepdims), g)`` holds the answer in its first
    ``n`` entries of the axis (all of them, or the one sum), which a slice to ``n`` keeps; ``n`` is counted at run
    time as ``sum(ones((n,)))``."""
    from . import equal, ones, strided_slice, sum as sum_, where  # registered after this module

    shape = gu.shape_of(x, "relax.broadcast_to gradient")
    offset = len(target) - len(shape)
    for j, d in enumerate(shape):
        a = offset + j
        if isinstance(d, sym.SymDim) and isinstance(target[a], int) and target[a] != 1:
            is_one = equal(sum_(ones((d,), "int64")), const(1, "int64"))
            g = strided_slice(where(is_one, sum_(g, (a,), keepdims=True), g), (a,), (0,), (d,))
    return g


broadcast_to = register(Op(
    name="relax.broadcast_to", unsigned="agnostic", lowering="shape:broadcast_to",
    inputs=("x",), attrs={"shape": REQUIRED}, infer=_broadcast_to_infer,
    canonicalize=lambda attrs: dict(attrs, shape=shape_attr(shape_value(attrs["shape"], "broadcast_to"))),
    reference=lambda x, shape: np.array(np.broadcast_to(x, shape)),
    gradient=gu.tensor_rule(lambda x, g, call: gu.unbroadcast(_decided_sums(g, x, call.attrs["shape"]),
                                                                x.struct_info)),
    samples=[Sample([_T((3, 1), "float32")], {"shape": (2, 3, 4)}),
             Sample([_T((), "float32")], {"shape": (3, 3)}),
             Sample([_T((4,), "int64")], {"shape": (2, 4)}),
             Sample([_T((1, 4), "bool")], {"shape": (3, 4)}),
             Sample([_T(("n", 1), "float32")], {"shape": ("n", 5)}),
             Sample([_T((3, 1), "float64")], {"shape": ("k", 3, "m")}, sizes={"k": 2, "m": 4})],
    bad_samples=[BadSample([_T((2, 3), "float32")], {"shape": (4, 3)},
                           r"cannot broadcast \(2, 3\) to \(4, 3\): dim 0 is 2, expected 1 or 4"),
                 BadSample([_T((2, 3), "float32")], {"shape": (3,)}, r"the target has lower rank"),
                 BadSample([_T((3,), "float32")], {"shape": (2, -1)}, r"negative dimension -1")],
    doc="Broadcast ``x`` to ``shape`` with NumPy's rules (input dims align right; each is 1 or equal). A symbolic "
        "size of ``x`` against a static one of ``shape`` may be either at run time (``n`` to 5: 1 or 5); against "
        "another symbolic size it is assumed equal, as TVM assumes it (compiled code checks it)."))


# -- concat, split ---------------------------------------------------------------------------------------

def _concat_infer(args, attrs):
    (tensors,) = args
    if not tensors:
        fail("needs at least one tensor to concatenate")
    names = [f"tensors[{i}]" for i in range(len(tensors))]
    dtype = require_same_dtype(tensors, names)
    axis = attrs["axis"]
    if axis is None:  # NumPy's: flatten every tensor, then join (deliberately: TVM refuses tensors that are not 1-D)
        if any(t.shape is None for t in tensors):
            return _T(None, dtype, 1)
        return _T((sum((sym.product(t.shape) for t in tensors), 0),), dtype)
    ranks = {t.ndim for t in tensors if t.ndim != -1}
    if len(ranks) > 1:
        fail("tensors must have the same rank, got " + ", ".join(f"{n}: rank {t.ndim}" for n, t in zip(names, tensors)))
    if not ranks:
        return _T(None, dtype, -1)
    ndim = ranks.pop()
    axis = normalize_axis(axis, ndim)
    if any(t.shape is None for t in tensors):
        return _T(None, dtype, ndim)
    out = list(tensors[0].shape)
    for name, t in zip(names[1:], tensors[1:]):
        for i, d in enumerate(t.shape):
            if i == axis:
                out[i] = out[i] + d
                continue
            check_dims_match(out[i], d, f"{name} has shape {fmt(t.shape)} but tensors[0] has "
                                        f"{fmt(tensors[0].shape)}: dims other than axis {axis} must match")
            if not isinstance(out[i], int):  # keep the static size when one tensor knows it
                out[i] = d
    return _T(tuple(out), dtype)


def _concat_grad(orig, call, grad):
    """Slice the adjoint at the input boundaries (of the flattened inputs when ``axis`` is None)."""
    (tensors,), axis = call.args, call.attrs["axis"]
    from .indexing import strided_slice  # indexing.py comes after this module

    if not gu.is_float_expr(orig):
        return [None]
    sizes = [sym.product(gu.shape_of(t)) if axis is None else gu.shape_of(t)[axis] for t in tensors]
    bounds = gu.piece_bounds(sizes)
    pieces = [grad if len(bounds) == 1 else strided_slice(grad, (axis or 0,), (b,), (e,)) for b, e in bounds]
    return [Tuple([gu.reshape_like(p, t) for p, t in zip(pieces, tensors)])]


def _concat_flattened(call: Call) -> Optional[Expr]:
    """The export's rewrite of ``concat(t, axis=None)`` (NumPy: flatten, then join) into
    ``concat(flatten(t[i])..., axis=0)``: the tensors of the dialect op's variadic group must have one rank."""
    if call.attrs.get("axis", 0) is not None:
        return None
    tup = call.args[0]
    if isinstance(tup, Tuple):
        fields = list(tup.fields)
    else:
        fields = [TupleGetItem(tup, i) for i in range(len(tup.struct_info.fields))]
    return concat(Tuple([flatten(f) for f in fields]), axis=0)


concat = register(Op(
    name="relax.concat", unsigned="agnostic", lowering="shape:concat", export_rewrite=_concat_flattened,
    inputs=("tensors",), tuple_input=True, attrs={"axis": 0}, infer=_concat_infer,
    reference=lambda tensors, axis: np.concatenate(tensors, axis=axis), gradient=_concat_grad,
    samples=[Sample([[_T((2, 3), "float32"), _T((4, 3), "float32")]]),
             Sample([[_T((2, 3), "int32"), _T((2, 1), "int32"), _T((2, 2), "int32")]], {"axis": -1}),
             Sample([[_T(("n", 3), "float32"), _T(("m", 3), "float32")]], {"axis": 0}),
             Sample([[_T(("n", 3), "float64"), _T((3, 3), "float64")]], {"axis": 1}),
             Sample([[_T((2, 3), "float32"), _T((5,), "float32")]], {"axis": None}),
             Sample([[_T((), "float32"), _T((), "float32")]], {"axis": None}),
             Sample([[_T((4,), "bool")]])],
    bad_samples=[BadSample([[_T((2, 3), "float32"), _T((2, 4), "float32")]], {},
                           r"tensors\[1\] has shape \(2, 4\) but tensors\[0\] has \(2, 3\): dims other than axis 0"),
                 BadSample([[_T((2, 3), "float32"), _T((2,), "float32")]], {},
                           r"same rank, got tensors\[0\]: rank 2, tensors\[1\]: rank 1"),
                 BadSample([[_T((2,), "float32"), _T((2,), "int32")]], {}, r"same dtype"),
                 BadSample([[]], {}, r"needs at least one tensor"),
                 BadSample([[_T((2,), "float32")]], {"axis": 1}, r"axis 1 is out of range"),
                 BadSample([[_T((), "float32")] * 2], {}, r"axis 0 is out of range for a tensor of rank 0"),
                 BadSample([_T((2,), "float32")], {}, r"must be a tuple of tensors")],
    doc="Join a tuple of tensors along ``axis`` (``None``: flatten them first, as NumPy does; TVM takes only 1-D "
        "tensors there)."))
