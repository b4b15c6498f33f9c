"""Elementwise and reduction schedules: large ``linalg.generic`` ops split across threads, short rows vectorized.

After fusion (``linalg-fuse-elementwise-ops``) a training step's elementwise work is a few ``linalg.generic``
ops: bias + ReLU, the ReLU mask of the gradient, the optimizer's update of every parameter, and reductions
such as a bias gradient (a sum over the batch) or a batch-norm statistic (a sum over batch and pixels per
channel). Their loops are vectorized by LLVM's loop vectorizer after ``convert-linalg-to-loops``; what they lack
on their own is the second core. A generic whose iteration space has at least ``PARALLEL_MIN_POINTS`` points
is split into one chunk per thread, which later becomes an OpenMP region; the loops inside each chunk stay as
they were:

* along its outermost parallel loop (``tile_using_forall`` with ``num_threads``), or
* when its outermost loop is a reduction and so is its innermost (a batch-norm statistic: loops ``(n, c, hw)``),
  along that outermost loop with one partial result per thread combined afterwards
  (``tile_reduction_using_forall``): each thread then reads the same images it wrote in the elementwise ops
  around it (which split by batch too). Split by channel instead, the chunks crossed the cores' caches and ran
  no faster than one thread. A reduction whose innermost loop is parallel (a bias gradient, ``(i, j)``) is split
  along ``j``: its per-thread partials would be written every iteration, interleaved.

Smaller generics stay on one thread: the fork/join would cost more than it saves. Measured on a 2-core Intel
Xeon (AVX-512), A/B in one process: the 28x28 CNN step 2.89 ms with the threshold at 2^18 points (a layer of the
wide MLP, the first choice), 2.45 at 2^17 and at 2^14; the tutorial MLP 0.137 -> 0.149 ms at 2^14 (its 128x128
SGD updates split) and unchanged at 2^17. Later, from 2^17 to 2^16, where it stands: the 28x28 CNN 2.33 -> 2.26
ms (its padded 14x14 activations, 100352 points, copied by both threads), the 784 MLP with Adam 0.412 -> 0.378
ms (its 784x128 update), the 8x8 CNN 0.390 -> 0.380 ms; nothing else has a generic between the two. On a 2-core AMD EPYC, the 1024-wide MLP's
serial elementwise work left the second core spinning at the barrier for 12% of the samples.

Rows shorter than a vector register with a long body (``vectorize_short_rows``: softmax and cross-entropy over 10
classes, whose ``exp`` is a polynomial of ~40 ops) are vectorized one row at a time, ``vector<10xf32>``: LLVM's
loop vectorizer leaves a 10-trip loop scalar at 16 lanes, and a per-row operand keeps the loops from being
coalesced. The tutorial MLP's step 0.098 -> 0.090 ms (A/B in one process, 2-core Intel Xeon, AVX-512); the 784
MLP's and the 8x8 CNN's unchanged within 1%; compile time unchanged.

A generic's loops follow its iteration space, outermost first: with two dynamic extents or more, one of them 0
(an ``exp`` of an ``(m, 0)`` input, sizes known at run time) left the outer loop running ``m`` times over nothing
(0.6-1.2 s at ``m = 2**31``; a static 0 folds away). Such a generic runs only when none of its dynamic extents is 0
(``skip_empty_generics``), as transposes do (``transpose.py``); one dynamic extent (a batch beside static widths)
stays as it was, for the schedules that read it.
"""

from __future__ import annotations

import re

from mlir import ir

from .common import (ANY, EPILOGUE, as_operation, defining_op, in_loop, indexing_maps, is_boolean, loop_ranges,
                     match_tagged, ops_named, schedule_each, skips_when_empty, unless_empty)

#: Iteration points from which a generic is split across threads (64x8x14x14, the 28x28 CNN's padded second
#: layer input, is; the tutorial MLP's 128x128 updates are not).
PARALLEL_MIN_POINTS = 2 ** 16

_TAG = "relax_mlir.par"
#: Whether a reduction whose outermost and innermost loops reduce is split along the outermost (partials per
#: thread); a module knob for A/B measurements.
SPLIT_REDUCTIONS = True


def plan_parallel_generic(op: ir.Operation, threads: int) -> list[int] | None:
    """``num_threads`` per loop for a large generic (``threads`` on its outermost parallel loop), or None."""
    if threads < 2 or op.name != "linalg.generic" or not op.results:
        return None
    if not all(isinstance(r.type, ir.RankedTensorType) for r in op.results):
        return None  # already bufferized: schedules run on tensors only
    ranges = loop_ranges(op)
    if ranges is None:
        return None
    points = 1
    for r in ranges:
        points *= r
    if points < PARALLEL_MIN_POINTS:
        return None
    kinds = [str(ir.Attribute(a)) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    splittable = _splittable_loops(op, len(ranges))
    if (SPLIT_REDUCTIONS and "reduction" in kinds[0] and "reduction" in kinds[-1] and ranges[0] >= threads
            and len(op.results) == 1 and 0 in splittable):
        counts = [0] * len(ranges)
        counts[0] = -threads
        return counts
    for loop, (kind, extent) in enumerate(zip(kinds, ranges)):
        if "parallel" in kind and extent >= threads and loop in splittable:
            counts = [0] * len(ranges)
            counts[loop] = threads
            return counts
    return None


def _splittable_loops(op: ir.Operation, n_loops: int) -> set[int]:
    """The loops a chunk per thread may be cut along: those no indexing map reads through ``floordiv``, ``mod``
    or ``ceildiv``. Tiling cuts an operand at the map of the chunk's first index and keeps reading it through the
    same map, which holds for sums and multiples of loops but not for these: the im2col copy of a strided
    convolution, ``(d1 floordiv 9, (d2 floordiv 126) * 2 + (d1 mod 9) floordiv 3, ...)``, split along ``d1``,
    read the wrong pixels in the second chunk (batch 1, two threads: every value wrong)."""
    blocked: set[int] = set()
    for amap in indexing_maps(op):
        for expr in amap.results:
            text = str(expr)
            if "floordiv" in text or "mod" in text or "ceildiv" in text:
                blocked.update(int(d) for d in re.findall(r"\bd(\d+)\b", text))
    return set(range(n_loops)) - blocked


def dynamic_extents(op: ir.Operation) -> list[tuple[ir.Value, int]]:
    """For each loop of a linalg op whose extent no operand gives statically: an operand and axis read by that loop
    alone (its extent at run time), outermost loop first. A loop read only through sums (a window) is left out."""
    maps, operands = indexing_maps(op), list(op.operands)
    static, found = set(), {}
    for value, amap in zip(operands, maps):
        t = ir.RankedTensorType(value.type)
        for axis, expr in enumerate(amap.results):
            if isinstance(expr, ir.AffineDimExpr):
                if not t.is_dynamic_dim(axis):
                    static.add(expr.position)
                found.setdefault(expr.position, (value, axis))
    return [found[d] for d in sorted(found) if d not in static]


def _two_dynamic_dims(op: ir.Operation) -> bool:
    """Whether an operand of ``op`` has two dynamic dims or more: a quick test first (a module of a symbolic batch has
    hundreds of generics of one dynamic dim), which misses only generics of two loops no operand reads together."""
    for value in op.operands:
        t = value.type
        if isinstance(t, ir.RankedTensorType) and sum(ir.ShapedType.is_dynamic_size(d) for d in t.shape) >= 2:
            return True
    return False


def skip_empty_generics(module: ir.Module) -> int:
    """Put every generic on tensors with two dynamic loop extents or more, outside any loop and owned by no other
    schedule, under an ``scf.if`` that yields its inits when one of those extents is 0 (``common.unless_empty``);
    likewise a fill of two dynamic sizes that starts no accumulation (``zeros_like`` of an ``(m, n)`` input:
    1.5 s at ``m = 2**31``, ``n = 0``). Returns how many."""
    count = 0
    for op in ops_named(module.operation, {"linalg.generic", "linalg.fill"}):
        if (len(op.results) == 0 or not _two_dynamic_dims(op) or in_loop(op) or skips_when_empty(op)
                or any(name.startswith("relax_mlir.") for name in op.attributes)):
            continue
        if op.name == "linalg.fill":
            out = ir.RankedTensorType(op.results[0].type)
            sizes = [(op.operands[1], a) for a in range(out.rank) if out.is_dynamic_dim(a) and _read_as_values(op)]
        elif all(isinstance(v.type, ir.RankedTensorType) for v in list(op.operands) + list(op.results)):
            sizes = dynamic_extents(op)
        else:
            continue
        if len(sizes) >= 2:
            _own_fills(op)
            unless_empty(op, sizes)
            count += 1
    return count


def _read_as_values(fill: ir.Operation) -> bool:
    """Whether no linalg op or loop writes into ``fill``'s result (an accumulation's zeros keep their fill: the
    matmul and fill schedules read it)."""
    return all(not (owner.name.startswith("linalg.") or owner.name.startswith("scf."))
               for owner in (as_operation(u.owner) for u in fill.results[0].uses))


def _own_fills(op: ir.Operation) -> None:
    """Give each init of ``op`` that is a ``linalg.fill`` others read too (CSE merged the zeros of two sums) a fill
    of its own. Two guards of one condition are merged into one ``scf.if`` later (canonicalization): yielding one
    fill twice when empty, it made bufferization copy the sums (four copies of two sums of one input)."""
    for index in range(len(op.operands) - len(op.results), len(op.operands)):
        fill = defining_op(op.operands[index])
        if fill is None or fill.name != "linalg.fill" or len(list(fill.results[0].uses)) < 2:
            continue
        init = defining_op(fill.operands[1])
        with ir.InsertionPoint(fill):
            empty = init.clone() if init is not None and init.name == "tensor.empty" else None
            clone = fill.clone()
        if empty is not None:
            clone.operands[1] = empty.results[0]
        op.operands[index] = clone.results[0]


def schedule_elementwise(module: ir.Module, threads: int = 1, print_ir: bool = False,
                         epilogues: bool = False) -> int:
    """Split every large generic of ``module`` across ``threads``; returns how many were split. Generics tagged
    as matmul epilogues (``epilogue.py``) are left alone, or (``epilogues``) are the only ones split. Those with
    several dynamic loop extents are skipped when empty first (``skip_empty_generics``)."""
    if not epilogues:
        skip_empty_generics(module)

    def lines(i: int, name: str, counts: list[int]) -> list[str]:
        if min(counts) < 0:
            return [match_tagged(f"%g{i}", name, _TAG, i),
                    f"%gi{i}, %gs{i}, %gc{i}, %gf{i} = transform.structured.tile_reduction_using_forall %g{i} by num_threads = "
                    f"[{', '.join(str(abs(c)) for c in counts)}] : ({ANY}) -> ({ANY}, {ANY}, {ANY}, {ANY})"]
        return [match_tagged(f"%g{i}", name, _TAG, i),
                f"%gt{i}, %gf{i} = transform.structured.tile_using_forall %g{i} num_threads "
                f"[{', '.join(map(str, counts))}] : ({ANY}) -> ({ANY}, {ANY})"]

    def plan(op: ir.Operation) -> list[int] | None:
        return plan_parallel_generic(op, threads) if (EPILOGUE in op.attributes) == epilogues else None

    return schedule_each(module, {"linalg.generic"}, _TAG, plan, lines, "split large generics across threads", print_ir)


#: Body ops from which a generic with short rows is worth vectorizing row by row (``vectorize_short_rows``).
SHORT_ROW_MIN_BODY = 12
_ROW_TAG = "relax_mlir.rows"


def plan_short_rows(op: ir.Operation, lanes: int) -> list[int] | None:
    """Tile sizes (1 on every loop but the innermost, 0 there) for a generic whose rows are shorter than a vector
    register and whose body is long (a polynomial ``exp``), or None. Such a generic (softmax over 10 classes:
    64x10) is left scalar by LLVM, whose loop vectorizer will not take an innermost trip count of 10 at 16 lanes,
    and cannot be coalesced (it reads a per-row broadcast)."""
    if op.name == "linalg.generic" and any(len(m.results) > m.n_dims for m in indexing_maps(op)):
        return None  # more results than loops: not a projected permutation, which the vectorizer requires
    if op.name != "linalg.generic" or not op.results or not all(
            isinstance(r.type, ir.RankedTensorType) for r in op.results):
        return None
    ranges = loop_ranges(op)
    if ranges is None or len(ranges) < 2 or not 2 <= ranges[-1] < lanes:
        return None
    if any(is_boolean(v.type) for v in list(op.operands) + list(op.results)):
        return None  # vector reads and writes of booleans (i1) have no byte layout to lower to (bool_storage.py)
    body = list(op.regions[0].blocks[0].operations)
    if len(body) < SHORT_ROW_MIN_BODY or not all(  # plain arithmetic only: what the vectorizer always takes
            o.name.startswith(("arith.", "math.")) or o.name == "linalg.yield" for o in body):
        return None
    inner = len(ranges) - 1
    for amap in indexing_maps(op):
        results = list(amap.results)
        for axis, expr in enumerate(results):  # the row's loop may only index an operand's last dimension
            if isinstance(expr, ir.AffineDimExpr) and expr.position == inner and axis != len(results) - 1:
                return None
    return [1] * inner + [0]


def vectorize_short_rows(module: ir.Module, lanes: int, print_ir: bool = False) -> int:
    """Vectorize every generic ``plan_short_rows`` accepts one row at a time (a ``vector<1x10xf32>`` LLVM
    widens to one register); returns how many."""
    def lines(i: int, name: str, sizes: list[int]) -> list[str]:
        n_loops = sum(1 for s in sizes if s)
        return [match_tagged(f"%r{i}", name, _ROW_TAG, i),
                f"%rt{i}, %rl{i}:{n_loops} = transform.structured.tile_using_for %r{i} tile_sizes "
                f"[{', '.join(map(str, sizes))}] : ({ANY}) -> ({', '.join([ANY] * (n_loops + 1))})",
                f"transform.structured.vectorize %rt{i} : {ANY}"]

    return schedule_each(module, {"linalg.generic"}, _ROW_TAG,
                         lambda op: None if EPILOGUE in op.attributes else plan_short_rows(op, lanes), lines,
                         "vectorize short rows", print_ir,
                         patterns="transform.apply_patterns.vector.cast_away_vector_leading_one_dim\n"
                                  '  transform.apply_patterns.vector.lower_multi_reduction lowering_strategy = "innerreduction"')
