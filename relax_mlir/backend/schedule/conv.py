"""Convolution schedules: static NCHW/FCHW convolutions as direct vector code, or im2col plus a contraction.

Every static 2-D convolution with float elements and no dilation (the forward convolution, and the data and
weight gradients, which the gradient rules also write as convolutions) takes one of three forms:

* **Shifted rows** (stride 1, padded width at most ``MAX_WIDE_WASTE`` x the output width: the forward
  convolution and the data gradient). The padded input, with enough zero rows below, is seen as one flat row
  per (image, channel) of ``Hp * Wp`` elements, and every output row is computed as wide as the padded input
  (its ``KW - 1`` last columns are cropped afterwards): the output at flat position ``r`` is the sum over
  ``(c, i, j)`` of ``w[f, c, i, j] * x[n, c, r + i*Wp + j]``, so each kernel offset reads a contiguous,
  shifted vector of the row. Tiles of ``MR`` filters x ``NR`` positions (the matmul schedule's register tile:
  8 x 32 with AVX-512) keep their ``MR * NR / lanes`` accumulators in registers across the loops over channels
  and kernel rows; each offset of a row broadcasts one weight per filter into a ``vector.fma`` with the shifted
  vectors (the row's columns unrolled). No im2col
  buffer is written (the former shifted im2col copied 9x the input, 8 MB for the 28x28 CNN's data gradient).
  The tiles (image, filter block, row block) are split across threads by an ``scf.forall``. The convolution's
  own padding and the extra rows are one ``tensor.pad`` (``pad.py`` copies it with all threads).
* **Wide kernels** (stride 1, kernel rows at least half a vector register, ``2 * KW >= lanes``: the weight
  gradient, whose "kernel" is the output gradient, ``OH x OW``). Each output ``(b, f, i, j)`` is a sum over
  ``(c, y)`` of products of two contiguous rows, ``w[f, c, y, :]`` and ``x[b, c, i + y, j:]``, vectorized
  along the kernel row (the last, partial vector masked in both operands, so that the unused lanes add
  ``0 x 0``) with a tile of (filter, output position) accumulators (``wide_tile``: 4 x 4 with 32 vector registers), each reduced
  once at the end (``vector.reduction``, reassociated as every sum here). The kernel is read through a
  ``linalg.transpose`` that keeps its innermost dimension (the gradient's ``g`` transposed to ``[F, N, ..]``
  is not copied). Tiles are split across threads.
* **im2col** (strided convolutions, and shapes neither form takes): ``convert_conv2d_to_img2col`` gathers the
  patches and a contraction tagged ``relax_mlir.contraction`` is tiled, peeled and vectorized by the matmul
  schedule (``matmul.py``).

Measured on a 2-core Intel Xeon (AVX-512), the 28x28 CNN's training step (``benchmarks/train_step.py``,
A/B in one process): weight gradients along the kernel rows instead of MLIR's im2col (a ``[C, N*OH*OW, 9]``
patch copy and a contraction with N = 9) 4.02 -> 3.26 ms; shifted rows read directly instead of the shifted
im2col copy 3.10 -> 2.47 ms (the 8x8 CNN: 0.63 -> 0.60 -> 0.53 ms). Alone, two threads: the weight gradient
8x64x16x16 * 16x64x14x14 0.19 ms (150 GFLOP/s), 1x64x30x30 * 8x64x28x28 0.06 ms. Before (one thread, 2-core
AMD EPYC): naive loops 7.6 ms for 64x8x16x16 * 16x8x3x3, im2col + contraction 1.13 ms, PyTorch 0.33 ms.

Grouped convolutions (``conv_2d_ngchw_gfchw``), integer ones, dynamic shapes, and convolutions strided and dilated
along the same axis keep the naive loops. The lowering (``legalize/nn.py``) hands these schedules a dilated stride-1
convolution (the weight gradient of every strided convolution) as the undilated convolution of its input's phases
stacked along the batch, a strided one as stride-1 convolutions of its input's phases, and a strided
conv2d_transpose as one convolution per output phase, so im2col gets only what those leave.

f16/bf16 convolutions (the lowering sums them in f32) are first given f32 copies of their operands
(``widen_half_convs``), and so take the f32 forms above: left mixed they went to im2col, and LLVM aborted on some
bf16 sizes. 64x8x28x28 * 16x8x3x3, padding 1, two threads (2-core Intel Xeon, A/B in one process): bf16 27 ->
2.0 ms, f16 30 -> 2.1 ms.
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith, linalg, scf, tensor, vector

from ..host import HostCPU, host_cpu

from .common import ANY, apply, element_bits, erase_if_unused, ops_named, script
from .matmul import CONTRACTION, register_tile
from .pad import padding_value, through_transpose

CONV_OPS = {"linalg.conv_2d_nchw_fchw"}
#: A convolution takes the shifted rows when its padded width is at most this many times its output width
#: (each output row computes ``KW - 1`` columns that are cropped).
MAX_WIDE_WASTE = 1.5
_TAG = "relax_mlir.conv"


def _convertible(op: ir.Operation) -> bool:
    """Static shapes, float elements and no dilation: what MLIR's im2col rewrite handles."""
    values = list(op.operands) + list(op.results)
    if op.name not in CONV_OPS or not all(
            isinstance(v.type, ir.RankedTensorType) and v.type.has_static_shape for v in values):
        return False
    if not all(isinstance(v.type.element_type, ir.FloatType) for v in values):
        return False
    if any(d == 0 for v in values for d in v.type.shape):
        return False  # no work (zero filters or an empty batch): the naive loops do nothing, a schedule would fail
    dilations = op.attributes["dilations"] if "dilations" in op.attributes else None
    return dilations is None or all(int(d) == 1 for d in ir.DenseIntElementsAttr(dilations))


def _is_contraction(op: ir.Operation) -> bool:
    kinds = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    return len(kinds) == 4 and all("parallel" in k for k in kinds[:3]) and "reduction" in kinds[3]


def _zero_init(op: ir.Operation) -> bool:
    """Whether the convolution accumulates into a ``linalg.fill`` of 0 (what the lowering writes)."""
    owner = op.operands[2].owner
    owner = getattr(owner, "operation", owner)
    if getattr(owner, "name", "") != "linalg.fill":
        return False
    value = owner.operands[0].owner
    value = getattr(value, "operation", value)
    return (getattr(value, "name", "") == "arith.constant"
            and ir.FloatAttr(value.attributes["value"]).value == 0.0)


#: Kernel offsets (KH x KW) the shifted-row code unrolls in full (a 2x2 kernel); a larger one loops over its rows
#: with each row's columns unrolled. Measured (2-core Intel Xeon, A/B): 3x3 kernels looped over their rows run
#: as fast as fully unrolled (28x28 CNN 2.40 vs 2.41 ms, 8x8 CNN 0.46 vs 0.47) and compile faster (the 8x8 CNN's
#: cold build 1.29 -> 1.14 s); an 11x11 kernel unrolled would be ~2900 vector ops a channel step.
MAX_UNROLLED_OFFSETS = 4


def _shift_plan(op: ir.Operation) -> tuple[int, ...] | None:
    """(N, C, Hp, Wp, F, KH, KW, OH, OW) of a stride-1 convolution whose shifted rows waste at most
    ``MAX_WIDE_WASTE`` of its work on the ``KW - 1`` extra columns per output row, or None."""
    if not (_convertible(op) and _zero_init(op)):
        return None
    if len({str(ir.ShapedType(v.type).element_type) for v in list(op.operands) + list(op.results)}) != 1:
        return None  # a wider accumulator (f16 data, f32 sums): MLIR's im2col keeps the casts
    strides = op.attributes["strides"] if "strides" in op.attributes else None
    if strides is not None and any(int(s) != 1 for s in ir.DenseIntElementsAttr(strides)):
        return None
    n, c, hp, wp = ir.RankedTensorType(op.operands[0].type).shape
    f, _, kh, kw = ir.RankedTensorType(op.operands[1].type).shape
    oh, ow = hp - kh + 1, wp - kw + 1
    if wp > MAX_WIDE_WASTE * ow:
        return None
    return n, c, hp, wp, f, kh, kw, oh, ow


def _shifted_direct(op: ir.Operation, plan: tuple[int, ...], host: HostCPU, threads: int) -> None:
    """Replace a stride-1 convolution by direct vector code over shifted rows (see the module doc)."""
    n, c, hp, wp, f, kh, kw, oh, ow = plan
    x, w = op.operands[0], op.operands[1]
    t = ir.RankedTensorType(x.type).element_type
    mr, nr = register_tile(host, element_bits(t))
    lanes = host.lanes(element_bits(t))
    fb = _divisor(f, mr)
    rows = oh * wp  # output rows computed whole: the KW - 1 columns past each row are cropped afterwards
    span = -(-rows // nr) * nr  # rounded up to whole register tiles (the extra columns cropped too)
    extra = -(-(span - rows + kw - 1) // wp)  # input rows read past the padded input by the last tiles
    vt = ir.VectorType.get([lanes], t)
    pmap = ir.AffineMapAttr.get(ir.AffineMap.get(3, 0, [ir.AffineDimExpr.get(2)]))
    index = ir.IndexType.get()
    const = _constants(op)

    with ir.InsertionPoint(op), op.location:
        zero = arith.constant(t, 0.0)
        x, low, high = _zero_padding(x)  # the convolution's own padding and the extra rows: one pad, one copy
        high[2] += extra
        padded = tensor.PadOp(ir.RankedTensorType.get([n, c, hp + extra, wp], t), x, [], [], low, high)
        block = padded.region.blocks.append(*[index] * 4)
        with ir.InsertionPoint(block):
            tensor.YieldOp(zero)
        flat = tensor.collapse_shape(ir.RankedTensorType.get([n, c, (hp + extra) * wp], t), padded.result,
                                     [[0], [1], [2, 3]])
        f_tiles, r_tiles = f // fb, span // nr

        def tile(k: ir.Value) -> tuple[list[ir.Value], ir.Value]:
            """(offsets, the 1 x fb x nr tile of outputs) of tile ``k`` = (image, filter block, row block)."""
            image = arith.divui(k, const(f_tiles * r_tiles))
            rest = arith.remui(k, const(f_tiles * r_tiles))
            f0 = arith.muli(arith.divui(rest, const(r_tiles)), const(fb))
            r0 = arith.muli(arith.remui(rest, const(r_tiles)), const(nr))
            filters = [arith.addi(f0, const(r)) for r in range(fb)]
            splat = arith.constant(vt, ir.DenseElementsAttr.get_splat(vt, ir.FloatAttr.get(t, 0.0)))
            over_c = scf.ForOp(const(0), const(c), const(1), [splat] * (fb * nr // lanes))
            with ir.InsertionPoint(over_c.body):
                ci = over_c.induction_variable

                def offsets(accs: list[ir.Value], i: ir.Value, row_start: ir.Value) -> list[ir.Value]:
                    """The products of kernel row ``i`` (input row offset ``row_start``), all its columns."""
                    for j in range(kw):
                        at = arith.addi(row_start, const(j))
                        xs = [vector.transfer_read(vt, flat, [image, ci, arith.addi(at, const(v * lanes))], pmap,
                                                   zero, [True]) for v in range(nr // lanes)]
                        for r, fi in enumerate(filters):
                            weight = vector.broadcast(vt, tensor.extract(w, [fi, ci, i, const(j)]))
                            for v, xv in enumerate(xs):
                                slot = r * len(xs) + v
                                accs[slot] = vector.fma(weight, xv, accs[slot])
                    return accs

                accs = list(over_c.inner_iter_args)
                if kh * kw <= MAX_UNROLLED_OFFSETS:
                    for i in range(kh):
                        accs = offsets(accs, const(i), arith.addi(r0, const(i * wp)))
                else:  # a large kernel: one loop iteration per kernel row, its columns unrolled
                    over_i = scf.ForOp(const(0), const(kh), const(1), accs)
                    with ir.InsertionPoint(over_i.body):
                        i = over_i.induction_variable
                        scf.YieldOp(offsets(list(over_i.inner_iter_args), i,
                                            arith.addi(r0, arith.muli(i, const(wp)))))
                    accs = list(over_i.results)
                scf.YieldOp(accs)
            dest = tensor.empty([1, fb, nr], t)
            for r in range(fb):
                for v in range(nr // lanes):
                    dest = vector.transfer_write(dest.type, over_c.results[r * (nr // lanes) + v], dest,
                                                 [const(0), const(r), const(v * lanes)], pmap, [True])
            return [image, f0, r0], dest

        computed = _over_tiles(tensor.empty([n, f, span], t), n * f_tiles * r_tiles, [1, fb, nr], tile, threads,
                               const)
        wide = tensor.extract_slice(ir.RankedTensorType.get([n, f, rows], t), computed, [], [], [],
                                    [0, 0, 0], [n, f, rows], [1, 1, 1])
        wide = tensor.expand_shape(ir.RankedTensorType.get([n, f, oh, wp], t), wide, [[0], [1], [2, 3]], [],
                                   [n, f, oh, wp])
        out = tensor.extract_slice(op.results[0].type, wide, [], [], [], [0, 0, 0, 0], [n, f, oh, ow], [1, 1, 1, 1])
    folded, init = op.operands[0], op.operands[2]
    op.results[0].replace_all_uses_with(out)
    op.erase()
    erase_if_unused(folded)
    erase_if_unused(init)


# --- convolutions with wide filters (weight gradients): direct, vectorized along the filter's rows -------------
def wide_tile(host: HostCPU) -> tuple[int, int]:
    """(filters, output positions) of the wide-kernel register tile: one accumulator each, plus one vector of
    each row read per step, within the vector registers (4 x 4 + 8 of 32 with AVX-512; 2 x 3 + 5 of 16)."""
    return (4, 4) if host.vector_registers >= 32 else (2, 3)


def _wide_filter_plan(op: ir.Operation, host: HostCPU) -> tuple[int, ...] | None:
    """(B, C, Hp, Wp, F, KH, KW, OH, OW) of a stride-1 convolution whose filter rows fill at least half a vector
    register (``KW >= lanes / 2``), or None."""
    if not (_convertible(op) and _zero_init(op)):
        return None
    types = {str(ir.ShapedType(v.type).element_type) for v in list(op.operands) + list(op.results)}
    strides = op.attributes["strides"] if "strides" in op.attributes else None
    if len(types) != 1 or (strides is not None and any(int(s) != 1 for s in ir.DenseIntElementsAttr(strides))):
        return None
    b, c, hp, wp = ir.RankedTensorType(op.operands[0].type).shape
    f, _, kh, kw = ir.RankedTensorType(op.operands[1].type).shape
    lanes = host.lanes(element_bits(ir.RankedTensorType(op.operands[0].type).element_type))
    if 2 * kw < lanes:
        return None
    return b, c, hp, wp, f, kh, kw, hp - kh + 1, wp - kw + 1


def _zero_padding(x: ir.Value) -> tuple[ir.Value, list[int], list[int]]:
    """(source, low, high) of ``x`` if it is a static ``tensor.pad`` with zeros, else (``x``, zeros, zeros)."""
    owner = x.owner
    owner = getattr(owner, "operation", owner)
    rank = ir.RankedTensorType(x.type).rank
    if isinstance(owner, ir.Operation) and owner.name == "tensor.pad" and len(owner.operands) == 1:
        value = padding_value(owner)
        value = getattr(value.owner, "operation", value.owner) if value is not None else None
        if (isinstance(value, ir.Operation) and value.name == "arith.constant"
                and isinstance(value.attributes["value"], ir.FloatAttr)
                and math.copysign(1.0, ir.FloatAttr(value.attributes["value"]).value) == 1.0
                and ir.FloatAttr(value.attributes["value"]).value == 0.0):  # +0.0, as the pad added here
            return (owner.operands[0], list(ir.DenseI64ArrayAttr(owner.attributes["static_low"])),
                    list(ir.DenseI64ArrayAttr(owner.attributes["static_high"])))
    return x, [0] * rank, [0] * rank


def _constants(op: ir.Operation):
    """``const(i)``: the index constant ``i``, made once, at the start of ``op``'s block (so that it dominates
    every loop built in place of ``op``)."""
    made: dict[int, ir.Value] = {}
    where = ir.InsertionPoint.at_block_begin(op.block)

    def const(i: int) -> ir.Value:
        if i not in made:
            made[i] = arith.constant(ir.IndexType.get(), i, ip=where, loc=op.location)
        return made[i]
    return const


def _over_tiles(init: ir.Value, n_tiles: int, sizes: list[int], tile, threads: int, const) -> ir.Value:
    """``init`` with each of its ``n_tiles`` static-size blocks computed by ``tile(k) -> (offsets, block)``: an
    ``scf.forall`` over the tiles (one OpenMP region) with several threads, an ``scf.for`` with one."""
    dyn = [ir.ShapedType.get_dynamic_size()] * len(sizes)
    ones = [1] * len(sizes)
    if threads > 1:
        loop = scf.ForallOp([0], [n_tiles], [1], [init])
        with ir.InsertionPoint(loop.body):
            offsets, block = tile(loop.induction_variables[0])
            with ir.InsertionPoint(loop.terminator().block):
                tensor.parallel_insert_slice(block, loop.inner_iter_args[0], offsets, [], [], dyn, sizes, ones)
    else:
        loop = scf.ForOp(const(0), const(n_tiles), const(1), [init])
        with ir.InsertionPoint(loop.body):
            offsets, block = tile(loop.induction_variable)
            scf.YieldOp([tensor.insert_slice(block, loop.inner_iter_args[0], offsets, [], [], dyn, sizes, ones)])
    return loop.results[0]


def _divisor(n: int, most: int) -> int:
    """The largest divisor of ``n`` that is at most ``most`` (tiles that divide the work: no partial tiles)."""
    return max(d for d in range(1, min(n, most) + 1) if n % d == 0)


def _wide_filter_conv(op: ir.Operation, plan: tuple[int, ...], host: HostCPU, threads: int) -> None:
    """Replace a convolution with wide filter rows by direct vector code (see the module doc)."""
    b, c, _, _, f, kh, kw, oh, ow = plan
    x = op.operands[0]
    w, w_perm = through_transpose(op.operands[1])
    t = ir.RankedTensorType(x.type).element_type
    lanes = host.lanes(element_bits(t))
    vt = ir.VectorType.get([lanes], t)
    cols = b * oh * ow  # output positions (b, i, j), one column each
    rows_tile, cols_tile = wide_tile(host)
    fb, cb = _divisor(f, rows_tile), _divisor(cols, cols_tile)
    n_col_tiles = cols // cb
    const = _constants(op)

    masks: dict[int, ir.Value] = {}

    def read(src: ir.Value, at: list[ir.Value], n: int) -> ir.Value:
        """``n`` elements of a row from ``at``, zeros in the other lanes (both operands: 0 x 0 adds nothing)."""
        rank = ir.RankedTensorType(src.type).rank
        pmap = ir.AffineMapAttr.get(ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(rank - 1)]))
        if n == lanes:
            return vector.transfer_read(vt, src, at, pmap, arith.constant(t, 0.0), [True])
        if n not in masks:
            masks[n] = vector.constant_mask(ir.VectorType.get([lanes], ir.IntegerType.get_signless(1)), [n],
                                            ip=ir.InsertionPoint.at_block_begin(op.block), loc=op.location)
        return vector.transfer_read(vt, src, at, pmap, arith.constant(t, 0.0), [False], mask=masks[n])

    def tile(k: ir.Value) -> tuple[list[ir.Value], ir.Value]:
        """([row offset, column offset], the fb x cb tile of sums) of tile ``k``."""
        r0 = arith.muli(arith.divui(k, const(n_col_tiles)), const(fb))
        q0 = arith.muli(arith.remui(k, const(n_col_tiles)), const(cb))
        where = []
        for q in range(cb):
            col = arith.addi(q0, const(q))
            pos = arith.remui(col, const(oh * ow))
            where.append((arith.divui(col, const(oh * ow)), arith.divui(pos, const(ow)), arith.remui(pos, const(ow))))
        rows = [arith.addi(r0, const(r)) for r in range(fb)]
        zero = arith.constant(vt, ir.DenseElementsAttr.get_splat(vt, ir.FloatAttr.get(t, 0.0)))
        over_c = scf.ForOp(const(0), const(c), const(1), [zero] * (fb * cb))
        with ir.InsertionPoint(over_c.body):
            ci = over_c.induction_variable
            over_y = scf.ForOp(const(0), const(kh), const(1), list(over_c.inner_iter_args))
            with ir.InsertionPoint(over_y.body):
                y = over_y.induction_variable
                accs = list(over_y.inner_iter_args)
                for x0 in range(0, kw, lanes):
                    n = min(lanes, kw - x0)
                    w_rows = []
                    for row in rows:
                        at = [row, ci, y, const(x0)]
                        w_rows.append(read(w, [at[w_perm.index(d)] for d in range(4)], n))
                    x_rows = [read(x, [bq, ci, arith.addi(iq, y), arith.addi(jq, const(x0))], n)
                              for bq, iq, jq in where]
                    accs = [vector.fma(w_rows[r], x_rows[q], accs[r * cb + q]) for r in range(fb) for q in range(cb)]
                scf.YieldOp(accs)
            scf.YieldOp(list(over_y.results))
        kind = ir.Attribute.parse("#vector.kind<add>")
        reassoc = ir.Attribute.parse("#arith.fastmath<reassoc>")
        sums = [vector.reduction(t, kind, acc, fastmath=reassoc) for acc in over_c.results]
        tile_t = ir.VectorType.get([fb, cb], t)
        block = vector.from_elements(tile_t, sums)
        dest = tensor.empty([fb, cb], t)
        pmap = ir.AffineMapAttr.get(ir.AffineMap.get_identity(2))
        return [r0, q0], vector.transfer_write(dest.type, block, dest, [const(0), const(0)], pmap, [True, True])

    with ir.InsertionPoint(op), op.location:
        computed = _over_tiles(tensor.empty([f, cols], t), (f // fb) * n_col_tiles, [fb, cb], tile, threads, const)
        by_filter = tensor.expand_shape(ir.RankedTensorType.get([f, b, oh, ow], t), computed,
                                        [[0], [1, 2, 3]], [], [f, b, oh, ow])
        out = linalg.transpose(by_filter, outs=[tensor.empty([b, f, oh, ow], t)], permutation=[1, 0, 2, 3])
        out = out.results[0] if isinstance(out, ir.OpView) else out  # the binding returns the op or its result
    transposed, init = op.operands[1], op.operands[2]
    op.results[0].replace_all_uses_with(out)
    op.erase()
    erase_if_unused(transposed)
    erase_if_unused(init)


# --- half-float convolutions: operands widened to f32 first ----------------------------------------------------
def _half_operands(op: ir.Operation) -> bool:
    """Whether ``op`` convolves f16/bf16 operands into f32 sums (what the lowering writes for half floats)."""
    if not _convertible(op):
        return False
    x, w, out = (ir.ShapedType(v.type).element_type for v in (op.operands[0], op.operands[1], op.results[0]))
    return isinstance(out, ir.F32Type) and all(isinstance(t, (ir.F16Type, ir.BF16Type)) for t in (x, w))


def _widened(value: ir.Value) -> ir.Value:
    """``value`` (f16/bf16) as f32: a zero ``tensor.pad`` or a ``linalg.transpose`` keeping its innermost dimension
    stays one around the widened source (so that the schedules still read through them), anything else becomes an
    elementwise ``extf``."""
    owner = getattr(value.owner, "operation", value.owner)
    f32 = ir.F32Type.get()
    shape = ir.RankedTensorType(value.type).shape
    if isinstance(owner, ir.Operation) and owner.name == "tensor.pad":
        source, low, high = _zero_padding(value)
        if source != value:
            zero = arith.constant(f32, 0.0)
            padded = tensor.PadOp(ir.RankedTensorType.get(shape, f32), _widened(source), [], [], low, high)
            with ir.InsertionPoint(padded.region.blocks.append(*[ir.IndexType.get()] * len(shape))):
                tensor.YieldOp(zero)
            return padded.result
    source, perm = through_transpose(value)
    if source != value:
        out = linalg.transpose(_widened(source), outs=[tensor.empty(shape, f32)], permutation=perm)
        return out.results[0] if isinstance(out, ir.OpView) else out
    rank = len(shape)
    identity = ir.AffineMap.get_identity(rank)
    widen = linalg.GenericOp_([value], [tensor.empty(shape, f32)], [identity, identity], ["parallel"] * rank)
    with ir.InsertionPoint(widen.regions[0].blocks[0]):
        linalg.YieldOp([arith.extf(f32, widen.regions[0].blocks[0].arguments[0])])
    return widen.results[0]


def widen_half_convs(module: ir.Module) -> int:
    """Replace every static convolution of f16/bf16 operands into f32 sums by one of f32 copies of its operands;
    returns how many.

    Such a convolution is then an f32 one, which the direct schedules below take (they want one element type).
    Left mixed it went to im2col and the matmul schedule, whose peeled tiles moved bf16 elements between vector
    lanes: LLVM aborted the process on some sizes with AVX512-BF16 (``Do not know how to soft promote this
    operator's operand``: bf16 outputs of 7x7, 9x9, 11x11, transposed ones of 5x5, 7x7, 9x9). The sums are f32
    either way; the extra pass over the input converts it once where im2col copied it KH x KW times."""
    convs = [op for op in ops_named(module.operation, CONV_OPS) if _half_operands(op)]
    for op in convs:
        x, w, init = op.operands
        attrs = {name: [int(v) for v in ir.DenseIntElementsAttr(op.attributes[name])]
                 for name in ("strides", "dilations") if name in op.attributes}
        with ir.InsertionPoint(op), op.location:
            out = linalg.conv_2d_nchw_fchw(_widened(x), _widened(w), outs=[init], **attrs)
        op.results[0].replace_all_uses_with(out)
        op.erase()
        erase_if_unused(x)
        erase_if_unused(w)
    return len(convs)


def schedule_convs(module: ir.Module, print_ir: bool = False, threads: int = 1, host: HostCPU | None = None) -> int:
    """Rewrite every static NCHW convolution as direct vector code (shifted rows, or wide kernels along their
    rows) or im2col + a tagged contraction; returns how many."""
    host = host or host_cpu()
    direct = 0
    widen_half_convs(module)
    for op in ops_named(module.operation, CONV_OPS):
        plan = _shift_plan(op)
        if plan is not None:
            _shifted_direct(op, plan, host, threads)
            direct += 1
            continue
        plan = _wide_filter_plan(op, host)
        if plan is not None:
            _wide_filter_conv(op, plan, host, threads)
            direct += 1
    convs = [op for op in ops_named(module.operation, CONV_OPS) if _convertible(op)]
    if not convs:
        return direct
    for op in convs:
        op.attributes[_TAG] = ir.UnitAttr.get()
    body = [f'%convs = transform.structured.match ops{{["linalg.conv_2d_nchw_fchw"]}} attributes{{{_TAG}}} '
            f"in %root : ({ANY}) -> {ANY}",
            f"%cols, %results = transform.structured.convert_conv2d_to_img2col %convs : ({ANY}) -> ({ANY}, {ANY})"]
    apply(module, script(body), "im2col convolutions", print_ir)
    for op in ops_named(module.operation, {"linalg.generic"}):
        if _is_contraction(op) and _reads_im2col(op):
            op.attributes[CONTRACTION] = ir.UnitAttr.get()
    return direct + len(convs)


def _reads_im2col(op: ir.Operation) -> bool:
    """Whether the contraction's second operand is an im2col copy (a generic whose input map has a floordiv)."""
    owner = op.operands[1].owner
    if not isinstance(owner, ir.Operation):
        owner = getattr(owner, "operation", owner)
    if getattr(owner, "name", "") != "linalg.generic":
        return False
    return "floordiv" in str(ir.ArrayAttr(owner.attributes["indexing_maps"])[0])
