"""Helpers for tests of relax-mlir and of code built on it."""

from __future__ import annotations

from typing import Union

from .ir import Function, IRModule
from .ir.structural_equal import assert_structural_equal
from .ir.well_formed import check_well_formed


def roundtrip(mod: Union[IRModule, Function]) -> Union[IRModule, Function]:
    """Print ``mod``, parse the text back, and check the result is structurally equal and well formed.

    Returns the parsed copy. Every module a test builds goes through this, so the printer and the parser
    are exercised on everything the project can produce.
    """
    from .script import from_source

    check_well_formed(mod)
    text = mod.script()
    again = from_source(text)
    assert_structural_equal(again, mod)
    check_well_formed(again)
    assert again.script() == text, "printing the parsed module gave different text"
    return again
