"""Reading decorated Python objects back as source text, with the names visible where they were defined."""

from __future__ import annotations

import inspect
import textwrap
from typing import Any


def source_of(obj) -> tuple[str, str, int, int]:
    """The dedented source of a class or function, its file name, the line it starts on (0-based offset) and the
    columns the dedent took off (so that errors point at the file's columns)."""
    try:
        lines, start = inspect.getsourcelines(obj)
        filename = inspect.getsourcefile(obj) or "<unknown>"
    except (OSError, TypeError) as exc:
        raise ValueError(f"cannot read the source of {getattr(obj, '__qualname__', obj)!r} ({exc}); define it in a "
                         "file, or parse text with relax_mlir.script.from_source") from None
    text = textwrap.dedent("".join(lines))
    first = lines[0] if lines else ""
    margin = len(first) - len(first.lstrip()) - (len(text) - len(text.lstrip()))
    return text, filename, start - 1, margin


def caller_env(depth: int = 2) -> dict[str, Any]:
    """Globals and locals of the frame ``depth`` levels up (where a decorator was applied)."""
    frame = inspect.currentframe()
    try:
        for _ in range(depth):
            frame = frame.f_back
        return {**frame.f_globals, **frame.f_locals}
    finally:
        del frame


def in_class_body(depth: int = 2) -> bool:
    """True when the frame ``depth`` levels up is executing a class body."""
    frame = inspect.currentframe()
    try:
        for _ in range(depth):
            frame = frame.f_back
        return "__module__" in frame.f_locals and "__qualname__" in frame.f_locals
    finally:
        del frame
