"""The OpenMP runtime parallel loops call, and how many threads compiled code uses.

Parallel tiles (``scf.forall``) become OpenMP regions (``convert-scf-to-openmp``), whose LLVM code calls the
``__kmpc_*`` entry points of an LLVM/Intel OpenMP runtime. One is looked for at run time, in order:

1. ``$RELAX_MLIR_OPENMP_LIB`` (a path);
2. ``libiomp5.so`` of the ``intel-openmp`` wheel (installed with relax-mlir on Linux x86-64), in this Python's
   prefix;
3. LLVM's ``libomp.so.5`` (Debian's ``libomp5``) or any ``libiomp5``/``libomp`` the system linker finds.

GNU's ``libgomp`` does not define the ``__kmpc_*`` entry points and is never used. When no runtime is found,
code is compiled single-threaded and one ``RuntimeWarning`` says so.

Threads: ``relax_mlir.compile(..., num_threads=N)``, else ``$RELAX_MLIR_NUM_THREADS``, else the cores this
process may run on.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import os
import sys
import warnings
from typing import Iterator

from .host import host_cpu


_ENTRY = "__kmpc_fork_call"


def _candidates() -> Iterator[str]:
    """Paths to try, in order; lazily, as ``find_library`` runs ``ldconfig`` (30 ms) and is rarely needed."""
    paths = [os.environ.get("RELAX_MLIR_OPENMP_LIB", "")]
    for prefix in dict.fromkeys([sys.prefix, sys.base_prefix, os.path.expanduser("~/.local")]):
        paths.append(os.path.join(prefix, "lib", "libiomp5.so"))
    paths += ["/usr/lib/x86_64-linux-gnu/libomp.so.5", "/usr/lib/aarch64-linux-gnu/libomp.so.5"]
    paths += sorted(glob.glob("/usr/lib/llvm-*/lib/libomp.so*"), reverse=True)
    yield from (p for p in paths if p)
    for name in ("iomp5", "omp"):
        found = ctypes.util.find_library(name)
        if found:
            yield found


@functools.lru_cache(maxsize=None)
def openmp_library() -> str | None:
    """The path of an OpenMP runtime that defines ``__kmpc_fork_call``, or None."""
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            continue
        try:
            if hasattr(ctypes.CDLL(path), _ENTRY):
                return path
        except OSError:
            continue
    return None


#: The most threads a compiled function may ask for (the OpenMP runtimes cap a team far below MLIR's 32-bit option).
MAX_THREADS = 1 << 16


def default_threads() -> int:
    """``$RELAX_MLIR_NUM_THREADS`` if set, else the number of cores this process may use."""
    text = os.environ.get("RELAX_MLIR_NUM_THREADS", "").strip()
    if not text:
        return host_cpu().cores
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"RELAX_MLIR_NUM_THREADS must be a positive integer, got {text!r}")
    return value


_warned = False


def resolve_threads(requested: int | None) -> int:
    """The threads compiled code will use: ``requested`` (or the default), or 1 without an OpenMP runtime."""
    global _warned
    threads = default_threads() if requested is None else requested
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"num_threads must be a positive integer, got {threads!r}")
    if threads > MAX_THREADS:  # MLIR's option is 32 bits; OpenMP runtimes refuse far fewer
        raise ValueError(f"num_threads must be at most {MAX_THREADS}, got {threads}")
    if threads > 1 and openmp_library() is None:
        if not _warned:
            _warned = True
            warnings.warn("relax_mlir: no OpenMP runtime found (install intel-openmp, or Debian's libomp5, or set "
                          "RELAX_MLIR_OPENMP_LIB): compiled code runs on one thread", RuntimeWarning, stacklevel=3)
        return 1
    return threads
