"""Shape manipulation and creation: reshape, flatten, expand_dims, squeeze, permute_dims, broadcast_to, concat,
split, take, strided_slice, flip; zeros/ones/full (and ``*_like``), triu/tril, arange.

Reshapes are ``tensor.collapse_shape`` to 1-D then ``tensor.expand_shape`` (canonicalization folds the pair);
slices are ``tensor.extract_slice``/``insert_slice`` (a negative stride, and ``flip``, is a gathering
``linalg.generic``); ``take`` is a ``linalg.generic`` reading the data with ``tensor.extract``.
"""

from __future__ import annotations

from typing import Optional, Sequence

from mlir import ir
from mlir.dialects import arith, linalg, scf, tensor

from .core import (DYN, Size, as_index, convert, dim, elem, empty, filled, generic, identity, is_bool,
                   is_float, loop_index, map_elementwise, norm_axes, sadd, scalar, sceildiv, sizes_of,
                   smax, smin, smul, sprod, ssub, tensor_type, amap)
from ...op.indexing import reads_beyond
from ..error_slot import SHAPE_CHECK_PREFIX
from . import core
from .checks import guarded_extract, report_if, where
from .size_checks import assumed_equal, unless_sizes


def _mixed(values: Sequence[Size]) -> tuple[list[ir.Value], list[int]]:
    dynamic = [v for v in values if not isinstance(v, int)]
    return dynamic, [v if isinstance(v, int) else DYN for v in values]


def extract_slice(src: ir.Value, offsets: Sequence[Size], sizes: Sequence[Size],
                  strides: Sequence[Size]) -> ir.Value:
    if any(isinstance(s, int) and s == 0 for s in sizes):  # the verifier refuses an offset at the end
        return empty(sizes, elem(src))
    (do, so), (ds, ss), (dt, st) = _mixed(offsets), _mixed(sizes), _mixed(strides)
    return tensor.extract_slice(tensor_type(sizes, elem(src)), src, do, ds, dt, so, ss, st)


def insert_slice(src: ir.Value, dest: ir.Value, offsets: Sequence[Size]) -> ir.Value:
    sizes = sizes_of(src)
    if core.writes_nothing(src, dest):  # the verifier refuses an offset into a static 0-size dim
        return dest
    (do, so), (ds, ss) = _mixed(offsets), _mixed(sizes)
    return tensor.insert_slice(src, dest, do, ds, [], so, ss, [1] * len(sizes))


def reshape(lc, op):
    return core.reshape(lc.inputs[0], lc.result_sizes())


def flatten(lc, op):
    x = lc.inputs[0]
    return core.reshape(x, [sprod(sizes_of(x))])


def expand_dims(lc, op):
    x = lc.inputs[0]
    out_rank = lc.result_type.rank
    axes = norm_axes(lc.attrs["axis"], out_rank)
    rest = iter(sizes_of(x))
    return core.reshape(x, [1 if a in axes else next(rest) for a in range(out_rank)])


def squeeze(lc, op):
    """``x`` without the axes ``axis`` (None: its static 1s; the inference gave a symbolic size's squeeze an unknown
    rank, which the export refuses, as TVM's). An axis of a static size other than 1 stays (TVM's and PyTorch's
    no-op, as the inference says). A squeezed axis of dynamic size is checked to be 1: the reshape's own check would
    report the element count, not the axis."""
    x = lc.inputs[0]
    axis = lc.attrs["axis"]
    drop = [a for a, d in enumerate(x.type.shape) if d == 1] if axis is None else \
        [a for a in norm_axes(axis, x.type.rank) if x.type.shape[a] in (1, DYN)]
    sizes = [dim(x, a) for a in range(x.type.rank) if a not in drop]
    mismatch = assumed_equal(op, [(dim(x, a), 1, a, f"{where(op)}: relax.squeeze: axis {{position}} of x has "
                                                    "{value} elements, expected 1 (a squeezed axis)")
                                  for a in drop if x.type.shape[a] == DYN])
    return unless_sizes(mismatch, tensor_type(sizes, elem(x)), sizes, lambda: core.reshape(x, sizes))


def permute_dims(lc, op):
    x = lc.inputs[0]
    rank = x.type.rank
    axes = lc.attrs["axes"]
    perm = list(reversed(range(rank))) if axes is None else [a % rank for a in axes]
    if rank == 0:
        return x
    out = empty([dim(x, a) for a in perm], elem(x))
    return linalg.transpose(x, outs=[out], permutation=perm).results[0]


def broadcast_to(lc, op):
    """NumPy's broadcast of ``x`` to the ``shape`` attribute: one ``linalg.generic``, a static 1 read at index 0.

    A dynamic size of ``x`` against a static target size other than 1 (``n`` to 5: the inference could not tell
    whether ``n`` is 5 or 1, NumPy takes both) is decided at run time: the generic reads ``x`` by
    ``tensor.extract`` at index 0 where the size is 1, at the loop's index where it is the target's, and any other
    size is reported (the op then does not run). A dynamic size against a dynamic one is the target's (the
    inference assumed them equal, as TVM does; compiled code checks it)."""
    x, sizes, out = lc.inputs[0], lc.result_sizes(), lc.result_type
    offset = out.rank - x.type.rank
    decided = [j for j, d in enumerate(x.type.shape) if d == DYN and out.shape[offset + j] not in (DYN, 1)]
    if not decided:
        return map_elementwise(lc.inputs, out, lambda v: v, sizes)
    size = {j: as_index(dim(x, j)) for j in decided}
    is_one = {j: arith.cmpi(arith.CmpIPredicate.eq, size[j], as_index(1)) for j in decided}
    i64 = ir.IntegerType.get_signless(64)
    mismatch = None
    for j in decided:  # neither 1 nor the target's size
        target = out.shape[offset + j]
        bad = arith.andi(arith.xori(is_one[j], scalar(True, is_one[j].type)),
                         arith.cmpi(arith.CmpIPredicate.ne, size[j], as_index(target)))
        report_if(op, bad, arith.index_cast(i64, size[j]), as_index(j),
                  f"{SHAPE_CHECK_PREFIX}{where(op)}: relax.broadcast_to: dimension {{position}} of x is {{value}}, "
                  f"expected 1 or {target} (the target shape's dimension {offset + j})")
        mismatch = bad if mismatch is None else arith.ori(mismatch, bad)
    # the other sizes of x, read through the same extract, are the target's where they are not a static 1
    same = assumed_equal(op, [
        (dim(x, j), sizes[offset + j], j, f"{where(op)}: relax.broadcast_to: dimension {{position}} of x is "
         f"{{value}}, where the target shape has {{extent}}")
        for j, d in enumerate(x.type.shape) if j not in decided and d != 1])
    if same is not None:
        mismatch = arith.ori(mismatch, same)

    def build() -> ir.Value:
        def read(_out):
            coords = [as_index(0) if d == 1 else
                      arith.select(is_one[j], as_index(0), loop_index(offset + j)) if j in decided else
                      loop_index(offset + j) for j, d in enumerate(x.type.shape)]
            return tensor.extract(x, coords)
        return generic([], [empty(sizes, elem(x))], [identity(out.rank)], ["parallel"] * out.rank, read)[0]

    return unless_sizes(mismatch, out, sizes, build)


def concat(lc, op):
    inputs = list(lc.inputs)
    axis = lc.attrs["axis"]
    if axis is None:
        inputs, axis = [core.reshape(x, [sprod(sizes_of(x))]) for x in inputs], 0
    axis %= inputs[0].type.rank
    total: Size = 0
    for x in inputs:
        total = sadd(total, dim(x, axis))
    sizes = sizes_of(inputs[0])
    sizes[axis] = total
    # Every input's other dims are the first's (inference assumed symbolic ones equal): each is inserted with its
    # own sizes, so a larger one would be written past the result and a smaller one leave part of it unwritten.
    mismatch = assumed_equal(op, [
        (dim(x, a), sizes[a], a, f"{where(op)}: relax.concat: dimension {{position}} of input {i} is {{value}}, "
         f"where input 0 has {{extent}} (all but the concatenation axis {axis} must match)")
        for i, x in enumerate(inputs[1:], 1) for a in range(len(sizes)) if a != axis])

    def build() -> ir.Value:
        out = empty(sizes, elem(inputs[0]))
        offset: Size = 0
        for x in inputs:
            offsets = [0] * len(sizes)
            offsets[axis] = offset
            out = insert_slice(x, out, offsets)
            offset = sadd(offset, dim(x, axis))
        return out

    return unless_sizes(mismatch, tensor_type(sizes, elem(inputs[0])), sizes, build)


def split(lc, op):
    x = lc.inputs[0]
    axis = lc.attrs["axis"] % x.type.rank
    spec, d = lc.attrs["indices_or_sections"], dim(x, axis)
    if isinstance(spec, int):
        # TVM's sections: spec - 1 pieces of ceil(d / spec), the last one the rest. Inference refused a static size
        # they pass; a dynamic one is checked here, and the bounds clamped to d so no piece reads past the end.
        step = sceildiv(d, spec)
        if not isinstance(d, int):
            taken = smul(step, spec - 1)
            report_if(op, arith.cmpi(arith.CmpIPredicate.sgt, taken, d), arith.index_cast(ir.IntegerType.get_signless(
                64), d), as_index(axis), f"{SHAPE_CHECK_PREFIX}{where(op)}: relax.split: axis {{position}} of size "
                      f"{{value}} cannot be split into {spec} sections: {spec - 1} of ceil({{value}} / {spec}) "
                      f"already take {{extent}}", taken)
        bounds = [smin(smul(step, i), d) for i in range(spec)] + [d]
    else:  # as TVM infers: each index clamped into [0, d], a piece that ends before its start empty
        bounds = [0] + [smin(max(b, 0), d) for b in spec] + [d]
    outs = []
    for i in range(len(bounds) - 1):
        offsets = [0] * x.type.rank
        offsets[axis] = bounds[i]
        sizes = sizes_of(x)
        sizes[axis] = smax(ssub(bounds[i + 1], bounds[i]), 0)
        outs.append(extract_slice(x, offsets, sizes, [1] * x.type.rank))
    return outs


def take_index(i: ir.Value, extent: ir.Value, mode: str) -> tuple[ir.Value, ir.Value]:
    """An index of ``take`` (an index value) as a position under ``mode``, and whether it is out of range.

    ``fast``: a negative index counts from the end (once); one still outside ``[0, extent)`` is bad. ``wrap``:
    modulo ``extent``; ``clip``: clamped to ``[0, extent - 1]``. Under those two only an empty axis is bad.
    ``strict`` (not a mode of take: ``one_hot``'s): anything outside ``[0, extent)`` is bad, negatives too."""
    zero = as_index(0)
    if mode == "wrap":
        safe = arith.select(arith.cmpi(arith.CmpIPredicate.eq, extent, zero), as_index(1), extent)
        r = arith.remsi(i, safe)
        i = arith.select(arith.cmpi(arith.CmpIPredicate.slt, r, zero), arith.addi(r, safe), r)
    elif mode == "clip":
        i = arith.maxsi(arith.minsi(i, arith.subi(extent, as_index(1))), zero)
    elif mode != "strict":
        i = arith.select(arith.cmpi(arith.CmpIPredicate.slt, i, zero), arith.addi(i, extent), i)
    return i, arith.cmpi(arith.CmpIPredicate.uge, i, extent)  # unsigned: also below 0, and any index of an empty axis


def checked_indices(op: ir.Operation, ind: ir.Value, extent: ir.Value, mode: str, message: str,
                    fallback: ir.Value) -> ir.Value:
    """``ind`` mapped by ``mode`` (:func:`take_index`) as a tensor of ``index``, each index checked once: an
    out-of-range one is reported (``message``, its flat position) and replaced by ``fallback``.

    An ``scf.for`` over the flattened indices, not a ``linalg.generic``: elementwise fusion would copy a generic's
    side effects (the report) into every consumer, testing each index once per element read through it."""
    idx_t = ir.IndexType.get()
    count = sprod(sizes_of(ind))
    flat = core.reshape(ind, [count])
    loop = scf.ForOp(as_index(0), as_index(count), as_index(1), [empty([count], idx_t)])
    with ir.InsertionPoint(loop.body):
        j, acc = loop.induction_variable, loop.inner_iter_args[0]
        raw = tensor.extract(flat, [j])
        i, bad = take_index(convert(raw, idx_t), extent, mode)
        report_if(op, bad, raw, j, message, extent)
        scf.YieldOp([tensor.insert(arith.select(bad, fallback, i), acc, [j])])
    return core.reshape(loop.results[0], sizes_of(ind), idx_t)


def take(lc, op):
    """A gather: ``out[..., j, ...] = x[..., indices[j], ...]``, indices mapped by ``mode`` (:func:`take_index`).

    The indices are mapped and checked first, once each (an out-of-range one is reported through the error slot,
    ``checks.py``, and replaced by 0); the gather then reads by in-range indices with no test per element. Only
    an empty axis, where no index is in range, reads nothing at all."""
    x, ind = lc.inputs
    axis = lc.attrs["axis"]
    if axis is None:
        x, axis = core.reshape(x, [sprod(sizes_of(x))]), 0
    axis %= x.type.rank
    r, k = x.type.rank, ind.type.rank
    out_rank = r - 1 + k
    sizes = sizes_of(x)[:axis] + sizes_of(ind) + sizes_of(x)[axis + 1:]
    extent = as_index(dim(x, axis))
    size = dim(x, axis)
    message = index_message(op, "relax.take", sizes_of(ind), axis, size)

    safe = checked_indices(op, ind, extent, lc.attrs["mode"], message, as_index(0))

    def gather(i, _out):
        coords = [loop_index(a) for a in range(axis)] + [i] + [loop_index(axis + k + j) for j in range(r - axis - 1)]
        return tensor.extract(x, coords)

    maps = [amap(out_rank, list(range(axis, axis + k))), identity(out_rank)]

    def gathered() -> ir.Value:
        return generic([safe], [empty(sizes, elem(x))], maps, ["parallel"] * out_rank, gather)[0]

    if isinstance(size, int) and size > 0:
        return gathered()
    if isinstance(size, int):  # a static empty axis: every index is out of range; report the first, read nothing
        flat = core.reshape(ind, [sprod(sizes_of(ind))])
        none = arith.cmpi(arith.CmpIPredicate.eq, as_index(dim(flat, 0)), as_index(0))
        report_if(op, arith.xori(none, scalar(True, none.type)), guarded_extract(flat, [as_index(0)], none),
                  as_index(0), message)
        return filled(sizes, elem(x), 0)
    # A dynamic axis that may be empty: zeros then, read from nothing. The checks ran before the branch.
    is_empty = arith.cmpi(arith.CmpIPredicate.eq, extent, as_index(0))
    branch = scf.IfOp(is_empty, [tensor_type(sizes, elem(x))], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        scf.YieldOp([filled(sizes, elem(x), 0)])
    with ir.InsertionPoint(branch.else_block):
        scf.YieldOp([gathered()])
    return branch.results[0]


def index_message(op, name: str, index_sizes, axis: int, size) -> str:
    """The IndexError message of an index along ``axis`` (of ``size``) from a tensor of indices."""
    return (f"{where(op)}: {name}: index {{value}} at position {{position}} of the indices (flat, shape "
            f"{_shape_text(index_sizes)}) is out of range for axis {axis} of size "
            f"{size if isinstance(size, int) else '{extent}'}")


def _shape_text(sizes) -> str:
    dims = [str(d) if isinstance(d, int) else "?" for d in sizes]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def _slice_bounds(b: Size, e: Size, s: int, d: Size) -> tuple[Size, Size]:
    """Python's ``slice(b, e, s).indices(d)`` start and length, on a static or dynamic size ``d``; a bound that is
    a value (a symbolic one) is an index from the start, clamped into the axis as an int is."""
    if all(isinstance(v, int) for v in (b, e, d)):
        start, stop, step = slice(b, e, s).indices(d)
        return start, len(range(start, stop, step))

    def clamp(i: Size, low: int, high: Size) -> Size:  # i < 0 counts from the end; then clamped to [low, high]
        if not isinstance(i, int):
            return smin(smax(i, low), high)
        return smax(sadd(d, i), low) if i < 0 else smin(i, high)

    if s > 0:
        start, stop = clamp(b, 0, d), clamp(e, 0, d)
        return start, smax(sceildiv(ssub(stop, start), s), 0)
    start, stop = clamp(b, -1, ssub(d, 1)), clamp(e, -1, ssub(d, 1))
    return start, smax(sceildiv(ssub(start, stop), -s), 0)


def _check_beyond(op, axis: int, b: Size, e: Size, s: int, d: Size, length: Size) -> None:
    """On a symbolic axis the inference read a bound that :func:`~relax_mlir.op.indexing.reads_beyond` the axis as
    past its end or before its start (the interpreter checks the same): a call whose axis is too long for that
    reading, where NumPy's slice (``length``, computed here) has another length, raises ``ValueError``."""
    beyond = [(name, i) for name, i in (("begin", b), ("end", e)) if reads_beyond(i)]
    if isinstance(d, int) or not beyond:
        return  # a static axis: its inference is NumPy's slice
    forward = s > 0

    def read(i: Size) -> Size:  # the index the inference took the bound for, clamped as _slice_bounds clamps
        if not reads_beyond(i):
            return i
        return (d if forward else ssub(d, 1)) if i > 0 else as_index(0 if forward else -1)

    assumed = _slice_bounds(read(b), read(e), s, d)[1]
    bad = arith.cmpi(arith.CmpIPredicate.ne, as_index(length), as_index(assumed))
    named = [(name, i) for name, i in beyond if abs(i) < 2**63 - 1] or beyond  # +-(2**63 - 1): beyond any axis
    text = " and ".join(f"{name} {i}, read as {'past its end' if i > 0 else 'before its start'}"
                        for name, i in named)
    report_if(op, bad, arith.index_cast(ir.IntegerType.get_signless(64), d), as_index(axis),
              f"{SHAPE_CHECK_PREFIX}{where(op)}: strided_slice: symbolic axis {{position}} has {{value}} elements, "
              f"too many for {text} (as NumPy reads a bound at least 2**31 - 1 in size on a shorter axis only; "
              "+-(2**63 - 1) hold on any axis)")


def strided_slice(lc, op):
    x = lc.inputs[0]
    rank = x.type.rank
    offsets, sizes, strides = [0] * rank, sizes_of(x), [1] * rank
    attrs = lc.attrs
    for a, b, e, s in zip(attrs["axes"], attrs["begin"], attrs["end"], attrs["strides"] or (1,) * len(attrs["axes"])):
        a %= rank
        d = dim(x, a)
        offsets[a], sizes[a] = _slice_bounds(b, e, s, d)
        strides[a] = s
        if attrs.get("assume_inbound", True):  # without it the inference read no bound as beyond the axis
            _check_beyond(op, a, b, e, s, d, sizes[a])
    if all(s > 0 for s in strides):
        return extract_slice(x, offsets, sizes, strides)
    return _gather(x, offsets, strides, sizes)


def _gather(x: ir.Value, offsets: Sequence[Size], strides: Sequence[Size], sizes: Sequence[Size]) -> ir.Value:
    """``x[offset + i * stride]`` along each axis, ``sizes`` elements: a slice with a negative stride. With a static
    0 among ``sizes`` it reads nothing: an empty tensor (a loop over none, returned next to another empty result,
    crashed One-Shot Bufferize)."""
    rank = x.type.rank
    if any(isinstance(s, int) and s == 0 for s in sizes):
        return empty(sizes, elem(x))

    def body(_out):
        coords = [sadd(as_index(o), arith.muli(loop_index(a), as_index(s))) for a, (o, s) in
                  enumerate(zip(offsets, strides))]
        return tensor.extract(x, coords)

    return generic([], [empty(sizes, elem(x))], [identity(rank)], ["parallel"] * rank, body)[0]


def flip(lc, op):
    """``x`` reversed along ``axis``: read from its last element back, whatever the axis' size (no bounds)."""
    x = lc.inputs[0]
    rank = x.type.rank
    axis = lc.attrs["axis"] % rank
    offsets, strides = [0] * rank, [1] * rank
    offsets[axis], strides[axis] = ssub(dim(x, axis), 1), -1
    return _gather(x, offsets, strides, sizes_of(x))


# --- creation ----------------------------------------------------------------------------------------------------
def _fill_scalar(value, t: ir.Type) -> ir.Value:
    if is_bool(t):
        return scalar(bool(value), t)
    return scalar(float(value) if is_float(t) else int(value), t)


def _fill(value: Optional[float] = None, like_input: bool = False):
    """A creation lowering: the result filled with ``value`` (``None``: the call's ``fill_value``), sized as the
    result's shape attribute or (``like_input``) as the input."""
    def rule(lc, op):
        t = elem(lc.result_type)
        sizes = sizes_of(lc.inputs[0]) if like_input else lc.result_sizes()
        return filled(sizes, t, _fill_scalar(lc.attrs["fill_value"] if value is None else value, t))
    return rule


zeros, ones, full = _fill(0), _fill(1), _fill()
zeros_like, ones_like, full_like = _fill(0, True), _fill(1, True), _fill(like_input=True)


def _triangle(upper: bool):
    def rule(lc, op):
        x = lc.inputs[0]
        rank, k = x.type.rank, lc.attrs["k"]
        pred = arith.CmpIPredicate.sge if upper else arith.CmpIPredicate.sle

        def fn(v):
            diag = arith.subi(loop_index(rank - 1), loop_index(rank - 2))
            keep = arith.cmpi(pred, diag, as_index(k))
            return arith.select(keep, v, scalar(0, v.type))
        return map_elementwise([x], lc.result_type, fn, sizes_of(x))
    return rule


triu = _triangle(True)
tril = _triangle(False)


def _arange_length(op, start: Size, end: Size, step: int) -> Size:
    """The length of an arange between bounds known at run time, ``ceil((end - start) / step)`` (the inference's
    size: TVM's ``(end - start + step - 1) // step``, which it does not clamp). A negative one is reported
    (``ValueError`` after the call) and taken as 0, so nothing is written."""
    span = ssub(end, start) if step > 0 else ssub(start, end)
    length = as_index(sceildiv(span, abs(step)))
    i64 = ir.IntegerType.get_signless(64)
    report_if(op, arith.cmpi(arith.CmpIPredicate.slt, length, as_index(0)), arith.index_cast(i64, length),
              as_index(start), f"{SHAPE_CHECK_PREFIX}{where(op)}: relax.arange: the length ceil((end - start) / "
              f"{step}) from start {{position}} to end {{extent}} is {{value}}, a negative size (as TVM's, the "
              "inferred length is not clamped at 0)", as_index(end))
    return smax(length, 0)


def arange(lc, op):
    """``start + i * step``, computed in 64 bits. ``start`` and ``end`` arrive as 1-tuples (``op/create.py``'s
    export form), a symbolic one holding an ``index`` value; a length the inference left symbolic is computed
    here."""
    t = elem(lc.result_type)
    wide = ir.F64Type.get() if is_float(t) else ir.IntegerType.get_signless(64)
    start, end, step = (v[0] if isinstance(v, tuple) else v for v in (lc.attrs[k] for k in ("start", "end", "step")))
    # (bounds that differ by a constant, arange(n, n + 2), have the static length the inference gave)
    sizes = [_arange_length(op, start, end, step)] if lc.result_type.shape[0] == DYN else lc.result_sizes()

    def body(_out):
        i = convert(loop_index(0), wide)
        first = convert(start, wide) if isinstance(start, ir.Value) else scalar(start, wide)
        value = (arith.addf if is_float(wide) else arith.addi)(
            first, (arith.mulf if is_float(wide) else arith.muli)(i, scalar(step, wide)))
        return convert(value, t)

    return generic([], [empty(sizes, t)], [identity(1)], ["parallel"], body)[0]


def dynamic_strided_slice(lc, op):
    """Python's slice of each axis with its bounds and stride read from the operand tensors at run time: the start
    and length of :func:`_slice_bounds`, computed for both signs of the stride and selected by it, then the gathering
    ``linalg.generic`` of a negative-stride slice. A zero stride is reported (``ValueError``) and read as 1."""
    x, *bounds = lc.inputs
    idx_t = ir.IndexType.get()
    zero, one = as_index(0), as_index(1)
    offsets, strides, sizes = [], [], []
    for a in range(x.type.rank):
        raw_b, raw_e, raw_s = (tensor.extract(t, [as_index(a)]) for t in bounds)
        b, e, s = (arith.index_cast(idx_t, v) for v in (raw_b, raw_e, raw_s))
        is_zero = arith.cmpi(arith.CmpIPredicate.eq, s, zero)
        report_if(op, is_zero, raw_s, as_index(a), f"{SHAPE_CHECK_PREFIX}{where(op)}: relax.dynamic_strided_slice: "
                  "stride {value} on axis {position}: strides must be non-zero")
        s = arith.select(is_zero, one, s)
        d = as_index(dim(x, a))
        forward = arith.cmpi(arith.CmpIPredicate.sgt, s, zero)

        def clamp(i: ir.Value, low: ir.Value, high: ir.Value) -> ir.Value:
            counted = arith.select(arith.cmpi(arith.CmpIPredicate.slt, i, zero), arith.addi(i, d), i)
            return arith.minsi(arith.maxsi(counted, low), high)

        low = arith.select(forward, zero, as_index(-1))
        high = arith.select(forward, d, arith.subi(d, one))
        start, stop = clamp(b, low, high), clamp(e, low, high)
        up = arith.ceildivsi(arith.subi(stop, start), s)  # (stop - start) / s rounded up, for either sign
        offsets.append(start)
        strides.append(s)
        sizes.append(arith.maxsi(up, zero))
    return _gather(x, offsets, strides, sizes)
