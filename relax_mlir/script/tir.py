"""``T``: the one part of TVM's TIR namespace that Relax programs use (``from relax_mlir.script import tir as T``).

TVMScript declares a symbolic size with ``n = T.int64()``: in a function's body (TVM's printer writes one line per
size) or in Python, before the functions whose annotations name it (``R.Tensor((n, 4), "float32")``); several at once
are ``n, m = T.int64(), T.int64()``. The size is
named by the variable it is assigned to, as TVM's parser names it; sizes are int64 here, so ``T.int32()`` declares
the same kind. There is no TIR otherwise: ops lower to MLIR's linalg.
"""

from __future__ import annotations

import ast
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
    name = match.group(1) if match is not None else _tuple_target(frame, line)
    if name is None:
        raise TypeError(f"T.{kind}() declares a symbolic size named by the variable it is assigned to: write "
                        f"`n = T.{kind}()` on a line of its own, or `n, m = T.{kind}(), T.{kind}()` (a constant "
                        "dimension is written as a number)")
    return sym.SizeVar(unicodedata.normalize("NFKC", name))  # the name Python gave the variable


def _tuple_target(frame, line: str):
    """In ``n, m = T.int64(), T.int64()`` alone on its line (TVM's tests declare sizes so), the name the call
    ``frame`` is running is assigned to: the one at its place in the tuple, found by the call's columns (those of
    the instruction running, Python 3.11's positions). None for any other line."""
    indent = len(line) - len(line.lstrip())
    try:
        body = ast.parse(line.strip()).body
    except SyntaxError:
        return None
    if len(body) != 1 or not isinstance(body[0], ast.Assign) or len(body[0].targets) != 1:
        return None
    names, calls = body[0].targets[0], body[0].value
    if not (isinstance(names, ast.Tuple) and isinstance(calls, ast.Tuple) and len(names.elts) == len(calls.elts)
            and all(isinstance(n, ast.Name) for n in names.elts)
            and all(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr in ("int64", "int32")
                    for c in calls.elts)):
        return None
    positions = list(frame.f_code.co_positions())
    index = frame.f_lasti // 2  # (one position per 2-byte code unit)
    if index >= len(positions):
        return None
    _, _, start, end = positions[index]
    return next((n.id for n, c in zip(names.elts, calls.elts)
                 if (c.col_offset + indent, c.end_col_offset + indent) == (start, end)), None)


def int64(is_size_var: bool = False) -> sym.SymDim:
    """``n = T.int64()``: ``n`` is the symbolic size ``n`` (``is_size_var``, TVM's promise that it is not
    negative, holds for every size here)."""
    return _declared("int64")


def int32(is_size_var: bool = False) -> sym.SymDim:
    """``n = T.int32()``: as :func:`int64` (sizes are int64 here)."""
    return _declared("int32")


__all__ = ["int64", "int32"]
