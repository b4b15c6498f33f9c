"""Structural equality and hashing of Relax IR, as TVM's ``structural_equal`` / ``structural_hash``.

Both sides are flattened into a stream of tokens (node kind, counts, values, and variables numbered in the
order they are first met), and two objects are equal when their streams are. So variables are compared up to
renaming (alpha-equivalence): parameters and binding variables correspond by position of definition, name hints
do not matter, a ``Var`` never equals a ``DataflowVar``, and their struct info must agree. Free variables
(used but not defined inside the compared objects) must be the very same object, unless ``map_free_vars``.
The hash digests the same stream (free variables by position), so ``structural_equal(a, b)`` implies
``structural_hash(a) == structural_hash(b)``; it is deterministic across processes (a compile-cache key).

    assert_structural_equal(before, expected)
    AssertionError: structural mismatch at main.body.blocks[0].bindings[2].value.args[1]:
        R.Tensor((3,), dtype="float32") vs R.Tensor((4,), dtype="float32")
      lhs: lv2 = R.add(lv1, R.const([...], "float32"))
      rhs: lv2 = R.add(lv1, R.const([...], "float32"))
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, Iterator, Optional, Union

import numpy as np

from .dtype import is_floating
from .expr import (Binding, BindingBlock, Call, Constant, DataflowBlock, Expr, Function, GlobalVar, If,
                   MatchCast, PrimValue, SeqExpr, ShapeExpr, StringImm, Tuple, TupleGetItem, Var)
from .module import IRModule
from .printer import format_expr, format_literal, format_struct_info
from .struct_info import StructInfo
from .sym import SymDim

IRObject = Union[IRModule, Expr, StructInfo]
_BRIEF = 160  # characters of a node shown in a mismatch message


class _ArrayKey:
    """Compares arrays by dtype, shape and exact bytes, except that all NaNs of a dtype are one value."""

    def __init__(self, array: np.ndarray):
        self.array = np.asarray(array)

    def canonical_bytes(self) -> bytes:
        a = self.array
        if (is_floating(a.dtype) or a.dtype.kind == "c") and np.isnan(a).any():
            a = np.where(np.isnan(a), np.array(np.nan, dtype=a.dtype), a)
        return np.ascontiguousarray(a).tobytes()

    def __eq__(self, other) -> bool:
        if not isinstance(other, _ArrayKey):
            return NotImplemented
        a, b = self.array, other.array
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        return self.canonical_bytes() == other.canonical_bytes()

    def __hash__(self) -> int:  # pragma: no cover - keys are digested, not put in sets
        return hash(self.canonical_bytes())


class _Value:
    """An attribute value compared by value: numbers by kind (bool/int/float, NaN == NaN), sequences, dicts,
    arrays (as :class:`_ArrayKey`), struct info and dims structurally, op records by identity."""

    def __init__(self, value: Any):
        self.value = value

    def __eq__(self, other) -> bool:
        return isinstance(other, _Value) and _values_equal(self.value, other.value)

    __hash__ = None  # type: ignore[assignment]


def _number_kind(v) -> Optional[str]:
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, (int, np.integer)):
        return "int"
    if isinstance(v, (float, np.floating)):
        return "float"
    return None


def _values_equal(a, b) -> bool:
    ka, kb = _number_kind(a), _number_kind(b)
    if ka or kb:
        if ka != kb:
            return False
        if ka == "float" and math.isnan(a) and math.isnan(b):
            return True
        return a == b
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and _ArrayKey(a) == _ArrayKey(b)
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        return (isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b)
                and all(_values_equal(x, y) for x, y in zip(a, b)))
    if isinstance(a, dict) or isinstance(b, dict):
        return (isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys()
                and all(_values_equal(a[k], b[k]) for k in a))
    if isinstance(a, (Expr, IRModule)) or isinstance(b, (Expr, IRModule)):
        return structural_equal(a, b) if type(a) is type(b) else False
    if type(a) is not type(b):
        return False
    return a is b or a == b


def _feed(h, obj) -> None:
    """Digest ``obj`` deterministically (no ``hash()``, which is salted per process for strings)."""
    if isinstance(obj, _Value):
        obj = obj.value
    kind = _number_kind(obj)
    if kind == "float" and math.isnan(obj):
        h.update(b"f:nan;")
    elif kind:
        # Digest the Python value: NumPy scalars and -0.0 must digest as what they compare equal to.
        value = bool(obj) if kind == "bool" else int(obj) if kind == "int" else float(obj) + 0.0
        h.update(f"{kind[0]}:{value!r};".encode())
    elif obj is None or isinstance(obj, str):
        h.update(f"s:{obj!r};".encode())
    elif isinstance(obj, _ArrayKey) or isinstance(obj, np.ndarray):
        arr = obj if isinstance(obj, _ArrayKey) else _ArrayKey(obj)
        h.update(f"a:{arr.array.dtype.str}{arr.array.shape};".encode())
        h.update(arr.canonical_bytes())
    elif isinstance(obj, (tuple, list)):
        h.update(f"t{len(obj)}(".encode())
        for x in obj:
            _feed(h, x)
        h.update(b")")
    elif isinstance(obj, dict):
        h.update(f"d{len(obj)}(".encode())
        for k in sorted(obj, key=repr):
            _feed(h, k)
            _feed(h, obj[k])
        h.update(b")")
    elif isinstance(obj, (StructInfo, SymDim)):
        h.update(f"i:{obj!r};".encode())  # frozen dataclasses: the repr is the structure
    elif isinstance(obj, (Expr, IRModule)):
        h.update(f"e:{structural_hash(obj)};".encode())
    else:  # op records and anything else: by name
        h.update(f"o:{type(obj).__name__}:{getattr(obj, 'name', '')};".encode())


class _Text(str):
    """A description shown as it is in a mismatch message (a plain str would be shown quoted, as a value)."""


def _brief(x) -> str:
    try:
        if isinstance(x, _Text):
            text = str(x)
        elif isinstance(x, Binding):
            text = f"{x.var.name_hint} = {format_expr(x.value)}"
        elif isinstance(x, StructInfo) or x is None:
            text = format_struct_info(x)
        elif isinstance(x, Var):
            text = f"{type(x).__name__} {x.name_hint}: {format_struct_info(x.struct_info)}"
        elif isinstance(x, Expr):
            text = format_expr(x)
        elif isinstance(x, IRModule):
            text = f"IRModule({', '.join(x)})"
        else:
            text = format_literal(x)
    except (TypeError, ValueError):  # what the printer cannot write (a nested function, an odd attr value)
        text = repr(x)
    text = " ".join(text.split())
    return text if len(text) <= _BRIEF else text[:_BRIEF - 3] + "..."


class _Tokens:
    """Flattens one side into ``(path, key, shown, context)`` tokens; equal structures give equal keys."""

    def __init__(self, map_free_vars: bool):
        self.map_free_vars = map_free_vars
        self.numbers: dict[Var, int] = {}
        self.count = 0  # never reused, so numbers stay aligned on both sides across scopes
        self.context: Any = None  # the binding being flattened, shown in a mismatch message

    def _tok(self, path: str, key, shown) -> tuple:
        return (path, key, shown, self.context)

    def obj(self, x, path: str) -> Iterator[tuple]:
        if isinstance(x, IRModule):
            yield from self.module(x, path)
        elif isinstance(x, StructInfo):
            yield self._tok(path, ("sinfo", x), x)
        elif isinstance(x, Expr):
            yield from self.expr(x, path)
        elif isinstance(x, (Binding, BindingBlock)):
            yield from (self.binding(x, path) if isinstance(x, Binding) else self.block(x, path))
        else:
            raise TypeError(f"structural_equal: unknown IR object type {type(x).__name__}")

    def module(self, mod: IRModule, path: str) -> Iterator[tuple]:
        names = sorted(mod)
        yield self._tok(path or "<module>", ("module", tuple(names)), _Text(f"functions {names}"))
        for name in names:
            yield from self.function(mod[name], _join(path, name))
        yield from self.attrs(mod.attrs, _join(path, "attrs"))

    def attrs(self, attrs, path: str) -> Iterator[tuple]:
        keys = sorted(attrs)
        yield self._tok(path, ("attr-keys", tuple(keys)), _Text(f"attributes {keys}"))
        for k in keys:
            yield self._tok(f'{path}["{k}"]', ("attr", _Value(attrs[k])), attrs[k])

    def var_def(self, var: Var, path: str) -> Iterator[tuple]:
        # A fresh number even for a var seen before: a Var object reused as another function's parameter is a
        # new definition there, as in the text format.
        n = self.numbers[var] = self._next()
        yield self._tok(path, ("def", type(var).__name__, n), var)
        yield self._tok(path, ("sinfo", var.struct_info), var.struct_info)

    def var_use(self, var: Var, path: str) -> Iterator[tuple]:
        if var in self.numbers:
            yield self._tok(path, ("var", self.numbers[var]), var)
        elif self.map_free_vars:
            self.numbers[var] = n = self._next()
            yield self._tok(path, ("free", type(var).__name__, n), var)
            yield self._tok(path, ("sinfo", var.struct_info), var.struct_info)
        else:
            yield self._tok(path, ("free", id(var)), var)

    def _next(self) -> int:
        self.count += 1
        return self.count

    def function(self, f: Function, path: str) -> Iterator[tuple]:
        saved = dict(self.numbers)  # a function's variables are its own (a nested one still sees the outer)
        yield self._tok(path, ("function", len(f.params), f.is_pure), _Text(f"function of {len(f.params)} params"))
        for i, p in enumerate(f.params):
            yield from self.var_def(p, f"{path}.params[{i}]")
        yield self._tok(_join(path, "ret_struct_info"), ("sinfo", f.ret_struct_info), f.ret_struct_info)
        yield from self.attrs(f.attrs, _join(path, "attrs"))
        yield from self.expr(f.body, _join(path, "body"))
        self.numbers = saved

    def expr(self, e: Expr, path: str) -> Iterator[tuple]:
        if isinstance(e, Var):
            yield from self.var_use(e, path)
        elif isinstance(e, GlobalVar):
            yield self._tok(path, ("gvar", e.name_hint), e)
        elif isinstance(e, Constant):
            yield self._tok(path, ("const", e.struct_info), e.struct_info)
            yield self._tok(path, ("data", _ArrayKey(e.data)), e)
        elif isinstance(e, ShapeExpr):
            yield self._tok(path, ("shape", e.values), e)
        elif isinstance(e, PrimValue):
            yield self._tok(path, ("prim", e.dtype, _Value(e.value)), e)
        elif isinstance(e, StringImm):
            yield self._tok(path, ("str", e.value), e)
        elif isinstance(e, Call):
            yield from self.call(e, path)
        elif isinstance(e, Tuple):
            yield self._tok(path, ("tuple", len(e.fields)), e)
            for i, f in enumerate(e.fields):
                yield from self.expr(f, f"{path}.fields[{i}]")
        elif isinstance(e, TupleGetItem):
            yield self._tok(path, ("getitem", e.index), e)
            yield from self.expr(e.tuple_value, _join(path, "tuple_value"))
        elif isinstance(e, SeqExpr):
            yield self._tok(path, ("seq", len(e.blocks)), _Text(f"{len(e.blocks)} blocks"))
            for i, b in enumerate(e.blocks):
                yield from self.block(b, f"{path}.blocks[{i}]")
            yield from self.expr(e.body, _join(path, "body"))
        elif isinstance(e, Function):
            yield from self.function(e, path)
        elif isinstance(e, If):
            yield self._tok(path, ("if",), _Text("R.If"))
            yield from self.expr(e.cond, _join(path, "cond"))
            yield from self.expr(e.true_branch, _join(path, "true_branch"))
            yield from self.expr(e.false_branch, _join(path, "false_branch"))
        else:
            raise TypeError(f"structural_equal: unknown expression type {type(e).__name__}")

    def call(self, c: Call, path: str) -> Iterator[tuple]:
        op = c.op
        op_key = ("gvar", op.name_hint) if isinstance(op, GlobalVar) else ("expr",) if isinstance(op, Expr) else op
        yield self._tok(path, ("call", op_key, len(c.args)), c)
        if isinstance(op, Var):
            yield from self.var_use(op, _join(path, "op"))
        elif isinstance(op, Expr) and not isinstance(op, GlobalVar):
            yield from self.expr(op, _join(path, "op"))
        for i, a in enumerate(c.args):
            yield from self.expr(a, f"{path}.args[{i}]")
        yield from self.attrs(c.attrs, _join(path, "attrs"))

    def block(self, block: BindingBlock, path: str) -> Iterator[tuple]:
        kind = "dataflow" if isinstance(block, DataflowBlock) else "binding"
        yield self._tok(path, (kind, len(block.bindings)), _Text(f"{kind} block of {len(block.bindings)} bindings"))
        for i, b in enumerate(block.bindings):
            yield from self.binding(b, f"{path}.bindings[{i}]")

    def binding(self, b: Binding, path: str) -> Iterator[tuple]:
        saved, self.context = self.context, b
        yield self._tok(path, (type(b).__name__,), b)
        yield from self.expr(b.value, _join(path, "value"))
        if isinstance(b, MatchCast):
            yield self._tok(_join(path, "struct_info"), ("sinfo", b.struct_info), b.struct_info)
        # The variable is defined after its value, which cannot refer to it.
        yield from self.var_def(b.var, _join(path, "var"))
        self.context = saved


def _join(path: str, field: str) -> str:
    return f"{path}.{field}" if path else field


def _first_difference(a, b, map_free_vars: bool) -> Optional[str]:
    """``None`` when ``a`` and ``b`` are structurally equal, else a message saying where they first differ."""
    if type(a) is not type(b) and not (isinstance(a, Expr) and isinstance(b, Expr)) \
            and not (isinstance(a, StructInfo) and isinstance(b, StructInfo)):
        return f"<root>: {type(a).__name__} vs {type(b).__name__}"
    left, right = _Tokens(map_free_vars).obj(a, ""), _Tokens(map_free_vars).obj(b, "")
    sentinel = ("", ("<end>",), _Text("<nothing more>"), None)
    while True:
        ta, tb = next(left, sentinel), next(right, sentinel)
        if ta is sentinel and tb is sentinel:
            return None
        if not (ta[1] == tb[1]):
            message = f"structural mismatch at {ta[0] or tb[0] or '<root>'}: {_brief(ta[2])} vs {_brief(tb[2])}"
            if ta[3] is not None or tb[3] is not None:
                message += f"\n  lhs: {_brief(ta[3])}\n  rhs: {_brief(tb[3])}"
            return message


def structural_equal(a: IRObject, b: IRObject, map_free_vars: bool = False) -> bool:
    """True when ``a`` and ``b`` (modules, functions, expressions or struct info) are equal up to renaming."""
    return _first_difference(a, b, map_free_vars) is None


def assert_structural_equal(a: IRObject, b: IRObject, map_free_vars: bool = False) -> None:
    """Raise ``AssertionError`` naming the path where ``a`` and ``b`` first differ, with both sides shown."""
    message = _first_difference(a, b, map_free_vars)
    if message is not None:
        raise AssertionError(message)


def structural_hash(x: IRObject) -> int:
    """A 64-bit hash consistent with :func:`structural_equal` (with or without ``map_free_vars``)."""
    h = hashlib.blake2b(digest_size=8)
    for _, key, _, _ in _Tokens(map_free_vars=True).obj(x, ""):
        _feed(h, key)
    return int.from_bytes(h.digest(), "little")
