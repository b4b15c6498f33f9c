"""Keep freed memory in the process heap, so that a training step's large buffers are not page-faulted anew.

Compiled code ``malloc``s its temporaries (a wide layer's gradient is 4 MiB) and frees them at the end of the
call, and the runtime allocates the results with NumPy. glibc serves a large request with a fresh ``mmap`` and
gives it back to the system on ``free``, or trims the top of the heap once enough is free there: the next step
then takes a page fault (and a page cleared by the kernel) for every 4 KiB it touches. On the 1024-wide MLP
step that was a quarter of the time (24-27 ms a step before, 18.5-20.5 ms after, 2-core AMD EPYC).

``keep_freed_memory()`` raises glibc's mmap threshold to its maximum (32 MiB on 64-bit) and its trim threshold
to 1 GiB, once per process, the first time relax-mlir compiles or loads a module (from the disk cache or an
exported library): memory a step frees is reused by the next. Loading from the disk cache used to skip it: the
28x28 CNN step then took 23 ms instead of 6.5 (2-core AMD EPYC). This is what caching allocators in other frameworks do. ``RELAX_MLIR_KEEP_FREED_MEMORY=0`` turns it off;
on a C library other than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import os
import platform

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's upper bound on 64-bit (HEAP_MAX_SIZE / 2)
TRIM_THRESHOLD = 1024 * 1024 * 1024

_done = False


def keep_freed_memory() -> bool:
    """Tune glibc's malloc once (see the module docstring); returns whether it was done."""
    global _done
    if _done:
        return True
    if os.environ.get("RELAX_MLIR_KEEP_FREED_MEMORY", "1") == "0" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _done
