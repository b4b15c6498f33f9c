"""Out-of-memory checks in compiled code: a ``malloc`` that returns NULL becomes a ``MemoryError``, not a segfault.

Compiled code allocates its temporaries with ``malloc`` (``finalize-memref-to-llvm``), and the lowering writes
through whatever comes back. The runtime's estimate before a call (``FunctionSignature.scratch``) sees only
Relax-level tensors, one at a time: an op's own temporaries (softmax over a static count of 2**34 rows of no
columns needs 64 GiB for its row maxima while its input and output hold 0 bytes), the tensors live together, or the
address space already used under ``ulimit -v`` escape it. So, after the lowering to the LLVM dialect, every
allocation is checked where it is made, by one compare and a branch LLVM lays out as never taken::

    %p = llvm.call @malloc(%size)                    %p = llvm.call @malloc(%size)
    ... uses of %p ...                       ->      %null = llvm.icmp "eq" %p, %zero
                                                     llvm.cond_br %null weights([1, 1048575]), ^cold, ^rest
                                                   ^rest:
                                                     ... uses of %p ...
                                                   ^cold:
                                                     %failed = llvm.call @relax_mlir_allocation_failed(%size, %id)
                                                     llvm.cond_br %failed, ^fail, ^rest

``relax_mlir_allocation_failed`` (private, cold) is true for a nonzero size (NULL is a valid answer for 0 bytes);
it then records check ``%id`` ("memory: <binding>", one message per source location,
``error_slot.MEMORY_CHECK_PREFIX``) and the byte count in the module's error slot, unless an error is recorded
already (an atomic compare-and-swap: threads may fail together). The runtime raises ``MemoryError`` after the call
and discards its results. The slot, its address function and the messages are added here when the module has none:
memory safety does not depend on ``checks=False``.

Where the failure leaves the code:

* in a function's own blocks: ``^fail`` frees what the function still holds (below) and returns (a zero value if
  the function has a result). A function that calls one that may fail, or holds a parallel region that may,
  checks the slot after that call or region and leaves the same way: no code runs on the unwritten buffers of
  a kernel that gave up, and no NULL ever reaches another kernel;
* in an OpenMP loop body (``omp.loop_nest``): that iteration ends (``omp.yield``), and every iteration first checks
  the slot, so that no thread starts another one after a failure; the region's barriers are all reached;
* elsewhere in a parallel region (no schedule allocates there today: the matmuls' packing buffers are allocated
  in the loop body): a line on stderr (``relax-mlir: could not allocate N bytes in a parallel region``) and
  ``abort()``: it cannot leave early without deadlocking the other threads at the next barrier.

Freeing on the way out: an allocation of the function's own blocks that the same function frees (``free(%p)`` of
the ``malloc``'s result) has a place in a stack array ``held``, zeroed at the entry: ``%p`` is stored there after
the check, NULL before the free, and ``^fail`` frees the array's pointers (``relax_mlir_free_held``). An
allocation that something else may free is not held (it would be freed twice): one whose pointer, or a descriptor
or address made of it, is freed as another value, stored to memory, passed to another block, or passed to a
function that frees a pointer it did not allocate (the conditional deallocations of dynamically sized buffers,
``bufferization.dealloc``), or that calls one that does. What is not freed on a failure (those, and an allocation
made in a parallel loop body before the one that failed: at most one iteration's per thread) stays allocated: a
leak of a failed call, never an unsafe access.

Cost (2-core AMD EPYC, A/B in one process): nothing measurable on the training steps (the MLPs, CNNs and the
embedding step of ``benchmarks/train_step.py`` and ``checks_cost.py``: within +-0.8%, code layout moves them more);
a cold build of the tutorial MLP's training module 10-20 ms more, 2-4% (5 ms here, the rest LLVM's extra blocks).
"""

from __future__ import annotations

import functools
from typing import Callable, Optional

from mlir import ir
from mlir.dialects import llvm

from .error_slot import CHECKS_ATTR, ERROR_ADDRESS_FN, ERROR_GLOBAL, MEMORY_CHECK_PREFIX, SLOT_WORDS
from .legalize.checks import where

#: The allocation functions the lowering calls, and which operand is the byte count.
ALLOCATORS = {"malloc": 0, "aligned_alloc": 1}
FAILED_FN = "relax_mlir_allocation_failed"
FREE_ALL_FN = "relax_mlir_free_held"
SLOT_SET_FN = "relax_mlir_error_recorded"
ABORT_FN = "relax_mlir_allocation_abort"
#: Branch weights of a check: (failed, went on).
_UNLIKELY = (1, (1 << 20) - 1)

_SLOT_TYPE = f"!llvm.array<{SLOT_WORDS} x i64>"
_SLOT = f"""
llvm.mlir.global private @{ERROR_GLOBAL}(dense<0> : tensor<{SLOT_WORDS}xi64>) {{addr_space = 0 : i32}} : {_SLOT_TYPE}
llvm.func @{ERROR_ADDRESS_FN}() -> i64 {{
  %slot = llvm.mlir.addressof @{ERROR_GLOBAL} : !llvm.ptr
  %address = llvm.ptrtoint %slot : !llvm.ptr to i64
  llvm.return %address : i64
}}
"""
_HELPERS = f"""
llvm.func private @{FAILED_FN}(%size: i64, %check: i64) -> i1 attributes {{no_inline, passthrough = ["cold"]}} {{
  %zero = llvm.mlir.constant(0 : i64) : i64
  %some = llvm.icmp "ne" %size, %zero : i64
  llvm.cond_br %some, ^record, ^done
^record:
  %slot = llvm.mlir.addressof @{ERROR_GLOBAL} : !llvm.ptr
  %old = llvm.cmpxchg %slot, %zero, %check acq_rel monotonic : !llvm.ptr, i64
  %first = llvm.extractvalue %old[1] : !llvm.struct<(i64, i1)>
  llvm.cond_br %first, ^store, ^done
^store:
  %value = llvm.getelementptr %slot[0, 1] : (!llvm.ptr) -> !llvm.ptr, {_SLOT_TYPE}
  llvm.store %size, %value : i64, !llvm.ptr
  %position = llvm.getelementptr %slot[0, 2] : (!llvm.ptr) -> !llvm.ptr, {_SLOT_TYPE}
  llvm.store %zero, %position : i64, !llvm.ptr
  %extent = llvm.getelementptr %slot[0, 3] : (!llvm.ptr) -> !llvm.ptr, {_SLOT_TYPE}
  llvm.store %zero, %extent : i64, !llvm.ptr
  llvm.br ^done
^done:
  llvm.return %some : i1
}}
llvm.func private @{FREE_ALL_FN}(%held: !llvm.ptr, %n: i64) attributes {{no_inline, passthrough = ["cold"]}} {{
  %zero = llvm.mlir.constant(0 : i64) : i64
  %one = llvm.mlir.constant(1 : i64) : i64
  llvm.br ^loop(%zero : i64)
^loop(%i: i64):
  %more = llvm.icmp "slt" %i, %n : i64
  llvm.cond_br %more, ^free, ^done
^free:
  %at = llvm.getelementptr %held[%i] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
  %p = llvm.load %at : !llvm.ptr -> !llvm.ptr
  llvm.call @free(%p) : (!llvm.ptr) -> ()
  %next = llvm.add %i, %one : i64
  llvm.br ^loop(%next : i64)
^done:
  llvm.return
}}
llvm.func private @{SLOT_SET_FN}() -> i1 attributes {{always_inline}} {{
  %slot = llvm.mlir.addressof @{ERROR_GLOBAL} : !llvm.ptr
  %zero = llvm.mlir.constant(0 : i64) : i64
  %check = llvm.load %slot : !llvm.ptr -> i64
  %set = llvm.icmp "ne" %check, %zero : i64
  llvm.return %set : i1
}}
"""
_ABORT = f"""
llvm.mlir.global private constant @relax_mlir_allocation_abort_text("relax-mlir: could not allocate %ld bytes in a \
parallel region of compiled code (out of memory); aborting\\0A\\00") {{addr_space = 0 : i32}}
llvm.func @dprintf(i32, !llvm.ptr, ...) -> i32
llvm.func @abort()
llvm.func private @{ABORT_FN}(%size: i64) attributes {{no_inline, passthrough = ["cold"]}} {{
  %stderr = llvm.mlir.constant(2 : i32) : i32
  %text = llvm.mlir.addressof @relax_mlir_allocation_abort_text : !llvm.ptr
  %written = llvm.call @dprintf(%stderr, %text, %size) vararg(!llvm.func<i32 (i32, ptr, ...)>)
    : (i32, !llvm.ptr, i64) -> i32
  llvm.call @abort() : () -> ()
  llvm.unreachable
}}
"""


# --- finding ---------------------------------------------------------------------------------------------------
def _callee(op: ir.Operation) -> Optional[str]:
    if op.name != "llvm.call" or "callee" not in op.attributes:
        return None
    return ir.FlatSymbolRefAttr(op.attributes["callee"]).value


def _name(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


class _Facts:
    """What the walk finds in one function: its allocations, its frees, its other calls (op, callee)."""

    def __init__(self, func: ir.Operation):
        self.func = func
        self.allocations: list[ir.Operation] = []
        self.frees: list[ir.Operation] = []
        self.calls: list[tuple[ir.Operation, str]] = []

    def add(self, op: ir.Operation, callee: str) -> None:
        if callee in ALLOCATORS:
            self.allocations.append(op)
        elif callee == "free":
            self.frees.append(op)
        else:
            self.calls.append((op, callee))

    @property
    def frees_foreign(self) -> bool:
        """Whether it frees a pointer it did not allocate (a buffer a caller passed: freeing that one on a failure
        too would free it twice)."""
        allocated = {a.results[0] for a in self.allocations}
        return any(f.operands[0] not in allocated for f in self.frees)


def _defines(func: ir.Operation) -> bool:
    """Whether the ``llvm.func`` ``func`` has a body (``len`` of a region's blocks walks them all)."""
    try:
        func.regions[0].blocks[0]
    except IndexError:
        return False
    return True


def _scan(module: ir.Module, functions: Optional[set[str]] = None) -> dict[str, _Facts]:
    """The facts of every function defined in ``module`` (of ``functions`` only, if given), in one walk: a Python
    call per op, 5 ms for all 7100 ops of the tutorial MLP's training module, 20 ms for the 19000 of the 28x28 CNN's
    (2-core AMD EPYC, loaded), 1 and 6 ms for those of its functions that allocate, free or call."""
    facts: dict[str, _Facts] = {}
    current: list[Optional[_Facts]] = [None]

    def visit(op: ir.Operation) -> ir.WalkResult:
        name = op.name
        if name == "llvm.call":
            callee = _callee(op)
            if callee is not None and current[0] is not None:
                current[0].add(op, callee)
        elif name == "llvm.func":
            symbol = _name(op)
            if functions is not None and symbol not in functions:
                current[0] = None
                return ir.WalkResult.SKIP
            current[0] = facts.setdefault(symbol, _Facts(op)) if _defines(op) else None
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return facts


#: The ops of the memref level that the lowering makes calls of: ``malloc``, ``free``, a function of the module.
_CALLING_OPS = frozenset({"memref.alloc", "memref.dealloc", "memref.realloc", "func.call"})


def functions_to_check(module: ir.Module) -> set[str]:
    """The functions of ``module``, before its lowering to the LLVM dialect, that allocate, free or call: the only
    ones :func:`check_allocations` then needs to walk. The LLVM dialect has five times the ops (memref descriptors,
    address arithmetic), and most of them are in kernels that do none of it: the tutorial MLP's training module has
    1500 ops here and 7100 there, 1500 of them in the functions that call."""
    found: set[str] = set()
    current: list[Optional[str]] = [None]

    def visit(op: ir.Operation) -> ir.WalkResult:
        name = op.name
        if name == "func.func":
            current[0] = _name(op)
        elif name in _CALLING_OPS and current[0] is not None:
            found.add(current[0])
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


#: Ops whose results hold nothing of their operands' pointers (an ``extractvalue`` of a size is treated apart).
_NOT_DERIVED = frozenset({"llvm.load", "llvm.icmp", "llvm.call"})


def _freed_here_only(call: ir.Operation, frees_args: set[str]) -> bool:
    """Whether the pointer an allocation ``call`` returns can be freed by nothing but ``free`` of that very value:
    nothing derived from it (a memref descriptor holding it, its aligned address) is freed, stored to memory, passed
    to a function of ``frees_args`` (which may free an argument) or to another block."""
    pointer = call.results[0]
    todo, seen = [pointer], {pointer}
    while todo:
        value = todo.pop()
        for use in value.uses:
            user = use.owner
            name = user.name
            callee = _callee(user) if name == "llvm.call" else None
            if callee == "free" and value != pointer or callee in frees_args:
                return False
            if name == "llvm.store" and use.operand_number == 0 or user.successors:
                return False
            if name in _NOT_DERIVED or name == "llvm.extractvalue" and not _holds_pointer(user.results[0].type):
                continue
            for result in user.results:
                if result not in seen:
                    seen.add(result)
                    todo.append(result)
    return True


def _holds_pointer(t: ir.Type) -> bool:
    """Whether a value of type ``t`` may hold a pointer (printing a type is slow: integers are answered first)."""
    return not isinstance(t, ir.IntegerType) and "ptr" in str(t)


def _closure(facts: dict[str, _Facts], seed: Callable[[_Facts], bool]) -> set[str]:
    """The functions for which ``seed`` holds, or which call one of them (directly or not)."""
    found = {name for name, f in facts.items() if seed(f)}
    changed = True
    while changed:
        changed = False
        for name, f in facts.items():
            if name not in found and any(callee in found for _, callee in f.calls):
                found.add(name)
                changed = True
    return found


# --- the module's additions ------------------------------------------------------------------------------------
def _append_text(module: ir.Module, text: str, declare_slot: bool = True) -> None:
    """Parse LLVM-dialect ``text`` in the module's context and move its ops into the module, but for the symbols it
    has already. For the parse, ``free`` is declared, and so is the error slot unless ``text`` defines it."""
    declarations = "llvm.func @free(!llvm.ptr)\n"
    if declare_slot:
        declarations += f"llvm.mlir.global external @{ERROR_GLOBAL}() {{addr_space = 0 : i32}} : {_SLOT_TYPE}\n"
    parsed = ir.Module.parse("module {\n" + declarations + text + "\n}", module.context)
    have = {_name(op.operation) for op in module.body.operations if "sym_name" in op.operation.attributes}
    for op in list(parsed.body.operations):
        if _name(op.operation) not in have:
            module.body.append(op.operation)


def _has_symbol(module: ir.Module, name: str) -> bool:
    return any("sym_name" in op.operation.attributes and _name(op.operation) == name for op in module.body.operations)


class _Messages:
    """The module's check messages, to which each allocation's is added (one per source location)."""

    def __init__(self, module: ir.Module):
        attrs = module.operation.attributes
        self.texts = [ir.StringAttr(a).value for a in ir.ArrayAttr(attrs[CHECKS_ATTR])] if CHECKS_ATTR in attrs else []
        self.ids: dict[str, int] = {}

    def check_id(self, op: ir.Operation) -> int:
        """The check id of the allocation ``op``: its message names the Relax binding it came from, when known."""
        place = where(op) if op.location.is_a_name() else ""  # (a parsed module's ops have file locations)
        message = MEMORY_CHECK_PREFIX + place
        if message not in self.ids:
            self.texts.append(message)
            self.ids[message] = len(self.texts)
        return self.ids[message]

    def store(self, module: ir.Module) -> None:
        module.operation.attributes[CHECKS_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(m) for m in self.texts])


# --- rewriting -------------------------------------------------------------------------------------------------
def _split(block: ir.Block, points: set[ir.Operation]) -> dict[ir.Operation, ir.Block]:
    """Split ``block`` after each op of ``points`` (in one pass: each op moves once); returns, per point, the new
    block that starts right after it."""
    rests: dict[ir.Operation, ir.Block] = {}
    target = block
    for op in list(block.operations):
        op = op.operation
        if target is not block:
            target.append(op)
        if op in points:
            target = rests[op] = target.create_after()
    return rests


def _bool(callee: str, operands: list) -> ir.Value:
    return llvm.CallOp(ir.IntegerType.get_signless(1), operands, [], [], callee=ir.FlatSymbolRefAttr.get(callee)).result


def _check_allocation(call: ir.Operation, check: int, rest: ir.Block, fail: ir.Block, fail_args: tuple = ()) -> None:
    """At the end of the block of the allocation ``call`` (split right after it): on to ``rest``, unless the pointer
    is NULL; then a cold block asks ``relax_mlir_allocation_failed``, which records a nonzero size as check
    ``check`` and says so: to ``fail`` (with ``fail_args``), else (NULL is an answer for 0 bytes) on to ``rest``."""
    block = call.block
    cold = block.region.blocks.append()
    with ir.InsertionPoint(block), call.location:
        null = llvm.ICmpOp(llvm.ICmpPredicate.eq, call.results[0], llvm.ZeroOp(_ptr()).result).result
    _branch(block, null, cold, rest)
    i64 = ir.IntegerType.get_signless(64)
    with ir.InsertionPoint(cold), call.location:
        size = call.operands[ALLOCATORS[_callee(call)]]
        failed = _bool(FAILED_FN, [size, llvm.ConstantOp(i64, ir.IntegerAttr.get(i64, check)).result])
        llvm.CondBrOp(failed, list(fail_args), [], fail, rest)


def _error_recorded() -> ir.Value:
    return _bool(SLOT_SET_FN, [])


def _branch(at: ir.Block, bad: ir.Value, fail: ir.Block, rest: ir.Block, fail_args: tuple = ()) -> None:
    """At the end of ``at``: to ``fail`` if ``bad``, else to ``rest`` (weighted as never failing)."""
    with ir.InsertionPoint(at):
        llvm.CondBrOp(bad, list(fail_args), [], fail, rest, branch_weights=ir.DenseI32ArrayAttr.get(list(_UNLIKELY)))


def _returned_types(func: ir.Operation) -> list[ir.Type]:
    """The types an ``llvm.return`` of ``func`` returns (none for a void function)."""
    if str(ir.TypeAttr(func.attributes["function_type"]).value).startswith("!llvm.func<void "):
        return []
    for block in func.regions[0].blocks:
        last = list(block.operations)[-1].operation
        if last.name == "llvm.return":
            return [v.type for v in last.operands]
    return []


def _top(op: ir.Operation, func: ir.Operation) -> ir.Operation:
    """The op of ``func``'s own blocks that holds ``op`` (``op`` itself if it is one)."""
    while op.parent != func:
        op = op.parent
    return op


class _Function:
    """The checks of one function: its exit on failure (``^fail``), the array ``held`` of what it frees there, the
    iteration ends of its parallel loops."""

    def __init__(self, facts: _Facts, frees_args: set[str], may_fail: set[str], messages: _Messages):
        self.func, self.facts, self.may_fail, self.messages = facts.func, facts, may_fail, messages
        self.body = self.func.regions[0]
        self.nested = [call for call in facts.allocations if not self._own(call)]
        #: the ops of the function's own blocks after which it may leave: allocations, calls of functions that may
        #: fail, region ops holding either
        self.points = {op: None for op in [c for c in facts.allocations if self._own(c)] + [
            _top(call, self.func) for call, callee in facts.calls if callee in may_fail] + [
            _top(call, self.func) for call in self.nested]}
        self._points_in: Optional[dict[ir.Block, list[ir.Operation]]] = None
        self.slots: dict[ir.Value, int] = {}  # an allocation's pointer -> its place in the array ``held``
        self.held: Optional[ir.Value] = None
        freed: dict[ir.Value, list[ir.Operation]] = {}
        for free in facts.frees:
            freed.setdefault(free.operands[0], []).append(free)
        # Only a function that frees a pointer it did not allocate, or calls one that may, can free an allocation
        # of its own as another value: only then is what derives from each allocation followed.
        careful = facts.frees_foreign or any(callee in frees_args for _, callee in facts.calls)
        for call in facts.allocations:
            frees = freed.get(call.results[0], [])
            if self._own(call) and frees and all(self._own(f) for f in frees) and (
                    not careful or _freed_here_only(call, frees_args)) and self._held_at_a_point(call, frees):
                self.slots[call.results[0]] = len(self.slots)
        self.null: Optional[ir.Value] = None  # NULL, made at the entry with the array
        self._fail: Optional[ir.Block] = None
        self._skips: dict[ir.Operation, ir.Block] = {}
        self.aborts = False

    def _held_at_a_point(self, call: ir.Operation, frees: list[ir.Operation]) -> bool:
        """Whether the function may leave (at one of its points) after the allocation ``call`` and before one of its
        ``frees``: only then does ``^fail`` need to free it. An allocation freed before anything else can fail (a
        row a loop allocates and frees, a buffer only kernels that cannot fail use) is not stored: a pointer stored
        to memory escapes, and LLVM then assumes less about the code that uses it."""
        ends = set(frees)
        todo, seen = [(call.block, call)], set()
        while todo:
            block, after = todo.pop()
            stopped = False
            for op in self._marked(block, ends):
                if after is not None and not after.is_before_in_block(op):
                    continue
                if op in ends:
                    stopped = True
                    break
                if op != call:
                    return True
            if not stopped:
                for successor in block.successors:
                    if successor not in seen:
                        seen.add(successor)
                        todo.append((successor, None))
        return False

    def _marked(self, block: ir.Block, ends: set[ir.Operation]) -> list[ir.Operation]:
        """The points and ``ends`` of ``block``, in order."""
        if self._points_in is None:
            self._points_in = {}
            for op in self.points:
                self._points_in.setdefault(op.block, []).append(op)
        ops = self._points_in.get(block, []) + [op for op in ends if op.block == block]
        return sorted(ops, key=functools.cmp_to_key(lambda a, b: 0 if a == b else -1 if a.is_before_in_block(b)
                                                     else 1))

    def _own(self, op: ir.Operation) -> bool:
        """Whether ``op`` is in the function's own blocks (not in a region of an op inside it)."""
        return op.parent == self.func

    def instrument(self) -> int:
        """Check every allocation of the function and every call or region op that may fail; returns how many
        allocations were checked."""
        self._make_slots()
        for free in self.facts.frees:
            if free.operands[0] in self.slots:
                with ir.InsertionPoint(free), free.location:  # it is freed: nothing for ^fail to free
                    self._hold(free.operands[0], self.null)
        points: dict[ir.Block, set[ir.Operation]] = {}
        for op in self.points:
            points.setdefault(op.block, set()).add(op)
        for call in self.nested:  # (before the split: it moves the region ops, not what is inside them)
            self._check_nested(call)
        for block, ops in points.items():
            for op, rest in _split(block, ops).items():
                self._check(op, rest)
        return len(self.facts.allocations)

    def _check(self, op: ir.Operation, rest: ir.Block) -> None:
        """At the end of ``op``'s block (``op`` last, ``rest`` after it): to ``^fail`` if ``op`` failed."""
        if _callee(op) not in ALLOCATORS:
            with ir.InsertionPoint(op.block), op.location:
                _branch(op.block, _error_recorded(), self.fail(), rest)
            return
        _check_allocation(op, self.messages.check_id(op), rest, self.fail())
        if op.results[0] in self.slots:
            with ir.InsertionPoint.at_block_begin(rest), op.location:
                self._hold(op.results[0], op.results[0])

    def _make_slots(self) -> None:
        """The array ``held`` of what ``^fail`` frees (one pointer an allocation), NULL at the function's entry."""
        if not self.slots:
            return
        i8, i64, ptr = ir.IntegerType.get_signless(8), ir.IntegerType.get_signless(64), _ptr()
        with ir.InsertionPoint.at_block_begin(self.body.blocks[0]), self.func.location:
            self.count = llvm.ConstantOp(i64, ir.IntegerAttr.get(i64, len(self.slots))).result
            self.held = llvm.AllocaOp(ptr, self.count, ptr, alignment=8).result
            self.null = llvm.ZeroOp(ptr).result
            size = llvm.ConstantOp(i64, ir.IntegerAttr.get(i64, 8 * len(self.slots))).result
            llvm.MemsetOp(self.held, llvm.ConstantOp(i8, ir.IntegerAttr.get(i8, 0)).result, size, False)

    def _hold(self, pointer: ir.Value, value: ir.Value) -> None:
        """At the insertion point: ``value`` (the allocation ``pointer`` or NULL) into its place in ``held``."""
        ptr = _ptr()
        at = llvm.GEPOp(ptr, self.held, [], ir.DenseI32ArrayAttr.get([self.slots[pointer]]), ir.TypeAttr.get(ptr), None)
        llvm.StoreOp(value, at.result)

    def fail(self) -> ir.Block:
        """``^fail``: free what the slots hold, return."""
        if self._fail is None:
            self._fail = self.body.blocks.append()
            with ir.InsertionPoint(self._fail), self.func.location:
                if self.slots:
                    llvm.CallOp(None, [self.held, self.count], [], [], callee=ir.FlatSymbolRefAttr.get(FREE_ALL_FN))
                result = _returned_types(self.func)
                llvm.ReturnOp(arg=llvm.ZeroOp(result[0]).result if result else None)
        return self._fail

    def _check_nested(self, call: ir.Operation) -> None:
        """An allocation inside a region op (a parallel region): end the loop iteration, or abort."""
        in_loop = call.parent.name == "omp.loop_nest"
        skip = self._skip(call.parent) if in_loop else None  # (first: it moves the loop body's first block)
        rest = _split(call.block, {call})[call]
        check = self.messages.check_id(call)
        if in_loop:
            _check_allocation(call, check, rest, skip)
            return
        self.aborts = True
        stop = call.block.region.blocks.append(ir.IntegerType.get_signless(64))
        _check_allocation(call, check, rest, stop, (call.operands[ALLOCATORS[_callee(call)]],))
        with ir.InsertionPoint(stop), call.location:
            llvm.CallOp(None, [stop.arguments[0]], [], [], callee=ir.FlatSymbolRefAttr.get(ABORT_FN))
            llvm.UnreachableOp()

    def _skip(self, loop: ir.Operation) -> ir.Block:
        """The block of ``loop`` (an ``omp.loop_nest``) that ends an iteration; made on first use, with a check of
        the slot at the start of every iteration (no thread starts one after a failure)."""
        if loop not in self._skips:
            region = loop.regions[0]
            skip = self._skips[loop] = region.blocks.append()
            with ir.InsertionPoint(skip), loop.location:
                ir.Operation.create("omp.yield")
            entry = region.blocks[0]
            rest = entry.create_after()
            for op in list(entry.operations):
                rest.append(op.operation)
            with ir.InsertionPoint(entry), loop.location:
                _branch(entry, _error_recorded(), skip, rest)
        return self._skips[loop]


def _ptr() -> ir.Type:
    return ir.Type.parse("!llvm.ptr")


def check_allocations(module: ir.Module, functions: Optional[set[str]] = None) -> int:
    """Check every allocation of ``module`` (LLVM dialect; see the module docstring), in place; returns how many
    were checked (0: the module allocates nothing and is left as it was). ``functions``: the only ones that may
    allocate, free or call (:func:`functions_to_check` before the lowering), else all."""
    with module.context, ir.Location.unknown():
        return _check_allocations(module, functions)


def _check_allocations(module: ir.Module, functions: Optional[set[str]]) -> int:
    if not any(_has_symbol(module, name) for name in ALLOCATORS) or _has_symbol(module, FAILED_FN):
        return 0  # nothing calls an allocator (no walk), or the module was checked already
    facts = _scan(module, functions)
    if not any(f.allocations for f in facts.values()):
        return 0
    may_fail = _closure(facts, lambda f: bool(f.allocations))
    frees_args = _closure(facts, lambda f: f.frees_foreign)
    if not _has_symbol(module, ERROR_GLOBAL):
        _append_text(module, _SLOT, declare_slot=False)
    _append_text(module, _HELPERS)
    messages = _Messages(module)
    count, aborts = 0, False
    for name, f in facts.items():
        if name in may_fail:
            checker = _Function(f, frees_args, may_fail, messages)
            count += checker.instrument()
            aborts = aborts or checker.aborts
    if aborts:
        _append_text(module, _ABORT)
    messages.store(module)
    return count
