"""What every schedule shares: finding ops, writing and applying transform scripts, clean-up patterns."""

from __future__ import annotations

import contextlib
import math
import re
import sys
import threading
from typing import Any, Callable, Iterator, Optional

from mlir import ir
from mlir.dialects import arith, tensor
from mlir.dialects.transform import interpreter

from ..guard import move_into_else

ANY = "!transform.any_op"
#: Unit attribute on the tiles that the vectorize script turns into vector ops.
VEC_TAG = "relax_mlir.vectorize"
#: Attribute (the operand it reads the matmul's result as) on an elementwise generic that will run in its matmul's
#: register tiles (``epilogue.py``): the other schedules leave it alone.
EPILOGUE = "relax_mlir.epilogue"


#: Ops that can be found inside a linalg op's body (its scalar computation); no other op is.
_BODY_OPS = ("arith.", "math.", "linalg.index", "linalg.yield")


def ops_named(root: ir.Operation, names: set[str]) -> list[ir.Operation]:
    """Every op under ``root`` whose name is in ``names``, in pre-order. The bodies of linalg ops (a fused
    generic's can hold thousands of scalar ops) are walked only when a scalar op is asked for."""
    found: list[ir.Operation] = []
    skip_bodies = not any(n.startswith(_BODY_OPS) for n in names)

    def visit(op: ir.Operation) -> ir.WalkResult:
        name = op.name
        if name in names:
            found.append(op)
        if skip_bodies and name.startswith("linalg."):
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def as_operation(op: Any) -> ir.Operation:
    """The ``ir.Operation`` of an op the bindings hand out as an ``OpView`` (or already as an operation)."""
    return op.operation if isinstance(op, ir.OpView) else op


def defining_op(value: ir.Value) -> Optional[ir.Operation]:
    """The op whose result ``value`` is, or None for a block argument."""
    owner = value.owner
    return None if isinstance(owner, ir.Block) else as_operation(owner)


def indexing_maps(op: ir.Operation) -> list[ir.AffineMap]:
    """A linalg op's indexing maps, one per operand."""
    return [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]


def all_parallel(op: ir.Operation) -> bool:
    """Every loop of the linalg op ``op`` is parallel (an elementwise op, or a broadcast)."""
    return all("parallel" in str(t) for t in ir.ArrayAttr(op.attributes["iterator_types"]))


def clone_mapped(ops: list[ir.Operation], mapping: dict) -> None:
    """Clone ``ops`` in order at the current insertion point, each operand found in ``mapping`` replaced by its
    image; every result's clone is added to ``mapping``."""
    for op in ops:
        clone = op.clone()
        for i, v in enumerate(list(clone.operands)):
            if v in mapping:
                clone.operands[i] = mapping[v]
        for old, new in zip(op.results, clone.results):
            mapping[old] = new


def loop_ranges(op: ir.Operation) -> Optional[list[int]]:
    """The static extent of every loop of a linalg op (read from the operand shapes through the indexing maps),
    or None when some loop's extent is dynamic."""
    maps = indexing_maps(op)
    ranges: list[Optional[int]] = [None] * maps[0].n_dims
    for value, amap in zip(list(op.operands), maps):
        t = value.type
        if not isinstance(t, ir.RankedTensorType):
            continue
        for expr, size in zip(amap.results, t.shape):
            if isinstance(expr, ir.AffineDimExpr) and not ir.ShapedType.is_dynamic_size(size):
                ranges[expr.position] = size
    return None if any(r is None for r in ranges) else ranges


def script(body: list[str]) -> str:
    """A transform module whose ``@__transform_main`` runs ``body`` on the payload root ``%root``."""
    lines = "\n    ".join(body)
    return (
        "module attributes {transform.with_named_sequence} {\n"
        f"  transform.named_sequence @__transform_main(%root: {ANY} {{transform.readonly}}) {{\n"
        f"    {lines}\n    transform.yield\n  }}\n}}\n"
    )


def cleanup(extra_patterns: str = "") -> list[str]:
    """Canonicalize and CSE every function, then hoist loop-invariant reads/writes (on tensors: hoisting does
    not see through memref.subview after bufferization)."""
    return [
        f'%funcs = transform.structured.match ops{{["func.func"]}} in %root : ({ANY}) -> {ANY}',
        "transform.apply_patterns to %funcs {",
        "  transform.apply_patterns.canonicalization",
        *([f"  {extra_patterns}"] if extra_patterns else []),
        f"}} : {ANY}",
        f"transform.apply_cse to %funcs : {ANY}",
        f'%loops = transform.structured.match ops{{["scf.for"]}} in %root : ({ANY}) -> {ANY}',
        f"transform.apply_licm to %loops : {ANY}",
        f"transform.loop.hoist_loop_invariant_subsets %loops : {ANY}",
    ]


_CHECKS = threading.local()


@contextlib.contextmanager
def transform_checks(on: bool) -> Iterator[None]:
    """Within the block, :func:`apply` runs scripts with the transform interpreter's expensive checks ``on`` (a
    handle used after the op it points to was replaced is an error, not undefined behaviour) or off (the payload
    is verified before each script instead; the checks were 5% of the tutorial MLP's cold build)."""
    before = getattr(_CHECKS, "on", True)
    _CHECKS.on = on
    try:
        yield
    finally:
        _CHECKS.on = before


def apply(module: ir.Module, text: str, label: str, print_ir: bool) -> None:
    """Run a transform script on ``module`` in place; with ``print_ir``, print the result to stderr. The
    interpreter's expensive checks are on unless :func:`transform_checks` turned them off."""
    transform_module = ir.Module.parse(text, module.context)
    entry = transform_module.body.operations[0]
    checks = getattr(_CHECKS, "on", True)
    if not checks:
        module.operation.verify()
    options = interpreter.TransformOptions()
    options.expensive_checks = checks
    interpreter.apply_named_sequence(module.operation, entry, transform_module, options)
    if print_ir:
        # Same banner as the pass manager's IR printing, so one stream reads as one pipeline.
        sys.stderr.write(f"// -----// IR Dump After transform schedule: {label} //----- //\n{module}\n")
        sys.stderr.flush()


def all_static(op: ir.Operation) -> bool:
    """Whether every operand and result of ``op`` is a tensor of static shape."""
    return all(
        isinstance(v.type, ir.RankedTensorType) and v.type.has_static_shape
        for v in list(op.operands) + list(op.results)
    )


def element_bits(t: ir.Type) -> int:
    """Bits of a float or integer element type (32 for anything else, e.g. index)."""
    if isinstance(t, ir.FloatType):
        return ir.FloatType(t).width
    return ir.IntegerType(t).width if isinstance(t, ir.IntegerType) else 32


def is_boolean(t: ir.Type) -> bool:
    """Whether ``t`` (or its element type) is ``i1``: vector reads and writes of booleans have no byte layout to
    lower to (``bool_storage.py``), so schedules leave such ops to scalar loops."""
    elem = t.element_type if isinstance(t, ir.ShapedType) else t
    return isinstance(elem, ir.IntegerType) and elem.width == 1


def match_tagged(handle: str, op_name: str, tag: str, i: int) -> str:
    """The script line binding ``handle`` to the op named ``op_name`` tagged ``tag = i``."""
    return (f'{handle} = transform.structured.match ops{{["{op_name}"]}} attributes{{{tag} = {i} : i64}} '
            f"in %root : ({ANY}) -> {ANY}")


_NEGATIVE_COEFFICIENT = re.compile(r"-\s*d\d|\*\s*-\s*\d")  # -d3, d0 - d1, d1 * -2


def reads_backwards(op: ir.Operation) -> bool:
    """Whether one of ``op``'s indexing maps has a loop with a negative coefficient (a convolution's kernel flip
    reads ``-d3 + 2``): MLIR's linalg tiling asserts on those (``TileCheck``: "nonpositive multiplying
    coefficient") and the assertion aborts the process, so such ops are never tiled here."""
    if "indexing_maps" not in op.attributes:
        return False
    return any(_NEGATIVE_COEFFICIENT.search(str(ir.AffineMapAttr(m).value).split("->", 1)[1])
               for m in ir.ArrayAttr(op.attributes["indexing_maps"]))


def schedule_each(module: ir.Module, names: set[str], tag: str, plan: Callable[[ir.Operation], Any],
                  lines: Callable[[int, str, Any], list[str]], label: str, print_ir: bool,
                  patterns: Optional[str] = None) -> int:
    """Plan every op named in ``names``; tag the planned ones ``tag = 0, 1, ...``; apply one script made of
    ``lines(i, op_name, plan)`` for each (then the clean-up, with ``patterns``, if given); remove the tags.
    Returns how many ops were scheduled."""
    body: list[str] = []
    count = 0
    for op in ops_named(module.operation, names):
        if reads_backwards(op):
            continue
        planned = plan(op)
        if planned is None:
            continue
        op.attributes[tag] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), count)
        body += lines(count, op.name, planned)
        count += 1
    if count:
        apply(module, script(body + (cleanup(patterns) if patterns is not None else [])), label, print_ir)
        for op in ops_named(module.operation, names):
            if tag in op.attributes:
                del op.attributes[tag]
    return count


def slice_offsets(op: ir.Operation) -> list:
    """An ``extract_slice``'s offsets: ints, or the index values of its dynamic ones."""
    static = list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"]))
    dynamic = iter(list(op.operands)[1:])
    return [next(dynamic) if s == ir.ShapedType.get_dynamic_stride_or_offset() else s for s in static]


def induction_vars(loop: ir.Operation) -> list[ir.Value]:
    """The induction variables of an ``scf.for`` (one) or an ``scf.forall``."""
    block = loop.regions[0].blocks[0]
    return list(block.arguments)[:1] if loop.name == "scf.for" else \
        list(block.arguments)[:len(block.arguments) - len(loop.results)]


def encloses(loop: ir.Operation, op: ir.Operation) -> bool:
    """Whether ``op`` is nested (at any depth) in ``loop``."""
    parent = op.parent
    while parent is not None:
        if as_operation(parent) == loop:
            return True
        parent = parent.parent
    return False


def constant_int(value: ir.Value) -> int | None:
    """The integer of an ``arith.constant`` (an index or integer), or None for any other value."""
    owner = defining_op(value)
    if owner is None or owner.name != "arith.constant":
        return None
    return ir.IntegerAttr(owner.attributes["value"]).value


def constant_float(value: ir.Value) -> float | None:
    """The float of an ``arith.constant`` of a float type, or None for any other value."""
    owner = defining_op(value)
    if owner is None or owner.name != "arith.constant" or not isinstance(owner.attributes["value"], ir.FloatAttr):
        return None
    return ir.FloatAttr(owner.attributes["value"]).value


def trip_count(loop: ir.Operation) -> int | None:
    """Iterations of an scf.for with constant bounds, or of an scf.forall with static bounds (None otherwise)."""
    if loop.name == "scf.for":
        lb, ub, step = (constant_int(v) for v in list(loop.operands)[:3])
        if None in (lb, ub, step) or step <= 0:
            return None
        return max(0, -(-(ub - lb) // step))
    if len(loop.operands) != len(loop.results):  # dynamic bounds
        return None
    lbs, ubs, steps = (list(ir.DenseI64ArrayAttr(loop.attributes[name]))
                       for name in ("staticLowerBound", "staticUpperBound", "staticStep"))
    return math.prod(max(0, -(-(u - l) // s)) for l, u, s in zip(lbs, ubs, steps))


def erase_if_unused(value: ir.Value) -> None:
    """Erase the pad, transpose or fill that made ``value`` once nothing reads it (a schedule read through it,
    or it was the initial value of an op a schedule replaced)."""
    owner = value.owner
    owner = getattr(owner, "operation", owner)
    if (isinstance(owner, ir.Operation) and owner.name in ("tensor.pad", "linalg.transpose", "linalg.fill")
            and not list(value.uses)):
        owner.erase()


def in_loop(op: ir.Operation) -> bool:
    """Whether ``op`` is nested in a loop of its function (another schedule's tiles)."""
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        if parent.name in ("scf.for", "scf.forall", "scf.parallel", "scf.while"):
            return True
        parent = parent.parent
    return False


#: Unit attribute on the ``scf.if`` of :func:`unless_empty` (a size check's ``scf.if`` looks the same otherwise), and
#: of a lowering's that skips a whole computation on an empty axis (softmax's: ``legalize/nn.py``).
UNLESS_EMPTY = "relax_mlir.unless_empty"


def skips_when_empty(op: ir.Operation) -> bool:
    """Whether ``op`` is already the else branch of its :func:`unless_empty` (a schedule may run twice)."""
    if op.parent.name != "scf.if" or UNLESS_EMPTY not in op.parent.attributes:
        return False
    block = list(op.parent.regions[1].blocks[0].operations)
    return len(block) == 2 and block[0] == op


def unless_empty(op: ir.Operation, sizes: list[tuple[ir.Value, int]]) -> None:
    """The linalg op ``op`` (on tensors) moved into the else branch of an ``scf.if`` on "one of ``sizes`` (a tensor
    and one of its axes) is 0", whose then branch yields ``op``'s inits: what a linalg op over no iterations
    returns. Its loops follow its iteration space, outermost first, so with two dynamic extents an empty one
    inside a long one ran the long loop over nothing. Bufferized, both branches are the init's buffer: no copy."""
    idx = ir.IndexType.get()
    inits = list(op.operands)[len(op.operands) - len(op.results):]
    with ir.InsertionPoint(op), op.location:
        zero = arith.constant(idx, 0)
        empty = None
        for value, axis in sizes:
            none = arith.cmpi(arith.CmpIPredicate.eq, tensor.dim(value, arith.constant(idx, axis)), zero)
            empty = none if empty is None else arith.ori(empty, none)
    move_into_else(op, empty, lambda: inits).operation.attributes[UNLESS_EMPTY] = ir.UnitAttr.get()
