"""``T``: the one part of TVM's TIR namespace that Relax programs use (``from relax_mlir.script import tir as T``).

TVMScript declares a symbolic size with ``n = T.int64()``: in a function's body (TVM's printer writes one line per
size) or in Python, before the functions whose annotations name it (``R.Tensor((n, 4), "float32")``). The size is
named by the variable it is assigned to, as TVM's parser names it; sizes are int64 here, so ``T.int32()`` declares
the same kind. There is no TIR otherwise: ops lower to MLIR's linalg.
"""

from __future__ import annotations

import linecache
import re
import sys
import unicodedata

from ..ir import sym

#: ``n = T.int64()`` alone on its line (a comment may follow): ``n = T.int64(); m = T.int64()`` named both ``n``.
_ASSIGNMENT = re.compile(r"\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=\s*(?:[A-Za-z_]\w*\.)*int(?:64|32)\s*\([^()]*\)\s*(?:#.*)?$")


def _declared(kind: str) -> sym.SymDim:
    """The size named by the assignment on the caller's caller's line (``n = T.int64()``)."""
    frame = sys._getframe(2)
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno, frame.f_globals)
    match = _ASSIGNMENT.match(line)
    if match is None:
        raise TypeError(f"T.{kind}() declares a symbolic size named by the variable it is assigned to: write "
                        f"`n = T.{kind}()` on a line of its own (a constant dimension is written as a number)")
    return sym.SizeVar(unicodedata.normalize("NFKC", match.group(1)))  # the name Python gave the variable


def int64(is_size_var: bool = False) -> sym.SymDim:
    """``n = T.int64()``: ``n`` is the symbolic size ``n`` (``is_size_var``, TVM's promise that it is not
    negative, holds for every size here)."""
    return _declared("int64")


def int32(is_size_var: bool = False) -> sym.SymDim:
    """``n = T.int32()``: as :func:`int64` (sizes are int64 here)."""
    return _declared("int32")


__all__ = ["int64", "int32"]
