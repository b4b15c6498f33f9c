"""Run a compiled module without the compiler: ``load_module`` needs NumPy and ctypes, never MLIR.

    ex = relax_mlir.compile(train_mod)                    # on the machine with MLIR
    ex.export_library("step.so")                          # or: relax-mlir export train.py -o step.so

    from relax_mlir.runtime import load_module            # anywhere with NumPy (same CPU features, Linux)
    step = load_module("step.so")
    loss, params, states, optim = step["update_params"](x, *params, y, *optim)

A loaded function takes and returns what the ``VirtualMachine``'s does (NumPy arrays, nested tuples for tuple
parameters and results) and checks its arguments the same way before native code runs. The file is checked
(format, checksum) before it is loaded. Code compiled with threads needs the OpenMP runtime it was linked
with (found through the library's rpath, else ``LD_LIBRARY_PATH``).
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["load_module"]


def load_module(path: str | os.PathLike) -> Any:
    """Load a library written by ``Executable.export_library``: a module of its functions (``lib["f"](...)``,
    ``lib.function_names``, ``lib.metadata``). ValueError if the file is not one or is damaged."""
    from .backend.library import LibraryError, LoadedModule, read_library
    from .backend.nesting import check_tree
    from .backend.signature_json import signature_from_json

    path = os.fspath(path)
    try:
        library, meta = read_library(path)
    except LibraryError as exc:
        raise ValueError(str(exc)) from None
    functions = meta.get("functions")
    if not isinstance(functions, dict) or not all(isinstance(f, dict) for f in functions.values()):
        raise ValueError(f"{path}: the library's metadata lists no functions")
    signatures = {name: signature_from_json(f.get("signature")) for name, f in functions.items()}
    structures = {name: {"param_names": [str(n) for n in f.get("param_names", [])],
                         "param_trees": [check_tree(t, f"{path}: {name} parameter {i}")
                                         for i, t in enumerate(f.get("param_trees", []))],
                         "result_tree": check_tree(f.get("result_tree"), f"{path}: {name} result")}
                  for name, f in functions.items()}
    return LoadedModule(library, signatures, meta.get("check_messages", []), structures, meta)
