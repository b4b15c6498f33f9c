"""Native compilation: an LLVM-dialect module to a shared library through LLVM's C API, on every core.

MLIR's ``ExecutionEngine`` compiles a module as one unit, on one core, holding Python's GIL. Here the module
(kernels already outlined, ``outline.py``) is split into as many parts as there are cores, functions balanced by
size; each part is translated to LLVM IR (``mlirTranslateModuleToLLVMIR``), optimised (``LLVMRunPasses``,
``default<O2>``) and turned into an object file (``LLVMTargetMachineEmitToMemoryBuffer``) in a thread of its own
(ctypes releases the GIL), started as soon as the part is cut out of the module; the system linker makes one
shared library of the objects, which is loaded from memory.
The same library is what the on-disk cache stores and ``export_library`` writes: a compiled module runs the same
code in the process that compiled it as in any process that loads it.

    compiled = NativeEngine(llvm_module, functions=["update_params", "predict"])
    compiled.raw_lookup("update_params")    # address of the packed wrapper _mlir_update_params(void **args)

Each part keeps its functions' bodies and declares the others' (a call across parts is resolved by the linker);
private functions and constant globals are copied into every part that uses them; mutable globals (the runtime
checks' error slot) are defined in part 0 and declared in the others. Every public function gets the packed
wrapper ``_mlir_<name>`` the ExecutionEngine would have generated (``args[i]`` points to argument ``i``; a result
is stored through ``args[n]``), so the call path is the same for both; a function of hundreds of arguments is made
internal and inlined into its wrapper (a call passing them, five a memref, made LLVM's instruction selection
quadratic: 32 s for a function returning 400 tensors, now 3.5 s).

Measured on the CNN's training module (Intel Xeon, AVX-512, 2 cores): LLVM -O2 and code generation 3.06 s in the
ExecutionEngine, 2.22 s outlined on one core, 1.29 s outlined on two. Off with ``RELAX_MLIR_NATIVE=0`` (the
ExecutionEngine compiles instead); unavailable without a C compiler driver to link with, or off x86-64/AArch64
Linux, where the ExecutionEngine is used after one warning. ``RELAX_MLIR_COMPILE_THREADS=N`` sets the number of
parts and threads (default: the cores this process may run on).
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import subprocess
import sys
import tempfile
import threading
import warnings
from typing import Callable, Iterable, Optional, Sequence

from mlir import ir

from .error_slot import ERROR_ADDRESS_FN

#: LLVM's optimisation pipeline, as ``opt -passes=`` spells it, by ExecutionEngine opt level.
PIPELINES = {0: "default<O0>", 1: "default<O1>", 2: "default<O2>", 3: "default<O3>"}
#: The pipeline's tuning (``LLVMPassBuilderOptionsSet<name>``): what MLIR's ExecutionEngine asks for (LLVM's C API
#: leaves the SLP vectorizer off by default). Measured on the CNN's training module (Intel Xeon, 2 cores): without
#: loop unrolling it compiles in 1.1 s instead of 1.7 (cnn-8), 1.3 s instead of 2.7 (cnn-28), but its steps are 9%
#: and 15% slower; unrolling only the kernels doing 90% of the work (by trip counts) kept half the cost and lost
#: most of the speed: unrolling stays on, limited to short scalar loop nests by ``loop_hints.py`` (which keeps the
#: speed at a fraction of the cost).
TUNING = {"LoopVectorization": True, "SLPVectorization": True, "LoopUnrolling": True, "LoopInterleaving": True}


class NativeError(RuntimeError):
    """The native path cannot compile this module here (the caller falls back to the ExecutionEngine)."""


# --- the C APIs --------------------------------------------------------------------------------------------------
class _API:
    """ctypes prototypes of the MLIR and LLVM C functions used, from the libraries MLIR's bindings loaded."""

    def __init__(self) -> None:
        import mlir._mlir_libs as libs

        capi_path = os.path.join(os.path.dirname(libs.__file__), "libMLIRPythonCAPI.so")
        llvm_path = self._loaded("libLLVM.so")
        if not os.path.exists(capi_path) or llvm_path is None:
            raise NativeError("MLIR's C API library or libLLVM.so is not where MLIR's bindings are")
        mlir_c, llvm = ctypes.CDLL(capi_path), ctypes.CDLL(llvm_path)
        vp, cp, sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t

        def fn(lib, name, restype, *argtypes):
            try:
                f = getattr(lib, name)
            except AttributeError:
                raise NativeError(f"{os.path.basename(lib._name)} has no {name}") from None
            f.restype, f.argtypes = restype, list(argtypes)
            return f

        self.register_translations = fn(mlir_c, "mlirRegisterAllLLVMTranslations", None, vp)
        self.translate = fn(mlir_c, "mlirTranslateModuleToLLVMIR", vp, vp, vp)
        self.context_create = fn(llvm, "LLVMContextCreate", vp)
        self.context_dispose = fn(llvm, "LLVMContextDispose", None, vp)
        self.dispose_module = fn(llvm, "LLVMDisposeModule", None, vp)
        self.default_triple = fn(llvm, "LLVMGetDefaultTargetTriple", vp)
        self.host_cpu = fn(llvm, "LLVMGetHostCPUName", vp)
        self.host_features = fn(llvm, "LLVMGetHostCPUFeatures", vp)
        self.dispose_message = fn(llvm, "LLVMDisposeMessage", None, vp)
        self.target_from_triple = fn(llvm, "LLVMGetTargetFromTriple", ctypes.c_int, cp, ctypes.POINTER(vp),
                                     ctypes.POINTER(vp))
        self.create_tm = fn(llvm, "LLVMCreateTargetMachine", vp, vp, cp, cp, cp, ctypes.c_int, ctypes.c_int,
                            ctypes.c_int)
        self.dispose_tm = fn(llvm, "LLVMDisposeTargetMachine", None, vp)
        self.create_layout = fn(llvm, "LLVMCreateTargetDataLayout", vp, vp)
        self.dispose_layout = fn(llvm, "LLVMDisposeTargetData", None, vp)
        self.set_layout = fn(llvm, "LLVMSetModuleDataLayout", None, vp, vp)
        self.set_triple = fn(llvm, "LLVMSetTarget", None, vp, cp)
        self.pb_options = fn(llvm, "LLVMCreatePassBuilderOptions", vp)
        self.dispose_pb_options = fn(llvm, "LLVMDisposePassBuilderOptions", None, vp)
        self.tuning = {name: fn(llvm, f"LLVMPassBuilderOptionsSet{name}", None, vp, ctypes.c_int) for name in TUNING}
        self.run_passes = fn(llvm, "LLVMRunPasses", vp, vp, cp, vp, vp)
        self.error_message = fn(llvm, "LLVMGetErrorMessage", vp, vp)
        self.dispose_error_message = fn(llvm, "LLVMDisposeErrorMessage", None, vp)
        self.emit = fn(llvm, "LLVMTargetMachineEmitToMemoryBuffer", ctypes.c_int, vp, vp, ctypes.c_int,
                       ctypes.POINTER(vp), ctypes.POINTER(vp))
        self.buffer_start = fn(llvm, "LLVMGetBufferStart", vp, vp)
        self.buffer_size = fn(llvm, "LLVMGetBufferSize", sz, vp)
        self.dispose_buffer = fn(llvm, "LLVMDisposeMemoryBuffer", None, vp)
        arches = {"x86_64": "X86", "amd64": "X86", "aarch64": "AArch64", "arm64": "AArch64"}
        arch = arches.get(platform.machine().lower())
        if arch is None or not sys.platform.startswith("linux"):
            raise NativeError(f"native compilation supports x86-64 and AArch64 Linux, not {platform.machine()} "
                              f"{sys.platform}")
        for part in ("TargetInfo", "Target", "TargetMC", "AsmPrinter"):
            fn(llvm, f"LLVMInitialize{arch}{part}", None)()
        self.triple = self._string(self.default_triple())
        self.cpu = self._string(self.host_cpu())
        self.features = self._string(self.host_features())
        target, error = ctypes.c_void_p(), ctypes.c_void_p()
        if self.target_from_triple(self.triple.encode(), ctypes.byref(target), ctypes.byref(error)):
            raise NativeError(f"LLVM has no target for {self.triple}: {self._string(error.value)}")
        self.target = target.value

    @staticmethod
    def _loaded(name: str) -> Optional[str]:
        """The path of the shared library ``name`` this process has loaded (the one MLIR's bindings use)."""
        try:
            with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
                for line in maps:
                    path = line.rsplit(None, 1)[-1]
                    if os.path.basename(path) == name:
                        return path
        except OSError:
            pass
        return None

    def _string(self, address: Optional[int]) -> str:
        if not address:
            return ""
        text = ctypes.string_at(address).decode("utf-8", "replace")
        self.dispose_message(address)
        return text

    def error_text(self, error: int) -> str:
        """The message of an ``LLVMErrorRef`` (which this consumes)."""
        message = self.error_message(error)
        text = ctypes.string_at(message).decode("utf-8", "replace") if message else "unknown error"
        if message:
            self.dispose_error_message(message)
        return text

    def target_machine(self, opt_level: int) -> int:
        # codegen level = the opt level; relocation model PIC (a shared library); the default code model.
        # The host's features as LLVM reports them, its tuning included: on Intel server cores LLVM's loop and SLP
        # vectorizers prefer 256-bit vectors (the schedules' explicit vectors are 512-bit anyway). Lifting that
        # ("-prefer-256-bit", 2-core Intel Xeon, steps A/B in one process): MLP steps -1..-4%, the 28x28 CNN's +2%,
        # cold builds +3%; asking for whole 512-bit vectors per loop (trip counts a multiple of 16): nothing
        # measurable. Left as LLVM tunes it.
        return self.create_tm(self.target, self.triple.encode(), self.cpu.encode(), self.features.encode(),
                              min(opt_level, 3), 2, 0)


_API_LOCK = threading.Lock()
_API_INSTANCE: Optional[_API] = None
_WARNED = False


def _api() -> _API:
    global _API_INSTANCE
    with _API_LOCK:
        if _API_INSTANCE is None:
            _API_INSTANCE = _API()
        return _API_INSTANCE


def compile_threads() -> int:
    """Threads (and parts) a compile uses: ``$RELAX_MLIR_COMPILE_THREADS``, else the cores of this process."""
    forced = os.environ.get("RELAX_MLIR_COMPILE_THREADS")
    if forced:
        if not forced.isdigit() or int(forced) < 1:
            raise ValueError(f"RELAX_MLIR_COMPILE_THREADS must be a positive integer, got {forced!r}")
        return int(forced)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def enabled() -> bool:
    """Whether compiles take this path: not turned off (``RELAX_MLIR_NATIVE=0``) and a linker is there."""
    from .library import find_linker

    return os.environ.get("RELAX_MLIR_NATIVE", "1") != "0" and find_linker() is not None


def warn_fallback(reason: str) -> None:
    """Say once per process why the ExecutionEngine compiles instead."""
    global _WARNED
    if not _WARNED:
        _WARNED = True
        warnings.warn(f"relax_mlir: native compilation unavailable ({reason}); using MLIR's ExecutionEngine "
                      "(one core)", RuntimeWarning, stacklevel=3)


# --- splitting the module ----------------------------------------------------------------------------------------
def _name(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


_LOCAL = ("#llvm.linkage<private>", "#llvm.linkage<internal>")


def _is_definition(op: ir.Operation) -> bool:
    return op.name == "llvm.func" and len(op.regions[0].blocks) > 0


def _linkage(op: ir.Operation) -> str:
    return str(op.attributes["linkage"]) if "linkage" in op.attributes else "#llvm.linkage<external>"


#: A function of at least this many ops in its own blocks is sized by them alone (``_size``).
SIZE_BY_TOP_LEVEL_FROM = 200


def _size(op: ir.Operation) -> int:
    """How many ops ``op`` holds: counted in its own blocks (the bindings count a block's ops without creating
    them), and only when that is under :data:`SIZE_BY_TOP_LEVEL_FROM` by a walk of every nested region too (a
    kernel whose loops run on OpenMP threads has a few ops around one ``omp.parallel`` holding the work). A walk
    calls Python once per op: 9 ms for the tutorial MLP's 7700 LLVM-dialect ops, the block counts 1 ms."""
    top = sum(len(block.operations) for region in op.regions for block in region.blocks)
    if top >= SIZE_BY_TOP_LEVEL_FROM:
        return top
    count = [0]

    def visit(_op: ir.Operation) -> ir.WalkResult:
        count[0] += 1
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return count[0]


#: What a function costs LLVM apart from its ops, in ops. First fitted over the CNN's 129 kernels compiled one by
#: one (2-core Intel Xeon), 12 ms + 0.011 ms an op: 1000. Once the convolutions became direct vector code (kernels
#: of a few large unrolled bodies), the two parts of the 8x8 CNN came out 0.45 and 0.60 s with 1000 and 0.52 and
#: 0.53 s with 100 (0.48 and 0.57 with 200; cold build 1.51 -> 1.42 s, median of three; the 28x28 CNN 1.81 -> 1.69 s
#: at 100-300; the MLP the same).
FUNCTION_COST_OPS = 100


#: What cutting a part out of the module costs the thread that cuts them all, in ops of LLVM's time (half of the
#: tutorial MLP's module, 6 ms, against LLVM's 0.06 ms an op; 2-core Intel Xeon). ``compile_objects`` cuts
#: part ``k - 1`` first and part 0 last, each part's compile starting once it is cut: a part's load starts at the
#: cuts before it, so that the parts end together.
CUT_COST_OPS = 100


def partition(module: ir.Module, parts: int) -> list[list[str]]:
    """The non-private function definitions of ``module`` in ``parts`` groups of about equal cost (ops plus
    ``FUNCTION_COST_OPS`` a function, plus ``CUT_COST_OPS`` for each part cut before it starts; largest first,
    each to the cheapest group); the error accessor always in group 0. Empty groups are dropped."""
    defs = [op.operation for op in module.body.operations
            if _is_definition(op.operation) and _linkage(op.operation) not in _LOCAL]
    sized = sorted(((_size(op) + FUNCTION_COST_OPS, _name(op)) for op in defs), key=lambda t: (-t[0], t[1]))
    groups: list[list[str]] = [[] for _ in range(max(1, parts))]
    loads = [CUT_COST_OPS * (len(groups) - k if k else len(groups)) for k in range(len(groups))]
    for size, name in sized:
        k = 0 if name == ERROR_ADDRESS_FN else loads.index(min(loads))
        groups[k].append(name)
        loads[k] += size
    return [g for g in groups if g]


def _declaration_attributes(op: ir.Operation, drop: Iterable[str] = ()) -> dict:
    dropped = set(drop)
    return {name: op.attributes[name] for name in op.attributes if name not in dropped}


def _part(module: ir.Module, keep: set[str], first: bool) -> ir.Operation:
    """A detached ``builtin.module`` op holding what one part of ``module`` needs: the public functions in
    ``keep`` and every private one and constant global, copied; every other function declared; mutable globals
    defined in the ``first`` part only and declared in the others. Only what is kept is cloned (cloning the whole
    module for each part and erasing the other bodies cost 4-6 ms a part of the tutorial MLP's build)."""
    source = module.operation
    with module.context, source.location:
        part = ir.Operation.create("builtin.module", regions=1,
                                   attributes={name: source.attributes[name] for name in source.attributes})
        with ir.InsertionPoint(part.regions[0].blocks.append()):
            external = ir.Attribute.parse("#llvm.linkage<external>")
            for op in [o.operation for o in source.regions[0].blocks[0].operations]:
                if _is_definition(op) and _name(op) not in keep and _linkage(op) not in _LOCAL:
                    ir.Operation.create(op.name, attributes=_declaration_attributes(op), regions=1, loc=op.location)
                elif op.name == "llvm.mlir.global" and "constant" not in op.attributes:
                    # mutable state (the error slot): one copy, in part 0, that every part refers to
                    if first:
                        op.clone().attributes["linkage"] = external
                    else:
                        attributes = dict(_declaration_attributes(op, drop=("value",)), linkage=external)
                        ir.Operation.create(op.name, attributes=attributes, regions=len(op.regions),
                                            loc=op.location)
                else:
                    op.clone()
    return part


def _append_packed_wrappers(part: ir.Operation, names: Sequence[str],
                            called: Optional[Callable[[], set[str]]] = None) -> None:
    """Add ``_mlir_<name>(ptr)`` for each function ``name`` defined in ``part``: it loads argument ``i`` through
    ``args[i]``, calls the function and stores a result through ``args[n]``."""
    body = part.regions[0].blocks[0]
    funcs = {_name(op.operation): op.operation for op in body.operations if _is_definition(op.operation)}
    text = []
    for name in names:
        func = funcs.get(name)
        if func is None:
            continue
        types = [str(a.type) for a in func.regions[0].blocks[0].arguments]
        ftype = str(ir.TypeAttr(func.attributes["function_type"]).value)  # !llvm.func<void (ptr, i64)>
        result = ftype[len("!llvm.func<"):].split(" (", 1)[0].strip()
        result = None if result == "void" else ("!llvm.ptr" if result == "ptr" else result)
        # a declaration of the callee, for the wrapper's text to verify (only the wrapper is moved into the part)
        text.append(f"llvm.func @{name}({', '.join(types)})" + (f" -> {result}" if result else ""))
        lines = [f"llvm.func @_mlir_{name}(%args: !llvm.ptr) {{"]
        for i, t in enumerate(types):
            lines += [f"  %g{i} = llvm.getelementptr %args[{i}] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr",
                      f"  %p{i} = llvm.load %g{i} : !llvm.ptr -> !llvm.ptr",
                      f"  %a{i} = llvm.load %p{i} : !llvm.ptr -> {t}"]
        call_args = ", ".join(f"%a{i}" for i in range(len(types)))
        signature = f"({', '.join(types)}) -> {result or '()'}"
        if result is None:
            lines.append(f"  llvm.call @{name}({call_args}) : {signature}")
        else:
            n = len(types)
            lines += [f"  %r = llvm.call @{name}({call_args}) : {signature}",
                      f"  %gr = llvm.getelementptr %args[{n}] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr",
                      "  %pr = llvm.load %gr : !llvm.ptr -> !llvm.ptr",
                      f"  llvm.store %r, %pr : {result}, !llvm.ptr"]
        lines += ["  llvm.return", "}"]
        text.append("\n".join(lines))
    if not text:
        return
    wrappers = ir.Module.parse("module {\n" + "\n".join(text) + "\n}", part.context)
    for op in list(wrappers.body.operations):
        if _is_definition(op.operation):
            body.append(op.operation)
    many = [n for n in names if n in funcs and len(funcs[n].regions[0].blocks[0].arguments) > INLINE_FROM_ARGUMENTS]
    if many and called is not None:
        _inline_into_wrappers(part, many, called())


def called_functions(module: ir.Module) -> set[str]:
    """The names of the functions some ``llvm.call`` of ``module`` calls (one walk over the whole module, before
    it is split: a caller may end up in another part)."""
    called: set[str] = set()

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "llvm.call" and "callee" in op.attributes:
            called.add(ir.FlatSymbolRefAttr(op.attributes["callee"]).value)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return called


#: A public function of more arguments than this is compiled inside its wrapper (``_inline_into_wrappers``). Fewer
#: stay apart: inlined, the training steps of the MLPs ran 3-4% slower (A/B in one process, 2-core Intel Xeon; a
#: step's function takes about 100).
INLINE_FROM_ARGUMENTS = 256


def _inline_into_wrappers(part: ir.Operation, names: Sequence[str], called: set[str]) -> None:
    """Make each of the wrapped functions ``names`` (those of more than ``INLINE_FROM_ARGUMENTS`` arguments) that
    nothing but its wrapper calls (``called``: every callee of the module) internal and always inlined: LLVM then
    compiles one function that reads its arguments from the packed array, not a wrapper passing hundreds of
    arguments to a function taking them (5 a memref: a function returning 200 tensors took 1005, and LLVM's
    instruction selection of that call and of the arguments' entry block was 2.1 of its 2.7 s). Every caller (the
    runtime, a loaded library) looks up the wrappers ``_mlir_<name>``."""
    wanted = set(names) - called
    for op in part.regions[0].blocks[0].operations:
        op = op.operation
        if _is_definition(op) and _name(op) in wanted:
            op.attributes["linkage"] = ir.Attribute.parse("#llvm.linkage<internal>", part.context)
            op.attributes["always_inline"] = ir.UnitAttr.get(part.context)


# --- compiling ---------------------------------------------------------------------------------------------------
def _translate(api: _API, part: ir.Operation, opt_level: int) -> tuple[int, int]:
    """``part`` (a detached LLVM-dialect module) as an LLVM module in a context of its own, for the host: the
    handles ``(module, context)``, which the caller disposes of. Runs in a part's thread: the MLIR context is only
    read, and ctypes releases the GIL."""
    context = api.context_create()
    handle = api.translate(_capsule_pointer(part._CAPIPtr, b"mlir.ir.Operation._CAPIPtr"), context)
    if not handle:
        api.context_dispose(context)
        raise NativeError("translating the module to LLVM IR failed (MLIR printed why on stderr)")
    api.set_triple(handle, api.triple.encode())
    tm = api.target_machine(opt_level)
    layout = api.create_layout(tm)
    api.set_layout(handle, layout)
    api.dispose_layout(layout)
    api.dispose_tm(tm)
    return handle, context


def _compile_part(api: _API, part: ir.Operation, opt_level: int, out: list, index: int) -> None:
    """Translate, optimise and emit one part (runs in a thread of its own: every C call releases the GIL); the
    object file's bytes, or the exception, go to ``out[index]``."""
    try:
        handle, context = _translate(api, part, opt_level)
    except NativeError as err:
        out[index] = err
        return
    tm = api.target_machine(opt_level)
    try:
        options = api.pb_options()
        for name, value in TUNING.items():
            api.tuning[name](options, int(value))
        error = api.run_passes(handle, PIPELINES[opt_level].encode(), tm, options)
        api.dispose_pb_options(options)
        if error:
            out[index] = NativeError(f"LLVM's passes failed: {api.error_text(error)}")
            return
        buffer, message = ctypes.c_void_p(), ctypes.c_void_p()
        if api.emit(tm, handle, 1, ctypes.byref(message), ctypes.byref(buffer)):
            out[index] = NativeError(f"LLVM code generation failed: {api._string(message.value)}")
            return
        out[index] = ctypes.string_at(api.buffer_start(buffer), api.buffer_size(buffer))
        api.dispose_buffer(buffer)
    finally:
        api.dispose_tm(tm)
        api.dispose_module(handle)
        api.context_dispose(context)


def compile_objects(module: ir.Module, functions: Sequence[str], opt_level: int = 2,
                    threads: Optional[int] = None) -> list[bytes]:
    """Object files (ELF bytes) for ``module`` (LLVM dialect, not modified), one per part, compiled on
    ``threads`` threads (default: :func:`compile_threads`). ``functions`` get packed wrappers.

    Each part is cut out of the module (a clone) in this thread, which holds the GIL, and translated and compiled
    in a thread of its own, started at once: the last parts' cutting overlaps the first ones' compiling. This
    thread compiles part 0 itself, cut last."""
    api = _api()
    if opt_level not in PIPELINES:
        raise ValueError(f"native: opt_level must be 0-3, got {opt_level!r}")
    threads = compile_threads() if threads is None else threads
    wrapped = list(functions) + [ERROR_ADDRESS_FN]
    groups = partition(module, threads)
    # the module's callees, walked for once, and only if a function is large enough to inline
    called = functools.cache(lambda: called_functions(module))
    api.register_translations(_capsule_pointer(module.context._CAPIPtr, b"mlir.ir.Context._CAPIPtr"))
    out: list = [None] * len(groups)
    parts: list[ir.Operation] = []
    workers: list[threading.Thread] = []
    try:
        for k in reversed(range(len(groups))):
            part = _part(module, set(groups[k]), first=(k == 0))
            parts.append(part)
            _append_packed_wrappers(part, [n for n in wrapped if n in groups[k]], called)
            if k:
                worker = threading.Thread(target=_compile_part, args=(api, part, opt_level, out, k), daemon=True)
                worker.start()
                workers.append(worker)
            else:
                _compile_part(api, part, opt_level, out, 0)
    finally:
        for worker in workers:
            worker.join()
        for part in parts:
            part.erase()
    for i, result in enumerate(out):
        if isinstance(result, Exception):
            raise result
        if result is None:  # its thread died of something unforeseen (its traceback was printed)
            raise NativeError(f"part {i} of the module was not compiled")
    return out


def _capsule_pointer(capsule: object, name: bytes) -> int:
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get(capsule, name)


class NativeEngine:
    """What ``CompiledModule`` needs of an engine, from a library linked of natively compiled objects:
    ``raw_lookup(name)`` (the packed wrapper's address) and ``dump_to_object_file(path)``; ``elf`` is the
    linked library's bytes (what the on-disk cache and ``export_library`` write)."""

    def __init__(self, module: ir.Module, functions: Sequence[str], opt_level: int = 2,
                 threads: Optional[int] = None):
        from .library import SharedLibrary, _dlopen_bytes, libraries_for, link_objects

        self.objects = compile_objects(module, functions, opt_level, threads)
        libraries, memref_copy = libraries_for(module)
        self.elf = link_objects(self.objects, libraries, memref_copy)
        self.library = SharedLibrary(_dlopen_bytes(self.elf, "relax-mlir:compiled"), "<compiled>", self.elf)

    def raw_lookup(self, name: str) -> int:
        return self.library.raw_lookup(name)

    def dump_to_object_file(self, path: str) -> None:
        """One relocatable object of every part (``cc -r``), as the ExecutionEngine's dump gives."""
        from .library import LinkError, find_linker, write_objects

        with tempfile.TemporaryDirectory(prefix="relax-mlir-obj-") as tmp:
            paths = write_objects(tmp, self.objects)
            done = subprocess.run([find_linker() or "cc", "-r", "-nostdlib", "-o", path, *paths],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                raise LinkError(f"combining the object files failed: {done.stderr.strip()}")
