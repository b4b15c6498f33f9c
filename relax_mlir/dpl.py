"""A dataflow pattern language for Relax, like TVM's ``relax.dpl``: patterns that match expressions, and
``rewrite_call`` to rewrite the bindings they match.

    from relax_mlir.dpl import is_op, wildcard, is_const, rewrite_call

    x, w = wildcard(), wildcard()
    pattern = is_op("relax.add")(is_op("relax.matmul")(x, w), is_const())

    def rewriter(expr, matches):          # matches: pattern -> the expression it matched
        return R.nn.relu(expr) if ... else expr

    new_func = rewrite_call(pattern, rewriter, mod["main"])

Patterns: ``wildcard()`` (anything), ``is_op(name)`` (an op, called to match a call: ``is_op("relax.add")(a, b)``),
``is_const()``, ``is_var(name)``, ``is_tuple([...])``, ``is_tuple_get_item(t, index)``, ``is_expr(e)`` (that very
expression); ``p | q`` (either), ``p & q`` (both), ``p.has_dtype("float32")``, ``p.has_shape((n, 4))`` (ints,
or None for any size), ``p.has_attr({"axis": 1})``. A call pattern's arguments must match in number unless given
with ``varg_default_wildcard=True`` (then missing ones are wildcards).

Matching looks through variables: an argument that is a variable bound in the function (``lv = R.matmul(...)``) is
matched by its value when the pattern wants a call, tuple or constant, as TVM's does. A pattern object that
matches twice must match the same expression (``x + x``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

from .ir.dtype import check_dtype
from .ir.expr import Call, Constant, Expr, Function, MatchCast, SeqExpr, Tuple, TupleGetItem, Var, VarBinding
from .ir.struct_info import TensorStructInfo
from .op.registry import Op, get_op

__all__ = ["Pattern", "wildcard", "is_op", "is_const", "is_var", "is_tuple", "is_tuple_get_item", "is_expr",
           "rewrite_call", "parse_pattern"]


class Pattern:
    """Base of all patterns: ``match(expr, var2val=None)`` and the combinators."""

    def __or__(self, other: "Pattern") -> "Pattern":
        return OrPattern(self, _pattern(other))

    def __and__(self, other: "Pattern") -> "Pattern":
        return AndPattern(self, _pattern(other))

    def __call__(self, *args: Any, varg_default_wildcard: bool = False) -> "Pattern":
        return CallPattern(self, tuple(_pattern(a) for a in args), varg_default_wildcard)

    def has_dtype(self, dtype: str) -> "Pattern":
        return AndPattern(self, DataTypePattern(check_dtype(dtype, "has_dtype")))

    def has_shape(self, shape: Sequence[Any]) -> "Pattern":
        return AndPattern(self, ShapePattern(tuple(shape)))

    def has_attr(self, attrs: Mapping[str, Any]) -> "Pattern":
        return AndPattern(self, AttrPattern(dict(attrs)))

    def match(self, expr: Expr, var2val: Optional[Mapping[Var, Expr]] = None) -> bool:
        """Whether ``expr`` matches (variables looked through with ``var2val``)."""
        return self.extract_matched_expr(expr, var2val) is not None

    def extract_matched_expr(self, expr: Expr,
                             var2val: Optional[Mapping[Var, Expr]] = None) -> Optional[dict["Pattern", Expr]]:
        """Each sub-pattern mapped to the expression it matched, or None if ``expr`` does not match."""
        matches: dict[Pattern, Expr] = {}
        return matches if _match(self, expr, dict(var2val or {}), matches) else None

    # Patterns compare by identity: one object is one node of the pattern.
    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other


@dataclass(eq=False)
class WildcardPattern(Pattern):
    pass


@dataclass(eq=False)
class OpPattern(Pattern):
    op: Op


@dataclass(eq=False)
class ExprPattern(Pattern):
    expr: Expr


@dataclass(eq=False)
class ConstantPattern(Pattern):
    pass


@dataclass(eq=False)
class VarPattern(Pattern):
    name: str = ""


@dataclass(eq=False)
class CallPattern(Pattern):
    op: Pattern
    args: tuple
    varg_default_wildcard: bool = False


@dataclass(eq=False)
class TuplePattern(Pattern):
    fields: tuple


@dataclass(eq=False)
class TupleGetItemPattern(Pattern):
    tuple_pattern: Pattern
    index: int = -1  # -1: any index


@dataclass(eq=False)
class OrPattern(Pattern):
    left: Pattern
    right: Pattern


@dataclass(eq=False)
class AndPattern(Pattern):
    left: Pattern
    right: Pattern


@dataclass(eq=False)
class DataTypePattern(Pattern):
    dtype: str


@dataclass(eq=False)
class ShapePattern(Pattern):
    shape: tuple


@dataclass(eq=False)
class AttrPattern(Pattern):
    attrs: dict = field(default_factory=dict)


# -- constructors (TVM's names) -------------------------------------------------------------------------------

def wildcard() -> Pattern:
    return WildcardPattern()


def is_op(name: str) -> Pattern:
    """The op ``name`` (``"relax.add"``); call the pattern to match a call of it."""
    return OpPattern(get_op(name))


def is_const() -> Pattern:
    return ConstantPattern()


def is_var(name: str = "") -> Pattern:
    """A variable (named ``name``, if given)."""
    return VarPattern(name)


def is_tuple(fields: Sequence[Any]) -> Pattern:
    return TuplePattern(tuple(_pattern(f) for f in fields))


def is_tuple_get_item(tuple_value: Any, index: Optional[int] = None) -> Pattern:
    return TupleGetItemPattern(_pattern(tuple_value), -1 if index is None else index)


def is_expr(expr: Expr) -> Pattern:
    return ExprPattern(expr)


def parse_pattern(text: str) -> Pattern:
    """A pattern written as text (for ``relax-mlir opt`` and other places a Python object cannot go): calls of ops
    by name, ``_`` for a wildcard, ``const`` for a constant, ``(a, b)`` for a tuple, ``t[0]`` for a field, ``|``
    for either: ``"relax.nn.relu(relax.add(relax.matmul(_, _), _ | const))"``. Raises ValueError naming what it
    cannot read."""
    import ast

    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"pattern {text!r}: not an expression ({exc.msg})") from None

    def dotted(node: ast.AST) -> str:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            return f"{dotted(node.value)}.{node.attr}"
        raise ValueError(f"pattern {text!r}: expected an op name such as relax.add, got {ast.unparse(node)!r}")

    def build(node: ast.AST) -> Pattern:
        if isinstance(node, ast.Name) and node.id == "_":
            return wildcard()
        if isinstance(node, ast.Name) and node.id == "const":
            return is_const()
        if isinstance(node, ast.Call) and not node.keywords:
            name = dotted(node.func)
            try:
                op = is_op(name)
            except KeyError:
                raise ValueError(f"pattern {text!r}: no op named {name!r}") from None
            return op(*[build(a) for a in node.args])
        if isinstance(node, ast.Tuple):
            return is_tuple([build(e) for e in node.elts])
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and \
                isinstance(node.slice.value, int):
            return is_tuple_get_item(build(node.value), node.slice.value)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return build(node.left) | build(node.right)
        raise ValueError(f"pattern {text!r}: cannot read {ast.unparse(node)!r} (expected op(...), _, const, a tuple, "
                         "x[i] or a | b)")

    return build(tree)


def _pattern(p: Any) -> Pattern:
    if isinstance(p, Pattern):
        return p
    if isinstance(p, Expr):
        return ExprPattern(p)
    raise TypeError(f"expected a pattern or a Relax expression, got {type(p).__name__}")


# -- matching ---------------------------------------------------------------------------------------------------

_LOOK_THROUGH = (CallPattern, TuplePattern, TupleGetItemPattern, ConstantPattern)


def _match(p: Pattern, e: Expr, var2val: dict, matches: dict) -> bool:
    if p in matches:  # a pattern used twice matches one expression
        return matches[p] is e or (isinstance(e, Var) and var2val.get(e) is matches[p])
    if isinstance(p, (OrPattern, AndPattern)):
        return _match_logic(p, e, var2val, matches)
    if isinstance(e, Var) and e in var2val and _wants_value(p):
        return _match(p, var2val[e], var2val, matches)
    if not _match_node(p, e, var2val, matches):
        return False
    matches[p] = e
    return True


def _wants_value(p: Pattern) -> bool:
    if isinstance(p, _LOOK_THROUGH):
        return True
    return isinstance(p, (AndPattern, OrPattern)) and (_wants_value(p.left) or _wants_value(p.right))


def _match_logic(p: Pattern, e: Expr, var2val: dict, matches: dict) -> bool:
    if isinstance(p, AndPattern):
        trial = dict(matches)
        if _match(p.left, e, var2val, trial) and _match(p.right, e, var2val, trial):
            matches.update(trial)
            matches[p] = e
            return True
        return False
    for side in (p.left, p.right):
        trial = dict(matches)
        if _match(side, e, var2val, trial):
            matches.update(trial)
            matches[p] = e
            return True
    return False


def _match_node(p: Pattern, e: Expr, var2val: dict, matches: dict) -> bool:
    if isinstance(p, WildcardPattern):
        return True
    if isinstance(p, ExprPattern):
        return p.expr is e
    if isinstance(p, ConstantPattern):
        return isinstance(e, Constant)
    if isinstance(p, VarPattern):
        return isinstance(e, Var) and (not p.name or e.name_hint == p.name)
    if isinstance(p, OpPattern):
        return False  # an op alone is not an expression here: is_op(name)(...) matches calls
    if isinstance(p, CallPattern):
        return _match_call(p, e, var2val, matches)
    if isinstance(p, TuplePattern):
        return isinstance(e, Tuple) and len(e.fields) == len(p.fields) and all(
            _match(fp, fe, var2val, matches) for fp, fe in zip(p.fields, e.fields))
    if isinstance(p, TupleGetItemPattern):
        return isinstance(e, TupleGetItem) and p.index in (-1, e.index) and \
            _match(p.tuple_pattern, e.tuple_value, var2val, matches)
    sinfo = getattr(e, "struct_info", None)
    if isinstance(p, DataTypePattern):
        return isinstance(sinfo, TensorStructInfo) and sinfo.dtype == p.dtype
    if isinstance(p, ShapePattern):
        return isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None and len(sinfo.shape) == len(p.shape) \
            and all(want is None or want == got for want, got in zip(p.shape, sinfo.shape))
    if isinstance(p, AttrPattern):
        return isinstance(e, Call) and all(k in e.attrs and _same_attr(e.attrs[k], v) for k, v in p.attrs.items())
    raise TypeError(f"unknown pattern {type(p).__name__}")


def _same_attr(got: Any, want: Any) -> bool:
    if isinstance(want, (list, tuple)) and isinstance(got, (list, tuple)):
        return len(got) == len(want) and all(_same_attr(g, w) for g, w in zip(got, want))
    return got == want


def _match_call(p: CallPattern, e: Expr, var2val: dict, matches: dict) -> bool:
    if not isinstance(e, Call):
        return False
    op_ok = (isinstance(p.op, OpPattern) and e.op is p.op.op) or (
        not isinstance(p.op, OpPattern) and isinstance(e.op, Expr) and _match(p.op, e.op, var2val, matches))
    if not op_ok:
        return False
    if len(e.args) < len(p.args) or (len(e.args) != len(p.args) and not p.varg_default_wildcard):
        return False
    return all(_match(ap, ae, var2val, matches) for ap, ae in zip(p.args, e.args))


# -- rewriting --------------------------------------------------------------------------------------------------

def rewrite_call(pattern: Pattern, rewriter: Callable[[Expr, dict], Expr], func: Function) -> Function:
    """``func`` with each binding value that matches ``pattern`` replaced by ``rewriter(value, matches)`` (it
    returns the value itself to leave it). Rewrites apply in order, each seeing the earlier ones; the new value
    must have a struct info the binding's variable accepts (the pass infrastructure's well-formedness check, or
    ``check_well_formed``, reports one that does not)."""
    if not isinstance(func, Function) or not isinstance(func.body, SeqExpr):
        raise TypeError(f"rewrite_call: expected a Relax Function, got {type(func).__name__}")
    var2val: dict[Var, Expr] = {}
    blocks, changed = [], False
    for block in func.body.blocks:
        kept = []
        for b in block.bindings:
            value = b.value
            matches = pattern.extract_matched_expr(value, var2val) if isinstance(b, VarBinding) else None
            if matches is not None:
                new = rewriter(value, matches)
                if not isinstance(new, Expr):
                    raise TypeError(f"rewrite_call: the rewriter returned {type(new).__name__}, not an expression")
                if new is not value:
                    changed = True
                    b = VarBinding(b.var, new, span=b.span)
            if not isinstance(b, MatchCast):
                var2val[b.var] = b.value
            kept.append(b)
        blocks.append(type(block)(kept))
    if not changed:
        return func
    return Function(func.params, SeqExpr(blocks, func.body.body), func.ret_struct_info, func.attrs, func.is_pure,
                    span=func.span)
