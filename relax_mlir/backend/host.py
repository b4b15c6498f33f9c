"""What the schedules need to know about the CPU that runs the code: vector width, caches, cores.

Read at run time from the host (``/proc/cpuinfo`` flags, ``/sys/devices/system/cpu/cpu0/cache``,
``os.sched_getaffinity``), never from the machine a figure was measured on: this project's machines are an
Intel CPU with AMX one day and an AMD EPYC with AVX-512 another, and tile sizes follow from these facts.

    host = host_cpu()
    host.vector_bits, host.l1d_bytes, host.l2_bytes, host.cores    # 512, 32768, 1048576, 2

``RELAX_MLIR_VECTOR_BITS`` overrides the vector width, ``RELAX_MLIR_L1D_BYTES`` and ``RELAX_MLIR_L2_BYTES`` the
cache sizes (for tests that show the schedule of another machine: the same IR on every host).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform

#: Sizes used when the host does not say (a common x86-64 core).
_DEFAULT_L1D, _DEFAULT_L2 = 32 * 1024, 1024 * 1024


@dataclasses.dataclass(frozen=True)
class HostCPU:
    """The facts a schedule derives its tile sizes from."""

    vector_bits: int     # widest SIMD register the code may use: 512 (AVX-512), 256 (AVX2), 128 (SSE, NEON)
    vector_registers: int  # architectural SIMD registers: 32 with AVX-512 or NEON, 16 otherwise
    l1d_bytes: int
    l2_bytes: int
    cores: int           # cores this process may run on

    def lanes(self, element_bits: int) -> int:
        """Elements of ``element_bits`` in one vector register."""
        return max(1, self.vector_bits // max(element_bits, 8))


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _vector_bits(flags: set[str]) -> int:
    forced = os.environ.get("RELAX_MLIR_VECTOR_BITS")
    if forced:
        if forced not in ("128", "256", "512"):
            raise ValueError(f"RELAX_MLIR_VECTOR_BITS must be 128, 256 or 512, got {forced!r}")
        return int(forced)
    if "avx512f" in flags:
        return 512
    if "avx2" in flags or "avx" in flags:
        return 256
    return 128


def _size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


def _forced_size(var: str) -> int | None:
    forced = os.environ.get(var)
    if not forced:
        return None
    try:
        size = _size(forced)
    except ValueError:
        size = 0
    if size <= 0:
        raise ValueError(f"{var} must be a positive size in bytes (e.g. 32768 or 32K), got {forced!r}")
    return size


def _cache_sizes() -> tuple[int, int]:
    l1d, l2 = _host_cache_sizes()
    return _forced_size("RELAX_MLIR_L1D_BYTES") or l1d, _forced_size("RELAX_MLIR_L2_BYTES") or l2


def _host_cache_sizes() -> tuple[int, int]:
    l1d, l2 = _DEFAULT_L1D, _DEFAULT_L2
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = sorted(e for e in os.listdir(root) if e.startswith("index"))
    except OSError:
        return l1d, l2
    for entry in entries:
        try:
            with open(os.path.join(root, entry, "level")) as f:
                level = int(f.read())
            with open(os.path.join(root, entry, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(root, entry, "size")) as f:
                size = _size(f.read())
        except (OSError, ValueError):
            continue
        if level == 1 and kind == "Data":
            l1d = size
        elif level == 2 and kind in ("Unified", "Data"):
            l2 = size
    return l1d, l2


@functools.lru_cache(maxsize=None)
def host_cpu() -> HostCPU:
    """The host's facts, read once per process."""
    flags = _cpu_flags()
    bits = _vector_bits(flags)
    registers = 32 if bits == 512 or platform.machine() in ("aarch64", "arm64") else 16
    l1d, l2 = _cache_sizes()
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return HostCPU(bits, registers, l1d, l2, max(1, cores))
