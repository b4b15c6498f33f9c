"""``I``: the module namespace of the text format (``from relax_mlir.script import ir as I``)."""

from __future__ import annotations

from . import _vdevice
from ._source import caller_env, caller_line, source_of


def ir_module(cls=None, *, check_well_formed: bool = True, s_tir: bool = False):
    """Class decorator: parse an ``@I.ir_module`` class of ``@R.function``s into an ``IRModule``. As in TVM,
    ``@I.ir_module(check_well_formed=False)`` leaves the result unchecked; ``s_tir`` (TVM's TIR semantics for the
    module's ``T.prim_func``s, of which there are none here) is accepted and dropped. The parser reads both from
    the decorator's text."""
    if cls is None:  # @I.ir_module(...): Python applies the decorator this returns, from the class's scope
        return _parse_class
    return _parse_class(cls)


def _parse_class(cls):
    from .parser import Parser

    if not isinstance(cls, type):
        raise TypeError(f"@I.ir_module decorates a class, got {type(cls).__name__}")
    # depth 3: _parse_class, called by ir_module or by Python applying it, called from the class's scope
    text, filename, offset, margin = source_of(cls, caller_line(depth=3))
    return Parser(text, filename, offset, caller_env(depth=3), evaluate=True, col_offset=margin).parse()


def module_attrs(attrs: dict) -> None:
    """Inside an ``@I.ir_module`` class: module attributes (read by the parser; a no-op when run)."""
    if not isinstance(attrs, dict):
        raise TypeError(f"I.module_attrs takes a dict, got {type(attrs).__name__}")


def module_global_infos(infos: dict) -> None:
    """Inside an ``@I.ir_module`` class: TVM's module-level declarations, ``{"vdevice": [I.vdevice("llvm")]}`` (read
    and checked by the parser, which keeps no vdevice: the host CPU is the only device; a no-op when run)."""
    if not isinstance(infos, dict):
        raise TypeError(f"I.module_global_infos takes a dict, got {type(infos).__name__}")


def vdevice(target=None, vdevice_id: int = 0, memory_scope: str = "global") -> tuple:
    """``I.vdevice("llvm")``: a virtual device of ``I.module_global_infos``; only the host CPU's is accepted."""
    _vdevice.check_memory_scope(memory_scope, "I.vdevice")
    return (_vdevice.target_kind(target, "I.vdevice"), vdevice_id, memory_scope)
