"""Importers from other frameworks, as TVM's ``relax.frontend``: :mod:`.torch` (``from_exported_program``,
``from_fx``) and :mod:`.onnx` (``from_onnx``), also reachable here (``relax_mlir.frontend.from_fx``). PyTorch and
ONNX are optional dependencies (the ``torch`` and ``onnx`` extras), imported only when an importer is used."""

from .common import ImportedModel, UnsupportedOpsError

__all__ = ["ImportedModel", "UnsupportedOpsError", "from_exported_program", "from_fx", "from_onnx"]

_LAZY = {"from_exported_program": "torch", "from_fx": "torch", "from_onnx": "onnx"}


def __getattr__(name: str):
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
