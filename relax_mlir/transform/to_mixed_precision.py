"""``ToMixedPrecision``: matmuls and convolutions read float16 (or bfloat16) operands and accumulate in float32, as
TVM's pass of that name with its default ``out_dtype="float32"``:

    y = R.matmul(x, w)      ->    lv = R.astype(x, "float16")
                                  lv1 = R.astype(w, "float16")
                                  y = R.matmul(lv, lv1, out_dtype="float32")

TVM's "always" list here is ``matmul``, ``conv1d``, ``conv2d`` and ``conv2d_transpose`` (the ops with an
``out_dtype``); every other op keeps its float32 inputs and outputs. A value cast once is reused within its binding
block. Parameters named in ``fp16_input_names`` arrive in the low precision already: their type becomes
``dtype`` and the other ops read them through one cast back to float32 at the top of the function. With
``out_dtype="float16"`` the products themselves are rounded to the low precision and cast back to float32 at once
(TVM instead keeps the elementwise ops after them in float16). A call with an ``out_dtype`` of its own (float64)
gets the pass's too, and its result is cast to the dtype it had, as TVM casts it back for its users.
``dtype="bfloat16"`` (relax-mlir's option) uses bfloat16 instead of float16. Compiled, float16 operands use the
CPU's f16 conversions and bfloat16 is emulated through float32 (MLIR's ``arith-emulate-unsupported-floats``); sums
are float32 in every case.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .. import op
from ..ir.expr import BindingBlock, Call, DataflowBlock, DataflowVar, Function, MatchCast, SeqExpr, Var, VarBinding
from ..op.registry import get_op
from ..ir.struct_info import TensorStructInfo
from .rewrite_pass import FunctionRewritePass
from .utils import name_list_option, rebind, substitute

#: The ops computed in low precision (with float32 sums).
ALWAYS = frozenset({"relax.matmul", "relax.nn.conv1d", "relax.nn.conv2d", "relax.nn.conv2d_transpose"})
_LOW = ("float16", "bfloat16")


def _float32(e) -> bool:
    sinfo = getattr(e, "struct_info", None)
    return isinstance(sinfo, TensorStructInfo) and sinfo.dtype == "float32"


@dataclass(frozen=True)
class ToMixedPrecision(FunctionRewritePass):
    """Compute matmuls and convolutions from float16 (or bfloat16) operands (TVM's ``ToMixedPrecision``).

    Example, applied as ``ToMixedPrecision()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((4, 3), "float32")):
                with R.dataflow():
                    y = R.matmul(x, w)
                    z = R.nn.relu(y)
                    R.output(z)
                return z

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((2, 4), dtype="float32"),
                w: R.Tensor((4, 3), dtype="float32"),
            ) -> R.Tensor((2, 3), dtype="float32"):
                with R.dataflow():
                    x_f16: R.Tensor((2, 4), dtype="float16") = R.astype(x, "float16")
                    w_f16: R.Tensor((4, 3), dtype="float16") = R.astype(w, "float16")
                    y: R.Tensor((2, 3), dtype="float32") = R.matmul(x_f16, w_f16, out_dtype="float32")
                    z: R.Tensor((2, 3), dtype="float32") = R.nn.relu(y)
                    R.output(z)
                return z
    """

    name = "ToMixedPrecision"
    out_dtype: str = "float32"
    fp16_input_names: Optional[tuple[str, ...]] = None
    dtype: str = "float16"

    def __post_init__(self):
        if self.dtype not in _LOW:
            raise ValueError(f"ToMixedPrecision: dtype must be one of {', '.join(_LOW)}, got {self.dtype!r}")
        if self.out_dtype not in ("float32", self.dtype):
            raise ValueError(f"ToMixedPrecision: out_dtype must be 'float32' or {self.dtype!r}, got {self.out_dtype!r}")
        object.__setattr__(self, "fp16_input_names",
                           name_list_option("ToMixedPrecision(fp16_input_names)", self.fp16_input_names,
                                            "input names"))

    def rewrite_function(self, func: Function) -> Function:
        low_inputs = set(self.fp16_input_names or ())
        params, remap, low_params, prologue = [], {}, {}, []
        for p in func.params:
            if p.name_hint in low_inputs and _float32(p):
                low = Var(p.name_hint, TensorStructInfo(p.struct_info.shape, self.dtype), span=p.span)
                back = op.astype(low, "float32")
                high = Var(f"{p.name_hint}_f32", back.struct_info)
                prologue.append(VarBinding(high, back))
                remap[p], low_params[high] = high, low
                params.append(low)
            else:
                params.append(p)
        blocks, changed = [], bool(prologue)
        for block in func.body.blocks:
            new = self._block(block, remap, low_params)
            changed |= new is not block
            blocks.append(new)
        if not changed:
            return func
        if prologue:
            blocks.insert(0, BindingBlock(prologue))
        body = SeqExpr(blocks, substitute(func.body.body, remap))
        return Function(params, body, func.ret_struct_info, func.attrs, func.is_pure, span=func.span)

    def _block(self, block, remap: dict, low_params: dict):
        make = DataflowVar if isinstance(block, DataflowBlock) else Var
        casts: dict[Var, Var] = {}
        out, changed = [], False
        for b in block.bindings:
            value = substitute(b.value, remap) if remap else b.value
            if isinstance(b, MatchCast) or not (isinstance(value, Call) and getattr(value.op, "name", "") in ALWAYS
                                                and any(_float32(a) for a in value.args)):
                if value is not b.value:
                    changed = True
                    b = rebind(b, value)
                out.append(b)
                continue
            args = []
            for a in value.args:
                if a in low_params:
                    args.append(low_params[a])
                elif isinstance(a, Var) and _float32(a):
                    if a not in casts:
                        cast = op.astype(a, self.dtype)
                        casts[a] = make(f"{a.name_hint}_{'f16' if self.dtype == 'float16' else 'bf16'}",
                                        cast.struct_info)
                        out.append(VarBinding(casts[a], cast))
                    args.append(casts[a])
                elif _float32(a):
                    args.append(op.astype(a, self.dtype))
                else:
                    args.append(a)
            attrs = {**dict(value.attrs), "out_dtype": self.out_dtype}
            low = get_op(value.op.name)(*args, **attrs)
            dtype = value.struct_info.dtype  # float32, or an explicit out_dtype: what the binding's users read
            if low.struct_info.dtype == dtype:
                out.append(VarBinding(b.var, low, span=b.span))
            else:
                lv = make(f"{b.var.name_hint}_{self.out_dtype}", low.struct_info)
                out += [VarBinding(lv, low), VarBinding(b.var, op.astype(lv, dtype), span=b.span)]
            changed = True
        return type(block)(out) if changed else block

