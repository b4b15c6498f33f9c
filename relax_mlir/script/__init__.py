"""The TVMScript-style front end: ``from relax_mlir.script import ir as I, relax as R``.

``from_source(text)`` parses a module or function from text; ``roundtrip(mod)`` prints, parses back and
checks the result is structurally equal and well formed.
"""

from . import ir, relax, tir
from .ir import ir_module
from .parser import ParseError, Parser, from_source

__all__ = ["ir", "relax", "tir", "ir_module", "from_source", "ParseError", "Parser"]
