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
* ``relax``: ``TensorStructInfo``, ``Var``, ``BlockBuilder``, ``Function``, ``IRModule``, ``const``, ``op``,
  ``transform``, ``training`` (``utils``, ``loss``, ``optimizer``, ``setup_trainer``, ``trainer``),
  ``optimizer`` (the tutorial writes ``relax.optimizer.SGD``), ``build``, ``vm.build`` and
  ``VirtualMachine(ex, device=None, profile=False)``. ``profile`` is accepted for TVM's signature and ignored:
  relax-mlir's virtual machine has no profiler.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from . import compile as _compile
from . import op as _op
from . import script, training, transform
from .ir import BlockBuilder, Function, IRModule, TensorStructInfo, Var, const
# Importing the submodules makes them attributes of ``training`` (relax.training.utils, .loss, ...).
from .training import loss as _loss, optimizer as _optimizer, setup_trainer as _st, trainer as _tr  # noqa: F401
from .training import utils as _utils  # noqa: F401
from .training.trainer import NDArray

__all__ = ["script", "device", "cpu", "Device", "compile", "nd", "relax", "VirtualMachine"]


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


nd = types.ModuleType("relax_mlir.tvm.nd", "TVM's ``tvm.nd``: ``array(a)`` and ``NDArray``.")
nd.array, nd.NDArray = _array, NDArray


class VirtualMachine:
    """``relax.VirtualMachine(ex, device=None, profile=False)``: :func:`relax_mlir.VirtualMachine`, whose results
    (NumPy arrays, nested tuples for tuples) come back as :class:`NDArray` so that ``.numpy()`` works as in TVM.
    ``profile`` is accepted for TVM's signature and ignored: there is no profiler here."""

    def __init__(self, ex, device: Any = None, profile: bool = False):
        from . import VirtualMachine as _VM

        self.vm = _VM(ex, None if device is None else str(device))

    def __getitem__(self, name: str):
        func = self.vm[name]
        return lambda *args: _wrap(func(*args))

    def __contains__(self, name: str) -> bool:
        return name in self.vm

    def invoke(self, name: str, *args: Any) -> Any:
        return self[name](*args)


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
