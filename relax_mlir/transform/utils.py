"""Small helpers shared by passes."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from ..ir.expr import Call, Expr, Tuple, TupleGetItem, Var


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
        args = [substitute_with(a, fn) for a in e.args]
        if all(a is b for a, b in zip(args, e.args)):
            return e
        return Call(e.op, args, e.attrs, e.struct_info, span=e.span)
    return e


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


def name_list_option(where: str, value: Any) -> Optional[tuple[str, ...]]:
    """A pass option that lists function names, as a tuple; a bare string (which would be read as its letters) or
    a non-string name is refused with a TypeError saying what to write instead."""
    if value is None:
        return None
    if isinstance(value, str):
        raise TypeError(f"{where}: expected a list of function names, got the string {value!r} (write [{value!r}])")
    names = tuple(value)
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise TypeError(f"{where}: function names must be strings, got {', '.join(map(repr, bad))}")
    return names
