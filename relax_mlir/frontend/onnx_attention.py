"""ONNX's ``Attention`` (opsets 23 to 25) composed of Relax's matmuls, softmax and masks, step by step as ONNX's
specification (and its reference implementation, whose results the node tests hold) computes it:

- 3-D ``Q``/``K``/``V`` ``(batch, seq, heads * head_size)`` are split into ``q_num_heads``/``kv_num_heads`` heads,
  ``(batch, heads, seq, head_size)``; the output goes back to 3-D;
- ``past_key``/``past_value`` are concatenated before ``K``/``V`` along the sequence (the ``present_key`` and
  ``present_value`` outputs);
- the additive bias: ``attn_mask`` (boolean: ``False`` is ``-inf``; float: added as it is; a short one padded along
  the keys with ``-inf``/``False``), ``is_causal`` (key ``j`` is seen by query ``i`` iff ``j <= i + offset``, the
  offset being the past length, ``nonpad_kv_seqlen - q_len`` per batch, else 0), the sliding window of opset 25
  (``left_window_size``/``right_window_size`` around ``i + offset``) and the padding of ``nonpad_kv_seqlen``;
- group-query attention: each ``K``/``V`` head repeated ``q_num_heads / kv_num_heads`` times (``h0, h0, h1, h1 ...``);
- ``Q`` and ``K`` each scaled by ``sqrt(scale)`` (rounded to their dtype) before the matmul, ``softcap * tanh(x /
  softcap)`` after it, then the bias, then the softmax (in ``softmax_precision`` if given), cast back, times ``V``;
- a query row whose bias is ``-inf`` everywhere (no key allowed) is a zero row of ``Y`` and of the mode-3 output,
  rather than NaN;
- ``qk_matmul_output``: the scaled ``Q K^T`` (mode 0), after the softcap (1), plus the bias (2), after the softmax (3).
  (Mode 0 with a softcap is the specification's, the matmul's output: ONNX's reference gives the softcapped value
  there, and no node test has that combination.)
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .. import op
from ..ir.expr import Constant, Expr, const
from .common import dtype_of, ndim_of, scalar_like


def _shape(x: Expr) -> tuple:
    return tuple(x.struct_info.shape)


def _given(xs, i: int) -> Optional[Expr]:
    return xs[i] if len(xs) > i and xs[i] is not None else None


def attention(node, xs):
    """The ``Attention`` node's outputs ``Y, present_key, present_value, qk_matmul_output`` (those it names)."""
    from onnx import helper

    from .onnx import fold

    q, k, v = xs[:3]
    mask, past_key, past_value, nonpad = (_given(xs, i) for i in (3, 4, 5, 6))
    a = node.attrs
    rank = ndim_of(q)
    if not rank == ndim_of(k) == ndim_of(v) or rank not in (3, 4):
        raise node.fail(f"Q {_shape(q)}, K {_shape(k)}, V {_shape(v)}: expected three 3-D or three 4-D inputs")
    if (past_key is None) != (past_value is None):
        raise node.fail("past_key and past_value must be given together")
    if nonpad is not None and past_key is not None:
        raise node.fail("nonpad_kv_seqlen cannot be combined with past_key/past_value")
    mode = a.get("qk_matmul_output_mode", 0)
    if mode not in (0, 1, 2, 3):
        raise node.fail(f"qk_matmul_output_mode={mode}; expected 0, 1, 2 or 3")
    dtype = dtype_of(q)
    if rank == 3:
        q, k, v = _heads_first(node, q, k, v)
    elif any(name in a for name in ("q_num_heads", "kv_num_heads")) and \
            (a.get("q_num_heads", _shape(q)[1]), a.get("kv_num_heads", _shape(k)[1])) != (_shape(q)[1], _shape(k)[1]):
        raise node.fail(f"q_num_heads/kv_num_heads {a.get('q_num_heads')}/{a.get('kv_num_heads')} disagree with "
                        f"the heads of the 4-D Q {_shape(q)} and K {_shape(k)}")
    if past_key is not None:
        k, v = op.concat([past_key, k], axis=2), op.concat([past_value, v], axis=2)
    present = [k, v]
    batch, q_heads, q_len, head_size = _shape(q)
    kv_heads, kv_len = _shape(k)[1], _shape(k)[2]
    if _shape(v)[1] != kv_heads or q_heads % kv_heads:
        raise node.fail(f"{q_heads} query heads, {kv_heads} key heads and {_shape(v)[1]} value heads: expected as "
                        "many key as value heads, and query heads a multiple of them (group-query attention)")
    if q_heads != kv_heads:  # each key/value head serves q_heads / kv_heads query heads in a row
        k, v = (op.repeat(t, repeats=q_heads // kv_heads, axis=1) for t in (k, v))
    scale = a.get("scale")
    root = np.sqrt(1.0 / np.sqrt(head_size) if scale is None else float(scale))
    qk = op.matmul(op.multiply(q, scalar_like(root, q)),
                   op.permute_dims(op.multiply(k, scalar_like(root, k)), axes=[0, 1, 3, 2]))
    raw = qk
    softcap = float(a.get("softcap", 0.0))
    if softcap > 0:
        qk = op.multiply(op.tanh(op.divide(qk, scalar_like(softcap, qk))), scalar_like(softcap, qk))
    capped = qk
    offset = _offset(past_key, nonpad, q_len)
    bias = _bias(node, mask, dtype, q_len, kv_len, offset, nonpad)
    folded = None if bias is None else fold(bias)
    bias = folded if isinstance(folded, Constant) else bias  # (a constant where no mask is given at run time)
    if bias is not None:
        qk = op.add(qk, bias)
    precision = a.get("softmax_precision")
    wide = dtype if precision is None else _float_dtype(node, precision, helper)
    scores = op.astype(qk, wide) if wide != dtype else qk
    masked = None
    if bias is not None and _may_mask_a_row(bias):  # a row with no key allowed: zeros, its softmax not computed
        masked = op.equal(op.max(bias, axis=[-1], keepdims=True), const(-np.inf, dtype))
        scores = op.where(masked, const(0.0, wide), scores)  # (all -inf: the softmax's NaN, and a NumPy warning)
    probs = op.nn.softmax(scores, axis=-1)
    if masked is not None:
        probs = op.where(masked, const(0.0, wide), probs)
    probs = op.astype(probs, dtype) if wide != dtype else probs
    y = op.matmul(probs, v)
    if rank == 3:
        y = op.reshape(op.permute_dims(y, axes=[0, 2, 1, 3]), (batch, q_len, -1))
    qk_output = (raw, capped, qk, probs)[mode]
    return [y, *present, qk_output][:len(node.proto.output)]


def _heads_first(node, q: Expr, k: Expr, v: Expr) -> tuple:
    """3-D ``(batch, seq, heads * size)`` inputs as 4-D ``(batch, heads, seq, size)``; the head counts are the
    ``q_num_heads`` and ``kv_num_heads`` attributes, which 3-D inputs need."""
    heads = {"q_num_heads": node.attrs.get("q_num_heads"), "kv_num_heads": node.attrs.get("kv_num_heads")}
    if None in heads.values() or min(heads.values()) < 1:
        raise node.fail(f"3-D inputs need q_num_heads and kv_num_heads (positive), got {heads}")
    split = []
    counts = (heads["q_num_heads"], heads["kv_num_heads"], heads["kv_num_heads"])
    for t, name, n in zip((q, k, v), "QKV", counts):
        b, s, hidden = _shape(t)
        if hidden % n:
            raise node.fail(f"{name} {_shape(t)}: its hidden size {hidden} is not a multiple of {n} heads")
        split.append(op.permute_dims(op.reshape(t, (b, s, n, hidden // n)), axes=[0, 2, 1, 3]))
    return tuple(split)


def _float_dtype(node, onnx_type: int, helper) -> str:
    try:
        dtype = str(np.dtype(helper.tensor_dtype_to_np_dtype(onnx_type)))
    except (KeyError, TypeError):
        dtype = None
    if dtype not in ("float16", "float32", "float64", "bfloat16"):
        raise node.fail(f"softmax_precision={onnx_type} is not a float type Relax holds; expected FLOAT (1), "
                        "DOUBLE (11), FLOAT16 (10) or BFLOAT16 (16)")
    return dtype


def _offset(past_key: Optional[Expr], nonpad: Optional[Expr], q_len: int):
    """The count of valid keys before the query block: the past length, ``nonpad_kv_seqlen - q_len`` per batch
    (an int64 ``(batch, 1, 1)`` value computed at run time), else 0."""
    if past_key is not None:
        return _shape(past_key)[2]
    if nonpad is not None:
        return op.reshape(op.subtract(op.astype(nonpad, "int64"), const(q_len, "int64")), (-1, 1, 1))
    return 0


def _bias(node, mask: Optional[Expr], dtype: str, q_len: int, kv_len: int, offset, nonpad: Optional[Expr]):
    """The additive bias (``0`` where a key is seen, ``-inf`` where not, plus a float mask), broadcastable to the
    scores ``(batch, heads, q_len, kv_len)``; None where there is none."""
    a = node.attrs
    causal = bool(a.get("is_causal", 0))
    left, right = int(a.get("left_window_size", -1)), int(a.get("right_window_size", -1))
    bias = None if mask is None else _mask_bias(node, mask, dtype, kv_len)
    if causal:
        bias = _add(bias, _allowed_bias(lambda diff: op.greater_equal(diff, const(0, "int64")), offset, q_len,
                                        kv_len, dtype))
    if left >= 0 or right >= 0:
        def window(diff):
            inside = [op.less_equal(diff, const(left, "int64"))] if left >= 0 else []
            inside += [op.less_equal(op.negative(diff), const(right, "int64"))] if right >= 0 else []
            return inside[0] if len(inside) == 1 else op.logical_and(*inside)
        bias = _add(bias, _allowed_bias(window, offset, q_len, kv_len, dtype))
    if nonpad is not None:
        keys = const(np.arange(kv_len, dtype=np.int64).reshape(1, kv_len), "int64")
        seen = op.less(keys, op.reshape(op.astype(nonpad, "int64"), (-1, 1)))
        bias = _add(bias, op.reshape(_where_bias(seen, dtype), (-1, 1, 1, kv_len)))
    return bias


def _add(bias: Optional[Expr], term: Expr) -> Expr:
    return term if bias is None else op.add(bias, term)


def _mask_bias(node, mask: Expr, dtype: str, kv_len: int) -> Expr:
    """``attn_mask`` as an additive bias: a boolean one ``0``/``-inf``, a float one (cast to the inputs' dtype) as
    it is; one shorter than the keys padded with ``-inf`` (``False``)."""
    boolean = dtype_of(mask) == "bool"
    if not boolean and dtype_of(mask) not in ("float16", "float32", "float64", "bfloat16"):
        raise node.fail(f"attn_mask of {dtype_of(mask)}; expected a boolean or a float mask")
    short = kv_len - _shape(mask)[-1]
    if short < 0:
        raise node.fail(f"attn_mask {_shape(mask)} covers more keys than there are ({kv_len})")
    bias = _where_bias(mask, dtype) if boolean else (mask if dtype_of(mask) == dtype else op.astype(mask, dtype))
    if short:
        width = [0] * (2 * ndim_of(bias))
        width[-1] = short
        bias = op.nn.pad(bias, pad_width=width, pad_value=-np.inf)
    return bias


def _where_bias(allowed: Expr, dtype: str) -> Expr:
    return op.where(allowed, const(0.0, dtype), const(-np.inf, dtype))


def _allowed_bias(rule, offset, q_len: int, kv_len: int, dtype: str) -> Expr:
    """``0``/``-inf`` by ``rule(i + offset - j)`` for query ``i`` and key ``j``: ``(q_len, kv_len)`` for a scalar
    offset, ``(batch, 1, q_len, kv_len)`` for a per-batch one."""
    diff = np.arange(q_len).reshape(q_len, 1) - np.arange(kv_len).reshape(1, kv_len)
    if isinstance(offset, int):
        return _where_bias(rule(const(diff + offset, "int64")), dtype)
    per_batch = op.add(const(diff, "int64"), offset)  # (batch, q_len, kv_len)
    return op.expand_dims(_where_bias(rule(per_batch), dtype), axis=1)


def _may_mask_a_row(bias: Expr) -> bool:
    """Whether some query row of the bias may be ``-inf`` everywhere: known where the bias is a constant."""
    return not isinstance(bias, Constant) or bool(np.any(np.all(np.isneginf(bias.data), axis=-1)))
