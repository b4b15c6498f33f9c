"""Compile linalg-on-tensors MLIR with the ExecutionEngine and call it on NumPy arrays.

The calling convention (one per function, fixed at compile time):

* bufferization turns every tensor result into an *out-parameter*: the function is
  ``@f(%in0: memref, ..., %out0: memref, ...)`` and returns nothing, so no buffer ``malloc``ed by compiled code
  ever reaches Python; the runtime allocates each output with ``numpy.empty`` (or takes ``out=``);
* the engine's packed wrapper ``_mlir_f(void **args)`` takes one pointer per *field* of every memref
  descriptor (allocated, aligned, offset, sizes..., strides...). All descriptors live in one preallocated
  ``int64`` buffer and the ``void*`` array pointing into it is built once, so a call only writes each array's
  data pointer (and, for dynamic shapes, its sizes and strides) and makes one ctypes call;
* every argument is checked before native code sees it (count, dtype, shape, symbols bound consistently,
  C-contiguity, alignment) under the one argument policy of ``arguments.py`` (``docs/arguments.md``): an array
  that fits is passed by pointer, never copied and never written; one that converts without changing a value
  (a list, a Fortran-ordered array, int32 labels for int64, float64 data for float32) is copied once; anything
  else is refused with an ``ArgumentError``.

Example::

    mod = compile_module(LINALG_TEXT)
    y = mod.main(x, w)                       # or mod["main"](x, w), or mod.main(x, w, out=y)
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from .arguments import ArgumentError, conform, out_problem
from .callpath import CallPlan, _native, data_address, write_layout
from .heap import keep_freed_memory
from .error_slot import ERROR_ADDRESS_FN, check_messages, find_slot, slot_lock, take_error
from .signature import (FunctionSignature, TensorSpec, is_symbol, memory_limit, scratch_bytes, shape_evaluator,
                        signature_from_func)

if TYPE_CHECKING:  # MLIR is imported where used: the call path runs without it
    from mlir import ir
    from mlir.execution_engine import ExecutionEngine

    from .pipeline import PipelineOptions

__all__ = ["ArgumentError", "CompiledFunction", "CompiledModule", "compile_module", "runner_library_dir"]


# --- the runner libraries ------------------------------------------------------------------------------------
def runner_library_dir() -> str:
    """The ``mlir/lib`` directory of the installed bindings (``libmlir_c_runner_utils.so`` and friends); found
    without importing them."""
    import importlib.util

    spec = importlib.util.find_spec("mlir")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("MLIR's Python bindings (the mlir package of xtc-mlir-python-bindings) are not installed")
    return os.path.join(list(spec.submodule_search_locations)[0], "lib")


_RUNNER_LIBS = ("libmlir_c_runner_utils.so", "libmlir_runner_utils.so", "libmlir_float16_utils.so")


def _external_symbols(llvm_module: ir.Module) -> list[str]:
    from mlir import ir  # lazily, as every MLIR import here: CompiledFunction also runs code loaded without MLIR

    names: list[str] = []
    for op in llvm_module.body.operations:
        if op.operation.name == "llvm.func" and len(op.operation.regions[0].blocks) == 0:
            names.append(ir.StringAttr(op.operation.attributes["sym_name"]).value)
    return names


def find_shared_libs(llvm_module: ir.Module) -> list[str]:
    """The runner libraries the module needs: those defining an external symbol this process lacks.

    Raises RuntimeError naming any symbol that nothing defines (the engine would fail with no reason)."""
    process = ctypes.CDLL(None)
    missing = [s for s in _external_symbols(llvm_module) if not hasattr(process, s)]
    libs: list[str] = []
    for lib in _RUNNER_LIBS:
        if not missing:
            break
        path = os.path.join(runner_library_dir(), lib)
        if os.path.exists(path):
            handle = ctypes.CDLL(path)
            found = [s for s in missing if hasattr(handle, s)]
            if found:
                libs.append(path)
                missing = [s for s in missing if s not in found]
    if missing:
        raise RuntimeError(f"compiled code calls undefined functions: {', '.join(missing)}")
    return libs


# --- one compiled function -----------------------------------------------------------------------------------
def _shape_text(shape: Sequence[Any]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


class CompiledFunction:
    """A compiled function called with NumPy arrays; returns one array, a tuple of them, or None.

    ``f(*args)`` allocates the outputs; ``f(*args, out=(y,))`` writes into preallocated ones (checked like the
    inputs, and not allowed to overlap them). Calls of one function are serialized by a lock: the descriptor
    buffer is shared, and ctypes releases the GIL during the call.

    The common call, arrays that need nothing, goes through the signature's ``CallPlan`` (``callpath.py``: one
    writer per parameter, made once, the data pointer through the buffer protocol); anything else, and every
    error, through the general route, which applies the argument policy. Both write the same descriptors.
    """

    def __init__(self, signature: FunctionSignature, address: int, owner: Any) -> None:
        self.signature = signature
        self._owner = owner  # keeps the ExecutionEngine (and so the code) alive
        self._fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)
        self._address = address
        specs = signature.params + signature.results
        self._bases, n = [], 0
        for spec in specs:
            self._bases.append(n)
            n += 3 + 2 * len(spec.shape)
        self._buf = (ctypes.c_int64 * max(n, 1))()
        buf_addr = ctypes.addressof(self._buf)
        # argv[i] points at descriptor field i, except that a memref's allocated-pointer field is read from its
        # aligned-pointer slot: one store sets both (the callee never frees an argument or a result).
        fields = list(range(n))
        for base in self._bases:
            fields[base] = base + 1
        self._argv = (ctypes.c_void_p * max(n, 1))(*[buf_addr + 8 * i for i in fields])
        self._argv_address = ctypes.addressof(self._argv)  # (call_scanning passes it to the native call)
        self._error_slot = getattr(owner, "error_slot", None)
        # a module with runtime checks: its functions share one error slot, so they share its lock
        self._lock = slot_lock(self._error_slot) if self._error_slot is not None else threading.Lock()
        self._static = signature.is_static
        self._result_shapes = [shape_evaluator(r.shape) for r in signature.results]
        self._param_checks = [shape_evaluator(p.shape) for p in signature.params]
        for spec, base in zip(specs, self._bases):
            write_layout(self._buf, base, [d if isinstance(d, int) else 0 for d in spec.shape])
        self._plan = CallPlan(signature, self._bases, self._buf)
        self._fast = self._plan.usable
        # The function's own tensors against the memory there is, before any code runs (compiled code checks each
        # allocation too, alloc_checks.py, but only once it is made): static sizes once, here; sizes the arguments
        # bind at every call, through the general route.
        self._scratch = scratch_bytes(signature.scratch) if signature.scratch else None
        self._too_large: Optional[str] = None
        if self._scratch is not None and all(isinstance(d, int) for t in signature.scratch for d in t.shape):
            self._too_large, self._scratch = self._memory_problem({}), None
        if self._too_large or self._scratch is not None:
            self._fast = False

    def __repr__(self) -> str:
        sig = self.signature
        params = ", ".join(f"{p.name}: {p.describe()}" for p in sig.params)
        results = ", ".join(r.describe() for r in sig.results)
        return f"<CompiledFunction {sig.name}({params}) -> ({results})>"

    def __call__(self, *args: Any, out: Sequence[np.ndarray] | np.ndarray | None = None) -> Any:
        if self._fast and len(args) == self._plan.n_params:
            with self._lock:
                outs = self._plan.run(args, out)
                if outs is not None:
                    self._fn(self._argv)
                    if self._error_slot is not None and self._error_slot[0]:
                        self._raise_check()
                    return outs[0] if len(outs) == 1 else tuple(outs) if outs else None
        return self._call_general(args, out)

    def call_scanning(self, args: tuple, out: tuple, threads: int) -> Optional[bool]:
        """``self(*args, out=out)`` and then whether every floating result is finite, in one native call, for
        arguments and outs that need nothing (the native plan's exact checks, no overlap); the Trainer's step.
        ``threads``: the threads a large scan may be split across (``nan_policy.FiniteCheck``), 0 for no scan
        (the answer is then True). None when something does not fit or the native module is absent: nothing was
        called, and the caller takes the checked route."""
        plan = self._plan
        if not plan.native_scan or not self._fast:
            return None
        with self._lock:
            finite = _native.call_into(plan.native, args, plan.buf_address, out, self._address,
                                       self._argv_address, threads)
            if finite is not None and self._error_slot is not None and self._error_slot[0]:
                self._raise_check()
        return finite

    def _pack(self, outs: list[np.ndarray]) -> Any:
        if len(outs) == 1:
            return outs[0]
        return tuple(outs) if outs else None

    def _call_general(self, args: Sequence[Any], out: Any) -> Any:
        args, env = self._check_params(args)
        problem = self._too_large or (self._memory_problem(env) if self._scratch is not None else None)
        if problem:
            raise MemoryError(problem)
        outs = self._outputs(env, out, args)
        arrays = list(args) + outs
        with self._lock:
            for a, base in zip(arrays, self._bases):
                self._buf[base + 1] = data_address(a)
                if not self._static:
                    write_layout(self._buf, base, a.shape)
            self._fn(self._argv)
            if self._error_slot is not None and self._error_slot[0]:
                self._raise_check()
        return self._pack(outs)

    def _memory_problem(self, env: dict[str, int]) -> Optional[str]:
        """What is wrong when one of the function's own tensors needs more memory than an allocation can get."""
        need, name = self._scratch(env)
        limit = memory_limit()
        if need <= limit:
            return None
        sizes = f" with {', '.join(f'{k} = {v}' for k, v in env.items())}" if env else ""
        return (f"{self.signature.name}: its tensor {name!r} would take {need / 2**30:.1f} GiB{sizes}, more than "
                f"one allocation can get here ({limit / 2**30:.1f} GiB of memory and swap); nothing was run")

    def _raise_check(self) -> None:
        """Raise the violation a runtime check recorded (``error_slot.py``); called with the lock held, right
        after the call, whose results are discarded."""
        raise take_error(self._error_slot, self._owner.check_messages, self.signature.name)

    # --- validation (the slow path, also the source of every error message) ---
    def _where(self, i: int, kind: str = "parameter") -> str:
        spec = self.signature.params[i] if kind == "parameter" else self.signature.results[i]
        label = f"out[{i}] (result {spec.name!r})" if kind == "out" else f"parameter {spec.name!r} (#{i})"
        return f"{self.signature.name}: {label}"

    def _check_params(self, args: Sequence[Any]) -> tuple[list[np.ndarray], dict[str, int]]:
        """The arguments under the argument policy (``arguments.py``: converted where that changes no value,
        else refused) and the sizes their shapes bind."""
        sig = self.signature
        if len(args) != len(sig.params):
            names = ", ".join(p.name for p in sig.params)
            raise ArgumentError(f"{sig.name}: expected {len(sig.params)} argument"
                                f"{'' if len(sig.params) == 1 else 's'} ({names}), got {len(args)}")
        errors: list[str] = []
        env: dict[str, int] = {}
        origin: dict[str, str] = {}
        arrays: list[np.ndarray] = []
        for i, (a, spec) in enumerate(zip(args, sig.params)):
            a, problem = conform(a, spec.dtype)
            problem = problem or _shape_problem(a, spec.shape) or self._bind(a, spec, env, origin, i)
            if problem:
                errors.append(f"{self._where(i)}: {problem}")
            arrays.append(a)
        args = arrays
        if not errors:  # expressions over symbols in parameter shapes are checked once every symbol is bound
            for i, (a, spec, shape_of) in enumerate(zip(args, sig.params, self._param_checks)):
                if not all(isinstance(d, int) or is_symbol(d) for d in spec.shape) and a.shape != shape_of(env):
                    errors.append(f"{self._where(i)}: expected shape {_shape_text(spec.shape)} = "
                                  f"{_shape_text(shape_of(env))}, got {_shape_text(a.shape)}")
        if errors:
            raise ArgumentError("; ".join(errors))
        return args, env

    def _bind(self, a: np.ndarray, spec: TensorSpec, env: dict[str, int], origin: dict[str, str], i: int) -> str:
        for axis, (d, got) in enumerate(zip(spec.shape, a.shape)):
            if is_symbol(d):
                if d in env and env[d] != got:
                    return (f"dimension {axis} is {d!r} = {env[d]} (bound by {origin[d]}), got {got} "
                            f"in shape {_shape_text(a.shape)}")
                if d not in env:
                    env[d], origin[d] = got, f"parameter {spec.name!r} (#{i})"
        return ""

    def _outputs(self, env: dict[str, int], out: Any, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        shapes = [f(env) for f in self._result_shapes]
        if out is None:
            for shape, spec in zip(shapes, self.signature.results):
                if any(d < 0 for d in shape):
                    raise ArgumentError(f"{self.signature.name}: result {spec.name!r} would have the negative "
                                        f"shape {_shape_text(shape)} ({_shape_text(spec.shape)} with {env})")
            return [np.empty(shape, spec.dtype) for shape, spec in zip(shapes, self.signature.results)]
        if not isinstance(out, (np.ndarray, list, tuple)):
            raise ArgumentError(f"{self.signature.name}: out= takes an array or a list or tuple of {len(shapes)} "
                                f"array(s), one a result in order, got {type(out).__name__}")
        outs = [out] if isinstance(out, np.ndarray) else list(out)
        if len(outs) != len(shapes):
            raise ArgumentError(f"{self.signature.name}: out= needs {len(shapes)} arrays, got {len(outs)}")
        errors = []
        for i, (o, shape, spec) in enumerate(zip(outs, shapes, self.signature.results)):
            problem = out_problem(o, shape, spec.dtype)
            if problem:
                errors.append(f"{self._where(i, 'out')}: {problem}")
        errors += _overlaps(self.signature, args, outs)
        if errors:
            raise ArgumentError("; ".join(errors))
        return outs


def _shape_problem(a: np.ndarray, shape: tuple[Any, ...]) -> str:
    """What is wrong with ``a``'s rank or static dims (symbols are bound by ``_bind``)."""
    if a.ndim != len(shape) or any(isinstance(d, int) and d != g for d, g in zip(shape, a.shape)):
        return f"expected shape {_shape_text(shape)}, got {_shape_text(a.shape)}"
    return ""


def _overlaps(sig: FunctionSignature, args: Sequence[np.ndarray], outs: Sequence[np.ndarray]) -> list[str]:
    """Outputs written while inputs are read must not share memory with them or with each other."""
    def span(a: np.ndarray) -> tuple[int, int]:
        start = data_address(a)
        return start, start + a.nbytes

    named = [(f"parameter {p.name!r}", a) for p, a in zip(sig.params, args)]
    errors = []
    for i, (o, spec) in enumerate(zip(outs, sig.results)):
        if not isinstance(o, np.ndarray):  # (refused as it is)
            continue
        lo, hi = span(o)
        for label, other in named:
            olo, ohi = span(other)
            if lo < ohi and olo < hi and o.nbytes and other.nbytes:
                errors.append(f"{sig.name}: out[{i}] (result {spec.name!r}) overlaps {label}")
        named.append((f"out[{i}]", o))
    return errors


# --- a compiled module ---------------------------------------------------------------------------------------
class CompiledModule:
    """Every public function of a compiled module, by name: ``mod.main(...)`` or ``mod["main"](...)``."""

    def __init__(self, engine: ExecutionEngine, llvm_module: ir.Module, signatures: Mapping[str, FunctionSignature],
                 check_messages: Sequence[str] = ()):
        self.engine = engine
        self._llvm_module = llvm_module
        self.check_messages = list(check_messages)
        self.error_slot = find_slot(engine) if self.check_messages else None
        self.functions: dict[str, CompiledFunction] = {}
        for name, sig in signatures.items():
            address = engine.raw_lookup(name)  # the packed wrapper `_mlir_<name>(void **)`
            if not address:
                raise RuntimeError(f"compiled module has no function {name!r} (if LLVM printed 'JIT session error: "
                                   "Symbols not found' on stderr, the code calls a function no loaded library defines)")
            self.functions[name] = CompiledFunction(sig, address, self)

    def __getitem__(self, name: str) -> CompiledFunction:
        try:
            return self.functions[name]
        except KeyError:
            raise KeyError(f"no public function {name!r}; functions: {', '.join(self.functions)}") from None

    def __getattr__(self, name: str) -> CompiledFunction:
        functions = self.__dict__.get("functions", {})
        if name in functions:
            return functions[name]
        raise AttributeError(f"no public function {name!r}; functions: {', '.join(functions)}")

    @property
    def llvm_text(self) -> str:
        """The LLVM-dialect module that was compiled."""
        return str(self._llvm_module)

    def dump_object(self, path: str) -> None:
        """Write the compiled code as an object file (``gcc -shared`` makes it a library without MLIR)."""
        self.engine.dump_to_object_file(path)


def _openmp_libs(llvm_module: ir.Module) -> list[str]:
    """The OpenMP runtime, if the module has parallel regions (their ``__kmpc_*`` calls appear only when the
    engine translates ``omp`` ops to LLVM IR, so look for the ops)."""
    from mlir import ir

    from .openmp import openmp_library

    found = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("omp."):
            found.append(op.name)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    llvm_module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    if not found:
        return []
    lib = openmp_library()
    if lib is None:  # resolve_threads keeps num_threads at 1 without a runtime: only a hand-made module gets here
        raise RuntimeError("compiled code has OpenMP regions but no OpenMP runtime was found "
                           "(install intel-openmp or set RELAX_MLIR_OPENMP_LIB)")
    return [lib]


def _normalize(signatures: Any) -> dict[str, FunctionSignature]:
    if signatures is None:
        return {}
    if isinstance(signatures, FunctionSignature):
        return {signatures.name: signatures}
    if isinstance(signatures, Mapping):
        return dict(signatures)
    return {s.name: s for s in signatures}


def _check_out_params(module: ir.Module, signatures: Mapping[str, FunctionSignature]) -> None:
    from mlir import ir

    from .pipeline import public_funcs

    for func in public_funcs(module):
        name = ir.StringAttr(func.attributes["sym_name"]).value
        ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        sig = signatures.get(name)
        if sig and (len(ftype.results) or len(ftype.inputs) != len(sig.params) + len(sig.results)):
            raise RuntimeError(f"{name}: after bufferization the function is {ftype}; expected "
                               f"{len(sig.params)} inputs and {len(sig.results)} out-parameters, no results")


def compile_module(
    source: str | ir.Module,
    signatures: FunctionSignature | Iterable[FunctionSignature] | Mapping[str, FunctionSignature] | None = None,
    *,
    options: PipelineOptions | None = None,
    llvm_opt_level: int = 2,
    shared_libs: Sequence[str] = (),
) -> CompiledModule:
    """Lower linalg-on-tensors MLIR (text or Module, not modified) to LLVM and JIT-compile it.

    ``llvm_opt_level`` 2 by default: -O3 bought no measurable step time over -O2 on the benchmarks' steps and cost
    0.6 s more compiling the tutorial MLP's training module, 2.5 s more for the CNN's (2-core AMD EPYC).
    ``signatures`` gives, per public function, names and symbolic shapes; functions without one get a
    signature derived from their type (which must then have static result shapes). Raises ValueError for a
    signature that does not fit its function, ``mlir.ir.MLIRError`` when a pass fails.
    """
    from mlir import ir
    from mlir.execution_engine import ExecutionEngine

    from . import native
    from .library import LinkError
    from .pipeline import copy, lower_module, parse, public_funcs

    given = _normalize(signatures)
    keep_freed_memory()
    module = parse(source) if isinstance(source, str) else copy(source)
    with module.context, ir.Location.unknown(module.context):
        funcs = {ir.StringAttr(f.attributes["sym_name"]).value: f for f in public_funcs(module)}
        funcs.pop(ERROR_ADDRESS_FN, None)  # the runtime's own accessor, not a user function
        unknown = set(given) - set(funcs)
        if unknown:
            raise ValueError(f"signatures given for unknown functions {sorted(unknown)}; "
                             f"public functions: {sorted(funcs)}")
        sigs = {name: signature_from_func(f, given.get(name)) for name, f in funcs.items()}

        def after(stage: str, m: ir.Module) -> None:
            if stage == "bufferized":
                _check_out_params(m, sigs)

        module = lower_module(module, "llvm", options, on_stage=after)
        messages = check_messages(module)  # (after the lowering, which adds the allocations' checks)
        libs = list(shared_libs) + find_shared_libs(module)  # (the OpenMP runtime: only the engine needs it named)
        start = time.perf_counter()
        engine, how = None, "ExecutionEngine"
        if not shared_libs and native.enabled():
            try:
                engine = native.NativeEngine(module, list(sigs), llvm_opt_level)
                how = f"native, {len(engine.objects)} part(s)"
            except (native.NativeError, LinkError, OSError) as err:
                native.warn_fallback(str(err))
        if engine is None:
            libs += _openmp_libs(module)
            try:
                engine = ExecutionEngine(module, opt_level=llvm_opt_level, shared_libs=libs)
            except RuntimeError as err:
                raise RuntimeError(f"{err} (LLVM's reason, if any, was printed on stderr)") from None
        if options is not None and options.timing:
            sys.stderr.write(f"// relax_mlir: LLVM -O{llvm_opt_level} and code generation ({how}): "
                             f"{time.perf_counter() - start:.4f} s\n")
            sys.stderr.flush()
    return CompiledModule(engine, module, sigs, messages)
