"""``relax.matmul`` with NumPy's semantics.

* 2-D x 2-D: ``linalg.matmul`` (the op the schedules in ``schedule.py`` tile and vectorize);
* batched x 2-D: the batch dims are folded into the rows (a reshape, no copy), then ``linalg.matmul``;
* batched x batched: ``linalg.batch_matmul`` when both have one equal batch dim, else a contraction
  ``linalg.generic`` whose batch indexing maps broadcast (a static 1 against a larger dim reads index 0);
* a 1-D operand is promoted to a row (x1) or a column (x2) and the added dim dropped from the result.

The operands are converted to the accumulator type inside the op (``out_dtype`` mixed precision, int8 inputs);
f16/bf16 results accumulate in f32 and are rounded once, as the float64 reference does.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, linalg

from .core import (DYN, Size, amap, cast_elements, compute_type, convert, dim, elem, empty, filled, generic,
                   is_float, map_elementwise, reshape, sizes_of, sprod, tensor_type)


def _batch_sizes(a: ir.Value, b: ir.Value, nb: int) -> list[Size]:
    """The broadcast batch dims of two operands of ranks >= 2 (dims align right)."""
    out: list[Size] = []
    for i in range(nb):
        candidates = []
        for v in (a, b):
            j = i - (nb - (v.type.rank - 2))
            if j >= 0:
                candidates.append((v, j))
        size: Size = 1
        for v, j in candidates:
            d = v.type.shape[j]
            if d == DYN:
                size = dim(v, j)
                break
            if d != 1:
                size = d
        out.append(size)
    return out


def _batch_exprs(v: ir.Value, nb: int, out_batch: list[Size]) -> list:
    exprs = []
    for i in range(nb):
        j = i - (nb - (v.type.rank - 2))
        if j < 0:
            continue
        d = v.type.shape[j]
        exprs.append(None if d == 1 and out_batch[i] != 1 else i)
    return exprs


def _contract(a: ir.Value, b: ir.Value, acc_t: ir.Type) -> ir.Value:
    """``a @ b`` for ranks >= 2 with broadcast batch dims, accumulated in ``acc_t``."""
    nb = max(a.type.rank, b.type.rank) - 2
    m, k, n = dim(a, a.type.rank - 2), dim(a, a.type.rank - 1), dim(b, b.type.rank - 1)
    if nb == 0:
        acc = filled([m, n], acc_t, 0)
        return linalg.matmul(a, b, outs=[acc])
    if b.type.rank == 2:  # fold the batch into the rows: one big matmul
        batch = sizes_of(a)[:-2]
        flat = reshape(a, [sprod(batch + [m]), k])
        acc = filled([sprod(batch + [m]), n], acc_t, 0)
        return reshape(linalg.matmul(flat, b, outs=[acc]), batch + [m, n])
    batch = _batch_sizes(a, b, nb)
    if nb == 1 and a.type.rank == b.type.rank == 3 and a.type.shape[0] == b.type.shape[0] != 1:
        acc = filled(batch + [m, n], acc_t, 0)
        return linalg.batch_matmul(a, b, outs=[acc])
    loops = nb + 3  # batch..., m, n, k
    a_map = amap(loops, _batch_exprs(a, nb, batch) + [nb, nb + 2])
    b_map = amap(loops, _batch_exprs(b, nb, batch) + [nb + 2, nb + 1])
    out_map = amap(loops, list(range(nb + 2)))
    acc = filled(batch + [m, n], acc_t, 0)
    add, mul = (arith.addf, arith.mulf) if is_float(acc_t) else (arith.addi, arith.muli)

    def body(x, y, o):
        return add(o, mul(convert(x, acc_t), convert(y, acc_t)))

    return generic([a, b], [acc], [a_map, b_map, out_map], ["parallel"] * (nb + 2) + ["reduction"], body)[0]


def _converted(v: ir.Value, t: ir.Type) -> ir.Value:
    if elem(v) == t:
        return v
    sizes = sizes_of(v)
    return map_elementwise([v], tensor_type(sizes, t), lambda x: convert(x, t), sizes)


def matmul(lc, op):
    a, b = lc.inputs
    out_elt = elem(lc.result_type)
    acc_t = compute_type(out_elt)
    row, col = a.type.rank == 1, b.type.rank == 1
    if row:
        a = reshape(a, [1, dim(a, 0)])
    if col:
        b = reshape(b, [dim(b, 0), 1])
    # The schedules vectorize linalg.matmul into a vector.contract, which needs one element type: convert first.
    a, b = (_converted(v, acc_t) for v in (a, b))
    res = _contract(a, b, acc_t)
    sizes = sizes_of(res)
    if acc_t != out_elt:
        res = map_elementwise([res], tensor_type(sizes, out_elt), lambda v: convert(v, out_elt), sizes)
    if row or col:
        keep = sizes[:-2] + ([] if row else [sizes[-2]]) + ([] if col else [sizes[-1]])
        res = reshape(res, keep)
    return res



def einsum(lc, op):
    """One ``linalg.generic`` over every label of the subscripts (the output's first, parallel; the summed ones
    after, reductions): each operand's indexing map is its label list (a repeated label reads a diagonal), a
    static size-1 dim against a larger label size reads index 0 (ellipsis broadcasting). f16/bf16 accumulate in
    f32 and are rounded once."""
    from ...op.summation import parse

    xs = [_uncast(x) for x in lc.inputs]
    spec = parse(lc.attrs["subscripts"], [x.type.rank for x in xs])
    summed = sorted(set("".join(spec.inputs)) - set(spec.output))
    labels = spec.output + "".join(summed)
    pos = {c: i for i, c in enumerate(labels)}
    wide = {c for x, t in zip(xs, spec.inputs) for a, c in enumerate(t) if x.type.shape[a] != 1}

    def size(c: str) -> Size:
        for x, t in zip(xs, spec.inputs):
            for a, label in enumerate(t):
                if label == c and x.type.shape[a] != 1:
                    return dim(x, a)
        return 1

    maps = [amap(len(labels), [None if x.type.shape[a] == 1 and c in wide else pos[c] for a, c in enumerate(t)])
            for x, t in zip(xs, spec.inputs)]
    out_elt = elem(lc.result_type)
    acc_t = compute_type(out_elt)
    # nothing summed: each element is its product alone (0 + -0.0 would be +0.0; NumPy keeps -0.0)
    acc = (filled if summed else empty)([size(c) for c in spec.output], acc_t, *([0] if summed else []))
    add, mul = (arith.addf, arith.mulf) if is_float(acc_t) else (arith.addi, arith.muli)

    def body(*args):
        prod = convert(args[0], acc_t)
        for v in args[1:-1]:
            prod = mul(prod, convert(v, acc_t))
        return add(args[-1], prod) if summed else prod

    iterators = ["parallel"] * len(spec.output) + ["reduction"] * len(summed)
    res = generic(xs, [acc], maps + [amap(len(labels), list(range(len(spec.output))))], iterators, body)[0]
    return cast_elements(res, out_elt)


def _uncast(v: ir.Value) -> ir.Value:
    """``v`` before the ``tensor.cast`` the export adds to join a variadic group's types: its static dims tell
    which size-1 dims broadcast."""
    owner = v.owner
    if isinstance(owner, ir.Operation) and owner.name == "tensor.cast":
        return owner.operands[0]
    if isinstance(owner, ir.OpView) and owner.operation.name == "tensor.cast":
        return owner.operation.operands[0]
    return v
