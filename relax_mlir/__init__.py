"""relax-mlir: TVM Relax's training workflow on MLIR, in Python."""

from . import ir, op, transform
from .ir import *  # noqa: F401,F403

__version__ = "0.1.0"

_INTERPRETER = ("get_global_func", "interpret", "register_func")


def __getattr__(name: str):
    """The reference interpreter's names, imported on first use (a warm ``relax-mlir train`` never runs it), and
    the package's modules (``relax_mlir.analysis``, ``.script``, ...), which importing the interpreter used to make
    attributes as a side effect."""
    import importlib
    import importlib.util

    if name in _INTERPRETER:
        value = getattr(importlib.import_module(f"{__name__}.interpreter"), name)
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


# The MLIR backend is imported on first use: loading MLIR's bindings costs about 0.4 s.
def to_mlir(mod, stage: str = "relax", function=None, options=None) -> str:
    """MLIR text of ``mod`` at ``stage`` (relax, linalg, fused, scheduled, bufferized, llvm); see
    :mod:`relax_mlir.backend.build`."""
    from .backend.build import to_mlir as _to_mlir

    return _to_mlir(mod, stage, function, options)


def compile(mod, target: str = "cpu", opt_level: int = 2, options=None,  # noqa: A001 - TVM's name (relax.build)
            num_threads=None, checks=None):
    """Compile every function of ``mod`` to native code: an ``Executable`` for :class:`VirtualMachine`.

    ``num_threads``: threads large ops may be split across (default ``$RELAX_MLIR_NUM_THREADS`` or every core
    of this process); small ops stay on one thread whatever it is. ``checks=False`` turns the runtime index
    checks off (see ``PipelineOptions.checks``: memory stays safe, an out-of-range index is not reported)."""
    from .backend.build import build

    return build(mod, target, opt_level, options, num_threads=num_threads, checks=checks)


build = compile  # TVM spells it relax.build


def VirtualMachine(ex, device=None):  # noqa: N802 - TVM's name; a function so that MLIR loads lazily
    """Run an ``Executable``: ``VirtualMachine(ex)["main"](*arrays)``; see :mod:`relax_mlir.backend.build`."""
    from .backend.build import VirtualMachine as _VM

    return _VM(ex, device)
