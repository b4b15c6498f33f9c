"""Peak bytes of live tensors: how much memory a function needs if every tensor is freed after its last use.

Each op call makes new storage for its result; variables bound to other variables, tuples of them or their
fields share storage. A storage is live from the binding that makes it to the last use of any variable that
refers to it. Parameters and the returned tensors (a gradient function's gradients, say) are the function's
interface and reported apart: the peak counts the working memory between them, the measure gradient
checkpointing lowers (Chen et al. 2016).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Union

from ..ir import sym
from ..ir.dtype import to_numpy
from ..ir.expr import Call, Expr, Function, SeqExpr, Tuple, TupleGetItem, Var
from ..ir.module import IRModule
from ..ir.struct_info import StructInfo, TensorStructInfo, TupleStructInfo


@dataclass(frozen=True)
class LiveTensorReport:
    """``peak_bytes``: the most bytes of intermediate tensors alive at once (parameters and returned tensors
    excluded); ``param_bytes`` and ``output_bytes``: theirs; ``peak_binding``: where the peak is reached."""

    peak_bytes: int
    param_bytes: int
    output_bytes: int
    peak_binding: Optional[str]


def _bytes(sinfo: Optional[StructInfo], sizes: Mapping[str, int]) -> int:
    if isinstance(sinfo, TupleStructInfo):
        return sum(_bytes(f, sizes) for f in sinfo.fields)
    if not isinstance(sinfo, TensorStructInfo):
        return 0
    if sinfo.shape is None:
        raise ValueError(f"peak_live_bytes: a tensor of unknown shape ({sinfo}) has no size")
    n = 1
    for d in sinfo.shape:
        try:
            n *= sym.evaluate(d, sizes)
        except KeyError:
            raise ValueError(f"peak_live_bytes: bind the size variables of {sinfo} with sizes={{...}}") from None
    return n * to_numpy(sinfo.dtype).itemsize


def _vars(e: Expr) -> list[Var]:
    if isinstance(e, Var):
        return [e]
    if isinstance(e, Tuple):
        return [v for f in e.fields for v in _vars(f)]
    if isinstance(e, TupleGetItem):
        return _vars(e.tuple_value)
    if isinstance(e, Call):
        return [v for a in e.args for v in _vars(a)]
    return []


def peak_live_bytes(func: Function, sizes: Optional[Mapping[str, int]] = None) -> LiveTensorReport:
    """Peak bytes of live intermediate tensors of ``func`` (symbolic dims bound by ``sizes``)."""
    sizes = dict(sizes or {})
    bindings = [b for block in func.blocks for b in block.bindings]
    ret = func.body.body if isinstance(func.body, SeqExpr) else func.body
    storage: dict[Var, set[int]] = {p: set() for p in func.params}  # parameters are not counted
    size_of: list[int] = []
    alive: list[list[int]] = []  # per storage: [first binding, last binding that uses it]
    for i, b in enumerate(bindings):
        for v in _vars(b.value):
            for sid in storage.get(v, ()):
                alive[sid][1] = i
        if isinstance(b.value, Call):
            storage[b.var] = {len(size_of)}
            size_of.append(_bytes(b.var.struct_info, sizes))
            alive.append([i, i])
        else:  # an alias, a tuple of variables or a field of one: shares the storage it refers to
            storage[b.var] = set().union(*(storage.get(v, set()) for v in _vars(b.value)))
    returned = {sid for v in _vars(ret) for sid in storage.get(v, ())}
    peak, where = 0, None
    for i, b in enumerate(bindings):
        live = sum(size for sid, (size, (first, last)) in enumerate(zip(size_of, alive))
                   if first <= i <= last and sid not in returned)
        if live > peak:
            peak, where = live, b.var.name_hint
    params = sum(_bytes(p.struct_info, sizes) for p in func.params)
    return LiveTensorReport(peak, params, sum(size_of[sid] for sid in returned), where)


def estimate_memory_usage(mod: Union[IRModule, Function]) -> str:
    """TVM's ``relax.analysis.estimate_memory_usage``: per function, the bytes its op calls allocate when every
    result gets storage of its own (no planning), next to the peak of live intermediate tensors when each is freed
    after its last use (:func:`peak_live_bytes`, what an ideal planner reaches). Results whose size depends on
    symbolic dims are counted apart, as TVM does."""
    funcs = list(mod.items()) if isinstance(mod, IRModule) else [(mod.attrs.get("global_symbol", "main"), mod)]
    lines = ["Memory usage estimation:"]
    for name, func in funcs:
        if not isinstance(func, Function):
            continue
        static, dynamic = [], 0
        for block in func.blocks:
            for b in block.bindings:
                if isinstance(b.value, Call):
                    try:
                        static.append(_bytes(b.var.struct_info, {}))
                    except ValueError:
                        dynamic += 1
        lines.append(f"- Function {name}:")
        lines.append(f" * Without memory planning, there are {len(static)} constant-size memory allocation(s) "
                     f"with total size {_gb(sum(static))}.")
        if dynamic:
            lines.append(f" * {dynamic} allocation(s) have sizes that depend on symbolic dims (not counted).")
        else:
            peak = peak_live_bytes(func).peak_bytes
            lines.append(f" * Freeing each intermediate tensor after its last use, at most {_gb(peak)} is live at "
                         f"once (parameters and results apart).")
    return "\n".join(lines)


def _gb(n: int) -> str:
    return f"{n / 2**30:.4g} GB ({n} bytes)"
