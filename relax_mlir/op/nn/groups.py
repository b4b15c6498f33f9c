"""Sizes grouped convolutions check at inference: what TVM's analyzer proves of a channel count and ``groups``."""

from __future__ import annotations

import math

from ...ir.sym import Dim


def never_divisible(d: Dim, g: int) -> bool:
    """Whether the size ``d`` is a multiple of ``g`` for no value of its variables: an int that is not, or a
    polynomial whose constant term the gcd of ``g`` and its other coefficients does not divide (``6 * oc + 4`` by 6:
    always 4 more than a multiple of 6), as TVM proves ``floormod(d, g) != 0``. Other symbolic sizes are assumed
    divisible and checked at run time."""
    if isinstance(d, int):
        return d % g != 0
    terms = dict(d.terms)
    constant = terms.pop((), 0)
    return constant % math.gcd(g, *terms.values()) != 0
