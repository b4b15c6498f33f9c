"""What every lowering uses: the :class:`LegalizeContext` handed to a rule, and small builders.

A lowering rule is ``rule(lc: LegalizeContext, op: ir.Operation) -> Value | Sequence[Value]``: it runs with the
insertion point and location of the relax op ``op`` and returns one value per result of it (tensors of the
result types; a static/dynamic mismatch is fixed with ``tensor.cast``). ``lc.attrs`` holds the op's Relax
attributes decoded back to Python (``axis=(0, 2)``, ``dtype="float32"``, ``None``; a symbolic entry of a size
attribute as its ``index`` value), ``lc.inputs`` its tensor operands, ``lc.dims`` the dynamic result dims of an op
with a ``shape`` attribute.

Sizes: a dimension is an ``int`` (static) or an ``index`` Value; ``sadd``/``smul``/... fold ints in Python and
emit ``arith`` only for Values. ``generic(inputs, inits, maps, iterators, body)`` builds a ``linalg.generic``
whose ``body(*block_args)`` returns the yielded scalars.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Callable, Iterator, Optional, Sequence, Union

from mlir import ir
from mlir.dialects import arith, linalg, math, tensor

from ...op.registry import Op
from ..dialect import SYMBOLIC_ENTRY, decode_attr

Size = Union[int, ir.Value]
DYN = ir.ShapedType.get_dynamic_size()


class LegalizeError(ValueError):
    """A relax op that its lowering cannot handle (names the op and the reason)."""


#: (the integer operands of the op being lowered are unsigned, its integer results are): set from the op's
#: ``relax_mlir.unsigned_in``/``_out`` attributes (``backend/unsigned.py``) while its rule runs, read by the
#: builders below that pick a signed or an unsigned form (``convert``, ``lowest``/``highest``, ``int_cmp``).
_UNSIGNED: contextvars.ContextVar[tuple[bool, bool]] = contextvars.ContextVar("unsigned", default=(False, False))


def unsigned_in() -> bool:
    """Whether the integer operands of the op being lowered are unsigned."""
    return _UNSIGNED.get()[0]


@contextlib.contextmanager
def signedness_of(op: ir.Operation) -> Iterator[None]:
    """While lowering ``op``: its integers are unsigned where its attributes say so."""
    from ..unsigned import UNSIGNED_IN, UNSIGNED_OUT

    token = _UNSIGNED.set((UNSIGNED_IN in op.attributes, UNSIGNED_OUT in op.attributes))
    try:
        yield
    finally:
        _UNSIGNED.reset(token)


def int_cmp(predicate: str, a: ir.Value, b: ir.Value) -> ir.Value:
    """``a <predicate> b`` on integers (lt, le, gt, ge, eq, ne): unsigned for booleans and unsigned operands."""
    if predicate not in ("eq", "ne"):
        predicate = ("u" if is_bool(a.type) or unsigned_in() else "s") + predicate
    return arith.cmpi(getattr(arith.CmpIPredicate, predicate), a, b)


class LegalizeContext:
    """A relax op being lowered: its record, decoded attributes, operands and result types."""

    def __init__(self, op: ir.Operation, record: Op):
        self.op, self.record = op, record
        self.attrs = {name: decode_attr(op.attributes[name]) for name in record.attrs if name in op.attributes}
        self.inputs = [v for v in op.operands if isinstance(v.type, ir.RankedTensorType)]
        self.result_types = [r.type for r in op.results]
        dims = [v for v in op.operands if isinstance(v.type, ir.IndexType)]
        shape_dims = sum(d == DYN for d in self.result_types[0].shape) if "shape" in record.attrs else 0
        self.dims, rest = dims[:shape_dims], iter(dims[shape_dims:])
        for name in record.size_attrs:  # a symbolic entry's value is the next index operand
            if isinstance(self.attrs.get(name), tuple):
                self.attrs[name] = tuple(next(rest) if v == SYMBOLIC_ENTRY else v for v in self.attrs[name])

    @property
    def result_type(self) -> ir.RankedTensorType:
        return self.result_types[0]

    def result_sizes(self, i: int = 0) -> list[Size]:
        """The sizes of result ``i``: static dims from its type, dynamic ones from ``dims`` (in order)."""
        dims = iter(self.dims)
        return [next(dims) if d == DYN else d for d in self.result_types[i].shape]

    def fail(self, message: str):
        raise LegalizeError(f"{self.record.name}: {message}")


# --- types ---------------------------------------------------------------------------------------------------
def elem(x: Union[ir.Value, ir.Type]) -> ir.Type:
    t = x.type if isinstance(x, ir.Value) else x
    return t.element_type if isinstance(t, ir.ShapedType) else t


def is_float(t: ir.Type) -> bool:
    return isinstance(elem(t), ir.FloatType)


def is_bool(t: ir.Type) -> bool:
    t = elem(t)
    return isinstance(t, ir.IntegerType) and t.width == 1


def width(t: ir.Type) -> int:
    t = elem(t)
    return t.width


def f32() -> ir.Type:
    return ir.F32Type.get()


def compute_type(t: ir.Type) -> ir.Type:
    """The type math is done in: f32 for f16/bf16 (the references compute wide), else the type itself."""
    t = elem(t)
    return f32() if isinstance(t, (ir.F16Type, ir.BF16Type)) else t


def tensor_type(sizes: Sequence[Size], t: ir.Type) -> ir.RankedTensorType:
    return ir.RankedTensorType.get([s if isinstance(s, int) else DYN for s in sizes], elem(t))


# --- scalars -------------------------------------------------------------------------------------------------
def index(i: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), int(i))


def scalar(value: Union[int, float, bool], t: ir.Type) -> ir.Value:
    """A constant of scalar type ``t`` (ints wrap to the width, as NumPy's astype does)."""
    t = elem(t)
    if isinstance(t, ir.FloatType):
        return arith.constant(t, ir.FloatAttr.get(t, float(value)))
    if isinstance(t, ir.IndexType):
        return arith.constant(t, int(value))
    w = t.width
    if w == 1:
        return arith.constant(t, ir.BoolAttr.get(bool(value)))
    v = int(value) & ((1 << w) - 1)
    if v >= 1 << (w - 1):
        v -= 1 << w
    return arith.constant(t, ir.IntegerAttr.get(t, v))


def lowest(t: ir.Type) -> ir.Value:
    """-inf, or the smallest integer (0 unsigned): the identity of max."""
    t = elem(t)
    if is_float(t):
        return scalar(float("-inf"), t)
    return scalar(0 if unsigned_in() else -(1 << (t.width - 1)), t)


def highest(t: ir.Type) -> ir.Value:
    """inf, or the largest integer (all ones unsigned): the identity of min."""
    t = elem(t)
    if is_float(t):
        return scalar(float("inf"), t)
    return scalar((1 << t.width) - 1 if unsigned_in() else (1 << (t.width - 1)) - 1, t)


def convert(v: ir.Value, to: ir.Type) -> ir.Value:
    """NumPy's ``astype`` on a scalar: float<->float, int->float, float->int (toward zero; NaN and values out of
    range as NumPy on x86, ``_float_to_int``), int->int (sign-extend or wrap), anything->bool (``!= 0``),
    bool->number (0 or 1), index<->int; an integer of the op being lowered is read (and written) unsigned where its
    attributes say so (``signedness_of``)."""
    src, to = v.type, elem(to)
    if src == to:
        return v
    if isinstance(src, ir.IndexType) or isinstance(to, ir.IndexType):
        if isinstance(src, ir.FloatType) or isinstance(to, ir.FloatType):
            return convert(convert(v, ir.IntegerType.get_signless(64)), to)
        return arith.index_cast(to, v)
    if is_bool(to):
        zero = scalar(0, src)
        return arith.cmpf(arith.CmpFPredicate.UNE, v, zero) if is_float(src) else \
            arith.cmpi(arith.CmpIPredicate.ne, v, zero)
    if is_float(src) and is_float(to):
        if src.width == to.width:  # f16 <-> bf16
            return arith.truncf(to, arith.extf(f32(), v))
        if isinstance(src, ir.F64Type) and isinstance(to, ir.F16Type):
            # f64 -> f16 would call compiler-rt (__truncdfhf2), which the JIT cannot find: through f32, rounded
            # to odd so that the second rounding is the only one (NumPy's)
            return arith.truncf(to, f64_to_f32_odd(v))
        if {src.width, to.width} == {16, 64}:
            # f64 -> bf16 through f32 rounds twice, as ml_dtypes' astype and PyTorch do (the interpreter's); f16/bf16
            # -> f64 through f32 is exact
            return convert(convert(v, f32()), to)
        return arith.extf(to, v) if to.width > src.width else arith.truncf(to, v)
    if (is_float(to) and to.width == 16) or (is_float(src) and src.width == 16):
        return convert(convert(v, f32()), to)  # int <-> half float also needs compiler-rt: go through f32
    from_unsigned, to_unsigned = _UNSIGNED.get()
    if is_float(to):
        return arith.uitofp(to, v) if is_bool(src) or from_unsigned else arith.sitofp(to, v)
    if is_float(src):
        if to_unsigned and to.width < 64:  # as NumPy on x86: through int64, then wrapped to the width
            return arith.trunci(to, _float_to_int(v, 64))
        if to_unsigned:
            return arith.fptoui(to, v)
        # as NumPy on x86: int8 and int16 through int32, then wrapped to the width (70000.0 as int8 is 112)
        wide = _float_to_int(v, max(to.width, 32))
        return wide if to.width >= 32 else arith.trunci(to, wide)
    if to.width > src.width:
        return arith.extui(to, v) if is_bool(src) or from_unsigned else arith.extsi(to, v)
    return arith.trunci(to, v)


def int_like(k: int, v: ir.Value, width: int) -> ir.Value:
    """The ``width``-bit integer constant ``k`` (two's complement), splat to ``v``'s vector shape if ``v`` is a
    vector."""
    t = ir.IntegerType.get_signless(width)
    k = k - (1 << width) if k >= 1 << (width - 1) else k
    if isinstance(v.type, ir.VectorType):
        vt = ir.VectorType.get(v.type.shape, t)
        return arith.constant(vt, ir.DenseElementsAttr.get_splat(vt, ir.IntegerAttr.get(t, k)))
    return arith.constant(t, ir.IntegerAttr.get(t, k))


def retyped(v: ir.Value, t: ir.Type) -> ir.Type:
    """``t``, or a vector of ``t`` shaped as ``v`` if ``v`` is a vector."""
    return ir.VectorType.get(v.type.shape, t) if isinstance(v.type, ir.VectorType) else t


def f64_to_f32_odd(v: ir.Value) -> ir.Value:
    """f64 -> f32 rounded to odd: toward zero, with the lowest mantissa bit set when inexact. f32 has at least two
    bits more than f16 (24 against 11), so rounding this once more to f16 (to nearest even) gives what one rounding
    of the f64 would: no value lands on an f16 half-way point it was not on (``1 + 2**-11 + 2**-40`` rounded to f32
    first is the tie ``1 + 2**-11``, which went down to 1.0; NumPy gives 1.001). NaN and inf pass unchanged; a
    value past the f32 range becomes the largest f32 (odd), still inf in f16."""
    near = arith.truncf(retyped(v, f32()), v)  # to nearest: one of the two f32 neighbours
    back = arith.extf(v.type, near)
    bits = arith.bitcast(retyped(v, ir.IntegerType.get_signless(32)), near)
    past = arith.cmpf(arith.CmpFPredicate.OGT, math.absf(back), math.absf(v))  # rounded away from zero: step back
    bits = arith.select(past, arith.subi(bits, int_like(1, v, 32)), bits)
    inexact = arith.cmpf(arith.CmpFPredicate.ONE, back, v)
    bits = arith.select(inexact, arith.ori(bits, int_like(1, v, 32)), bits)
    return arith.bitcast(near.type, bits)


def _float_to_int(v: ir.Value, width: int) -> ir.Value:
    """``v`` toward zero as a signed ``width``-bit integer, the smallest one where ``v`` is NaN or outside the range:
    x86's "integer indefinite", which NumPy gives. (LLVM's fptosi of such a value is poison: a vectorized loop and
    its scalar remainder gave different answers.)"""
    t, bound = ir.IntegerType.get_signless(width), float(1 << (width - 1))
    inside = arith.andi(arith.cmpf(arith.CmpFPredicate.OGE, v, scalar(-bound, v.type)),
                        arith.cmpf(arith.CmpFPredicate.OLT, v, scalar(bound, v.type)))
    return arith.select(inside, arith.fptosi(t, v), scalar(-(1 << (width - 1)), t))


# --- sizes ---------------------------------------------------------------------------------------------------
def as_index(s: Size) -> ir.Value:
    return index(s) if isinstance(s, int) else s


def dim(v: ir.Value, axis: int) -> Size:
    d = v.type.shape[axis]
    return tensor.dim(v, index(axis)) if d == DYN else d


def sizes_of(v: ir.Value) -> list[Size]:
    return [dim(v, a) for a in range(v.type.rank)]


def _binop(a: Size, b: Size, py: Callable[[int, int], int], emit: Callable) -> Size:
    if isinstance(a, int) and isinstance(b, int):
        return py(a, b)
    return emit(as_index(a), as_index(b))


def sadd(a: Size, b: Size) -> Size:
    if isinstance(b, int) and b == 0:
        return a
    return _binop(a, b, lambda x, y: x + y, arith.addi)


def ssub(a: Size, b: Size) -> Size:
    if isinstance(b, int) and b == 0:
        return a
    return _binop(a, b, lambda x, y: x - y, arith.subi)


def smul(a: Size, b: Size) -> Size:
    if isinstance(b, int) and b == 1:
        return a
    return _binop(a, b, lambda x, y: x * y, arith.muli)


def sfloordiv(a: Size, b: Size) -> Size:
    if isinstance(b, int) and b == 1:
        return a
    return _binop(a, b, lambda x, y: x // y, arith.floordivsi)


def sceildiv(a: Size, b: Size) -> Size:
    return _binop(a, b, lambda x, y: -(-x // y), arith.ceildivsi)


def smax(a: Size, b: Size) -> Size:
    return _binop(a, b, max, arith.maxsi)


def smin(a: Size, b: Size) -> Size:
    return _binop(a, b, min, arith.minsi)


def sprod(sizes: Sequence[Size]) -> Size:
    out: Size = 1
    for s in sizes:
        out = smul(out, s)
    return out


# --- tensors -------------------------------------------------------------------------------------------------
def empty(sizes: Sequence[Size], t: ir.Type) -> ir.Value:
    return tensor.empty(list(sizes), elem(t))


def filled(sizes: Sequence[Size], t: ir.Type, value: Union[ir.Value, int, float]) -> ir.Value:
    if not isinstance(value, ir.Value):
        value = scalar(value, t)
    return linalg.fill(value, outs=[empty(sizes, t)])


def cast_to(v: ir.Value, t: ir.Type) -> ir.Value:
    """``v`` as type ``t``: itself, or a ``tensor.cast`` between static and dynamic dims of the same shape."""
    return v if v.type == t else tensor.cast(t, v)


def amap(ndims: int, exprs: Sequence[Optional[int]]) -> ir.AffineMap:
    """``(d0, ..., d{ndims-1}) -> (exprs)`` where an int is a dim and None the constant 0."""
    return ir.AffineMap.get(ndims, 0, [ir.AffineConstantExpr.get(0) if e is None else ir.AffineDimExpr.get(e)
                                       for e in exprs])


def identity(ndims: int) -> ir.AffineMap:
    return ir.AffineMap.get_identity(ndims)


def generic(inputs: Sequence[ir.Value], inits: Sequence[ir.Value], maps: Sequence[ir.AffineMap],
            iterators: Sequence[str], body: Callable[..., Union[ir.Value, Sequence[ir.Value]]]) -> list[ir.Value]:
    """A ``linalg.generic``; ``body(*ins, *outs)`` returns the yielded value(s). Returns its results."""
    op = linalg.GenericOp_(list(inputs), list(inits), list(maps), list(iterators))
    block = op.regions[0].blocks[0]
    with ir.InsertionPoint(block):
        out = body(*block.arguments)
        linalg.YieldOp(list(out) if isinstance(out, (list, tuple)) else [out])
    return list(op.results)


def loop_index(axis: int) -> ir.Value:
    """The current iteration index of loop ``axis`` inside a generic's body."""
    return linalg.IndexOp(axis).result


def broadcast_map(v: ir.Value, out_rank: int, out_shape: Sequence[int]) -> ir.AffineMap:
    """NumPy broadcasting of ``v`` into an iteration space of ``out_rank`` loops (dims align right; a static 1
    against a dim that is not a static 1 reads index 0)."""
    rank = v.type.rank
    exprs: list[Optional[int]] = []
    for i, d in enumerate(v.type.shape):
        axis = out_rank - rank + i
        exprs.append(None if d == 1 and out_shape[axis] != 1 else axis)
    return amap(out_rank, exprs)


def broadcast_sizes(inputs: Sequence[ir.Value], out_type: ir.RankedTensorType) -> list[Size]:
    """The sizes of a broadcast result: static dims from its type, a dynamic one from an input that has it."""
    out = []
    for axis, d in enumerate(out_type.shape):
        if d != DYN:
            out.append(d)
            continue
        for v in inputs:
            j = axis - (out_type.rank - v.type.rank)
            if j >= 0 and v.type.shape[j] == DYN:
                out.append(dim(v, j))
                break
        else:
            raise LegalizeError(f"cannot tell the size of dynamic axis {axis} of {out_type} from the operands")
    return out


def map_elementwise(inputs: Sequence[ir.Value], out_type: ir.RankedTensorType,
                    fn: Callable[..., ir.Value], sizes: Optional[Sequence[Size]] = None) -> ir.Value:
    """``out[i] = fn(*(x[broadcast i] for x in inputs))`` as one parallel ``linalg.generic``."""
    sizes = list(sizes) if sizes is not None else broadcast_sizes(inputs, out_type)
    rank, shape = out_type.rank, list(out_type.shape)
    maps = [broadcast_map(v, rank, shape) for v in inputs] + [identity(rank)]
    init = empty(sizes, out_type.element_type)
    (res,) = generic(inputs, [init], maps, ["parallel"] * rank, lambda *args: fn(*args[:len(inputs)]))
    return cast_to(res, out_type)


def reduce(x: ir.Value, axes: Sequence[int], acc_type: ir.Type, init: Union[ir.Value, int, float],
           combine: Callable[[ir.Value, ir.Value], ir.Value],
           pre: Optional[Callable[[ir.Value], ir.Value]] = None) -> ir.Value:
    """Reduce ``x`` over ``axes`` (dropped from the result) into ``acc_type``: ``acc = combine(pre(x), acc)``."""
    rank = x.type.rank
    kept = [a for a in range(rank) if a not in axes]
    acc = filled([dim(x, a) for a in kept], acc_type, init)
    iters = ["reduction" if a in axes else "parallel" for a in range(rank)]
    maps = [identity(rank), amap(rank, kept)]

    def body(v, a):
        v = pre(v) if pre else convert(v, acc_type)
        return combine(v, a)

    return generic([x], [acc], maps, iters, body)[0]


def reshape(src: ir.Value, sizes: Sequence[Size], t: Optional[ir.Type] = None) -> ir.Value:
    """``src`` (row-major) with the shape ``sizes``: collapsed to 1-D, then expanded (canonicalization folds the
    pair into one reshape where it can)."""
    out_type = tensor_type(sizes, t or elem(src))
    if src.type.rank == 0 and len(sizes) == 0:
        return src
    flat_t = ir.RankedTensorType.get([_static_prod(src.type.shape)], elem(src))
    if src.type.rank == 0:
        flat = tensor.expand_shape(flat_t, src, [], [], [1])
    elif src.type.rank == 1:
        flat = src
    else:
        flat = tensor.collapse_shape(flat_t, src, [list(range(src.type.rank))])
    if len(sizes) == 0:
        return tensor.collapse_shape(out_type, cast_to(flat, ir.RankedTensorType.get([1], elem(src))), [])
    dynamic = [s for s in sizes if not isinstance(s, int)]
    if len(sizes) == 1 and not dynamic:
        return cast_to(flat, out_type)  # (a cast to a static size is checked: size_checks._guard_cast)
    if len(dynamic) > 1:
        # expand-strided-metadata asserts (aborts) on an expand_shape group with two dynamic sizes:
        # reshape by a shape tensor instead (size_checks._guard_reshape checks its element count).
        shape = tensor.from_elements(ir.RankedTensorType.get([len(sizes)], ir.IndexType.get()),
                                     [as_index(s) for s in sizes])
        return tensor.reshape(out_type, flat, shape)
    # expand_shape wants the flat size dynamic exactly when a target size is ((6,) -> (2, m), (m,) -> (2, 3)).
    # One dynamic size is an expand_shape too, of 1-D into 1-D: it carries the size for size_checks._guard_expand
    # to check against the flat count (canonicalization then folds it away).
    flat = cast_to(flat, ir.RankedTensorType.get([DYN if dynamic else _static_prod(out_type.shape)], elem(src)))
    return tensor.expand_shape(out_type, flat, [list(range(len(sizes)))], dynamic, list(out_type.shape))


def _static_prod(shape: Sequence[int]) -> int:
    out = 1
    for d in shape:
        if d == DYN:
            return DYN
        out *= d
    return out


def norm_axes(axes, rank: int) -> list[int]:
    """Relax's ``axis`` attribute (None, an int, a tuple; negatives count from the end) as sorted axes."""
    if axes is None:
        return list(range(rank))
    if isinstance(axes, int):
        axes = (axes,)
    return sorted(a % rank for a in axes)


# --- helpers of the nn and gradient lowerings ------------------------------------------------------------------
Expr = Union[int, None, ir.AffineExpr]


def emap(ndims: int, exprs: Sequence[Expr]) -> ir.AffineMap:
    """An affine map whose results may be dims (int), the constant 0 (None) or any ``AffineExpr``."""
    out = []
    for e in exprs:
        out.append(ir.AffineConstantExpr.get(0) if e is None else ir.AffineDimExpr.get(e) if isinstance(e, int) else e)
    return ir.AffineMap.get(ndims, 0, out)


def cast_elements(value: ir.Value, t: ir.Type) -> ir.Value:
    """``value`` with its elements converted to ``t`` (itself if they already are)."""
    if elem(value) == t:
        return value
    sizes = sizes_of(value)
    return map_elementwise([value], tensor_type(sizes, t), lambda v: convert(v, t), sizes)


def writes_nothing(src: ir.Value, dest: ir.Value) -> bool:
    """Whether inserting ``src`` into ``dest`` writes no element, known statically: either has a static 0-size
    dim. Such an insert is ``dest`` itself; as a ``tensor.insert_slice`` the verifier would refuse it (an offset
    0 into a 0-size dim is out of bounds)."""
    return any(d == 0 for v in (src, dest) for d in ir.RankedTensorType(v.type).shape)


def insert_strided(src: ir.Value, dest: ir.Value, offsets: Sequence[Size], strides: Sequence[int]) -> ir.Value:
    """``dest`` with ``src`` written at ``offsets`` every ``strides`` elements (``tensor.insert_slice``)."""
    sizes = sizes_of(src)
    if writes_nothing(src, dest):
        return dest
    dyn = lambda vals: [v for v in vals if not isinstance(v, int)]  # noqa: E731
    stat = lambda vals: [v if isinstance(v, int) else DYN for v in vals]  # noqa: E731
    return tensor.insert_slice(src, dest, dyn(offsets), dyn(sizes), [], stat(offsets), stat(sizes), list(strides))


# --- take, strided_slice ------------------------------------------------------------------------------------------
