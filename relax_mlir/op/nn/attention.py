"""``relax.nn.attention``: TVM's fused multi-head attention, a composite decomposed into matmuls and a softmax.

Layout BSNH, as TVM: ``query`` ``(B, S, N, H)``, ``key`` ``(B, S_kv, N, H)``, ``value`` ``(B, S_kv, N, H_v)``, the
result ``(B, S, N, H_v)``. ``scores = (Q @ K^T) * scale (+ bias)`` per batch and head, ``softmax`` over the keys
(only the unmasked ones with a causal mask), times ``V``. The gradient is the decomposition's
(``grad_utils.through_decomposition``): training sees the matmuls, the softmax and the mask, as TVM's trainer does
after its legalization.
"""

from __future__ import annotations

import math

import numpy as np

from ... import op
from ...ir import sym
from ...ir.expr import Call, Expr, const
from ...ir.struct_info import TensorStructInfo
from ..common import broadcast_shapes, check_dims_match, fmt, require_float, require_ndim, require_same_dtype
from ..grad_utils import ShapeNeeded, sinfo_of, through_decomposition
from ..registry import BadSample, InferError, Op, Sample, fail, register
from .grad_helpers import count
from .norm import cast_dtype, compute_dtype

_T = TensorStructInfo
_INPUTS = ("query", "key", "value", "bias")
_MASKS = (None, "TopLeft", "BottomRight")


def _check(attrs: dict) -> None:
    scale = attrs["scale"]
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))):
        fail(f"scale must be a number or None, got {scale!r}")
    if attrs["causal_mask"] not in _MASKS:
        fail(f"causal_mask must be None, 'TopLeft' or 'BottomRight', got {attrs['causal_mask']!r}")
    if attrs["window_size"] is not None:
        fail(f"window_size (sliding-window attention) is not supported, got {attrs['window_size']!r}")


def mask_offset(seq: sym.Dim, seq_kv: sym.Dim, causal_mask) -> int:
    """The diagonal ``k`` of TVM's mask ``tril(ones((seq, seq_kv)), k)``: 0 for TopLeft, ``|seq - seq_kv|`` for
    BottomRight (as TVM documents it, also when ``seq > seq_kv``)."""
    if causal_mask != "BottomRight":
        return 0
    diff = seq - seq_kv
    if not isinstance(diff, int):
        fail(f"causal_mask 'BottomRight' needs seq_len - seq_len_kv to be static, got {sym.format_dim(diff)}")
    return abs(diff)


def _infer(args, attrs):
    names = _INPUTS[:len(args)]
    for s, name in zip(args, names):
        require_float(s, name)
    dtype = require_same_dtype(args, names)
    for s, name in zip(args[:3], names):
        require_ndim(s, 4, name)
    q, k, v = args[:3]
    if any(s.shape is None for s in args[:3]):
        return _T(None, dtype, 4)
    (b, s, n, h), (bk, skv, nk, hk), (bv, sv, nv, hv) = q.shape, k.shape, v.shape
    for got, want, what in ((bk, b, "key's batch"), (nk, n, "key's heads"), (hk, h, "key's head_dim"),
                            (bv, b, "value's batch"), (sv, skv, "value's seq_len_kv"), (nv, n, "value's heads")):
        check_dims_match(got, want, f"{what} ({got}) must equal {want}: query {fmt(q.shape)}, key {fmt(k.shape)}, "
                                    f"value {fmt(v.shape)} (layout (batch, seq, heads, head_dim))")
    if len(args) == 4 and args[3].shape is not None:
        scores = (b, n, s, skv)
        try:
            fits = broadcast_shapes(args[3].shape, scores) == scores
        except InferError:
            fits = False
        if not fits:
            fail(f"bias {fmt(args[3].shape)} must broadcast to (batch, heads, seq_len, seq_len_kv) = {fmt(scores)}")
    mask_offset(s, skv, attrs["causal_mask"])
    return _T((b, s, n, hv), dtype)


def _scale(attrs: dict, head_dim) -> float:
    return 1.0 / math.sqrt(head_dim) if attrs["scale"] is None else float(attrs["scale"])


def _scale_expr(attrs: dict, head_dim, like: Expr) -> Expr:
    """The scale as a 0-d tensor of ``like``'s dtype: a constant, or ``rsqrt`` of a symbolic head size counted at run
    time (``sum(ones((h,)))``, exact up to 2**24 in float32)."""
    if attrs["scale"] is None and not isinstance(head_dim, int):
        return op.rsqrt(count((head_dim,), like))
    return const(_scale(attrs, head_dim), sinfo_of(like).dtype)


def _reference(query, key, value, bias=None, *, scale, causal_mask, window_size):
    q, k, v = (a.astype(np.float64).transpose(0, 2, 1, 3) for a in (query, key, value))  # (B, N, S, H)
    scores = q @ k.transpose(0, 1, 3, 2) * _scale({"scale": scale}, q.shape[-1])
    if bias is not None:
        scores = scores + bias.astype(np.float64)
    if causal_mask is not None:
        s, skv = scores.shape[-2:]
        keep = np.tril(np.ones((s, skv), bool), mask_offset(s, skv, causal_mask))
        scores = np.where(keep, scores, -np.inf)
    if scores.shape[-1]:  # no keys: nothing to weigh, the output is zeros (an empty matmul)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs = scores / scores.sum(axis=-1, keepdims=True)
    return (probs @ v).transpose(0, 2, 1, 3).astype(query.dtype)


def _decompose(call: Call) -> Expr:
    """``permute_dims`` to (B, N, S, H), ``matmul``, ``* scale``, ``+ bias``, the causal mask as a ``where`` over
    ``tril(ones)`` (masked scores become the dtype's lowest finite value), ``softmax``, ``matmul``, back to BSNH.
    Half floats are computed in float32."""
    dtype = sinfo_of(call.args[0]).dtype
    ct = compute_dtype(dtype)
    q, k, v = (cast_dtype(a, ct) for a in call.args[:3])
    q_shape = sinfo_of(q).shape
    if q_shape is None or sinfo_of(k).shape is None:
        raise ShapeNeeded(f"{call.op.name} decomposition", "needs the shapes of query and key")
    seq, seq_kv = q_shape[1], sinfo_of(k).shape[1]
    scores = op.matmul(op.permute_dims(q, (0, 2, 1, 3)), op.permute_dims(k, (0, 2, 3, 1)))
    scores = scores * _scale_expr(call.attrs, q_shape[3], scores)
    if len(call.args) == 4:
        scores = scores + cast_dtype(call.args[3], ct)
    if call.attrs["causal_mask"] is not None:
        keep = op.tril(op.ones((seq, seq_kv), "bool"), mask_offset(seq, seq_kv, call.attrs["causal_mask"]))
        scores = op.where(keep, scores, const(float(np.finfo(ct).min), ct))
    out = op.matmul(op.nn.softmax(scores, -1), op.permute_dims(v, (0, 2, 1, 3)))
    return cast_dtype(op.permute_dims(out, (0, 2, 1, 3)), dtype)


def _qkv(q, k, v, dtype="float32"):
    return [_T(q, dtype), _T(k, dtype), _T(v, dtype)]


attention = register(Op(
    name="relax.nn.attention", inputs=_INPUTS, num_optional=1, infer=_infer, reference=_reference,
    attrs={"scale": None, "causal_mask": None, "window_size": None}, check_attrs=_check,
    gradient=through_decomposition, decompose=_decompose,
    samples=[Sample(_qkv((2, 3, 2, 4), (2, 5, 2, 4), (2, 5, 2, 3))),
             Sample(_qkv((1, 3, 2, 4), (1, 5, 2, 4), (1, 5, 2, 4), "float64") + [_T((1, 2, 3, 5), "float64")],
                    {"scale": 0.5}),
             Sample(_qkv((2, 4, 1, 3), (2, 4, 1, 3), (2, 4, 1, 2)) + [_T((4,), "float32")]),
             Sample(_qkv((1, "n", 2, 4), (1, "n", 2, 4), (1, "n", 2, 4)), {"causal_mask": "TopLeft"}),
             Sample(_qkv((1, 2, 2, 3), (1, 4, 2, 3), (1, 4, 2, 3), "float64"), {"causal_mask": "BottomRight"}),
             Sample(_qkv((1, 4, 1, 3), (1, 2, 1, 3), (1, 2, 1, 3), "float64"), {"causal_mask": "TopLeft"}),
             Sample(_qkv((1, 4, 1, 3), (1, 2, 1, 3), (1, 2, 1, 3)), {"causal_mask": "BottomRight"}),
             Sample(_qkv(("b", 3, 2, 8), ("b", 3, 2, 8), ("b", 3, 2, 8), "float16"), {"causal_mask": "TopLeft"})],
    bad_samples=[BadSample(_qkv((2, 3, 4), (2, 3, 4), (2, 3, 4)), {}, r"query must have rank 4, got rank 3"),
                 BadSample(_qkv((2, 3, 2, 4), (2, 5, 3, 4), (2, 5, 2, 3)), {}, r"key's heads \(3\) must equal 2"),
                 BadSample(_qkv((2, 3, 2, 4), (2, 5, 2, 4), (2, 6, 2, 3)), {},
                           r"value's seq_len_kv \(6\) must equal 5"),
                 BadSample(_qkv((2, 3, 2, 4), (2, 5, 2, 4), (2, 5, 2, 3), "int32"), {},
                           r"query must have a float dtype, got int32"),
                 BadSample(_qkv((2, 3, 2, 4), (2, 5, 2, 4), (2, 5, 2, 3)) + [_T((2, 2, 3, 4), "float32")], {},
                           r"bias \(2, 2, 3, 4\) must broadcast to .* \(2, 2, 3, 5\)"),
                 BadSample(_qkv((1, 2, 1, 4), (1, 3, 1, 4), (1, 3, 1, 4)), {"causal_mask": "Upper"},
                           r"causal_mask must be None, 'TopLeft' or 'BottomRight'"),
                 BadSample(_qkv((1, 2, 1, 4), (1, 3, 1, 4), (1, 3, 1, 4)), {"window_size": 2},
                           r"window_size .* is not supported"),
                 BadSample(_qkv((1, "n", 1, 4), (1, "m", 1, 4), (1, "m", 1, 4)), {"causal_mask": "BottomRight"},
                           r"needs seq_len - seq_len_kv to be static")],
    doc="Multi-head attention, TVM's ``R.nn.attention(query, key, value, bias=None, scale=None, causal_mask=None)`` "
        "in BSNH layout: ``softmax((Q @ K^T) * scale + bias) @ V`` per batch and head, ``scale`` defaulting to "
        "``1 / sqrt(head_dim)``, ``bias`` broadcast to ``(batch, heads, seq_len, seq_len_kv)``. ``causal_mask`` "
        "keeps the scores where ``tril(ones((seq_len, seq_len_kv)), k)`` is 1: ``k = 0`` for 'TopLeft', "
        "``k = |seq_len - seq_len_kv|`` for 'BottomRight' (TVM's definitions). ``window_size`` is refused. "
        "Composite: decomposed into matmul/softmax before lowering; its gradient is the decomposition's."))
