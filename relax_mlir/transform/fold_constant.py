"""``FoldConstant``: an op call whose operands are all constants is computed now, with the op's NumPy reference
(the interpreter's), and becomes a constant.

    with R.dataflow():                                   with R.dataflow():
        a = R.add(R.const(1.0), R.const(2.0))    ->          a = R.const(3.0)
        b = R.multiply(x, a)                                 b = R.multiply(x, R.const(3.0))

Calls are folded in every block, dataflow or not, as TVM's pass does. Folding follows chains: a folded variable
counts as a constant further on (TVM follows only dataflow variables; a variable bound to a pure op's value on
constants is as constant, whatever its block), unless it is declared less precisely than the constant (``a:
R.Tensor(ndim=1)``), whose users' struct info was inferred from that declaration. The folded bindings stay for
``DeadCodeElimination`` to remove. Calls of impure ops, of host functions (``R.call_packed``) and of module
functions, and calls whose evaluation fails or gives a non-tensor are left as they are. So, as in TVM, is a
creation op giving more than 1024 elements (``R.zeros((2048,))``, ``R.arange``, ``R.full``: a call none of whose
arguments is a tensor): it costs little at run time, and as a constant it would make the program that much larger.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..ir.dtype import to_numpy
from ..ir.expr import Call, Constant, Expr, Function, SeqExpr, Tuple, Var, VarBinding
from ..ir.struct_info import TensorStructInfo
from ..op.registry import Op
from .pass_infra import FunctionPass
from .utils import rebind, substitute, with_body


MAX_CREATED_ELEMENTS = 1024  # TVM's threshold: a larger result of a call without tensor operands is not folded


@dataclass(frozen=True)
class FoldConstant(FunctionPass):
    """Compute op calls on constants at compile time (in every block).

    Example, applied as ``FoldConstant()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2,), "float32")):
                with R.dataflow():
                    a = R.add(R.const([1.0, 2.0], "float32"), R.const([10.0, 20.0], "float32"))
                    b = R.multiply(a, R.const(2.0, "float32"))
                    c = R.multiply(x, b)
                    R.output(c)
                return c

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
                with R.dataflow():
                    a: R.Tensor((2,), dtype="float32") = R.const([11.0, 22.0], "float32")
                    b: R.Tensor((2,), dtype="float32") = R.const([22.0, 44.0], "float32")
                    c: R.Tensor((2,), dtype="float32") = R.multiply(x, R.const([22.0, 44.0], "float32"))
                    R.output(c)
                return c
    """

    name = "FoldConstant"

    def transform_function(self, func: Function, mod, ctx) -> Function:
        if not isinstance(func.body, SeqExpr):
            return func
        remap: dict[Var, Expr] = {}
        blocks, changed = [], False
        for block in func.body.blocks:
            kept = []
            for b in block.bindings:
                value = substitute(b.value, remap)
                folded = _fold(value) if isinstance(b, VarBinding) else None
                if folded is not None:
                    value = folded
                    if b.var.struct_info == folded.struct_info:  # (users of a wider variable were inferred from it)
                        remap[b.var] = folded
                if value is not b.value:
                    changed = True
                kept.append(_keep_or_rebind(b, value))
            blocks.append(type(block)(kept))
        if not changed:
            return func
        body = SeqExpr(blocks, substitute(func.body.body, remap))
        return with_body(func, body)


def _keep_or_rebind(b, value: Expr):
    return b if value is b.value else rebind(b, value)


def _fold(value: Expr) -> Optional[Constant]:
    """``value`` computed, if it is a pure op's call on constants giving a tensor of a known dtype."""
    if not (isinstance(value, Call) and isinstance(value.op, Op) and value.op.pure and value.op.reference):
        return None
    if not isinstance(value.struct_info, TensorStructInfo) or value.struct_info.shape is None:
        return None
    if _large_creation(value):
        return None
    args = [_constant_value(a) for a in value.args]
    if any(a is None for a in args):
        return None
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            out = value.op.reference(*args, **value.attrs)
    except Exception:  # noqa: BLE001 - a call the reference cannot evaluate is left for run time
        return None
    if isinstance(out, tuple):
        return None
    out = np.asarray(out, dtype=to_numpy(value.struct_info.dtype))
    if out.shape != tuple(value.struct_info.shape):
        return None
    return Constant(out)


def _large_creation(call: Call) -> bool:
    """Whether ``call`` creates a tensor of more than ``MAX_CREATED_ELEMENTS`` elements from no tensor operand (a
    tensor, or a tuple literal holding one, counts: ``R.zeros_like`` of a constant is folded). ``R.full``'s fill
    value is an attribute here, so a large ``R.full`` is skipped, as TVM's rule means to (in TVM, where the fill
    value is a 0-d tensor operand, the rule lets it through)."""
    dims = tuple(call.struct_info.shape)
    if not all(isinstance(d, int) for d in dims) or int(np.prod(dims, dtype=object)) <= MAX_CREATED_ELEMENTS:
        return False
    return not any(_holds_tensor(a) for a in call.args)


def _holds_tensor(e: Expr) -> bool:
    if isinstance(e, Tuple):
        return any(_holds_tensor(f) for f in e.fields)
    return isinstance(e.struct_info, TensorStructInfo)


def _constant_value(e: Expr) -> Any:
    if isinstance(e, Constant):
        return e.data
    if isinstance(e, Tuple):
        fields = [_constant_value(f) for f in e.fields]
        return None if any(f is None for f in fields) else tuple(fields)
    return None
