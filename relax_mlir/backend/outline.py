"""Kernel outlining: every top-level loop nest of a public function becomes a private function of its own.

A compiled training step is one function of thousands of lines (every op's loops one after another), and LLVM
compiles function by function: its optimisation time grows faster than the function's size, and one function
cannot be spread over several cores. After the loops are written (``convert-linalg-to-loops``), each region op
without results at the top level of a public function (``scf.for``, ``scf.parallel``, ``scf.if``,
``omp.parallel``) moves into ``relax_mlir_kernel_<function>_<i>``, called where it stood:

    func.func @update_params(%x: memref<64x64xf32>, ...) {          func.func @update_params(...) {
      %c0 = arith.constant 0 : index                                   call @relax_mlir_kernel_update_params_0(%x, %a)
      scf.for %i = %c0 to %c64 step %c1 { ... %x ... %a ... }   ->    ...
      ...                                                            func.func private @relax_mlir_kernel_update_params_0(
                                                                          %x: memref<64x64xf32>, %a: ...) {
                                                                       %c0 = arith.constant 0 : index
                                                                       scf.for %i = %c0 to %c64 step %c1 { ... }

Adjacent region ops (nothing between them) share a kernel until it holds ``MERGE_BELOW_OPS`` ops: LLVM pays
about 12 ms a function whatever its size, so the small loops of an elementwise tail compile faster together
(cold compile of the tutorial MLP's training module 0.544 -> 0.530 s, the CNN's 1.478 -> 1.453 s, medians of 6 and
4 runs, 2-core Intel Xeon).

The constants a loop uses are copied into its kernel (loop bounds stay constants, so LLVM still sees trip
counts); everything else it uses (buffers, sizes) becomes a parameter. Kernels are ``no_inline`` (LLVM would
inline a function called once straight back). Measured on the CNN's training module (Intel Xeon, AVX-512):
LLVM -O2 plus code generation 3.06 s as one function, 2.22 s outlined, 1.29 s outlined and split over two
cores (``native.py``).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf

from .schedule.common import ANY, apply, script

#: Outlined kernels are named ``<KERNEL_PREFIX>_<function>_<i>``.
KERNEL_PREFIX = "relax_mlir_kernel"
#: Top-level ops moved into kernels: the ones that hold loops.
REGION_OPS = frozenset({"scf.for", "scf.parallel", "scf.forall", "scf.while", "scf.if", "omp.parallel"})
_TAG = "relax_mlir.outline"
#: Adjacent loop nests share a kernel until it holds this many ops: LLVM pays ~12 ms a function whatever its size.
MERGE_BELOW_OPS = 200


def _constant_operands(root: ir.Operation, top: ir.Block) -> tuple[list[tuple[ir.Operation, int, ir.Operation]], int]:
    """(user, operand index, constant op) for every operand of ``root`` or an op inside it that is the result of
    an ``arith.constant`` of the block ``top`` (the function body, where canonicalization hoists constants); and
    how many ops ``root`` holds."""
    found = []
    count = 0

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal count
        count += 1
        for i, value in enumerate(op.operands):
            owner = value.owner
            if not isinstance(owner, ir.Block):
                owner = owner.operation
                if owner.name == "arith.constant" and owner.block == top:
                    found.append((op, i, owner))
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found, count


def _wrap(ops: list[ir.Operation], uses: list[tuple[ir.Operation, int, ir.Operation]]) -> ir.Operation:
    """Move ``ops`` (adjacent, in order) into a new ``scf.execute_region`` together with copies of the constants
    they use (``uses``)."""
    with ir.InsertionPoint(ops[0]), ops[0].location:
        region = scf.ExecuteRegionOp([])
        block = region.regions[0].blocks.append()
        with ir.InsertionPoint(block):
            copies: dict[ir.Operation, ir.Operation] = {}
            for _, _, constant in uses:
                if constant not in copies:
                    copies[constant] = constant.clone()
            yield_op = scf.YieldOp([])
    for op in ops:
        op.move_before(yield_op.operation)
    for user, index, constant in uses:
        user.operands[index] = copies[constant].result
    return region.operation


def _groups(top: ir.Block) -> list[tuple[list[ir.Operation], list]]:
    """The region ops of ``top`` to outline, in groups: adjacent ones (nothing between them) share a kernel while
    the kernel holds fewer than ``MERGE_BELOW_OPS`` ops; each group with the constants it uses."""
    groups: list[tuple[list[ir.Operation], list]] = []
    size, last = 0, -2
    for index, op in enumerate(top.operations):
        op = op.operation
        # ops with results stay (an scf.if choosing a buffer: the region would hand back a value of the caller's)
        if op.name not in REGION_OPS or len(op.results) != 0:
            continue
        uses, count = _constant_operands(op, top)
        if groups and last == index - 1 and size < MERGE_BELOW_OPS:
            groups[-1][0].append(op)
            groups[-1][1].extend(uses)
            size += count
        else:
            groups.append(([op], uses))
            size = count
        last = index
    return groups


def outline_kernels(module: ir.Module, print_ir: bool = False) -> int:
    """Outline the top-level region ops of every public function of ``module`` (on memrefs, loops written,
    before the lowering to LLVM) into private kernels; returns how many."""
    from .pipeline import public_funcs

    body: list[str] = []
    wrapped: list[tuple[ir.Operation, str]] = []
    for func in public_funcs(module):
        name = ir.StringAttr(func.attributes["sym_name"]).value
        for i, (ops, uses) in enumerate(_groups(func.regions[0].blocks[0])):
            wrapper = _wrap(ops, uses)
            kernel = f"{KERNEL_PREFIX}_{name}_{i}"
            wrapper.attributes[_TAG] = ir.StringAttr.get(kernel)
            wrapped.append((wrapper, kernel))
            body += [f'%w_{len(wrapped)} = transform.structured.match ops{{["scf.execute_region"]}} '
                     f'attributes{{{_TAG} = "{kernel}"}} in %root : ({ANY}) -> {ANY}',
                     f'%f_{len(wrapped)}, %c_{len(wrapped)} = transform.loop.outline %w_{len(wrapped)} '
                     f'{{func_name = "{kernel}"}} : ({ANY}) -> ({ANY}, {ANY})']
    if not wrapped:
        return 0
    apply(module, script(body), "outline kernels", print_ir)
    for op in kernels(module, "func.func"):
        op.attributes["sym_visibility"] = ir.StringAttr.get("private")
    return len(wrapped)


def kernels(module: ir.Module, op_name: str = "llvm.func") -> list[ir.Operation]:
    """The outlined kernels of ``module`` (``func.func`` before the lowering to LLVM, ``llvm.func`` after)."""
    return [op.operation for op in module.body.operations
            if op.operation.name == op_name
            and ir.StringAttr(op.operation.attributes["sym_name"]).value.startswith(KERNEL_PREFIX)]


def mark_no_inline(module: ir.Module) -> None:
    """After the lowering to LLVM: every kernel ``no_inline`` (the lowering drops the attribute; LLVM would inline
    a function called once back into its caller and compile it twice) with external linkage (what ``native.py``
    needs to call it from another part of the module)."""
    for op in kernels(module):
        if "sym_visibility" in op.attributes:
            del op.attributes["sym_visibility"]
        op.attributes["no_inline"] = ir.UnitAttr.get()
