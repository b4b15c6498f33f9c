"""Runtime checks of the sizes an op's inference assumed equal.

Relax infers ``matmul((2,), (2 * n,))`` or a channel count given statically on one operand and symbolically on
another as valid, assuming the sizes agree (as TVM does); the interpreter raises when they do not. In compiled
code the op's loops would take their bounds from one operand and read the other out of bounds. So after
legalization every linalg op with ``indexing_maps`` is checked: for each loop dimension, the operand dimensions it
indexes must be equal. Where one may differ at run time, the op is guarded::

    %bad = arith.cmpi ne, %k_of_b, %k_of_a        (tagged relax_mlir.size_check)
    <report %bad in the error slot: ValueError after the call>
    %r = scf.if %bad { scf.yield %outs } else { %op = linalg...; scf.yield %op }

so the op never runs on inconsistent sizes (its ``outs`` stand in; the call raises). Most checks compare a value
with itself once canonicalization and CSE have run and fold away; :func:`drop_proven` then removes those whose
two sizes are the same size variable of the function's parameters (the runtime binds each once, checking every
parameter: ``relax_mlir.arg_sizes``, written by the export). What is left is a real run-time check.

Lowerings that read or write one operand by another's sizes without indexing maps (``concat``'s ``insert_slice``
of each input into a result sized from the first, ``scatter_elements``' and ``nll_loss``' ``tensor.extract`` in
loops over another operand) compare those sizes themselves: :func:`assumed_equal`, then :func:`unless_sizes`
around the code that would leave a buffer. Their comparisons are tagged the same way, and dropped the same way.

Reshapes assert an element count: an ``expand_shape`` into dynamic sizes (:func:`_guard_expand`) and a reshape by a
shape tensor (``core.reshape``'s form for two or more dynamic sizes, :func:`_guard_reshape`) compare the product of
the new sizes with the input's count, so a new shape larger than the input never describes memory it lacks.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator, Optional, Sequence

from mlir import ir
from mlir.dialects import arith, scf, tensor

from ..error_slot import SHAPE_CHECK_PREFIX
from ..guard import move_into_else
from .checks import report_if, where
from .core import Size, as_index, cast_to, empty, reshape

TAG = "relax_mlir.size_check"
#: Function attribute written by the export: per parameter, its dims as text (``["n", "4"]``).
ARG_SIZES = "relax_mlir.arg_sizes"


def insert_size_checks(module: ir.Module) -> int:
    """Guard every linalg op whose loop dimensions index operand sizes that may differ; returns how many."""
    ops: list[ir.Operation] = []

    casts: list[ir.Operation] = []
    expands: list[ir.Operation] = []
    reshapes: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("linalg.") and ("indexing_maps" in op.attributes or op.name in _DEFAULT_MAPS) \
                and len(op.results):
            ops.append(op)
        elif op.name == "tensor.cast" and _narrowed_axes(op):
            casts.append(op)
        elif op.name == "tensor.expand_shape" and len(op.operands) > 1:  # some size of the new shape dynamic
            expands.append(op)
        elif op.name == "tensor.reshape":  # by a shape tensor: core.reshape's form for two or more dynamic sizes
            reshapes.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    with _tracing():  # (a guard's result is named as its op's was: the names followed so far stay valid)
        return sum(_guard(op) for op in ops) + sum(_guard_cast(op) for op in casts) + \
            sum(_guard_expand(op) for op in expands) + sum(_guard_reshape(op) for op in reshapes)


_memo: ContextVar[Optional[dict]] = ContextVar("relax_mlir_size_names", default=None)


@contextmanager
def _tracing() -> Iterator[None]:
    """Within, :func:`_memoised` functions remember their results: for one pass over a module whose values keep
    their sizes' names (nothing is erased meanwhile, so no value is replaced by another at the same address)."""
    token = _memo.set({})
    try:
        yield
    finally:
        _memo.reset(token)


def _memoised(fn: Callable) -> Callable:
    """``fn`` (of values, axes and depths) computed once per arguments inside :func:`_tracing`. Each guard's
    ``scf.if`` yields its op's ``outs`` in one branch and the op's result, whose sizes are those ``outs``', in the
    other: followed through both branches, a chain of k guarded ops is 2^k paths back to the same values. The
    depth is part of the key, so a result cut short by a depth limit is never reused where it would not be."""
    @functools.wraps(fn)
    def remembered(*args):
        memo = _memo.get()
        if memo is None:
            return fn(*args)
        key = (fn.__name__, *args)
        if key not in memo:
            memo[key] = fn(*args)
        return memo[key]
    return remembered


def _same_count(source: ir.Value, axes: Sequence[int], sizes: list) -> bool:
    """Whether dimensions ``axes`` of ``source`` and ``sizes`` (ints and index values) multiply to what the
    parameters name the same product of sizes (``n * 32`` both ways for a CNN's flattening)."""
    want = _product([(s, ()) if isinstance(s, int) else _value_factors(s) for s in sizes])
    return want is not None and want == _product([_dim_factors(source, a) for a in axes])


Factors = Optional[tuple[int, tuple[str, ...]]]  # (static factor, sorted size-variable names): a product


def _product(parts: list) -> Factors:
    if any(p is None for p in parts):
        return None
    static, names = 1, []
    for value, keys in parts:
        static *= value
        names += keys
    return static, tuple(sorted(names))


@_memoised
def _value_factors(value: ir.Value, depth: int = 0) -> Factors:
    """An index value as a product: a constant, a parameter's dimension, or a product of those."""
    op = _defining_op(value)
    if op is not None and op.name == "arith.muli" and depth < 16:
        return _product([_value_factors(v, depth + 1) for v in op.operands])
    if op is not None and op.name == "tensor.dim":  # (through _dim_factors: a collapsed dimension is a product)
        axis = _size_key(op.operands[1])
        return None if axis is None else _dim_factors(op.operands[0], int(axis))
    return _key_factors(_size_key(value))


def _key_factors(key: Optional[str]) -> Factors:
    """A size as ``_size_key`` names it (``"32"``, ``"n"``) as a product."""
    return None if key is None else (int(key), ()) if key.lstrip("-").isdigit() else (1, (key,))


@_memoised
def _dim_factors(t: ir.Value, axis: int, depth: int = 0) -> Factors:
    """Dimension ``axis`` of ``t`` as a product of static sizes and parameter size variables (a collapsed
    dimension is the product of those it merged)."""
    ttype = ir.RankedTensorType(t.type)
    if not ttype.is_dynamic_dim(axis):
        return ttype.shape[axis], ()
    op = _defining_op(t)
    if op is not None and op.name == "tensor.collapse_shape" and depth < 16:
        group = [ir.IntegerAttr(i).value for i in ir.ArrayAttr(ir.ArrayAttr(op.attributes["reassociation"])[axis])]
        return _product([_dim_factors(op.operands[0], g, depth + 1) for g in group])
    if op is not None and op.name == "tensor.cast" and depth < 16:
        return _dim_factors(op.operands[0], axis, depth + 1)
    return _key_factors(_dim_key(t, axis))


def _guard_expand(op: ir.Operation) -> int:
    """An expand_shape of a dimension into dynamic sizes (a weight of 3, or of ``k``, reshaped to ``(1, c)``)
    asserts that they multiply to it; unless both sides are the same product of sizes (``_same_count``) that is
    checked, and on a mismatch an empty tensor of the new shape stands in (the expansion would describe memory the
    source does not have)."""
    idx, i64 = ir.IndexType.get(), ir.IntegerType.get_signless(64)
    source, target = op.operands[0], ir.RankedTensorType(op.results[0].type)
    dynamic = iter(list(op.operands)[1:])
    sizes = [next(dynamic) if target.is_dynamic_dim(a) else target.shape[a] for a in range(target.rank)]
    groups = [[ir.IntegerAttr(i).value for i in ir.ArrayAttr(g)] for g in ir.ArrayAttr(op.attributes["reassociation"])]
    with ir.InsertionPoint(op), op.location:
        mismatch: Optional[ir.Value] = None
        for axis, group in enumerate(groups):
            if all(isinstance(sizes[a], int) for a in group) or _same_count(source, [axis], [sizes[a] for a in group]):
                continue  # static sizes: the verifier saw their product; the same size variable on both sides
            product = arith.constant(idx, 1)
            for a in group:
                product = arith.muli(product, sizes[a] if not isinstance(sizes[a], int) else arith.constant(idx, sizes[a]))
            got = tensor.dim(source, arith.constant(idx, axis))
            bad = arith.cmpi(arith.CmpIPredicate.ne, got, product)
            bad.owner.attributes[TAG] = ir.UnitAttr.get()
            what = "the input has" if _flattened(source) else "dimension {position} of the input has"
            report_if(op, bad, arith.index_cast(i64, got), arith.constant(idx, axis),
                      f"{SHAPE_CHECK_PREFIX}{where(op)}: reshape: {what} {{value}} elements, where the new shape has "
                      "{extent} (sizes the op's inference assumed equal)", product)
            mismatch = bad if mismatch is None else arith.ori(mismatch, bad)
    if mismatch is None:
        return 0
    return _unless(op, mismatch, target, lambda: [  # (a size that may be negative made 0 in the stand-in)
        s if isinstance(s, int) or _never_negative(s) else arith.maxsi(s, arith.constant(idx, 0)) for s in sizes])


def _flattened(source: ir.Value) -> bool:
    """Whether ``source`` is a tensor collapsed to 1-D (through casts): ``core.reshape``'s flat input, whose count
    is the input's, not one of its dimensions."""
    op = _defining_op(source)
    while op is not None and op.name == "tensor.cast":
        op = _defining_op(op.operands[0])
    return op is not None and op.name == "tensor.collapse_shape" and ir.RankedTensorType(source.type).rank == 1


def _guard_reshape(op: ir.Operation) -> int:
    """A reshape by a shape tensor asserts that the sizes it holds multiply to the source's element count. Unless
    both sides are the same product of sizes (``_same_count``) that is checked: on a mismatch the reshape takes a
    fresh tensor of the new shape's count instead of its source (a larger shape would describe memory the source
    does not have, a smaller one silently drop elements). A size that may be negative (``c - 5``: not a product of
    sizes, nor a quotient of such) is checked too, and taken as 0 (``(c - 4, c - 5)`` is 6 elements at c = 2).
    The reshape stays where it is, so its sizes are still the shape's (canonicalization sees them)."""
    idx, i64 = ir.IndexType.get(), ir.IntegerType.get_signless(64)
    source, target = op.operands[0], ir.RankedTensorType(op.results[0].type)
    stype = ir.RankedTensorType(source.type)
    with ir.InsertionPoint(op), op.location:
        sizes = _shape_sizes(op.operands[1], target)
        if (stype.has_static_shape and target.has_static_shape) or _same_count(source, range(stype.rank), sizes):
            return 0  # static: the verifier compared the counts; the same size variables on both sides
        unsure = [a for a, s in enumerate(sizes) if not isinstance(s, int) and not _never_negative(s)]
        for axis in unsure:
            report_if(op, arith.cmpi(arith.CmpIPredicate.slt, sizes[axis], arith.constant(idx, 0)),
                      arith.index_cast(i64, sizes[axis]), arith.constant(idx, axis),
                      f"{SHAPE_CHECK_PREFIX}{where(op)}: reshape: dimension {{position}} of the new shape is "
                      "{value}, a negative size")
            sizes[axis] = arith.maxsi(sizes[axis], arith.constant(idx, 0))
        if unsure:
            shape_t = ir.RankedTensorType.get([target.rank], idx)
            op.operands[1] = tensor.from_elements(shape_t, [arith.constant(idx, s) if isinstance(s, int) else s
                                                            for s in sizes])
        count, product = arith.constant(idx, 1), arith.constant(idx, 1)
        for a in range(stype.rank):
            count = arith.muli(count, tensor.dim(source, arith.constant(idx, a)))
        for s in sizes:
            product = arith.muli(product, s if not isinstance(s, int) else arith.constant(idx, s))
        bad = arith.cmpi(arith.CmpIPredicate.ne, count, product)
        bad.owner.attributes[TAG] = ir.UnitAttr.get()
        report_if(op, bad, arith.index_cast(i64, count), arith.constant(idx, 0),
                  f"{SHAPE_CHECK_PREFIX}{where(op)}: reshape: the input has {{value}} elements, where the new shape "
                  "has {extent} (sizes the op's inference assumed equal)", product)
        flat_t = ir.RankedTensorType.get([ir.ShapedType.get_dynamic_size()], stype.element_type)
        choose = scf.IfOp(bad, [flat_t], has_else=True)
        with ir.InsertionPoint(choose.then_block):
            scf.YieldOp([tensor.EmptyOp([product], stype.element_type).result])
        with ir.InsertionPoint(choose.else_block):
            scf.YieldOp([cast_to(reshape(source, [count]), flat_t)])
        op.operands[0] = choose.results[0]
    return 1


@_memoised
def _never_negative(size: ir.Value, depth: int = 0) -> bool:
    """Whether an index value is known not to be negative: a tensor's dimension, a constant of at least 0, or a
    sum, product, quotient, maximum or minimum of such (``c // 2``)."""
    op = _defining_op(size)
    if op is None or depth > 16:
        return False
    if op.name == "tensor.dim":
        return True
    if op.name == "arith.constant":
        return ir.IntegerAttr(op.attributes["value"]).value >= 0
    if op.name in ("arith.addi", "arith.muli", "arith.floordivsi", "arith.divsi", "arith.ceildivsi", "arith.divui",
                   "arith.ceildivui", "arith.minsi", "arith.minui"):
        return all(_never_negative(v, depth + 1) for v in op.operands)
    if op.name in ("arith.maxsi", "arith.maxui"):
        return any(_never_negative(v, depth + 1) for v in op.operands)
    return False


def _shape_sizes(shape: ir.Value, target: ir.RankedTensorType) -> list:
    """The new shape a shape tensor holds: ints where the result type has them, else index values (the operands
    of its ``tensor.from_elements``, or read from it)."""
    op = _defining_op(shape)
    idx = ir.IndexType.get()
    sizes: list = []
    for a in range(target.rank):
        if not target.is_dynamic_dim(a):
            sizes.append(target.shape[a])
        else:
            s = op.operands[a] if op is not None and op.name == "tensor.from_elements" else \
                tensor.extract(shape, [arith.constant(idx, a)])
            sizes.append(s if s.type == idx else arith.index_cast(idx, s))
    return sizes


def _unless(op: ir.Operation, mismatch: ir.Value, target: ir.RankedTensorType, sizes) -> int:
    """``op`` (one result of type ``target``) moved into ``scf.if %mismatch {empty} else {op}``: on a mismatch an
    empty tensor of ``sizes()`` (built in that branch) stands in and the op does not run."""
    move_into_else(op, mismatch, lambda: [tensor.EmptyOp(sizes(), target.element_type).result])
    return 1


def assumed_equal(op: ir.Operation, checks: Sequence[tuple[Size, Size, int, str]]) -> Optional[ir.Value]:
    """For a lowering that reads or writes one operand by another's sizes (``tensor.extract``, ``insert_slice``:
    no indexing maps :func:`insert_size_checks` could compare): at the current insertion point, each ``(got,
    want, position, message)`` of sizes (ints or index values) that may differ is compared and a difference
    reported into the error slot (``{value}`` is ``got``, ``{extent}`` is ``want``). Returns whether any differs
    (for :func:`unless_sizes`), None when all are static (inference compared those). The comparisons are tagged
    as the guards' are, so :func:`drop_proven` removes those of the same size variable."""
    i64 = ir.IntegerType.get_signless(64)
    mismatch: Optional[ir.Value] = None
    for got, want, position, message in checks:
        if isinstance(got, int) and isinstance(want, int):
            continue
        got, want = as_index(got), as_index(want)
        bad = arith.cmpi(arith.CmpIPredicate.ne, got, want)
        bad.owner.attributes[TAG] = ir.UnitAttr.get()
        report_if(op, bad, arith.index_cast(i64, got), as_index(position), f"{SHAPE_CHECK_PREFIX}{message}", want)
        mismatch = bad if mismatch is None else arith.ori(mismatch, bad)
    return mismatch


def unless_sizes(mismatch: Optional[ir.Value], target: ir.RankedTensorType, sizes: Sequence[Size],
                 build: Callable[[], ir.Value]) -> ir.Value:
    """``build()`` (a value of type ``target``), built in ``scf.if %mismatch {empty of sizes} else {build()}``: on
    a mismatch :func:`assumed_equal` reported, the op's code, which would leave a buffer, does not run."""
    if mismatch is None:
        return build()
    choose = scf.IfOp(mismatch, [target], has_else=True)
    with ir.InsertionPoint(choose.then_block):
        scf.YieldOp([cast_to(empty(sizes, target.element_type), target)])
    with ir.InsertionPoint(choose.else_block):
        scf.YieldOp([cast_to(build(), target)])
    return choose.results[0]


def _narrowed_axes(op: ir.Operation) -> list[int]:
    """The axes a ``tensor.cast`` makes static from dynamic: sizes a lowering asserted (``?`` to ``2``)."""
    src, dst = op.operands[0].type, op.results[0].type
    if not (isinstance(src, ir.RankedTensorType) and isinstance(dst, ir.RankedTensorType)) or src.rank != dst.rank:
        return []
    src, dst = ir.RankedTensorType(src), ir.RankedTensorType(dst)
    return [a for a in range(src.rank) if src.is_dynamic_dim(a) and not dst.is_dynamic_dim(a)]


def _guard_cast(op: ir.Operation) -> int:
    """A cast to a static size checks it; on a mismatch an empty tensor of the cast's type stands in."""
    idx, i64 = ir.IndexType.get(), ir.IntegerType.get_signless(64)
    source, target = op.operands[0], ir.RankedTensorType(op.results[0].type)
    with ir.InsertionPoint(op), op.location:
        mismatch: Optional[ir.Value] = None
        for axis in _narrowed_axes(op):
            got = tensor.dim(source, arith.constant(idx, axis))
            bad = arith.cmpi(arith.CmpIPredicate.ne, got, arith.constant(idx, target.shape[axis]))
            bad.owner.attributes[TAG] = ir.UnitAttr.get()
            report_if(op, bad, arith.index_cast(i64, got), arith.constant(idx, axis),
                      f"{SHAPE_CHECK_PREFIX}{where(op)}: dimension {{position}} is {{value}}, expected "
                      f"{target.shape[axis]} (a size the op's inference assumed equal to a static one)")
            mismatch = bad if mismatch is None else arith.ori(mismatch, bad)
    return _unless(op, mismatch, target, lambda: [
        tensor.dim(source, arith.constant(idx, a)) if target.is_dynamic_dim(a) else target.shape[a]
        for a in range(target.rank)])


# Named ops built from Python carry no indexing_maps attribute (the default is implied): theirs, as MLIR defines.
_DEFAULT_MAPS = {
    "linalg.matmul": ("(d0, d1, d2) -> (d0, d2)", "(d0, d1, d2) -> (d2, d1)", "(d0, d1, d2) -> (d0, d1)"),
    "linalg.batch_matmul": ("(d0, d1, d2, d3) -> (d0, d1, d3)", "(d0, d1, d2, d3) -> (d0, d3, d2)",
                            "(d0, d1, d2, d3) -> (d0, d1, d2)"),
    # convolutions, written with stride and dilation 1: the windowed dimensions are never compared (nor the
    # batch and output channels: _COMPARED_LOOPS), so the strides do not matter here
    "linalg.conv_2d_nchw_fchw": ("(d0, d1, d2, d3, d4, d5, d6) -> (d0, d4, d2 + d5, d3 + d6)",
                                 "(d0, d1, d2, d3, d4, d5, d6) -> (d1, d4, d5, d6)",
                                 "(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3)"),
    "linalg.conv_2d_ngchw_gfchw": ("(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)",
                                   "(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)",
                                   "(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)"),
}


#: Named ops whose loops are compared only where the lowering cannot have made the sizes agree: a convolution's
#: input channels (and groups) are the input's and the filter's own; its batch and output channels are the ones
#: the lowering gave its result (a padded input's batch, which canonicalization does not trace back, would keep a
#: check in every symbolic-batch CNN step).
_COMPARED_LOOPS = {"linalg.conv_2d_nchw_fchw": {4}, "linalg.conv_2d_ngchw_gfchw": {1, 5}}


def _indexing_maps(op: ir.Operation) -> list:
    if "indexing_maps" in op.attributes:
        return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    return [ir.AffineMapAttr(ir.Attribute.parse(f"affine_map<{m}>")).value for m in _DEFAULT_MAPS.get(op.name, ())]


def _pairs(op: ir.Operation) -> list[tuple[tuple[ir.Value, int], tuple[ir.Value, int]]]:
    """(reference, other) operand dimensions that one loop dimension indexes and that may differ."""
    maps = _indexing_maps(op)
    operands = list(op.operands)
    if len(maps) != len(operands):
        return []
    loops: dict[int, list[tuple[ir.Value, int]]] = {}
    for value, amap in zip(operands, maps):
        if not isinstance(value.type, ir.RankedTensorType):
            continue
        for axis, expr in enumerate(amap.results):
            if isinstance(expr, ir.AffineDimExpr):
                loops.setdefault(expr.position, []).append((value, axis))
    pairs = []
    compared = _COMPARED_LOOPS.get(op.name)
    for loop, entries in loops.items():
        if compared is not None and loop not in compared:
            continue
        static = [e for e in entries if not e[0].type.is_dynamic_dim(e[1])]
        if len(entries) < 2 or len(static) == len(entries):
            continue
        ref = static[0] if static else entries[0]
        pairs += [(ref, e) for e in entries if e is not ref and e[0].type.is_dynamic_dim(e[1])]
    return pairs


def _guard(op: ir.Operation) -> int:
    pairs = _pairs(op)
    if not pairs:
        return 0
    idx, i64 = ir.IndexType.get(), ir.IntegerType.get_signless(64)
    n_ins = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[0] \
        if "operandSegmentSizes" in op.attributes else len(op.operands) - len(op.results)
    outs = list(op.operands)[n_ins:]
    with ir.InsertionPoint(op), op.location:
        mismatch: Optional[ir.Value] = None
        for (ref, ref_axis), (value, axis) in pairs:
            want = arith.constant(idx, ref.type.shape[ref_axis]) if not ref.type.is_dynamic_dim(ref_axis) \
                else tensor.dim(ref, arith.constant(idx, ref_axis))
            got = tensor.dim(value, arith.constant(idx, axis))
            bad = arith.cmpi(arith.CmpIPredicate.ne, got, want)
            bad.owner.attributes[TAG] = ir.UnitAttr.get()
            report_if(op, bad, arith.index_cast(i64, got), arith.constant(idx, axis),
                      f"{SHAPE_CHECK_PREFIX}{where(op)}: {op.name.split('.', 1)[1]}: an operand's dimension "
                      "{position} is {value}, "
                      "but another operand of the same loop dimension has size {extent} (sizes the op's inference "
                      "assumed equal)", extent=want)
            mismatch = bad if mismatch is None else arith.ori(mismatch, bad)
    move_into_else(op, mismatch, lambda: outs)
    return 1


def drop_proven(module: ir.Module) -> int:
    """Replace size checks whose two sizes are the same parameter size variable by ``false`` (canonicalization
    then removes the guard); returns how many."""
    proven: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "arith.cmpi" and TAG in op.attributes:
            a, b = (_size_key(v) for v in op.operands)
            if a is not None and a == b:
                proven.append(op)
        return ir.WalkResult.ADVANCE

    with _tracing():
        module.operation.walk(visit)
    for op in proven:
        with ir.InsertionPoint(op), op.location:
            false = arith.constant(ir.IntegerType.get_signless(1), 0)
        op.results[0].replace_all_uses_with(false)
        op.erase()
    return len(proven)


@_memoised
def _size_key(value: ir.Value) -> Optional[str]:
    """A size (an ``index`` value) as the parameters name it (``"n"``, ``"4"``), when it can be traced to a
    constant or a parameter's dimension; None otherwise."""
    op = _defining_op(value)
    if op is None:
        return None
    if op.name == "arith.constant":
        return str(ir.IntegerAttr(op.attributes["value"]).value)
    if op.name == "tensor.dim":
        axis = _size_key(op.operands[1])
        return None if axis is None else _dim_key(op.operands[0], int(axis))
    return None


@_memoised
def _dim_key(t: ir.Value, axis: int, depth: int = 0) -> Optional[str]:
    """Dimension ``axis`` of tensor ``t`` as the parameters name it, followed back through the ops whose result
    sizes are their operands' (destination-passing linalg ops, casts, empties, reshapes, guards)."""
    ttype = ir.RankedTensorType(t.type)
    if not ttype.is_dynamic_dim(axis):
        return str(ttype.shape[axis])
    if depth > 64:
        return None
    if isinstance(t.owner, ir.Block):
        func = t.owner.owner
        func = func.operation if not isinstance(func, ir.Operation) else func
        if func.name != "func.func":
            return None
        number = ir.BlockArgument(t).arg_number
        if ARG_SIZES not in func.attributes:  # no size variable shared between parameters: the dim is its own name
            return f"%arg{number}[{axis}]"
        dims = ir.ArrayAttr(ir.ArrayAttr(func.attributes[ARG_SIZES])[number])
        return ir.StringAttr(dims[axis]).value if axis < len(dims) else None
    op = _defining_op(t)
    number = ir.OpResult(t).result_number
    if op.name in ("tensor.empty", "tensor.expand_shape"):
        first = 0 if op.name == "tensor.empty" else 1  # expand_shape: the source, then the dynamic output sizes
        dynamic = sum(ttype.is_dynamic_dim(a) for a in range(axis))
        return _size_key(op.operands[first + dynamic])
    if op.name == "tensor.cast":
        return _dim_key(op.operands[0], axis, depth + 1)
    if op.name == "tensor.reshape":  # by the sizes a tensor.from_elements holds
        shape = _defining_op(op.operands[1])
        return _size_key(shape.operands[axis]) if shape is not None and shape.name == "tensor.from_elements" else None
    if op.name == "tensor.collapse_shape":  # a result dim that is one source dim, times static 1s
        group = [ir.IntegerAttr(i).value for i in ir.ArrayAttr(ir.ArrayAttr(op.attributes["reassociation"])[axis])]
        source = ir.RankedTensorType(op.operands[0].type)
        dynamic = [g for g in group if source.is_dynamic_dim(g)]
        if len(dynamic) == 1 and all(source.shape[g] == 1 for g in group if g != dynamic[0]):
            return _dim_key(op.operands[0], dynamic[0], depth + 1)
        return None
    if op.name == "tensor.insert_slice":
        return _dim_key(op.operands[1], axis, depth + 1)
    if op.name == "tensor.pad":  # an axis padded by nothing is its source's (a convolution pads only H and W)
        low, high = (list(ir.DenseI64ArrayAttr(op.attributes[k])) for k in ("static_low", "static_high"))
        return _dim_key(op.operands[0], axis, depth + 1) if low[axis] == high[axis] == 0 else None
    if op.name in ("linalg.transpose", "linalg.broadcast"):  # (input, init): the result is the init
        return _dim_key(op.operands[1], axis, depth + 1)
    if op.name.startswith("linalg.") and "operandSegmentSizes" in op.attributes:
        n_ins = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[0]
        return _dim_key(op.operands[n_ins + number], axis, depth + 1)
    if op.name == "scf.if":
        keys = {_dim_key(list(region.blocks[0].operations)[-1].operands[number], axis, depth + 1)
                for region in op.regions}
        return keys.pop() if len(keys) == 1 else None
    return None


def _defining_op(value: ir.Value) -> Optional[ir.Operation]:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner if isinstance(owner, ir.Operation) else owner.operation
