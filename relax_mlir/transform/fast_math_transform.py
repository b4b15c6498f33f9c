"""``FastMathTransform``: the expensive nonlinear functions replaced by fast approximations, as TVM's pass of that
name (which swaps in ``topi.fast_tanh``/``fast_erf``/``fast_exp``):

    y = R.tanh(x)            ->    y = R.fast_tanh(x)
    z = R.erf(x)                   z = R.fast_erf(x)
    g = R.nn.gelu(x)               g = x * 0.5 * (1 + R.fast_erf(x * 0.70710678))   (one op a binding)

``tanh`` and ``erf`` of float32 and half-float tensors become ``relax.fast_tanh``/``relax.fast_erf`` (rational
functions within 4.8e-7 of the exact ones, see ``relax_mlir.op.fast_math``); ``nn.gelu`` and ``nn.gelu_tanh`` of
float32 tensors are written out with them. Float64 is left exact. ``exp`` (and what uses it: ``sigmoid``,
``softmax``, ``silu``) is not touched: its float32 lowering already is a vectorized polynomial within 1 ulp, as fast
as TVM's ``fast_exp`` and more accurate.

What it changes is the IR, not the compiled speed: the backend already compiles every float32 ``tanh`` and ``erf``
to these rational functions (``backend/schedule/math_approx.py``, as XLA does; a libm call per element does not
vectorize). After the pass the approximation is explicit, so the reference interpreter computes the values the
compiled code does (to float32 rounding) instead of the exact functions. Tests compare with the exact functions
at 2e-6.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import op
from ..dpl import is_op, wildcard
from ..ir.struct_info import TensorStructInfo
from ..op import grad_utils as gu
from .rewrite_pass import CallRewritePass

_FAST_DTYPES = ("float32", "float16", "bfloat16")


def _dtype(e) -> str:
    sinfo = getattr(e, "struct_info", None)
    return sinfo.dtype if isinstance(sinfo, TensorStructInfo) else ""


def _gelu(x):
    c = lambda v: gu.scalar(v, x)  # noqa: E731
    return x * c(0.5) * (c(1.0) + op.fast_erf(x * c(1.0 / math.sqrt(2.0))))


def _gelu_tanh(x):
    c = lambda v: gu.scalar(v, x)  # noqa: E731
    inner = c(math.sqrt(2.0 / math.pi)) * (x + c(0.044715) * (x * x * x))
    return x * c(0.5) * (c(1.0) + op.fast_tanh(inner))


@dataclass(frozen=True)
class FastMathTransform(CallRewritePass):
    """Replace ``tanh``, ``erf`` and the GELUs by fast rational approximations (TVM's ``FastMathTransform``).

    Example, applied as ``FastMathTransform()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((4,), "float32"), d: R.Tensor((4,), "float64")):
                y = R.tanh(x)
                z = R.erf(d)
                return (y, z)

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((4,), dtype="float32"),
                d: R.Tensor((4,), dtype="float64"),
            ) -> R.Tuple(R.Tensor((4,), dtype="float32"), R.Tensor((4,), dtype="float64")):
                y: R.Tensor((4,), dtype="float32") = R.fast_tanh(x)
                z: R.Tensor((4,), dtype="float64") = R.erf(d)
                return (y, z)
    """

    name = "FastMathTransform"

    def rules(self, func):
        x = wildcard()

        def swap(fast, dtypes=_FAST_DTYPES):
            return lambda expr, m: fast(m[x]) if _dtype(m[x]) in dtypes else expr

        return [(is_op("relax.tanh")(x), swap(op.fast_tanh)),
                (is_op("relax.erf")(x), swap(op.fast_erf)),
                (is_op("relax.nn.gelu")(x), swap(_gelu, ("float32",))),
                (is_op("relax.nn.gelu_tanh")(x), swap(_gelu_tanh, ("float32",)))]
