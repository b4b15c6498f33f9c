"""From a Relax module to text at any stage, and to native code: ``to_mlir``, ``compile``, ``VirtualMachine``.

    text = relax_mlir.to_mlir(mod, stage="linalg")        # relax | linalg | fused | scheduled | bufferized | llvm
    ex = relax_mlir.compile(mod, target="cpu", opt_level=2)
    vm = relax_mlir.VirtualMachine(ex)
    logits = vm["backbone"](x, w0, b0, w1, b1)             # NumPy in, NumPy out (nested tuples for tuples)

Stages: ``relax`` is the export (``export.py``); ``linalg`` is after the lowering of every relax op
(``legalize/``) and ``canonicalize,cse``; the later stages are the pipeline's (``pipeline.py``).

Custom lowerings: a module that went through ``relax_mlir.transform.LegalizeOps(customize_legalize_map)``
carries the map (by name, in the module attribute ``relax_mlir.legalize_map``; the rules themselves stay in this
process's table), and every function here honours it: a listed op is lowered by the user's rule instead of its
record's ``legalize``.

Compiled modules are cached in-process by ``structural_hash`` of the module, the options and the identity of
the lowering of every op it uses; a hit is confirmed with ``structural_equal``. A compile the on-disk cache serves
never imports MLIR: the export, the lowering and the pipeline are imported where a module is lowered (importing
MLIR's bindings costs 0.15 s, a third of a warm ``relax-mlir train``).
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import os
import re
import tempfile
import threading
import weakref
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from ..ir.expr import Call, Function, Var, VarBinding
from ..ir.module import IRModule
from ..ir.structural_equal import structural_equal, structural_hash
from ..ir.struct_info import StructInfo, TensorStructInfo, TupleStructInfo
from ..ir.sym import SymDim
from ..ir.visitor import post_order_visit
from ..op.registry import Op
from ..transform.legalize_ops import LEGALIZE_MAP_ATTR, lookup_rule
from . import disk_cache
from .error_slot import SLOT_WORDS
from .library import LinkError, LoadedModule, link_module, pack_library, write_atomically
from .nesting import Tree, callable_for
from .options import STAGES, PipelineOptions
from .runtime import compile_module
from .signature import FunctionSignature, TensorSpec, flatten_struct_info, is_symbol
from .signature_json import signature_to_json

if TYPE_CHECKING:
    from mlir import ir

__all__ = ["Executable", "VirtualMachine", "build", "to_mlir", "LEGALIZE_MAP_ATTR", "legalize_overrides"]

EXPORT_STAGES = ("relax",) + STAGES
CLEANUP = "builtin.module(canonicalize,cse,canonicalize)"  # the second folds what cse made equal (size checks)
# Calls between functions are inlined before bufferization: buffer-results-to-out-params cannot give a call
# site an out-parameter for a dynamically shaped result ("cannot create out param for dynamically shaped
# result"), and inlining lets fusion see across the call. Every function stays public.
INLINE = "builtin.module(inline,canonicalize,cse)"


# --- custom lowerings ----------------------------------------------------------------------------------------
def legalize_overrides(mod: IRModule) -> dict[str, Any]:
    """The custom lowerings a module carries (``LegalizeOps``): op name -> rule."""
    table = mod.attrs.get(LEGALIZE_MAP_ATTR) or {}
    return {name: lookup_rule(token) for name, token in table.items()}


# --- text at a stage -------------------------------------------------------------------------------------------
def _options(options: Optional[PipelineOptions], opt_level: Optional[int] = None,
             num_threads: Optional[int] = None, checks: Optional[bool] = None) -> PipelineOptions:
    if checks is not None and not isinstance(checks, bool):  # checks="no" was true
        raise TypeError(f"compile: checks must be True or False, got {checks!r}")
    if options is None:
        return PipelineOptions(opt_level=2 if opt_level is None else opt_level, num_threads=num_threads,
                               checks=True if checks is None else checks)
    if not isinstance(options, PipelineOptions):
        raise TypeError(f"options must be a PipelineOptions, got {type(options).__name__}")
    if num_threads is not None and num_threads != options.num_threads:
        raise ValueError(f"compile: num_threads={num_threads} disagrees with options.num_threads="
                         f"{options.num_threads}; give one of them")
    if checks is not None and bool(checks) != options.checks:
        raise ValueError(f"compile: checks={checks} disagrees with options.checks={options.checks}; give one of them")
    return options


def lower_to(mod: IRModule, stage: str, function: Optional[str] = None,
             options: Optional[PipelineOptions] = None) -> ir.Module:
    """The MLIR module of ``mod`` at ``stage`` (see the module docstring)."""
    if stage not in EXPORT_STAGES:
        raise ValueError(f"to_mlir: unknown stage {stage!r}; stages are {', '.join(EXPORT_STAGES)}")
    from mlir import ir

    from .export import export
    from .legalize import legalize_module
    from .legalize.size_checks import drop_proven, insert_size_checks
    from .pipeline import lower_module, run_passes

    overrides = legalize_overrides(mod)
    options = _options(options)
    module = export(_without_local_functions(mod), function, overrides, checks=options.checks)
    if stage == "relax":
        return module
    with module.context, ir.Location.unknown():
        legalize_module(module, overrides, [], checks=options.checks)
        insert_size_checks(module)
        run_passes(module, CLEANUP, options)
        for _ in range(8):  # each round's folded guards make the next sizes traceable
            if not drop_proven(module):
                break
            run_passes(module, CLEANUP, options)
        module.operation.verify()
        if stage != "linalg":
            inline_calls(module, options)
            module = lower_module(module, stage, options)
    return module


def _has_calls(module: ir.Module) -> bool:
    from mlir import ir

    found = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "func.call":
            found.append(op)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return bool(found)


def inline_calls(module: ir.Module, options: PipelineOptions) -> None:
    """Inline every ``func.call`` of ``module`` (in place), if it has any."""
    if _has_calls(module):
        from mlir import ir

        from .pipeline import run_passes

        with module.context, ir.Location.unknown():
            run_passes(module, INLINE, options)


def load_compiler() -> float:
    """Load MLIR's bindings and every module a compile uses, now; returns the seconds it took (0 once loaded).

    ``relax_mlir.compile`` loads them on its first call (importing ``relax_mlir`` does not: a library loaded with
    ``relax_mlir.runtime.load_module`` never needs them), about 0.15 s of that first call on a 2-core Xeon, 0.05 s
    of it the bindings' own ``mlir.dialects.linalg``. A program that times its first compile, or wants it to start
    sooner, calls this first (``benchmarks/compile_time.py`` does, as JAX's compile time is measured after
    ``import jax``)."""
    import importlib
    import pkgutil
    import sys
    import time

    start = time.perf_counter()
    if all(name in sys.modules for name in _COMPILER_MODULES):
        return 0.0
    for name in _COMPILER_MODULES:
        importlib.import_module(name)
    from . import legalize  # every op family's rules (each is imported when a module first uses one of its ops)
    from .. import transform

    transform.import_all_passes()  # (a pass's file is otherwise imported when the pass is first named)

    for info in pkgutil.iter_modules(legalize.__path__):
        importlib.import_module(f"{legalize.__name__}.{info.name}")
    return time.perf_counter() - start


#: What a compile imports (``load_compiler``): the bindings it uses, the lowering, the schedules, the native path.
_COMPILER_MODULES = ("mlir.ir", "mlir.passmanager", "mlir.execution_engine", "mlir.dialects.linalg",
                     "mlir.dialects.transform.interpreter", "mlir.dialects.llvm", "mlir.dialects.affine",
                     "mlir.dialects.builtin", "mlir.dialects.ub", "relax_mlir.backend.export",
                     "relax_mlir.backend.pipeline", "relax_mlir.backend.schedule", "relax_mlir.backend.native")


def to_mlir(mod: IRModule, stage: str = "relax", function: Optional[str] = None,
            options: Optional[PipelineOptions] = None) -> str:
    """MLIR text of ``mod`` (all functions, or ``function`` and its callees) at ``stage``."""
    return str(lower_to(mod, stage, function, options))


# --- signatures ------------------------------------------------------------------------------------------------
def _dim_text(d, fn_name: str, what: str) -> Any:
    if isinstance(d, int):
        return d
    if isinstance(d, SymDim):
        return str(d)
    raise ValueError(f"{fn_name}: {what} has an unknown dimension")


def signature_of(name: str, fn: Function) -> FunctionSignature:
    """The runtime signature of a Relax function: flattened parameters (named ``x``, ``x[0]``) and results."""
    params = []
    for p in fn.params:
        for pname, s in flatten_struct_info(p.struct_info, p.name_hint, name):
            symbol = re.sub(r"\W", "_", pname)  # an unknown dim of x[0] is the symbol x_0__1
            shape = [f"{symbol}_{a}" if s.shape is None else _dim_text(d, name, pname)
                     for a, d in enumerate(s.shape or [None] * s.ndim)]
            params.append(TensorSpec(tuple(shape), _np_dtype(s.dtype), pname))
    results = []
    for rname, s in flatten_struct_info(fn.ret_struct_info, "result", name):
        if s.shape is None:
            raise ValueError(f"{name}: {rname} has an unknown shape ({s}); a compiled function must be able to "
                             "allocate its results: match_cast it to sizes the parameters define, or return a value "
                             "whose shape they do")
        results.append(TensorSpec(tuple(_dim_text(d, name, rname) for d in s.shape), _np_dtype(s.dtype), rname))
    try:
        sig = FunctionSignature(name, tuple(params), tuple(results))
    except ValueError as exc:
        raise ValueError(f"{exc} (a result size must be computable from the parameters' sizes)") from None
    return dataclasses.replace(sig, scratch=_scratch(fn, sig))


def _scratch(fn: Function, sig: FunctionSignature) -> tuple[TensorSpec, ...]:
    """The tensors ``fn`` binds whose sizes its parameters' sizes give, one per shape and element size, except
    those of a parameter's or a result's shape and element size (``FunctionSignature.scratch``)."""
    name_of = sig.name
    bound = {d for p in sig.params for d in p.shape if is_symbol(d)}
    known = {(tuple(t.shape), t.dtype.itemsize) for t in sig.params + sig.results}
    found: dict[tuple, TensorSpec] = {}

    def visit(e) -> None:
        if not isinstance(e, Function):
            return
        for block in e.body.blocks:
            for b in block.bindings:
                if not isinstance(b, VarBinding) or not isinstance(b.var, Var) \
                        or not isinstance(b.var.struct_info, (TensorStructInfo, TupleStructInfo)):
                    continue
                try:
                    tensors = flatten_struct_info(b.var.struct_info, b.var.name_hint, name_of)
                except ValueError:  # a tuple holding a shape or an object
                    continue
                for tname, t in tensors:
                    if t.shape is None or t.dtype in (None, "", "void"):
                        continue
                    try:
                        shape = tuple(_dim_text(d, name_of, tname) for d in t.shape)
                        spec = TensorSpec(shape, _np_dtype(t.dtype), tname)
                    except (ValueError, TypeError):
                        continue
                    key = (shape, spec.dtype.itemsize)
                    if key not in known and key not in found and spec.symbols() <= bound:
                        found[key] = spec

    post_order_visit(fn, visit)
    return tuple(found.values())


def _np_dtype(dtype: str) -> np.dtype:
    from ..ir.dtype import to_numpy

    return to_numpy(dtype)


# --- executables ---------------------------------------------------------------------------------------------------
class Executable:
    """A compiled module: every Relax function as native code, with how to (un)flatten its tuples.

    ``compiled`` is the ExecutionEngine's ``CompiledModule``, or a ``LoadedModule`` when the code came from
    the on-disk cache; ``library`` is then the library file's bytes (``library.py``)."""

    def __init__(self, mod: IRModule, compiled: Any, options: PipelineOptions, linalg_text: Optional[str] = None,
                 library: Optional[bytes] = None):
        self.mod = mod
        self.compiled = compiled
        self.options = options
        self._linalg_text = linalg_text
        self._library = library

    @property
    def function_names(self) -> list[str]:
        return list(self.mod)

    @property
    def linalg_text(self) -> str:
        """The module after lowering every relax op (computed again if the code came from the cache)."""
        if self._linalg_text is None:
            self._linalg_text = to_mlir(self.mod, "linalg", options=self.options)
        return self._linalg_text

    @property
    def llvm_text(self) -> str:
        """The LLVM-dialect module that was compiled (lowered again if the code came from the cache)."""
        if not isinstance(self.compiled, LoadedModule):
            return self.compiled.llvm_text
        from mlir import ir

        from .pipeline import lower_module

        module = lower_to(self.mod, "linalg", None, self.options)
        inline_calls(module, self.options)
        with module.context, ir.Location.unknown():
            return str(lower_module(module, "llvm", self.options))

    def library_bytes(self) -> bytes:
        """This executable as a library file (``library.py``): linked now unless it came from the cache."""
        if self._library is None:
            self._library = _link_library(self.mod, self.compiled, key=None)
        return self._library

    def export_library(self, path: str) -> None:
        """Write the compiled code as a shared library with its signatures, which
        ``relax_mlir.runtime.load_module(path)`` runs with NumPy and ctypes alone (no MLIR). Atomic."""
        write_atomically(os.fspath(path), self.library_bytes(), "export_library", "a file name such as step.so")

    def __repr__(self) -> str:
        return f"<Executable {', '.join(self.mod)} (opt_level {self.options.opt_level})>"


# The in-process cache: every executable still alive somewhere is found again (weak references), and the last
# few compiled are kept alive here. An ExecutionEngine costs about 3.4 MB even for a tiny module (its LLVM JIT
# session), so a strong cache of 64 held 215 MB after 64 compiles (benchmarks/memory_soak.py); a module compiled
# again after it was dropped comes from the on-disk cache instead (about 10 ms).
_LIVE: "weakref.WeakValueDictionary[tuple, Executable]" = weakref.WeakValueDictionary()
_CACHE: "collections.OrderedDict[tuple, Executable]" = collections.OrderedDict()
_CACHE_SIZE = 8
_CACHE_LOCK = threading.Lock()
CACHE_STATS = {"hits": 0, "misses": 0}


def _ops_used(mod: IRModule) -> set[Op]:
    ops: set[Op] = set()
    for _, fn in mod.items():
        post_order_visit(fn, lambda e: ops.add(e.op) if isinstance(e, Call) and isinstance(e.op, Op) else None)
    return ops


def _cache_key(mod: IRModule, target: str, options: PipelineOptions, text: Optional[str] = None) -> tuple:
    """The in-process cache's key: the digest of the module's ``text`` (:func:`_module_text`, which the disk cache's
    key is made of too) when it has one, else its structural hash (3 ms more for the tutorial MLP's training
    module, 9 ms for the CNN's, on every cold build)."""
    rules = tuple(sorted((op.name, id(op)) for op in _ops_used(mod)))  # records are frozen: identity suffices
    overrides = tuple(sorted((k, id(v)) for k, v in legalize_overrides(mod).items()))
    identity = hashlib.sha256(text.encode("utf-8")).hexdigest() if text is not None else structural_hash(mod)
    return identity, target, options, rules, overrides


def _module_text(mod: IRModule) -> Optional[str]:
    """``mod`` printed, large arrays as digests of their bytes: what both caches' keys are made of; None for a
    module with custom lowerings (Python functions of this process: no printable key) or one the text format
    cannot write."""
    if legalize_overrides(mod):
        return None
    from ..ir.printer import format_module

    try:
        return format_module(mod, digest_arrays_from=DIGEST_ARRAYS_FROM)
    except (ValueError, TypeError):
        return None


def _names(mod: IRModule) -> tuple:
    """The names a compiled module's messages quote: its functions' and their variables', in order."""
    from ..analysis import all_vars

    return tuple((name, tuple(v.name_hint for v in all_vars(fn))) for name, fn in mod.items())


def build(mod: IRModule, target: str = "cpu", opt_level: int = 2,
          options: Optional[PipelineOptions] = None, num_threads: Optional[int] = None,
          checks: Optional[bool] = None) -> Executable:
    """Compile every function of ``mod`` to native code (``relax_mlir.compile``); cached in-process and on disk
    (``disk_cache.py``)."""
    if target not in ("cpu", "llvm"):
        raise ValueError(f"compile: unknown target {target!r}; the MLIR backend compiles for 'cpu' (the host)")
    if not isinstance(mod, IRModule):
        raise TypeError(f"compile: expected an IRModule, got {type(mod).__name__}")
    options = _options(options, opt_level, num_threads, checks)
    text = _module_text(mod)
    key = _cache_key(mod, "cpu", options, text)
    with _CACHE_LOCK:
        hit = _LIVE.get(key)
        # Equal up to names is not enough: the names are in the compiled code's messages (parameters, bindings).
        given = getattr(hit, "given", None)  # the module compiled, before its local functions were lifted
        if hit is not None and structural_equal(given, mod, map_free_vars=True) and _names(given) == _names(mod):
            _keep(key, hit)
            CACHE_STATS["hits"] += 1
            return hit
    CACHE_STATS["misses"] += 1
    disk_key = _disk_key(mod, options, text)
    ex = _from_disk(mod, options, disk_key) if disk_key else None
    if ex is None:
        ex = _compile(mod, options)
        if disk_key:
            _to_disk(ex, disk_key)
    ex.given = mod  # what a later build compares with (``ex.mod`` has its local functions lifted)
    with _CACHE_LOCK:
        _LIVE[key] = ex
        _keep(key, ex)
    return ex


def _keep(key: tuple, ex: Executable) -> None:
    """Hold ``ex`` as the most recently used of the last ``_CACHE_SIZE`` (the caller holds the lock)."""
    _CACHE[key] = ex
    _CACHE.move_to_end(key)
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)


def _without_local_functions(mod: IRModule) -> IRModule:
    """``mod`` with local functions lifted into the module (``LambdaLift``): MLIR gets module functions only.

    Lifted without the well-formedness check a pass runs after itself: ``compile`` takes what the interpreter runs,
    which ``well_formed`` (as TVM's) may refuse, such as a binding annotated narrower than its value
    (``y: R.Tensor((2, 3)) = R.add(x, x)``, checked at run time by compiled code as by the interpreter), and takes
    it with local functions as without; and a caller's ``PassContext`` (disabled passes, instruments) is not the
    compile's."""
    from ..transform.lambda_lift import LambdaLift, has_local_functions
    from ..transform.pass_infra import PassContext

    if not has_local_functions(mod):
        return mod
    with PassContext(check_well_formed=False):
        return LambdaLift()(mod)


def _compile(mod: IRModule, options: PipelineOptions) -> Executable:
    mod = _without_local_functions(mod)
    signatures = [signature_of(name, mod[name]) for name in mod]
    linalg = lower_to(mod, "linalg", None, options)  # its text is printed only if asked for (Executable.linalg_text)
    inline_calls(linalg, options)
    compiled = compile_module(linalg, signatures, options=options, llvm_opt_level=LLVM_OPT_LEVEL)
    return Executable(mod, compiled, options)


# --- the on-disk cache -------------------------------------------------------------------------------------------
LLVM_OPT_LEVEL = 2


#: Arrays of this many elements or more enter the disk cache's key as a digest of their bytes, not as text.
DIGEST_ARRAYS_FROM = 64


def _disk_key(mod: IRModule, options: PipelineOptions, text: Optional[str] = "") -> Optional[str]:
    """The on-disk cache key of ``mod`` (``text``: its :func:`_module_text`, printed here if not given), or None
    when the cache is off or cannot hold it (custom lowerings are Python functions of this process, so their code
    is not part of any printable key)."""
    if not disk_cache.enabled():
        return None
    text = _module_text(mod) if text == "" else text
    if text is None:
        return None
    from .openmp import openmp_library

    knobs = {"opt_level": options.opt_level, "num_threads": options.num_threads, "llvm_opt_level": LLVM_OPT_LEVEL,
             "fallback": options.fallback_on_schedule_failure, "checks": options.checks, "outline": options.outline,
             "openmp": openmp_library() if options.num_threads > 1 else None}
    # large arrays (constants, the optimizer's initial state) enter the key as digests of their bytes
    return disk_cache.cache_key(text, knobs)


def _from_disk(mod: IRModule, options: PipelineOptions, key: str) -> Optional[Executable]:
    found = disk_cache.lookup(key)
    if found is None:
        return None
    library, meta = found
    mod = _without_local_functions(mod)  # as _compile does: a hit exposes the functions a compile exposes
    signatures = {name: signature_of(name, mod[name]) for name in mod}
    compiled = LoadedModule(library, signatures, meta.get("check_messages", []), metadata=meta)
    return Executable(mod, compiled, options, library=library.data)


def _to_disk(ex: Executable, key: str) -> None:
    """Store a compiled executable; a cache that cannot be written is off for this process, after one warning."""
    try:
        data = _link_library(ex.mod, ex.compiled, key)
        disk_cache.store(key, data)
    except (LinkError, OSError) as exc:
        disk_cache.warn_once(str(exc))
        disk_cache.DISABLED = True
        return
    ex._library = data


def library_metadata(mod: IRModule, compiled: Any, key: Optional[str]) -> dict[str, Any]:
    """What a library file says about its functions: signatures, tuple structure, runtime-check messages."""
    from .. import __version__

    functions = {name: {"signature": signature_to_json(compiled[name].signature), **function_structure(fn)}
                 for name, fn in mod.items()}
    return {"key": key, "functions": functions, "check_messages": list(compiled.check_messages),
            "error_slot_words": SLOT_WORDS, "relax_mlir": __version__}


def _link_library(mod: IRModule, compiled: Any, key: Optional[str]) -> bytes:
    """Link ``compiled`` (an engine's module) into a library file's bytes."""
    if isinstance(compiled, LoadedModule):
        raise TypeError("cannot link a LoadedModule again: only an engine's CompiledModule has object code")
    with tempfile.TemporaryDirectory(prefix="relax-mlir-lib-") as tmp:
        path = os.path.join(tmp, "module.so")
        link_module(compiled, path)
        with open(path, "rb") as f:
            elf = f.read()
    return pack_library(elf, library_metadata(mod, compiled, key))


def clear_cache() -> None:
    """Forget every compiled module (their code is freed once no VirtualMachine holds it)."""
    with _CACHE_LOCK:
        _CACHE.clear()
        _LIVE.clear()


# --- the virtual machine -----------------------------------------------------------------------------------------
def tree_of(sinfo: StructInfo) -> Tree:
    """The tuple structure of a struct info (``nesting.py``): None for a tensor, a list for a tuple."""
    if isinstance(sinfo, TupleStructInfo):
        return [tree_of(f) for f in sinfo.fields]
    return None


def function_structure(fn: Function) -> dict[str, Any]:
    """What a library needs to call a Relax function with nested tuples: parameter names and trees, result tree."""
    return {"param_names": [p.name_hint for p in fn.params],
            "param_trees": [tree_of(p.struct_info) for p in fn.params], "result_tree": tree_of(fn.ret_struct_info)}


class VirtualMachine:
    """Runs an :class:`Executable` (TVM's ``relax.VirtualMachine``): ``vm["main"](*arrays)``.

    Arguments are NumPy arrays (nested tuples for tuple parameters), checked before native code runs: a bad
    one raises :class:`relax_mlir.backend.runtime.ArgumentError` naming the function and the parameter
    (``x[1]`` for a field of a tuple parameter ``x``). Results are NumPy arrays, nested tuples for tuples.
    A function without tuples is the compiled function itself (no wrapper: its per-call cost is the runtime's).
    """

    def __init__(self, ex: "Executable | LoadedModule", device: Any = None):
        if not isinstance(ex, (Executable, LoadedModule)):
            raise TypeError(f"VirtualMachine: expected an Executable (from relax_mlir.compile) or a library loaded "
                            f"with relax_mlir.runtime.load_module, got {type(ex).__name__}")
        if device not in (None, "cpu", "llvm") and str(device) not in ("cpu", "cpu(0)"):
            raise ValueError(f"VirtualMachine: only the host CPU is supported, got device {device!r}")
        self.executable = ex
        self._functions: dict[str, Any] = {}
        if isinstance(ex, LoadedModule):  # TVM's relax.VirtualMachine(tvm.runtime.load_module(path), dev)
            self._functions.update(ex.functions)
            return
        for name, fn in ex.mod.items():
            self._functions[name] = callable_for(name, compiled=ex.compiled[name], **function_structure(fn))

    def __getitem__(self, name: str):
        try:
            return self._functions[name]
        except KeyError:
            raise KeyError(f"VirtualMachine: no function {name!r}; functions: "
                           f"{', '.join(self._functions)}") from None

    def __contains__(self, name: str) -> bool:
        return name in self._functions

    def invoke(self, name: str, *args: Any) -> Any:
        """``vm[name](*args)``."""
        return self[name](*args)


