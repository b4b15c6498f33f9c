"""Helpers for gradient rules: they build Relax expressions with op constructors, never NumPy values.

The rules keep the adjoint IR clean: a helper returns its input unchanged when the operation would do
nothing (no ``collapse_sum_to`` to the same shape, no ``broadcast_to`` to the same shape, no division by a
count of 1, no ``astype`` to the same dtype).
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from ..ir import sym
from ..ir.dtype import is_float
from ..ir.expr import Expr, const
from ..ir.struct_info import StructInfo, TensorStructInfo, TupleStructInfo

#: ``strided_slice``'s "to the end" for slices the library builds (gradients, decompositions): int64 max, past the
#: end of any axis. TVM users' 2**31 - 1 is past the end of a shorter axis only: a slice of an axis of 2**31 elements
#: or more would stop early (a static one) or raise (a symbolic one, see ``op.indexing.reads_beyond``).
SLICE_END = 2**63 - 1

#: What a :class:`ShapeNeeded` refusal wants of an argument's struct info.
NEEDS = ("rank", "shape", "static shape")


class ShapeNeeded(TypeError):
    """A gradient rule (or the decomposition it differentiates) cannot handle a call whose arguments' struct info
    lacks what it needs (``need``): a rank, a shape, or static sizes (to reshape or broadcast back, to number
    positions). The user's to give with a ``match_cast``, not a bug in the rule: the Gradient pass re-raises it as a
    ``GradientError``, and ``DecomposeOps*`` as a ``DecomposeError``, naming the function, the binding and the
    arguments to cast (:func:`cast_advice`). A ``TypeError``, as these refusals always were, for direct callers of a
    rule or a decomposition; ``str`` is unchanged: ``"<who>: <detail>"``."""

    def __init__(self, who: str, detail: str, need: str = "shape"):
        assert need in NEEDS, need
        super().__init__(f"{who}: {detail}")
        self.detail, self.need = detail, need


class NoGradientRule(TypeError):
    """An op's gradient rule covers only some values of its attributes, and not the call's (``scatter_elements`` with
    reduction ``'mul'``): as an op with no rule at all, not a bug. A ``TypeError``, as the refusal always was, for
    direct callers of the rule; the Gradient pass lists such bindings with the ops that have no rule."""


def covers(unsupported: Callable[..., Optional[str]]) -> Callable:
    """Decorator of a rule that covers only some attribute values: ``unsupported(call)`` says which value it lacks a
    rule for (``"reduction 'mul'"``), or ``None``. The rule refuses such a call with :class:`NoGradientRule`; the
    Gradient pass asks :func:`missing_rule` first, so that one error names every binding it cannot differentiate."""
    def wrap(rule: Callable) -> Callable:
        def gradient(orig, call, grad):
            why = unsupported(call)
            if why is not None:
                raise NoGradientRule(f"{call.op.name} gradient: no gradient rule for {why}")
            return rule(orig, call, grad)
        gradient.__doc__, gradient.unsupported = rule.__doc__, unsupported
        return gradient
    return wrap


def missing_rule(call) -> Optional[str]:
    """The attribute value ``call``'s op has no gradient rule for (its rule made by :func:`covers`), or ``None``."""
    unsupported = getattr(call.op.gradient, "unsupported", None)
    return None if unsupported is None else unsupported(call)


def cast_advice(exc: ShapeNeeded, args: Sequence[Expr]) -> Optional[str]:
    """What a refusal asks of the call's arguments ``args`` (variables), in the words of the Gradient and DecomposeOps
    errors: ``"needs the shape of 'x', which has struct info R.Tensor(dtype=\"float32\", ndim=2); match_cast it to a
    shape first"``; ``None`` when none lacks it (the rule or decomposition lost it itself: its bug)."""
    from ..ir.printer import format_struct_info

    lacking = [v for v in dict.fromkeys(args) if _lacks(v.struct_info, exc.need)]
    if not lacking:
        return None
    one = len(lacking) == 1
    if exc.need == "static shape":  # the rule's words say which size must be static
        needs, why, cast_to = "static sizes", f" ({exc.detail})", "static sizes"
    else:  # (a shape gives the rank too, and most rules that need the rank need the shape next)
        needs, why, cast_to = f"the {exc.need}" + ("" if one else "s"), "", "a shape" if one else "shapes"
    return (f"needs {needs} of {' and '.join(repr(v.name_hint) for v in lacking)}, which "
            f"{'has' if one else 'have'} struct info {' and '.join(format_struct_info(v.struct_info) for v in lacking)}"
            f"{why}; match_cast {'it' if one else 'them'} to {cast_to} first")


def _lacks(s: StructInfo, need: str) -> bool:
    """Whether a value of struct info ``s`` (a tensor, or a tuple holding one) lacks what a rule needs: a rank, a
    shape, or static sizes."""
    if isinstance(s, TupleStructInfo):
        return any(_lacks(f, need) for f in s.fields)
    if not isinstance(s, TensorStructInfo):
        return False
    if need == "rank":
        return s.ndim == -1
    return s.shape is None or need == "static shape" and not all(isinstance(d, int) for d in s.shape)


def sinfo_of(e: Expr) -> TensorStructInfo:
    s = e.struct_info
    if not isinstance(s, TensorStructInfo):
        raise TypeError(f"gradient rule: expected a tensor, got {s}")
    return s


def shape_of(e: Expr, what: str = "gradient rule") -> tuple:
    """The shape of ``e``, which a rule needs to be known (reshape back, broadcast back)."""
    s = sinfo_of(e)
    if s.shape is None:
        raise ShapeNeeded(what, f"the shape of {e} is unknown ({s}); match_cast it to a shape first")
    return tuple(s.shape)


def rank_of(e: Expr, what: str = "gradient rule") -> int:
    """The rank of ``e``, which a rule or a decomposition needs to be known (an axis to normalise, a width per
    axis): with an unknown one, op inference would refuse what the rule builds in words about rank -1."""
    ndim = sinfo_of(e).ndim
    if ndim == -1:
        raise ShapeNeeded(what, f"the rank of {e} is unknown", "rank")
    return ndim


def scalar(value: float, like: Expr) -> Expr:
    """A 0-d constant of ``like``'s dtype (hyper-parameters and factors in gradient rules)."""
    return const(value, sinfo_of(like).dtype)


def unbroadcast(grad: Expr, target: StructInfo) -> Expr:
    """Sum ``grad`` down to ``target``'s shape when broadcasting made it bigger; otherwise ``grad`` itself,
    so the adjoint IR has no collapse that sums nothing.

    Only the leading axes ``target`` lacks and its static 1s are summed. A size of ``target`` that is not a
    static 1 is one the forward op assumed equal to ``grad``'s (a symbolic size against a static one or another
    symbolic size, as ``check_dims_match`` does: a matmul's reduction dim after a match_cast): ``grad`` keeps it,
    then is reshaped to ``target``'s sizes, a no-op the compiled code checks. ``collapse_sum_to`` straight to a
    symbolic size would leave the sum to be decided at run time (1 or not), which the backend refuses."""
    from . import collapse_sum_to, reshape

    g = sinfo_of(grad)
    if not isinstance(target, TensorStructInfo) or target.shape is None:
        raise ShapeNeeded("gradient rule", f"cannot unbroadcast to {target}: its shape is unknown")
    want = tuple(target.shape)
    have = None if g.shape is None else tuple(g.shape)
    if have == want:
        return grad
    if have is None or len(have) < len(want):
        return collapse_sum_to(grad, want)
    kept = tuple(1 if t == 1 else d for t, d in zip(want, have[len(have) - len(want):]))
    if any(_provably_unequal(k, t) for k, t in zip(kept, want)):
        return collapse_sum_to(grad, want)  # a rule's mistake: collapse_sum_to's inference says what is wrong
    summed = grad if kept == have else collapse_sum_to(grad, kept)
    return summed if kept == want else reshape(summed, want)


def _provably_unequal(a: sym.Dim, b: sym.Dim) -> bool:
    """Sizes that differ whatever the size variables are (``3`` and ``4``, ``n`` and ``n + 1``)."""
    difference = a - b
    return isinstance(difference, int) and difference != 0


def broadcast_like(e: Expr, like: Expr) -> Expr:
    """``broadcast_to(e, like.shape)``, or ``e`` itself when it has that shape already."""
    from . import broadcast_to

    shape = shape_of(like)
    s = sinfo_of(e)
    return e if s.shape is not None and tuple(s.shape) == shape else broadcast_to(e, shape)


def reshape_like(e: Expr, like: Expr) -> Expr:
    """``reshape(e, like.shape)``, or ``e`` itself when it has that shape already."""
    from . import reshape

    shape = shape_of(like)
    s = sinfo_of(e)
    return e if s.shape is not None and tuple(s.shape) == shape else reshape(e, shape)


def cast_like(e: Expr, like: Expr) -> Expr:
    """``astype(e, like.dtype)``, or ``e`` itself when the dtypes agree."""
    from . import astype

    dtype = sinfo_of(like).dtype
    return e if sinfo_of(e).dtype == dtype else astype(e, dtype)


def reduced_axes(x: Expr, axis) -> tuple[int, ...]:
    """The non-negative, sorted axes a reduction over ``axis`` (None: all) removes from ``x``."""
    ndim = rank_of(x)
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else axis
    return tuple(sorted(a % ndim for a in axes))


def unreduce(g: Expr, x: Expr, axis, keepdims: bool) -> Expr:
    """The adjoint of a reduction's result with the reduced axes put back as size 1, so that it broadcasts
    against ``x``. A 0-d result (every axis reduced) broadcasts as it is."""
    from . import expand_dims

    axes = reduced_axes(x, axis)
    if keepdims or not axes or len(axes) == sinfo_of(x).ndim:
        return g
    return expand_dims(g, axes)


def reduce_count(x: Expr, axis) -> sym.Dim:
    """How many elements a reduction over ``axis`` combines: an int, or a symbolic size."""
    shape = shape_of(x)
    return sym.product(shape[a] for a in reduced_axes(x, axis))


def count_tensor(count: sym.Dim, like: Expr) -> Expr:
    """``count`` as a 0-d tensor of ``like``'s dtype: a constant, or the sum of a tensor of ones of the
    symbolic sizes (the IR has no op turning a size variable into a value)."""
    from . import ones, sum as sum_

    if isinstance(count, int):
        return scalar(float(count), like)
    factors = _factors(count)
    return sum_(ones(factors, sinfo_of(like).dtype))


def _factors(count: sym.Dim) -> tuple:
    # A product of size variables is kept as separate dims, so ones() stays small: (n, m), not (n * m,).
    if isinstance(count, sym.SymDim) and len(count.terms) == 1:
        mono, coef = count.terms[0]
        dims = tuple(sym.factor_dim(v) for v in mono)
        return dims + ((coef,) if coef != 1 else ())
    return (count,)


def scale_by_count(g: Expr, numerator: float, count: sym.Dim) -> Expr:
    """``g * (numerator / count)``: no op at all when that factor is 1."""
    from . import divide, multiply

    if isinstance(count, int):
        factor = numerator / count
        return g if factor == 1 else multiply(g, scalar(factor, g))
    scaled = g if numerator == 1 else multiply(g, scalar(numerator, g))
    return divide(scaled, count_tensor(count, g))


def only_float(e: Expr, grad: Expr) -> Optional[Expr]:
    """``grad`` if ``e`` is a float tensor, else ``None`` (integer and boolean values have no gradient)."""
    return grad if is_float(sinfo_of(e).dtype) else None


def is_float_expr(e: Expr) -> bool:
    return isinstance(e.struct_info, TensorStructInfo) and is_float(e.struct_info.dtype)


def transpose_last_two(x: Expr) -> Expr:
    """``permute_dims`` swapping the last two axes (the matrix transpose of a batch of matrices). When ``x`` is
    itself such a transpose (``matmul(a, permute_dims(w))``, a linear layer), the Gradient pass folds the pair
    away afterwards."""
    from . import permute_dims

    ndim = sinfo_of(x).ndim
    return permute_dims(x, tuple(range(ndim - 2)) + (ndim - 1, ndim - 2))


def inverse_permutation(axes: Sequence[int]) -> tuple[int, ...]:
    ndim = len(axes)
    inverse = [0] * ndim
    for i, a in enumerate(axes):
        inverse[a % ndim] = i
    return tuple(inverse)


def tensor_rule(rule: Callable) -> Callable:
    """A rule for an op whose first argument is the only differentiable one: ``rule(x, g, call)`` gives
    ``x``'s gradient; it is skipped (no gradient) for integer and boolean ``x``."""
    def gradient(orig, call, grad):
        x = call.args[0]
        return [rule(x, grad, call) if is_float_expr(x) else None] + [None] * (len(call.args) - 1)
    return gradient


def piece_bounds(sizes: Sequence[sym.Dim]) -> list[tuple[sym.Dim, sym.Dim]]:
    """``(begin, end)`` slice bounds of consecutive pieces of the given sizes along one axis (the split points of
    a concat's adjoint). A bound is static when it can be: from the start, or from the end (``-k``, or
    :data:`SLICE_END` for the very end) when only the pieces before it are symbolic. Otherwise it is the sum of the
    sizes before it, a symbolic index from the start, which ``strided_slice`` takes as TVM's PrimExpr bounds
    (the split point ``n`` of pieces of sizes ``n`` and ``m``)."""
    total = _sum_dims(sizes)
    bounds, start = [], 0
    for size in sizes:
        stop = start + size
        bounds.append((_bound(start, total), _bound(stop, total)))
        start = stop
    return bounds


def _sum_dims(dims: Sequence[sym.Dim]) -> sym.Dim:
    out: sym.Dim = 0
    for d in dims:
        out = out + d
    return out


def _bound(offset: sym.Dim, total: sym.Dim) -> sym.Dim:
    """``offset`` as a slice bound: static if it is, or is from the end; else the symbolic offset itself."""
    if isinstance(offset, int):
        return offset
    from_end = total - offset
    if isinstance(from_end, int):
        return SLICE_END if from_end == 0 else -from_end
    return offset


def through_decomposition(orig, call, grad) -> list:
    """The gradient rule of a composite: reverse mode over its decomposition (``call.op.decompose(call)``),
    with the rules of the ops the decomposition uses. Written once, it makes every composite differentiable
    the moment it can be decomposed (tinygrad's "composites need no rules of their own"); the registry's
    finite-difference test still checks the result against the composite's own NumPy reference."""
    return expression_vjp(call.op.decompose(call), list(call.args), grad, call.op.name)


def expression_vjp(out: Expr, leaves: Sequence[Expr], grad: Expr, who: str) -> list:
    """The adjoints of ``leaves`` (``None`` where none flows) given ``grad``, the adjoint of ``out``, a tree of
    calls over the leaves. A sub-expression object used twice is one node (its adjoints add up) and, in the
    rules' output, one binding (the BlockBuilder binds an object once)."""
    from .registry import NOT_DIFFERENTIABLE

    from ..ir.expr import Tuple, TupleGetItem

    stop = {id(leaf) for leaf in leaves}
    adjoints: dict[int, Expr] = {}

    def give(arg: Expr, ga) -> None:
        if ga is None:
            return
        if isinstance(arg, Tuple) and id(arg) not in stop:  # a tuple (einsum's operands, a tuple result): per field
            fields = ga.fields if isinstance(ga, Tuple) else [TupleGetItem(ga, i) for i in range(len(arg.fields))]
            for f, gf in zip(arg.fields, fields):
                give(f, gf)
        elif is_float_expr(arg):
            adjoints[id(arg)] = adjoints[id(arg)] + ga if id(arg) in adjoints else ga

    give(out, grad)

    for node in reversed(_post_order(out, stop, who)):
        g = adjoints.pop(id(node), None)
        rule = node.op.gradient
        if g is None or rule is NOT_DIFFERENTIABLE:
            continue
        if not callable(rule):
            raise TypeError(f"{who} gradient: its decomposition uses {node.op.name}, which has no gradient rule")
        for arg, ga in zip(node.args, rule(node, node, g)):
            give(arg, ga)
    return [adjoints.get(id(leaf)) if is_float_expr(leaf) else None for leaf in leaves]


def _post_order(out: Expr, stop: set, who: str) -> list:
    """The calls of ``out`` (down to the ``stop`` objects and constants), each once, arguments first."""
    from ..ir.expr import Call, Constant, Tuple, Var

    order, seen = [], set()

    def visit(e: Expr) -> None:
        if id(e) in stop or id(e) in seen or isinstance(e, (Constant, Var)):
            return
        if isinstance(e, Tuple):  # an argument tuple: its fields are visited, their adjoints come per field
            for f in e.fields:
                visit(f)
            return
        if not isinstance(e, Call):
            raise TypeError(f"{who} gradient: its decomposition holds a {type(e).__name__}; only calls of "
                            "ops over the arguments are differentiated")
        seen.add(id(e))
        for a in e.args:
            visit(a)
        order.append(e)

    visit(out)
    return order
