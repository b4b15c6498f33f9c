"""A dataflow pattern language for Relax, like TVM's ``relax.dpl``: patterns that match expressions, and
``rewrite_call`` to rewrite the bindings they match.

    from relax_mlir.dpl import is_op, wildcard, is_const, rewrite_call

    x, w = wildcard(), wildcard()
    pattern = is_op("relax.add")(is_op("relax.matmul")(x, w), is_const())

    def rewriter(expr, matches):          # matches: pattern -> the expression it matched
        return R.nn.relu(expr) if ... else expr

    new_func = rewrite_call(pattern, rewriter, mod["main"])

Patterns: ``wildcard()`` (anything), ``is_op(name)`` (an op, called to match a call: ``is_op("relax.add")(a, b)``),
``is_const()``, ``is_var(name)``, ``is_tuple([...])``, ``is_tuple_get_item(t, index)``, ``is_expr(e)`` (an
expression structurally equal to ``e``); ``p | q`` (either), ``p & q`` (both), ``p.has_dtype("float32")``,
``p.has_shape(("n", 4))`` (ints, size variables or their names, None for any size), ``p.has_attr({"axis": 1})``.
A call pattern's op pattern matches the call's op (``(is_op("relax.add") | is_op("relax.multiply"))(a, b)``);
its arguments must match in number unless given with ``varg_default_wildcard=True`` (then missing ones are
wildcards); ``relax.add`` and ``relax.multiply`` calls also match with their two arguments swapped, as TVM's.

Matching looks through variables: an argument that is a variable bound in the function (``lv = R.matmul(...)``) is
matched by its value when the pattern wants a call, tuple or constant, as TVM's does. A pattern object that
matches twice must match the same expression (``x + x``).

Several bindings at once: patterns made inside ``with PatternContext() as ctx:`` are matched together against one
dataflow block (each root pattern a binding of its own, shared sub-patterns one expression; ``a.used_by(b)``,
``a.only_used_by(b)`` for edges), and ``rewrite_bindings(ctx, rewriter, func)`` replaces the values of the
bindings they match (``rewriter(matchings, bindings) -> {var: new value}``), e.g. three matmuls of one input into
one matmul of the concatenated weights and a split.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

from .ir.dtype import check_dtype
from .ir.expr import (Call, Constant, DataflowBlock, DataflowVar, Expr, Function, MatchCast, SeqExpr, Tuple,
                      TupleGetItem, Var, VarBinding)
from .ir.struct_info import TensorStructInfo, _dim
from .ir.structural_equal import structural_equal
from .ir.visitor import ExprMutator
from .op.registry import Op, get_op

__all__ = ["Pattern", "wildcard", "is_op", "is_const", "is_var", "is_tuple", "is_tuple_get_item", "is_expr",
           "has_dtype", "has_shape", "has_attr", "rewrite_call", "parse_pattern", "PatternContext", "rewrite_bindings"]


class Pattern:
    """Base of all patterns: ``match(expr, var2val=None)`` and the combinators."""

    def __post_init__(self):
        if _CONTEXTS:  # made inside ``with PatternContext():``: a node of that context's graph
            _CONTEXTS[-1]._made.append(self)

    def used_by(self, other: "Pattern", index: int = -1) -> "Pattern":
        """In the current ``PatternContext``: the variable this pattern matches is an argument of the binding
        ``other`` matches (argument ``index``, or any). Returns ``other``, so ``a.used_by(b).used_by(c)`` chains."""
        PatternContext.current("used_by").add_constraint(self, other, index, only=False)
        return other

    def only_used_by(self, other: "Pattern", index: int = -1) -> "Pattern":
        """As ``used_by``, and nothing else uses the variable (not the block's output either)."""
        PatternContext.current("only_used_by").add_constraint(self, other, index, only=True)
        return other

    __xor__ = used_by  # TVM's a ^ b
    __rshift__ = only_used_by  # TVM's a >> b

    def __or__(self, other: "Pattern") -> "Pattern":
        return OrPattern(self, _pattern(other))

    def __and__(self, other: "Pattern") -> "Pattern":
        return AndPattern(self, _pattern(other))

    def __call__(self, *args: Any, varg_default_wildcard: bool = False) -> "Pattern":
        return CallPattern(self, tuple(_pattern(a) for a in args), varg_default_wildcard)

    def has_dtype(self, dtype: str) -> "Pattern":
        return AndPattern(self, DataTypePattern(check_dtype(dtype, "has_dtype")))

    def has_shape(self, shape: Sequence[Any]) -> "Pattern":
        # sizes as TensorStructInfo takes them ("n" is the size variable n), None for any size
        return AndPattern(self, ShapePattern(tuple(None if d is None else _dim(d, "has_shape") for d in shape)))

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


# TVM's module-level forms of the pattern methods: the constraint on ``pattern``, or on any expression.
def has_dtype(dtype: str, pattern: Optional[Pattern] = None) -> Pattern:
    return _pattern(wildcard() if pattern is None else pattern).has_dtype(dtype)


def has_shape(shape: Sequence[Any], pattern: Optional[Pattern] = None) -> Pattern:
    return _pattern(wildcard() if pattern is None else pattern).has_shape(shape)


def has_attr(attrs: Mapping[str, Any], pattern: Optional[Pattern] = None) -> Pattern:
    return _pattern(wildcard() if pattern is None else pattern).has_attr(attrs)


def parse_pattern(text: str) -> Pattern:
    """A pattern written as text (for ``relax-mlir opt`` and other places a Python object cannot go): calls of ops
    by name, ``_`` for a wildcard, ``const`` for a constant, ``(a, b)`` for a tuple, ``t[0]`` for a field, ``|``
    for either: ``"relax.nn.relu(relax.add(relax.matmul(_, _), _ | const))"``. Raises ValueError naming what it
    cannot read."""
    import ast

    if not isinstance(text, str):
        raise TypeError(f"parse_pattern: expected the pattern as a str, got {type(text).__name__}")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"pattern {text!r}: not an expression ({exc.msg})") from None
    except (RecursionError, MemoryError):
        raise ValueError(f"pattern {text[:40]!r}...: nests too deeply") from None

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
                isinstance(node.slice.value, int) and not isinstance(node.slice.value, bool):
            return is_tuple_get_item(build(node.value), node.slice.value)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return build(node.left) | build(node.right)
        raise ValueError(f"pattern {text!r}: cannot read {ast.unparse(node)!r} (expected op(...), _, const, a tuple, "
                         "x[i] or a | b)")

    try:
        return build(tree)
    except RecursionError:
        raise ValueError(f"pattern {text[:40]!r}...: nests too deeply") from None


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
    if isinstance(p, ExprPattern):  # structurally equal, as TVM's
        return p.expr is e or structural_equal(p.expr, e)
    if isinstance(p, ConstantPattern):
        return isinstance(e, Constant)
    if isinstance(p, VarPattern):
        return isinstance(e, Var) and (not p.name or e.name_hint == p.name)
    if isinstance(p, OpPattern):
        return e is p.op  # the op itself (a call's op); is_op(name)(...) matches calls
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
    if not _match(p.op, e.op, var2val, matches):  # an op pattern, an alternative of ops, or a callee
        return False
    if len(e.args) < len(p.args) or (len(e.args) != len(p.args) and not p.varg_default_wildcard):
        return False
    orders = [e.args]
    if len(p.args) == 2 == len(e.args) and getattr(e.op, "name", None) in _COMMUTATIVE:
        orders.append(e.args[::-1])  # as TVM's matcher: add and multiply also match with the arguments swapped
    for args in orders:
        trial = dict(matches)
        if all(_match(ap, ae, var2val, trial) for ap, ae in zip(p.args, args)):
            matches.update(trial)
            return True
    return False


_COMMUTATIVE = ("relax.add", "relax.multiply")


# -- rewriting --------------------------------------------------------------------------------------------------

MAX_REWRITE_ROUNDS = 1000


def rewrite_call(pattern: Pattern, rewriter: Callable[[Expr, dict], Expr], func: Function) -> Function:
    """``func`` with each binding value that matches ``pattern`` replaced by ``rewriter(value, matches)`` (it
    returns the value itself to leave it), repeated until nothing changes, as TVM's since its PR #15495: a result
    that matches again (``(a + b) + c`` under a rule splitting one sum) or makes another binding match is rewritten
    in the same call, so one call gives the whole rewrite. Between rounds the function is brought back to normal
    form (a rewriter may return nested calls; each becomes a binding, which the next round can match). A rewrite
    that still changes the function after ``MAX_REWRITE_ROUNDS`` rounds (one that undoes itself), or grows it
    a hundredfold, is a ``RuntimeError``. Rewrites apply in order, each seeing the earlier ones; the new value must
    have a struct info the binding's variable accepts (the pass infrastructure's well-formedness check, or
    ``check_well_formed``, reports one that does not)."""
    return rewrite_to_fixpoint(lambda f: rewrite_call_once(pattern, rewriter, f), func, "rewrite_call")


def rewrite_to_fixpoint(step: Callable[[Function], Function], func: Function, what: str) -> Function:
    """``step`` applied, the result normalised, until it changes nothing (returned as the same object, or
    structurally equal); ``func`` itself when the first round changes nothing."""
    if not isinstance(func, Function) or not isinstance(func.body, SeqExpr):
        raise TypeError(f"rewrite_call: expected a Relax Function, got {type(func).__name__}")
    current, limit = func, 100 * _size(func) + 10_000  # (a result that grows each round would exhaust memory first)
    for rounds in range(1, MAX_REWRITE_ROUNDS + 1):
        new = step(current)
        if new is current:
            return current
        new = ExprMutator().visit_function(new)
        if structural_equal(new, current):
            return current
        current = new
        if _size(current) > limit:
            why = f"the function grew past {limit} bindings in {rounds} rounds"
            break
    else:
        why = f"the function still changed after {MAX_REWRITE_ROUNDS} rounds"
    raise RuntimeError(f"{what}: the rewrite does not converge: {why} (a rewriter should return the value itself "
                       "once it is done, and not undo or re-match its own result)")


def _size(func: Function) -> int:
    return sum(len(block.bindings) for block in func.body.blocks)


def rewrite_call_once(pattern: Pattern, rewriter: Callable[[Expr, dict], Expr], func: Function) -> Function:
    """One round of ``rewrite_call``: each binding rewritten at most once, the result not normalised (``func``
    itself when nothing changed)."""
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
        _leave_block(var2val, blocks[-1])
    if not changed:
        return func
    return Function(func.params, SeqExpr(blocks, func.body.body), func.ret_struct_info, func.attrs, func.is_pure,
                    span=func.span)


def _leave_block(var2val: dict, block) -> None:
    """After ``block``: forget its dataflow variables and the values (of its outputs) that read them, so that a
    match in a later block never looks through to a dataflow variable it could not reference."""
    if not isinstance(block, DataflowBlock):
        return
    local = {b.var for b in block.bindings if isinstance(b.var, DataflowVar)}
    for b in block.bindings:
        if b.var in var2val and (b.var in local or any(v in local for v in _vars_in(var2val[b.var]))):
            del var2val[b.var]


# -- graph patterns: several bindings at once -------------------------------------------------------------------

_CONTEXTS: list["PatternContext"] = []


@dataclass(frozen=True)
class _Constraint:
    producer: Pattern
    consumer: Pattern
    index: int
    only: bool


def _children(p: Pattern) -> list[Pattern]:
    if isinstance(p, CallPattern):
        return [p.op, *p.args]
    if isinstance(p, TuplePattern):
        return list(p.fields)
    if isinstance(p, TupleGetItemPattern):
        return [p.tuple_pattern]
    if isinstance(p, (OrPattern, AndPattern)):
        return [p.left, p.right]
    return []


class PatternContext:
    """Patterns over several bindings of one dataflow block, matched together (TVM's ``relax.dpl.PatternContext``).

    Every pattern made inside ``with PatternContext() as ctx:`` belongs to it; those that are not part of another
    (the roots: ``matmul1``, ``matmul2`` below) must each match a different binding of the block, with every
    sub-pattern they share matching one expression (``inp`` the same input of all three)::

        with PatternContext() as ctx:
            inp, wq, wk, wv = wildcard(), wildcard(), wildcard(), wildcard()
            q = is_op("relax.matmul")(inp, wq)
            k = is_op("relax.matmul")(inp, wk)
            v = is_op("relax.matmul")(inp, wv)

    ``a.used_by(b)`` (``a ^ b``) and ``a.only_used_by(b)`` (``a >> b``) add edges: ``a``'s variable is an argument
    of ``b``'s binding (and, for ``only_used_by``, of nothing else, the block's outputs included); a pattern in an
    edge is a root as well (a wildcard then matches any variable of the block or a parameter it reads).
    ``ctx.match_dfb(block)`` returns the first complete match (each root and sub-pattern mapped to its variable,
    a sub-pattern that matched a constant or a nested expression to that expression) or None; the search tries
    the bindings in order, roots in the order they were made. :func:`rewrite_bindings` rewrites with it.
    """

    def __init__(self, incremental: bool = False):
        if incremental and not _CONTEXTS:
            raise ValueError("PatternContext(incremental=True) extends the enclosing context; there is none")
        parent = _CONTEXTS[-1] if incremental else None
        self._made: list[Pattern] = list(parent._made) if parent else []
        self._constraints: list[_Constraint] = list(parent._constraints) if parent else []

    def __enter__(self) -> "PatternContext":
        _CONTEXTS.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _CONTEXTS.remove(self)

    @staticmethod
    def current(what: str = "PatternContext.current") -> "PatternContext":
        """The innermost active context; a ValueError naming ``what`` needed one when there is none."""
        if not _CONTEXTS:
            raise ValueError(f"{what}: no active PatternContext (use it inside `with PatternContext() as ctx:`)")
        return _CONTEXTS[-1]

    def add_constraint(self, producer: Pattern, consumer: Pattern, index: int = -1, only: bool = False) -> None:
        """``producer``'s variable is an argument (``index``, or any when -1) of ``consumer``'s binding; with
        ``only``, of nothing else."""
        for p in (producer, consumer):
            if not isinstance(p, Pattern):
                raise TypeError(f"PatternContext.add_constraint: expected patterns, got {type(p).__name__}")
        self._constraints.append(_Constraint(producer, consumer, int(index), bool(only)))

    def roots(self) -> list[Pattern]:
        """The patterns each matched to a binding of their own: those made here that no other one contains and
        that match bindings' values (calls, tuples), then those in ``used_by`` edges, in order."""
        inner: set[int] = set()
        stack = [c for p in self._made for c in _children(p)]
        while stack:
            p = stack.pop()
            if id(p) not in inner:
                inner.add(id(p))
                stack.extend(_children(p))
        out: list[Pattern] = []
        for p in self._made:
            if id(p) not in inner and _wants_value(p) and p not in out:
                out.append(p)
        for c in self._constraints:
            for p in (c.producer, c.consumer):
                if p not in out:
                    out.append(p)
        return out

    def match_dfb(self, dfb: DataflowBlock, var2val: Optional[Mapping[Var, Expr]] = None
                  ) -> Optional[dict[Pattern, Expr]]:
        """The first match of every root in ``dfb`` (see the class), or None. ``var2val``: the bindings before the
        block, for looking through variables defined there."""
        if not isinstance(dfb, DataflowBlock):
            raise TypeError(f"PatternContext.match_dfb: expected a DataflowBlock, got {type(dfb).__name__}")
        return _GraphMatch(self, dfb, dict(var2val or {})).run()


class _GraphMatch:
    """A backtracking search assigning each root of a context a distinct variable of one block."""

    def __init__(self, ctx: PatternContext, block: DataflowBlock, outer: dict):
        self.roots = ctx.roots()
        self.constraints = ctx._constraints
        bindings = [b for b in block.bindings if isinstance(b, VarBinding)]
        self.var2val = {**outer, **{b.var: b.value for b in bindings}}
        self.bound = [b.var for b in bindings]
        self.value_to_var = {id(b.value): b.var for b in bindings}
        self.users: dict[Var, list[Var]] = {}
        free: list[Var] = []
        for b in block.bindings:
            for v in _vars_in(b.value):
                self.users.setdefault(v, []).append(b.var)
                if v not in self.var2val and v not in free:
                    free.append(v)
        self.free = free

    def run(self) -> Optional[dict[Pattern, Expr]]:
        if not self.roots:
            return None
        return self._assign(0, {}, {})

    def _assign(self, i: int, matches: dict, chosen: dict) -> Optional[dict]:
        if i == len(self.roots):
            return self._result(matches, chosen) if self._constraints_hold(matches, chosen) else None
        root = self.roots[i]
        candidates = self.bound if _wants_value(root) else self.bound + self.free
        taken = set(chosen.values())
        for var in candidates:
            if var in taken:
                continue
            trial = dict(matches)
            if _match(root, var, self.var2val, trial):
                found = self._assign(i + 1, trial, {**chosen, root: var})
                if found is not None:
                    return found
        return None

    def _var_of(self, p: Pattern, matches: dict, chosen: dict) -> Optional[Var]:
        if p in chosen:
            return chosen[p]
        e = matches.get(p)
        return e if isinstance(e, Var) else self.value_to_var.get(id(e))

    def _constraints_hold(self, matches: dict, chosen: dict) -> bool:
        for c in self.constraints:
            producer, consumer = self._var_of(c.producer, matches, chosen), self._var_of(c.consumer, matches, chosen)
            if producer is None or consumer is None or consumer not in self.var2val:
                return False
            value = self.var2val[consumer]
            if c.index >= 0:
                if not (isinstance(value, Call) and c.index < len(value.args) and value.args[c.index] is producer):
                    return False
            elif producer not in _vars_in(value):
                return False
            # a block's output (a Var, not a DataflowVar) may be read after the block: not only used by consumer
            if c.only and (set(self.users.get(producer, [])) != {consumer} or
                           (producer in self.bound and not isinstance(producer, DataflowVar))):
                return False
        return True

    def _result(self, matches: dict, chosen: dict) -> dict[Pattern, Expr]:
        out = {}
        for p, e in matches.items():
            var = self.value_to_var.get(id(e)) if not isinstance(e, Var) else e
            out[p] = var if var is not None else e
        out.update(chosen)
        return out


def _vars_in(e: Expr) -> list[Var]:
    """The variables ``e`` reads, in order, once each (not inside nested functions)."""
    out: list[Var] = []
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Var):
            if x not in out:
                out.append(x)
        elif isinstance(x, Call):
            stack.extend(reversed([*(a for a in [x.op] if isinstance(a, Var)), *x.args]))
        elif isinstance(x, Tuple):
            stack.extend(reversed(x.fields))
        elif isinstance(x, TupleGetItem):
            stack.append(x.tuple_value)
    return out


def rewrite_bindings(ctx: PatternContext, rewriter: Callable[[dict, dict], Mapping[Var, Expr]],
                     func: Function) -> Function:
    """Rewrite the bindings ``ctx``'s patterns match together (TVM's ``relax.dpl.rewrite_bindings``).

    For each dataflow block of ``func``, while ``ctx`` matches: ``rewriter(matchings, bindings)`` gets each
    pattern mapped to the variable it matched (see ``PatternContext``) and every variable of the function bound to
    its value, and returns ``{variable: new value}`` for bindings of the block to change ({} leaves the match
    alone and ends the search in that block). A new value may nest calls (each becomes a binding; an expression
    object used in several new values is bound once), may read any variable of the block (the block is put back in
    an order where each variable is defined before its use; dataflow blocks are pure, so this is safe) and must
    keep the variable's struct info. Plain (non-dataflow) blocks are not rewritten: their order is their effects'.
    Raises ValueError for a key that is not a variable of the block, a struct info that changes, or a rewrite that
    keeps matching (more rewrites than the block has bindings, twice over)."""
    if not isinstance(func, Function) or not isinstance(func.body, SeqExpr):
        raise TypeError(f"rewrite_bindings: expected a Relax Function, got {type(func).__name__}")
    var2val: dict[Var, Expr] = {}
    blocks, changed = [], False
    for block in func.body.blocks:
        if isinstance(block, DataflowBlock):
            limit = 2 * len(block.bindings) + 2
            for _ in range(limit):
                matchings = ctx.match_dfb(block, var2val)
                if matchings is None:
                    break
                bindings = {**var2val, **{b.var: b.value for b in block.bindings if isinstance(b, VarBinding)}}
                new = rewriter(matchings, bindings)
                if not new:
                    break
                rebuilt = _rewrite_block(block, dict(new))
                if rebuilt is None:  # every new value was the old one
                    break
                block, changed = rebuilt, True
            else:
                raise ValueError(f"rewrite_bindings: still matching after {limit} rewrites of one block; the rewriter "
                                 "must change what it matched (or return {} to stop)")
        for b in block.bindings:
            if isinstance(b, VarBinding):
                var2val[b.var] = b.value
        blocks.append(block)
        _leave_block(var2val, block)
    if not changed:
        return func
    return Function(func.params, SeqExpr(blocks, func.body.body), func.ret_struct_info, func.attrs, func.is_pure,
                    span=func.span)


class _BlockRebuilder(ExprMutator):
    """Rebuilds one dataflow block with new values: nested calls become bindings, an expression object used in
    several new values (or twice in one) is bound once."""

    def __init__(self):
        super().__init__()
        self._shared: dict[int, tuple[Expr, Expr]] = {}

    def _normalize_arg(self, expr: Expr) -> Expr:
        if id(expr) not in self._shared:  # the object is kept with its binding, so its id stays its own
            self._shared[id(expr)] = (expr, super()._normalize_arg(expr))
        return self._shared[id(expr)][1]

    def rebuild(self, block: DataflowBlock, new: dict) -> list:
        def emit_all() -> None:
            for b in block.bindings:
                if b.var in new and new[b.var] is not b.value:
                    value = self.normalize(new[b.var])
                    if value.struct_info != b.var.struct_info:
                        raise ValueError(f"rewrite_bindings: the new value of {b.var.name_hint!r} has struct info "
                                         f"{value.struct_info}, the variable {b.var.struct_info}")
                    self.emit_normalized(VarBinding(b.var, value, span=b.span))
                else:
                    self.emit_normalized(b)
        return self._in_block(True, emit_all)[1]


def _rewrite_block(block: DataflowBlock, new: dict) -> Optional[DataflowBlock]:
    """``block`` with the values in ``new`` (bindings in dependency order), or None when nothing changes."""
    own = {b.var for b in block.bindings}
    for var, value in new.items():
        if var not in own:
            raise ValueError(f"rewrite_bindings: the rewriter returned {getattr(var, 'name_hint', var)!r}, which is "
                             "not a variable bound in the matched block")
        if not isinstance(value, Expr):
            raise TypeError(f"rewrite_bindings: the new value of {var.name_hint!r} is a {type(value).__name__}, not "
                            "an expression")
    if all(new[b.var] is b.value for b in block.bindings if b.var in new):
        return None
    return DataflowBlock(in_dependency_order(_BlockRebuilder().rebuild(block, new)))


def in_dependency_order(bindings: list) -> list:
    """``bindings`` (of one dataflow block) reordered so that each variable is bound before it is read, otherwise
    as they were; a ValueError names the bindings if they read each other in a cycle."""
    defined = {b.var for b in bindings}
    pending = list(bindings)
    done: set[Var] = set()
    out = []
    while pending:
        for i, b in enumerate(pending):
            if all(v in done or v not in defined for v in _vars_in(b.value)):
                out.append(pending.pop(i))
                done.add(b.var)
                break
        else:
            names = ", ".join(b.var.name_hint for b in pending)
            raise ValueError(f"bindings that read each other in a cycle: {names}")
    return out
