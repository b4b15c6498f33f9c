"""``layout_transform`` (TVM's ``R.layout_transform(x, index_map, pad_value, axis_separators,
input_axis_separators)``): the element at index ``i`` of ``x`` moves to index ``index_map(i)`` of the result.

The map is TVM's Python lambda, ``lambda n, c, h, w: (n, c // 4, h, w, c % 4)`` (NCHW to NCHW4c). The record stores
it as that text, in one canonical spelling (``ast.unparse``'s), so equal maps compare equal, print and parse back;
the text is read as an AST and never evaluated. A map given as a Python callable (``op.layout_transform(x, lambda
i: (i // 4, i % 4))``) is traced with symbolic indices into the same text.

Supported maps move whole axes, split an axis by a constant (``c // 4`` and ``c % 4``, both written) and fuse
axes (``h * 8 + w`` where ``w`` has extent 8): every output index is a sum of parts with constant coefficients,
each part (an axis, or the quotient or remainder of one) used exactly once. Anything else (``i * 2``, ``(i // 2) %
3``, an axis left out) is refused with the map and what was expected.

An axis of size ``d`` split by ``k`` becomes ``ceil(d / k)`` by ``k``: when ``k`` does not divide ``d`` the result
has elements no input index maps to, filled with ``pad_value`` (0 when it is None: TVM leaves them unspecified).
The op is a composite: ``nn.pad`` (the split axes to a multiple of their factor), ``reshape`` (split),
``permute_dims`` (move), ``reshape`` (fuse). Its gradient is ``layout_transform`` by the inverse map for moves
and exact splits (``lambda i0, i1: (i0 * 4 + i1,)``), else reverse mode over the decomposition.
``axis_separators`` and ``input_axis_separators`` only shape TVM's physical buffers: empty (or None) is accepted.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..ir import sym
from ..ir.dtype import is_floating
from ..ir.expr import Call, Expr
from ..ir.index_map import IndexMapText
from ..ir.struct_info import TensorStructInfo
from . import grad_utils as gu
from .common import is_int_value
from .registry import REQUIRED, BadSample, Op, Sample, fail, register

_T = TensorStructInfo


# -- the map: text <-> parts ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Part:
    """One part of an output index: input axis ``axis`` whole (``factor`` 0), its quotient ``axis // factor``
    (``kind`` "outer") or its remainder ``axis % factor`` ("inner")."""

    axis: int
    kind: str  # "whole" | "outer" | "inner"
    factor: int = 0


@dataclass(frozen=True)
class IndexMap:
    """A parsed map: the parameter names and, per output index, its ``(coefficient, Part)`` terms, largest
    coefficient first."""

    params: tuple[str, ...]
    outputs: tuple[tuple[tuple[int, Part], ...], ...]
    text: str


def parse_index_map(text: str) -> IndexMap:
    """The map ``text`` (``"lambda n, c: (c // 4, n, c % 4)"``) read without evaluating it; a ``ValueError`` saying
    what is not supported."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"index_map {text!r} is not a Python lambda: {exc.msg}") from None
    if not isinstance(tree, ast.Lambda):
        raise ValueError(f"index_map {text!r} must be a lambda: lambda n, c, h, w: (n, h, w, c)")
    a = tree.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults or not a.args:
        raise ValueError(f"index_map {text!r}: the lambda takes one plain parameter per input axis")
    params = tuple(p.arg for p in a.args)
    if len(set(params)) != len(params):
        raise ValueError(f"index_map {text!r}: parameter names repeat")
    body = tree.body.elts if isinstance(tree.body, (ast.Tuple, ast.List)) else [tree.body]
    outputs = tuple(_output_terms(e, params, text) for e in body)
    _check_parts(outputs, params, text)
    canonical = ast.unparse(ast.Lambda(a, ast.Tuple(list(body), ast.Load())))
    return IndexMap(params, outputs, canonical)


def _output_terms(node: ast.AST, params: tuple, text: str) -> tuple:
    terms = []
    for coef, part in _terms(node, params, text):
        if coef < 1:
            raise ValueError(f"index_map {text!r}: {ast.unparse(node)} scales a part by {coef}; coefficients must "
                             "be positive")
        terms.append((coef, part))
    if not terms:
        raise ValueError(f"index_map {text!r}: the output {ast.unparse(node)} uses no input axis")
    return tuple(sorted(terms, key=lambda t: -t[0]))


def _terms(node: ast.AST, params: tuple, text: str) -> list:
    """``node`` as ``(coefficient, Part)`` terms: a sum of parts times constants."""
    unsupported = ValueError(f"index_map {text!r}: {ast.unparse(node)} is not supported; an output index is an axis "
                             "(c), its split (c // 4, c % 4) or a sum of such times constants (h * 8 + w)")
    if isinstance(node, ast.Name) and node.id in params:
        return [(1, Part(params.index(node.id), "whole"))]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _terms(node.left, params, text) + _terms(node.right, params, text)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        const, other = (node.left, node.right) if _constant(node.left) is not None else (node.right, node.left)
        k = _constant(const)
        if k is None:
            raise unsupported
        return [(c * k, p) for c, p in _terms(other, params, text)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.FloorDiv, ast.Mod)):
        k = _constant(node.right)
        if not (isinstance(node.left, ast.Name) and node.left.id in params) or k is None or k < 1:
            raise ValueError(f"index_map {text!r}: {ast.unparse(node)} is not supported; split an axis by a "
                             "positive constant (c // 4 and c % 4)")
        return [(1, Part(params.index(node.left.id), "outer" if isinstance(node.op, ast.FloorDiv) else "inner", k))]
    raise unsupported


def _constant(node: ast.AST) -> Optional[int]:
    value = getattr(node, "value", None) if isinstance(node, ast.Constant) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _check_parts(outputs: tuple, params: tuple, text: str) -> None:
    """Each axis used once: whole, or split into its quotient and remainder by one factor."""
    seen: dict[int, list[Part]] = {}
    for terms in outputs:
        for _, part in terms:
            seen.setdefault(part.axis, []).append(part)
    for axis, name in enumerate(params):
        parts = seen.get(axis, [])
        kinds = sorted(p.kind for p in parts)
        if kinds == ["whole"] or (kinds == ["inner", "outer"] and parts[0].factor == parts[1].factor):
            continue
        written = ", ".join(_part_text(p, params) for p in parts) or "nowhere"
        raise ValueError(f"index_map {text!r}: axis {name!r} is used as {written}; each input axis must appear "
                         f"once, whole ({name}) or split by one factor ({name} // k and {name} % k)")


def _part_text(p: Part, params: tuple) -> str:
    name = params[p.axis]
    return name if p.kind == "whole" else f"{name} {'//' if p.kind == 'outer' else '%'} {p.factor}"


# -- a callable traced into text ----------------------------------------------------------------------------------

class _Traced:
    """A symbolic index a Python map is called with: arithmetic builds the expression's text."""

    def __init__(self, text: str, atom: bool = True):
        self.text, self.atom = text, atom

    def _wrap(self) -> str:
        return self.text if self.atom else f"({self.text})"

    def _binary(self, other, op: str, reverse: bool = False) -> "_Traced":
        if isinstance(other, _Traced):
            right = other._wrap()
        elif is_int_value(other) or isinstance(other, np.integer):
            right = str(int(other))
        else:
            raise ValueError(f"layout_transform: index_map computes with {other!r}; it takes ints and the indices")
        left = self._wrap()
        return _Traced(f"{right} {op} {left}" if reverse else f"{left} {op} {right}", atom=False)

    def __add__(self, o):
        return self._binary(o, "+")

    def __radd__(self, o):
        return self._binary(o, "+", True)

    def __mul__(self, o):
        return self._binary(o, "*")

    def __rmul__(self, o):
        return self._binary(o, "*", True)

    def __floordiv__(self, o):
        return self._binary(o, "//")

    def __mod__(self, o):
        return self._binary(o, "%")

    def _unsupported(self, *_):
        raise ValueError(f"layout_transform: index_map computes with {self.text}: only +, * and // or % by an int "
                         "are supported (an axis moved, split or fused)")

    def __bool__(self):  # (``(j, i) if i else (i, j)`` would take one branch for every index)
        raise ValueError(f"layout_transform: index_map tests {self.text} (an `if` or a comparison on an index); a map "
                         "computes each output index from the indices with +, * and // or % by an int")

    __sub__ = __rsub__ = __neg__ = __pos__ = __abs__ = __pow__ = __rpow__ = __truediv__ = __rtruediv__ = _unsupported
    __rfloordiv__ = __rmod__ = __lshift__ = __rshift__ = __and__ = __or__ = __xor__ = __invert__ = _unsupported
    __lt__ = __le__ = __gt__ = __ge__ = __int__ = __index__ = __float__ = _unsupported


def index_map_text(fn) -> str:
    """A Python map (``lambda n, c: (n, c // 4, c % 4)``) as the text the record stores, by calling it with
    symbolic indices named as its parameters."""
    try:
        names = [p.name for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError):
        raise ValueError(f"index_map {fn!r}: its parameters cannot be read") from None
    result = fn(*(_Traced(n) for n in names))
    result = result if isinstance(result, (tuple, list)) else (result,)
    for r in result:
        if not isinstance(r, _Traced):
            raise ValueError(f"index_map {fn!r} returns {r!r}; each output index must be computed from the indices")
    body = ", ".join(r.text for r in result) + ("," if len(result) == 1 else "")
    return f"lambda {', '.join(names)}: ({body})"


# -- shapes ---------------------------------------------------------------------------------------------------

def _ceil_div(d, k: int):
    return -(-d // k) if isinstance(d, int) else sym.floor_div(d + (k - 1), k)


def _part_extent(p: Part, shape: tuple):
    d = shape[p.axis]
    return d if p.kind == "whole" else _ceil_div(d, p.factor) if p.kind == "outer" else p.factor


def _output_shape(m: IndexMap, shape: tuple) -> tuple:
    """The result's shape: per output, the product of its parts' extents, after checking that the coefficients of
    a fused output are the mixed radix of those extents (``h * 8 + w`` needs ``w`` of extent 8)."""
    out = []
    for terms in m.outputs:
        expected = 1
        for coef, part in reversed(terms):
            if not (isinstance(expected, int) and coef == expected):
                fail(f"index_map {m.text!r}: {_part_text(part, m.params)} is scaled by {coef}, but the parts after "
                     f"it span {expected} indices on shape {_fmt(shape)}; fused parts need coefficients equal to "
                     "the extent of what follows them")
            expected = expected * _part_extent(part, shape)
        out.append(expected)
    return tuple(out)


def _fmt(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _padded(m: IndexMap, shape: tuple) -> tuple:
    """The input shape with every split axis rounded up to a multiple of its factor."""
    out = list(shape)
    for terms in m.outputs:
        for _, p in terms:
            if p.kind == "outer":
                out[p.axis] = _ceil_div(shape[p.axis], p.factor) * p.factor
    return tuple(out)


# -- the record -----------------------------------------------------------------------------------------------

def _canon(attrs: dict) -> dict:
    index_map = attrs["index_map"]
    if callable(index_map) and not isinstance(index_map, str):
        index_map = index_map_text(index_map)
    if not isinstance(index_map, str):
        fail(f"index_map must be a lambda (or its text), got {index_map!r}")
    out = dict(attrs, index_map=IndexMapText(parse_index_map(index_map).text))
    for key in ("axis_separators", "input_axis_separators"):
        if out[key] == ():  # TVM's printer writes []: the same as None, no separators
            out[key] = None
    return out


def _check(attrs: dict) -> None:
    v = attrs["pad_value"]
    if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
        fail(f"pad_value must be None or a number, got {v!r}")
    for key in ("axis_separators", "input_axis_separators"):
        if attrs[key] is not None:
            fail(f"{key}={attrs[key]!r} is not supported: separators only shape TVM's physical buffers; leave "
                 "them empty")


def _infer(args, attrs):
    (x,) = args
    m = parse_index_map(attrs["index_map"])
    if x.ndim != -1 and x.ndim != len(m.params):
        fail(f"index_map {m.text!r} takes {len(m.params)} indices, but the input has rank {x.ndim}")
    pad = attrs["pad_value"]
    if isinstance(pad, float) and not is_floating(x.dtype) and not pad.is_integer():
        fail(f"pad_value {pad!r} is not a value of the data's dtype {x.dtype} (as TVM refuses it)")
    if x.shape is None:
        return _T(None, x.dtype, len(m.outputs))
    return _T(_output_shape(m, tuple(x.shape)), x.dtype)


def _eval_index(node: ast.AST, env: dict):
    """An output index of the map over NumPy index arrays (the parsed forms only: names, ints, +, *, //, %)."""
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.Constant):
        return node.value
    left, right = _eval_index(node.left, env), _eval_index(node.right, env)
    ops = {ast.Add: np.add, ast.Mult: np.multiply, ast.FloorDiv: np.floor_divide, ast.Mod: np.mod}
    return ops[type(node.op)](left, right)


def _reference(x, index_map, pad_value, axis_separators, input_axis_separators):
    """Scatter: ``out[index_map(i)] = x[i]`` for every index ``i`` of ``x``, the rest ``pad_value`` (0 if None)."""
    m = parse_index_map(index_map)
    out = np.full(_output_shape(m, x.shape), 0 if pad_value is None else pad_value).astype(x.dtype)
    tree = ast.parse(m.text, mode="eval").body
    env = dict(zip(m.params, np.indices(x.shape)))
    out[tuple(np.broadcast_to(_eval_index(e, env), x.shape) for e in tree.body.elts)] = x
    return out


def _decompose(call: Call) -> Expr:
    """pad (split axes to a multiple of their factor), reshape (split), permute_dims (output order), reshape
    (fuse); steps that change nothing are left out."""
    from . import permute_dims, reshape
    from .nn import pad

    x, attrs = call.args[0], call.attrs
    m = parse_index_map(attrs["index_map"])
    shape = gu.shape_of(x, f"{call.op.name} decomposition")
    padded = _padded(m, shape)
    if padded != shape:
        width = tuple(v for d, p in zip(shape, padded) for v in (0, p - d))
        if not all(isinstance(v, int) for v in width):
            raise gu.ShapeNeeded(f"{call.op.name} decomposition", f"index_map {m.text!r} splits an axis of symbolic "
                                 f"size in shape {_fmt(shape)}, whose padding is unknown; match_cast it to a static "
                                 "size", "static shape")
        x = pad(x, width, pad_value=0.0 if attrs["pad_value"] is None else attrs["pad_value"])
    atoms: list[Part] = []  # the axes after the split, in input order
    for axis in range(len(shape)):
        split = next((p.factor for t in m.outputs for _, p in t if p.axis == axis and p.kind == "outer"), 0)
        atoms += [Part(axis, "outer", split), Part(axis, "inner", split)] if split else [Part(axis, "whole")]
    atom_shape = tuple(_part_extent(p, shape) for p in atoms)
    if atom_shape != padded:
        x = reshape(x, atom_shape)
    order = tuple(atoms.index(p) for terms in m.outputs for _, p in terms)
    if order != tuple(range(len(order))):
        x = permute_dims(x, order)
    out_shape = _output_shape(m, shape)
    if out_shape != tuple(atom_shape[i] for i in order):
        x = reshape(x, out_shape)
    return x


def inverse_text(m: IndexMap) -> Optional[str]:
    """The inverse map's text when the map only moves and splits axes (no fusing): ``lambda i0, i1, i2: (i0 * 4 +
    i2, i1)``; None otherwise."""
    if any(len(terms) > 1 for terms in m.outputs):
        return None
    names = [f"i{j}" for j in range(len(m.outputs))]
    where = {terms[0][1]: j for j, terms in enumerate(m.outputs)}
    exprs = []
    for axis in range(len(m.params)):
        whole = where.get(Part(axis, "whole"))
        if whole is not None:
            exprs.append(names[whole])
            continue
        outer = next(p for p in where if p.axis == axis and p.kind == "outer")
        exprs.append(f"{names[where[outer]]} * {outer.factor} + {names[where[Part(axis, 'inner', outer.factor)]]}")
    return f"lambda {', '.join(names)}: ({', '.join(exprs)}{',' if len(exprs) == 1 else ''})"


def _gradient(orig, call, grad) -> list:
    """Moves and exact splits: ``layout_transform`` of the adjoint by the inverse map. Padded splits and fused axes:
    reverse mode over the decomposition (its pad's adjoint drops the padding)."""
    x = call.args[0]
    if not gu.is_float_expr(x):
        return [None]
    m = parse_index_map(call.attrs["index_map"])
    inverse = inverse_text(m)
    shape = gu.shape_of(x, f"{call.op.name} gradient")
    if inverse is None or _padded(m, shape) != shape:
        return gu.through_decomposition(orig, call, grad)
    return [layout_transform(grad, inverse)]


layout_transform = register(Op(
    name="relax.layout_transform", inputs=("x",),
    attrs={"index_map": REQUIRED, "pad_value": None, "axis_separators": None, "input_axis_separators": None},
    infer=_infer, canonicalize=_canon, check_attrs=_check, reference=_reference, decompose=_decompose,
    gradient=_gradient, unsigned="agnostic",
    samples=[Sample([_T((2, 3, 4, 5), "float32")], {"index_map": "lambda n, c, h, w: (n, h, w, c)"}),
             Sample([_T((2, 8, 3, 3), "float32")], {"index_map": "lambda n, c, h, w: (n, c // 4, h, w, c % 4)"}),
             Sample([_T((1, 6, 2, 2), "float64")], {"index_map": "lambda n, c, h, w: (n, c // 4, h, w, c % 4)",
                                                     "pad_value": 1.5}),
             Sample([_T((3, 4, 5), "float32")], {"index_map": "lambda a, b, c: (a * 4 + b, c)"}),
             Sample([_T((10, 21, 30), "float32")], {"index_map": "lambda a, b, c: (a, c, b // 3, b % 3)",
                                                     "pad_value": 2}),
             Sample([_T(("n", 4), "float32")], {"index_map": "lambda i, j: (j, i)"}),
             Sample([_T((2, 6), "int32")], {"index_map": "lambda i, j: (j % 4, i, j // 4)", "pad_value": -1},
                    low=-5, high=5)],
    bad_samples=[BadSample([_T((2, 3), "float32")], {"index_map": "lambda i, j: (i * 2, j)"},
                           r"i is scaled by 2, but the parts after it span 1 indices"),
                 BadSample([_T((2, 3), "float32")], {"index_map": "lambda i, j: (i,)"},
                           r"axis 'j' is used as nowhere"),
                 BadSample([_T((4,), "float32")], {"index_map": "lambda i: (i // 2,)"},
                           r"axis 'i' is used as i // 2; each input axis must appear once"),
                 BadSample([_T((2, 3), "float32")], {"index_map": "lambda i: (i,)"},
                           r"takes 1 indices, but the input has rank 2"),
                 BadSample([_T((4,), "float32")], {"index_map": "lambda i: ((i // 2) % 2, i)"},
                           r"split an axis by a positive constant"),
                 BadSample([_T((4,), "float32")], {"index_map": "__import__('os')"}, r"must be a lambda"),
                 BadSample([_T((4,), "float32")], {"index_map": "lambda i: (i,)", "axis_separators": (1,)},
                           r"axis_separators=\(1,\) is not supported")],
    doc="Move element ``i`` of ``x`` to index ``index_map(i)`` (TVM's ``R.layout_transform``): the map is a "
        "lambda that moves, splits (``c // 4``, ``c % 4``) and fuses (``h * 8 + w``) axes; indices no input maps "
        "to (a split of an axis its factor does not divide) hold ``pad_value`` (0 if None). Composite: decomposed "
        "into pad/reshape/permute_dims."))
