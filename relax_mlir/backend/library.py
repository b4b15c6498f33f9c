"""Compiled code as a shared library: link the engine's object code with the system linker, and load it back
with ``ctypes`` alone (no MLIR). Used by the on-disk cache (``disk_cache.py``) and by
``Executable.export_library`` / ``relax_mlir.runtime.load_module``.

A library file is an ordinary ELF shared object followed by a trailer the dynamic loader ignores (it maps
only what the ELF program headers name)::

    [ELF shared object][metadata JSON][u64 JSON length][u64 ELF length][16-byte MAGIC]

The metadata holds the SHA-256 of the ELF part, each function's signature and tuple structure, and the
runtime-check messages. One file, so it is written with one atomic rename and can never be half of one
version and half of another. :func:`read_library` checks the magic, the lengths and the checksum before anything
is loaded; the bytes checked are the bytes loaded (copied into an in-memory file, ``memfd_create``, and
``dlopen``ed from there).

Linking: ``$CC`` or ``cc``/``gcc``/``clang`` with ``-shared``. The engine emits the large code model, whose
absolute relocations in text make the library relocate its code at load time (``-z notext``); ``-Bsymbolic``
binds the library's calls to its own functions even where another loaded library has a function of the same
name (``main``, ``predict``). ``memrefCopy`` (the one runner-utility function generated code calls) is compiled
into the library from the C below, so the library needs no MLIR; another runner function, if any, is linked
from the runner library (with an rpath), as is the OpenMP runtime.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import json
import os
import shutil
import struct
import subprocess
import tempfile
from typing import Any, Mapping, Optional, Sequence, Union

from .._files import write_atomically as _write_atomically
from .error_slot import find_slot
from .heap import keep_freed_memory
from .nesting import callable_for
from .runtime import CompiledFunction, CompiledModule

MAGIC = b"relax-mlir-lib01"
_TRAILER = struct.Struct("<QQ16s")
FORMAT = 2  # 2: the checksum covers the metadata too

#: ``memrefCopy(elem_size, src, dst)`` of MLIR's C runner utilities, written here: copies a strided ranked
#: memref (given as an unranked descriptor {rank, ranked descriptor*}) into another of the same shape.
MEMREF_COPY_C = r"""
#include <stdint.h>
#include <string.h>
typedef struct { int64_t rank; void *descriptor; } Unranked;
typedef struct { char *allocated; char *aligned; int64_t offset; int64_t sizes_strides[]; } Ranked;
__attribute__((visibility("hidden"))) void memrefCopy(int64_t size, Unranked *src, Unranked *dst) {
  int64_t rank = src->rank, index[64] = {0};
  Ranked *s = (Ranked *)src->descriptor, *d = (Ranked *)dst->descriptor;
  const int64_t *sizes = s->sizes_strides, *ss = s->sizes_strides + rank, *ds = d->sizes_strides + rank;
  char *sp = s->aligned + s->offset * size, *dp = d->aligned + d->offset * size;
  if (rank > 64) __builtin_trap();
  for (int64_t r = 0; r < rank; ++r) if (sizes[r] == 0) return;
  int64_t n = 1, dense = 1;
  for (int64_t r = rank - 1; r >= 0; --r) { dense &= ss[r] == n && ds[r] == n; n *= sizes[r]; }
  if (dense) { memcpy(dp, sp, n * size); return; }
  for (;;) {
    int64_t so = 0, dof = 0;
    for (int64_t r = 0; r < rank; ++r) { so += index[r] * ss[r]; dof += index[r] * ds[r]; }
    memcpy(dp + dof * size, sp + so * size, size);
    int64_t r = rank - 1;
    while (r >= 0 && ++index[r] == sizes[r]) index[r--] = 0;
    if (r < 0) return;
  }
}
"""


class LibraryError(RuntimeError):
    """A library file that is not one of ours, or is damaged: never loaded."""


class LinkError(RuntimeError):
    """The system linker failed or is missing; the message has its output."""


# --- linking ---------------------------------------------------------------------------------------------------
def find_linker() -> Optional[str]:
    """The C compiler driver that links: ``$CC``, else the first of cc, gcc, clang on PATH; None if none."""
    for name in (os.environ.get("CC", ""), "cc", "gcc", "clang"):
        found = shutil.which(name) if name else None
        if found:
            return found
    return None


#: Whether to link with GNU gold when it is installed: the driver's default (GNU ld, through collect2) took 23 ms to
#: link the tutorial MLP's training module, gold 15 ms (2-core Intel Xeon), 3% of a cold build. A link gold fails
#: is tried again with the default, which is then used for the rest of the process.
_USE_GOLD = [True]


def link_shared(object_paths: Union[str, Sequence[str]], out_path: str, libraries: Sequence[str] = (),
                memref_copy: bool = False) -> None:
    """Link ``object_paths`` (one path or several) into the shared library ``out_path`` with ``libraries`` (paths,
    found at load time through an rpath to their directories); ``memref_copy`` compiles :data:`MEMREF_COPY_C` in."""
    linker = find_linker()
    if linker is None:
        raise LinkError("no C compiler driver to link with (set $CC, or install cc/gcc/clang)")
    objects = [object_paths] if isinstance(object_paths, str) else list(object_paths)
    with tempfile.TemporaryDirectory(prefix="relax-mlir-link-") as tmp:
        command = [linker, "-shared", "-o", out_path, *objects, "-Wl,-z,notext", "-Wl,-Bsymbolic", "-Wl,--as-needed"]
        if memref_copy:
            source = os.path.join(tmp, "memref_copy.c")
            with open(source, "w", encoding="ascii") as f:
                f.write(MEMREF_COPY_C)
            command[4:4] = ["-O2", "-fPIC", source]
        for lib in libraries:
            command += [lib, f"-Wl,-rpath,{os.path.dirname(os.path.abspath(lib))}"]
        command.append("-lm")
        done = None
        if _USE_GOLD[0] and shutil.which("ld.gold"):
            done = subprocess.run(command[:1] + ["-fuse-ld=gold"] + command[1:], capture_output=True, text=True)
            _USE_GOLD[0] = done.returncode == 0
        if done is None or done.returncode != 0:
            done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise LinkError(f"linking {out_path} failed ({' '.join(command)}):\n{done.stderr.strip()}")


_LIBC_NAMES = ("libc.so.6", "libm.so.6")


def libraries_for(llvm_module: Any) -> tuple[list[str], bool]:
    """What linking ``llvm_module``'s code needs: the libraries defining the functions it calls that libc/libm do
    not (the runner libraries, and the OpenMP runtime, which ``--as-needed`` drops if unused), and whether
    ``memrefCopy`` must be compiled in. Raises LinkError naming a function nothing defines."""
    from .openmp import openmp_library
    from .runtime import _RUNNER_LIBS, _external_symbols, runner_library_dir

    external = set(_external_symbols(llvm_module))
    libc = [ctypes.CDLL(name) for name in _LIBC_NAMES]
    missing = {s for s in external - {"memrefCopy"} if not any(hasattr(c, s) for c in libc)}
    libraries = [lib for lib in [openmp_library()] if lib]
    for lib in (os.path.join(runner_library_dir(), name) for name in _RUNNER_LIBS):
        found = {s for s in missing if os.path.exists(lib) and hasattr(ctypes.CDLL(lib), s)}
        if found:
            libraries.append(lib)
            missing -= found
    if missing:
        raise LinkError(f"compiled code calls functions no library defines: {', '.join(sorted(missing))}")
    return libraries, "memrefCopy" in external


def write_objects(directory: str, objects: Sequence[bytes]) -> list[str]:
    """Write object files' bytes as ``part<i>.o`` in ``directory``; their paths."""
    paths = []
    for i, data in enumerate(objects):
        paths.append(os.path.join(directory, f"part{i}.o"))
        with open(paths[-1], "wb") as f:
            f.write(data)
    return paths


def link_objects(objects: Sequence[bytes], libraries: Sequence[str], memref_copy: bool) -> bytes:
    """The shared library (ELF bytes) linked of ``objects`` (object files' bytes)."""
    with tempfile.TemporaryDirectory(prefix="relax-mlir-obj-") as tmp:
        paths = write_objects(tmp, objects)
        out = os.path.join(tmp, "module.so")
        link_shared(paths, out, libraries, memref_copy)
        with open(out, "rb") as f:
            return f.read()


def link_module(compiled: Any, out_path: str) -> None:
    """Write a ``CompiledModule``'s code as the shared library ``out_path``: the library it runs from when
    compiled natively (``native.py``), else its object code (``dump_object``) linked with ``memrefCopy`` compiled
    in if called, the runner libraries for any other external function, and the OpenMP runtime."""
    elf = getattr(compiled.engine, "elf", None)
    if elf is not None:
        with open(out_path, "wb") as f:
            f.write(elf)
        return
    libraries, memref_copy = libraries_for(compiled._llvm_module)
    with tempfile.TemporaryDirectory(prefix="relax-mlir-obj-") as tmp:
        obj = os.path.join(tmp, "module.o")
        compiled.dump_object(obj)
        link_shared(obj, out_path, libraries, memref_copy)


# --- the file format -------------------------------------------------------------------------------------------
def _checksum(elf, meta: Mapping[str, Any]) -> str:
    """The sha256 of the code and of the metadata (without its checksum entry), as written: the signatures in the
    metadata say how large the arrays the code reads are, so a damaged one is as unsafe as damaged code."""
    digest = hashlib.sha256(elf)
    digest.update(json.dumps({k: v for k, v in meta.items() if k != "sha256"}, sort_keys=True).encode())
    return digest.hexdigest()


def pack_library(elf: bytes, metadata: Mapping[str, Any]) -> bytes:
    """The library file's bytes: ``elf`` and ``metadata`` (plus the format and the checksum of both)."""
    meta = dict(metadata, format=FORMAT)
    meta["sha256"] = _checksum(elf, meta)
    text = json.dumps(meta, sort_keys=True).encode()
    return elf + text + _TRAILER.pack(len(text), len(elf), MAGIC)


def unpack_library(data: bytes, where: str) -> dict[str, Any]:
    """The metadata of a library file's bytes, after checking them all; LibraryError says what is wrong."""
    if len(data) < _TRAILER.size:
        raise LibraryError(f"{where}: not a relax-mlir library (too short: {len(data)} bytes)")
    n_meta, n_elf, magic = _TRAILER.unpack_from(data, len(data) - _TRAILER.size)
    if magic != MAGIC:
        raise LibraryError(f"{where}: not a relax-mlir library (no {MAGIC.decode()} trailer)")
    if n_meta + n_elf + _TRAILER.size != len(data) or not data.startswith(b"\x7fELF"):
        raise LibraryError(f"{where}: damaged relax-mlir library (its lengths do not add up to {len(data)} bytes)")
    try:
        meta = json.loads(data[n_elf:n_elf + n_meta])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LibraryError(f"{where}: damaged relax-mlir library (metadata: {exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise LibraryError(f"{where}: relax-mlir library of another format "
                           f"({meta.get('format') if isinstance(meta, dict) else '?'}; this reads {FORMAT})")
    if _checksum(memoryview(data)[:n_elf], meta) != meta.get("sha256"):
        raise LibraryError(f"{where}: damaged relax-mlir library (checksum mismatch)")
    return meta


def write_atomically(path: str, data: bytes, where: str = "write", expected: str = "a file name") -> None:
    """Write ``data`` to ``path`` atomically (``relax_mlir._files``): readers see all or nothing."""
    _write_atomically(path, lambda f: f.write(data), where, expected)


# --- loading ---------------------------------------------------------------------------------------------------
class SharedLibrary:
    """A loaded library; ``raw_lookup(name)`` is the address of the packed wrapper ``_mlir_<name>``, as with
    the ExecutionEngine (so ``error_slot.find_slot`` works on either). ``data``: the file's bytes, as checked."""

    def __init__(self, handle: ctypes.CDLL, path: str, data: bytes):
        self.handle, self.path, self.data = handle, path, data

    def raw_lookup(self, name: str) -> int:
        try:
            return ctypes.cast(self.handle[f"_mlir_{name}"], ctypes.c_void_p).value or 0
        except AttributeError:
            return 0


def read_library(path: str, expect_key: Optional[str] = None) -> tuple[SharedLibrary, dict[str, Any]]:
    """Read, check (:func:`unpack_library`; and that its metadata's ``key`` is ``expect_key`` when given) and
    load the library at ``path``: (library, metadata)."""
    with open(path, "rb") as f:
        data = f.read()
    meta = unpack_library(data, path)
    if expect_key is not None and meta.get("key") != expect_key:
        raise LibraryError(f"{path}: a library of another module (key {meta.get('key')!r})")
    digest = hashlib.sha256(data).digest()
    handle = _LOADED.get(digest)
    if handle is None:
        handle = _LOADED[digest] = _dlopen_bytes(data, path)
    return SharedLibrary(handle, path, data), meta


# Loaded libraries are never unloaded: code of theirs may still run (an OpenMP runtime they alone pulled in would
# go with them, under its sleeping threads). The same bytes loaded again reuse the first load, so a module dropped
# and compiled again from the on-disk cache costs nothing more; each different module keeps its mapping (about
# its file's size) until exit.
_LOADED: dict[bytes, ctypes.CDLL] = {}
_KEEP: list[Any] = []  # the in-memory files behind loaded libraries: their names must stay unique


def _dlopen_bytes(data: bytes, path: str) -> ctypes.CDLL:
    """``dlopen`` exactly ``data`` (the bytes checked), from an in-memory file named after ``path`` (as
    ``/proc/self/maps`` shows it). Never ``path`` itself: the file may have been replaced since it was read, and
    the loader returns the library already loaded under a name instead of loading a new file of that name."""
    try:
        fd = os.memfd_create(f"relax-mlir:{path}"[-240:], 0)
        name = f"/proc/self/fd/{fd}"
    except (AttributeError, OSError):  # not Linux: a private temporary file, kept until exit
        fd, name = tempfile.mkstemp(prefix="relax-mlir-", suffix=".so")
        atexit.register(os.remove, name)
    with os.fdopen(os.dup(fd), "wb") as f:
        f.write(data)
    try:
        handle = ctypes.CDLL(name)
    except OSError as exc:
        os.close(fd)
        raise LibraryError(f"{path}: cannot be loaded: {exc}") from None
    _KEEP.append(fd)  # an open fd keeps /proc/self/fd/N from naming another library
    return handle


class LoadedModule(CompiledModule):
    """Every function of a loaded library, by name, as a ``CompiledModule``: ``mod["main"](...)``.

    ``structures`` (per function: ``param_names``, ``param_trees``, ``result_tree``; see ``nesting.py``) makes
    each function take and return nested tuples as the ``VirtualMachine``'s do; without it they are flat."""

    def __init__(self, library: SharedLibrary, signatures: Mapping[str, Any], check_messages: Sequence[str] = (),
                 structures: Optional[Mapping[str, Mapping[str, Any]]] = None, metadata: Optional[dict] = None):
        keep_freed_memory()  # a module from the disk cache or an exported library never went through compile
        self.engine = library  # the owner CompiledFunction keeps alive
        self.path, self.metadata = library.path, dict(metadata or {})
        self.check_messages = list(check_messages)
        # a library written before the slot's fourth word says nothing of it: three
        words = self.metadata.get("error_slot_words", 3)
        self.error_slot = find_slot(library, words) if self.check_messages else None
        self.functions: dict[str, Any] = {}
        for name, sig in signatures.items():
            address = library.raw_lookup(name)
            if not address:
                raise LibraryError(f"{library.path}: no function _mlir_{name}")
            function = CompiledFunction(sig, address, self)
            self.functions[name] = function if structures is None else callable_for(name, compiled=function,
                                                                                     **structures[name])

    @property
    def function_names(self) -> list[str]:
        return list(self.functions)

    def __contains__(self, name: str) -> bool:
        return name in self.functions

    @property
    def llvm_text(self) -> str:
        raise RuntimeError(f"{self.path}: a loaded library has no LLVM text (Executable.llvm_text lowers again)")

    def dump_object(self, path: str) -> None:
        raise RuntimeError(f"{self.path}: a loaded library has no object code to dump; it is linked already")

    def __repr__(self) -> str:
        return f"<LoadedModule {self.path}: {', '.join(self.functions)}>"
