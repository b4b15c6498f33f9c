"""Packed B blocks in panels: each NR-wide column panel of a packed matmul's B block contiguous.

The matmul schedule packs a large matmul's KC x NC block of B into a new buffer (``matmul.py``); copied as it
is, the block keeps NC floats between its rows, so the register tile's K loop reads its 32 floats from a new row
``4 * NC`` bytes further at every step: with NC = 512 the rows are 2 KiB apart and a panel's 256 rows fall into
four of the 64 sets of a 48 KiB L1d, which cannot hold the 32 KiB panel, and a step's B comes from L2 at
a new 4 KiB page every other row.
Packed in panels (``[NC / NR][KC][NR]``, the layout of GotoBLAS and BLIS), the K loop reads B sequentially
and the panel stays in L1 while the register tile sweeps A's rows.

This runs after vectorization: a packing copy whose only readers are the register tile's ``vector<1xNR>``
reads at a column that is a multiple of NR (the N loop's induction variable) becomes a ``linalg.transpose``
of the block, viewed ``KC x NC/NR x NR``, into a ``NC/NR x KC x NR`` buffer (each row of NR floats one vector
copy: ``transpose.PANEL_TAG``), and each read reads panel ``n / NR``, row ``k``. The packing copy of a deferred
transpose (``g w^T``: the block of ``w`` is ``NC x KC``) becomes the transpose of ``w``'s block viewed
``NC/NR x NR x KC`` into the same panels (tiled 8x8 and vectorized by the transpose schedule).

Measured on a 2-core Intel Xeon (AVX-512, 48 KiB L1d, 2 MiB L2), alternated in one process
(``benchmarks/ab_step.py``): the wide MLP's training step 15.23 -> 14.19 ms (-6.8%, twice); its three kinds of
256x1024x1024 products (``benchmarks/ab_kernels.py``), two threads, 221 -> 230 GFLOP/s (``A B``), 222 -> 234
(``x^T g``), 208 -> 223 (``g w^T``);
panels of the transposed blocks alone -0.8% of the step. Measured and not kept: the register tile's N loop
outside its M loop, so that a panel stays in L1 while the tile sweeps the A block (+3.6% on the step: B is read
sequentially from L2 at a rate L2 sustains, and A's 8 KiB panel stays in L1 as it is); A's blocks in MR-row panels
too (``x^T g`` unchanged); a 12x32 register tile (+4.1%: M = 256 leaves remainder rows). The small MLPs and the CNNs pack
nothing and are unchanged.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import affine, arith, bufferization, linalg, tensor, vector

from .common import constant_int, defining_op, ops_named
from .transpose import PANEL_TAG

#: Pack B blocks in panels (a switch for A/B measurements).
PANEL_B = True


def _copy_source(op: ir.Operation) -> ir.Value | None:
    """The tensor an ``alloc_tensor() copy(x)`` copies (None for other ops)."""
    if op.name != "bufferization.alloc_tensor" or "operandSegmentSizes" not in op.attributes:
        return None
    sizes = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    if len(sizes) < 2 or sizes[0] != 0 or sizes[1] != 1:
        return None
    return op.operands[0]


def _transposed_block(op: ir.Operation) -> ir.Value | None:
    """The block ``w`` of a packing ``linalg.transpose(w) [1, 0]`` into a fresh buffer (None for other ops)."""
    if op.name != "linalg.transpose" or list(ir.DenseI64ArrayAttr(op.attributes["permutation"])) != [1, 0]:
        return None
    dest = defining_op(op.operands[1])
    if dest is None or dest.name != "bufferization.alloc_tensor" or list(dest.operands):
        return None
    return op.operands[0]


def _column_multiple(index: ir.Value, nr: int) -> bool:
    """Whether ``index`` is an ``scf.for`` induction variable whose values are all multiples of ``nr``."""
    owner = index.owner
    if not isinstance(owner, ir.Block):
        return False
    loop = owner.owner
    loop = getattr(loop, "operation", loop)
    if loop.name != "scf.for" or owner.arguments[0] != index:
        return False
    lower, step = constant_int(loop.operands[0]), constant_int(loop.operands[2])
    return lower is not None and step is not None and lower % nr == 0 and step % nr == 0


def _panel_reads(value: ir.Value, nr: int) -> list[ir.Operation] | None:
    """The ``vector<1xNR>`` reads of ``value`` at columns that are multiples of NR, if they are all its uses."""
    reads = []
    identity = ir.AffineMap.get_identity(2)
    for use in value.uses:
        read = use.owner
        read = getattr(read, "operation", read)
        if read.name != "vector.transfer_read" or read.operands[0] != value or len(read.operands) != 4:
            return None
        vtype = ir.VectorType(read.results[0].type)
        if list(vtype.shape) != [1, nr] or ir.AffineMapAttr(read.attributes["permutation_map"]).value != identity:
            return None
        if not _column_multiple(read.operands[2], nr):
            return None
        reads.append(read)
    return reads or None


def pack_b_panels(module: ir.Module, nr: int) -> int:
    """Rewrite each B packing copy read only by NR-wide register tiles into panels; returns how many."""
    if not PANEL_B:
        return 0
    count = 0
    for op in ops_named(module.operation, {"bufferization.alloc_tensor", "linalg.transpose"}):
        source, transposed = _copy_source(op), None
        if source is None:
            transposed = _transposed_block(op)
            if transposed is None:
                continue
        block_t = ir.RankedTensorType(op.results[0].type)
        if block_t.rank != 2 or not block_t.has_static_shape or block_t.shape[1] % nr:
            continue
        reads = _panel_reads(op.results[0], nr)
        if reads is None:
            continue
        _rewrite(op, source, transposed, block_t, reads, nr)
        count += 1
    return count


def _rewrite(op: ir.Operation, source: ir.Value | None, transposed: ir.Value | None,
             block_t: ir.RankedTensorType, reads: list[ir.Operation], nr: int) -> None:
    kc, nc = block_t.shape
    elem = block_t.element_type
    panels_t = ir.RankedTensorType.get([nc // nr, kc, nr], elem)
    with ir.InsertionPoint(op), op.location:
        dest = bufferization.AllocTensorOp(panels_t, [])
        if source is not None:  # the block of B: [K][N] viewed [K][N/NR][NR], panels moved out
            view_t = ir.RankedTensorType.get([kc, nc // nr, nr], elem)
            view = tensor.ExpandShapeOp(view_t, source, [[0], [1, 2]], [], [kc, nc // nr, nr]).result
            perm = [1, 0, 2]
        else:  # the block of w, B transposed: [N][K] viewed [N/NR][NR][K]
            view_t = ir.RankedTensorType.get([nc // nr, nr, kc], elem)
            view = tensor.ExpandShapeOp(view_t, transposed, [[0, 1], [2]], [], [nc // nr, nr, kc]).result
            perm = [0, 2, 1]
        packed = linalg.transpose(view, outs=[dest.result], permutation=perm)
        packed_op = defining_op(packed.results[0] if isinstance(packed, ir.OpView) else packed)
        packed_op.attributes[PANEL_TAG] = ir.UnitAttr.get()
        packed = packed_op.results[0]
    d0 = ir.AffineDimExpr.get(0)
    panel_of = ir.AffineMap.get(1, 0, [ir.AffineExpr.get_floor_div(d0, ir.AffineConstantExpr.get(nr))])
    rows_map = ir.AffineMap.get(3, 0, [ir.AffineDimExpr.get(1), ir.AffineDimExpr.get(2)])
    for read in reads:
        row, col, padding = read.operands[1], read.operands[2], read.operands[3]
        with ir.InsertionPoint(read), read.location:
            panel = affine.AffineApplyOp(panel_of, [col]).result
            zero = arith.ConstantOp(ir.IndexType.get(), 0).result
            new = vector.TransferReadOp(read.results[0].type, packed, [panel, row, zero], rows_map, padding,
                                        read.attributes["in_bounds"])
        read.results[0].replace_all_uses_with(new.result)
        read.erase()
    old_dest = defining_op(op.operands[1]) if transposed is not None else None
    op.erase()
    if old_dest is not None and not list(old_dest.results[0].uses):
        old_dest.erase()

