"""A facade shaped like the parts of ``tvm`` that the seed tutorial touches, so that its code runs with only the
import lines changed::

    import tvm                      ->  from relax_mlir import tvm
    from tvm import relax           ->  from relax_mlir.tvm import relax
    from tvm.script import ir as I, relax as R          ->  from relax_mlir.script import ir as I, relax as R
    from tvm.relax.training.loss import CrossEntropyLoss ->  from relax_mlir.training.loss import CrossEntropyLoss
    (likewise setup_trainer, trainer, optimizer; tvm.relax.transform -> relax_mlir.transform)

Everything here is a re-export or a thin wrapper; the logic lives in the rest of ``relax_mlir``:

* ``tvm.script`` is :mod:`relax_mlir.script` (``tvm.script.ir_module``);
* ``tvm.device(target, index=0)`` and ``tvm.cpu(index=0)`` give a :class:`Device`; only the host CPU exists
  (``"llvm"`` and ``"cpu"`` both name it);
* ``tvm.compile(mod, target)`` is :func:`relax_mlir.compile` (``"llvm"`` means the host CPU);
* ``tvm.nd.array(a)`` is an :class:`~relax_mlir.training.trainer.NDArray`: a NumPy array with ``.numpy()``;
* ``tvm.nd.empty(shape, dtype)``; ``tvm.runtime`` (``NDArray``, ``Device``, ``ndarray``, ``load_module``);
* ``relax``: ``TensorStructInfo``, ``ShapeStructInfo``, ``TupleStructInfo``, ``Var``, ``DataflowVar``,
  ``GlobalVar``, ``Call``, ``Tuple``, ``TupleGetItem``, ``ShapeExpr``, ``PrimValue``, ``SeqExpr``, ``If``,
  ``BlockBuilder``, ``Function``, ``IRModule``, ``const``, ``op``, ``transform``, ``analysis`` (``well_formed``,
  ``free_vars``, ``all_vars``, ``get_var2val``, ``estimate_memory_usage``), ``testing``, ``get_pipeline``,
  ``training`` (``utils``, ``loss``, ``optimizer``, ``setup_trainer``, ``trainer``), ``optimizer`` (the tutorial
  writes ``relax.optimizer.SGD``), ``build``, ``vm.build`` and ``VirtualMachine(ex, device=None,
  profile=False)`` with ``set_input`` / ``invoke_stateful`` / ``get_outputs`` / ``time_evaluator``; with
  ``profile=True``, ``vm.profile(name, *args)`` reports per-function times (functions are compiled whole).
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from . import compile as _compile
from . import op as _op
from . import analysis, dpl, script, testing, training, transform
from . import ir as _ir
from .ir import (BlockBuilder, Call, DataflowVar, Function, GlobalVar, If, IRModule, PrimValue, SeqExpr, ShapeExpr,
                 ShapeStructInfo, TensorStructInfo, Tuple, TupleGetItem, TupleStructInfo, Var, const)
# Importing the submodules makes them attributes of ``training`` (relax.training.utils, .loss, ...).
from .training import loss as _loss, optimizer as _optimizer, setup_trainer as _st, trainer as _tr  # noqa: F401
from .training import utils as _utils  # noqa: F401
from .training.trainer import NDArray

from .interpreter import get_global_func, register_func  # tvm.register_func: what R.call_packed calls

__all__ = ["script", "device", "cpu", "Device", "compile", "nd", "relax", "runtime", "ir", "IRModule", "VirtualMachine",
           "BenchmarkResult", "ProfileReport", "register_func", "get_global_func"]


class Device:
    """TVM's device handle, reduced to what exists: the host CPU. ``str(dev) == "cpu(0)"``."""

    def __init__(self, device_type: str = "cpu", index: int = 0):
        if device_type not in ("cpu", "llvm"):
            raise ValueError(f"tvm.device: only the host CPU is supported ('cpu' or 'llvm'), got {device_type!r}")
        if index != 0:
            raise ValueError(f"tvm.device: the host CPU is device 0, got index {index}")
        self.device_type, self.index = "cpu", 0

    def __str__(self) -> str:
        return f"{self.device_type}({self.index})"

    __repr__ = __str__

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Device) and (other.device_type, other.index) == (self.device_type, self.index)

    def __hash__(self) -> int:
        return hash((self.device_type, self.index))


def device(target: str, index: int = 0) -> Device:
    """``tvm.device("llvm", 0)``: the host CPU."""
    return Device(str(target).split()[0], index)


def cpu(index: int = 0) -> Device:
    """``tvm.cpu(0)``: the host CPU."""
    return Device("cpu", index)


def compile(mod: IRModule, target: str = "llvm"):  # noqa: A001 - TVM's name
    """``tvm.compile(mod, target)``: :func:`relax_mlir.compile` for the host CPU (``"llvm"`` or ``"cpu"``)."""
    return _compile(mod, str(target).split()[0])  # "llvm -mcpu=..." is still the host; others are refused there


def _array(a: Any, device: Any = None) -> NDArray:
    """``tvm.nd.array(a, device=None)``: a copy of ``a`` (anything NumPy takes, or an object with ``.numpy()``)
    as an :class:`NDArray`; ``device`` is accepted and ignored (the host CPU is the only one)."""
    if not isinstance(a, np.ndarray) and hasattr(a, "numpy"):
        a = a.numpy()
    return np.array(a).view(NDArray)


def _empty(shape: Any, dtype: str = "float32", device: Any = None) -> NDArray:
    """``tvm.nd.empty(shape, dtype="float32", device=None)``: an uninitialised :class:`NDArray`."""
    return np.empty(shape, np.dtype(dtype)).view(NDArray)


nd = types.ModuleType("relax_mlir.tvm.nd", "TVM's ``tvm.nd``: ``array(a)``, ``empty(shape, dtype)`` and ``NDArray``.")
nd.array, nd.empty, nd.NDArray = _array, _empty, NDArray


class VirtualMachine:
    """``relax.VirtualMachine(ex, device=None, profile=False)``: :func:`relax_mlir.VirtualMachine`, whose results
    (NumPy arrays, nested tuples for tuples) come back as :class:`NDArray` so that ``.numpy()`` works as in TVM.

    Besides ``vm["f"](*args)`` it has TVM's stateful interface (``set_input``, ``invoke_stateful``,
    ``get_outputs``) and ``time_evaluator``. With ``profile=True``, ``vm.profile(name, *args)`` returns a
    :class:`ProfileReport` of per-function times: each function is compiled whole (nested calls inlined), so its
    rows are functions, not ops."""

    def __init__(self, ex, device: Any = None, profile: bool = False):
        from . import VirtualMachine as _VM

        self.vm = _VM(ex, None if device is None else str(device))
        self.profiling = bool(profile)
        self._inputs: dict[str, tuple] = {}
        self._outputs: dict[str, Any] = {}

    def __getitem__(self, name: str):
        func = self.vm[name]
        return lambda *args: _wrap(func(*args))

    def __contains__(self, name: str) -> bool:
        return name in self.vm

    def invoke(self, name: str, *args: Any) -> Any:
        return self[name](*args)

    def profile(self, func_name: str, *args: Any) -> "ProfileReport":
        """Run ``func_name`` once on ``args`` (after one untimed call) and report its time, as TVM's profiling VM
        does per op; here the function is the unit (it is compiled whole)."""
        import time

        if not self.profiling:
            raise ValueError("profile: create the VirtualMachine with profile=True to profile")
        func = self.vm[func_name]
        func(*args)
        start = time.perf_counter()
        func(*args)
        return ProfileReport([(func_name, (time.perf_counter() - start) * 1e6)])

    # -- TVM's stateful interface -------------------------------------------------------------------
    def set_input(self, func_name: str, *args: Any, **kwargs: Any) -> None:
        """Keep ``args`` as the inputs of ``func_name`` for :meth:`invoke_stateful` (keyword arguments by
        parameter name, as TVM)."""
        self.vm[func_name]  # an unknown name fails here, not at the call
        if kwargs:
            names = self._param_names(func_name)
            unknown = sorted(set(kwargs) - set(names))
            if unknown or len(args) + len(kwargs) != len(names):
                raise TypeError(f"set_input: {func_name} takes ({', '.join(names)}), got {len(args)} positional "
                                f"and {sorted(kwargs)}" + (f"; unknown {unknown}" if unknown else ""))
            args = args + tuple(kwargs[n] for n in names[len(args):])
        self._inputs[func_name] = args

    def _param_names(self, func_name: str) -> list[str]:
        """The Relax parameters' names of ``func_name``: from the module compiled, or (a library loaded without
        it) from the names its signature keeps."""
        mod = getattr(self.vm.executable, "mod", None)
        if mod is not None and hasattr(mod, "functions"):
            return [p.name_hint for p in mod[func_name].params]
        return [p.name for p in self.vm[func_name].signature.params]

    def invoke_stateful(self, func_name: str) -> None:
        """Run ``func_name`` on the inputs :meth:`set_input` gave; :meth:`get_outputs` returns the results."""
        if func_name not in self._inputs:
            raise ValueError(f"invoke_stateful: call set_input({func_name!r}, ...) first")
        self._outputs[func_name] = self[func_name](*self._inputs[func_name])

    def get_outputs(self, func_name: str) -> Any:
        """The results of the last :meth:`invoke_stateful` of ``func_name``."""
        if func_name not in self._outputs:
            raise ValueError(f"get_outputs: call invoke_stateful({func_name!r}) first")
        return self._outputs[func_name]

    def time_evaluator(self, func_name: str, dev: Any = None, number: int = 10, repeat: int = 1,
                       min_repeat_ms: int = 0, cooldown_interval_ms: int = 0, repeats_to_cooldown: int = 1,
                       f_preproc: str = "") -> Any:
        """TVM's ``time_evaluator``: a function that runs ``func_name`` ``number`` times per repeat (more while a
        repeat lasts under ``min_repeat_ms``), ``repeat`` times, and returns a :class:`BenchmarkResult` of the mean
        seconds per call of each repeat. Called with no arguments it times the inputs of :meth:`set_input`."""
        if number < 1 or repeat < 1:
            raise ValueError(f"time_evaluator: number and repeat must be at least 1, got {number} and {repeat}")
        if f_preproc:
            raise ValueError(f"time_evaluator: f_preproc={f_preproc!r} is not supported")
        func = self.vm[func_name]

        def evaluate(*args: Any) -> BenchmarkResult:
            if not args:
                if func_name not in self._inputs:
                    raise ValueError(f"time_evaluator({func_name!r}): give arguments, or call set_input first")
                args = self._inputs[func_name]
            return BenchmarkResult(_time_repeats(func, args, number, repeat, min_repeat_ms, cooldown_interval_ms,
                                                 repeats_to_cooldown))

        return evaluate


def _time_repeats(func: Any, args: tuple, number: int, repeat: int, min_repeat_ms: int, cooldown_ms: int,
                  repeats_to_cooldown: int) -> list[float]:
    import time

    func(*args)  # once before timing: the first call pays for lazy initialisation, as TVM's warm-up does
    results = []
    for r in range(repeat):
        n = number
        while True:
            start = time.perf_counter()
            for _ in range(n):
                func(*args)
            elapsed = time.perf_counter() - start
            if elapsed * 1e3 >= min_repeat_ms or n >= 2**30:
                break
            n = max(n * 2, int(n * 1.1 * min_repeat_ms / max(elapsed * 1e3, 1e-6)))  # TVM grows it likewise
        results.append(elapsed / n)
        if cooldown_ms and (r + 1) % repeats_to_cooldown == 0:
            time.sleep(cooldown_ms / 1e3)
    return results


class ProfileReport:
    """What ``vm.profile`` returns: ``rows`` of (name, microseconds), printed as a table like TVM's report."""

    def __init__(self, rows: list[tuple[str, float]]):
        self.rows = list(rows)

    def __str__(self) -> str:
        total = sum(us for _, us in self.rows) or 1.0
        lines = [f"{'Name':<24}{'Duration (us)':>16}{'Percent':>10}{'Device':>8}{'Count':>7}"]
        lines += [f"{name:<24}{us:>16.2f}{100 * us / total:>10.2f}{'cpu0':>8}{1:>7}" for name, us in self.rows]
        return "\n".join(lines)


class BenchmarkResult:
    """TVM's ``BenchmarkResult``: ``results`` (seconds per call, one per repeat) and their ``mean``, ``median``,
    ``max``, ``min`` and ``std``; printed as TVM prints it (milliseconds)."""

    def __init__(self, results: list[float]):
        self.results = list(results)
        a = np.asarray(self.results)
        self.mean, self.median = float(a.mean()), float(np.median(a))
        self.max, self.min, self.std = float(a.max()), float(a.min()), float(a.std())

    def __str__(self) -> str:
        cols = ("mean", "median", "max", "min", "std")
        head = "".join(f"{c + ' (ms)':>13}" for c in cols)
        row = "".join(f"{getattr(self, c) * 1e3:>13.4f}" for c in cols)
        return f"Execution time summary:\n{head}\n{row}\n"

    def __repr__(self) -> str:
        return (f"BenchmarkResult(min={self.min}, mean={self.mean}, median={self.median}, max={self.max}, "
                f"std={self.std}, results={self.results})")


def _wrap(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_wrap(v) for v in value)
    return np.asarray(value).view(NDArray)


def _build(mod: IRModule, target: str = "llvm", *args: Any, **kwargs: Any):
    """``relax.build(mod, target)`` / ``relax.vm.build(mod, target)``: :func:`compile` (TVM's other arguments,
    such as ``params``, are not supported)."""
    if args or kwargs:
        raise TypeError(f"relax.build: only (mod, target) is supported, got extra arguments "
                        f"{', '.join([repr(a) for a in args] + list(kwargs))}")
    return compile(mod, target)


_relax_vm = types.ModuleType("relax_mlir.tvm.relax.vm", "TVM's ``relax.vm``: ``build(mod, target)``.")
_relax_vm.build = _build

relax = types.ModuleType("relax_mlir.tvm.relax", "TVM's ``tvm.relax``, as far as the tutorial uses it.")
relax.TensorStructInfo, relax.Var, relax.BlockBuilder, relax.Function = TensorStructInfo, Var, BlockBuilder, Function
relax.IRModule, relax.const, relax.op, relax.transform = IRModule, const, _op, transform
relax.training, relax.optimizer = training, _optimizer
relax.vm, relax.build, relax.VirtualMachine = _relax_vm, _build, VirtualMachine
relax.Tuple, relax.TupleGetItem, relax.ShapeExpr, relax.PrimValue = Tuple, TupleGetItem, ShapeExpr, PrimValue
relax.ShapeStructInfo, relax.TupleStructInfo, relax.DataflowVar = ShapeStructInfo, TupleStructInfo, DataflowVar
relax.Call, relax.SeqExpr, relax.GlobalVar, relax.If = Call, SeqExpr, GlobalVar, If
relax.analysis, relax.testing, relax.get_pipeline, relax.dpl = analysis, testing, transform.get_pipeline, dpl


ir = types.ModuleType("relax_mlir.tvm.ir", "TVM's ``tvm.ir``: ``IRModule``, ``GlobalVar``, ``structural_equal``, "
                                           "``structural_hash``, ``assert_structural_equal``.")
ir.IRModule, ir.GlobalVar = IRModule, GlobalVar
ir.structural_equal, ir.structural_hash, ir.assert_structural_equal = (
    _ir.structural_equal, _ir.structural_hash, _ir.assert_structural_equal)


def _load_module(path: str) -> Any:
    """``tvm.runtime.load_module(path)``: a library written by ``ex.export_library(path)``."""
    from .runtime import load_module

    return load_module(path)


runtime = types.ModuleType("relax_mlir.tvm.runtime", "TVM's ``tvm.runtime``: ``NDArray``, ``Device``, ``ndarray``, "
                                                     "``load_module``.")
runtime.NDArray, runtime.Device, runtime.ndarray, runtime.load_module = NDArray, Device, nd, _load_module
