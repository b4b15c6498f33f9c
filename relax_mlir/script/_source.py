"""Reading decorated Python objects back as source text, with the names visible where they were defined."""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
from typing import Any, Callable, Optional


def source_of(obj, where: Optional[tuple[str, int]] = None) -> tuple[str, str, int, int]:
    """The dedented source of a class or function, its file name, the line it starts on (0-based offset) and the
    columns the dedent took off (so that errors point at the file's columns). For a class, ``where`` is the file and
    line its decorator was applied at (``caller_line``): Python 3.11 finds a class's source by its name, the first
    class of that name in the file, and a file may define two (``class Module`` twice: the second was built from
    the first's text)."""
    try:
        found = _class_lines(obj, *where) if isinstance(obj, type) and where is not None else None
        filename = where[0] if found else inspect.getsourcefile(obj) or "<unknown>"
        lines, start = found or inspect.getsourcelines(obj)
    except (OSError, TypeError) as exc:
        raise ValueError(f"cannot read the source of {getattr(obj, '__qualname__', obj)!r} ({exc}); define it in a "
                         "file, or parse text with relax_mlir.script.from_source") from None
    text = textwrap.dedent("".join(lines))
    first = lines[0] if lines else ""
    margin = len(first) - len(first.lstrip()) - (len(text) - len(text.lstrip()))
    return text, filename, start - 1, margin


def _class_lines(cls: type, filename: str, line: int) -> Optional[tuple[list[str], int]]:
    """The lines of the class ``cls`` defined in ``filename`` whose decorators or ``class`` line hold ``line``, and
    its first line (1-based, its first decorator's); None if the file does not parse or has no such class."""
    lines = linecache.getlines(filename)
    try:
        tree = ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            if first <= line <= node.lineno and node.end_lineno is not None:
                return lines[first - 1:node.end_lineno], first
    return None


def _read_frame(depth: int, read: Callable[[Any], Any]) -> Any:
    """``read`` of the frame ``depth`` levels above the function calling this one."""
    frame = inspect.currentframe()
    try:
        for _ in range(depth + 1):
            frame = frame.f_back
        return read(frame)
    finally:
        del frame


def caller_line(depth: int = 2) -> tuple[str, int]:
    """The file and line the frame ``depth`` levels up is executing (where a decorator is applied)."""
    return _read_frame(depth, lambda frame: (frame.f_code.co_filename, frame.f_lineno))


def caller_env(depth: int = 2) -> dict[str, Any]:
    """Globals and locals of the frame ``depth`` levels up (where a decorator was applied)."""
    return _read_frame(depth, lambda frame: {**frame.f_globals, **frame.f_locals})


def in_class_body(depth: int = 2) -> bool:
    """True when the frame ``depth`` levels up is executing a class body."""
    return _read_frame(depth, lambda frame: "__module__" in frame.f_locals and "__qualname__" in frame.f_locals)
