"""Reduction schedules: float sums that may be reassociated, so that LLVM vectorizes them, in blocks that keep
their rounding error small.

A float sum computed in order is a chain of dependent adds: one add per 4 cycles on one lane, and LLVM's loop
vectorizer will not reorder it. The user asked for a sum (``R.sum``, ``R.mean``, ``R.variance``, a bias
gradient, a batch-norm statistic), not for a particular order of additions, as in NumPy (pairwise) and every
BLAS. So the accumulating ``arith.addf`` (and ``arith.mulf`` of a product) in the body of every
``linalg.generic`` with a reduction loop gets ``fastmath<reassoc>``: LLVM then keeps one partial sum per lane
(16 lanes x 4 interleaved registers with AVX-512) and adds them at the end.

Max/min reductions are exact in any order but LLVM vectorizes them only without NaNs (``nnan``), which would
change what a NaN input gives: they are left alone.

A partial sum's rounding error grows with the elements added into it: each add rounds to within ``u`` = 2^-24 (float32)
of the running total, so a chain of ``m`` adds is off by up to ``m * u`` of the sum of magnitudes, typically
``sqrt(m) * u``. In 64 partials (16 lanes x 4 registers), a float32 sum of 2^24 elements put 2^18 into each:
relative errors of 1.4e-6 (uniform positive values) and 4.9e-4 (positive values near 1), where NumPy's pairwise
sum gives 1e-8; a column sum (a bias gradient, ``(i, j) -> (j)``) has one serial partial per column, as many adds
as rows (3.6e-4 over 2^20 rows). So a float32 sum whose partials would take more than twice a leaf's elements is
computed in blocks (``block_sums``), the cascade PyTorch's CPU sum uses:

* a leaf block adds ``LEAF_CHAIN`` elements into each partial when LLVM vectorizes the reduced loop (128 x 64 =
  8192 elements of a full or row sum), ``SERIAL_LEAF_CHAIN`` when it does not (256 rows of a column sum, rows
  shorter than the partials), into fresh zeros; its total is added into the block above it;
* each block above holds up to ``FAN_OUT`` (64) blocks of the level below, again from fresh zeros; the outermost
  level's totals go into the result.

The longest chain of adds is then 128 (256) in a leaf, 6 across the lanes and 64 per level above: one more level
each time the size grows 64 times, an error growing like ``log(n)``. Measured against float64 on 2^20..2^24
float32 values (full, row, column and per-channel sums; 1 and 2 threads): at most 3.3e-7 relative, the float32
result's own rounding being up to 6e-8 (NumPy: up to 1.2e-7 on full and row sums, 4.9e-4 on column sums, which it
adds row by row). The blocks are loops (``tile_using_for`` on the reduced loops; the parallel loops outside them
one iteration at a time, so that rows are still read one after the other: all rows in each block made a
(1024, 16384) row sum 2.1x slower) around the original generic, which then accumulates into zeros (a
``linalg.fill`` of a buffer allocated once before the loops) followed by an elementwise add into the carried
total: one pass over the outputs per block, against 8192 (or 256 rows of) elements inside it. A reduced loop of
unknown extent is planned as ``DYNAMIC_EXTENT`` long (levels that run once on a small input: +0.1 us a call).
Float64 sums (2^29 times finer) and sums whose partials take few elements (a training step's losses, bias
gradients over a batch of up to 512) are left as they were.

Measured on a 2-core AMD EPYC (A/B in one process, interleaved; one thread in CPU time, two in wall time): full
sums of 2^16..2^24, row sums of (4096, 1024), (16, 2^18) and (1024, 16384), column sums of (1024, 4096): within
+-2.5% (noise); column sums of (2^16, 64) 1.8x (one thread) and 5x (two) faster; the 8x8 CNN's step +0.7% on
one thread (its batch-norm statistics, 4096 serial adds per channel, now in leaves of 4 images), unchanged on two;
the 28x28 CNN's within noise; the MLP steps have no sum this large (their code is unchanged). ``block_sums``
itself: 12-21 ms of the CNNs' builds.
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith, bufferization, linalg, tensor

from ..host import host_cpu
from .common import ANY, EPILOGUE, apply, as_operation, indexing_maps, ops_named, script
from .matmul import CONTRACTION

_COMBINERS = {"arith.addf", "arith.mulf"}

#: Elements a partial sum of a leaf block takes when LLVM vectorizes the reduced loop (one partial per lane)...
LEAF_CHAIN = 128
#: ... and when it does not (one partial per output element: a column sum, rows shorter than the vector partials).
SERIAL_LEAF_CHAIN = 256
#: Blocks of one level added into a block of the level above.
FAN_OUT = 64
#: The size a reduced loop of unknown extent is planned for.
DYNAMIC_EXTENT = 2 ** 24
#: Partial sums LLVM keeps for a vectorized float32 sum: 4 interleaved registers of lanes.
INTERLEAVE = 4
#: Whether large float32 sums are blocked (``block_sums``); a module knob for A/B measurements.
BLOCKED_SUMS = True
_TAG = "relax_mlir.blocks"


def _has_reduction(op: ir.Operation) -> bool:
    return any("reduction" in str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"]))


def _accumulators(op: ir.Operation) -> list[ir.Operation]:
    """The float adds/multiplies whose result the body yields (the accumulation into the output)."""
    block = op.regions[0].blocks[0]
    body = list(block.operations)
    found = []
    for value in body[-1].operands:  # linalg.yield
        owner = value.owner
        owner = getattr(owner, "operation", owner)
        if isinstance(owner, ir.Operation) and owner.name in _COMBINERS:
            found.append(owner)
    return found


def reassociate_reductions(module: ir.Module) -> int:
    """Block the large float32 sums (``block_sums``), then mark the accumulations of every float reduction
    ``fastmath<reassoc>``; returns how many were marked."""
    if BLOCKED_SUMS:
        block_sums(module, host_cpu().lanes(32) * INTERLEAVE)
    reassoc = ir.Attribute.parse("#arith.fastmath<reassoc>")
    count = 0
    for op in ops_named(module.operation, {"linalg.generic"}):
        if not _has_reduction(op):
            continue
        for acc in _accumulators(op):
            acc.attributes["fastmath"] = reassoc
            count += 1
    return count


def _is_float32_sum(op: ir.Operation) -> bool:
    """Whether every result of the generic ``op`` is a float32 (or narrower) tensor that its body accumulates
    into with one ``arith.addf`` of the output's value and something computed without it."""
    if not op.results or not _has_reduction(op):
        return False
    block = op.regions[0].blocks[0]
    yielded = list(list(block.operations)[-1].operands)
    outs = list(block.arguments)[len(block.arguments) - len(op.results):]
    for result, value, out in zip(op.results, yielded, outs):
        t = result.type
        if not isinstance(t, ir.RankedTensorType) or not isinstance(t.element_type, ir.FloatType) or \
                ir.FloatType(t.element_type).width > 32:
            return False
        owner = value.owner
        owner = getattr(owner, "operation", owner)
        if not isinstance(owner, ir.Operation) or owner.name != "arith.addf":
            return False
        # the output's value read once, by this add, whose sum only the yield reads (no other output adds it)
        if len(list(out.uses)) != 1 or list(owner.operands).count(out) != 1 or len(list(value.uses)) != 1:
            return False
    return True


def _loop_extents(op: ir.Operation) -> list[int]:
    """Every loop's static extent, read from the operands through the indexing maps (``DYNAMIC_EXTENT`` where
    no operand has it)."""
    maps = indexing_maps(op)
    extents = [DYNAMIC_EXTENT] * maps[0].n_dims
    for value, amap in zip(list(op.operands), maps):
        if not isinstance(value.type, ir.RankedTensorType):
            continue  # a scalar operand
        for expr, size in zip(amap.results, value.type.shape):
            if isinstance(expr, ir.AffineDimExpr) and not ir.ShapedType.is_dynamic_size(size):
                extents[expr.position] = size
    return extents


def _tile(extents: list[int], reduced: list[int], budget: int) -> list[int]:
    """Tile sizes (0: the whole loop) for a block of at most ``budget`` reduced points (at least one): the
    innermost reduced loops whole, the next one cut, the outer ones one iteration at a time."""
    sizes = [0] * len(extents)
    inside = 1
    for loop in reversed(reduced):
        extent = extents[loop]
        if inside == 0:  # an inner loop was cut: one iteration of this one a block
            sizes[loop] = 1 if extent > 1 else 0
        elif inside * extent <= budget:
            inside *= extent
        else:
            sizes[loop] = max(1, budget // inside)
            inside = 0
    return sizes


def plan_blocks(op: ir.Operation, partials: int) -> list[list[int]] | None:
    """The tile sizes of each level of blocks (outermost first) for a large float32 sum whose vectorized loop
    keeps ``partials`` partial sums, or None when its partials take at most twice a leaf's elements each."""
    if op.name != "linalg.generic" or CONTRACTION in op.attributes or EPILOGUE in op.attributes:
        return None
    if not _is_float32_sum(op):
        return None
    extents = _loop_extents(op)
    kinds = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    reduced = [i for i, kind in enumerate(kinds) if "reduction" in kind]
    vectorized = "reduction" in kinds[-1] and extents[-1] >= partials  # else one partial per output element
    leaf = LEAF_CHAIN * partials if vectorized else SERIAL_LEAF_CHAIN
    total = math.prod(extents[i] for i in reduced)
    if total <= 2 * leaf:
        return None
    budgets = [leaf]
    while budgets[-1] * FAN_OUT < total:
        budgets.append(budgets[-1] * FAN_OUT)
    levels: list[list[int]] = []
    for budget in reversed(budgets):
        sizes = _tile(extents, reduced, budget)
        if any(sizes) and (not levels or sizes != levels[-1]):
            levels.append(sizes)
    first_cut = min(i for i, size in enumerate(levels[0]) if size)
    for loop in range(first_cut):  # rows outside the blocks: one at a time, read in the order they were
        levels[0][loop] = 1 if extents[loop] > 1 else 0
    return levels


def block_sums(module: ir.Module, partials: int, print_ir: bool = False) -> int:
    """Compute every large float32 sum of ``module`` in blocks from fresh zeros (module docstring), one level of
    loops a script from the outermost in; returns how many sums were blocked."""
    plans = {}
    for op in ops_named(module.operation, {"linalg.generic"}):
        levels = plan_blocks(op, partials)
        if levels is not None:
            op.attributes[_TAG] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(plans))
            plans[len(plans)] = levels
    for depth in range(max((len(levels) for levels in plans.values()), default=0)):
        body = []
        for i, levels in plans.items():
            if depth < len(levels):
                sizes = levels[depth]
                n_loops = sum(1 for s in sizes if s)
                body += [f'%b{i} = transform.structured.match ops{{["linalg.generic"]}} '
                         f"attributes{{{_TAG} = {i} : i64}} in %root : ({ANY}) -> {ANY}",
                         f"%bt{i}, %bl{i}:{n_loops} = transform.structured.tile_using_for %b{i} tile_sizes "
                         f"[{', '.join(map(str, sizes))}] : ({ANY}) -> ({', '.join([ANY] * (n_loops + 1))})"]
        apply(module, script(body), f"float32 sums in blocks, level {depth}", print_ir)
        for op in ops_named(module.operation, {"linalg.generic"}):
            levels = plans.get(ir.IntegerAttr(op.attributes[_TAG]).value) if _TAG in op.attributes else None
            if levels is not None and depth < len(levels):
                _start_from_zero(op, sum(1 for s in levels[depth] if s))
    for op in ops_named(module.operation, {"linalg.generic"}):
        if _TAG in op.attributes:
            del op.attributes[_TAG]
    return len(plans)


def _start_from_zero(op: ir.Operation, n_loops: int) -> None:
    """Make the sum ``op``, just tiled by ``n_loops`` loops, accumulate into fresh zeros, then add its totals into
    what it accumulated into. The zeros' buffer is allocated once before the loops (one ``malloc`` a block was a
    third of a 2^16-element sum), as a ``bufferization.alloc_tensor``: a ``tensor.empty`` there would be merged
    by CSE with the one of the level above, whose zeros are still being added into, and then copied."""
    outer = op
    for _ in range(n_loops):
        outer = as_operation(outer.parent)
    n_inputs = len(op.operands) - len(op.results)
    parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    for i, result in enumerate(op.results):
        acc = op.operands[n_inputs + i]
        t = ir.RankedTensorType(acc.type)
        # the loops' initial value: its sizes are the block's but where rows are tiled (by 1: static in the block)
        whole = outer.operands[3 + i]
        with ir.InsertionPoint(outer), op.location:
            sizes = [tensor.dim(whole, arith.constant(ir.IndexType.get(), d))
                     for d, s in enumerate(t.shape) if ir.ShapedType.is_dynamic_size(s)]
            buffer = bufferization.AllocTensorOp(t, sizes).result
        with ir.InsertionPoint(op), op.location:
            op.operands[n_inputs + i] = linalg.fill(arith.constant(t.element_type, 0.0), outs=[buffer])
        with ir.InsertionPoint.after(op), op.location:
            identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(t.rank))
            add = linalg.GenericOp([t], [result], [acc], ir.ArrayAttr.get([identity, identity]),
                                   ir.ArrayAttr.get([parallel] * t.rank))
            block = add.regions[0].blocks.append(t.element_type, t.element_type)
            with ir.InsertionPoint(block):
                linalg.YieldOp([arith.addf(block.arguments[0], block.arguments[1])])
        result.replace_all_uses_except(add.results[0], add.operation)
