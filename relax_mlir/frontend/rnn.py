"""Recurrent layers (LSTM, GRU, Elman RNN) as Relax ops unrolled over a static sequence length: what PyTorch's
``aten.lstm.input``/``gru.input``/``rnn_tanh.input``/``rnn_relu.input`` and ONNX's ``LSTM``/``GRU``/``RNN`` share.

A layer is plain Relax ops (``matmul``, ``add``, ``split``, ``sigmoid``, ``tanh``, ``multiply``, ``concat``), one
step after another, so it compiles, differentiates with ``Gradient`` and trains like any other layer. Every value
of a step keeps a leading axis of 1 (``(1, batch, hidden)``): steps concatenate into a sequence and directions
into PyTorch's and ONNX's ``(directions, batch, hidden)`` states without a reshape.

The converters return expressions, which the importers bind (``BlockBuilder.normalize`` binds nested calls,
each shared expression once). An unrolled sequence is as deep as it is long, so each result is read out of a
tuple that lists every step's state first, in the order the steps were computed (:func:`in_order`): each state
is bound when its predecessors already are, and neither binding nor ONNX's constant folding recurses through
the whole sequence. ``CanonicalizeBindings`` removes the tuple.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from .. import op
from ..ir.expr import Expr, Tuple, TupleGetItem
from .common import dtype_of, split_pieces

#: Gates per kind of cell.
GATES = {"lstm": 4, "gru": 3, "rnn": 1}


@dataclass(frozen=True)
class Cell:
    """How one step computes. ``kind``: ``lstm``, ``gru`` or ``rnn``; ``order``: the gates' order along the
    weights' rows, PyTorch's ``ifgo`` (LSTM) / ``rzn`` (GRU) or ONNX's ``iofg`` / ``zrn`` (ONNX's ``c`` and ``h``
    gates are ``g`` and ``n`` here; both orders put ``n`` last, which a GRU's reset needs); ``activation``: an Elman
    RNN's nonlinearity; ``linear_before_reset``: a GRU's ``r * (W_hn h + b_hn)`` (PyTorch's, ONNX's 1) rather than
    ``W_hn (r * h) + b_hn`` (ONNX's default 0)."""

    kind: str
    order: str = ""
    activation: Callable[[Expr], Expr] = op.tanh
    linear_before_reset: bool = True


@dataclass(frozen=True)
class Weights:
    """One direction of one layer, PyTorch's shapes: ``w_ih`` (gates * hidden, input), ``w_hh`` (gates * hidden,
    hidden), the biases (gates * hidden,) or None, ``w_hr`` (projection, hidden) for an LSTM with ``proj_size``."""

    w_ih: Expr
    w_hh: Expr
    b_ih: Optional[Expr] = None
    b_hh: Optional[Expr] = None
    w_hr: Optional[Expr] = None


def static_length(x: Expr, axis: int = 0) -> int:
    """The sequence length of ``x`` (its ``axis``): a static size, or a ``ValueError`` the importers say of the
    node (an unrolled layer has one copy of its step per element of the sequence)."""
    length = x.struct_info.shape[axis]
    if not isinstance(length, int):
        raise ValueError(f"the sequence length is the symbolic size {length}; a recurrent layer is unrolled over its "
                         "steps, which needs a static length (export or import with a fixed sequence length)")
    return length


def transpose(w: Expr) -> Expr:
    return op.permute_dims(w, axes=[1, 0])


def _linear(x: Expr, w_t: Expr, b: Optional[Expr]) -> Expr:
    y = op.matmul(x, w_t)
    return y if b is None else op.add(y, b)


def run(cell: Cell, x: Expr, state: Sequence[Expr], weights: Weights, reverse: bool,
        trace: list) -> tuple[list[Expr], tuple[Expr, ...]]:
    """One direction of one layer over ``x`` (sequence, batch, input) from ``state`` (``(h,)``, or ``(h, c)`` for an
    LSTM, each (1, batch, hidden)): the outputs ``h`` of each step in time order, and the last state. The input's
    projection is one matmul for the whole sequence, the weights are transposed (and split) once for every step;
    each step's states are appended to ``trace``."""
    steps = static_length(x)
    hidden = weights.w_hh.struct_info.shape[0] // GATES[cell.kind]
    projected = split_pieces(_linear(x, transpose(weights.w_ih), weights.b_ih), 0, [1] * steps)
    w_hh_t, b_hh = transpose(weights.w_hh), weights.b_hh
    if cell.kind == "gru" and not cell.linear_before_reset:  # the n gate's hidden part is a matmul of its own
        w_hh_t = split_pieces(w_hh_t, 1, [2 * hidden, hidden])
        b_hh = [None, None] if b_hh is None else split_pieces(b_hh, 0, [2 * hidden, hidden])
    w_hr_t = None if weights.w_hr is None else transpose(weights.w_hr)
    outputs: list[Optional[Expr]] = [None] * steps
    for t in (reversed(range(steps)) if reverse else range(steps)):
        state = _step(cell, projected[t], tuple(state), w_hh_t, b_hh, hidden, w_hr_t)
        trace.extend(state)
        outputs[t] = state[0]
    return outputs, tuple(state)


def _step(cell: Cell, xp: Expr, state: tuple, w_hh_t, b_hh, hidden: int, w_hr_t: Optional[Expr]) -> tuple[Expr, ...]:
    h = state[0]
    if cell.kind == "rnn":
        return (cell.activation(op.add(xp, _linear(h, w_hh_t, b_hh))),)
    size = GATES[cell.kind] * [hidden]
    if cell.kind == "lstm":
        gates = dict(zip(cell.order, split_pieces(op.add(xp, _linear(h, w_hh_t, b_hh)), 2, size)))
        c = op.add(op.multiply(op.sigmoid(gates["f"]), state[1]),
                   op.multiply(op.sigmoid(gates["i"]), op.tanh(gates["g"])))
        h = op.multiply(op.sigmoid(gates["o"]), op.tanh(c))
        return (h if w_hr_t is None else op.matmul(h, w_hr_t)), c
    return (_gru_step(cell, dict(zip(cell.order, split_pieces(xp, 2, size))), h, w_hh_t, b_hh, hidden),)


def _gru_step(cell: Cell, x_gates: dict, h: Expr, w_hh_t, b_hh, hidden: int) -> Expr:
    """``h' = n + z * (h - n)`` (PyTorch's ``(1 - z) * n + z * h``). With ``linear_before_reset`` one matmul
    gives every gate's hidden part; without, the ``n`` gate's multiplies ``r * h``, so ``w_hh_t`` and ``b_hh``
    come as the ``r``/``z`` part and the ``n`` part (``n`` is last in both orders)."""
    if cell.linear_before_reset:
        h_gates = dict(zip(cell.order, split_pieces(_linear(h, w_hh_t, b_hh), 2, 3 * [hidden])))
        r, z = (op.sigmoid(op.add(x_gates[k], h_gates[k])) for k in "rz")
        n = op.tanh(op.add(x_gates["n"], op.multiply(r, h_gates["n"])))
    else:
        h_gates = dict(zip(cell.order[:2], split_pieces(_linear(h, w_hh_t[0], b_hh[0]), 2, 2 * [hidden])))
        r, z = (op.sigmoid(op.add(x_gates[k], h_gates[k])) for k in "rz")
        n = op.tanh(op.add(x_gates["n"], _linear(op.multiply(r, h), w_hh_t[1], b_hh[1])))
    return op.add(n, op.multiply(z, op.subtract(h, n)))


def zeros_state(x: Expr, size: int, directions: int) -> Expr:
    """An initial state of zeros, (directions, batch, size), for ``x`` (sequence, batch, input)."""
    return op.zeros((directions, x.struct_info.shape[1], size), dtype_of(x))


def in_order(results: Sequence[Optional[Expr]], trace: Sequence[Expr]) -> list[Optional[Expr]]:
    """``results`` read out of one tuple whose first fields are ``trace``, every step's state in the order it was
    computed (see the module docstring); None stays None."""
    ordered = Tuple([*trace, *(r for r in results if r is not None)])
    at, out = len(trace), []
    for r in results:
        out.append(None if r is None else TupleGetItem(ordered, at))
        at += r is not None
    return out


def layers(cell: Cell, x: Expr, weights: Sequence[Sequence[Weights]], h0: Expr, c0: Optional[Expr],
           dropout: Callable[[Expr], Expr] = lambda y: y) -> list[Expr]:
    """PyTorch's stacked layers: ``x`` (sequence, batch, input), ``weights[layer][direction]``, the initial states
    (layers * directions, batch, size); each layer reads the previous one's outputs (its directions concatenated
    along the features), through ``dropout``. Returns the output (sequence, batch, directions * hidden), ``h_n``
    and, for an LSTM, ``c_n`` (layers * directions, batch, size), in :func:`in_order`."""
    directions = len(weights[0])
    count = len(weights) * directions
    hs = split_pieces(h0, 0, [1] * count)
    cs = split_pieces(c0, 0, [1] * count) if c0 is not None else [None] * count
    trace, finals = [], []
    for layer, directed in enumerate(weights):
        if layer:
            x = dropout(x)
        sequences = []
        for d, w in enumerate(directed):
            k = layer * directions + d
            outputs, final = run(cell, x, (hs[k],) if c0 is None else (hs[k], cs[k]), w, d == 1, trace)
            sequences.append(op.concat(outputs, axis=0))
            finals.append(final)
        x = sequences[0] if directions == 1 else op.concat(sequences, axis=2)
    results = [x] + [op.concat([f[i] for f in finals], axis=0) for i in range(len(finals[0]))]
    return in_order(results, trace)
