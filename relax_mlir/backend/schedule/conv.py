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

from .common import ANY, apply, ops_named, script
from .matmul import CONTRACTION

CONV_OPS = {"linalg.conv_2d_nchw_fchw"}
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


def im2col_convs(module: ir.Module, print_ir: bool = False) -> int:
    """Rewrite every static NCHW convolution as im2col + a tagged contraction; returns how many."""
    convs = [op for op in ops_named(module.operation, CONV_OPS) if _convertible(op)]
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
    return len(convs)


def _reads_im2col(op: ir.Operation) -> bool:
    """Whether the contraction's second operand is an im2col copy (a generic whose input map has a floordiv)."""
    owner = op.operands[1].owner
    if not isinstance(owner, ir.Operation):
        owner = getattr(owner, "operation", owner)
    if getattr(owner, "name", "") != "linalg.generic":
        return False
    return "floordiv" in str(ir.ArrayAttr(owner.attributes["indexing_maps"])[0])
