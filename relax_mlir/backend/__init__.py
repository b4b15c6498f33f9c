"""MLIR side of relax-mlir. Import the submodules directly (loading MLIR's bindings takes about 0.4 s):

* ``dialect``: the ``relax`` dialect, generated in IRDL from the op registry (``relax_mlir/dialects/relax.irdl.mlir``);
* ``export``: a Relax ``IRModule`` as relax-dialect MLIR (``func.func`` per function, tuples flattened);
* ``legalize``: TVM's LegalizeOps on the MLIR side: every relax op to linalg/tensor/arith/math by the rule its
  record names (``op.lowering``), families in ``legalize/*.py``;
* ``pipeline`` (named stages down to LLVM), ``schedule`` (matmul transform scripts);
* ``runtime``, ``callpath``, ``signature``, ``arguments``, ``bool_storage``: the ExecutionEngine and its calling convention;
  ``arguments``: the one argument policy (what is passed as is, converted once, or refused; no MLIR);
* ``build``: ``to_mlir``, ``compile`` (cached), ``Executable`` and ``VirtualMachine`` (``relax_mlir.compile``);
* ``disk_cache`` (the on-disk compile cache), ``library`` (linking and loading shared libraries, no MLIR),
  ``signature_json`` and ``nesting`` (what a library needs to be called without MLIR; ``relax_mlir.runtime``).
"""

__all__ = ["compile", "to_mlir", "Executable", "VirtualMachine", "load_compiler"]


def __getattr__(name: str):
    """``compile``, ``to_mlir``, ``Executable``, ``VirtualMachine`` and ``load_compiler`` from ``build``, loaded on
    first use."""
    if name in __all__:
        from . import build as _build

        return {"compile": _build.build, "to_mlir": _build.to_mlir, "Executable": _build.Executable,
                "VirtualMachine": _build.VirtualMachine, "load_compiler": _build.load_compiler}[name]
    raise AttributeError(f"module 'relax_mlir.backend' has no attribute {name!r}")
