"""Transpose schedules: ``linalg.transpose`` ops that move the innermost dimension, in square register tiles.

A transpose that keeps the innermost dimension in place copies whole rows, which LLVM's loop vectorizer
already does at memory speed; one that moves it reads (or writes) with a large stride, one element per cache
line. Such a transpose is tiled by ``L x L`` (``L`` = the lanes of a 256-bit row, at most a register's:
8 floats with AVX-512 or AVX2) over the two dimensions involved and vectorized: ``L`` contiguous row reads, one ``vector.transpose``
in registers, ``L`` contiguous row writes. Large ones (at least ``PARALLEL_MIN_ELEMENTS``) are split across
threads along their outermost dimension first.

Measured on a 2-core AMD EPYC (AVX-512), float32, one thread: 1024x1024 4.65 ms naive -> 0.69 ms (16x16 tiles;
0.80 with 8x16; 0.94 with the ``shuffle16x16`` transpose lowering instead of the default); 256x1024 0.84 -> 0.16
ms. NumPy's ``ascontiguousarray(x.T)``: 4.5 and 0.86 ms. Gradients of matmuls transpose their operands
(``x^T g``, ``g w^T``), so this is where a training step's transposes go.

With AVX-512, ``L x L`` would be 16x16; 8x8 tiles (``TILE_BITS``, rows of 256 bits) measure better on both
counts (2-core Intel Xeon, one thread, a compile of the transpose alone and its call): 128x128 compiles in 0.135 s
instead of 0.20 (LLVM's code generation of 16-lane shuffles is the difference) and runs in 6.0 us instead of 7.3;
256x1024 91 us instead of 111; 1024x1024 the same (0.74 ms). 4x4 tiles: 1024x1024 1.2 ms.

Each 8x8 tile comes out of LLVM as ~130 instructions (blends, broadcasts, spills to the stack). Rewriting the tile
as the textbook network of 24 two-row shuffles (unpack, shuffle pairs, swap 128-bit halves: 40 instructions with
the loads and stores) was measured and not kept: transposes run at memory speed either way (2-core Intel Xeon,
one thread: 1024x1024 0.75 -> 0.73 ms, 128x128 and (8, 4, 128, 64) -> (0, 1, 3, 2) unchanged, training steps and
cold builds unchanged within 1%).

A tile that would not divide the sizes evenly leaves the transpose to the naive loops. A transpose that keeps the
innermost dimension (the CNN's weight gradient reads the input as ``(C, N, H, W)``) copies whole rows, which LLVM
vectorizes; a large one is only split across threads.

A transpose's loops follow its result's dims, outermost first. With two dynamic ones or more, an empty result can
still run a long outer loop: a ``(0, m)`` input transposed to ``(m, 0)`` looped ``m`` times over nothing (21 s for
``m = 2**34``; a static shape folds away). Such a transpose is skipped when its result has no elements
(:func:`skip_empty_transposes`).
"""

from __future__ import annotations

import dataclasses

from mlir import ir

from .common import (ANY, element_bits, in_loop, match_tagged, ops_named, schedule_each, skips_when_empty,
                     unless_empty)
from ..host import HostCPU, host_cpu

#: Bits of one tile row: 8x8 tiles of float32 even where a register holds 16 (see the module's docstring).
TILE_BITS = 256

#: Elements from which a transpose is split across threads (1 MiB of float32: about 100 µs on one core).
PARALLEL_MIN_ELEMENTS = 2 ** 18

_TAG = "relax_mlir.transpose"
#: A transpose only a packed matmul reads as its B: left to the matmul schedule, whose packing copies transpose
#: each block of it instead (``matmul.defer_packed_transposes``).
DEFER_TAG = "relax_mlir.packed_b"
#: A row-copying transpose that packs a matmul's B block into panels (``panels.py``): its rows are copied as
#: whole vectors even inside a thread's chunk, where other row copies are left to LLVM's loop vectorizer.
PANEL_TAG = "relax_mlir.panel"


@dataclasses.dataclass(frozen=True)
class TransposePlan:
    """Tile sizes over the output's loops (``tiles``, empty for a row copy that is only split) and the optional
    per-thread split (``parallel``)."""

    tiles: tuple[int, ...]
    parallel: tuple[int, ...] | None = None


def _permutation(op: ir.Operation) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))


def plan_transpose(op: ir.Operation, threads: int = 1, host: HostCPU | None = None) -> TransposePlan | None:
    """Tiles for a ``linalg.transpose`` on static tensors that moves the innermost dimension (register tiles, and a
    split across threads when large), or for a large one that keeps it (the split only: ``tiles`` empty); None
    for the rest."""
    if op.name != "linalg.transpose" or len(op.results) != 1 or DEFER_TAG in op.attributes:
        return None
    if _inside_forall(op):
        threads = 1  # already one chunk of a thread's work (a matmul's packed block)
    out = op.results[0].type
    if not isinstance(out, ir.RankedTensorType) or not out.has_static_shape or out.rank < 2:
        return None
    if element_bits(out.element_type) < 8:
        return None  # booleans (i1): vector reads and writes of them have no byte layout (bool_storage.py)
    perm = _permutation(op)
    rank = out.rank
    shape = list(out.shape)
    elements = 1
    for d in shape:
        elements *= d
    if perm[-1] == rank - 1:
        if PANEL_TAG in op.attributes:  # a matmul's B block packed into panels: each row one vector copy
            return TransposePlan(tuple([1] * (rank - 1) + [shape[-1]]))
        # the innermost dimension stays: row copies, which LLVM vectorizes; a large one is split across threads
        if threads > 1 and elements >= PARALLEL_MIN_ELEMENTS and shape[0] % threads == 0:
            return TransposePlan((), tuple([shape[0] // threads] + [0] * (rank - 1)))
        return None
    bits = element_bits(out.element_type)
    lanes = min((host or host_cpu()).lanes(bits), max(1, TILE_BITS // max(bits, 8)))
    inner_out, inner_in = rank - 1, perm.index(rank - 1)  # output loop of the input's innermost dimension
    if shape[inner_out] % lanes or shape[inner_in] % lanes:
        return None
    tiles = [1] * rank
    tiles[inner_out] = tiles[inner_in] = lanes
    parallel = None
    if threads > 1 and elements >= PARALLEL_MIN_ELEMENTS:
        split = 0
        chunk, rest = divmod(shape[split], threads)
        if rest == 0 and chunk % tiles[split] == 0:
            parallel = tuple([chunk] + [0] * (rank - 1))
    return TransposePlan(tuple(tiles), parallel)


def _inside_forall(op: ir.Operation) -> bool:
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        if parent.name == "scf.forall":
            return True
        parent = parent.parent
    return False


def _lines(i: int, name: str, plan: TransposePlan) -> list[str]:
    rank = len(plan.tiles)
    handle = f"%tr{i}"
    lines = [match_tagged(handle, name, _TAG, i)]
    if plan.parallel:
        lines.append(f"%trp{i}, %trf{i} = transform.structured.tile_using_forall {handle} tile_sizes "
                     f"[{', '.join(map(str, plan.parallel))}] : ({ANY}) -> ({ANY}, {ANY})")
        handle = f"%trp{i}"
    if not plan.tiles:  # a row copy: split only
        return lines
    lines += [f"%trt{i}, %trl{i}:{rank} = transform.structured.tile_using_for {handle} tile_sizes "
              f"[{', '.join(map(str, plan.tiles))}] : ({ANY}) -> ({', '.join([ANY] * (rank + 1))})",
              f"transform.structured.vectorize %trt{i} : {ANY}"]
    return lines


def skip_empty_transposes(module: ir.Module) -> int:
    """Put every transpose whose result has two dynamic dims or more, outside any loop, under an ``scf.if`` on its
    element count: with none it yields its (empty) init instead of running its loops. Returns how many."""
    count = 0
    for op in ops_named(module.operation, {"linalg.transpose"}):
        out = op.results[0].type if len(op.results) == 1 else None
        if not isinstance(out, ir.RankedTensorType) or DEFER_TAG in op.attributes or in_loop(op) or skips_when_empty(op):
            continue
        dynamic = [a for a in range(out.rank) if ir.RankedTensorType(out).is_dynamic_dim(a)]
        if len(dynamic) >= 2:
            unless_empty(op, [(op.operands[1], a) for a in dynamic])
            count += 1
    return count


def schedule_transposes(module: ir.Module, threads: int = 1, print_ir: bool = False) -> int:
    """Tile and vectorize every transpose of ``module`` that moves the innermost dimension; returns how many. Those
    of dynamic shapes are skipped when empty first (:func:`skip_empty_transposes`)."""
    skip_empty_transposes(module)
    return schedule_each(module, {"linalg.transpose"}, _TAG, lambda op: plan_transpose(op, threads), _lines,
                         "tile and vectorize transposes", print_ir,
                         patterns="transform.apply_patterns.tensor.fold_tensor_subset_ops_into_vector_transfers")


def undefer_transposes(module: ir.Module) -> None:
    """Drop ``DEFER_TAG`` from the transposes the matmul schedule's packing did not take (they are scheduled then)."""
    for op in ops_named(module.operation, {"linalg.transpose"}):
        if DEFER_TAG in op.attributes:
            del op.attributes[DEFER_TAG]
