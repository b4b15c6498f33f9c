"""``I``: the module namespace of the text format (``from relax_mlir.script import ir as I``)."""

from __future__ import annotations

from ._source import caller_env, caller_line, source_of


def ir_module(cls):
    """Class decorator: parse an ``@I.ir_module`` class of ``@R.function``s into an ``IRModule``."""
    from .parser import Parser

    if not isinstance(cls, type):
        raise TypeError(f"@I.ir_module decorates a class, got {type(cls).__name__}")
    text, filename, offset, margin = source_of(cls, caller_line(depth=2))
    return Parser(text, filename, offset, caller_env(depth=2), evaluate=True, col_offset=margin).parse()


def module_attrs(attrs: dict) -> None:
    """Inside an ``@I.ir_module`` class: module attributes (read by the parser; a no-op when run)."""
    if not isinstance(attrs, dict):
        raise TypeError(f"I.module_attrs takes a dict, got {type(attrs).__name__}")
