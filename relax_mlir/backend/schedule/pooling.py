"""Pooling schedules: max pooling whose windows tile the input, and its gradient, as vector loops over rows.

The lowering (``legalize/nn.py``, ``legalize/grad.py``) writes such a pooling as one parallel
``linalg.generic`` that reads whole windows of the input seen as ``[n, c, oh, i, ow, j]`` and tags it
``relax_mlir.pool = "max"`` (output ``[n, c, oh, ow]``) or ``"max_backward"`` (inputs: the output gradient, then
the windows; output ``[n, c, oh, i, ow, j]``). Neither LLVM nor linalg's vectorizer does well with those: the
innermost loop runs over the ``kw`` = 2 positions of a window, LLVM gives up on the strided, possibly aliasing
accesses (the loops stay scalar), and linalg's vectorizer cannot read a window position (a constant in the
indexing map). This schedule replaces each tagged generic by an ``scf.for`` over the ``n*c*oh`` rows of
windows whose body is vector code:

* per row of windows and chunk of ``L`` windows (``L`` = lanes of one vector register, from ``backend/host.py``), one
  contiguous ``vector.transfer_read`` of ``kw*L`` elements per input row ``i``, split into the ``kw`` window
  columns with ``vector.shuffle``s (de-interleaving);
* forward: ``maximumf`` of the ``kh*kw`` vectors (NaN-propagating, as ``linalg.pooling_nchw_max``), written
  as one vector;
* gradient: the position of each window's first maximum (a NaN beats any number), then ``g`` where it is the
  first maximum and 0 elsewhere, re-interleaved with ``vector.shuffle`` into ``kh`` contiguous writes.

When the windows hold at least ``elementwise.PARALLEL_MIN_POINTS`` elements and there are several threads, the
rows are split into one block of consecutive rows per thread (an ``scf.forall`` over ``scf.for`` loops; rows are
``(n, c, oh)``, so a thread gets the images it handles in the elementwise ops around). The 28x28 CNN's step
(2-core Intel Xeon, A/B in one process, with the reductions split by batch as well): 4.52 -> 3.98 ms.

Measured on a 2-core AMD EPYC (AVX-512), float32, one thread, the 28x28 CNN's 64x8x28x28 input: forward 0.60 ms
(``pooling_nchw_max``) -> 0.33 (the window generic, scalar) -> see ``benchmarks/op_profile.py``; gradient
2.5 ms (argmax, then a scatter written as a gather) -> 1.5 (the window generic) -> see the same.
The pipeline runs this schedule before elementwise fusion (``pipeline._fuse``): fused with ReLU's backward, the
gradient's generic was no longer recognised and ran scalar, a fifth of the 28x28 CNN's step (6.9 -> 4.5 ms a step
once vectorized first, 2-core Intel Xeon). A tag on a generic that has changed anyway (another input count) is
ignored: the generic stays correct.
"""

from __future__ import annotations

from typing import Sequence

from mlir import ir
from mlir.dialects import arith, scf, tensor, vector

from .common import element_bits, ops_named
from . import elementwise
from ..host import HostCPU, host_cpu

#: String attribute the lowering puts on a tiling max-pooling generic: "max" or "max_backward".
POOL_TAG = "relax_mlir.pool"


def beats(v: ir.Value, best: ir.Value) -> ir.Value:
    """Whether ``v`` replaces ``best`` as a window's first maximum: greater, or a NaN where ``best`` is none
    (scalars or vectors)."""
    return arith.ori(arith.cmpf(arith.CmpFPredicate.OGT, v, best),
                     arith.andi(arith.cmpf(arith.CmpFPredicate.UNO, v, v),
                                arith.cmpf(arith.CmpFPredicate.ORD, best, best)))


def _i32_like(k: int, v: ir.Value) -> ir.Value:
    """The i32 constant ``k``, splat to ``v``'s vector shape if ``v`` is a vector."""
    i32 = ir.IntegerType.get_signless(32)
    if isinstance(v.type, ir.VectorType):
        t = ir.VectorType.get(ir.VectorType(v.type).shape, i32)
        return arith.constant(t, ir.DenseElementsAttr.get_splat(t, ir.IntegerAttr.get(i32, k)))
    return arith.constant(i32, k)


def first_max(values: Sequence[ir.Value]) -> tuple[ir.Value, ir.Value]:
    """(the maximum, the i32 position of its first occurrence) of ``values`` (scalars or vectors alike)."""
    best, at = values[0], _i32_like(0, values[0])
    for k, v in enumerate(values[1:], 1):
        better = beats(v, best)
        best = arith.select(better, v, best)
        at = arith.select(better, _i32_like(k, v), at)
    return best, at


def _index(i: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), i)


def _read(src: ir.Value, at: list[ir.Value], n: int) -> ir.Value:
    """``n`` contiguous elements of ``src`` from ``at`` (in bounds: the shapes are static)."""
    t = ir.VectorType.get([n], ir.RankedTensorType(src.type).element_type)
    rank = ir.RankedTensorType(src.type).rank
    pmap = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(rank - 1)])
    pad = arith.constant(t.element_type, 0.0)
    return vector.transfer_read(t, src, at, ir.AffineMapAttr.get(pmap), pad, [True])


def _write(v: ir.Value, dest: ir.Value, at: list[ir.Value]) -> ir.Value:
    rank = ir.RankedTensorType(dest.type).rank
    pmap = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(rank - 1)])
    return vector.transfer_write(dest.type, v, dest, at, ir.AffineMapAttr.get(pmap), [True])


def _split(row: ir.Value, kw: int, n: int) -> list[ir.Value]:
    """The ``kw`` columns of ``n`` consecutive windows in one row read (de-interleave)."""
    return [vector.shuffle(row, row, [b + kw * i for i in range(n)]) for b in range(kw)]


def _merge(cols: list[ir.Value], n: int) -> ir.Value:
    """Inverse of ``_split``: ``kw`` vectors of ``n`` interleaved into one row of ``kw*n``."""
    kw = len(cols)
    row = cols[0]
    for k, col in enumerate(cols[1:], 1):  # concatenate: [col0 | col1 | ...]
        row = vector.shuffle(row, col, list(range((k + 1) * n)))
    return row if kw == 1 else vector.shuffle(row, row, [b * n + i for i in range(n) for b in range(kw)])


def _row_body(kind: str, x: ir.Value, g: ir.Value | None, out: ir.Value, r: ir.Value, kernel: tuple[int, int],
              ow: int, lanes: int, w: ir.Value | None = None) -> ir.Value:
    """The vector code of one row of windows ``r``, written to row ``w`` of ``out`` (default ``r``: ``out``
    may be a chunk of the rows); returns the updated ``out``."""
    kh, kw = kernel
    w = r if w is None else w
    for ow0 in range(0, ow, lanes):
        n = min(lanes, ow - ow0)
        rows = [_read(x, [r, _index(a), _index(kw * ow0)], kw * n) for a in range(kh)]
        values = [v for row in rows for v in _split(row, kw, n)]
        if kind == "max":
            best = values[0]
            for v in values[1:]:
                best = arith.maximumf(best, v)
            out = _write(best, out, [w, _index(ow0)])
            continue
        _, at = first_max(values)
        grad = _read(g, [r, _index(ow0)], n)
        zero = arith.constant(grad.type, ir.DenseElementsAttr.get_splat(
            grad.type, ir.FloatAttr.get(ir.VectorType(grad.type).element_type, 0.0)))
        for a in range(kh):
            cols = [arith.select(arith.cmpi(arith.CmpIPredicate.eq, at, _i32_like(a * kw + b, at)), grad, zero)
                    for b in range(kw)]
            out = _write(_merge(cols, n), out, [w, _index(a), _index(kw * ow0)])
    return out


def _collapse(v: ir.Value, groups: list[list[int]]) -> ir.Value:
    t = ir.RankedTensorType(v.type)
    shape = [1] * len(groups)
    for k, group in enumerate(groups):
        for d in group:
            shape[k] *= t.shape[d]
    return tensor.collapse_shape(ir.RankedTensorType.get(shape, t.element_type), v, groups)


def _chunks(rows: int, points: int, threads: int) -> int:
    """How many threads share the rows: all of them when the windows hold ``elementwise.PARALLEL_MIN_POINTS``
    elements (the threshold every elementwise generic uses)."""
    return min(threads, rows) if threads > 1 and points >= elementwise.PARALLEL_MIN_POINTS else 1


def _chunked_rows(kind: str, x: ir.Value, g: ir.Value | None, init: ir.Value, chunks: int,
                  kernel: tuple[int, int], ow: int, lanes: int) -> ir.Value:
    """The rows of windows split into ``chunks`` consecutive blocks, one per thread (``scf.forall``), each an
    ``scf.for`` of row bodies writing its block of ``init``; the last block may be shorter."""
    out_t = ir.RankedTensorType(init.type)
    rows, rest = out_t.shape[0], list(out_t.shape[1:])
    per = -(-rows // chunks)
    dyn = ir.ShapedType.get_dynamic_size()
    block_t = ir.RankedTensorType.get([dyn] + rest, out_t.element_type)
    zeros, ones = [0] * len(rest), [1] * (len(rest) + 1)
    forall = scf.ForallOp([0], [-(-rows // per)], [1], [init])
    with ir.InsertionPoint(forall.body):
        k = forall.induction_variables[0]
        lo = arith.muli(k, _index(per))
        size = arith.minsi(_index(per), arith.subi(_index(rows), lo))
        block = tensor.extract_slice(block_t, forall.inner_iter_args[0], [lo], [size], [],
                                     [dyn] + zeros, [dyn] + rest, ones)
        loop = scf.ForOp(_index(0), size, _index(1), [block])
        with ir.InsertionPoint(loop.body):
            i = loop.induction_variable
            scf.YieldOp([_row_body(kind, x, g, loop.inner_iter_args[0], arith.addi(lo, i), kernel, ow, lanes,
                                   w=i)])
        with ir.InsertionPoint(forall.terminator().block):
            tensor.parallel_insert_slice(loop.results[0], forall.inner_iter_args[0], [lo], [size], [],
                                         [dyn] + zeros, [dyn] + rest, ones)
    return forall.results[0]


def _rewrite(op: ir.Operation, kind: str, host: HostCPU, threads: int = 1) -> bool:
    """Replace one tagged generic by its vector loop; False (and nothing changed) if it is not as tagged."""
    ins = list(op.operands)[:-1]
    windows = ins[1:] if kind == "max_backward" else ins
    six = ir.RankedTensorType(windows[0].type)
    if not six.has_static_shape:  # a symbolic batch or channel count: the generic stays as legalized
        return False
    n, c, oh, kh, ow, kw = six.shape
    if len(windows) != kh * kw or any(w != windows[0] for w in windows) or element_bits(six.element_type) < 32:
        return False
    with ir.InsertionPoint(op), op.location:
        x = _collapse(windows[0], [[0, 1, 2], [3], [4, 5]])  # [rows, kh, ow*kw]
        g = _collapse(ins[0], [[0, 1, 2], [3]]) if kind == "max_backward" else None  # [rows, ow]
        out_shape = [n * c * oh, ow] if kind == "max" else [n * c * oh, kh, ow * kw]
        init = tensor.empty(out_shape, six.element_type)
        rows, lanes = n * c * oh, host.lanes(element_bits(six.element_type))
        chunks = _chunks(rows, rows * kh * kw * ow, threads)
        if chunks == 1:
            loop = scf.ForOp(_index(0), _index(rows), _index(1), [init])
            with ir.InsertionPoint(loop.body):
                scf.YieldOp([_row_body(kind, x, g, loop.inner_iter_args[0], loop.induction_variable, (kh, kw), ow,
                                       lanes)])
            rows_out = loop.results[0]
        else:
            rows_out = _chunked_rows(kind, x, g, init, chunks, (kh, kw), ow, lanes)
        res_t = ir.RankedTensorType(op.results[0].type)
        groups = [[0, 1, 2], [3]] if kind == "max" else [[0, 1, 2], [3], [4, 5]]
        result = tensor.expand_shape(res_t, rows_out, groups, [], list(res_t.shape))
    op.results[0].replace_all_uses_with(result)
    op.erase()
    return True


def vectorize_pools(module: ir.Module, host: HostCPU | None = None, threads: int = 1) -> int:
    """Rewrite every tagged pooling generic of ``module`` (on tensors) as a vector loop, its rows split across
    ``threads`` when large; returns how many."""
    host = host or host_cpu()
    count = 0
    for op in ops_named(module.operation, {"linalg.generic"}):
        if POOL_TAG not in op.attributes:
            continue
        kind = ir.StringAttr(op.attributes[POOL_TAG]).value
        del op.attributes[POOL_TAG]
        if kind in ("max", "max_backward") and all(isinstance(r.type, ir.RankedTensorType) for r in op.results):
            count += _rewrite(op, kind, host, threads)
    return count
