"""Markers for op attribute defaults, shared by the op registry and the printer.

They live in ``ir/`` (not ``op/``) so the printer can tell a required attribute from an optional one without
importing the op registry, which itself imports the IR.
"""

from __future__ import annotations


class _Required:
    """The default of an attribute that every call must give (there is one instance, ``REQUIRED``)."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()
