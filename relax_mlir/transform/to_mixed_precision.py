"""``ToMixedPrecision``: a float32 model computed in float16 (or bfloat16) where TVM's pass of that name computes in
it, with its op categories and its rules for where each value is kept.

Each op is in one of three categories, as in TVM:

* **always**: ``matmul``, ``conv1d``, ``conv2d``, ``conv2d_transpose`` and ``nn.attention``. The operands are
  cast to the low precision and the call gets the pass's ``out_dtype`` (the sums' dtype, float32 by default). The
  result is then stored in the low precision: with ``out_dtype="float32"`` it is cast down at once.
* **follow**: the elementwise math, comparisons and logic (``add``, ``relu``, ``silu``, ``exp``, ...), the
  normalizations (``layer_norm``, ``group_norm``, ``rms_norm``), ``dropout``, the poolings, the creation ops
  ``full``/``ones``/``zeros``/``arange``, ``astype`` and the reshaping and slicing ops. Such an op runs in the low
  precision when every input already is (or is a constant that fits in it), else in float32, its low inputs cast up.
* **never**: every other op (``softmax``, ``log_softmax``, the reductions, ``take``, ``where``, ``batch_norm``, ...),
  calls of functions and host calls. They read each input at its original dtype, cast back where needed.

Only dataflow blocks are rewritten so (TVM's rule): what leaves a block (an ``R.output`` variable) and what a plain
block computes keeps its original dtype, so the function's signature does not change. Plain blocks (relax-mlir's
extension; TVM leaves them) get the products only, each cast back to its dtype at once. A parameter (or value) that
only products read is cast to the low precision once, at the top of the block (after its binding). Other casts are
made where a value is read, as TVM makes them (no cast is shared: fusion takes each into its consumer).

    y = R.matmul(x, w)      ->    x_f16 = R.astype(x, "float16")
    z = R.nn.relu(y)              w_f16 = R.astype(w, "float16")
                                  lv = R.matmul(x_f16, w_f16, out_dtype="float32")
                                  y = R.astype(lv, "float16")
                                  lv1 = R.nn.relu(y)
                                  z = R.astype(lv1, "float32")       (z an output of the block)

``out_dtype="float16"`` rounds the products themselves. Parameters named in ``fp16_input_names`` arrive in the low
precision: their type becomes ``dtype`` and each use reads them as the rules above say. A product with an
``out_dtype`` of its own (float64) is cast back to that dtype, not stored low (relax-mlir's extension: TVM's
result would not be well formed). ``dtype="bfloat16"`` (relax-mlir's option) uses bfloat16 in place of float16
throughout. Ops TVM does not have (``log2``, ``fast_tanh``, ...) are "never".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from .. import op
from ..ir.block_builder import function_result_struct_info
from ..ir.expr import (BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr, Function, SeqExpr, Tuple,
                       TupleGetItem, Var, VarBinding)
from ..ir.struct_info import StructInfo, TensorStructInfo, TupleStructInfo, is_base_of
from ..ir.visitor import ExprMutator
from ..op.registry import Op
from .rewrite_pass import FunctionRewritePass
from .utils import free_vars, name_list_option, substitute

#: Computed from low-precision operands, with ``out_dtype`` sums (TVM's "always").
ALWAYS = frozenset({"relax.matmul", "relax.nn.conv1d", "relax.nn.conv2d", "relax.nn.conv2d_transpose",
                    "relax.nn.attention"})
#: In the low precision when all inputs are (TVM's "follow"); any op in neither set is "never".
FOLLOW = frozenset("relax." + name for name in (
    "abs acos acosh asin asinh atan atanh bitwise_not ceil cos cosh erf exp floor isfinite isinf isnan log "
    "logical_not negative round rsqrt sigmoid sign sin sinh sqrt square tan tanh trunc "
    "nn.relu nn.gelu nn.gelu_tanh nn.silu "
    "add subtract multiply divide floor_divide power mod floor_mod minimum maximum equal not_equal greater "
    "greater_equal less less_equal logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor "
    "nn.layer_norm nn.group_norm nn.rms_norm nn.dropout nn.max_pool2d nn.avg_pool2d nn.adaptive_avg_pool2d "
    "full full_like ones zeros arange astype strided_slice broadcast_to concat expand_dims flatten permute_dims "
    "reshape split squeeze").split())
_LOW = ("float16", "bfloat16")
#: The largest finite value of each low precision: a constant within it may join a low-precision "follow" op.
_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38}
#: Constants' dtypes whose range is checked (TVM's list); others never join a low-precision op uncast.
_RANGE_CHECKED = ("float32", "float64", "int8", "int16", "int32", "int64")

#: How a value is used, backwards from its uses: only by products (LOW) or also elsewhere (HIGH); None if unused.
#: A tuple's is a tuple of its fields'.
LOW_USE, HIGH_USE = "low", "high"
Use = Union[None, str, tuple]
Target = Union[None, str, tuple]  # a dtype for every tensor (str), per field (tuple), or keep (None)


@dataclass(frozen=True)
class ToMixedPrecision(FunctionRewritePass):
    """Compute a float32 model in float16 (or bfloat16) where TVM's ``ToMixedPrecision`` does.

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
                    lv: R.Tensor((2, 3), dtype="float32") = R.matmul(x_f16, w_f16, out_dtype="float32")
                    y: R.Tensor((2, 3), dtype="float16") = R.astype(lv, "float16")
                    lv1: R.Tensor((2, 3), dtype="float16") = R.nn.relu(y)
                    z: R.Tensor((2, 3), dtype="float32") = R.astype(lv1, "float32")
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
        return _Rewriter(self, func).run()


def _op_name(call: Call) -> str:
    return call.op.name if isinstance(call.op, Op) else ""


def _dtypes(sinfo: Optional[StructInfo]) -> Target:
    """The dtype of every tensor in ``sinfo``, shaped as it (None for what is no tensor)."""
    if isinstance(sinfo, TensorStructInfo):
        return sinfo.dtype
    if isinstance(sinfo, TupleStructInfo):
        return tuple(_dtypes(f) for f in sinfo.fields)
    return None


def _field(tree, i: int):
    return tree[i] if isinstance(tree, tuple) else tree


def _merge(a: Use, b: Use) -> Use:
    """Two uses of one value: low only if both are (an unknown use takes the other)."""
    if a is None or b is None:
        return b if a is None else a
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return tuple(_merge(x, y) for x, y in zip(a, b))
    return LOW_USE if a == b == LOW_USE else HIGH_USE


class _Rewriter(ExprMutator):
    """One function's rewrite. ``var_remap_`` maps each variable to its current version, which may have the low
    dtype; ``visit_var_`` (every read outside "always"/"follow" calls and tuples) casts it back."""

    def __init__(self, options: ToMixedPrecision, func: Function):
        super().__init__()
        self.low, self.out_dtype, self.func = options.dtype, options.out_dtype, func
        self.tag = "f16" if self.low == "float16" else "bf16"
        self.float_dtypes = ("float32", self.low)
        self.local_functions = 0  # > 0 inside a local function, which is left as it is (its captures cast back)
        names = set(options.fp16_input_names or ())
        self.params = [self._low_param(p) if p.name_hint in names and self._float32(p) else p for p in func.params]
        self.uses = self._collect_uses()

    def run(self) -> Function:
        func = self.func
        for old, new in zip(func.params, self.params):
            if new is not old:
                self.var_remap_[old] = new
        body = self.visit_expr(func.body)
        if body is func.body and all(a is b for a, b in zip(self.params, func.params)):
            return func
        if not isinstance(body.body, (Var, Constant, Tuple)):  # a low parameter returned: bind its cast back
            result = Var("gv", body.body.struct_info)
            body = SeqExpr([*body.blocks, BindingBlock([VarBinding(result, body.body)])], result)
        ret = func.ret_struct_info
        new_ret = function_result_struct_info(self.params, body.body)
        # As TVM: the declared return type stays unless the new body says more (a static shape for ``ndim=4``).
        if ret is None or not is_base_of(new_ret, ret):
            ret = new_ret
        return Function(self.params, body, ret, func.attrs, func.is_pure, span=func.span)

    def _low_param(self, p: Var) -> Var:
        """A parameter named in ``fp16_input_names``: the same tensor, arriving in the low precision."""
        return Var(p.name_hint, TensorStructInfo(p.struct_info.shape, self.low, p.struct_info.ndim), span=p.span)

    # -- which calls are products, and how each value is used -----------------------------------------------
    def _float32(self, e: Expr) -> bool:
        return isinstance(e.struct_info, TensorStructInfo) and e.struct_info.dtype == "float32"

    def _is_product(self, call: Call) -> bool:
        """An "always" call of float tensors (an integer matmul stays as it is)."""
        return _op_name(call) in ALWAYS and isinstance(call.struct_info, TensorStructInfo) and all(
            isinstance(a.struct_info, TensorStructInfo) and a.struct_info.dtype in self.float_dtypes
            for a in call.args)

    def _collect_uses(self) -> dict[Var, Use]:
        """Every variable's use, from the function's end backwards (a tuple's use passes to its fields). A plain
        block's reads are high: what it reads is not cast down in the dataflow block before it."""
        uses: dict[Var, Use] = {}

        def use(e: Expr, how: Use):
            if how is None:
                return
            if isinstance(e, Var):
                uses[e] = _merge(uses.get(e), how)
            elif isinstance(e, Tuple):
                for i, f in enumerate(e.fields):
                    use(f, _field(how, i))

        def high(e: Expr):
            for v in free_vars(e):
                uses[v] = HIGH_USE

        high(self.func.body.body)
        for block in reversed(self.func.body.blocks):
            for b in reversed(block.bindings):
                value = b.value
                if not isinstance(block, DataflowBlock) or not isinstance(b, VarBinding):
                    high(value)
                elif isinstance(value, Call) and self._is_product(value):
                    for a in value.args:
                        use(a, LOW_USE)
                elif isinstance(value, Tuple):
                    use(value, uses.get(b.var))
                elif isinstance(value, TupleGetItem) and isinstance(value.tuple_value.struct_info, TupleStructInfo):
                    n = len(value.tuple_value.struct_info.fields)
                    use(value.tuple_value, tuple(uses.get(b.var) if i == value.index else None for i in range(n)))
                else:
                    high(value)
        return uses

    # -- casts --------------------------------------------------------------------------------------------------
    def _changes(self, sinfo: Optional[StructInfo], target: Target) -> bool:
        if target is None:
            return False
        if isinstance(sinfo, TensorStructInfo):
            return isinstance(target, str) and sinfo.dtype in self.float_dtypes and sinfo.dtype != target
        if isinstance(sinfo, TupleStructInfo):
            return any(self._changes(f, _field(target, i)) for i, f in enumerate(sinfo.fields))
        return False

    def _convert(self, e: Expr, target: Target) -> Expr:
        """``e`` with its float32 and low tensors cast to ``target`` (nested casts, bound when normalized)."""
        if not self._changes(e.struct_info, target):
            return e
        if isinstance(e.struct_info, TensorStructInfo):
            return op.astype(e, target)
        fields = e.fields if isinstance(e, Tuple) else [TupleGetItem(e, i) for i in range(len(e.struct_info.fields))]
        return Tuple([self._convert(f, _field(target, i)) for i, f in enumerate(fields)])

    def _current(self, e: Expr) -> Expr:
        """``e`` with each variable's current version, in whatever dtype it has now."""
        return substitute(e, self.var_remap_)

    def _fits_low(self, e: Expr) -> bool:
        """May ``e`` be read by a low-precision "follow" op (TVM's test): no tensor, a low tensor, a constant within
        the low range, or a tuple of such."""
        if isinstance(e, Tuple):
            return all(self._fits_low(f) for f in e.fields)
        sinfo = e.struct_info
        if isinstance(sinfo, TupleStructInfo):
            return False
        if not isinstance(sinfo, TensorStructInfo) or sinfo.dtype == self.low:
            return True
        if isinstance(e, Constant) and sinfo.dtype in _RANGE_CHECKED:
            with np.errstate(invalid="ignore"):
                return not np.any(np.abs(e.data.astype(np.float64)) > _MAX[self.low])
        return False

    def _store_low(self, var: Var) -> None:
        """Cast ``var`` down once, now, when products are its only readers (TVM's ``CastIfFp16Only``)."""
        def low_leaves(how: Use) -> Target:
            return tuple(low_leaves(h) for h in how) if isinstance(how, tuple) else self.low if how == LOW_USE else None

        current = self.var_remap_.get(var, var)
        cast = self._convert(current, low_leaves(self.uses.get(var)))
        if cast is not current:
            self.var_remap_[var] = self.emit(cast, f"{var.name_hint}_{self.tag}")

    # -- rewriting ----------------------------------------------------------------------------------------------
    def visit_var_(self, var: Var) -> Expr:
        return self._convert(self.var_remap_.get(var, var), _dtypes(var.struct_info))

    def visit_function_(self, func: Function) -> Expr:
        self.local_functions += 1
        try:
            return super().visit_function_(func)
        finally:
            self.local_functions -= 1

    def visit_dataflow_block_(self, block: DataflowBlock) -> BindingBlock:
        if self.local_functions:
            return super().visit_dataflow_block_(block)
        saved = {p: self.var_remap_.get(p) for p in self.func.params}

        def rebuild():
            for p in self.func.params:
                self._store_low(p)
            for b in block.bindings:
                self.visit_binding(b)

        _, bindings = self._in_block(True, rebuild)
        for p, before in saved.items():  # a parameter's cast is the block's own
            if before is None:
                self.var_remap_.pop(p, None)
            else:
                self.var_remap_[p] = before
        if len(bindings) == len(block.bindings) and all(a is b for a, b in zip(bindings, block.bindings)):
            return block
        return DataflowBlock(bindings)

    def visit_binding(self, binding) -> None:
        if self.local_functions:
            return super().visit_binding(binding)
        value = binding.value
        if not isinstance(binding, VarBinding):
            super().visit_binding(binding)
        elif isinstance(value, Call) and self._is_product(value):
            self._emit(binding, self._product(value, binding.var))
        elif not self._dataflow:
            super().visit_binding(binding)
        elif isinstance(value, Call) and _op_name(value) in FOLLOW:
            self._emit(binding, self._follow(value))
        elif isinstance(value, (Tuple, TupleGetItem)):
            self._emit(binding, self._current(value))
        else:
            super().visit_binding(binding)
        if self._dataflow:
            self._store_low(binding.var)

    def _product(self, call: Call, var: Var) -> Expr:
        """An "always" call from low operands with the pass's ``out_dtype``, its result stored in the low precision
        (or, for what leaves the block or a float64 result, cast back to its dtype)."""
        args = [self._convert(self._current(a), self.low) for a in call.args]
        attrs = dict(call.attrs)
        if "out_dtype" in call.op.attrs:
            attrs["out_dtype"] = self.out_dtype
        result = self.normalize(Call(call.op, args, attrs, span=call.span))
        dtype = var.struct_info.dtype if isinstance(var.struct_info, TensorStructInfo) else call.struct_info.dtype
        keep_low = isinstance(var, DataflowVar) and dtype in self.float_dtypes
        return self._convert(result, self.low if keep_low else dtype)

    def _follow(self, call: Call) -> Expr:
        """A "follow" call in the low precision when all its inputs fit it, else in float32."""
        args = [self._current(a) for a in call.args]
        dtype = self.low if all(self._fits_low(a) for a in args) else "float32"
        args = [self._convert(a, dtype) for a in args]
        if all(a is b for a, b in zip(args, call.args)):
            return call
        return self.normalize(Call(call.op, args, call.attrs, span=call.span))

    def _emit(self, binding: VarBinding, value: Expr) -> None:
        """Bind ``value`` (a block output cast back to its dtypes) to the binding's variable, or to a new one of
        the same name when its struct info changed."""
        if not isinstance(binding.var, DataflowVar):
            value = self._convert(value, _dtypes(binding.var.struct_info))
        value = self.normalize(value)
        if value is binding.value:
            self.emit_normalized(binding)
            return
        var = self.with_struct_info(binding.var, value.struct_info)
        if var is not binding.var:
            self.var_remap_[binding.var] = var
        self.emit_normalized(VarBinding(var, value, span=binding.span))
