"""Matmul schedules: register tiles, cache tiles and parallel tiles for ``linalg.matmul``/``batch_matmul``.

The schedule is written per op: Python looks at each matmul-like op, picks tile sizes from its static shape and
the host (``backend/host.py``), tags it with a unit attribute, and emits a transform script that matches that tag. Two
scripts run in turn (``apply_named_sequence``):

1. **tile and peel** — for a large op (at least ``PARALLEL_MIN_FLOPS``, with more than one thread; at least
   ``HOT_PARALLEL_MIN_FLOPS`` in a function that has such a large matmul, whose threads are awake anyway), first
   ``tile_using_forall`` splits M (or N) into one chunk per thread (an ``scf.forall``, later an OpenMP
   ``omp.parallel``/``omp.wsloop``); then, when B does not fit in half of L2, ``tile_using_for`` cache-tiles
   (N by NC, K by KC, M by MC, in that loop order: a KC x NC block of B stays in L2 while every MR-row panel of
   A sweeps it); a large ``linalg.matmul`` (``PACK_MIN_FLOPS``) is cache-tiled even when B fits, and its blocks
   are packed: a zero-size ``tensor.pad`` that must not fold (``nofold``) copies the KC x NC block of B (hoisted
   out of the M loop, ``hoist_pad``) and the MC x KC block of A into contiguous buffers (then rewritten as
   ``bufferization.alloc_tensor`` with ``copy``, which bufferizes without the pad's fill); finally the register tile (M, N, K) = (MR, NR, 1) with NR two vector registers wide, and every
   M/N loop whose trip count does not divide evenly (or is dynamic) is peeled so that the steady-state tiles are
   static once canonicalized.
2. **vectorize and hoist** — every tiled op whose operands are now fully static is vectorized into a
   ``vector.contract`` (the MR x NR accumulator stays in registers across the K loop thanks to
   ``hoist_loop_invariant_subsets``); tiles that stay dynamic (the remainder of a dynamic batch dimension)
   are left to the scalar loop lowering.

Tile sizes follow from the host: NR = 2 x lanes (32 floats with AVX-512, 16 with AVX2), MR = 8 with 32 vector
registers (16 accumulators), 6 with 16; KC = the largest power of two with a KC x NR panel of B in L1d;
NC = L2 / (4 x KC) elements; MC = 8 x MR. Measured on a 2-core AMD EPYC (AVX-512, 32 KiB L1d, 1 MiB L2),
256x1024x1024 float32, one thread: register tile alone 63 GFLOP/s; + cache tiles (64, 256, 256) 97; (128, 512,
256) 64; register tiles 16x32 80, 12x32 80, 6x64 93, 4x64 99, 8x48 90; two threads 180 (NumPy/OpenBLAS: 101
on one thread, 183 on two). Cache tiles are used only where they divide the op's sizes (no remainder loops).

Packing, measured on a 2-core Intel Xeon (AVX-512, 48 KiB L1d), alternated in one process: rows of 1024 floats are
4 KiB apart, so unpacked the register tile's K loop reads A's eight rows and B's rows from one L1 set and a new
page at every step (256x1040x1024, whose rows are not 4 KiB apart, ran at 152 GFLOP/s where 256x1024x1024 ran at
117). Packed, 256x1024x1024: one thread 136 -> 151 GFLOP/s, two 250 -> 281; the weight gradient's x^T g,
1024x256x1024: one thread 104 -> 151, two 201 -> 264 (packing only A: 131, no better; B unhoisted: 149); the wide
MLP's training step 13.96 -> 12.48 ms. A 64x128x128 matmul packed: 125 -> 108 GFLOP/s, so small ones are not.
B's block is packed in NR-wide panels (``panels.py``, after vectorization): each K step of the register tile then
reads the next 128 bytes of one panel instead of a row 2 KiB further (wide MLP step -6.8%).

A transposed B (``g w^T``, the gradient of a dense layer's input) is not transposed whole first: when its
matmul packs, the transpose is left to this schedule (``defer_packed_transposes``) and each packing copy of a
B block becomes a transpose of the matching block of ``w`` (``_transposing_pack``), which the transpose schedule
then tiles 8x8 and vectorizes. 256x1024 . (1024x1024)^T, 2-core Intel Xeon, alternated in one process: two
threads 206 -> 248 GFLOP/s, one 122 -> 138; the wide MLP's step 13.24 -> 12.89 ms.

A narrow N (a 10-class layer: N = 10 would be an 8-lane tile and a peeled 2-lane one, each costing one FMA a row)
is padded to whole vector registers (``padded_width``: when that takes fewer vector operations a row) with
``transform.structured.pad``; the reads of the zero-padded B are rewritten to read B itself past its rows' ends
(``_read_through_pads``: out-of-bounds transfer dimensions, which LLVM loads under a mask, the missing lanes zero),
so no padded copy of B is made, and the result is the slice of the real columns of the padded one, read in place
by what follows (``_drop_copy_backs``: the pad's copy-back is dropped). 2-core Intel Xeon, A/B in one process:
the tutorial MLP's step 0.0784 -> 0.0744 ms, the 784-input MLP's 0.242 -> 0.230, the 8x8 CNN's 0.367 -> 0.359,
the wide MLP's unchanged; 64x128 . 128x10 alone 5.6 -> 5.1 us a call (a 128x16 B: 4.2); with B's pad left as a
copy the tutorial step gained only 1.4%; dropping the copy-back took another 1.3% off it (0.0764 -> 0.0754).

Masked vectorization (``vector_sizes``) was tried for the dynamic tiles and rejected: canonicalization then
folds a ``tensor.cast`` into the ``vector.mask`` region (``'vector.mask' op expects only one operation to
mask``), and masked transfers are not hoisted anyway.

The contraction itself is lowered later, on memrefs, by ``convert-vector-to-llvm{vector-contract-lowering=
outerproduct}``: one broadcast of A and two FMAs per row of the tile.
"""

from __future__ import annotations

import dataclasses
import math

from mlir import ir
from mlir.dialects import bufferization

from .accumulators import zero_accumulators
from .panels import pack_b_panels
from .common import (ANY, VEC_TAG, all_static, apply, cleanup, constant_float, defining_op, element_bits,
                     erase_if_unused, ops_named, script, slice_offsets)
from ..host import HostCPU, host_cpu

#: Iteration-space position of the (M, N) loops of each scheduled op; K is always the last loop.
MATMUL_LIKE: dict[str, tuple[int, int]] = {"linalg.matmul": (0, 1), "linalg.batch_matmul": (1, 2)}
#: A ``linalg.generic`` with this unit attribute is a (batched) matmul too: loops (batch..., M, N, K), A the
#: first operand with K last, B the second (``conv.py`` tags the contractions of its im2col convolutions).
CONTRACTION = "relax_mlir.contraction"
#: A matmul is split across threads only from this many flops (2*M*N*K) on: below it the fork/join of a
#: parallel region (2-5 µs with hot threads, tens of µs with sleeping ones) costs more than it saves. 2**24
#: flops take about 170 µs on one AVX-512 core; the 64x784x128 matmul of the tutorial step (12.8 MFLOP) stays
#: on one thread. At 2**23 it was split: the 784-input MLP's step ran 6% faster alone (0.346 -> 0.326 ms, A/B in
#: one process) but 40% slower in ``train_step.py`` (0.35 -> 0.49 ms), where the other frameworks' idle
#: threads share the two cores: a parallel region waits for its slowest thread.
PARALLEL_MIN_FLOPS = 2 ** 24
#: ... but in a function that splits a matmul of PARALLEL_MIN_FLOPS or more anyway, the threads are awake at every
#: call, and a matmul is split from this many flops on: the wide MLP's three 10-class products (5.2 MFLOP each,
#: N = 10 tiled 8 + 2) then run on both cores, its step 10.47 -> 10.28 ms (-1.8%, A/B in one process, 2-core
#: Intel Xeon). Functions with no large matmul (the 64- and 784-input MLPs) are unchanged.
HOT_PARALLEL_MIN_FLOPS = 2 ** 22
#: Narrow N padded to whole vector registers (``padded_width``); a switch for A/B measurements.
PAD_N = True
#: Flops from which a matmul's cache blocks of A and B are packed (copied contiguous): see the module docstring.
PACK_MIN_FLOPS = PARALLEL_MIN_FLOPS
#: K steps one iteration of a large matmul's register-tile loop does (see ``plan_matmul``).
K_UNROLL = 4

_TAG = "relax_mlir.sched"


@dataclasses.dataclass(frozen=True)
class MatmulPlan:
    """How one matmul-like op is tiled, outermost first: ``parallel`` (forall tile sizes, 0 = not split, or
    None), ``cache`` (tile sizes of the cache loops, run in the order N, K, M, or None), ``tile_sizes`` (the
    register tile over every loop) and ``peel`` (loop positions of the register tile whose trip count does not
    divide, innermost first: peeling an outer loop clones the inner ones); ``unroll_k``: K steps an iteration of
    the vectorized tile's K loop does; ``pack``: the cache blocks of A and B are copied into contiguous buffers
    (of ``element_type``) first."""

    op_name: str
    tile_sizes: tuple[int, ...]
    peel: tuple[int, ...]
    cache: tuple[int, ...] | None = None
    parallel: tuple[int, ...] | None = None
    unroll_k: int = 1
    pack: bool = False
    element_type: str = "f32"
    pad_n: int = 0


def register_tile(host: HostCPU, bits: int) -> tuple[int, int]:
    """(MR, NR): NR is two vector registers of elements; MR rows keep MR x 2 accumulators in about half of
    the vector registers (8 rows with 32 registers, 6 with 16)."""
    return (8 if host.vector_registers >= 32 else 6), 2 * host.lanes(bits)


def _vector_pieces(width: int, lanes: int) -> int:
    """Vector operations a row of ``width`` elements takes as tiled without padding: whole registers, then one
    narrower vector per remaining power of two (the peeled remainders)."""
    whole, rest = divmod(width, lanes)
    return whole + bin(rest).count("1")


def padded_width(n: int, lanes: int, nr: int) -> int:
    """The width a narrow N (less than the register tile's ``nr``) is padded to, a whole number of vector
    registers, when that takes fewer vector operations a row than its power-of-two pieces (N = 10 with 16 lanes:
    one instead of 8 + 2); 0 when it is not padded."""
    if not PAD_N or n >= nr:
        return 0
    padded = -(-n // lanes)
    return padded * lanes if padded < _vector_pieces(n, lanes) else 0


def _divisor_tile(dim: int, preferred: int, quantum: int) -> int | None:
    """The largest multiple of ``quantum`` at most ``preferred`` that divides ``dim`` (None if none does)."""
    size = preferred - preferred % quantum
    while size >= quantum:
        if dim % size == 0:
            return size
        size -= quantum
    return None


def cache_tiles(shape: tuple[int, int, int], mr: int, nr: int, elem_bytes: int,
                host: HostCPU, pack: bool = False) -> tuple[int, int, int] | None:
    """(MC, NC, KC) for an M x N x K matmul whose B (K x N) does not fit in half of L2, or whose blocks are
    packed (``pack``); None when B fits and nothing is packed (one pass of each A panel already reuses B from L2)
    or no tile divides the sizes."""
    m, n, k = shape
    if k * n * elem_bytes <= host.l2_bytes // 2 and not pack:
        return None
    kc_pref = 2 ** int(math.log2(max(1, host.l1d_bytes // (nr * elem_bytes))))  # a KC x NR panel of B fills L1d
    kc = k if k <= kc_pref else _divisor_tile(k, kc_pref, 16)
    nc = _divisor_tile(n, max(nr, host.l2_bytes // (4 * (kc or k) * elem_bytes)), nr)
    mc = _divisor_tile(m, 8 * mr, mr) or _divisor_tile(m, 8 * mr, 1)
    if kc is None or nc is None or mc is None:
        return None
    return mc, nc, kc


def parallel_split(shape: tuple[int, int, int], mr: int, nr: int, threads: int,
                   cache: tuple[int, int, int] | None,
                   min_flops: int = PARALLEL_MIN_FLOPS) -> tuple[int, int] | None:
    """(which of M=0 / N=1 to split, chunk size): one chunk per thread, each a whole number of cache (or
    register) tiles so that the tiles inside stay static. None when the op is too small (below ``min_flops``)
    or does not split."""
    m, n, k = shape
    if threads < 2 or 2 * m * n * k < min_flops:
        return None
    quanta = ((cache[0], cache[1]) if cache else (mr, nr))
    for axis in sorted((0, 1), key=lambda a: -shape[a]):  # the larger of M and N first
        dim, quantum = shape[axis], quanta[axis]
        if dim % threads == 0 and (dim // threads) % quantum == 0:
            return axis, dim // threads
    return None


def _mn_positions(op: ir.Operation, out: ir.RankedTensorType) -> tuple[int, int] | None:
    if op.name in MATMUL_LIKE:
        return MATMUL_LIKE[op.name]
    if op.name == "linalg.generic" and CONTRACTION in op.attributes and out.rank >= 2:
        return out.rank - 2, out.rank - 1
    return None


def matmul_flops(op: ir.Operation) -> int:
    """2 * M * N * K of a matmul-like op with static sizes (batch loops not counted), else 0."""
    out = op.results[0].type if len(op.results) == 1 else None
    positions = _mn_positions(op, out) if isinstance(out, ir.RankedTensorType) else None
    if positions is None:
        return 0
    mnk = (out.shape[positions[0]], out.shape[positions[1]], _k_extent(op))
    return 0 if any(ir.ShapedType.is_dynamic_size(d) for d in mnk) else 2 * math.prod(mnk)


def plan_matmul(op: ir.Operation, threads: int = 1, host: HostCPU | None = None,
                min_parallel_flops: int = PARALLEL_MIN_FLOPS) -> MatmulPlan | None:
    """Tile sizes for a matmul-like op on tensors, or None if it should be left alone. Tagged contraction
    generics are never split across threads here: the elementwise schedule splits their batch loop. Ops of
    ``min_parallel_flops`` or more are split across the threads."""
    if len(op.results) != 1:
        return None
    out = op.results[0].type
    if not isinstance(out, ir.RankedTensorType):
        return None  # already bufferized: schedules run on tensors only
    positions = _mn_positions(op, out)
    if positions is None:
        return None
    if op.name == "linalg.generic":
        threads = 1
    host = host or host_cpu()
    m_pos, n_pos = positions
    shape = list(out.shape)
    if any(d == 0 for d in shape):
        return None
    bits = element_bits(out.element_type)
    mr, nr = register_tile(host, bits)
    tiles = [1] * (len(shape) + 1)  # batch loops 1, K loop 1
    peel = []
    for pos, pref in ((n_pos, nr), (m_pos, mr)):
        dim = shape[pos]
        dynamic = ir.ShapedType.is_dynamic_size(dim)
        tiles[pos] = pref if dynamic or dim >= pref else dim
        if pos == n_pos and not dynamic and dim < pref:
            # N is the vector lanes' dimension: a whole odd width (vector<8x24xf32>) lowered to 5 GFLOP/s
            # against 97 for 16 lanes and a peeled 8 (2-core AMD EPYC); so the largest power of two that fits
            tiles[pos] = 1 << (dim.bit_length() - 1)
        if dynamic or dim % tiles[pos]:
            peel.append(pos)
    k = _k_extent(op)
    mnk = (shape[m_pos], shape[n_pos], k)
    if any(ir.ShapedType.is_dynamic_size(d) for d in mnk):
        return MatmulPlan(op.name, tuple(tiles), tuple(peel))
    pad_n = padded_width(mnk[1], host.lanes(bits), nr) if op.name == "linalg.matmul" and isinstance(
        out.element_type, ir.FloatType) else 0
    if pad_n:
        tiles[n_pos] = pad_n
        peel.remove(n_pos)
    # Outer tiles divide the sizes evenly, so every register-tile loop inside them has a static trip count
    # and its peeled remainder a static size.
    large = 2 * mnk[0] * mnk[1] * mnk[2] >= PARALLEL_MIN_FLOPS
    pack = (2 * mnk[0] * mnk[1] * mnk[2] >= PACK_MIN_FLOPS and op.name == "linalg.matmul"
            and isinstance(out.element_type, ir.FloatType))
    cache = cache_tiles(mnk, mr, nr, max(1, bits // 8), host, pack)
    pack = pack and cache is not None
    split = parallel_split(mnk, mr, nr, threads, cache, min_parallel_flops)
    batch = [1] * m_pos
    cache_sizes = tuple(batch + list(cache)) if cache else None
    parallel = None
    if split is not None:
        sizes = [0] * (len(shape) + 1)
        sizes[(m_pos, n_pos)[split[0]]] = split[1]
        parallel = tuple(sizes)
    # Large matmuls unroll the register tile's K loop: four K steps an iteration (wide MLP step 16.5 -> 14.5 ms,
    # 256x1024x1024 on one core 110 -> 125 GFLOP/s, 2-core Intel Xeon); small ones keep one, the code (and the
    # compile) stays small (the tutorial MLP's cold compile would take 0.15 s more).
    unroll = K_UNROLL if large and mnk[2] % K_UNROLL == 0 else 1
    return MatmulPlan(op.name, tuple(tiles), tuple(peel), cache_sizes, parallel, unroll, pack,
                      str(out.element_type), pad_n)


def _k_extent(op: ir.Operation) -> int:
    """The reduction (last) loop's extent: the dimension of whichever operand reads that loop (A is read
    transposed after ``fold_transposed_lhs``), else A's last dimension."""
    dyn = ir.ShapedType.get_dynamic_size()
    if "indexing_maps" in op.attributes:
        maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
        last = maps[0].n_dims - 1
        for value, amap in zip(op.operands, maps):
            for axis, expr in enumerate(amap.results):
                if isinstance(expr, ir.AffineDimExpr) and expr.position == last:
                    return ir.RankedTensorType(value.type).shape[axis]
        return dyn
    k_type = op.operands[0].type
    return k_type.shape[-1] if isinstance(k_type, ir.RankedTensorType) else dyn


_PLAIN_MAPS = ["affine_map<(d0, d1, d2) -> (d0, d2)>", "affine_map<(d0, d1, d2) -> (d2, d1)>",
               "affine_map<(d0, d1, d2) -> (d0, d1)>"]


def _plain_matmul(op: ir.Operation) -> bool:
    """A ``linalg.matmul`` with the default maps (none given, or the default ones written out)."""
    if "indexing_maps" not in op.attributes:
        return True
    return [str(m) for m in ir.ArrayAttr(op.attributes["indexing_maps"])] == _PLAIN_MAPS


def fold_transposed_lhs(module: ir.Module) -> int:
    """``matmul(transpose(x), b)`` (the gradient ``x^T g`` of a dense layer's weight) becomes one contraction
    reading ``x`` through the map ``(m, n, k) -> (k, m)`` (``linalg.matmul`` with ``indexing_maps``): no transposed copy of ``x`` is
    written and read back. Each step of its K loop reads MR contiguous elements of ``x``'s row ``k``, the
    layout the outer-product lowering wants. Float matmuls on static 2-D tensors of one element type only;
    returns how many were rewritten. (A transposed B is not read through a map: its tile would be a strided
    gather; packed, its blocks are transposed by the packing, ``defer_packed_transposes``.)"""
    from mlir.dialects import linalg

    count = 0
    for op in ops_named(module.operation, {"linalg.matmul"}):
        a, b, c = op.operands
        source = a.owner
        if isinstance(source, ir.Block):
            continue
        source = source.operation  # an OpView's, or the Operation's own
        if source.name != "linalg.transpose" or not _plain_matmul(op):
            continue
        perm = list(ir.DenseI64ArrayAttr(source.attributes["permutation"]))
        x = source.operands[0]
        types = [v.type for v in (x, b, c)]
        if perm != [1, 0] or not all(isinstance(t, ir.RankedTensorType) and t.has_static_shape for t in types):
            continue
        elem = types[2].element_type
        if not isinstance(elem, ir.FloatType) or any(t.element_type != elem for t in types):
            continue
        d = [ir.AffineDimExpr.get(i) for i in range(3)]
        maps = [ir.AffineMap.get(3, 0, [d[2], d[0]]), ir.AffineMap.get(3, 0, [d[2], d[1]]),
                ir.AffineMap.get(3, 0, [d[0], d[1]])]
        with ir.InsertionPoint(op), op.location:
            res = linalg.matmul(x, b, outs=[c], indexing_maps=maps)
        op.results[0].replace_all_uses_with(res)
        op.erase()
        erase_if_unused(source.results[0])
        count += 1
    return count


def _tile_lines(i: int, plan: MatmulPlan) -> list[str]:
    n = len(plan.tile_sizes)
    handle = f"%op{i}"
    lines = []
    if plan.parallel:
        lines.append(f"%par{i}, %forall{i} = transform.structured.tile_using_forall {handle} tile_sizes "
                     f"[{', '.join(map(str, plan.parallel))}] : ({ANY}) -> ({ANY}, {ANY})")
        handle = f"%par{i}"
    if plan.cache:
        batch = len(plan.cache) - 3
        order = list(range(batch)) + [batch + 1, batch + 2, batch]  # N, K, M: a block of B stays in L2
        lines.append(f"%cache{i}, %cl{i}:{n} = transform.structured.tile_using_for {handle} tile_sizes "
                     f"[{', '.join(map(str, plan.cache))}] interchange = [{', '.join(map(str, order))}] "
                     f": ({ANY}) -> ({', '.join([ANY] * (n + 1))})")
        handle = f"%cache{i}"
        if plan.pack:
            # a "pad" to the block's own size that must not fold away: a copy of the A and B blocks into
            # contiguous buffers; B's copy hoisted out of the M loop (it does not depend on it)
            zero = f"0.0 : {plan.element_type}"
            lines += [f"%pk{i}, %pkp{i}, %pkc{i} = transform.structured.pad {handle} {{padding_values = "
                      f"[{zero}, {zero}, {zero}], padding_dimensions = [0, 1, 2], nofold_flags = [1, 1, 0], "
                      f'copy_back_op = "none"}} : ({ANY}) -> ({ANY}, {ANY}, {ANY})',
                      f"%pka{i}, %pkb{i} = transform.split_handle %pkp{i} : ({ANY}) -> ({ANY}, {ANY})",
                      f"%pkh{i} = transform.structured.hoist_pad %pkb{i} by 1 loops : ({ANY}) -> {ANY}"]
            handle = f"%pk{i}"
    if plan.pad_n:
        zero = f"0.0 : {plan.element_type}"
        lines += [f"%pn{i}, %pnp{i}, %pnc{i} = transform.structured.pad {handle} pad_to_multiple_of "
                  f"[{plan.pad_n}] {{padding_values = [{zero}, {zero}, {zero}], "
                  f"padding_dimensions = [{MATMUL_LIKE[plan.op_name][1]}], "
                  f'copy_back_op = "linalg.copy"}} : ({ANY}) -> ({ANY}, {ANY}, {ANY})']
        handle = f"%pn{i}"
    lines.append(f"%t{i}, %l{i}:{n} = transform.structured.tile_using_for {handle} tile_sizes "
                 f"[{', '.join(map(str, plan.tile_sizes))}] : ({ANY}) -> ({', '.join([ANY] * (n + 1))})")
    for pos in plan.peel:
        lines += [
            f'%c{i}_{pos} = transform.cast %l{i}#{pos} : {ANY} to !transform.op<"scf.for">',
            f"%p{i}_{pos}, %r{i}_{pos} = transform.loop.peel %c{i}_{pos} "
            f'{{fail_if_already_divisible = false}} : (!transform.op<"scf.for">) -> ({ANY}, {ANY})',
        ]
    return lines


def tile_script(plans: list[MatmulPlan]) -> str:
    """Transform script 1: tile each tagged op (``relax_mlir.sched = i``) for threads, caches and registers,
    and peel its uneven loops."""
    body: list[str] = []
    for i, plan in enumerate(plans):
        body.append(f'%op{i} = transform.structured.match ops{{["{plan.op_name}"]}} attributes{{{_TAG} = {i} : i64}} '
                    f"in %root : ({ANY}) -> {ANY}")
        body += _tile_lines(i, plan)
    return script(body + cleanup())


def vectorize_script(op_names: set[str]) -> str:
    """Transform script 2: vectorize every op tagged ``relax_mlir.vectorize`` into a vector.contract, fold the
    tensor slices into the transfers, and hoist the accumulator out of the K loop.

    Named matmuls become ``vector.contract`` directly (``create_named_contraction``). A contraction written as a
    ``linalg.generic`` (a convolution's im2col product) vectorizes to a multiply of broadcast reads and a
    ``vector.multi_reduction`` over its K tile of 1, which canonicalization folds into a shape cast of a
    ``vector<1x8x32x1xf32>`` product: LLVM lowers such trailing-unit vectors element by element (the CNN's
    training module was 40k lines of LLVM dialect). So before the clean-up, the transfers' broadcasts are made
    explicit and ``reduction_to_contract`` turns the multiply-and-reduce into the same ``vector.contract``:
    15.7k lines, the CNN's cold compile 3.9 -> 3.4 s, its step unchanged (Intel Xeon, AVX-512, 2 cores)."""
    names = ", ".join(f'"{n}"' for n in sorted(op_names))
    body = [
        f"%vec = transform.structured.match ops{{[{names}]}} attributes{{{VEC_TAG}}} in %root "
        f": ({ANY}) -> {ANY}",
        f"transform.structured.vectorize %vec {{create_named_contraction}} : {ANY}",
        f'%vfuncs = transform.structured.match ops{{["func.func"]}} in %root : ({ANY}) -> {ANY}',
        "transform.apply_patterns to %vfuncs {",
        "  transform.apply_patterns.vector.transfer_permutation_patterns",
        "  transform.apply_patterns.vector.reduction_to_contract",
        f"}} : {ANY}",
    ]
    return script(body + cleanup("transform.apply_patterns.tensor.fold_tensor_subset_ops_into_vector_transfers"))


def schedule_matmuls(module: ir.Module, print_ir: bool = False, threads: int = 1) -> int:
    """Tile and vectorize every matmul-like op of ``module`` in place; returns how many were scheduled.

    Must run on tensors (before bufferization). Raises ``RuntimeError`` (from the transform interpreter) if
    a script fails; the caller decides whether to fall back to the naive lowering.
    """
    names = set(MATMUL_LIKE) | {"linalg.generic"}
    ops = ops_named(module.operation, names)
    hot = {_function_of(op) for op in ops if op.name in MATMUL_LIKE and matmul_flops(op) >= PARALLEL_MIN_FLOPS}
    plans: list[MatmulPlan] = []
    for op in ops:
        threshold = HOT_PARALLEL_MIN_FLOPS if _function_of(op) in hot else PARALLEL_MIN_FLOPS
        plan = plan_matmul(op, threads, min_parallel_flops=threshold)
        if plan is not None:
            op.attributes[_TAG] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(plans))
            plans.append(plan)
    if not plans:
        return 0
    apply(module, tile_script(plans), "tile and peel matmuls", print_ir)
    found = ops_named(module.operation, names | {"tensor.pad"})
    pads = [op for op in found if op.name == "tensor.pad"]
    tiled = [op for op in found if op.name != "tensor.pad" and _TAG in op.attributes]
    if any(p.pack for p in plans):
        for copy in _packs_as_copies(pads):
            _transposing_pack(copy)
    for op in tiled:
        plan = plans[ir.IntegerAttr(op.attributes[_TAG]).value]
        del op.attributes[_TAG]
        if all_static(op):
            op.attributes[VEC_TAG] = ir.UnitAttr.get()
            parent = op.parent
            if plan.unroll_k > 1 and parent is not None and parent.name == "scf.for":  # the tile's K loop
                parent.attributes[_K_TAG] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), plan.unroll_k)
    if any(VEC_TAG in op.attributes for op in tiled):
        apply(module, vectorize_script({p.op_name for p in plans}), "vectorize matmul tiles", print_ir)
    if any(p.pad_n for p in plans):
        _read_through_pads(module)
        _drop_copy_backs(module, {p.pad_n for p in plans if p.pad_n})
    for nr in sorted({p.tile_sizes[MATMUL_LIKE[p.op_name][1]] for p in plans if p.pack}):
        pack_b_panels(module, nr)
    for op in ops_named(module.operation, names):  # the dynamic remainders keep the tag
        for tag in (VEC_TAG, CONTRACTION):
            if tag in op.attributes:
                del op.attributes[tag]
    _unroll_k_loops(module, print_ir)
    zero_accumulators(module)
    return len(plans)


def _function_of(op: ir.Operation) -> str:
    """The name of the ``func.func`` around ``op`` ("" at module level)."""
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        parent = parent.parent
    return ir.StringAttr(parent.attributes["sym_name"]).value if parent is not None else ""


def _packs_as_copies(pads: list[ir.Operation]) -> list[ir.Operation]:
    """Each packing pad (``nofold``, nothing padded) becomes ``bufferization.alloc_tensor`` with ``copy``: the same new
    contiguous buffer, without the fill with the padding value that bufferizing the pad writes first and the copy
    then overwrites whole (``memset`` fell from 2.5% to 0.6% of the wide MLP step's samples; the step's time moved
    within the noise of an A/B run). Returns the copies."""
    copies = []
    for op in pads:
        if "nofold" not in op.attributes:
            continue
        if any(v != 0 for name in ("static_low", "static_high") for v in ir.DenseI64ArrayAttr(op.attributes[name])):
            continue
        if len(op.operands) != 1:  # dynamic padding amounts
            continue
        with ir.InsertionPoint(op), op.location:
            copy = bufferization.AllocTensorOp(op.results[0].type, [], copy=op.operands[0])
        op.results[0].replace_all_uses_with(copy.result)
        op.erase()
        copies.append(copy.operation)
    return copies


def defer_packed_transposes(module: ir.Module, threads: int = 1) -> int:
    """Tag each ``linalg.transpose`` whose only readers are packed matmuls taking it as B (``g w^T``, the
    gradient of a dense layer's input): the transpose schedule leaves it, and the matmul schedule's packing copies
    then transpose the blocks of ``w`` they need (``_transposing_pack``) instead of reading a transposed copy of
    all of ``w`` written first. Returns how many were tagged."""
    from .transpose import DEFER_TAG

    count = 0
    for op in ops_named(module.operation, {"linalg.transpose"}):
        result = op.results[0]
        if list(ir.DenseI64ArrayAttr(op.attributes["permutation"])) != [1, 0]:
            continue
        readers = [use.owner for use in result.uses]
        if readers and all(_packs_b(getattr(r, "operation", r), result, threads) for r in readers):
            op.attributes[DEFER_TAG] = ir.UnitAttr.get()
            count += 1
    return count


def _packs_b(op: ir.Operation, value: ir.Value, threads: int) -> bool:
    """Whether ``op`` is a plain matmul reading ``value`` as B only, whose plan packs its blocks."""
    if op.name != "linalg.matmul" or not _plain_matmul(op) or op.operands[1] != value or op.operands[0] == value:
        return False
    plan = plan_matmul(op, threads)
    return plan is not None and plan.pack


def _slice_chain(value: ir.Value) -> tuple[ir.Value, list[ir.Operation]]:
    """(root, the ``extract_slice`` ops from the root down to ``value``) of a chain of unit-stride slices."""
    chain: list[ir.Operation] = []
    while True:
        owner = value.owner
        owner = getattr(owner, "operation", owner)
        if not isinstance(owner, ir.Operation) or owner.name != "tensor.extract_slice":
            return value, chain[::-1]
        if any(v != 1 for v in ir.DenseI64ArrayAttr(owner.attributes["static_strides"])):
            return value, []
        source_rank = ir.RankedTensorType(owner.operands[0].type).rank
        if source_rank != ir.RankedTensorType(owner.results[0].type).rank:
            return value, []  # rank-reducing
        chain.append(owner)
        value = owner.operands[0]


def _transposing_pack(copy: ir.Operation) -> bool:
    """A packing copy of a block of a deferred transpose ``wT`` becomes a ``linalg.transpose`` of the block of ``w``
    into the new buffer (tiled and vectorized by the transpose schedule afterwards)."""
    from mlir.dialects import arith, linalg, tensor

    from .transpose import DEFER_TAG

    root, chain = _slice_chain(copy.operands[0])
    owner = root.owner
    owner = getattr(owner, "operation", owner)
    if not chain or not isinstance(owner, ir.Operation) or DEFER_TAG not in owner.attributes:
        return False
    w = owner.operands[0]
    block_t = ir.RankedTensorType(copy.results[0].type)
    with ir.InsertionPoint(copy), copy.location:
        index = ir.IndexType.get()
        total: list = [0, 0]
        for sl in chain:
            for d, off in enumerate(slice_offsets(sl)):
                if isinstance(off, int) and isinstance(total[d], int):
                    total[d] += off
                elif isinstance(off, int):
                    total[d] = arith.addi(total[d], arith.constant(index, off)) if off else total[d]
                elif isinstance(total[d], int):
                    total[d] = arith.addi(off, arith.constant(index, total[d])) if total[d] else off
                else:
                    total[d] = arith.addi(total[d], off)
        rows, cols = block_t.shape  # the block of w^T: rows of w^T are columns of w
        offsets = [total[1], total[0]]
        dyn = ir.ShapedType.get_dynamic_stride_or_offset()
        block = tensor.extract_slice(ir.RankedTensorType.get([cols, rows], block_t.element_type), w,
                                     [o for o in offsets if not isinstance(o, int)], [], [],
                                     [o if isinstance(o, int) else dyn for o in offsets], [cols, rows], [1, 1])
        dest = bufferization.AllocTensorOp(block_t, [])
        packed = linalg.transpose(block, outs=[dest.result], permutation=[1, 0])
        packed = packed.results[0] if isinstance(packed, ir.OpView) else packed
    copy.results[0].replace_all_uses_with(packed)
    copy.erase()
    return True


def _read_through_pads(module: ir.Module) -> int:
    """A vector read of an operand padded at the end of its vector dimensions by a constant (``pad_n``'s zeros)
    reads the operand itself, past its end: those transfer dimensions are marked out of bounds, so LLVM loads the
    row's tail under a mask and the missing lanes take the read's padding value, the same constant; the pad (a copy
    of the whole operand) is erased once nothing reads it. Returns how many reads changed."""
    count = 0
    for read in ops_named(module.operation, {"vector.transfer_read"}):
        pad = defining_op(read.operands[0])
        if pad is None or pad.name != "tensor.pad" or len(pad.operands) != 1:
            continue
        low = list(ir.DenseI64ArrayAttr(pad.attributes["static_low"]))
        high = list(ir.DenseI64ArrayAttr(pad.attributes["static_high"]))
        body = list(pad.regions[0].blocks[0].operations)
        value = constant_float(body[-1].operands[0])  # what the pad's tensor.yield gives
        if any(low) or len(body) != 1 or value is None or value != constant_float(_padding(read)):
            continue
        amap = ir.AffineMapAttr(read.attributes["permutation_map"]).value
        read_dims = [e.position if isinstance(e, ir.AffineDimExpr) else None for e in amap.results]
        if any(h and dim not in read_dims for dim, h in enumerate(high)):
            continue  # an indexed (not a vector) dimension may point into the padding: it must stay
        in_bounds = [bool(ir.BoolAttr(b).value) for b in ir.ArrayAttr(read.attributes["in_bounds"])]
        for vdim, dim in enumerate(read_dims):
            if dim is not None and high[dim]:
                in_bounds[vdim] = False
        read.operands[0] = pad.operands[0]
        read.attributes["in_bounds"] = ir.ArrayAttr.get([ir.BoolAttr.get(b) for b in in_bounds])
        erase_if_unused(pad.results[0])
        count += 1
    return count


def _drop_copy_backs(module: ir.Module, widths: set[int]) -> int:
    """A padded matmul's copy-back (``linalg.copy`` of the leading columns of a result ``widths`` wide into a new
    tensor) is the slice it copies: its readers read the slice instead (an epilogue such as the bias addition then
    reads the padded result in place; a returned slice is copied out once, by bufferization). Returns how many
    copies were dropped."""
    count = 0
    for copy in ops_named(module.operation, {"linalg.copy"}):
        source, dest = defining_op(copy.operands[0]), defining_op(copy.operands[1])
        if source is None or source.name != "tensor.extract_slice" or dest is None or dest.name != "tensor.empty":
            continue
        padded = ir.RankedTensorType(source.operands[0].type)
        if not padded.has_static_shape or padded.shape[-1] not in widths:
            continue
        if any(v != 0 for v in slice_offsets(source)) or \
                any(v != 1 for v in ir.DenseI64ArrayAttr(source.attributes["static_strides"])):
            continue
        copy.results[0].replace_all_uses_with(copy.operands[0])
        copy.erase()
        if not list(dest.results[0].uses):
            dest.erase()
        count += 1
    return count


def _padding(read: ir.Operation) -> ir.Value:
    """The padding operand of a ``vector.transfer_read`` (after the source and its indices)."""
    source_rank = ir.RankedTensorType(read.operands[0].type).rank
    return read.operands[1 + source_rank]


_K_TAG = "relax_mlir.unroll_k"


def _unroll_k_loops(module: ir.Module, print_ir: bool) -> int:
    """Unroll each tagged K loop (``relax_mlir.unroll_k = factor``) that still holds its ``vector.contract``."""
    by_factor: dict[int, int] = {}
    for loop in ops_named(module.operation, {"scf.for"}):
        if _K_TAG not in loop.attributes:
            continue
        factor = ir.IntegerAttr(loop.attributes[_K_TAG]).value
        body = loop.regions[0].blocks[0]
        if not any(o.operation.name == "vector.contract" for o in body.operations):
            del loop.attributes[_K_TAG]  # not vectorized (a dynamic tile): left as it is
            continue
        by_factor[factor] = by_factor.get(factor, 0) + 1
    if not by_factor:
        return 0
    lines = []
    for i, factor in enumerate(sorted(by_factor)):
        lines += [f'%k{i} = transform.structured.match ops{{["scf.for"]}} attributes{{{_K_TAG} = {factor} : i64}} '
                  f"in %root : ({ANY}) -> {ANY}",
                  f"transform.loop.unroll %k{i} {{factor = {factor}}} : {ANY}"]
    apply(module, script(lines), "unroll K loops", print_ir)
    for loop in ops_named(module.operation, {"scf.for"}):
        if _K_TAG in loop.attributes:
            del loop.attributes[_K_TAG]
    return sum(by_factor.values())
