"""Importers from other frameworks, as TVM's ``relax.frontend``: :mod:`.torch` (``from_exported_program``) and
:mod:`.onnx` (``from_onnx``). PyTorch and ONNX are optional dependencies (the ``torch`` and ``onnx`` extras),
imported only when an importer is called."""

from .common import ImportedModel, UnsupportedOpsError

__all__ = ["ImportedModel", "UnsupportedOpsError"]
