"""Loop hints for LLVM: which loops LLVM's unroller may touch.

LLVM's loop unroller (full unrolling of constant trip counts, then partial and runtime unrolling) is where most of
the code generation time of a training module goes, and most of it buys nothing: the schedules have already
unrolled the register tiles in MLIR (``convert-vector-to-scf{full-unroll=1}``), and a loop of thousands of
elementwise iterations gains nothing from a copy of its body that the vectorizer has widened sixteen times already.
What does pay is unrolling short loops (a 3x3 convolution window, an 8-wide row of an im2col copy): unrolled, the
SLP vectorizer turns their scalar copies into vector moves.

So every ``scf.for`` is marked ``llvm.loop.unroll.disable`` unless it is a short scalar loop nest: a known trip
count of at most ``MAX_UNROLL_TRIP``, no vector op inside (vector code comes from a schedule, already unrolled) and
no marked loop inside (unrolling a short loop around a long one copies the long one: the 128x10 transpose of a
weight cost LLVM 27 ms so). The mark is the LLVM dialect's
``#llvm.loop_annotation``, set on the ``scf.for`` as ``loop_annotation``: ``convert-scf-to-cf`` copies an
attribute of the LLVM dialect from the loop to its back edge's ``cf.br``, ``convert-cf-to-llvm`` keeps it on the
``llvm.br``, where that name is the branch's own loop annotation (the ``!llvm.loop`` metadata of LLVM IR).

Measured on a 2-core Intel Xeon (AVX-512), compile in one process (``Trainer.build``) and the step, each A/B in one
process: the CNN on 1x8x8 1.91 -> 1.56 s, step 0.63 -> 0.62 ms; on 1x28x28 2.41 -> 1.75 s, 4.43 -> 4.40 ms; the
784-128-128-10 MLP 0.66 -> 0.58 s, 0.363 -> 0.362 ms; the wide MLP 1.07 -> 0.88 s, 16.2 -> 15.8 ms. A limit of 4
iterations instead of 16: the CNN's step 10% slower (its im2col rows are 8 wide); no unrolling at all: 18% slower.
Keeping short loops around long ones rolled as well: the CNN (1x8x8) 1.51 -> 1.29 s, steps unchanged (0.646 /
0.639 ms; 1x28x28 4.52 / 4.54 ms; the tutorial MLP 0.132 / 0.132 ms).
"""

from __future__ import annotations

from mlir import ir

#: Loops of at most this many iterations (a known constant) are left to LLVM's unroller.
MAX_UNROLL_TRIP = 16

_ATTRIBUTE = "loop_annotation"
_NO_UNROLL = "#llvm.loop_annotation<unroll = <disable = true>>"


def _constant(value: ir.Value) -> int | None:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation
    if op.name != "arith.constant":
        return None
    attr = op.attributes["value"]
    return ir.IntegerAttr(attr).value if isinstance(attr, ir.IntegerAttr) else None


def trip_count(op: ir.Operation) -> int | None:
    """The iterations of an ``scf.for`` with constant bounds and step, else None."""
    lower, upper, step = (_constant(v) for v in list(op.operands)[:3])
    if lower is None or upper is None or not step:
        return None
    return max(0, -(-(upper - lower) // step))


def _mark_ancestors(op: ir.Operation, into: set) -> None:
    """Add every op enclosing ``op`` (up to its function) to ``into``."""
    parent = op.parent
    while parent is not None and parent.name != "func.func" and parent not in into:
        into.add(parent)
        parent = parent.parent


def mark_unrolling(module: ir.Module, max_trip: int = MAX_UNROLL_TRIP) -> int:
    """Mark every ``scf.for`` of ``module`` as not to be unrolled by LLVM unless it is a short scalar loop nest (a
    known trip count <= ``max_trip``, no vector op inside: the schedules have unrolled vector code already; no
    marked loop inside: unrolling would copy it); returns how many were marked."""
    loops: list[ir.Operation] = []
    vector_ops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        name = op.name
        if name == "scf.for":
            loops.append(op)
        elif name.startswith("vector."):
            vector_ops.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)  # post-order: a loop's inner loops come before it
    keep_rolled: set[ir.Operation] = set()  # every op with a vector op or a marked loop inside
    for op in vector_ops:
        _mark_ancestors(op, keep_rolled)
    marked = []
    for op in loops:
        count = trip_count(op)
        if count is None or count > max_trip or op in keep_rolled:
            marked.append(op)
            _mark_ancestors(op, keep_rolled)
    if marked:
        hint = ir.Attribute.parse(_NO_UNROLL, module.context)
        for op in marked:
            op.attributes[_ATTRIBUTE] = hint
    return len(marked)
