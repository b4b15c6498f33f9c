"""Attribute values: the marker for op attribute defaults, shared by the op registry and the printer, and the form
every attribute is stored in (``freeze_attr``), shared by the op registry and the BlockBuilder.

They live in ``ir/`` (not ``op/``) so the printer and the BlockBuilder need not import the op registry, which itself
imports the IR.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class _Required:
    """The default of an attribute that every call must give (there is one instance, ``REQUIRED``)."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()


def freeze_attr(value: Any) -> Any:
    """An attribute value as ops and functions store theirs: sequences as tuples, NumPy scalars as Python numbers,
    nested too (dict keys included); attributes then compare structurally, print (``np.True_`` is no bool the text
    writes) and read back as the same values."""
    if isinstance(value, (list, tuple)):
        return tuple(freeze_attr(v) for v in value)
    if isinstance(value, dict):
        return {freeze_attr(k): freeze_attr(v) for k, v in value.items()}
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value
