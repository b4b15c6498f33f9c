"""Elementwise epilogues computed in a matmul's register tiles: the optimizer's update fused into its gradient.

A weight's gradient is a matmul (``x^T g``) whose only reader is the optimizer's update, an elementwise generic
(SGD with weight decay: ``w - lr * (wd * w + dW)``); a hidden layer's input gradient (``g w^T``) is read only by
ReLU's gradient (``z + b < 0 ? 0 : dh``). Scheduled apart, the matmul writes its whole result and the elementwise
op reads it back (4 MB each way for a 1024x1024 weight). Here the elementwise op runs in the matmul's tile nest
instead: each register tile, once its sums are complete, reads its block of the op's other inputs (the weight, a
row broadcast, a scalar), applies the op's body to the accumulator as vectors, and writes the block of the *op's*
result; the matmul's result is never stored.

Several results, several readers. The reader may have several results (momentum's update, merged with the new
velocity by ``multi_use.py``: ``v'`` and ``w'``): the nest then carries one tensor per result (each loop around
the tiles gets more iteration arguments or ``scf.forall`` shared outputs, each slice, write and insertion a twin:
``_thread``). A product with several readers (a dense layer's ``x w``: its bias and ReLU, and later ReLU's
gradient) runs the first reader whose other inputs exist before the matmul in its tiles, which then write the
product as well as the reader's results. An input computed after the matmul from what exists before it (Adam's
bias corrections, from the step count) is moved before it (``_movable``).

Two steps around the matmul schedule:

* ``mark_epilogues`` (before loops are coalesced and elementwise ops split across threads): an elementwise generic
  that can run in the tiles of a ``linalg.matmul`` whose plan peels no remainder and pads nothing is tagged (with
  the operand it reads the product as), so that the other schedules leave it be;
* ``fuse_epilogues`` (after the matmul nests are vectorized and start from their fill's value,
  ``accumulators.py``): the tagged generic's body moves into every tile of the nest, which then produces the
  generic's results. A tile inside K blocks (K cache-tiled) applies it in the last block only (an ``scf.if`` on the
  K loops' induction variables), the earlier blocks writing and reading back partial sums as before. Where a nest
  is not as expected (an input that cannot be had before the nest, an indexing the tile cannot read as a block, a
  row, a column or a scalar, several results inside K blocks), the generic is left whole and split across threads
  as any other elementwise op.

Measured on a 2-core Intel Xeon (AVX-512), training steps A/B in one process: wide MLP (1024 wide, batch 256)
-5.3%, 784-input MLP -4.9%, tutorial MLP -8%; applying it in the last K block as well: wide MLP another -0.5%.
Bias and ReLU in the tiles of the product they share with ReLU's gradient: tutorial MLP -2.6%, 784-input MLP
-2.3%, wide MLP -0.8% (its 1024-deep products are in K blocks: the activation is written under the last block's
``scf.if``; yielded from it as vectors, both tiles held in registers, the step was 1.4% slower). Momentum's merged
update in the tiles: tutorial MLP -0.9%, wide -0.5%; Adam's (three blocks read besides the product) was slower,
so it is not done (``MAX_BLOCK_INPUTS``).
"""

from __future__ import annotations

import functools
import math
from typing import Callable, NamedTuple

from mlir import ir
from mlir.dialects import arith, scf, tensor, vector

from .accumulators import TileNest
from .common import (EPILOGUE, all_parallel, as_operation, constant_int, defining_op, element_bits, encloses,
                     indexing_maps, is_boolean, ops_named, slice_offsets, trip_count)
from .matmul import MATMUL_LIKE, plan_matmul
from ..host import host_cpu

#: Whether a product with several readers runs one of them in its tiles (writing the product as well).
SHARED_PRODUCTS = True
#: A reader of more whole blocks than this besides the product is left to its own loop: each tile would read (and
#: write) that many scattered 8-row blocks where the loop streams them. Adam's update (moments and weight: three)
#: in the tiles made the tutorial MLP's step 0.4-0.5% slower and the wide MLP's 1.9% (whole tiles) to 3.9% (a row
#: at a time; 2-core Intel Xeon, A/B in one process); momentum's (velocity and weight: two) was 0.9% and 0.5%
#: faster.
MAX_BLOCK_INPUTS = 2


def mark_epilogues(module: ir.Module, threads: int = 1) -> int:
    """Tag the elementwise generics that can run as their matmul's epilogue; returns how many."""
    count = 0
    for op in ops_named(module.operation, set(MATMUL_LIKE)):
        found = epilogue_candidate(op, threads)
        if found is not None:
            user, operand = found
            user.attributes[EPILOGUE] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), operand)  # read as
            count += 1
    return count


def epilogue_candidate(matmul: ir.Operation, threads: int = 1) -> tuple[ir.Operation, int] | None:
    """(the elementwise generic, the operand it reads the product as) when a reader of ``matmul``'s result (a
    ``linalg.matmul``) can run in its register tiles, else None: its one reader, or, when the product has several
    readers, the first one (in the block's order) whose other inputs all exist before the matmul or can be moved
    there (a dense layer's bias and ReLU: ReLU's gradient reads the product later, so the tiles write it as
    well)."""
    if matmul.name != "linalg.matmul" or len(matmul.results) != 1:
        return None
    product = matmul.results[0]
    readers = [(as_operation(u.owner), u.operand_number) for u in product.uses]
    if not readers:
        return None
    plan = plan_matmul(matmul, threads)
    if plan is None or plan.peel or plan.pad_n:
        return None  # remainder tiles, or a narrow N padded to whole vectors (a 10-class layer, whose tiles write
        # a padded result read through a slice): not fused, so left to the usual path
    if len(readers) == 1:
        user, operand = readers[0]
        return (user, operand) if _elementwise_reader(user, operand, product.type) else None
    if not SHARED_PRODUCTS:
        return None
    in_order = sorted((r for r in readers if r[0].block == matmul.block),
                      key=functools.cmp_to_key(lambda a, b: -1 if a[0].is_before_in_block(b[0]) else 1))
    for user, operand in in_order:
        if sum(1 for other, _ in readers if other == user) != 1 or \
                not _elementwise_reader(user, operand, product.type):
            continue
        others = [v for i, v in enumerate(list(user.operands)[:len(user.operands) - len(user.results)])
                  if i != operand]
        if all(_movable(v, matmul) is not None for v in others):
            return user, operand
    return None


def _elementwise_reader(user: ir.Operation, operand: int, t: ir.Type) -> bool:
    """``user`` is an all-parallel generic whose results all have type ``t``, reading ``operand`` through the
    identity as its results are written, with a body of ``arith``/``math`` ops that does not read its outputs."""
    if user.name != "linalg.generic" or not len(user.results) or any(r.type != t for r in user.results):
        return False
    if not all_parallel(user):
        return False
    if any(is_boolean(v.type) for v in user.operands):
        return False  # a mask (dropout's, ReLU's as bytes): the tiles would read booleans (i1) as vectors, which
        # have no byte layout to lower to (bool_storage.py); the generic stays a loop of its own
    inputs = len(user.operands) - len(user.results)
    maps = indexing_maps(user)
    if operand >= inputs or maps[operand] != ir.AffineMap.get_identity(maps[operand].n_dims) or \
            any(m != maps[operand] for m in maps[inputs:]):
        return False
    if sum(1 for m in maps[:inputs] if m == maps[operand]) - 1 > MAX_BLOCK_INPUTS:
        return False
    block = user.regions[0].blocks[0]
    if any(list(arg.uses) for arg in list(block.arguments)[inputs:]):
        return False
    body = [as_operation(o) for o in block.operations][:-1]
    return all(o.name.startswith(("arith.", "math.")) and not o.regions for o in body)


def fuse_epilogues(module: ir.Module) -> tuple[int, int]:
    """Move every tagged generic's body into its matmul's tiles; returns (fused, left). The ones left keep their
    tag (``schedule_module`` splits them across threads, then removes it)."""
    fused = left = 0
    for op in ops_named(module.operation, {"linalg.generic"}):
        if EPILOGUE not in op.attributes:
            continue
        if _fuse(op):
            fused += 1
        else:
            left += 1
    return fused, left


def unmark_epilogues(module: ir.Module) -> None:
    for op in ops_named(module.operation, {"linalg.generic"}):
        if EPILOGUE in op.attributes:
            del op.attributes[EPILOGUE]


def _fuse(generic: ir.Operation) -> bool:
    inputs = len(generic.operands) - len(generic.results)
    maps = indexing_maps(generic)
    nest_input = ir.IntegerAttr(generic.attributes[EPILOGUE]).value
    result = generic.operands[nest_input]
    root = defining_op(result)
    if root is None or root.name not in ("scf.forall", "scf.for"):
        return False
    keep = len(list(result.uses)) > 1  # other readers of the product: the tiles write it too
    index = next(i for i, r in enumerate(root.results) if r == result)
    operand = _first_carried(root) + index
    init = defining_op(root.operands[operand])
    if init is None or init.name != "tensor.empty":
        return False  # still a fill: some tile reads the accumulator
    nest = TileNest.follow(root, operand)
    t = ir.RankedTensorType(result.type)
    if nest is None or not nest.writes or not nest.covers(math.prod(t.shape)):
        return False
    blocks = [loop for loop in nest.k_loops if any(encloses(loop, w) for w in nest.writes) and trip_count(loop) != 1]
    if nest.reads and not blocks or any(constant_int(v) is None for loop in blocks for v in list(loop.operands)[:3]):
        return False  # reads of the sums only between K blocks; the last block's index known
    others = [i for i in range(inputs) if i != nest_input]
    if not all(_readable(maps[i], t.rank) for i in others):
        return False
    moves = [_movable(generic.operands[i], root) for i in others]  # (Adam's bias corrections come after)
    if any(m is None for m in moves):
        return False
    extra = len(generic.results) - (0 if keep else 1)  # results the nest carries besides its own
    if extra and blocks and not keep:
        return False  # (the last K block's scf.if would yield every result's tile: see _apply_body)
    threaded = [loop for loop in nest.loops if any(encloses(loop, w) for w in nest.writes)]
    if extra and not all(len(_carried(loop, nest.values)) == 1 for loop in threaded[1:]):
        return False  # (threaded[0] is the root, which carries the tensor at ``index``)
    plans = []
    for write in nest.writes:
        offsets = _globalslice_offsets(write.operands[1], nest, t.rank)
        if offsets is None:
            return False
        plans.append((write, offsets))
    moved: list[ir.Operation] = []
    for op in (op for m in moves for op in m):
        if not any(op == other for other in moved):
            op.move_before(root)
            moved.append(op)
    written = []  # (a tile's write, the vectors of the extra results it writes beside it)
    for write, offsets in plans:
        written.append((write, _apply_body(generic, nest_input, write, offsets,
                                           [loop for loop in blocks if encloses(loop, write)], keep)))
    if extra:
        with ir.InsertionPoint(root), root.location:
            empties = [tensor.EmptyOp(t.shape, t.element_type).result for _ in range(extra)]
        root, carried = _thread(root, index, threaded, empties, written)
    else:
        carried = []
    product = root.results[index]
    for old, new in zip(generic.results, ([] if keep else [product]) + carried):
        old.replace_all_uses_with(new)
    generic.erase()
    return True


def _first_carried(loop: ir.Operation) -> int:
    """The operand index of ``loop``'s first carried value (scf.for iteration arguments after its bounds and
    step, scf.forall shared outputs last)."""
    return 3 if loop.name == "scf.for" else len(loop.operands) - len(loop.results)


def _carried(loop: ir.Operation, values) -> list[int]:
    """The positions among ``loop``'s carried operands that are in ``values`` (the nest's tensor's blocks)."""
    first = _first_carried(loop)
    return [i - first for i, v in enumerate(loop.operands) if i >= first and v in values]


#: Marks the loops ``_thread`` rebuilds with more carried values (dropped as it rebuilds them).
_THREADED = "relax_mlir.threaded"


def _thread(root: ir.Operation, index: int, threaded: list[ir.Operation], inits: list[ir.Value],
            written: list) -> tuple[ir.Operation, list[ir.Value]]:
    """Carry ``inits`` (one tensor per extra result) through the nest beside its own tensor: each ``threaded``
    loop (those around a tile's write) gets one more iteration argument or shared output per result, and every
    slice, write, insertion and yield of the nest's tensor a twin on each extra tensor, the twins of a tile's
    write writing the vectors ``written`` pairs with it. ``root`` carries the tensor at its ``index``-th position.
    Returns the new root and its extra results."""
    n = len(inits)
    for op in threaded:
        op.attributes[_THREADED] = ir.UnitAttr.get()  # (a tag: comparing ops would touch the erased ones)
    twins: dict = {}  # a value holding (a block of) the nest's tensor -> its twins on the extra tensors

    def twin(op: ir.Operation, replaced: dict[int, list[ir.Value]]) -> list[ir.Value]:
        """One copy of ``op`` per extra tensor, operand ``i`` of copy ``k`` being ``replaced[i][k]``."""
        made = []
        for k in range(n):
            copy = op.clone(ir.InsertionPoint(op))
            for i, vals in replaced.items():
                copy.operands[i] = vals[k]
            made.append(copy.results[0] if len(copy.results) else None)
        return made

    def loop(op: ir.Operation, position: int, extra: list[ir.Value]) -> ir.Operation:
        """``op`` rebuilt with ``extra`` carried last, the twins of its carried ``position``; its body visited."""
        new = _rebuilt(op, extra)
        args = list(new.regions[0].blocks[0].arguments)
        twins[args[len(args) - len(new.results) + position]] = args[len(args) - n:]
        twins[new.results[position]] = list(new.results)[len(new.results) - n:]
        visit(new.regions[0].blocks[0])
        return new

    def visit(block: ir.Block) -> None:
        for op in [as_operation(o) for o in block.operations]:
            name = op.name
            if name in ("scf.for", "scf.forall"):
                first, carried = _first_carried(op), _carried(op, twins)
                if carried and _THREADED in op.attributes:
                    loop(op, carried[0], twins[op.operands[first + carried[0]]])
                else:  # a tile's K loop, no write inside: the blocks it carries come out unchanged
                    for i in carried:
                        twins[op.results[i]] = twins[op.operands[first + i]]
            elif name == "tensor.extract_slice" and op.operands[0] in twins:
                twins[op.results[0]] = twin(op, {0: twins[op.operands[0]]})
            elif name == "vector.transfer_write" and op.operands[1] in twins:
                vectors = next(v for w, v in written if w == op)
                if isinstance(vectors, _LastBlock):
                    twins[op.results[0]] = _write_in_last_block(op, vectors, twins[op.operands[1]])
                else:
                    twins[op.results[0]] = twin(op, {0: vectors, 1: twins[op.operands[1]]})
            elif name in ("tensor.insert_slice", "tensor.parallel_insert_slice") and op.operands[1] in twins:
                made = twin(op, {0: twins[op.operands[0]], 1: twins[op.operands[1]]})
                if name == "tensor.insert_slice":
                    twins[op.results[0]] = made
            elif name == "scf.forall.in_parallel":
                visit(op.regions[0].blocks[0])
            elif name == "scf.yield" and any(v in twins for v in op.operands):
                carried = next(v for v in op.operands if v in twins)
                with ir.InsertionPoint(op), op.location:
                    scf.YieldOp(list(op.operands) + twins[carried])
                op.erase()

    new = loop(root, index, inits)
    return new, list(new.results)[len(new.results) - n:]


def _write_in_last_block(write: ir.Operation, body: _LastBlock, blocks: list[ir.Value]) -> list[ir.Value]:
    """Twins of ``write`` writing the extra results' ``blocks`` under an ``scf.if`` on the last K block (the body
    emitted there); the other blocks pass them on unwritten. Returns the blocks after it."""
    with ir.InsertionPoint(write), write.location:
        branch = scf.IfOp(body.condition, [b.type for b in blocks], has_else=True)
    with ir.InsertionPoint(branch.else_block), write.location:
        scf.YieldOp(blocks)
    with ir.InsertionPoint(branch.then_block), write.location:
        done = scf.YieldOp([])
    written = []
    for vec, block in zip(body.emit(done), blocks):
        copy = write.clone(ir.InsertionPoint(done))
        copy.operands[0], copy.operands[1] = vec, block
        written.append(copy.results[0])
    with ir.InsertionPoint(done), write.location:
        scf.YieldOp(written)
    done.erase()
    return list(branch.results)


def _rebuilt(loop: ir.Operation, extra: list[ir.Value]) -> ir.Operation:
    """``loop`` (an ``scf.for`` or ``scf.forall``) made again with ``extra`` carried after its own (iteration
    arguments, shared outputs), its body moved over; the old loop is erased."""
    block = loop.regions[0].blocks[0]
    attributes = {name: loop.attributes[name] for name in loop.attributes if name != _THREADED}
    if "operandSegmentSizes" in attributes:  # scf.forall: the shared outputs are its last operand group
        sizes = list(ir.DenseI32ArrayAttr(attributes["operandSegmentSizes"]))
        attributes["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get(sizes[:-1] + [sizes[-1] + len(extra)])
    with ir.InsertionPoint(loop), loop.location:
        new = ir.Operation.create(loop.name, results=[r.type for r in loop.results] + [v.type for v in extra],
                                  operands=list(loop.operands) + extra, attributes=attributes, regions=1)
        body = new.regions[0].blocks.append(*[a.type for a in block.arguments], *[v.type for v in extra])
    for op in list(block.operations):
        body.append(op)
    for old, fresh in zip(block.arguments, body.arguments):
        old.replace_all_uses_with(fresh)
    for old, fresh in zip(loop.results, new.results):
        old.replace_all_uses_with(fresh)
    loop.erase()
    return new


def _readable(amap: ir.AffineMap, rank: int) -> bool:
    """Maps a tile can read its block of: the identity, the last loop alone (a row broadcast), the first of two
    (a column broadcast), or none (a scalar)."""
    if amap == ir.AffineMap.get_identity(rank):
        return True
    results = list(amap.results)
    return not results or (len(results) == 1 and (results[0] == ir.AffineDimExpr.get(rank - 1) or
                                                  (rank == 2 and results[0] == ir.AffineDimExpr.get(0))))


def _dominates(value: ir.Value, op: ir.Operation) -> bool:
    """Whether ``value`` is available at ``op``: an argument of a block around it, or the result of an op before it
    in its block or in a block around it."""
    owner = defining_op(value)
    current = op
    while current is not None:
        if owner is None and current.block == value.owner:
            return True
        if owner is not None and current.block == owner.block:
            return owner.is_before_in_block(current)
        parent = current.parent
        current = as_operation(parent) if parent is not None else None
    return False


def _movable(value: ir.Value, op: ir.Operation, depth: int = 3) -> list[ir.Operation] | None:
    """The ops to move before ``op`` (in this order) for ``value`` to be available there: none when it already is;
    else its defining op and what that needs, when they are side-effect free tensor ops (``tensor.empty``, a
    ``linalg.generic`` of ``arith``/``math``, ``arith``) of ``op``'s block, at most ``depth`` deep; None when it
    cannot be."""
    if _dominates(value, op):
        return []
    owner = defining_op(value)
    if depth == 0 or owner is None or owner.block != op.block:
        return None
    if owner.name == "linalg.generic":
        body = [as_operation(o) for o in owner.regions[0].blocks[0].operations]
        if not all(o.name.startswith(("arith.", "math.")) and not o.regions for o in body[:-1]):
            return None
        inside = set(owner.regions[0].blocks[0].arguments) | {r for o in body for r in o.results}
        if not all(_dominates(v, op) for o in body for v in o.operands if v not in inside):
            return None
    elif owner.name != "tensor.empty" and not (owner.name.startswith("arith.") and not owner.regions):
        return None
    moves: list[ir.Operation] = []
    for v in owner.operands:
        needed = _movable(v, op, depth - 1)
        if needed is None:
            return None
        moves += needed
    return moves + [owner]


def _globalslice_offsets(value: ir.Value, nest: TileNest, rank: int) -> list[list] | None:
    """The terms (ints or index values) whose sums are the offsets of the block ``value`` holds within the nest's
    whole tensor: the offsets of the slices from the tile up to the root, per dimension (added up at the tile,
    where every one of them is defined)."""
    root_arg = nest.values[0]
    terms: list[list] = [[] for _ in range(rank)]
    while value != root_arg:
        owner = defining_op(value)
        if owner is not None and owner.name == "scf.for":  # a loop carrying the block (a tile's K loop): its init
            value = owner.operands[3 + next(i for i, r in enumerate(owner.results) if r == value)]
            continue
        if owner is not None:
            if owner.name != "tensor.extract_slice" or any(
                    s != 1 for s in ir.DenseI64ArrayAttr(owner.attributes["static_strides"])):
                return None
            for dim, offset in enumerate(slice_offsets(owner)):
                if not (isinstance(offset, int) and offset == 0):
                    terms[dim].append(offset)
            value = owner.operands[0]
            continue
        loop = as_operation(value.owner.owner)
        position = ir.BlockArgument(value).arg_number
        if loop.name == "scf.for" and position >= 1:
            value = loop.operands[3 + position - 1]
        elif loop.name == "scf.forall":
            shared = len(loop.results)
            first_shared = len(list(loop.regions[0].blocks[0].arguments)) - shared
            if position < first_shared:
                return None
            value = loop.operands[len(loop.operands) - shared + position - first_shared]
        else:
            return None
    return terms


def _index(v) -> ir.Value:
    return arith.constant(ir.IndexType.get(), v) if isinstance(v, int) else v


class _LastBlock(NamedTuple):
    """What a tile inside K blocks writes to the nest's extra results: the body, emitted (``emit(at)`` returns its
    vectors) under an ``scf.if`` on ``condition``, the last block."""
    condition: ir.Value
    emit: Callable[[ir.Operation], list[ir.Value]]


def _apply_body(generic: ir.Operation, nest_input: int, write: ir.Operation, offsets: list[list],
                blocks: list[ir.Operation], keep: bool) -> list[ir.Value] | _LastBlock:
    """At ``write`` (a tile's transfer of its accumulator), compute the generic's body on vectors; the write then
    writes its first result (the sums themselves when ``keep``), and the vectors of the others are returned (the
    nest's extra results, written beside it by ``_thread``). Inside K ``blocks`` (loops), only in the last block of
    each (an ``scf.if``), the sums written as they are in the others; when ``keep``, the write is left as it is and
    the body is returned to be emitted under the ``scf.if`` that writes the extra results (``_thread``): yielded
    as vectors from an ``scf.if`` of its own, every result's tile was held in registers at once (the wide MLP's
    1024-deep products with their bias and ReLU: 1.4% slower)."""
    acc = write.operands[0]
    where = _tile_indices(write, offsets)
    if not blocks:
        vectors = _emit_body(generic, nest_input, write, acc, where)
        if keep:
            return vectors
        write.operands[0] = vectors[0]
        return vectors[1:]
    with ir.InsertionPoint(write), write.location:
        last = None
        for loop in blocks:
            lb, step = constant_int(loop.operands[0]), constant_int(loop.operands[2])
            final = arith.constant(ir.IndexType.get(), lb + (trip_count(loop) - 1) * step)
            at_end = arith.cmpi(arith.CmpIPredicate.eq, loop.regions[0].blocks[0].arguments[0], final)
            last = at_end if last is None else arith.andi(last, at_end)
    if keep:
        return _LastBlock(last, lambda at: _emit_body(generic, nest_input, at, acc, where))
    with ir.InsertionPoint(write), write.location:  # (one result: _fuse refuses more inside K blocks)
        branch = scf.IfOp(last, [acc.type], has_else=True)
    with ir.InsertionPoint(branch.else_block), write.location:
        scf.YieldOp([acc])
    with ir.InsertionPoint(branch.then_block), write.location:
        done = scf.YieldOp([])
    vectors = _emit_body(generic, nest_input, done, acc, where)
    with ir.InsertionPoint(done), write.location:
        scf.YieldOp(vectors)
    done.erase()
    write.operands[0] = branch.results[0]
    return []


def _tile_indices(write: ir.Operation, offsets: list[list]) -> list[ir.Value]:
    """The indices of ``write``'s tile in the nest's whole tensor (its own plus ``offsets``), computed before it
    (as op results: ``_thread`` rebuilds the loops whose induction variables they are made of)."""
    where = []
    with ir.InsertionPoint(write), write.location:
        for terms, index in zip(offsets, list(write.operands)[2:]):
            if not terms and isinstance(index.owner, ir.Block):
                terms = [0]
            for term in terms:
                index = arith.addi(index, _index(term))
            where.append(index)
    return where


def _emit_body(generic: ir.Operation, nest_input: int, at: ir.Operation, acc: ir.Value,
               where: list[ir.Value]) -> list[ir.Value]:
    """Before ``at``, the generic's body on vectors, reading its other inputs' blocks at the tile's indices
    ``where`` and ``acc`` as the product; returns the vectors it yields, one per result.

    The body runs on whole tiles when the tiles it reads and writes fit the vector registers (SGD's update: the
    weight's block and the result); else a row at a time, the rows inserted into the tiles after (momentum's: its
    velocity and weight read, both written: whole, every op of the body held all its rows at once and LLVM did
    not reorder them into fewer live registers; by rows the tutorial MLP's momentum step was 1.5% faster, SGD's
    1.3% slower, A/B in one process)."""
    shape = list(ir.VectorType(acc.type).shape)
    inputs = len(generic.operands) - len(generic.results)
    maps = indexing_maps(generic)
    block = generic.regions[0].blocks[0]
    body = [as_operation(o) for o in block.operations]
    tiles_held = sum(1 for m in maps if m == maps[nest_input]) - 1  # blocks read besides the product, and results
    registers = math.prod(shape) // host_cpu().lanes(element_bits(ir.VectorType(acc.type).element_type))
    by_rows = tiles_held * registers > host_cpu().vector_registers
    with ir.InsertionPoint(at), at.location:
        if not by_rows:
            return _emit_on(body, {arg: (acc if i == nest_input else _read_block(generic.operands[i], maps[i],
                                                                                   where, shape, arg.type))
                                   for i, arg in enumerate(list(block.arguments)[:inputs])}, shape)
        shared = {}  # the rows that are the same for every row of the tile (a row broadcast, a scalar)
        rows: list[list[ir.Value]] = []
        for r in range(shape[0]):
            values: dict = {}
            for i, arg in enumerate(list(block.arguments)[:inputs]):
                if i == nest_input:
                    values[arg] = vector.extract(acc, [], [r])
                elif i in shared:
                    values[arg] = shared[i]
                else:
                    values[arg], same = _read_row(generic.operands[i], maps[i], where, r, shape[1], arg.type)
                    if same:
                        shared[i] = values[arg]
            rows.append(_emit_on(body, values, shape[1:]))
        tiles = []
        for k in range(len(rows[0])):
            full = acc  # (of the results' type; every row is overwritten)
            for r, row in enumerate(rows):
                full = vector.insert(row[k], full, [], [r])
            tiles.append(full)
        return tiles


def _emit_on(body: list[ir.Operation], values: dict, shape: list[int]) -> list[ir.Value]:
    """``body``'s ops (its yield last) on vectors of ``shape``, its block arguments read as ``values``; returns
    the yielded vectors."""
    def vec(v: ir.Value) -> ir.Value:
        if v in values:
            return values[v]
        return vector.broadcast(ir.VectorType.get(shape, v.type), v)  # a scalar from outside the body

    for op in body[:-1]:
        new = ir.Operation.create(op.name, results=[ir.VectorType.get(shape, r.type) for r in op.results],
                                  operands=[vec(v) for v in op.operands],
                                  attributes={name: op.attributes[name] for name in op.attributes})
        for old, fresh in zip(op.results, new.results):
            values[old] = fresh
    return [vec(v) for v in body[-1].operands]


def _read_row(source: ir.Value, amap: ir.AffineMap, where: list, row: int, width: int,
              element: ir.Type) -> tuple[ir.Value, bool]:
    """Row ``row`` of the tile's block of a generic's input read through ``amap`` (see ``_readable``), as a vector
    of ``width``; and whether it is the same for every row (a row broadcast, a scalar)."""
    full = ir.VectorType.get([width], element)
    results = list(amap.results)
    if not results:
        return vector.broadcast(full, tensor.extract(source, [])), True
    minor = ir.AffineMapAttr.get(ir.AffineMap.get_minor_identity(len(results), 1))
    pad = arith.constant(element, 0.0) if isinstance(element, ir.FloatType) else arith.constant(element, 0)
    in_bounds = ir.ArrayAttr.get([ir.BoolAttr.get(True)])
    if results[-1] == ir.AffineDimExpr.get(1) and len(results) == 1:  # a row, the same for every row of the tile
        return vector.transfer_read(full, source, where[-1:], minor, pad, in_bounds), True
    at_row = arith.addi(where[0], _index(row)) if row else where[0]
    if len(results) == 1:  # one value per row (a column broadcast)
        return vector.broadcast(full, tensor.extract(source, [at_row])), False
    return vector.transfer_read(full, source, [at_row, where[1]], minor, pad, in_bounds), False


def _read_block(source: ir.Value, amap: ir.AffineMap, where: list, shape: list, element: ir.Type) -> ir.Value:
    """The tile's block of a generic's input read through ``amap`` (see ``_readable``) as a vector of ``shape``."""
    full = ir.VectorType.get(shape, element)
    if not list(amap.results):
        return vector.broadcast(full, tensor.extract(source, []))
    pad = arith.constant(element, 0.0) if isinstance(element, ir.FloatType) else arith.constant(element, 0)
    if amap == ir.AffineMap.get_identity(len(shape)):
        return vector.transfer_read(full, source, where, ir.AffineMapAttr.get(amap), pad,
                                    ir.ArrayAttr.get([ir.BoolAttr.get(True)] * len(shape)))
    minor = ir.AffineMap.get_minor_identity(1, 1)
    if list(amap.results)[0] == ir.AffineDimExpr.get(len(shape) - 1):  # a row, the same for every row of the tile
        row = vector.transfer_read(ir.VectorType.get(shape[-1:], element), source, where[-1:],
                                   ir.AffineMapAttr.get(minor), pad, ir.ArrayAttr.get([ir.BoolAttr.get(True)]))
        return vector.broadcast(full, row)
    column = vector.transfer_read(ir.VectorType.get(shape[:1], element), source, where[:1],  # one value per row
                                  ir.AffineMapAttr.get(minor), pad, ir.ArrayAttr.get([ir.BoolAttr.get(True)]))
    across = vector.broadcast(ir.VectorType.get([shape[1], shape[0]], element), column)
    return vector.transpose(full, across, [1, 0])
