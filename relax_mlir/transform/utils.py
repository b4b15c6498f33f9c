"""Small helpers shared by passes."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from ..ir.expr import Call, Expr, Function, If, Tuple, TupleGetItem, Var


def substitute_with(e: Expr, fn: Callable[[Var], Expr]) -> Expr:
    """``e`` with every variable ``v`` replaced by ``fn(v)``; unchanged nodes are returned as they are."""
    if isinstance(e, Var):
        return fn(e)
    if isinstance(e, Tuple):
        fields = [substitute_with(f, fn) for f in e.fields]
        # A rebuilt tuple takes its fields' struct info: a substitute may be more (or differently) specific.
        return e if all(a is b for a, b in zip(fields, e.fields)) else Tuple(fields, span=e.span)
    if isinstance(e, TupleGetItem):
        inner = substitute_with(e.tuple_value, fn)
        return e if inner is e.tuple_value else TupleGetItem(inner, e.index, span=e.span)
    if isinstance(e, Call):
        op = fn(e.op) if isinstance(e.op, Var) else e.op  # a local function's variable is a use of it
        args = [substitute_with(a, fn) for a in e.args]
        if op is e.op and all(a is b for a, b in zip(args, e.args)):
            return e
        return Call(op, args, e.attrs, e.struct_info, span=e.span)
    if isinstance(e, Function):  # a local function: the outer variables its body captures
        body = _substitute_in_seq(e.body, fn)
        return e if body is e.body else with_body(e, body)
    if isinstance(e, If):  # the condition, and what the branches read
        parts = [substitute_with(e.cond, fn), _substitute_in_seq(e.true_branch, fn),
                 _substitute_in_seq(e.false_branch, fn)]
        return e if all(a is b for a, b in zip(parts, (e.cond, e.true_branch, e.false_branch))) else \
            If(*parts, span=e.span)
    return e


def _substitute_in_seq(seq: Expr, fn: Callable[[Var], Expr]) -> Expr:
    from ..ir.expr import SeqExpr

    if not isinstance(seq, SeqExpr):
        return substitute_with(seq, fn)
    changed, blocks = False, []
    for block in seq.blocks:
        bindings = []
        for b in block.bindings:
            value = substitute_with(b.value, fn)
            changed |= value is not b.value
            bindings.append(b if value is b.value else rebind(b, value))
        blocks.append(type(block)(bindings))
    body = substitute_with(seq.body, fn)
    if not changed and body is seq.body:
        return seq
    return SeqExpr(blocks, body)


def rebind(b: Any, value: Expr, var: Optional[Var] = None) -> Any:
    """The binding ``b`` with a new value (and variable): a ``match_cast`` stays one, keeping its struct info."""
    from ..ir.expr import MatchCast, VarBinding

    var = b.var if var is None else var
    if isinstance(b, MatchCast):
        return MatchCast(var, value, b.struct_info, span=b.span)
    return VarBinding(var, value, span=b.span)


def with_body(func: "Function", body: Expr, params: Optional[list] = None) -> "Function":
    """``func`` with a new body (and parameters); its return type, attributes, purity and span kept."""
    from ..ir.expr import Function

    return Function(func.params if params is None else params, body, func.ret_struct_info, func.attrs, func.is_pure,
                    span=func.span)


def substitute(e: Expr, remap: Mapping[Var, Expr]) -> Expr:
    """``e`` with the variables of ``remap`` replaced."""
    if not remap:
        return e
    return substitute_with(e, lambda v: remap.get(v, v))


def free_vars(e: Expr) -> list[Var]:
    """The variables ``e`` refers to, in order of appearance (with repeats)."""
    out: list[Var] = []
    substitute_with(e, lambda v: out.append(v) or v)
    return out


def name_list_option(where: str, value: Any, what: str = "function names") -> Optional[tuple[str, ...]]:
    """A pass option that lists names (``what`` they name: functions, inputs), as a tuple; a bare string (which
    would be read as its letters), a value that is no list, or a non-string name is refused with a TypeError
    saying what to write instead."""
    from collections.abc import Iterable

    if value is None:
        return None
    if isinstance(value, str):
        raise TypeError(f"{where}: expected a list of {what}, got the string {value!r} (write [{value!r}])")
    if not isinstance(value, Iterable):
        raise TypeError(f"{where}: expected a list of {what} or None, got {value!r} ({type(value).__name__})")
    names = tuple(value)
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise TypeError(f"{where}: {what} must be strings, got {', '.join(map(repr, bad))}")
    return names


def bind_sizes(func: "Function", sizes: Mapping[str, Any], params: Optional[list] = None,
               replace: Optional[Mapping[Var, Expr]] = None) -> "Function":
    """``func`` with its size variables in ``sizes`` replaced (by ints or other dims) everywhere: parameters,
    bindings' variables, calls' struct info and attributes, host calls' ``sinfo_args``, shape and prim values,
    match_casts, local functions and the return type. ``params``: the new
    parameter list (default: the old ones, rebuilt); ``replace``: variables replaced by expressions (a parameter
    by a constant). Variables are new objects."""
    from ..ir.expr import Function, MatchCast, SeqExpr, VarBinding

    sizes = dict(sizes)
    remap: dict[Var, Expr] = dict(replace or {})

    def renew(v: Var) -> Var:
        new = type(v)(v.name_hint, _resize_sinfo(v.struct_info, sizes), span=v.span) if v.struct_info is not None else v
        remap[v] = new
        return new

    def resize(e: Expr) -> Expr:
        return _resize_expr(e, sizes, remap)

    new_params = [renew(p) for p in (func.params if params is None else params)]
    blocks = []
    for block in func.blocks:
        bindings = []
        for b in block.bindings:
            value = resize(b.value)
            var = renew(b.var)
            if isinstance(b, MatchCast):
                bindings.append(MatchCast(var, value, _resize_sinfo(b.struct_info, sizes), span=b.span))
            else:
                bindings.append(VarBinding(var, value, span=b.span))
        blocks.append(type(block)(bindings))
    ret = func.body.body if isinstance(func.body, SeqExpr) else func.body
    body = SeqExpr(blocks, resize(ret))
    return Function(new_params, body, _resize_sinfo(func.ret_struct_info, sizes), func.attrs, func.is_pure,
                    span=func.span)


def _resize_expr(e: Expr, sizes: Mapping[str, Any], remap: Mapping[Var, Expr]) -> Expr:
    """``e`` with its variables remapped and the size variables of ``sizes`` replaced wherever a size can be
    written: calls' struct info and attributes, a host call's declared result (``sinfo_args``), shape and prim
    values, and local functions (parameters, body, return type), whose captures follow ``remap``."""
    from dataclasses import replace as replace_field

    from ..ir import sym
    from ..ir.expr import ExternFunc, PrimValue, ShapeExpr
    from ..op.registry import Op, substitute_attrs

    def dim(d):
        return sym.substitute(d, lambda v: sizes.get(v, sym.SizeVar(v)))

    if isinstance(e, Var):
        return remap.get(e, e)
    if isinstance(e, Function):
        return bind_sizes(e, sizes, replace=remap)
    if isinstance(e, ShapeExpr):
        return ShapeExpr([dim(d) for d in e.values], span=e.span)
    if isinstance(e, PrimValue) and not isinstance(e.value, (int, float)):
        return PrimValue(dim(e.value), e.dtype, span=e.span)
    if isinstance(e, Tuple):
        return Tuple([_resize_expr(f, sizes, remap) for f in e.fields], span=e.span)
    if isinstance(e, TupleGetItem):
        return TupleGetItem(_resize_expr(e.tuple_value, sizes, remap), e.index, span=e.span)
    if isinstance(e, Call):
        op, attrs = e.op, e.attrs
        if isinstance(op, Var):
            op = remap.get(op, op)
        elif isinstance(op, ExternFunc):
            op = replace_field(op, ret=_resize_sinfo(op.ret, sizes))
        elif isinstance(op, Op):
            attrs = substitute_attrs(attrs, sizes)
        args = [_resize_expr(a, sizes, remap) for a in e.args]
        return Call(op, args, attrs, _resize_sinfo(e.struct_info, sizes), span=e.span)
    return e


def _resize_sinfo(sinfo, sizes: Mapping[str, Any]):
    """``struct_info.substitute``, which leaves them alone, extended to function signatures (a local function's
    variable) and known prim values."""
    from ..ir import sym
    from ..ir.struct_info import FuncStructInfo, PrimStructInfo, TupleStructInfo
    from ..ir.struct_info import substitute as substitute_struct_info

    if isinstance(sinfo, FuncStructInfo):
        return FuncStructInfo([_resize_sinfo(p, sizes) for p in sinfo.params], _resize_sinfo(sinfo.ret, sizes))
    if isinstance(sinfo, TupleStructInfo):
        return TupleStructInfo(_resize_sinfo(f, sizes) for f in sinfo.fields)
    if isinstance(sinfo, PrimStructInfo) and sinfo.value is not None and not isinstance(sinfo.value, (int, float)):
        return PrimStructInfo(sinfo.dtype, sym.substitute(sinfo.value, lambda v: sizes.get(v, sym.SizeVar(v))))
    return substitute_struct_info(sinfo, sizes) if sinfo is not None else None


def all_var_uses(e: Expr) -> set[Var]:
    """Every variable used anywhere under ``e``, nested functions included (``free_vars`` stops at them)."""
    from ..ir.visitor import post_order_visit

    out: set[Var] = set()
    post_order_visit(e, lambda x: out.add(x) if isinstance(x, Var) else None)
    return out


def rename_functions(mod, renames: Mapping[str, str]):
    """``mod`` with functions renamed (old name -> new name) and every call to them following."""
    from ..ir.expr import GlobalVar
    from ..ir.module import IRModule
    from ..ir.visitor import ExprMutator

    class _Renamer(ExprMutator):
        def visit_global_var_(self, gvar: GlobalVar) -> Expr:
            new = renames.get(gvar.name_hint)
            return gvar if new is None else GlobalVar(new, gvar.struct_info, span=gvar.span)

    renamed = _Renamer(mod).mutate_module(mod)
    return IRModule({renames.get(n, n): f for n, f in renamed.items()}, mod.attrs)


def callees(func: "Function") -> set[str]:
    """The names of the module functions ``func`` refers to (calls, or a function passed as a value)."""
    from ..ir.expr import GlobalVar
    from ..ir.visitor import post_order_visit

    out: set[str] = set()
    post_order_visit(func, lambda e: out.add(e.name_hint) if isinstance(e, GlobalVar) else None)
    return out


def call_cycle(mod, names) -> Optional[list[str]]:
    """A chain of calls among ``names`` (and what they call) that comes back to where it started (``["f", "g",
    "f"]``), or None. Relax here has no control flow: a function on such a cycle never returns."""
    from ..ir.expr import Call, GlobalVar
    from ..ir.visitor import post_order_visit

    calls: dict[str, list[str]] = {}

    def called(name: str) -> list[str]:
        if name not in calls:
            found: list[str] = []
            post_order_visit(mod[name], lambda e: found.append(e.op.name_hint)
                             if isinstance(e, Call) and isinstance(e.op, GlobalVar) and e.op.name_hint in mod
                             else None)
            calls[name] = sorted(set(found))
        return calls[name]

    seen: set[str] = set()
    for root in names:
        if root in seen:
            continue
        seen.add(root)
        path, todo = [root], [iter(called(root))]
        while todo:  # depth first, without recursion (call chains may be long)
            nxt = next(todo[-1], None)
            if nxt is None:
                todo.pop()
                path.pop()
            elif nxt in path:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in seen:
                seen.add(nxt)
                path.append(nxt)
                todo.append(iter(called(nxt)))
    return None


def recursion_message(cycle: list[str]) -> str:
    return (f"{' -> '.join(cycle)}: a function that calls itself, directly or through others, never returns (Relax "
            "here has no control flow that could end the recursion)")


def reachable(mod, function: Optional[str]) -> list[str]:
    """All of ``mod``'s functions, or ``function`` and every function it refers to, directly or not (module
    order): what ``to_mlir`` exports and a ``Trainer`` compiles."""
    if function is None:
        return list(mod)
    if function not in mod:
        raise KeyError(f"to_mlir: the module has no function {function!r} (it has: {', '.join(mod) or 'none'})")
    seen, todo = set(), [function]
    while todo:
        name = todo.pop()
        if name not in seen and name in mod:
            seen.add(name)
            todo += sorted(callees(mod[name]))
    return [n for n in mod if n in seen]


def unique_function_name(name: str, mod) -> str:
    """``name``, or ``name_1``, ``name_2``, ... : the first that ``mod`` does not hold yet."""
    unique, k = name, 0
    while unique in mod:
        k += 1
        unique = f"{name}_{k}"
    return unique


def group_inputs(group: list) -> list[Var]:
    """The variables the bindings ``group`` read but do not define, once each, in order of first use."""
    defined = {b.var for b in group}
    inputs: list[Var] = []
    for b in group:
        for v in free_vars(b.value):
            if v not in defined and v not in inputs:
                inputs.append(v)
    return inputs


def private_functions(mod) -> set[str]:
    """The functions of ``mod`` that are internal: those declared ``@R.function(private=True)``, and those without
    a ``global_symbol`` attribute that another function of the module uses. (A function nothing declares private
    or uses is an entry point, as TVM's are, so passes that change signatures leave it alone.)"""
    used = set().union(*(callees(f) - {n} for n, f in mod.items())) if len(mod) else set()
    return {n for n, f in mod.items()
            if getattr(f, "is_private", False) or (n in used and "global_symbol" not in f.attrs)}
