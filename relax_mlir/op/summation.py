"""``relax.einsum(operands, subscripts)``: Einstein summation, as TVM's ``R.einsum`` and NumPy's ``einsum``.

The subscripts are parsed once into one label list per operand and one for the output (:func:`parse`): explicit
(``"ij,jk->ik"``) or implicit (``"ij,jk"``: the labels seen once, sorted), with ``...`` standing for the same
leading dims in every operand (right-aligned); a size-1 dim broadcasts against its label's size, as in NumPy. The backend lowers a call
to one ``linalg.generic`` whose indexing maps are the label lists (``legalize/linalg.py: einsum``). The gradient
of an operand is again an einsum: the other operands and the output's adjoint contracted to the operand's
labels; labels only that operand has (or that the others have as size-1 dims) are broadcast back, and dims it
broadcast (size 1 against a label's ``n``) are summed back.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
import numpy as np

from ..ir import sym
from ..ir.dtype import is_bool, is_floating
from ..ir.struct_info import TensorStructInfo
from . import grad_utils as gu
from .common import fmt, require_same_dtype
from .registry import REQUIRED, BadSample, Op, Sample, fail, register

_T = TensorStructInfo
_LETTERS = string.ascii_letters


@dataclass(frozen=True)
class Spec:
    """Parsed subscripts: each operand's labels (one character per dim, ellipsis dims given letters the subscripts
    do not use), the output's labels and which labels came from the ellipsis."""

    inputs: tuple[str, ...]
    output: str
    ellipsis: str

    def text(self) -> str:
        return ",".join(self.inputs) + "->" + self.output


def parse(subscripts: str, ranks: list[int]) -> Spec:
    """``subscripts`` for operands of ``ranks``; raises :class:`InferError` saying what is wrong."""
    if not isinstance(subscripts, str):
        fail(f"subscripts must be a string such as 'ij,jk->ik', got {subscripts!r}")
    text = subscripts.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        fail(f"subscripts {subscripts!r} name {len(terms)} operand(s), got {len(ranks)}")
    for t in terms + ([rhs] if arrow else []):
        bad = set(t.replace("...", "")) - set(_LETTERS)
        if bad or t.count("...") > 1:
            fail(f"subscripts {subscripts!r}: each term is letters with at most one '...', got {t!r}")
    spare = [c for c in _LETTERS if c not in text]
    widths = []
    for t, r in zip(terms, ranks):
        named = len(t.replace("...", ""))
        if ("..." not in t and named != r) or named > r:
            fail(f"subscripts {subscripts!r}: term {t!r} has {named} label(s) for an operand of rank {r}")
        widths.append(r - named if "..." in t else 0)
    ell = "".join(spare[:max(widths, default=0)])
    inputs = tuple(t.replace("...", ell[len(ell) - w:]) for t, w in zip(terms, widths))
    if arrow:
        if "..." not in rhs and any(widths):
            fail(f"subscripts {subscripts!r}: the output must keep '...' when an operand has it")
        output = rhs.replace("...", ell)
        if len(set(output)) != len(output):
            fail(f"subscripts {subscripts!r}: the output repeats a label")
        unknown = set(output) - set("".join(inputs))
        if unknown:
            fail(f"subscripts {subscripts!r}: output label(s) {''.join(sorted(unknown))} appear in no operand")
    else:
        counts = {c: "".join(terms).count(c) for c in set("".join(terms).replace(".", ""))}
        output = ell + "".join(sorted(c for c, n in counts.items() if n == 1))
    return Spec(inputs, output, ell)


def label_sizes(spec: Spec, shapes: list) -> dict:
    """The size of each label; a size-1 dim broadcasts (as in NumPy). Different static sizes are an error."""
    sizes: dict = {}
    for i, (labels, shape) in enumerate(zip(spec.inputs, shapes)):
        for label, d in zip(labels, shape):
            old = sizes.get(label)
            if old is None or old == 1:
                sizes[label] = d
            elif d == 1 or old == d:
                continue
            elif isinstance(old, int) and isinstance(d, int):
                fail(f"label {label!r} has size {old} and {d} (operand {i} has shape {fmt(shape)})")
    return sizes


def _infer(args, attrs):
    tensors = args[0]
    if not tensors:
        fail("needs at least one operand")
    dtype = require_same_dtype(tensors, [f"operands[{i}]" for i in range(len(tensors))])
    if is_bool(dtype):
        fail("operands must be numeric, got bool")
    if any(t.ndim == -1 for t in tensors):
        fail("needs the rank of every operand")
    spec = parse(attrs["subscripts"], [t.ndim for t in tensors])
    if any(t.shape is None for t in tensors):
        return _T(None, dtype, len(spec.output))
    sizes = label_sizes(spec, [t.shape for t in tensors])
    return _T(tuple(sizes[c] for c in spec.output), dtype)


def _reference(operands, subscripts):
    wide = [a.astype(np.float64 if is_floating(a.dtype) else np.int64) for a in operands]  # (bfloat16 too)
    return np.asarray(np.einsum(subscripts, *wide)).astype(operands[0].dtype)


def _operand_grad(spec: Spec, i: int, tensors, grad, shapes):
    """The adjoint of operand ``i``: an einsum of the others and ``grad`` to its (distinct) labels, broadcast to
    the labels' sizes, spread back onto its diagonals (a repeated label) with identity matrices, then summed down
    to the operand's shape.

    The broadcast covers labels no other term has, and labels every other term has as a size-1 dim while this
    operand has them as ``n``: in both, the output does not depend on where along the label the operand's element
    is. The sum covers the reverse: a size-1 dim of this operand broadcast to the label's ``n``."""
    from . import broadcast_to, einsum as einsum_op, expand_dims

    mine = spec.inputs[i]
    unique = "".join(dict.fromkeys(mine))
    others = [t for j, t in enumerate(spec.inputs) if j != i] + [spec.output]
    seen = set("".join(others))
    kept = "".join(c for c in unique if c in seen)
    g = einsum_op([t for j, t in enumerate(tensors) if j != i] + [grad], ",".join(others) + "->" + kept)
    sizes = label_sizes(spec, shapes)
    full = tuple(sizes[c] for c in unique)
    if kept != unique:
        g = expand_dims(g, tuple(a for a, c in enumerate(unique) if c not in seen))
    if kept != unique or tuple(gu.shape_of(g, "relax.einsum gradient")) != full:
        g = broadcast_to(g, full)
    if unique != mine:
        g = _spread_diagonal(g, unique, mine, sizes, spec)
    return gu.unbroadcast(g, tensors[i].struct_info)


def _spread_diagonal(g, unique: str, mine: str, sizes: dict, spec: Spec):
    """``g`` (labels ``unique``) placed on the diagonals of ``mine``: each repeat of a label gets a fresh label
    tied to the first by an identity matrix, ``einsum(g, eye, ... -> mine')``."""
    from ..ir.expr import const
    from . import einsum as einsum_op

    fresh = iter(c for c in _LETTERS if c not in spec.text())
    target, eyes, first = [], [], set()
    dtype = gu.sinfo_of(g).dtype
    for c in mine:
        if c not in first:
            first.add(c)
            target.append(c)
            continue
        n = sizes[c]
        if not isinstance(n, int):
            raise gu.ShapeNeeded("relax.einsum gradient", f"the diagonal over label {c!r} needs a static size, got "
                                 f"{sym.format_dim(n)}", "static shape")
        f = next(fresh)
        target.append(f)
        eyes.append((c + f, const(np.eye(n), dtype)))
    return einsum_op([g] + [e for _, e in eyes], ",".join([unique] + [t for t, _ in eyes]) + "->" + "".join(target))


def _operands(call) -> list:
    from ..ir.expr import Tuple, TupleGetItem

    tup = call.args[0]
    return list(tup.fields) if isinstance(tup, Tuple) else \
        [TupleGetItem(tup, i) for i in range(len(tup.struct_info.fields))]


def _same_rank(call):
    """The export's rewrite: operands of different ranks get leading size-1 dims, each with a label of its own
    (summed over one element: nothing changes), because a variadic group of the relax dialect holds one rank. The
    lowering reads the operands' static shapes through the casts the export adds to join their types."""
    from . import einsum as einsum_op, expand_dims

    tensors = _operands(call)
    ranks = [gu.sinfo_of(t).ndim for t in tensors]
    top = max(ranks)
    if len(set(ranks)) == 1:
        return None
    spec = parse(call.attrs["subscripts"], ranks)
    fresh = iter(c for c in _LETTERS if c not in spec.text())
    padded, terms = [], []
    for t, r, labels in zip(tensors, ranks, spec.inputs):
        extra = "".join(next(fresh) for _ in range(top - r))
        padded.append(expand_dims(t, tuple(range(top - r))) if extra else t)
        terms.append(extra + labels)
    return einsum_op(padded, ",".join(terms) + "->" + spec.output)


def _gradient(orig, call, grad):
    from ..ir.expr import Tuple

    tensors = _operands(call)
    if not gu.is_float_expr(orig):
        return [None]
    shapes = [gu.shape_of(t, "relax.einsum gradient") for t in tensors]
    spec = parse(call.attrs["subscripts"], [len(s) for s in shapes])
    return [Tuple([_operand_grad(spec, i, tensors, grad, shapes) for i in range(len(tensors))])]


def _lists(*shapes, dtype="float32"):
    return [[_T(s, dtype) for s in shapes]]


einsum = register(Op(
    name="relax.einsum", lowering="linalg:einsum", export_rewrite=_same_rank, inputs=("operands",), tuple_input=True,
    attrs={"subscripts": REQUIRED}, infer=_infer, reference=_reference, gradient=_gradient,
    samples=[Sample(_lists((2, 3), (3, 4)), {"subscripts": "ij,jk->ik"}),
             Sample(_lists((2, 3, 4), (2, 4, 5), dtype="float64"), {"subscripts": "bij,bjk->bik"}),
             Sample(_lists((4, 3)), {"subscripts": "ij->ji"}),
             Sample(_lists((3, 3), dtype="float64"), {"subscripts": "ii->i"}),
             Sample(_lists((3, 3), dtype="float64"), {"subscripts": "ii"}),
             Sample(_lists((2, 3), (2, 3)), {"subscripts": "ij,ij->"}),
             Sample(_lists((3,), (4,), dtype="float64"), {"subscripts": "i,j"}),
             Sample(_lists((2, 5, 2, 4), (2, 6, 2, 4)), {"subscripts": "bsnh,btnh->bnst"}),
             Sample(_lists(("n", 3), (3, 2), (2,)), {"subscripts": "ij,jk,k->i"}),
             Sample(_lists((2, 1, 3, 4), (5, 4, 2)), {"subscripts": "...ij,...jk->...ik"}),
             Sample(_lists((2, 3), (3, 4), dtype="int32"), {"subscripts": "ij,jk"}, low=-4, high=4),
             Sample(_lists((2, 3), (3, 4), dtype="float16"), {"subscripts": "ij,jk->ik"}),
             Sample(_lists((2, 3, 4)), {"subscripts": "ijk->j"})],
    bad_samples=[BadSample(_lists((2, 3), (4, 5)), {"subscripts": "ij,jk->ik"}, r"label 'j' has size 3 and 4"),
                 BadSample(_lists((2, 3)), {"subscripts": "ij,jk->ik"}, r"name 2 operand\(s\), got 1"),
                 BadSample(_lists((2, 3, 4)), {"subscripts": "ij->i"}, r"term 'ij' has 2 label\(s\) for an operand "
                                                                       r"of rank 3"),
                 BadSample(_lists((2, 3)), {"subscripts": "ij->ik"}, r"output label\(s\) k appear in no operand"),
                 BadSample(_lists((2, 3)), {"subscripts": "ij->ii"}, r"the output repeats a label"),
                 BadSample(_lists((2, 3)), {"subscripts": "i1->i"}, r"each term is letters"),
                 BadSample(_lists((2, 3), (3, 4)), {"subscripts": 3}, r"subscripts must be a string"),
                 BadSample([[_T((2, 3), "float32"), _T((3,), "float64")]], {"subscripts": "ij,j->i"}, r"same dtype"),
                 BadSample([_T((2, 3), "float32")], {"subscripts": "ij->j"}, r"must be a tuple of tensors")],
    doc="Einstein summation over a tuple of operands (TVM's ``R.einsum((a, b), subscripts)``, NumPy's semantics): "
        "explicit ``'ij,jk->ik'`` or implicit ``'ij,jk'`` subscripts, repeated labels (diagonals, traces) and "
        "``...`` for shared leading dims; a size-1 dim broadcasts. Gradient: an einsum per operand (a diagonal "
        "operand's with identity matrices of static size)."))


__all__ = ["einsum", "parse", "label_sizes", "Spec"]
