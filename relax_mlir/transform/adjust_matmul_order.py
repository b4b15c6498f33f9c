"""``AdjustMatmulOrder``: a product of three matrices is computed in the cheaper order, as TVM's pass of that
name (``(x @ a) @ b`` for a low-rank ``a @ b``: LoRA's weights).

    ab = R.matmul(a, b)           ->    gv = R.matmul(x, a)        when M·K·R + M·R·N < K·R·N + M·K·N
    y = R.matmul(x, ab)                 y = R.matmul(gv, b)

and the other way (``(x @ a) @ b`` to ``x @ (a @ b)``) when that is cheaper. Costs are multiply-adds from static
shapes, as TVM counts them: a 1-D first operand is one row and a 1-D last operand one column, and each product is
counted over the batch its own operands broadcast to (a weight without batch dimensions multiplied once, not once
per batch element); ties and symbolic sizes leave the product as it is. A product that depends on weights alone
(``num_input``, as for ``ExpandMatmulOfSum``) is computed once ahead of time, so it is never split up.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from .. import op
from ..dpl import is_op, wildcard
from .rewrite_pass import CallRewritePass, bindings_of, compile_time, static_shape


def _broadcast(p: tuple, q: tuple):
    """The batch shape two batch prefixes broadcast to, None when they do not broadcast."""
    width = max(len(p), len(q))
    p, q = (1,) * (width - len(p)) + p, (1,) * (width - len(q)) + q
    if any(d != e and 1 not in (d, e) for d, e in zip(p, q)):
        return None
    return tuple(max(d, e) for d, e in zip(p, q))


def _matrices(exprs):
    """The static shapes of a chain ``p @ q @ r`` as matrices with batch prefixes, or None. A 1-D ``p`` is a row,
    a 1-D ``r`` a column (as matmul reads them); a 1-D middle operand is refused, because the two orders would
    then read it differently (a column on one side, a row on the other)."""
    shapes = [static_shape(e) for e in exprs]
    if any(s is None or len(s) == 0 for s in shapes) or len(shapes[1]) == 1:
        return None
    p, q, r = shapes
    p = (1,) + p if len(p) == 1 else p
    r = r + (1,) if len(r) == 1 else r
    if p[-1] != q[-2] or q[-1] != r[-2]:
        return None
    return p, q, r


def _costs(exprs):
    """Multiply-adds of ``(p @ q) @ r`` and of ``p @ (q @ r)``, or None when the shapes are not static or do not
    chain. Each product runs over the batch its operands broadcast to, so a batched ``x`` times two unbatched
    weights pays its batch in both of ``(x @ a) @ b``'s products but in only one of ``x @ (a @ b)``'s."""
    mats = _matrices(exprs)
    if mats is None:
        return None
    (p, q, r) = mats
    bp, bq, br = p[:-2], q[:-2], r[:-2]
    pq, qr = _broadcast(bp, bq), _broadcast(bq, br)
    outer = _broadcast(pq, br) if pq is not None else None
    if qr is None or outer is None:
        return None
    rows, k, m, n = p[-2], p[-1], q[-1], r[-1]
    return prod(pq) * rows * k * m + prod(outer) * rows * m * n, prod(qr) * k * m * n + prod(outer) * rows * k * n


@dataclass(frozen=True)
class AdjustMatmulOrder(CallRewritePass):
    """Reassociate chains of two matmuls to the order with fewer multiply-adds (TVM's ``AdjustMatmulOrder``).

    Example, applied as ``AdjustMatmulOrder()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((8, 64), "float32"), a: R.Tensor((64, 2), "float32"), b: R.Tensor((2, 64), "float32")):
                ab = R.matmul(a, b)
                y = R.matmul(x, ab)
                return y

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((8, 64), dtype="float32"),
                a: R.Tensor((64, 2), dtype="float32"),
                b: R.Tensor((2, 64), dtype="float32"),
            ) -> R.Tensor((8, 64), dtype="float32"):
                ab: R.Tensor((64, 64), dtype="float32") = R.matmul(a, b)
                gv: R.Tensor((8, 2), dtype="float32") = R.matmul(x, a)
                y: R.Tensor((8, 64), dtype="float32") = R.matmul(gv, b)
                return y
    """

    name = "AdjustMatmulOrder"

    def rules(self, func):
        bound = bindings_of(func)
        x, a, b = wildcard(), wildcard(), wildcard()
        right = is_op("relax.matmul")(a, b)
        left = is_op("relax.matmul")(x, a)

        def plain(call) -> bool:
            return call.attrs.get("out_dtype") in (None, "", "void")

        def costs(m):
            return _costs([m[x], m[a], m[b]])  # ((x @ a) @ b, x @ (a @ b))

        def x_times_ab(expr, m):        # x @ (a @ b) -> (x @ a) @ b
            cost = costs(m)
            if cost is None or not (plain(expr) and plain(m[right])) or compile_time(m[right], func, bound):
                return expr
            return op.matmul(op.matmul(m[x], m[a]), m[b]) if cost[0] < cost[1] else expr

        def xa_times_b(expr, m):        # (x @ a) @ b -> x @ (a @ b)
            cost = costs(m)
            if cost is None or not (plain(expr) and plain(m[left])) or compile_time(m[left], func, bound):
                return expr
            return op.matmul(m[x], op.matmul(m[a], m[b])) if cost[1] < cost[0] else expr

        return [(is_op("relax.matmul")(x, right), x_times_ab), (is_op("relax.matmul")(left, b), xa_times_b)]
