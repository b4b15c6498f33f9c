"""The persistent compile cache: one shared library per compiled module, on disk, shared by every process.

Where: ``$RELAX_MLIR_CACHE_DIR``, else ``$XDG_CACHE_HOME/relax-mlir``, else ``~/.cache/relax-mlir``.
``RELAX_MLIR_CACHE=0`` turns it off. ``RELAX_MLIR_CACHE_SIZE`` bounds it (bytes, or with a K/M/G suffix;
default 256M): after each write the least recently used entries (oldest mtime; a hit touches its entry) are
removed until the rest fit. Deleting the directory clears it.

An entry is ``<key>.so``, a library file of ``library.py`` (ELF + metadata + checksum), written through a
temporary file and a rename, so processes compiling the same module at once each write a whole file and the
last rename wins. The key is the SHA-256 of everything the code depends on (:func:`cache_key`): the module's
printed Relax text (deterministic across processes, unlike Python's ``hash``), the pipeline options, the host
CPU (its features decide the code LLVM emits and the schedules' tile sizes), and the compiler (this package's
sources and the MLIR/LLVM library it uses). An entry that fails any check (truncated, not ours, another key,
a checksum mismatch) is ignored, counted in ``STATS["rejected"]`` and rebuilt, never loaded.
No C compiler to link with, or a directory that cannot be written: the cache is off, with one warning.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import json
import os
import platform
import re
import time
import warnings
from typing import Any, Mapping, Optional

from .library import LibraryError, SharedLibrary, find_linker, read_library, write_atomically

DEFAULT_SIZE = "256M"
STATS = {"hits": 0, "misses": 0, "rejected": 0, "stored": 0, "evicted": 0}
_STALE_TEMP_SECONDS = 3600.0
_warned: set[str] = set()
DISABLED = False  # set when writing failed: not retried in this process


def warn_once(reason: str) -> None:
    """One RuntimeWarning per reason per process: the cache being off is worth saying, not repeating."""
    if reason not in _warned:
        _warned.add(reason)
        warnings.warn(f"relax_mlir: the compile cache is off: {reason}", RuntimeWarning, stacklevel=3)


def cache_dir() -> str:
    """The cache directory (created on first write)."""
    explicit = os.environ.get("RELAX_MLIR_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "relax-mlir")


def enabled() -> bool:
    """Whether to use the cache: not turned off, a linker exists and ``$RELAX_MLIR_CACHE_SIZE`` reads (else one
    warning says why not). Checked before any compile, so a bad setting acts the same on a hit and on a miss."""
    if DISABLED or os.environ.get("RELAX_MLIR_CACHE", "1").strip() == "0":
        return False
    if find_linker() is None:
        warn_once("no C compiler driver to link libraries with (set $CC, or install cc)")
        return False
    try:
        size_limit()
    except ValueError as exc:
        warn_once(str(exc))
        return False
    return True


_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)([KMG]?)B?")


def size_limit() -> int:
    """``$RELAX_MLIR_CACHE_SIZE`` in bytes (default 256M; ``1.5G`` and ``256MB`` read too, an empty value is the
    default); ValueError for a malformed value."""
    text = os.environ.get("RELAX_MLIR_CACHE_SIZE", "").strip().upper() or DEFAULT_SIZE
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ValueError(f"RELAX_MLIR_CACHE_SIZE must be a number of bytes, optionally with K, M or G "
                         f"(like 256M or 1.5G), got {text!r}")
    number, unit = match.groups()
    return int(float(number) * {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(unit, 1))


# --- the key ---------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def compiler_fingerprint() -> str:
    """This package's sources (every .py and the IRDL dialect) and the MLIR library: a new compiler, a new key.

    A source file counts by its path, size and modification time (in nanoseconds), as Python's own bytecode cache
    tells a changed source: an edit, a checkout or an install rewrites the file and so gives a new key. Reading and
    hashing the 190 files instead cost 7 ms of every compile in a new process, warm ones included (twice
    what loading the cached library takes)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = hashlib.sha256()
    for rel in _sources(root):  # the lines glob("**/*.py") + os.stat + relpath gave, in 1 ms instead of 3-7
        st = os.stat(os.path.join(root, rel))
        digest.update(f"{rel} {st.st_size} {st.st_mtime_ns}\n".encode())
    from .runtime import runner_library_dir

    lib = os.path.join(runner_library_dir(), "libMLIR.so")
    if os.path.exists(lib):
        st = os.stat(lib)
        digest.update(f"libMLIR {st.st_size} {st.st_mtime_ns}".encode())
    return digest.hexdigest()


def _sources(root: str) -> list[str]:
    """Every ``*.py`` under ``root`` as a path relative to it, in the order of ``sorted(glob.glob(root/**/*.py,
    recursive=True))``: names starting with a dot skipped (files and directories, as glob does), symbolic links to
    directories followed (as glob does)."""
    found, stack = [], [root]
    while stack:
        directory = stack.pop()
        try:
            entries = os.scandir(directory)
        except OSError:  # (glob ignores a directory it cannot list)
            continue
        with entries:
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                if entry.name.endswith(".py"):  # (a directory so named too, as glob matches it)
                    found.append(entry.path)
                if entry.is_dir():
                    stack.append(entry.path)
    n = len(root) + 1
    return [path[n:] for path in sorted(found)]


@functools.lru_cache(maxsize=1)
def target_fingerprint() -> dict[str, Any]:
    """The host CPU as the code depends on it: the machine, its model and features, and the schedules' facts."""
    import dataclasses

    from .host import host_cpu

    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:  # the first processor's lines (the rest repeat them)
                key, _, value = line.partition(":")
                info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    model = info.get("model name", info.get("CPU part", ""))
    flags = " ".join(sorted((info.get("flags") or info.get("Features", "")).split()))
    return {"machine": platform.machine(), "model": model, "flags": flags,
            "host": dataclasses.asdict(host_cpu())}


def cache_key(relax_text: str, options: Mapping[str, Any]) -> str:
    """The entry name for a module's printed text compiled with ``options`` on this host by this compiler."""
    from .. import __version__

    parts = {"relax": relax_text, "options": dict(options), "target": target_fingerprint(),
             "compiler": compiler_fingerprint(), "version": __version__}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


# --- entries ---------------------------------------------------------------------------------------------------
def entry_path(key: str) -> str:
    return os.path.join(cache_dir(), f"{key}.so")


def lookup(key: str) -> Optional[tuple[SharedLibrary, dict[str, Any]]]:
    """The loaded library of ``key`` and its metadata, or None (no entry, or a bad one: ignored)."""
    path = entry_path(key)
    if not os.path.exists(path):
        STATS["misses"] += 1
        return None
    try:
        library, meta = read_library(path, expect_key=key)
    except (LibraryError, OSError):
        STATS["rejected"] += 1
        STATS["misses"] += 1
        return None
    try:
        os.utime(path)  # least recently used goes first
    except OSError:
        pass
    STATS["hits"] += 1
    return library, meta


def store(key: str, data: bytes) -> None:
    """Write an entry atomically, then evict down to the size limit."""
    os.makedirs(cache_dir(), exist_ok=True)
    write_atomically(entry_path(key), data)
    STATS["stored"] += 1
    evict(size_limit())


def evict(limit: int) -> None:
    """Remove the least recently used entries until the rest fit in ``limit`` bytes; and stale temporaries
    (a process killed mid-write). Safe against another process evicting at the same time."""
    entries = []
    now = time.time()
    for path in glob.glob(os.path.join(cache_dir(), "*.so")) + glob.glob(os.path.join(cache_dir(), ".tmp-*")):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            continue
        if os.path.basename(path).startswith(".tmp-"):
            if now - st.st_mtime > _STALE_TEMP_SECONDS:
                _remove(path)
            continue
        entries.append((st.st_mtime, st.st_size, path))
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= limit:
            break
        if _remove(path):
            STATS["evicted"] += 1
        total -= size


def _remove(path: str) -> bool:
    try:
        os.remove(path)  # a process that loaded it keeps its mapping
        return True
    except FileNotFoundError:
        return False
