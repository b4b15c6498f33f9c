"""The named lowering pipeline: linalg-on-tensors MLIR text down to the LLVM dialect.

Stages, in order (each one's text is what ``lower(module, stage)`` returns)::

    linalg      func.func on builtin tensors with linalg/tensor/arith/math ops (the input)
    fused       elementwise producers fused into their consumers (linalg-fuse-elementwise-ops; a cheap producer
                with several elementwise users copied into each first, ``recompute.py``; a producer whose result
                the function also returns merged into its consumer as an extra result after, ``multi_use.py``)
    scheduled   matmul-like ops tiled for threads (scf.forall), caches and registers, vectorized to
                vector.contract, accumulator hoisted (transform-dialect scripts, see ``schedule/``)
    bufferized  one-shot bufferization across function boundaries, identity layouts; every result is an
                out-parameter (memref) the caller allocates; temporaries freed (buffer-deallocation-pipeline)
    llvm        LLVM dialect, ready for ``mlir.execution_engine.ExecutionEngine``; every ``malloc`` checked (a failed
                one returns from the function and raises MemoryError after the call, ``alloc_checks.py``)

``opt_level``: 0 = naive loops (no fusion, no schedule: the debugging baseline); >= 1 (default 2) =
elementwise fusion + schedules (1, 2 and 3 are the same today). Elementwise loops are vectorized by LLVM's own
loop vectorizer at every level (the engine compiles at -O3). ``num_threads`` > 1 lets the schedules split large
ops across threads: ``scf.forall`` loops become OpenMP regions (``openmp.py``) after bufferization.

Example::

    text = lower(LINALG_TEXT, "bufferized", PipelineOptions(opt_level=2, print_after_all=True))
"""

from __future__ import annotations

import sys
import time
import warnings
from typing import Callable

from mlir import ir, passmanager
from mlir.dialects import arith, bufferization, scf, tensor

from .alloc_checks import check_allocations, functions_to_check
from .bf16 import exact_bf16_conversions
from .bool_storage import widen_bool_memrefs
from .fusion_limit import limit_fusion_depth
from . import loop_hints
from .outline import mark_no_inline, outline_kernels
from .multi_use import merge_multi_use_producers
from .parallel_inits import read_fills_directly
from .recompute import recompute_cheap_producers
from .shared_inits import bound_shared_inits
from .options import STAGES, PipelineOptions
from .schedule import schedule_module, vectorize_pools
from .schedule.common import UNLESS_EMPTY, as_operation, defining_op, ops_named, transform_checks


FUSE_PIPELINE = "builtin.module(func.func(linalg-fuse-elementwise-ops),canonicalize,cse)"

# buffer-results-to-out-params: in MLIR 22 public functions are left alone without
# modify-public-functions=1; hoisting turns "alloc inside + copy to the out-param" into "write the
# out-param directly", for static *and* dynamic shapes (the caller computes dynamic result shapes).
BUFFERIZE_PIPELINE = (
    "builtin.module("
    "eliminate-empty-tensors,"
    "one-shot-bufferize{bufferize-function-boundaries=1 function-boundary-type-conversion=identity-layout-map},"
    "canonicalize)"
)
#: After ``returned_views_to_allocs``: results become out-parameters, allocations are freed.
OUT_PARAMS_PIPELINE = (
    "builtin.module("
    "buffer-results-to-out-params{hoist-static-allocs=1 hoist-dynamic-allocs=1 modify-public-functions=1},"
    "buffer-deallocation-pipeline)"
)

# Order matters: vector transfers become scf loops of 1-D transfers before vector-to-llvm; math ops with an
# LLVM intrinsic go first and the rest (tanh, erf, ...) to libm; then one convert-to-llvm converts every other
# dialect left (arith, index, ub, func, omp, cf) in a single walk: the seven passes it replaces cost 20-30 ms more
# on the tutorial MLP's training module, 80 ms more on the CNN's (2-core Intel Xeon). memref keeps its own pass,
# first: convert-to-llvm leaves a memref.reshape of a dynamic shape unconverted (MLIR 22). Between the two halves, boolean memrefs are
# retyped to bytes (bool_storage.py: MLIR 22 aborts on i1 loads/stores).
# Parallel tiles: scf.forall -> scf.parallel -> omp.parallel/omp.wsloop (with the thread count as a clause),
# before the linalg ops inside them become loops.
OPENMP_PASSES = "scf-forall-to-parallel,convert-scf-to-openmp{num-threads=%d},"
# The passes that stay inside a function run nested in func.func: MLIR's pass manager then runs them on the
# module's functions (the outlined kernels) in parallel, one per core. The LLVM dialect that comes out is the same,
# byte for byte (the tutorial MLP's and the 8x8 CNN's training modules); their cold builds 0.415 -> 0.402 s and
# 1.158 -> 1.143 s (medians of 9 and 5, alternated in one process, 2-core Intel Xeon).
# Last, bf16 arithmetic is computed in f32 (x86 has none; MLIR's emulation); the casts it adds, and the lowering's,
# then become integer ops (``bf16.exact_bf16_conversions``: subnormals kept on every host).
LOOPS_PIPELINE = (
    "builtin.module("
    "%s"
    "func.func("
    "convert-linalg-to-loops,"
    "convert-vector-to-scf{full-unroll=1},"
    "canonicalize,cse,"
    "arith-emulate-unsupported-floats{source-types=bf16 target-type=f32}))"
)
LLVM_PIPELINE = (
    "builtin.module("
    "func.func("
    "lower-affine,"
    "convert-scf-to-cf,"
    "expand-strided-metadata,"
    "lower-affine,"
    "convert-vector-to-llvm{vector-contract-lowering=outerproduct},"
    "convert-math-to-llvm),"
    "finalize-memref-to-llvm,"
    "convert-math-to-libm,"
    "convert-to-llvm,"
    "reconcile-unrealized-casts)"
)


def run_passes(module: ir.Module, pipeline: str, options: PipelineOptions) -> None:
    """Run one textual pass pipeline on ``module`` in place, with the options' printing and timing.

    The module is verified first (the Python rewrites between pipelines are checked before any pass reads their
    IR); MLIR's verification after every pass only with ``options.verify_each`` (20-25 ms of the tutorial MLP's
    cold build, over its ~35 passes)."""
    module.operation.verify()
    pm = passmanager.PassManager.parse(pipeline, module.context)
    pm.enable_verifier(options.verify_each or options.print_after_all)
    if options.print_after_all:
        pm.enable_ir_printing(print_after_all=True)
    if options.timing:
        pm.enable_timing()
    try:
        pm.run(module.operation)
    finally:
        del pm  # the timing report is printed when the pass manager is destroyed: now, not at exit


def _fuse(module: ir.Module, options: PipelineOptions) -> ir.Module:
    sink_into_empty_guards(module)  # before the checks fold (canonicalize) and the fusion
    if options.opt_level >= 1:
        # Tiling max-poolings become vector loops first: elementwise fusion would otherwise merge the gradient's
        # consumer (ReLU's backward) into its generic, which the pooling schedule then no longer recognises, and
        # the merged generic runs scalar (a fifth of the 28x28 CNN's step, 2-core Intel Xeon).
        vectorize_pools(module, threads=options.num_threads)
        recompute_cheap_producers(module)  # a bias addition read by ReLU and by ReLU's gradient: fused into both
        limit_fusion_depth(module)  # at most MAX_FUSED elementwise ops a loop (a 2000-op chain took 18 s)
        read_fills_directly(module)  # an elementwise op reading its zeros: fused wrongly by MLIR 22 (parallel_inits.py)
        run_passes(module, FUSE_PIPELINE, options)
        if merge_multi_use_producers(module):  # Adam's new moments: computed in the parameter's update, returned
            run_passes(module, FUSE_PIPELINE, options)
    return module


def sink_into_empty_guards(module: ir.Module) -> int:
    """Through every ``scf.if`` a lowering made with ``UNLESS_EMPTY`` (softmax over an axis that may be empty at
    run time: ``legalize/nn.py``), read the result's sizes from its then branch's tensor, and move the elementwise
    op that alone reads the result into the else branch; returns how many ops were moved.

    Both branches yield tensors of one shape (the then branch the else branch's init), so ``tensor.dim`` of the
    result is that of the init: the size checks of the function's results then fold away as they do without the
    branch. The consumer, over the result's own loops (a permutation map, all parallel), runs over nothing when the
    guard's axis is empty, so its init stands for it in the then branch; in the else branch the fusion that
    follows merges it into the op that made the value, as without the branch (a softmax of 256x1024 followed by a
    multiply: 0.318 ms as two loops, 0.265 as one; one thread, 2-core host)."""
    moved = 0
    for guard in ops_named(module.operation, {"scf.if"}):
        if UNLESS_EMPTY not in guard.attributes:
            continue
        while True:
            _read_sizes_from_then_branch(guard)
            consumer = _sinkable_consumer(guard)
            if consumer is None:
                break
            guard = _sink(guard, consumer)
            moved += 1
    return moved


def _then_values(guard: ir.Operation) -> list[ir.Value]:
    return list(list(guard.regions[0].blocks[0].operations)[-1].operands)


def _read_sizes_from_then_branch(guard: ir.Operation) -> None:
    for result, init in zip(guard.results, _then_values(guard)):
        for use in list(result.uses):
            owner = as_operation(use.owner)
            if owner.name == "tensor.dim" and use.operand_number == 0:
                owner.operands[0] = init


def _sinkable_consumer(guard: ir.Operation) -> ir.Operation | None:
    """The all-parallel generic in the guard's block that is the only reader of its one result, as an input through
    a permutation map, and whose other operands are (or can be moved) before the guard; or None."""
    if len(guard.results) != 1 or len(list(guard.results[0].uses)) != 1:
        return None
    use = list(guard.results[0].uses)[0]
    consumer = as_operation(use.owner)
    if consumer.name != "linalg.generic" or consumer.parent != guard.parent:
        return None
    iterators = [str(ir.Attribute(a)) for a in ir.ArrayAttr(consumer.attributes["iterator_types"])]
    n_inputs = len(consumer.operands) - len(consumer.results)
    amap = ir.AffineMapAttr(ir.ArrayAttr(consumer.attributes["indexing_maps"])[use.operand_number]).value
    if (any("parallel" not in k for k in iterators) or use.operand_number >= n_inputs or not amap.is_permutation
            or any(name.startswith("relax_mlir.") for name in consumer.attributes)):
        return None
    others = [v for i, v in enumerate(consumer.operands) if i != use.operand_number]
    if not all(_movable_before(v, guard) for v in others):
        return None
    for v in others:
        _move_before(v, guard)
    return consumer


#: Ops that compute a size or an uninitialised tensor from their operands: moved before a guard with them.
_SIZE_OPS = ("tensor.dim", "tensor.empty", "arith.constant")


def _movable_before(value: ir.Value, guard: ir.Operation) -> bool:
    """Whether ``value`` is defined before ``guard`` (or outside its block), or by size ops after it that read only
    such values."""
    op = defining_op(value)
    if op is None or op.parent != guard.parent or op.is_before_in_block(guard):
        return True
    return op.name in _SIZE_OPS and all(_movable_before(v, guard) for v in op.operands)


def _move_before(value: ir.Value, guard: ir.Operation) -> None:
    op = defining_op(value)
    if op is None or op.parent != guard.parent or op.is_before_in_block(guard):
        return
    for v in op.operands:
        _move_before(v, guard)
    op.move_before(guard)


def _sink(guard: ir.Operation, consumer: ir.Operation) -> ir.Operation:
    """A new guard yielding ``consumer``'s inits, or its results computed in the else branch from the old guard's."""
    n_inits = len(consumer.results)
    inits = list(consumer.operands)[len(consumer.operands) - n_inits:]
    index = list(guard.results[0].uses)[0].operand_number
    with ir.InsertionPoint(guard), guard.location:
        new = scf.IfOp(guard.operands[0], [r.type for r in consumer.results], has_else=True)
        new.operation.attributes[UNLESS_EMPTY] = ir.UnitAttr.get()
        with ir.InsertionPoint(new.then_block):
            scf.YieldOp(inits)
    old_else = list(guard.regions[1].blocks[0].operations)
    ip = ir.InsertionPoint(new.else_block)
    for op in old_else[:-1]:
        op.detach_from_parent()
        ip.insert(op)
    with ip, consumer.location:
        moved = consumer.clone()
        moved.operands[index] = old_else[-1].operands[0]
        scf.YieldOp(list(moved.results))
    for old, result in zip(consumer.results, new.results):
        old.replace_all_uses_with(result)
    consumer.erase()
    guard.erase()
    return new.operation


def _schedule(module: ir.Module, options: PipelineOptions) -> ir.Module:
    if options.opt_level < 1:
        return module
    backup = copy(module) if options.fallback_on_schedule_failure else None  # a clone: printing took 4-15 ms
    start = time.perf_counter()
    try:
        count = schedule_module(module, threads=options.num_threads, print_ir=options.print_after_all)
    except (ir.MLIRError, RuntimeError, ValueError) as err:
        if backup is None:
            raise
        kind = getattr(err, "kind", None)  # a ScheduleFailed names the family whose schedule failed
        what = f"the {kind} schedule" if isinstance(kind, str) else "a schedule"
        warnings.warn(f"{what} failed, lowering with naive loops instead: {err}", RuntimeWarning)
        return backup
    if options.timing:  # the transform interpreter has no timing instrumentation of its own
        sys.stderr.write(f"// relax_mlir: transform schedules for {count} op(s): "
                         f"{time.perf_counter() - start:.4f} s\n")
        sys.stderr.flush()
    return module


def public_funcs(module: ir.Module) -> list[ir.Operation]:
    """The public ``func.func`` definitions of a module (the ones a caller can reach)."""
    funcs = []
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func" or len(op.regions[0].blocks) == 0:
            continue
        vis = op.attributes["sym_visibility"] if "sym_visibility" in op.attributes else None
        if vis is None or ir.StringAttr(vis).value == "public":
            funcs.append(op)
    return funcs


def _mark_args_read_only(func: ir.Operation) -> None:
    """One-Shot Bufferize may write into a tensor argument's buffer in place unless it is marked
    ``bufferization.writable = false``: that buffer is the caller's NumPy array, which must not change."""
    args = func.regions[0].blocks[0].arguments
    old = list(ir.ArrayAttr(func.attributes["arg_attrs"])) if "arg_attrs" in func.attributes else []
    new = []
    for i, arg in enumerate(args):
        entries = {a.name: a.attr for a in ir.DictAttr(old[i])} if i < len(old) else {}
        if isinstance(arg.type, ir.RankedTensorType):  # the attribute is only valid on tensors
            entries.setdefault("bufferization.writable", ir.BoolAttr.get(False))
        new.append(ir.DictAttr.get(entries))
    func.attributes["arg_attrs"] = ir.ArrayAttr.get(new)


def _copy_repeated_results(func: ir.Operation) -> None:
    """Return a copy where a function returns one tensor twice (``return (a, a)``, or two results CSE merged):
    buffer-results-to-out-params{hoist-static-allocs} of MLIR 22 crashes (a segfault) on an alloc returned twice.

    A result with a static 0 in its shape (no elements) gets a buffer of its own, uncopied, whatever it is: two
    such results can end on one buffer although the tensors differ. ``return (x[0:0], exp(x[1:1]))``: both slices
    fold to one ``tensor.empty``, the ``exp`` writes it in place, and bufferization's canonicalize drops that loop
    over nothing, leaving one alloc returned twice (the float64 gradient of ``nn.attention`` with an empty key
    length does the same)."""
    ret = list(func.regions[0].blocks[0].operations)[-1]
    seen = []
    for i, value in enumerate(list(ret.operands)):
        if isinstance(value.type, ir.RankedTensorType) and 0 in ir.RankedTensorType(value.type).shape:
            t = ir.RankedTensorType(value.type)
            with ir.InsertionPoint(ret), ret.location:
                sizes = [tensor.dim(value, arith.constant(ir.IndexType.get(), a))
                         for a in range(t.rank) if t.is_dynamic_dim(a)]
                ret.operands[i] = bufferization.AllocTensorOp(t, sizes).result
        elif isinstance(value.type, ir.RankedTensorType) and any(value == v for v in seen):
            with ir.InsertionPoint(ret), ret.location:
                ret.operands[i] = bufferization.AllocTensorOp(value.type, [], copy=value).result
        seen.append(value)


def fill_per_use(module: ir.Module) -> int:
    """Give every use of a ``linalg.fill`` on tensors its own fill (and its own ``tensor.empty``); returns how many
    fills were added.

    CSE merges the equal zero fills that start several accumulations (the wide MLP's three 256x1024 matmuls and
    their bias sums start from one fill): One-Shot Bufferize then lets one writer have the filled buffer and
    gives each other a copy of it, a serial ``memcpy`` (11 MB a step there, measured as 3.6% of its time while
    the other core waited). A fill per use writes the zeros where they are needed instead, no read. Only fills
    whose every use starts an accumulation (a linalg op's init, a loop's carried value) are split: a fill read by
    ``extract_slice`` and written by ``insert_slice`` (a pad's border and interior) is one buffer updated in place,
    and splitting it cost the 28x28 CNN's step 9%."""
    fills = [op for op in ops_named(module.operation, {"linalg.fill"})
             if len(op.results) == 1 and isinstance(op.results[0].type, ir.RankedTensorType)
             and all(_starts_accumulation(as_operation(u.owner), u.operand_number) for u in op.results[0].uses)]
    added = 0
    for fill in fills:
        uses = [(u.owner, u.operand_number) for u in fill.results[0].uses]
        init = defining_op(fill.operands[1])
        fresh_init = init is not None and init.name == "tensor.empty"
        for owner, index in uses[1:]:
            with ir.InsertionPoint(fill):
                empty = init.clone() if fresh_init else None
                clone = fill.clone()
            if empty is not None:
                clone.operands[1] = empty.results[0]
            owner.operands[index] = clone.results[0]
            added += 1
    return added


def _starts_accumulation(owner: ir.Operation, index: int) -> bool:
    """Whether operand ``index`` of ``owner`` is an init that ``owner`` writes: a linalg op's output operand, an
    ``scf.forall``'s shared output or an ``scf.for``'s initial carried value."""
    name = owner.name
    if name.startswith("linalg."):
        segments = owner.attributes["operandSegmentSizes"] if "operandSegmentSizes" in owner.attributes else None
        n_inputs = ir.DenseI32ArrayAttr(segments)[0] if segments is not None else len(owner.operands) - 1
        return index >= n_inputs
    if name == "scf.forall":
        return index >= len(owner.operands) - len(owner.results)
    if name == "scf.for":
        return index >= 3
    return False


def _bufferize(module: ir.Module, options: PipelineOptions) -> ir.Module:
    for func in public_funcs(module):
        _mark_args_read_only(func)
    for op in module.body.operations:
        if op.operation.name == "func.func" and len(op.operation.regions[0].blocks) > 0:
            _copy_repeated_results(op.operation)
    fill_per_use(module)
    bound_shared_inits(module)  # at most 16 ops write one tensor.empty: One-Shot Bufferize's analysis stays linear
    run_passes(module, BUFFERIZE_PIPELINE, options)
    returned_views_to_allocs(module)
    run_passes(module, OUT_PARAMS_PIPELINE, options)
    return module


def returned_views_to_allocs(module: ir.Module) -> int:
    """Where a function returns ``memref.expand_shape`` of a static ``memref.alloc`` (a coalesced elementwise op's
    result, computed 1-D and expanded back), allocate the returned shape and let the op write a collapsed view of
    it; returns how many were rewritten.

    ``buffer-results-to-out-params{hoist-static-allocs}`` writes a result straight into the caller's buffer only
    when the returned value is the allocation itself; a view of it got a whole copy into the out-parameter at the
    end of the function (the wide MLP's 4 MB updated weight: a serial ``memcpy`` every step)."""
    from mlir.dialects import memref

    rewritten = 0
    for func in module.body.operations:
        func = func.operation
        if func.name != "func.func" or len(func.regions[0].blocks) == 0:
            continue
        ret = list(func.regions[0].blocks[0].operations)[-1]
        for i in range(len(ret.operands)):  # (read afresh: a rewrite replaces values the return held)
            expand = defining_op(ret.operands[i])
            if expand is None or expand.name != "memref.expand_shape":
                continue
            alloc = defining_op(expand.operands[0])
            wide = ir.MemRefType(expand.results[0].type)
            if (alloc is None or alloc.name != "memref.alloc" or len(alloc.operands)
                    or not wide.has_static_shape or "strided" in str(wide)):
                continue
            if any(use.owner == ret for use in alloc.results[0].uses):
                continue  # the allocation is returned too (a value and its reshape): it stays the buffer
            reassociation = expand.attributes["reassociation"]
            with ir.InsertionPoint(alloc), alloc.location:
                new = memref.AllocOp(wide, [], [], alignment=alloc.attributes["alignment"]
                                     if "alignment" in alloc.attributes else None)
                flat = memref.CollapseShapeOp(alloc.results[0].type, new.result, reassociation)
            alloc.results[0].replace_all_uses_with(flat.result)
            expand.results[0].replace_all_uses_with(new.result)
            expand.erase()
            alloc.erase()
            rewritten += 1
    return rewritten


def strided_copies_to_linalg(module: ir.Module) -> int:
    """Turn every ``memref.copy`` with a strided (non-identity) side into ``linalg.copy``; returns how many.

    The memref lowering to LLVM (``finalize-memref-to-llvm``'s patterns, run by ``convert-to-llvm``) makes such a
    copy a call of the runner library's ``memrefCopy``, which moves one element per ``memcpy`` call: the padding of a 64x8x14x14 convolution input took 0.2 ms that way.
    As ``linalg.copy`` it becomes loops whose innermost one LLVM vectorizes (contiguous copies keep the single
    ``memcpy`` the lowering gives them)."""
    from mlir.dialects import linalg

    copies = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "memref.copy" and any("strided<" in str(v.type) for v in op.operands):
            copies.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for op in copies:
        with ir.InsertionPoint(op), op.location:
            linalg.copy(op.operands[0], outs=[op.operands[1]])
        op.erase()
    return len(copies)


def _to_llvm(module: ir.Module, options: PipelineOptions) -> ir.Module:
    openmp = OPENMP_PASSES % options.num_threads if options.num_threads > 1 else ""
    strided_copies_to_linalg(module)
    run_passes(module, LOOPS_PIPELINE % openmp, options)
    if exact_bf16_conversions(module) and options.print_after_all:
        sys.stderr.write(f"// -----// IR Dump After exact-bf16-conversions (relax_mlir) //----- //\n{module}\n")
        sys.stderr.flush()
    if widen_bool_memrefs(module) and options.print_after_all:
        sys.stderr.write(f"// -----// IR Dump After widen-bool-memrefs (relax_mlir) //----- //\n{module}\n")
        sys.stderr.flush()
    loop_hints.mark_unrolling(module)  # before outlining, which keeps the loops LLVM unrolls in kernels of their own
    if options.outline:
        outline_kernels(module, options.print_after_all)
    calling = functions_to_check(module)  # (here: the LLVM dialect has five times the ops to walk)
    run_passes(module, LLVM_PIPELINE, options)
    if options.outline:
        mark_no_inline(module)
    # every malloc checked: a failed one is a MemoryError (alloc_checks.py), with or without options.checks
    if check_allocations(module, calling) and options.print_after_all:
        sys.stderr.write(f"// -----// IR Dump After check-allocations (relax_mlir) //----- //\n{module}\n")
        sys.stderr.flush()
    return module


#: The step that produces each stage from the one before it.
_STEPS: dict[str, Callable[[ir.Module, PipelineOptions], ir.Module]] = {
    "fused": _fuse,
    "scheduled": _schedule,
    "bufferized": _bufferize,
    "llvm": _to_llvm,
}


def _stage_index(stage: str) -> int:
    if stage not in STAGES:
        raise ValueError(f"unknown pipeline stage {stage!r}; stages are {', '.join(STAGES)}")
    return STAGES.index(stage)


def lower_module(
    module: ir.Module,
    to_stage: str = "llvm",
    options: PipelineOptions | None = None,
    from_stage: str = "linalg",
    on_stage: Callable[[str, ir.Module], None] | None = None,
) -> ir.Module:
    """Lower ``module`` (already at ``from_stage``) to ``to_stage``, mostly in place.

    Returns the lowered module: the same object, except after a schedule failure with fallback, when it is
    a copy of the module as the schedules found it. ``on_stage(name, module)`` is called after each stage.
    Raises ``mlir.ir.MLIRError`` when a pass fails (the diagnostics are in the message).
    """
    options = options or PipelineOptions()
    start, stop = _stage_index(from_stage), _stage_index(to_stage)
    if stop < start:
        raise ValueError(f"cannot lower from stage {from_stage!r} back to {to_stage!r}")
    with transform_checks(options.verify_each or options.print_after_all):
        for stage in STAGES[start + 1 : stop + 1]:
            module = _STEPS[stage](module, options)
            if on_stage is not None:
                on_stage(stage, module)
    if stop > start:
        module.operation.verify()  # what the last pipeline made (each pipeline verifies its input, not its output)
    return module


def parse(module: str | ir.Module, context: ir.Context | None = None) -> ir.Module:
    """Parse MLIR text into a module of ``context`` (a new context if None); a Module passes through."""
    if isinstance(module, ir.Module):
        return module
    ctx = context or ir.Context()
    with ctx, ir.Location.unknown(ctx):
        return ir.Module.parse(module)


def copy(module: ir.Module) -> ir.Module:
    """A copy of ``module`` in its context (its attributes and a clone of every op): what a text round trip gave,
    without printing and parsing (5 ms of the tutorial MLP's build, 13 ms of the CNN's)."""
    with module.context, module.operation.location:
        new = ir.Module.create()
    for name in list(module.operation.attributes):
        new.operation.attributes[name] = module.operation.attributes[name]
    for op in module.body.operations:
        new.body.append(op.operation.clone())
    return new


def lower(
    module: str | ir.Module,
    to_stage: str = "llvm",
    options: PipelineOptions | None = None,
    from_stage: str = "linalg",
) -> str:
    """Lower linalg-on-tensors MLIR (text, or a Module, which is not modified) to ``to_stage``; returns its text.

    >>> lower(TEXT, "bufferized")  # doctest: +SKIP
    'module {\\n  func.func @main(%arg0: memref<4xf32>, %arg1: memref<4xf32>) {...'
    """
    with_module = parse(module) if isinstance(module, str) else copy(module)
    with with_module.context, ir.Location.unknown(with_module.context):
        return str(lower_module(with_module, to_stage, options, from_stage))


def lower_stages(module: str | ir.Module, options: PipelineOptions | None = None) -> dict[str, str]:
    """The text of every stage, from the input ("linalg") to "llvm", in order."""
    mod = parse(module) if isinstance(module, str) else copy(module)
    texts = {"linalg": str(mod)}
    with mod.context, ir.Location.unknown(mod.context):
        lower_module(mod, "llvm", options, on_stage=lambda name, m: texts.__setitem__(name, str(m)))
    return texts
