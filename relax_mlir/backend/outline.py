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

LLVM pays 10-12 ms a function whatever its size, so kernels are not one per loop nest: the static allocations
and the views of memory are first moved up (``_hoist_memory``; never above a deallocation, so peak memory is
unchanged), which makes most loop nests adjacent, and adjacent loop nests (with the copies and stores between them)
share a kernel until it holds ``MERGE_BELOW_OPS`` ops. A nest holding a loop LLVM will unroll (``loop_hints.py``)
keeps a kernel of its own: merged, such nests cost LLVM more than apart (the CNN's training module: 1.57 s instead
of 1.47 when they were merged too). Measured on a 2-core Intel Xeon, cold compiles, medians of 4-5 runs, one kernel
a nest -> merged: the tutorial MLP's training module 0.528 -> 0.481 s (53 kernels -> 28), the CNN's 1.272 ->
1.262 s.

Kernels equal but for their names are merged (``merge_identical_kernels``): the forward pass a training step and
``predict`` both compute, the same update of every parameter of a shape.

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
#: Adjacent loop nests share a kernel until it holds this many ops: LLVM pays 10-12 ms a function whatever its size.
MERGE_BELOW_OPS = 200


def _constant_operands(root: ir.Operation, top: ir.Block) -> tuple[list[tuple[ir.Operation, int, ir.Operation]], int,
                                                                    bool]:
    """(user, operand index, constant op) for every operand of ``root`` or an op inside it that is the result of
    an ``arith.constant`` of the block ``top`` (the function body, where canonicalization hoists constants); how
    many ops ``root`` holds; and whether it holds a loop LLVM will unroll (one without a ``loop_annotation``,
    ``loop_hints.py``)."""
    found = []
    count = 0
    unrolled = False

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal count, unrolled
        count += 1
        if op.name == "scf.for" and "loop_annotation" not in op.attributes:
            unrolled = True
        for i, value in enumerate(op.operands):
            owner = value.owner
            if not isinstance(owner, ir.Block):
                owner = owner.operation
                if owner.name == "arith.constant" and owner.block == top:
                    found.append((op, i, owner))
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found, count, unrolled


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


#: Ops whose results only name memory (a static allocation, a reshaped view): moved up so that the loop nests around
#: them become adjacent (``_hoist_memory``).
_HOISTABLE = frozenset({"memref.alloc", "memref.collapse_shape", "memref.expand_shape"})
#: Result-less ops that may join a kernel between loop nests (a copy, a store).
_JOINABLE = frozenset({"memref.copy", "memref.store"})


def _hoist_memory(top: ir.Block) -> None:
    """Move the static allocations of ``top``, and views of them or of the arguments, up before the first op that is
    not one of them, but never above a deallocation (memory freed before an allocation stays reusable by it)."""
    anchor = None
    above: set = set()  # hoistable ops now above the anchor: views of them may follow
    for op in [op.operation for op in top.operations]:
        if op.name == "memref.dealloc":
            anchor = None  # the next op that stays is where later ones go
            continue
        if op.name in _HOISTABLE and (op.name != "memref.alloc" or not list(op.operands)):
            sources = [v.owner for v in op.operands]
            if all(isinstance(o, ir.Block) or o.operation in above or o.operation.name == "arith.constant"
                   for o in sources):
                if anchor is not None:
                    op.move_before(anchor)
                above.add(op)
                continue
        if anchor is None and op.name not in ("arith.constant", "ub.poison"):
            anchor = op


def _groups(top: ir.Block) -> list[tuple[list[ir.Operation], list]]:
    """The ops of ``top`` to outline, in groups: a loop nest (a region op without results) and the loop nests,
    copies and stores adjacent to it (nothing between them) share a kernel while it holds fewer than
    ``MERGE_BELOW_OPS`` ops; each group with the constants it uses. A copy or store not next to a loop nest stays."""
    groups: list[tuple[list[ir.Operation], list]] = []
    size, last = 0, -2
    for index, op in enumerate(top.operations):
        op = op.operation
        # ops with results stay (an scf.if choosing a buffer: the region would hand back a value of the caller's)
        loop_nest = op.name in REGION_OPS and len(op.results) == 0
        if not loop_nest and op.name not in _JOINABLE:
            continue
        uses, count, unrolled = _constant_operands(op, top)
        if groups and last == index - 1 and size < MERGE_BELOW_OPS and not unrolled:
            groups[-1][0].append(op)
            groups[-1][1].extend(uses)
            size += count
        else:
            groups.append(([op], uses))
            size = count
        if unrolled:
            size = MERGE_BELOW_OPS  # a nest LLVM unrolls keeps a kernel of its own: merged, it costs more than apart
        last = index
    return [(ops, uses) for ops, uses in groups
            if any(op.name in REGION_OPS for op in ops)]


def outline_kernels(module: ir.Module, print_ir: bool = False) -> int:
    """Outline the top-level region ops of every public function of ``module`` (on memrefs, loops written,
    before the lowering to LLVM) into private kernels; returns how many."""
    from .pipeline import public_funcs

    names: list[str] = []  # the kernels, in the order of the module's walk
    for func in public_funcs(module):
        name = ir.StringAttr(func.attributes["sym_name"]).value
        _hoist_memory(func.regions[0].blocks[0])
        for i, (ops, uses) in enumerate(_groups(func.regions[0].blocks[0])):
            _wrap(ops, uses).attributes[_TAG] = ir.UnitAttr.get()
            names.append(f"{KERNEL_PREFIX}_{name}_{i}")
    if not names:
        return 0
    apply(module, script(_outline_lines(names)), "outline kernels", print_ir)
    outlined = kernels(module, "func.func")
    if len(outlined) != len(names):
        raise RuntimeError(f"outlining made {len(outlined)} kernels of {len(names)} loop nests")
    for op in outlined:
        op.attributes["sym_visibility"] = ir.StringAttr.get("private")
    merge_identical_kernels(module)
    return len(names)


def _outline_lines(names: list[str]) -> list[str]:
    """The script outlining the tagged regions, in the module's order, into kernels named ``names``: one match of
    them all, split into a handle each. (A match per kernel walked the whole module each time: time quadratic in
    its size, 1.9 of the 5 s a function of 100 transposes and softmaxes spent in its lowering to LLVM.)"""
    handles = [f"%w_{i}" for i in range(len(names))]
    lines = [f'%all = transform.structured.match ops{{["scf.execute_region"]}} attributes{{{_TAG}}} '
             f"in %root : ({ANY}) -> {ANY}"]
    if len(names) > 1:
        types = ", ".join([ANY] * len(names))
        lines.append(f"{', '.join(handles)} = transform.split_handle %all : ({ANY}) -> ({types})")
    else:
        handles = ["%all"]
    return lines + [f'%f_{i}, %c_{i} = transform.loop.outline {handle} {{func_name = "{name}"}} '
                    f": ({ANY}) -> ({ANY}, {ANY})" for i, (handle, name) in enumerate(zip(handles, names))]


def merge_identical_kernels(module: ir.Module) -> int:
    """Call one kernel where several are the same function but for their names, and erase the others; returns
    how many were erased. A training module computes its forward pass twice, in the step and in ``predict``, and
    the same update for every parameter of a shape: the 8x8 CNN's training module had 28 such copies, 2300 of its
    18400 LLVM ops, which LLVM compiled twice. Kernels are compared by their text (their own name aside), first
    by their type, so that only kernels of a type seen twice are printed."""
    by_type: dict[str, list[ir.Operation]] = {}
    for op in kernels(module, "func.func"):
        by_type.setdefault(str(op.attributes["function_type"]), []).append(op)
    replace: dict[str, str] = {}
    erase = []
    for ops in by_type.values():
        if len(ops) < 2:
            continue
        first: dict[str, str] = {}
        for op in ops:
            name = ir.StringAttr(op.attributes["sym_name"]).value
            # the name is only in the header (the outlining's tag stays on the kernel's body, a unit); printed as
            # verified (the module is), so in the custom form whatever happens to the module, and in a local scope:
            # values numbered within the kernel, attributes written out, not the whole module's numbering and
            # aliases computed again for each kernel (the 8x8 CNN's 109 kernels printed in 157 ms that way, 15 now)
            text = op.get_asm(assume_verified=True, use_local_scope=True)
            text = text.replace(f"@{name}(", "@(", 1)
            if text in first:
                replace[name] = first[text]
                erase.append(op)
            else:
                first[text] = name
    if not replace:
        return 0
    from .pipeline import public_funcs

    def visit(op: ir.Operation) -> ir.WalkResult:  # (a kernel's call sits in the scf.execute_region it replaced)
        if op.name == "func.call":
            callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            if callee in replace:
                op.attributes["callee"] = ir.FlatSymbolRefAttr.get(replace[callee])
        return ir.WalkResult.ADVANCE

    for func in public_funcs(module):
        func.walk(visit)
    for op in erase:
        op.erase()
    return len(replace)


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
