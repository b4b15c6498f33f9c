"""Fast approximate ``tanh`` and ``erf`` (``relax.fast_tanh``, ``relax.fast_erf``), what ``FastMathTransform``
rewrites ``tanh``, ``erf`` and the GELUs to (TVM's ``topi.fast_tanh``/``fast_erf`` play this part there).

Each is a rational function of ``x`` on a clamped input, ``x * (p(x²) / q(x²))``, written once over a scalar
builder (:func:`rational`) so that the lowering (MLIR ``arith`` ops, which LLVM vectorizes) and the NumPy reference
compute the same function. The backend compiles float32 ``tanh``/``erf`` to the same functions
(``backend/schedule/math_approx.py``; a libm call per element would not vectorize): compiled, ``fast_tanh`` and
``tanh`` agree; these ops make the approximation visible in the IR, so that the interpreter computes it too.

* ``fast_tanh``: ``x`` clamped to [-9, 9] (``tanh(±9)`` rounds to ±1 in float32), numerator of degree 13 and
  denominator of degree 6 (the coefficients of Eigen's float ``tanh``, which TVM's ``fast_tanh`` and XLA use).
* ``fast_erf``: ``x`` clamped to [-4, 4] (``erf(±4)`` rounds to ±1), degree 13 over degree 8 (Eigen's float ``erf``).

Accuracy, measured compiled in float32 against the float64 functions over every float32 input: ``fast_tanh``
within 4.0e-7 absolute (6.7 ulp at worst, at 5.857; under 3.6 ulp for |x| < 0.5), ``fast_erf`` within 4.8e-7
(8.0 ulp at worst, at 3.203; under 3.8 for |x| < 0.5) (a grid of 2^20 points of [-10, 10] had found 3.6e-7 and
4.3e-7);
``tests/py/backend/test_math_approx.py`` asserts 8 ulp and 5e-7. NaN stays NaN (the clamp propagates it). In
float64 the same rational function is computed (its result clamped to [-1, 1]), so the error stays about 4e-7:
these are float32 approximations
(``FastMathTransform`` rewrites only float32 and half floats). The gradients are the exact functions' (``1 - y²``
for ``fast_tanh``, ``2/√π·exp(-x²)`` for ``fast_erf``).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from . import grad_utils as gu
from .unary import exp, square, unary

#: Numerator (odd, highest power first, of x²; times x) and denominator (of x²) coefficients, and the clamp.
TANH = ((-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
         1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03),
        (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03), 9.0)
ERF = ((-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
        -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02),
       (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
        -1.42647390514189e-02), 4.0)


class NumpyScalars:
    """The scalar builder's operations used by :func:`rational`, on NumPy arrays (the reference's builder)."""

    @staticmethod
    def add(a, b): return np.add(a, b)  # noqa: E704 - a table of one-line forwards

    @staticmethod
    def mul(a, b): return np.multiply(a, b)  # noqa: E704

    @staticmethod
    def div(a, b): return np.divide(a, b)  # noqa: E704

    @staticmethod
    def min(a, b): return np.minimum(a, b)  # noqa: E704

    @staticmethod
    def max(a, b): return np.maximum(a, b)  # noqa: E704


def rational(b, x, numerator: Sequence[float], denominator: Sequence[float], bound: float):
    """``x·(p(x²)/q(x²))`` with ``x`` first clamped to ``[-bound, bound]``, by Horner's rule, with the builder ``b``
    (the backend's ``ScalarBuilder`` or :class:`NumpyScalars`); the result clamped to [-1, 1], where ``tanh`` and
    ``erf`` stay (in float64 the approximation of ``erf(10)`` was 1.0000000494; float32 rounds it to 1)."""
    x = b.min(b.max(x, -bound), bound)
    x2 = b.mul(x, x)
    p = numerator[0]
    for c in numerator[1:]:
        p = b.add(b.mul(x2, p), c)
    q = denominator[0]
    for c in denominator[1:]:
        q = b.add(b.mul(x2, q), c)
    return b.min(b.max(b.mul(x, b.div(p, q)), -1.0), 1.0)  # not (x p) / q: x p underflows for tiny x


def _reference(coefficients):
    return lambda x: rational(NumpyScalars, x, *coefficients)


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

fast_tanh = unary("fast_tanh", _reference(TANH), low=-10.0, high=10.0,
                  scalar=lambda b, x: rational(b, x, *TANH),
                  grad=lambda y, call, g: [g * (gu.scalar(1, y) - y * y)],
                  doc="``tanh`` by a vectorizable rational approximation (within 4.0e-7 in float32); see "
                      "``relax_mlir.op.fast_math``.")
fast_erf = unary("fast_erf", _reference(ERF), low=-5.0, high=5.0,
                 scalar=lambda b, x: rational(b, x, *ERF),
                 grad=lambda y, call, g: [g * (gu.scalar(_TWO_OVER_SQRT_PI, y) * exp(-square(call.args[0])))],
                 doc="``erf`` by a vectorizable rational approximation (within 4.8e-7 in float32); see "
                     "``relax_mlir.op.fast_math``.")
