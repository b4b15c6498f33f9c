"""``LazyTransformParams``: a ``transform_params`` function (``LiftTransformParams``' output, or any function whose
name ends in ``transform_params``) loads each weight through a host function right before its first use and
stores each result through another as soon as it is computed, as TVM's pass of that name (to transform weights
that do not fit in memory at once):

    def main_transform_params(w, v):      ->    def main_transform_params():              # pure=False
        wt = R.permute_dims(w)                      w_untyped = R.call_packed("get_item", R.prim_value(0))
        return (wt, v)                              w = R.match_cast(w_untyped, R.Tensor(...))
                                                    wt = R.permute_dims(w)
                                                    _ = R.call_packed("set_item", R.prim_value(0), wt)
                                                    v_untyped = R.call_packed("get_item", R.prim_value(1))
                                                    v = R.match_cast(v_untyped, R.Tensor(...))
                                                    _1 = R.call_packed("set_item", R.prim_value(1), v)
                                                    return R.tuple()

``fget_item(*extra_get_item_params, index)`` returns weight ``index`` (its position among the parameters);
``fset_item(*extra_set_item_params, index, value)`` takes result ``index`` of the returned tuple. The extra
parameters (``relax.Var`` objects) become the function's parameters, the get ones first. Dataflow blocks of the
function become plain ones (host calls are not dataflow operations) and the function is impure; TVM asks for
``ToNonDataflow`` and ``RemovePurityChecking`` first, here the pass does both. ``relax_mlir.interpret`` runs the
result, calling the host functions registered with ``relax_mlir.register_func``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..ir.expr import BindingBlock, Call, ExternFunc, Function, MatchCast, PrimValue, SeqExpr, Tuple, Var, VarBinding
from ..ir.module import IRModule
from ..ir.struct_info import ObjectStructInfo
from .pass_infra import Pass
from .to_non_dataflow import ToNonDataflow
from .utils import free_vars


@dataclass(frozen=True)
class LazyTransformParams(Pass):
    """Load weights and store results of ``*transform_params`` functions through host functions (TVM's
    ``LazyTransformParams``).

    Example, applied as ``LazyTransformParams()``::

        @I.ir_module
        class Module:
            @R.function
            def main_transform_params(w: R.Tensor((2, 3), "float32"), v: R.Tensor((3,), "float32")):
                wt = R.permute_dims(w)
                return (wt, v)

    becomes::

        @I.ir_module
        class Module:
            @R.function(pure=False)
            def main_transform_params() -> R.Tuple():
                w_untyped: R.Object = R.call_packed("get_item", R.prim_value(0))
                w = R.match_cast(w_untyped, R.Tensor((2, 3), dtype="float32"))
                wt: R.Tensor((3, 2), dtype="float32") = R.permute_dims(w)
                _: R.Object = R.call_packed("set_item", R.prim_value(0), wt)
                v_untyped: R.Object = R.call_packed("get_item", R.prim_value(1))
                v = R.match_cast(v_untyped, R.Tensor((3,), dtype="float32"))
                __1: R.Object = R.call_packed("set_item", R.prim_value(1), v)
                return ()
    """

    name = "LazyTransformParams"
    fget_item: str = "get_item"
    fset_item: str = "set_item"
    extra_get_item_params: Optional[tuple] = None
    extra_set_item_params: Optional[tuple] = None

    def __post_init__(self):
        super().__post_init__()
        for key in ("extra_get_item_params", "extra_set_item_params"):
            value = getattr(self, key)
            if value is not None:
                value = tuple(value)
                if not all(isinstance(v, Var) for v in value):
                    raise TypeError(f"LazyTransformParams: {key} must be relax Vars, got "
                                    f"{[type(v).__name__ for v in value]}")
                object.__setattr__(self, key, value)
        for key in ("fget_item", "fset_item"):
            if not isinstance(getattr(self, key), str) or not getattr(self, key):
                raise TypeError(f"LazyTransformParams: {key} must be a function name, got {getattr(self, key)!r}")

    def transform_module(self, mod, ctx):
        out, changed = mod.copy(), False
        for name, func in mod.items():
            if name.endswith("transform_params") and isinstance(func, Function) and isinstance(func.body, SeqExpr):
                out[name], changed = self.lazy(name, func), True
        return out if changed else mod

    def lazy(self, name: str, func: Function) -> Function:
        flat = ToNonDataflow()(IRModule({name: func}))[name]  # one plain block
        extra_get = list(self.extra_get_item_params or ())
        extra_set = list(self.extra_set_item_params or ())
        result = flat.body.body
        fields = list(result.fields) if isinstance(result, Tuple) else [result]
        at: dict = {}
        for i, f in enumerate(fields):
            at.setdefault(f, []).append(i)
        index = {p: i for i, p in enumerate(flat.params)}
        loaded: set[Var] = set()
        bindings: list = []

        def load(v: Var) -> None:
            if v in index and v not in loaded:
                loaded.add(v)
                untyped = Var(f"{v.name_hint}_untyped", ObjectStructInfo())
                get = ExternFunc(self.fget_item)
                bindings.extend([VarBinding(untyped, Call(get, [*extra_get, PrimValue(index[v], "int64")], {},
                                                          ObjectStructInfo())),
                                 MatchCast(v, untyped, v.struct_info)])

        def store(value) -> None:
            for v in free_vars(value):
                load(v)
            for i in at.pop(value, []):
                put = ExternFunc(self.fset_item)
                bindings.append(VarBinding(Var("_", ObjectStructInfo()),
                                           Call(put, [*extra_set, PrimValue(i, "int64"), value], {},
                                                ObjectStructInfo())))

        for block in flat.body.blocks:
            for b in block.bindings:
                for v in free_vars(b.value):
                    load(v)
                bindings.append(b)
                store(b.var)
        for p in flat.params:  # weights returned as they are
            if p in at:
                store(p)
        for value in list(at):  # constants
            store(value)
        empty = Tuple([])
        return Function(extra_get + extra_set, SeqExpr([BindingBlock(bindings)], empty), empty.struct_info,
                        flat.attrs, False, span=func.span)
