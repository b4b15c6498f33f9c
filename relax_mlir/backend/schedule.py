"""Transform-dialect schedules that make the matmuls of a linalg-on-tensors module fast.

The schedule is written per op: Python looks at each ``linalg.matmul`` / ``linalg.batch_matmul``, picks tile
sizes from its static shape, tags it with a unit attribute, and emits a transform script that matches that
tag. Two scripts run in turn (``apply_named_sequence``):

1. **tile and peel** — tile (M, N, K) by ``[8, 32, 1]`` (``[1, 8, 32, 1]`` for batch_matmul) with
   ``tile_using_for``, and peel every M/N loop whose trip count does not divide evenly (or is dynamic), so
   that the steady-state tiles get static shapes once canonicalized.
2. **vectorize and hoist** — every tiled op whose operands are now fully static is vectorized into a
   ``vector.contract`` (8x32 accumulator kept in registers across the K loop thanks to
   ``hoist_loop_invariant_subsets``); tiles that stay dynamic (the remainder of a dynamic batch dimension)
   are left to the scalar loop lowering.

Masked vectorization (``vector_sizes``) was tried for the dynamic tiles and rejected: canonicalization then
folds a ``tensor.cast`` into the ``vector.mask`` region (``'vector.mask' op expects only one operation to
mask``), and masked transfers are not hoisted anyway.

The contraction itself is lowered later, on memrefs, by ``convert-vector-to-llvm{vector-contract-lowering=
outerproduct}``: one broadcast of A and two 16-lane FMAs per row of the tile.

Elementwise ``linalg.generic`` ops are *not* scheduled: after ``convert-linalg-to-loops`` LLVM's own loop
vectorizer already emits 512-bit code for them (a fused bias+ReLU 64x128 runs in about 1 µs), and scheduling
them here would need a tile size per rank and peeling for no measured gain.
"""

from __future__ import annotations

import dataclasses
import sys

from mlir import ir
from mlir.dialects.transform import interpreter

#: Iteration-space position of the (M, N) loops of each scheduled op; K is always the last loop.
MATMUL_LIKE: dict[str, tuple[int, int]] = {"linalg.matmul": (0, 1), "linalg.batch_matmul": (1, 2)}
#: Rows of the register tile (each row is one broadcast FMA chain).
TILE_M = 8
#: Columns of the register tile, in bits of accumulator: 1024 bits = two 512-bit registers per row.
TILE_N_BITS = 1024

_TAG = "relax_mlir.sched"
_VEC_TAG = "relax_mlir.vectorize"
_ANY = "!transform.any_op"


@dataclasses.dataclass(frozen=True)
class MatmulPlan:
    """How one matmul-like op is tiled: tile sizes over its loops, and which loops get peeled."""

    op_name: str
    tile_sizes: tuple[int, ...]
    peel: tuple[int, ...]  # loop positions, innermost first (peeling an outer loop clones the inner ones)


def plan_matmul(op: ir.Operation) -> MatmulPlan | None:
    """Tile sizes for a matmul-like op on tensors, or None if it should be left alone."""
    if op.name not in MATMUL_LIKE or len(op.results) != 1:
        return None
    out = op.results[0].type
    if not isinstance(out, ir.RankedTensorType):
        return None  # already bufferized: schedules run on tensors only
    m_pos, n_pos = MATMUL_LIKE[op.name]
    shape = list(out.shape)
    if any(d == 0 for d in shape):
        return None
    width = ir.FloatType(out.element_type).width if _is_float(out.element_type) else _int_width(out.element_type)
    tiles = [1] * (len(shape) + 1)  # batch loops 1, K loop 1
    peel = []
    for pos, pref in ((n_pos, max(1, TILE_N_BITS // max(width, 8))), (m_pos, TILE_M)):
        dim = shape[pos]
        dynamic = ir.ShapedType.is_dynamic_size(dim)
        tiles[pos] = pref if dynamic or dim >= pref else dim
        if dynamic or dim % tiles[pos]:
            peel.append(pos)
    return MatmulPlan(op.name, tuple(tiles), tuple(peel))


def _is_float(t: ir.Type) -> bool:
    return isinstance(t, ir.FloatType)


def _int_width(t: ir.Type) -> int:
    return ir.IntegerType(t).width if isinstance(t, ir.IntegerType) else 32


def _ops_named(root: ir.Operation, names: set[str]) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in names:
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def _script(body: list[str]) -> str:
    lines = "\n    ".join(body)
    return (
        "module attributes {transform.with_named_sequence} {\n"
        f"  transform.named_sequence @__transform_main(%root: {_ANY} {{transform.readonly}}) {{\n"
        f"    {lines}\n    transform.yield\n  }}\n}}\n"
    )


def _cleanup(extra_patterns: str = "") -> list[str]:
    """Canonicalize and CSE every function, then hoist loop-invariant reads/writes (on tensors: hoisting does
    not see through memref.subview after bufferization)."""
    return [
        f'%funcs = transform.structured.match ops{{["func.func"]}} in %root : ({_ANY}) -> {_ANY}',
        "transform.apply_patterns to %funcs {",
        "  transform.apply_patterns.canonicalization",
        *([f"  {extra_patterns}"] if extra_patterns else []),
        f"}} : {_ANY}",
        f"transform.apply_cse to %funcs : {_ANY}",
        f'%loops = transform.structured.match ops{{["scf.for"]}} in %root : ({_ANY}) -> {_ANY}',
        f"transform.apply_licm to %loops : {_ANY}",
        f"transform.loop.hoist_loop_invariant_subsets %loops : {_ANY}",
    ]


def tile_script(plans: list[MatmulPlan]) -> str:
    """Transform script 1: tile each tagged op (``relax_mlir.sched = i``) and peel its uneven loops."""
    body: list[str] = []
    for i, plan in enumerate(plans):
        n = len(plan.tile_sizes)
        body += [
            f'%op{i} = transform.structured.match ops{{["{plan.op_name}"]}} attributes{{{_TAG} = {i} : i64}} '
            f"in %root : ({_ANY}) -> {_ANY}",
            f"%t{i}, %l{i}:{n} = transform.structured.tile_using_for %op{i} tile_sizes "
            f"[{', '.join(map(str, plan.tile_sizes))}] : ({_ANY}) -> ({', '.join([_ANY] * (n + 1))})",
        ]
        for pos in plan.peel:
            body += [
                f'%c{i}_{pos} = transform.cast %l{i}#{pos} : {_ANY} to !transform.op<"scf.for">',
                f"%p{i}_{pos}, %r{i}_{pos} = transform.loop.peel %c{i}_{pos} "
                f'{{fail_if_already_divisible = false}} : (!transform.op<"scf.for">) -> ({_ANY}, {_ANY})',
            ]
    return _script(body + _cleanup())


def vectorize_script(op_names: set[str]) -> str:
    """Transform script 2: vectorize every op tagged ``relax_mlir.vectorize`` into a vector.contract, fold the
    tensor slices into the transfers, and hoist the accumulator out of the K loop."""
    names = ", ".join(f'"{n}"' for n in sorted(op_names))
    body = [
        f"%vec = transform.structured.match ops{{[{names}]}} attributes{{{_VEC_TAG}}} in %root "
        f": ({_ANY}) -> {_ANY}",
        f"transform.structured.vectorize %vec {{create_named_contraction}} : {_ANY}",
    ]
    return _script(body + _cleanup("transform.apply_patterns.tensor.fold_tensor_subset_ops_into_vector_transfers"))


def _apply(module: ir.Module, script: str, label: str, print_ir: bool) -> None:
    transform_module = ir.Module.parse(script, module.context)
    entry = transform_module.body.operations[0]
    interpreter.apply_named_sequence(module.operation, entry, transform_module)
    if print_ir:
        # Same banner as the pass manager's IR printing, so one stream reads as one pipeline.
        sys.stderr.write(f"// -----// IR Dump After transform schedule: {label} //----- //\n{module}\n")
        sys.stderr.flush()


def _all_static(op: ir.Operation) -> bool:
    return all(
        isinstance(v.type, ir.RankedTensorType) and v.type.has_static_shape
        for v in list(op.operands) + list(op.results)
    )


def schedule_matmuls(module: ir.Module, print_ir: bool = False) -> int:
    """Tile and vectorize every matmul-like op of ``module`` in place; returns how many were scheduled.

    Must run on tensors (before bufferization). Raises ``RuntimeError`` (from the transform interpreter) if
    a script fails; the caller decides whether to fall back to the naive lowering.
    """
    ops = _ops_named(module.operation, set(MATMUL_LIKE))
    plans: list[MatmulPlan] = []
    for op in ops:
        plan = plan_matmul(op)
        if plan is not None:
            op.attributes[_TAG] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(plans))
            plans.append(plan)
    if not plans:
        return 0
    _apply(module, tile_script(plans), "tile and peel matmuls", print_ir)
    tiled = [op for op in _ops_named(module.operation, set(MATMUL_LIKE)) if _TAG in op.attributes]
    for op in tiled:
        del op.attributes[_TAG]
        if _all_static(op):
            op.attributes[_VEC_TAG] = ir.UnitAttr.get()
    if any(_VEC_TAG in op.attributes for op in tiled):
        _apply(module, vectorize_script({p.op_name for p in plans}), "vectorize matmul tiles", print_ir)
    for op in _ops_named(module.operation, set(MATMUL_LIKE)):  # the dynamic remainders keep the tag
        if _VEC_TAG in op.attributes:
            del op.attributes[_VEC_TAG]
    return len(plans)
