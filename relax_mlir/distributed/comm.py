"""The few MPI operations data parallelism needs, on NumPy buffers (mpi4py's buffer interface: no pickling).

float16 and bfloat16 buffers are summed in float32 and rounded once (:func:`wire_dtype`): mpi4py refuses
ml_dtypes' bfloat16, and a float16 sum rounded after every addition would lose more. Broadcasts send bfloat16's
bits as uint16.

mpi4py is an optional dependency (``pip install relax-mlir[mpi]``); it is imported only when a communicator
is needed, so the rest of the package works without it.
"""

from __future__ import annotations

import sys
import zlib
from typing import Any, Sequence

import numpy as np

from ..ir.dtype import is_floating


def mpi():
    """The ``mpi4py.MPI`` module, or an ImportError saying how to install it."""
    try:
        from mpi4py import MPI
    except ImportError as exc:  # pragma: no cover - the dev extra installs it
        raise ImportError("relax_mlir.distributed needs mpi4py and an MPI library: pip install 'relax-mlir[mpi]' "
                          f"({exc})") from None
    return MPI


def world():
    return mpi().COMM_WORLD


def wire_dtype(dtype) -> np.dtype:
    """The dtype a sum of ``dtype`` values travels and accumulates in: float32 for the 2-byte floats (float16,
    bfloat16; PyTorch's "opmath" type for them), else ``dtype`` itself."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype.itemsize == 2 and is_floating(dtype) else dtype


def allreduce_in_place(comm, flat: np.ndarray, bucket_elems: int) -> None:
    """Sum ``flat`` over every rank, in place, in buckets of at most ``bucket_elems`` elements (views of
    ``flat``). Blocking calls, one bucket after another: Open MPI's non-blocking all-reduce (libnbc) took
    7.8 ms where the blocking one takes 1.3 ms for 8.4 MB between two ranks here. A float16/bfloat16 ``flat``
    is summed in float32 (:func:`wire_dtype`) and rounded back once."""
    MPI = mpi()
    if not (flat.ndim == 1 and flat.flags.c_contiguous and flat.flags.writeable):
        raise ValueError(f"allreduce_in_place: needs a writable contiguous 1-D buffer, got {flat.shape} "
                         f"(contiguous={flat.flags.c_contiguous}, writable={flat.flags.writeable})")
    wire = flat.astype(wire_dtype(flat.dtype), copy=False)
    for start in range(0, len(wire), bucket_elems):
        comm.Allreduce(MPI.IN_PLACE, wire[start:start + bucket_elems], MPI.SUM)
    if wire is not flat:
        flat[...] = wire


def any_rank(comm, flag: bool) -> bool:
    """True on every rank when ``flag`` is true on some rank (one 4-byte all-reduce)."""
    MPI = mpi()
    buf = np.array([int(flag)], np.int32)
    comm.Allreduce(MPI.IN_PLACE, buf, MPI.MAX)
    return bool(buf[0])


def broadcast(comm, arrays: Sequence[np.ndarray], root: int = 0) -> list[np.ndarray]:
    """``root``'s arrays on every rank (fresh contiguous copies, so no caller's buffer is overwritten), bit for
    bit."""
    out = [np.array(a, order="C", copy=True) for a in arrays]  # (ascontiguousarray makes 0-d arrays 1-d)
    for a in out:  # (bfloat16, kind "V", as unsigned integers of its size: mpi4py takes no bfloat16 buffer)
        comm.Bcast(a if a.dtype.kind in "biufc" else a.reshape(-1).view(f"u{a.dtype.itemsize}"), root=root)
    return out


def fingerprint(arrays: Sequence[np.ndarray]) -> int:
    """A CRC-32 of the arrays' bytes, shapes and dtypes: cheap (memory speed) and equal only for equal bits."""
    h = 0
    for a in arrays:
        a = np.asarray(a, order="C")
        h = zlib.crc32(f"{a.dtype.str}{a.shape}".encode(), h)
        h = zlib.crc32(a.reshape(-1).view(np.uint8), h)
    return h


def ranks_disagreeing(comm, value: Any) -> dict[Any, list[int]]:
    """``{value: [ranks]}`` when the ranks hold different values of ``value``; empty when all agree."""
    values = comm.allgather(value)
    groups: dict[Any, list[int]] = {}
    for rank, v in enumerate(values):
        groups.setdefault(v, []).append(rank)
    return groups if len(groups) > 1 else {}


_HOOKED = False


def abort_on_uncaught_exception(comm) -> None:
    """Make an uncaught exception on any rank print its traceback and abort the whole job (``MPI_Abort``),
    instead of leaving the other ranks waiting forever in their next collective. Installed once."""
    global _HOOKED
    if _HOOKED or comm.Get_size() == 1:
        return
    previous = sys.excepthook

    def hook(kind, value, tb):
        previous(kind, value, tb)
        sys.stderr.write(f"rank {comm.Get_rank()}: uncaught {kind.__name__}: aborting the MPI job\n")
        sys.stderr.flush()
        comm.Abort(1)

    sys.excepthook = hook
    _HOOKED = True


def abort(comm, message: str, code: int = 1) -> None:
    """Print ``message`` (prefixed with the rank) and end every rank of the job now."""
    sys.stderr.write(f"rank {comm.Get_rank()}/{comm.Get_size()}: {message}\n")
    sys.stderr.flush()
    if comm.Get_size() > 1:
        comm.Abort(code)


__all__ = ["mpi", "world", "wire_dtype", "allreduce_in_place", "any_rank", "broadcast", "fingerprint",
           "ranks_disagreeing", "abort_on_uncaught_exception", "abort"]
