"""Symbolic sizes: a dimension is an ``int`` or a :class:`SymDim`.

A ``SymDim`` is a polynomial with integer coefficients over named size variables (``n``, ``2 * n``,
``n * m``, ``n + 1``) and floor quotients of such polynomials by a positive integer (``(n + 1) // 2``, what a
strided convolution or pooling makes of a symbolic height, as TVM's ``floordiv``). That is enough for the shapes
Relax ops produce from symbolic inputs (flatten multiplies, concat adds, reshape with ``-1`` divides exactly,
windows with a stride floor-divide) while equality stays a comparison of normal forms. Size variables are
identified by name within a function, as in TVMScript text.

A quotient is one factor of a monomial (a :class:`Quotient`, a ``str`` whose text is the parenthesized
quotient, so monomials stay sorted tuples of strings). :func:`floor_div` builds its normal form with identities
that hold for every integer value of the variables (sizes are non-negative, but a difference such as ``n - 1`` need
not be, so nothing assumes a sign), so that a quotient reached in any order, or printed and parsed back, is one
form:

- the numerator's coefficients lie in ``[0, divisor)``: ``(d * a + b) // d = a + b // d``, so ``(2 * n + 3) // 2``
  is ``n + 1`` and ``(n - 1) // 2 + 1`` is ``(n + 1) // 2``;
- the divisor is coprime to the numerator's non-constant coefficients: ``(g * a + c) // (g * e) = (a + c // g) // e``
  (an integer ``g * a`` leaves ``c``'s remainder by ``g`` nothing to add), so ``(2 * n + 2) // 4`` and
  ``(2 * n + 3) // 4`` are ``(n + 1) // 2``;
- the numerator holds no quotient alone with coefficient 1: ``(x // b + r) // d = (x + b * r) // (b * d)`` for any
  integer ``r``, so ``((n // 2) + 1) // 2`` is ``(n + 2) // 4`` and ``(n // 2) // 2`` is ``n // 4`` (of two such
  quotients the first in text order is merged).

It is no decision procedure: equal sizes written through other identities (``n // 2 + (n + 1) // 2`` is ``n``) keep
different forms; every rewrite keeps the value.
"""

from __future__ import annotations

import ast
import keyword
import math
import unicodedata
from dataclasses import dataclass
from typing import Mapping, Union

Monomial = tuple[str, ...]  # sorted factors (variable names or Quotients), repeated for powers; () is the constant
#: Terms a symbolic size may have: a product of sums expands term by term (k factors of two terms each give 2**k
#: terms), so a 300-byte shape annotation could otherwise take minutes and gigabytes to read.
MAX_TERMS = 1024


@dataclass(frozen=True)
class SymDim:
    """A symbolic size: ``terms`` maps monomials to non-zero integer coefficients (normal form)."""

    terms: tuple[tuple[Monomial, int], ...]

    # -- construction -------------------------------------------------------------------------
    @staticmethod
    def _make(terms: Mapping[Monomial, int]) -> "Dim":
        items = tuple(sorted((m, c) for m, c in terms.items() if c != 0))
        if not items:
            return 0
        if len(items) == 1 and items[0][0] == ():
            return items[0][1]
        return SymDim(items)

    # -- arithmetic ---------------------------------------------------------------------------
    def _dict(self) -> dict[Monomial, int]:
        return dict(self.terms)

    def __add__(self, other: "Dim") -> "Dim":
        out = self._dict()
        for m, c in _as_terms(other).items():
            out[m] = out.get(m, 0) + c
        return SymDim._make(out)

    __radd__ = __add__

    def __neg__(self) -> "Dim":
        return SymDim._make({m: -c for m, c in self.terms})

    def __sub__(self, other: "Dim") -> "Dim":
        return self + (-other)

    def __rsub__(self, other: "Dim") -> "Dim":
        return (-self) + other

    def __mul__(self, other: "Dim") -> "Dim":
        others = _as_terms(other)
        if len(self.terms) * len(others) > MAX_TERMS * MAX_TERMS:
            raise ValueError(f"symbolic size too large: a product of {len(self.terms)} and {len(others)} terms "
                             f"(at most {MAX_TERMS} terms)")
        out: dict[Monomial, int] = {}
        for m1, c1 in self.terms:
            for m2, c2 in others.items():
                m = tuple(sorted(m1 + m2))
                out[m] = out.get(m, 0) + c1 * c2
        if len(out) > MAX_TERMS:
            raise ValueError(f"symbolic size too large: its product has {len(out)} terms (at most {MAX_TERMS})")
        return SymDim._make(out)

    __rmul__ = __mul__

    def __floordiv__(self, other: "Dim") -> "Dim":
        """Floor division, as ``//`` in a dimension's text and TVM's ``floordiv`` (``n // 2`` for ``n = T.int64()``):
        exact by an int or a monomial that divides every term, else by a positive int (see :func:`divide`)."""
        return divide(self, other)

    def __rfloordiv__(self, other: "Dim") -> "Dim":
        return divide(other, self)

    def __truediv__(self, other):
        """Refused, as TVM refuses ``/`` on integer expressions: the division meant must be written."""
        raise TypeError(f"a symbolic size is divided with // (floor division, TVM's floordiv), not /: "
                        f"write {_operand(self)} // {_operand(other)}")

    def __rtruediv__(self, other):
        raise TypeError(f"a symbolic size is divided with // (floor division, TVM's floordiv), not /: "
                        f"write {_operand(other)} // {_operand(self)}")

    # -- queries ------------------------------------------------------------------------------
    def free_vars(self) -> set[str]:
        out: set[str] = set()
        for m, _ in self.terms:
            for v in m:
                out |= v.numerator.free_vars() if isinstance(v, Quotient) else {v}
        return out

    def evaluate(self, env: Mapping[str, int]) -> int:
        """The size's value with ``env``'s values for its variables; an :class:`UnboundSizeError` naming the first
        variable (in name order) that ``env`` lacks."""
        total = 0
        try:
            for m, c in self.terms:
                value = c
                for v in m:
                    value *= evaluate(v.numerator, env) // v.divisor if isinstance(v, Quotient) else env[v]
                total += value
        except KeyError:
            unbound = self.free_vars() - env.keys()
            if not unbound:
                raise
            raise UnboundSizeError(min(unbound), self) from None
        return total

    def is_var(self) -> bool:
        return len(self.terms) == 1 and len(self.terms[0][0]) == 1 and self.terms[0][1] == 1 and \
            not isinstance(self.terms[0][0][0], Quotient)

    @property
    def name(self) -> str:
        """The variable's name, for a plain size variable."""
        if not self.is_var():
            raise ValueError(f"{self} is not a single size variable")
        return self.terms[0][0][0]

    def __str__(self) -> str:
        out = ""
        # Highest degree first reads naturally: "n * m + 2 * n + 1".
        for m, c in sorted(self.terms, key=lambda t: (-len(t[0]), t[0])):
            factors = list(m) if abs(c) == 1 and m else [str(abs(c))] + list(m)
            text = " * ".join(factors)
            if not out:
                out = ("-" if c < 0 else "") + text
            else:
                out += (" - " if c < 0 else " + ") + text
        return out

    def __repr__(self) -> str:
        return f"SymDim({str(self)!r})"


Dim = Union[int, SymDim]


class UnboundSizeError(KeyError, ValueError):
    """A size is evaluated without a value for one of its variables (an ill-formed module uses a size variable
    no parameter or ``match_cast`` defines): a ``ValueError`` naming the variable, and a ``KeyError`` for the
    callers that look the variable up."""

    def __init__(self, name: str, size: "SymDim"):
        super().__init__(name)
        self.name, self.size = name, size

    def __str__(self) -> str:
        shown = "" if self.size.is_var() else f" (in the size {self.size})"
        return f"the size variable {self.name!r}{shown} has no value"


class Quotient(str):
    """The factor ``numerator // divisor`` of a monomial, in normal form (see the module docstring); its text is
    the parenthesized quotient, which orders, hashes, prints and parses back as the factor."""

    numerator: SymDim
    divisor: int

    def __new__(cls, numerator: SymDim, divisor: int) -> "Quotient":
        self = super().__new__(cls, f"(({numerator}) // {divisor})" if len(numerator.terms) > 1
                               else f"({numerator} // {divisor})")
        self.numerator, self.divisor = numerator, divisor
        return self

    def __reduce__(self):
        return Quotient, (self.numerator, self.divisor)


def floor_div(a: Dim, divisor: int) -> Dim:
    """``a // divisor`` rounded toward minus infinity (TVM's ``floordiv``), for a positive int ``divisor``: an int
    for an int, the exact quotient where there is one, else a polynomial plus one :class:`Quotient` factor in the
    normal form of the module docstring."""
    if isinstance(divisor, bool) or not isinstance(divisor, int) or divisor <= 0:
        raise ValueError(f"a symbolic size is floor-divided only by a positive int, not {divisor!r}")
    if isinstance(a, int):
        return a // divisor
    whole: Dim = 0
    while True:  # each pass merges one nested quotient into its numerator, so the nesting depth bounds the passes
        kept: dict[Monomial, int] = {}
        rest: dict[Monomial, int] = {}
        for m, c in _as_terms(a).items():
            kept[m], rest[m] = divmod(c, divisor)
        whole = whole + SymDim._make(kept)
        constant = rest.pop((), 0)
        if not any(rest.values()):  # only a constant in [0, divisor) is left: it adds nothing
            return whole
        common = math.gcd(divisor, *rest.values())  # < divisor: every coefficient is in [0, divisor), one is not 0
        if common > 1:  # (2 * n + 3) // 4 is (n + 3 // 2) // 2, (n + 1) // 2
            rest, divisor = {m: c // common for m, c in rest.items()}, divisor // common
        rest[()] = constant // common
        remainder = SymDim._make(rest)
        inner = next((m[0] for m, c in remainder.terms if c == 1 and len(m) == 1 and isinstance(m[0], Quotient)),
                     None)
        if inner is None:
            return whole + SymDim((((Quotient(remainder, divisor),), 1),))
        # (x // b + r) // d is (x + b * r) // (b * d): x + b * r = b * (x // b + r) + x % b, with 0 <= x % b < b
        r = remainder - SymDim((((inner,), 1),))
        a, divisor = inner.numerator + inner.divisor * r, inner.divisor * divisor


def divide(a: Dim, b: Dim, text: str | None = None) -> Dim:
    """``a // b`` for dimensions (``//`` in a dimension's text, on a :class:`SymDim`): the exact quotient when
    ``b`` is an int or a monomial dividing every term of ``a``, else the floor quotient by a positive int; a
    ``ValueError`` for anything else (a symbolic divisor that does not divide, zero, a negative int), naming
    ``text``, the division as written."""
    quotient = exact_div(a, b)
    if quotient is not None:
        return quotient
    if isinstance(b, int) and not isinstance(b, bool) and b > 0:
        return floor_div(a, b)
    raise ValueError(f"dimension {text or f'{_operand(a)} // {_operand(b)}'!r} divides by {b}: a symbolic size is "
                     "floor-divided by a positive int, or divided exactly")


def _operand(d) -> str:
    """``d``'s text as an operand of ``//``: parenthesized unless it is a natural number, a variable or a quotient."""
    alone = isinstance(d, int) and d >= 0 or isinstance(d, SymDim) and len(d.terms) == 1 and d.terms[0][1] == 1 \
        and len(d.terms[0][0]) == 1
    return str(d) if alone else f"({d})"


def factor_dim(v: str) -> Dim:
    """The dimension one factor of a monomial stands for: its size variable, or its quotient."""
    return floor_div(v.numerator, v.divisor) if isinstance(v, Quotient) else SizeVar(v)


def substitute(d: Dim, lookup) -> Dim:
    """``d`` with every size variable ``v`` replaced by ``lookup(v)`` (a dim), quotients recomputed."""
    if isinstance(d, int):
        return d
    out: Dim = 0
    for m, c in d.terms:
        term: Dim = c
        for v in m:
            term = term * (floor_div(substitute(v.numerator, lookup), v.divisor) if isinstance(v, Quotient)
                           else lookup(v))
        out = out + term
    return out


def SizeVar(name: str) -> SymDim:
    """A named size variable, such as a batch dimension ``n``.

    Sizes are identified by name, and the text format writes the name in a dimension's string (``"n * 2"``) that
    Python's parser reads back, so only a name that reads back as itself is accepted: an identifier that is not a
    keyword (``"if"``, ``"None"`` would not parse), in NFKC form (Python reads ``𝑛`` as ``n``: two sizes would become
    one). Function names are held to the same rule (``check_function_name``); a variable's the printer can rename."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"size variable name {name!r} is not an identifier")
    if keyword.iskeyword(name):
        raise ValueError(f"size variable name {name!r} is a Python keyword: the text format writes sizes as Python "
                         "expressions (\"n * 2\"), where it would not read back as a name")
    if not unicodedata.is_normalized("NFKC", name):
        raise ValueError(f"size variable name {name!r} is not in NFKC form: Python reads identifiers normalised, "
                         f"so the text format would read it back as the size {unicodedata.normalize('NFKC', name)!r}; "
                         "name the size in NFKC form")
    return SymDim((((name,), 1),))


def _as_terms(d: Dim) -> dict[Monomial, int]:
    if isinstance(d, SymDim):
        return d._dict()
    if isinstance(d, int):
        return {(): d} if d else {}
    raise TypeError(f"expected an int or SymDim dimension, got {type(d).__name__}")


def exact_div(a: Dim, b: Dim) -> Dim | None:
    """``a / b`` when ``b`` is an int or a monomial and divides every term of ``a``; else ``None``."""
    tb = _as_terms(b)
    if len(tb) != 1:
        return a if a == b and a != 0 else None
    (mb, cb), = tb.items()
    out: dict[Monomial, int] = {}
    for m, c in _as_terms(a).items():
        rest = list(m)
        for v in mb:
            if v not in rest:
                return None
            rest.remove(v)
        if c % cb:
            return None
        out[tuple(rest)] = c // cb
    return SymDim._make(out)


def free_vars(d: Dim) -> set[str]:
    return d.free_vars() if isinstance(d, SymDim) else set()


def evaluate(d: Dim, env: Mapping[str, int]) -> int:
    return d.evaluate(env) if isinstance(d, SymDim) else int(d)


def is_static(d: Dim) -> bool:
    return isinstance(d, int)


def format_dim(d: Dim) -> str:
    return str(d)


def product(dims) -> Dim:
    out: Dim = 1
    for d in dims:
        out = out * d
    return out


def parse_dim(text: str) -> Dim:
    """Parse ``"n"``, ``"2 * n + 1"``, ``"n * m"`` or ``"64"`` into a dimension."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
        return dim_from_ast(tree, lambda name: SizeVar(name))
    except SyntaxError as exc:
        raise ValueError(f"malformed dimension {text!r}: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise ValueError(f"dimension {_excerpt(text)} nests too deeply") from None


def _excerpt(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def dim_from_ast(node: ast.AST, lookup) -> Dim:
    """Build a dimension from a Python expression; ``lookup(name)`` resolves a bare name."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        return lookup(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -dim_from_ast(node.operand, lookup)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)):
        a, b = dim_from_ast(node.left, lookup), dim_from_ast(node.right, lookup)
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        return divide(a, b, ast.unparse(node))
    raise ValueError(f"unsupported dimension expression {ast.unparse(node)!r}: "
                     "expected integers, size variables, +, -, * or //")
