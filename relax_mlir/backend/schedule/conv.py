"""Convolution schedules: ``linalg.conv_2d_nchw_fchw`` as im2col plus a matmul-like contraction.

Every static 2-D convolution in NCHW/FCHW layout (the forward convolution, and the data and weight gradients,
which the gradient rules also write as convolutions) is rewritten by ``convert_conv2d_to_img2col`` into

* a copy that gathers the input patches, ``col[n, c*kh*kw, oh*ow]`` (an all-parallel ``linalg.generic``), and
* a contraction ``out[n, f, oh*ow] += w[f, c*kh*kw] * col[n, c*kh*kw, oh*ow]``: a batched matmul with M = F,
  N = OH*OW, K = C*KH*KW, tagged ``relax_mlir.contraction`` so that the matmul schedule (``matmul.py``) tiles it
  by MR x NR registers, peels the uneven remainders and vectorizes it to ``vector.contract``.

Both are large ``linalg.generic`` ops, so the elementwise schedule (``elementwise.py``) splits them across
threads by their batch loop first.

Measured on a 2-core AMD EPYC (AVX-512), float32, one thread, against the naive loops before: the CNN's
64x1x30x30 * 8x1x3x3 0.37 -> 0.24 ms; 64x8x16x16 * 16x8x3x3 7.6 -> 1.13 ms; its weight gradient 8x64x16x16 *
16x64x14x14 12.0 -> 0.76 ms; 1x64x30x30 * 8x64x28x28 3.05 -> 0.25 ms (PyTorch: 0.46, 0.33, 0.47, 0.37 ms).
Reordering the naive loops instead (``interchange`` to put the output width innermost) reached only 2-7
GFLOP/s.

Grouped convolutions (``conv_2d_ngchw_gfchw``), dilated or integer ones, and dynamic shapes have no im2col
rewrite in MLIR and keep the naive loops.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from ..legalize.core import generic

from .common import ANY, apply, ops_named, script
from .matmul import CONTRACTION

CONV_OPS = {"linalg.conv_2d_nchw_fchw"}
#: A convolution takes the shifted-row im2col when its padded width is at most this many times its output
#: width (the contraction computes ``KW - 1`` unused columns per output row).
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


def _shift_plan(op: ir.Operation) -> tuple[int, ...] | None:
    """(N, C, Hp, Wp, F, KH, KW, OH, OW) of a stride-1 convolution whose shifted-row im2col wastes at most
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


def _shifted_im2col(op: ir.Operation, plan: tuple[int, ...]) -> None:
    """Replace a stride-1 convolution by shifted-row im2col + a tagged contraction (see the module doc)."""
    n, c, hp, wp, f, kh, kw, oh, ow = plan
    x, w = op.operands[0], op.operands[1]
    t = ir.RankedTensorType(x.type).element_type
    d = [ir.AffineDimExpr.get(k) for k in range(5)]
    rows = oh * wp
    with ir.InsertionPoint(op), op.location:
        zero = arith.constant(t, 0.0)
        # one more input row: the last shifted copy runs KW - 1 elements past the padded input
        padded = tensor.PadOp(ir.RankedTensorType.get([n, c, hp + 1, wp], t), x, [], [], [0, 0, 0, 0],
                              [0, 0, 1, 0])
        block = padded.region.blocks.append(*[ir.IndexType.get()] * 4)
        with ir.InsertionPoint(block):
            tensor.YieldOp(zero)
        flat = tensor.collapse_shape(ir.RankedTensorType.get([n, c, (hp + 1) * wp], t), padded.result,
                                     [[0], [1], [2, 3]])
        shift = ir.AffineMap.get(5, 0, [d[0], d[1], d[2] * wp + d[3] + d[4]])
        (col,) = generic([flat], [tensor.empty([n, c, kh, kw, rows], t)], [shift, ir.AffineMap.get_identity(5)],
                         ["parallel"] * 5, lambda v, _o: v)
        col = tensor.collapse_shape(ir.RankedTensorType.get([n, c * kh * kw, rows], t), col, [[0], [1, 2, 3], [4]])
        wmat = tensor.collapse_shape(ir.RankedTensorType.get([f, c * kh * kw], t), w, [[0], [1, 2, 3]])
        acc = linalg.fill(zero, outs=[tensor.empty([n, f, rows], t)])
        e = [ir.AffineDimExpr.get(k) for k in range(4)]
        maps = [ir.AffineMap.get(4, 0, [e[1], e[3]]), ir.AffineMap.get(4, 0, [e[0], e[3], e[2]]),
                ir.AffineMap.get(4, 0, [e[0], e[1], e[2]])]
        (wide,) = generic([wmat, col], [acc], maps, ["parallel"] * 3 + ["reduction"],
                          lambda a, b, o: arith.addf(o, arith.mulf(a, b)))
        wide.owner.attributes[CONTRACTION] = ir.UnitAttr.get()
        wide = tensor.expand_shape(ir.RankedTensorType.get([n, f, oh, wp], t), wide, [[0], [1], [2, 3]], [],
                                   [n, f, oh, wp])
        out = tensor.extract_slice(op.results[0].type, wide, [], [], [], [0, 0, 0, 0], [n, f, oh, ow], [1, 1, 1, 1])
    op.results[0].replace_all_uses_with(out)
    op.erase()


def im2col_convs(module: ir.Module, print_ir: bool = False) -> int:
    """Rewrite every static NCHW convolution as im2col + a tagged contraction; returns how many."""
    shifted = 0
    for op in ops_named(module.operation, CONV_OPS):
        plan = _shift_plan(op)
        if plan is not None:
            _shifted_im2col(op, plan)
            shifted += 1
    convs = [op for op in ops_named(module.operation, CONV_OPS) if _convertible(op)]
    if not convs:
        return shifted
    if not convs:
        return 0
    for op in convs:
        op.attributes[_TAG] = ir.UnitAttr.get()
    body = [f'%convs = transform.structured.match ops{{["linalg.conv_2d_nchw_fchw"]}} attributes{{{_TAG}}} '
            f"in %root : ({ANY}) -> {ANY}",
            f"%cols, %results = transform.structured.convert_conv2d_to_img2col %convs : ({ANY}) -> ({ANY}, {ANY})"]
    apply(module, script(body), "im2col convolutions", print_ir)
    for op in ops_named(module.operation, {"linalg.generic"}):
        if _is_contraction(op) and _reads_im2col(op):
            op.attributes[CONTRACTION] = ir.UnitAttr.get()
    return shifted + len(convs)


def _reads_im2col(op: ir.Operation) -> bool:
    """Whether the contraction's second operand is an im2col copy (a generic whose input map has a floordiv)."""
    owner = op.operands[1].owner
    if not isinstance(owner, ir.Operation):
        owner = getattr(owner, "operation", owner)
    if getattr(owner, "name", "") != "linalg.generic":
        return False
    return "floordiv" in str(ir.ArrayAttr(owner.attributes["indexing_maps"])[0])
