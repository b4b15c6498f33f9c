"""ONNX ops ``from_onnx`` composes of existing Relax ops: activations (``Swish``, ``SwiGLU``, ``ThresholdedRelu``,
``Shrink``, ``Softsign``), reductions (``ReduceLogSumExp``, ``ReduceLogSum``, ``ReduceSumSquare``, ``ReduceProd``,
``GlobalMaxPool``), normalizations (``MeanVarianceNormalization``, ``GroupNormalization``), layout and indexing
(``SpaceToDepth``, ``CenterCropPad``, ``GatherND``, ``Compress``, ``ReverseSequence``, ``TensorScatter``,
``CumProd``), constants computed while importing (``EyeLike``, the Hann, Hamming and Blackman windows), ``DFT``,
``AffineGrid``, ``RotaryEmbedding``, ``GridSample``, the opset-27 blocks ``CausalConvWithState`` and
``LinearAttention``, ``Det``, ``MaxUnpool``, ``Col2Im``, MaxPool's ``Indices``, and quantization
(``QuantizeLinear``, ``DequantizeLinear``, ``DynamicQuantizeLinear``, ``QLinearMatMul``, ``MatMulInteger``,
``ConvInteger``) to and from the 8- and 16-bit integers Relax holds.

Each follows ONNX's specification (its function body where it has one); the oracles are ONNX's node tests.
Converters take ``(node, xs)`` as those of :mod:`.onnx` do: ``node.attrs`` the decoded attributes, ``node.fail``
the refusal naming the node.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Optional

import numpy as np

from .. import op
from ..ir.expr import Constant, Expr, const
from .common import dtype_of, in_float32, ndim_of, scalar_like


def _shape(x: Expr) -> tuple:
    return tuple(x.struct_info.shape)


def _given(xs, i: int) -> Optional[Expr]:
    return xs[i] if len(xs) > i and xs[i] is not None else None


def _value(node, x: Optional[Expr], what: str) -> np.ndarray:
    """An operand that must be known while importing (as :func:`.onnx._need`)."""
    if not isinstance(x, Constant):
        raise node.fail(f"{what} must be a constant (or computed from static shapes), got a value computed at run "
                        "time")
    return x.data


def _axis(node, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise node.fail(f"axis {axis} is out of range for rank {rank} (expected [{-rank}, {rank - 1}])")
    return axis % rank


def _np_dtype(node, onnx_type: int) -> str:
    from onnx import helper

    try:
        return str(np.dtype(helper.tensor_dtype_to_np_dtype(onnx_type)))
    except (KeyError, TypeError):
        raise node.fail(f"element type {onnx_type} is not an ONNX element type") from None


# -- activations ---------------------------------------------------------------------------------------------------

def _swish_of(x: Expr, alpha: float) -> Expr:
    return op.multiply(x, op.sigmoid(x if alpha == 1.0 else op.multiply(x, scalar_like(alpha, x))))


def swish(node, xs):
    """``Swish`` (opset 24): ``x * sigmoid(alpha * x)``, in float32 for half floats."""
    alpha = float(node.attrs.get("alpha", 1.0))
    return in_float32(xs[0], lambda x: _swish_of(x, alpha))


def swiglu(node, xs):
    """``SwiGLU`` (opset 28): ``Swish_alpha(A) * B``, ``A`` and ``B`` of one shape (ONNX does not broadcast them)."""
    a, b = xs
    if _shape(a) != _shape(b):
        raise node.fail(f"A {_shape(a)} and B {_shape(b)} must have the same shape (SwiGLU does not broadcast)")
    alpha = float(node.attrs.get("alpha", 1.0))
    dtype = dtype_of(a)
    if dtype in ("float16", "bfloat16"):  # (computed in float32, rounded once)
        return op.astype(op.multiply(_swish_of(op.astype(a, "float32"), alpha), op.astype(b, "float32")), dtype)
    return op.multiply(_swish_of(a, alpha), b)


def thresholded_relu(node, xs):
    """``ThresholdedRelu``: ``x`` where ``x > alpha`` (1 by default), else 0."""
    x = xs[0]
    return op.where(op.greater(x, scalar_like(float(node.attrs.get("alpha", 1.0)), x)), x, scalar_like(0, x))


def shrink(node, xs):
    """``Shrink``: ``x + bias`` below ``-lambd``, ``x - bias`` above ``lambd``, 0 between."""
    x = xs[0]
    lambd, bias = float(node.attrs.get("lambd", 0.5)), float(node.attrs.get("bias", 0.0))
    if dtype_of(x)[0] in "iu" and (lambd != int(lambd) or bias != int(bias)):
        raise node.fail(f"lambd={lambd:g}, bias={bias:g} on {dtype_of(x)}: expected whole numbers for an integer "
                        "input")
    low = op.less(x, scalar_like(-lambd, x))
    high = op.greater(x, scalar_like(lambd, x))
    return op.where(low, op.add(x, scalar_like(bias, x)),
                    op.where(high, op.subtract(x, scalar_like(bias, x)), scalar_like(0, x)))


def softsign(node, xs):
    """``Softsign``: ``x / (1 + |x|)``."""
    return in_float32(xs[0], lambda x: op.divide(x, op.add(scalar_like(1.0, x), op.abs(x))))


# -- reductions ------------------------------------------------------------------------------------------------------

def _reduced_size(x: Expr, axis) -> int:
    shape = _shape(x)
    axes = range(len(shape)) if axis is None else axis
    return int(np.prod([shape[a] for a in axes]))


def log_sum_exp(x: Expr, axis=None, keepdims: bool = True) -> Expr:
    """``log(sum(exp(x)))`` less the largest ``x`` and plus it again, so that a large ``x`` does not overflow (a
    non-finite largest, and an empty set, are left as they are: ``-inf`` for no elements)."""
    def of(x: Expr) -> Expr:
        if _reduced_size(x, axis) == 0:
            return op.log(op.sum(op.exp(x), axis=axis, keepdims=keepdims))
        top = op.max(x, axis=axis, keepdims=True)
        top = op.where(op.isfinite(top), top, scalar_like(0.0, top))
        total = op.log(op.sum(op.exp(op.subtract(x, top)), axis=axis, keepdims=keepdims))
        return op.add(total, top if keepdims else op.reshape(top, _shape(total)))
    return in_float32(x, of)


def log_sum(x: Expr, axis=None, keepdims: bool = True) -> Expr:
    return op.log(op.sum(x, axis=axis, keepdims=keepdims))


def sum_square(x: Expr, axis=None, keepdims: bool = True) -> Expr:
    return op.sum(op.multiply(x, x), axis=axis, keepdims=keepdims)


def global_max_pool(node, xs):
    """``GlobalMaxPool``: the largest value over every spatial axis, kept as size 1."""
    x = xs[0]
    if ndim_of(x) < 3:
        raise node.fail(f"input {_shape(x)}: expected (N, C, spatial...)")
    return op.max(x, axis=list(range(2, ndim_of(x))), keepdims=True)


# -- normalizations --------------------------------------------------------------------------------------------------

def mean_variance_normalization(node, xs):
    """``MeanVarianceNormalization`` over ``axes`` (0, 2, 3 by default), as ONNX's function body:
    ``(x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9)``."""
    x = xs[0]
    axes = sorted({_axis(node, a, ndim_of(x)) for a in node.attrs.get("axes", [0, 2, 3])})

    def of(x: Expr) -> Expr:
        mean = op.mean(x, axis=axes, keepdims=True)
        variance = op.subtract(op.mean(op.multiply(x, x), axis=axes, keepdims=True), op.multiply(mean, mean))
        return op.divide(op.subtract(x, mean), op.add(op.sqrt(variance), scalar_like(1e-9, x)))
    return in_float32(x, of)


def group_normalization(node, xs):
    """``GroupNormalization``: each instance's groups of ``C / num_groups`` channels normalized (in ``stash_type``,
    float32 by default, then cast back), times ``scale`` plus ``bias`` per channel (opset 21). Opset 18's
    ``scale``/``bias`` of one value per group are spread over the group's channels."""
    x, scale, bias = xs
    groups, epsilon = node.attrs.get("num_groups"), float(node.attrs.get("epsilon", 1e-5))
    shape, dtype = _shape(x), dtype_of(x)
    if ndim_of(x) < 2 or not isinstance(groups, int) or groups < 1 or shape[1] % groups:
        raise node.fail(f"num_groups={groups} with X {shape}: expected a positive number of groups that divides "
                        "the channels (axis 1)")
    channels = shape[1]
    stash = _np_dtype(node, node.attrs.get("stash_type", 1))
    if stash not in ("float16", "float32", "float64", "bfloat16"):
        raise node.fail(f"stash_type={node.attrs.get('stash_type')} is not a float type Relax holds")
    per_channel = []
    for name, t in (("scale", scale), ("bias", bias)):
        count = int(np.prod(_shape(t)))
        if count == groups and channels != groups:  # opset 18: one per group
            t = op.repeat(op.reshape(t, (groups,)), repeats=channels // groups, axis=0)
        elif count != channels:
            raise node.fail(f"{name} {_shape(t)}: expected {channels} values (one per channel)")
        per_channel.append(op.reshape(t, (1, channels) + (1,) * (len(shape) - 2)))
    grouped = op.reshape(op.astype(x, stash) if stash != dtype else x, (shape[0], groups, -1))
    mean = op.mean(grouped, axis=[2], keepdims=True)
    centred = op.subtract(grouped, mean)
    variance = op.mean(op.multiply(centred, centred), axis=[2], keepdims=True)
    normal = op.divide(centred, op.sqrt(op.add(variance, const(epsilon, stash))))
    normal = op.reshape(normal, shape)
    normal = op.astype(normal, dtype) if stash != dtype else normal
    return op.add(op.multiply(normal, per_channel[0]), per_channel[1])


# -- layout and indexing ---------------------------------------------------------------------------------------------

def space_to_depth(node, xs):
    """``SpaceToDepth``: each ``blocksize x blocksize`` block of pixels to channels (the block before the channel,
    ``DCR``; ``CRD`` the channel before the block)."""
    x, b, mode = xs[0], node.attrs.get("blocksize"), node.attrs.get("mode", "DCR")
    if ndim_of(x) != 4 or not isinstance(b, int) or b < 1 or _shape(x)[2] % b or _shape(x)[3] % b:
        raise node.fail(f"blocksize={b} with input {_shape(x)}: expected an NCHW input whose height and width are "
                        "multiples of a positive blocksize")
    if mode not in ("DCR", "CRD"):
        raise node.fail(f"mode={mode!r}; expected 'DCR' or 'CRD'")
    n, c, h, w = _shape(x)
    blocks = op.reshape(x, (n, c, h // b, b, w // b, b))
    order = [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4]
    return op.reshape(op.permute_dims(blocks, axes=order), (n, c * b * b, h // b, w // b))


def center_crop_pad(node, xs):
    """``CenterCropPad``: each of ``axes`` cropped or padded with zeros to ``shape``, centred (an odd difference
    puts the extra element at the end)."""
    x = xs[0]
    sizes = [int(v) for v in np.ravel(_value(node, xs[1], "shape"))]
    rank = ndim_of(x)
    axes = [_axis(node, a, rank) for a in node.attrs.get("axes", range(rank))]
    if len(sizes) != len(axes):
        raise node.fail(f"{len(sizes)} sizes for {len(axes)} axes")
    width = [0] * (2 * rank)
    for axis, size in zip(axes, sizes):
        have = _shape(x)[axis]
        if size < have:
            start = (have - size) // 2
            x = op.strided_slice(x, axes=[axis], begin=[start], end=[start + size])
        elif size > have:
            width[2 * axis] = (size - have) // 2
            width[2 * axis + 1] = size - have - width[2 * axis]
    return op.nn.pad(x, pad_width=width, pad_value=0.0) if any(width) else x


def _wrapped(index: Expr, size: int) -> Expr:
    """An index counted from the end where negative (ONNX's indices may be in ``[-size, size)``)."""
    return op.where(op.less(index, const(0, "int64")), op.add(index, const(size, "int64")), index)


def gather_nd(node, xs):
    """``GatherND(data, indices)``: each row of ``indices`` (its last axis, ``k`` numbers) picks an element or a
    slice of ``data`` after the first ``batch_dims`` axes, which ``data`` and ``indices`` share. One ``take`` on
    the data's leading axes merged into one, at each row's flat position there."""
    data, indices = xs
    batch = int(node.attrs.get("batch_dims", 0))
    shape, rows = _shape(data), _shape(indices)
    k = rows[-1]
    if not 0 <= batch < min(len(shape), len(rows)) or shape[:batch] != rows[:batch] or batch + k > len(shape):
        raise node.fail(f"data {shape}, indices {rows}, batch_dims={batch}: expected the first batch_dims axes "
                        "equal and batch_dims + indices.shape[-1] <= rank(data)")
    index = op.astype(indices, "int64") if dtype_of(indices) != "int64" else indices
    picked, inner = shape[batch:batch + k], shape[batch + k:]
    groups = int(np.prod(shape[:batch]))
    flat = const(np.zeros(rows[:-1], np.int64), "int64")
    for i, size in enumerate(picked):
        column = op.reshape(op.strided_slice(index, axes=[len(rows) - 1], begin=[i], end=[i + 1]), rows[:-1])
        stride = int(np.prod(picked[i + 1:]))
        flat = op.add(flat, op.multiply(_wrapped(column, size), const(stride, "int64")))
    if batch:  # each batch group's rows read its own part of the merged axis
        block = int(np.prod(picked))
        first = np.arange(groups, dtype=np.int64).reshape(rows[:batch] + (1,) * (len(rows) - 1 - batch)) * block
        flat = op.add(flat, const(first, "int64"))
    merged = op.reshape(data, (groups * int(np.prod(picked)),) + inner)
    return op.take(merged, flat, axis=0)


def compress(node, xs):
    """``Compress``: the slices along ``axis`` (of the flattened input without one) where ``condition`` is true; a
    condition shorter than the axis leaves the rest out. The condition must be known while importing (it decides
    the output's shape)."""
    x = xs[0]
    condition = np.ravel(_value(node, xs[1], "condition")).astype(bool)
    axis = node.attrs.get("axis")
    if axis is None:
        x, axis = op.reshape(x, (-1,)), 0
    axis = _axis(node, axis, ndim_of(x))
    size = _shape(x)[axis]
    if len(condition) > size:
        raise node.fail(f"condition has {len(condition)} values, more than the {size} along axis {axis}")
    return op.take(x, const(np.flatnonzero(condition).astype(np.int64), "int64"), axis=axis)


def reverse_sequence(node, xs):
    """``ReverseSequence``: in each batch element, the first ``sequence_lens[b]`` steps along ``time_axis``
    reversed, the rest kept: a ``gather_elements`` along time at ``len - 1 - t`` (``t`` where ``t >= len``)."""
    x, lengths = xs
    rank = ndim_of(x)
    batch_axis, time_axis = int(node.attrs.get("batch_axis", 1)), int(node.attrs.get("time_axis", 0))
    if rank < 2 or {batch_axis, time_axis} != {0, 1}:
        raise node.fail(f"batch_axis={batch_axis}, time_axis={time_axis}: expected 0 and 1 (one each) of a tensor of "
                        f"rank 2 or more, got {_shape(x)}")
    steps = _shape(x)[time_axis]
    along = lambda v, axis: (1,) * axis + (-1,) + (1,) * (rank - axis - 1)  # noqa: E731
    t = const(np.arange(steps, dtype=np.int64).reshape(along(None, time_axis)), "int64")
    length = op.reshape(op.astype(lengths, "int64"), along(None, batch_axis))
    index = op.where(op.less(t, length), op.subtract(op.subtract(length, const(1, "int64")), t), t)
    return op.gather_elements(x, op.broadcast_to(index, _shape(x)), axis=time_axis)


def tensor_scatter(node, xs):
    """``TensorScatter`` (opset 24): ``update`` written into ``past_cache`` along ``axis`` from each batch element's
    ``write_indices[b]`` (0 if left out; ``mode="circular"`` wraps around the cache's length)."""
    cache, update = xs[:2]
    write = _given(xs, 2)
    rank, mode = ndim_of(cache), node.attrs.get("mode", "linear")
    axis = _axis(node, node.attrs.get("axis", -2), rank)
    if mode not in ("linear", "circular"):
        raise node.fail(f"mode={mode!r}; expected 'linear' or 'circular'")
    if axis == 0 or any(a != b for i, (a, b) in enumerate(zip(_shape(cache), _shape(update))) if i != axis) or \
            _shape(update)[axis] > _shape(cache)[axis]:
        raise node.fail(f"past_cache {_shape(cache)}, update {_shape(update)}, axis {axis}: expected shapes that "
                        "differ only along axis (not the batch axis 0), the update no longer than the cache")
    length, steps = _shape(cache)[axis], _shape(update)[axis]
    position = const(np.arange(steps, dtype=np.int64).reshape((1,) * axis + (steps,) + (1,) * (rank - axis - 1)),
                     "int64")
    if write is not None:
        position = op.add(position, op.reshape(op.astype(write, "int64"), (-1,) + (1,) * (rank - 1)))
    if mode == "circular":
        position = op.floor_mod(position, const(length, "int64"))
    return op.scatter_elements(cache, op.broadcast_to(position, _shape(update)), update, axis=axis)


def cum_prod(node, xs):
    """``CumProd`` (opset 26) along ``axis``: a Hillis-Steele scan, ``log2(n)`` steps each multiplying by the
    product ``2**s`` places before (ones past the start); ``exclusive`` shifts it by one, ``reverse`` runs it on
    the flipped axis."""
    x = xs[0]
    axis = _axis(node, int(np.ravel(_value(node, xs[1], "the axis"))[0]), ndim_of(x))
    n, rank = _shape(x)[axis], ndim_of(x)
    reverse = bool(node.attrs.get("reverse", 0))
    y = op.flip(x, axis=axis) if reverse else x

    def shifted(t: Expr, by: int) -> Expr:  # t moved ``by`` places along the axis, ones coming in
        width = [0] * (2 * rank)
        width[2 * axis] = by
        return op.strided_slice(op.nn.pad(t, pad_width=width, pad_value=1.0), axes=[axis], begin=[0], end=[n])

    if node.attrs.get("exclusive", 0) and n:
        y = shifted(y, 1)
    step = 1
    while step < n:
        y = op.multiply(y, shifted(y, step))
        step *= 2
    return op.flip(y, axis=axis) if reverse else y


# -- constants ---------------------------------------------------------------------------------------------------------

def eye_like(node, xs):
    """``EyeLike``: ones on diagonal ``k`` of a 2-D tensor of the input's shape, of ``dtype`` (else the input's)."""
    shape = _shape(xs[0])
    if len(shape) != 2:
        raise node.fail(f"input {shape}: expected a 2-D tensor")
    dtype = _np_dtype(node, node.attrs["dtype"]) if "dtype" in node.attrs else dtype_of(xs[0])
    return const(np.eye(*shape, k=int(node.attrs.get("k", 0)), dtype=dtype), dtype)


def _window(formula):
    """``HannWindow``/``HammingWindow``/``BlackmanWindow(size)``: the window over ``n`` in ``[0, size)`` with
    ``N = size`` (``periodic``, the default) or ``size - 1``, of ``output_datatype`` (float32 by default)."""
    def convert(node, xs):
        size = int(np.ravel(_value(node, xs[0], "size"))[0])
        if size < 0:
            raise node.fail(f"size {size}; expected a non-negative size")
        dtype = _np_dtype(node, node.attrs.get("output_datatype", 1))
        n, span = np.arange(size, dtype=np.float64), size if node.attrs.get("periodic", 1) else size - 1
        return const(formula(n, span).astype(dtype), dtype)
    return convert


hann_window = _window(lambda n, span: np.sin(np.pi * n / span) ** 2)
hamming_window = _window(lambda n, span: 25 / 46 - (1 - 25 / 46) * np.cos(2 * np.pi * n / span))
blackman_window = _window(lambda n, span: 0.42 - 0.5 * np.cos(2 * np.pi * n / span)
                          + 0.08 * np.cos(4 * np.pi * n / span))


# -- DFT, AffineGrid, RotaryEmbedding ------------------------------------------------------------------------------

def dft(node, xs):
    """``DFT`` along ``axis`` (an attribute until opset 19, the third input since 20): the signal's last axis holds
    the real part (size 1) or the real and imaginary parts (size 2); the transform is two matmuls by the cosine and
    sine matrices, in float64. ``inverse`` divides by the length;
    ``onesided`` keeps the ``n // 2 + 1`` first frequencies, or (inverse) reads them as a real signal's
    spectrum, of length ``dft_length`` (``2 * (m - 1)`` by default)."""
    x = xs[0]
    rank = ndim_of(x)
    axis = node.attrs.get("axis", 1 if node.opset < 20 else -2)  # (an input since opset 20, of another default)
    if _given(xs, 2) is not None:
        axis = int(np.ravel(_value(node, xs[2], "axis"))[0])
    axis = _axis(node, axis, rank)
    inverse, onesided = bool(node.attrs.get("inverse", 0)), bool(node.attrs.get("onesided", 0))
    parts = _shape(x)[-1]
    if parts not in (1, 2) or axis == rank - 1:
        raise node.fail(f"input {_shape(x)}, axis {axis}: expected a last axis of 1 (real) or 2 (real, imaginary) "
                        "values, and the transformed axis another")
    m = _shape(x)[axis]
    length = int(np.ravel(_value(node, xs[1], "dft_length"))[0]) if _given(xs, 1) is not None else \
        (2 * (m - 1) if inverse and onesided else m)
    dtype, wide = dtype_of(x), "float64"  # (as ONNX's reference: a float32 sum of ~n terms was 1e-6 off zero)
    signal = op.astype(x, wide) if wide != dtype else x
    real = op.squeeze(op.strided_slice(signal, axes=[rank - 1], begin=[0], end=[1]), axis=[rank - 1])
    imag = op.squeeze(op.strided_slice(signal, axes=[rank - 1], begin=[1], end=[2]), axis=[rank - 1]) \
        if parts == 2 else None
    real, imag = (None if t is None else op.permute_dims(t, axes=_last(rank - 1, axis)) for t in (real, imag))
    if inverse and onesided:  # a real signal's spectrum: the conjugate-symmetric rest implied
        k = np.arange(m)
        weight = np.where((k == 0) | ((length % 2 == 0) & (k == length // 2)), 1.0, 2.0)[:, None]
        n = np.arange(length)[None, :]
        angle = 2 * np.pi * k[:, None] * n / length
        cos, sin = weight * np.cos(angle) / length, -weight * np.sin(angle) / length
        out_real = _matmul(real, cos, wide)
        if imag is not None:
            out_real = op.add(out_real, _matmul(imag, sin, wide))
        result = [out_real]
    else:
        count = length // 2 + 1 if onesided else length
        k, n = np.arange(count)[None, :], np.arange(min(m, length))[:, None]
        angle = 2 * np.pi * n * k / length
        sign = 1.0 if inverse else -1.0
        cos, sin = np.cos(angle), sign * np.sin(angle)
        if inverse:
            cos, sin = cos / length, sin / length
        if m > length:  # the signal cut to the length
            real, imag = (None if t is None else op.strided_slice(t, axes=[rank - 2], begin=[0], end=[length])
                          for t in (real, imag))
        out_real, out_imag = _matmul(real, cos, wide), _matmul(real, sin, wide)
        if imag is not None:
            out_real = op.subtract(out_real, _matmul(imag, sin, wide))
            out_imag = op.add(out_imag, _matmul(imag, cos, wide))
        result = [out_real, out_imag]
    back = _last(rank - 1, axis)
    back = [back.index(i) for i in range(rank - 1)]
    y = op.concat([op.expand_dims(op.permute_dims(t, axes=back), axis=rank - 1) for t in result], axis=rank - 1)
    return op.astype(y, dtype) if wide != dtype else y


def _last(rank: int, axis: int) -> list[int]:
    """The permutation that moves ``axis`` last."""
    return [i for i in range(rank) if i != axis] + [axis]


def _matmul(x: Expr, matrix: np.ndarray, dtype: str) -> Expr:
    return op.matmul(x, const(matrix.astype(dtype), dtype))


def affine_grid(node, xs):
    """``AffineGrid(theta, size)``: the sampling grid ``(N, H, W, 2)`` (``(N, D, H, W, 3)``) of the affine maps
    ``theta`` ``(N, 2, 3)`` (``(N, 3, 4)``) applied to the normalized pixel centres in ``[-1, 1]`` (the corner
    pixels' centres at -1 and 1 with ``align_corners``), ``x`` first."""
    theta = xs[0]
    size = [int(v) for v in np.ravel(_value(node, xs[1], "size"))]
    spatial = size[2:]
    dims = len(spatial)
    if dims not in (2, 3) or _shape(theta) != (size[0], dims, dims + 1):
        raise node.fail(f"theta {_shape(theta)}, size {size}: expected size (N, C, H, W) with theta (N, 2, 3), or "
                        "(N, C, D, H, W) with theta (N, 3, 4)")
    align = bool(node.attrs.get("align_corners", 0))
    axes = [np.linspace(-1, 1, s) if align else (np.arange(s) * 2 + 1) / s - 1 for s in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # (D,) H, W each
    base = np.stack(list(mesh)[::-1] + [np.ones(spatial)], axis=-1).reshape(-1, dims + 1)  # x, y(, z), 1
    dtype = dtype_of(theta)
    points = op.matmul(const(base.astype(dtype), dtype), op.permute_dims(theta, axes=[0, 2, 1]))
    return op.reshape(points, (size[0], *spatial, dims))


def rotary_embedding(node, xs):
    """``RotaryEmbedding`` (opset 23) of ``X`` ``(batch, heads, seq, head)`` or ``(batch, seq, heads * head)``
    (``num_heads`` given): the first ``rotary_embedding_dim`` (all by default) of each head rotated by the cached
    ``cos``/``sin`` (picked by ``position_ids`` where given, else ``(batch, seq, dim / 2)`` already): its halves
    (``interleaved``: even and odd elements) ``x1, x2`` become ``x1 cos - x2 sin, x1 sin + x2 cos``."""
    x, cos, sin = xs[:3]
    positions = _given(xs, 3)
    shape, rank = _shape(x), ndim_of(x)
    if rank == 4:
        x = op.permute_dims(x, axes=[0, 2, 1, 3])
    elif rank == 3:
        heads = node.attrs.get("num_heads")
        if not heads or shape[2] % heads:
            raise node.fail(f"a 3-D input {shape} needs num_heads that divides its hidden size, got {heads}")
        x = op.reshape(x, (shape[0], shape[1], heads, shape[2] // heads))
    else:
        raise node.fail(f"input {shape}: expected (batch, heads, seq, head) or (batch, seq, hidden)")
    head = _shape(x)[3]
    dim = int(node.attrs.get("rotary_embedding_dim", 0)) or head
    if dim % 2 or dim > head:
        raise node.fail(f"rotary_embedding_dim={dim}: expected an even number up to the head size {head}")
    if positions is not None:
        cos, sin = (op.take(t, op.astype(positions, "int64"), axis=0) for t in (cos, sin))
    if _shape(cos)[-1] != dim // 2 or _shape(sin)[-1] != dim // 2:
        raise node.fail(f"cos {_shape(cos)} and sin {_shape(sin)} caches: expected {dim // 2} values (half the "
                        "rotated dims) in their last axis")
    cos, sin = (op.expand_dims(t, axis=2) for t in (cos, sin))  # (batch, seq, 1, dim / 2)
    rotated = op.strided_slice(x, axes=[3], begin=[0], end=[dim]) if dim < head else x
    if node.attrs.get("interleaved", 0):
        pairs = op.reshape(rotated, _shape(rotated)[:3] + (dim // 2, 2))
        x1, x2 = (op.squeeze(op.strided_slice(pairs, axes=[4], begin=[i], end=[i + 1]), axis=[4]) for i in (0, 1))
    else:
        x1, x2 = (op.strided_slice(rotated, axes=[3], begin=[i * dim // 2], end=[(i + 1) * dim // 2]) for i in (0, 1))
    real = op.subtract(op.multiply(cos, x1), op.multiply(sin, x2))
    imag = op.add(op.multiply(sin, x1), op.multiply(cos, x2))
    if node.attrs.get("interleaved", 0):
        out = op.reshape(op.concat([op.expand_dims(real, axis=4), op.expand_dims(imag, axis=4)], axis=4),
                         _shape(rotated))
    else:
        out = op.concat([real, imag], axis=3)
    if dim < head:
        out = op.concat([out, op.strided_slice(x, axes=[3], begin=[dim], end=[head])], axis=3)
    return op.permute_dims(out, axes=[0, 2, 1, 3]) if rank == 4 else op.reshape(out, shape)


# -- GridSample ------------------------------------------------------------------------------------------------------

def grid_sample(node, xs):
    """``GridSample(X, grid)``: ``X`` ``(N, C, D1, ..., Dk)`` read at the normalized positions of ``grid``
    ``(N, O1, ..., Ok, k)`` (its last axis in reverse order of X's: x, y, z), as ONNX's specification (PyTorch's
    ``grid_sample``): each coordinate mapped to pixels (the corner pixels' centres at -1 and 1 with
    ``align_corners``, else their outer edges), one outside those borders moved inside by ``padding_mode``
    (``border`` clamps it to the edge pixels, ``reflection`` reflects it; ``zeros`` reads zeros outside), then
    ``nearest`` (rounded half to even), ``linear`` (2 pixels an axis) or ``cubic`` (4 an axis, Keys' kernel with
    ``a = -0.75``) interpolation. The pixels are read with one ``gather_elements`` per combination of taps from X
    flattened over its spatial axes."""
    x, grid = xs
    shape, gshape = _shape(x), _shape(grid)
    dims, k = shape[2:], len(shape) - 2
    mode, padding = node.attrs.get("mode", "linear"), node.attrs.get("padding_mode", "zeros")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)  # (opset 16's names)
    align = bool(node.attrs.get("align_corners", 0))
    if k < 1 or len(gshape) != k + 2 or gshape[0] != shape[0] or gshape[-1] != k:
        raise node.fail(f"X {shape} and grid {gshape}: expected grid (N, O1, ..., Ok, {k}) for X (N, C, D1..Dk)")
    if mode not in ("nearest", "linear", "cubic") or padding not in ("zeros", "border", "reflection"):
        raise node.fail(f"mode={mode!r}, padding_mode={padding!r}: expected nearest, linear or cubic and zeros, "
                        "border or reflection")
    dtype = dtype_of(x)
    wide = "float64" if dtype == "float64" else "float32"
    grid = op.astype(grid, wide) if dtype_of(grid) != wide else grid
    out = gshape[1:-1]
    taps = []  # per spatial axis: [(index, weight, valid)] for each tap
    for axis, length in enumerate(dims):
        normal = op.reshape(op.strided_slice(grid, axes=[k + 1], begin=[k - 1 - axis], end=[k - axis]),
                            (gshape[0],) + out)
        c = _denormalized(normal, length, align, wide)
        low, high = (0.0, length - 1.0) if align else (-0.5, length - 0.5)
        if mode == "nearest":
            c = op.round(c)
        if padding == "border":  # (outside the borders only: one within half a pixel stays; cubic taps read it)
            outside = op.logical_or(op.less(c, const(low, wide)), op.greater(c, const(high, wide)))
            c = op.where(outside, op.clip(c, min=0.0, max=float(length - 1)), c)
        elif padding == "reflection":
            c = _reflect(c, low, high, wide)
        if mode == "nearest":
            taps.append([_grid_tap(op.trunc(c), op.ones_like(c), length, padding, low, high, wide)])
            continue
        first = op.floor(c)
        frac = op.subtract(c, first)
        offsets = (0, 1) if mode == "linear" else (-1, 0, 1, 2)
        weights = [op.subtract(const(1.0, wide), frac), frac] if mode == "linear" else _keys(frac, wide)
        taps.append([_grid_tap(op.add(first, const(float(o), wide)), w, length, padding, low, high, wide)
                     for o, w in zip(offsets, weights)])
    flat = op.reshape(x, shape[:2] + (int(np.prod(dims)),))
    count = int(np.prod(out))
    total = None
    for combination in np.ndindex(*[len(t) for t in taps]):
        index, weight = None, None
        for axis, j in enumerate(combination):
            i, w, _ = taps[axis][j]
            stride = int(np.prod(dims[axis + 1:]))
            term = i if stride == 1 else op.multiply(i, const(stride, "int64"))
            index = term if index is None else op.add(index, term)
            weight = w if weight is None else op.multiply(weight, w)
        index = op.broadcast_to(op.reshape(index, (shape[0], 1, count)), (shape[0], shape[1], count))
        picked = op.gather_elements(flat, index, axis=2)
        picked = op.astype(picked, wide) if dtype != wide else picked
        term = op.multiply(picked, op.reshape(weight, (shape[0], 1, count)))
        total = term if total is None else op.add(total, term)
    y = op.reshape(total, shape[:2] + out)
    return op.astype(y, dtype) if dtype != wide else y


def _denormalized(n: Expr, length: int, align: bool, dtype: str) -> Expr:
    """A normalized coordinate in ``[-1, 1]`` in pixels: ``(n + 1) / 2 * (L - 1)`` with ``align_corners``, else
    ``((n + 1) * L - 1) / 2``."""
    shifted = op.add(n, const(1.0, dtype))
    if align:
        return op.multiply(shifted, const((length - 1) / 2.0, dtype))
    return op.divide(op.subtract(op.multiply(shifted, const(float(length), dtype)), const(1.0, dtype)),
                     const(2.0, dtype))


def _reflect(c: Expr, low: float, high: float, dtype: str) -> Expr:
    """``c`` reflected at ``low`` and ``high`` until it is between them."""
    span = high - low
    if span <= 0:
        return op.clip(c, min=low, max=high)

    def folded(distance: Expr, near: float, far: float) -> Expr:
        turns = op.floor(op.divide(distance, const(span, dtype)))
        rest = op.subtract(distance, op.multiply(turns, const(span, dtype)))
        even = op.equal(op.subtract(turns, op.multiply(op.floor(op.divide(turns, const(2.0, dtype))),
                                                       const(2.0, dtype))), const(0.0, dtype))
        toward = const(1.0 if far > near else -1.0, dtype)
        return op.where(even, op.add(const(near, dtype), op.multiply(rest, toward)),
                        op.subtract(const(far, dtype), op.multiply(rest, toward)))

    below = folded(op.subtract(const(low, dtype), c), low, high)
    above = folded(op.subtract(c, const(high, dtype)), high, low)
    return op.where(op.less(c, const(low, dtype)), below, op.where(op.greater(c, const(high, dtype)), above, c))


def _keys(t: Expr, dtype: str) -> list[Expr]:
    """Keys' cubic weights (``a = -0.75``) of the pixels at ``-1, 0, 1, 2`` from ``floor(c)``, ``t = c - floor(c)``."""
    a = -0.75
    one = const(1.0, dtype)

    def near(d: Expr) -> Expr:  # |d| <= 1
        return op.add(op.multiply(op.multiply(op.subtract(op.multiply(d, const(a + 2, dtype)), const(a + 3, dtype)),
                                              d), d), one)

    def far(d: Expr) -> Expr:  # 1 < |d| < 2
        inner = op.add(op.multiply(op.subtract(op.multiply(d, const(a, dtype)), const(5 * a, dtype)), d),
                       const(8 * a, dtype))
        return op.subtract(op.multiply(inner, d), const(4 * a, dtype))

    return [far(op.add(t, one)), near(t), near(op.subtract(one, t)), far(op.subtract(const(2.0, dtype), t))]


def _grid_tap(position: Expr, weight: Expr, length: int, padding: str, low: float, high: float, dtype: str):
    """A tap at a whole ``position`` along an axis of ``length``: its index in ``[0, length)``, its weight (0 where
    ``zeros`` padding reads outside) and ``padding``'s reading of a position outside (``border`` clamps,
    ``reflection`` reflects)."""
    if padding == "reflection":
        position = op.trunc(_reflect(position, low, high, dtype))
    inside = op.logical_and(op.greater_equal(position, const(0.0, dtype)),
                            op.less_equal(position, const(length - 1.0, dtype)))
    index = op.astype(op.clip(position, min=0.0, max=float(length - 1)), "int64")
    if padding == "zeros":
        weight = op.where(inside, weight, const(0.0, dtype))
    return index, weight, inside


# -- recurrent-model blocks (opset 27) ------------------------------------------------------------------------------

def causal_conv_with_state(node, xs):
    """``CausalConvWithState(input, weight, bias, past_state)``: a depthwise 1-D convolution of ``input``
    ``(N, C, L)`` after ``past_state`` (``(N, C, k - 1)``, zeros if left out), without padding, so each output sees
    only its own and earlier positions; plus ``bias``; SiLU (``silu``/``swish``) in float32 where ``activation``
    says. ``present_state`` is the last ``k - 1`` positions of the state and input."""
    x, w = xs[:2]
    bias, past = _given(xs, 2), _given(xs, 3)
    activation = node.attrs.get("activation", "none")
    if activation not in ("none", "silu", "swish"):
        raise node.fail(f"activation={activation!r}; expected 'none', 'silu' or 'swish'")
    if ndim_of(x) != 3 or ndim_of(w) != 3 or _shape(w)[:2] != (_shape(x)[1], 1):
        raise node.fail(f"input {_shape(x)} and weight {_shape(w)}: expected (N, C, L) and (C, 1, k)")
    n, channels, _ = _shape(x)
    k = _shape(w)[2]
    if past is None:
        past = const(np.zeros((n, channels, k - 1), dtype_of(x)), dtype_of(x))
    elif _shape(past) != (n, channels, k - 1):
        raise node.fail(f"past_state {_shape(past)}: expected {(n, channels, k - 1)}")
    padded = op.concat([past, x], axis=2) if k > 1 else x
    y = op.nn.conv1d(padded, w, groups=channels)
    if bias is not None:
        y = op.add(y, op.reshape(bias, (1, channels, 1)))
    if activation != "none":
        y = in_float32(y, lambda t: _swish_of(t, 1.0))
    total = _shape(padded)[2]
    present = op.strided_slice(padded, axes=[2], begin=[total - (k - 1)], end=[total])
    return [y, present][:len(node.proto.output)]


def linear_attention(node, xs):
    """``LinearAttention(query, key, value, past_state, decay, beta)`` (opset 27), its recurrence unrolled over the
    (static) sequence in float32: per step ``t`` the state ``S`` ``(N, H_kv, d_k, d_v)`` is decayed by
    ``exp(decay_t)`` (``gated``, ``gated_delta``), the value corrected to ``beta_t * (v_t - S^T k_t)`` (``delta``,
    ``gated_delta``), then ``S += k_t v_t^T``; the output is ``scale * q_t S`` (each key/value head's state read by
    ``q_num_heads / kv_num_heads`` query heads in a row). ``present_state`` is the last state, of ``past_state``'s
    type (``query``'s without one)."""
    query, key, value = xs[:3]
    past, decay, beta = _given(xs, 3), _given(xs, 4), _given(xs, 5)
    a = node.attrs
    rule = a.get("update_rule", "gated_delta")
    q_heads, kv_heads = a.get("q_num_heads"), a.get("kv_num_heads")
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise node.fail(f"update_rule={rule!r}; expected 'linear', 'gated', 'delta' or 'gated_delta'")
    if not q_heads or not kv_heads or q_heads % kv_heads:
        raise node.fail(f"q_num_heads={q_heads}, kv_num_heads={kv_heads}: expected positive head counts, the query's "
                        "a multiple of the key's")
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gated != (decay is not None) or delta != (beta is not None):
        raise node.fail(f"update_rule {rule!r} {'needs' if gated else 'takes no'} decay and "
                        f"{'needs' if delta else 'takes no'} beta")
    if not ndim_of(query) == ndim_of(key) == ndim_of(value) == 3:
        raise node.fail(f"query {_shape(query)}, key {_shape(key)}, value {_shape(value)}: expected (N, T, H * D)")
    n, steps, _ = _shape(query)
    d_k, d_v = _shape(query)[2] // q_heads, _shape(value)[2] // kv_heads
    group = q_heads // kv_heads

    def heads(t: Expr, count: int) -> Expr:  # (N, T, H * D) -> (N, H, T, D) in float32
        t = op.astype(t, "float32") if dtype_of(t) != "float32" else t
        return op.permute_dims(op.reshape(t, (n, steps, count, -1)), axes=[0, 2, 1, 3])

    q, k, v = heads(query, q_heads), heads(key, kv_heads), heads(value, kv_heads)
    g = None if decay is None else heads(decay, kv_heads)  # (N, H_kv, T, 1 or d_k)
    b = None if beta is None else heads(beta, _shape(beta)[2])  # (N, H_kv or 1, T, 1)
    if past is not None:
        if _shape(past) != (n, kv_heads, d_k, d_v):
            raise node.fail(f"past_state {_shape(past)}: expected {(n, kv_heads, d_k, d_v)}")
        state = op.astype(past, "float32") if dtype_of(past) != "float32" else past
    else:
        state = const(np.zeros((n, kv_heads, d_k, d_v), np.float32), "float32")
    scale = float(a.get("scale", 0.0)) or 1.0 / math.sqrt(d_k)
    at = lambda t, i: op.strided_slice(t, axes=[2], begin=[i], end=[i + 1])  # noqa: E731 - (N, H, 1, D)
    outputs = []
    for i in range(steps):
        k_t, v_t = at(k, i), at(v, i)  # (N, H_kv, 1, d)
        if gated:  # decay per head (N, H, 1, 1) or per key dim (N, H, 1, d_k): along the state's d_k axis
            state = op.multiply(state, op.permute_dims(op.exp(at(g, i)), axes=[0, 1, 3, 2]))
        if delta:
            retrieved = op.matmul(k_t, state)  # (N, H_kv, 1, d_v)
            v_t = op.multiply(at(b, i), op.subtract(v_t, retrieved))
        state = op.add(state, op.matmul(op.permute_dims(k_t, axes=[0, 1, 3, 2]), v_t))
        read = state if group == 1 else op.repeat(state, repeats=group, axis=1)
        outputs.append(op.multiply(op.matmul(at(q, i), read), const(scale, "float32")))  # (N, H_q, 1, d_v)
    y = op.reshape(op.permute_dims(op.concat(outputs, axis=2), axes=[0, 2, 1, 3]), (n, steps, q_heads * d_v))
    dtype = dtype_of(query)
    y = op.astype(y, dtype) if dtype != "float32" else y
    state_dtype = dtype_of(past) if past is not None else dtype
    present = op.astype(state, state_dtype) if state_dtype != "float32" else state
    return [y, present][:len(node.proto.output)]


def max_pool_indices(x: Expr, out: tuple, kernel: tuple, strides: tuple, padding: tuple, dilation: tuple,
                     column_major: bool) -> Expr:
    """MaxPool's ``Indices`` of a 2-D pool whose output is ``out`` ``(N, C, OH, OW)``: each output's flat position
    in ``x`` (``((n * C + c) * H + h) * W + w``, or ``... + h + w * H`` with ``storage_order=1``) of the first
    largest element of its window (or its last NaN, as PyTorch's), in row-major window order, as ONNX's reference picks it. One strided slice of
    ``x`` (padded with the dtype's lowest value) per window position, kept where strictly larger than the best so
    far (or where the best is not set yet and the position is inside ``x``)."""
    n, c, h, w = _shape(x)
    oh, ow = out[2:]
    dtype = dtype_of(x)
    lowest = -np.inf if dtype[0] in "fb" else np.iinfo(dtype).min
    top, left = padding[0], padding[1]
    bottom = max(0, (oh - 1) * strides[0] + (kernel[0] - 1) * dilation[0] + 1 - top - h)
    right = max(0, (ow - 1) * strides[1] + (kernel[1] - 1) * dilation[1] + 1 - left - w)
    padded = op.nn.pad(x, pad_width=[0, 0, 0, 0, top, bottom, left, right], pad_value=float(lowest))
    channel = const((np.arange(n * c, dtype=np.int64) * h * w).reshape(n, c, 1, 1), "int64")
    best, index = None, None
    for a, b in itertools.product(range(kernel[0]), range(kernel[1])):
        rows = np.arange(oh) * strides[0] - top + a * dilation[0]
        cols = np.arange(ow) * strides[1] - left + b * dilation[1]
        inside = ((rows >= 0) & (rows < h))[:, None] & ((cols >= 0) & (cols < w))[None, :]
        flat = rows[:, None] + cols[None, :] * h if column_major else rows[:, None] * w + cols[None, :]
        value = op.strided_slice(padded, axes=[2, 3], begin=[a * dilation[0], b * dilation[1]],
                                 end=[a * dilation[0] + (oh - 1) * strides[0] + 1,
                                      b * dilation[1] + (ow - 1) * strides[1] + 1], strides=list(strides))
        position = op.add(channel, const(flat.astype(np.int64), "int64"))
        if best is None:
            best, index, unset = value, op.where(const(inside, "bool"), position, const(-1, "int64")), None
            continue
        unset = op.equal(index, const(-1, "int64"))
        better = op.logical_or(op.greater(value, best), op.logical_and(unset, const(inside, "bool")))
        if dtype[0] in "fb":  # a NaN is the maximum, as the pooled value (NaN) says; the last one, as PyTorch's
            better = op.logical_or(better, op.isnan(value))
        best, index = op.where(better, value, best), op.where(better, position, index)
    return index


# -- Det, MaxUnpool, Col2Im ------------------------------------------------------------------------------------------

def det(node, xs):
    """``Det`` of ``(..., M, M)`` matrices: Leibniz's sum over the ``M!`` permutations of signed products of
    elements (static ``M`` up to 4; larger matrices are refused rather than composed of 120 and more products)."""
    x = xs[0]
    shape = _shape(x)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise node.fail(f"input {shape}: expected square matrices (..., M, M)")
    m = shape[-1]
    if not 1 <= m <= 4:
        raise node.fail(f"{m}x{m} matrices: only up to 4x4 are supported")
    rows = len(shape) - 2
    element = lambda i, j: op.reshape(op.strided_slice(x, axes=[rows, rows + 1], begin=[i, j], end=[i + 1, j + 1]),
                                      shape[:-2])  # noqa: E731
    total = None
    for perm in itertools.permutations(range(m)):  # (the first is the identity: an even permutation)
        product = functools.reduce(op.multiply, [element(i, j) for i, j in enumerate(perm)])
        odd = sum(perm[i] > perm[j] for i in range(m) for j in range(i + 1, m)) % 2
        total = product if total is None else (op.subtract if odd else op.add)(total, product)
    return total


def max_unpool(node, xs):
    """``MaxUnpool(X, I, output_shape)``: zeros of the pooled input's shape (``(in - 1) * stride - pads +
    kernel``), each ``X`` written at its flat index ``I`` (as MaxPool's Indices give it), then placed at the start
    of an ``output_shape`` of zeros where one is given."""
    x, indices = xs[:2]
    kernel = node.attrs.get("kernel_shape")
    n = ndim_of(x) - 2
    strides, pads = node.attrs.get("strides", [1] * n), node.attrs.get("pads", [0] * (2 * n))
    shape = _shape(x)
    inferred = shape[:2] + tuple((shape[2 + d] - 1) * strides[d] - pads[d] - pads[n + d] + kernel[d]
                                 for d in range(n))
    total = int(np.prod(inferred))
    flat = op.scatter_elements(const(np.zeros(total, dtype_of(x)), dtype_of(x)),
                               op.reshape(op.astype(indices, "int64"), (-1,)), op.reshape(x, (-1,)), axis=0)
    y = op.reshape(flat, inferred)
    if _given(xs, 2) is None:
        return y
    out = [int(v) for v in np.ravel(_value(node, xs[2], "output_shape"))]
    if len(out) != len(inferred) or any(o < i for o, i in zip(out, inferred)):
        raise node.fail(f"output_shape {out}: expected {len(inferred)} sizes, each at least {list(inferred)}")
    width = [w for i, o in zip(inferred, out) for w in (0, o - i)]
    return op.nn.pad(y, pad_width=width, pad_value=0.0) if any(width) else y


def col2im(node, xs):
    """``Col2Im(input, image_shape, block_shape)`` (2-D and 3-D images): each column of ``input`` ``(N, C * K, L)``
    (``K`` the block's size) is a block, added back at its place in the image (PyTorch's ``fold``): a grouped
    transposed convolution of the blocks laid out on their grid (``(bh, bw)`` or ``(bd, bh, bw)``) with one-hot
    kernels (one per position in the block), with the strides, dilations and pads (cropped) of the node."""
    x = xs[0]
    image = [int(v) for v in np.ravel(_value(node, xs[1], "image_shape"))]
    block = [int(v) for v in np.ravel(_value(node, xs[2], "block_shape"))]
    k = len(image)
    if k not in (2, 3) or len(block) != k or ndim_of(x) != 3:
        raise node.fail(f"image_shape {image}, block_shape {block}, input {_shape(x)}: only 2-D and 3-D images are "
                        "supported (input (N, C*K, L), image_shape and block_shape of 2 or 3 sizes each)")
    strides = node.attrs.get("strides", [1] * k)
    dilations, pads = node.attrs.get("dilations", [1] * k), node.attrs.get("pads", [0] * (2 * k))
    n, rows, count = _shape(x)
    size = int(np.prod(block))
    grid = [(image[i] + pads[i] + pads[i + k] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(k)]
    if rows % size or int(np.prod(grid)) != count:
        raise node.fail(f"input {_shape(x)} with image_shape {image}, block_shape {block}: expected (N, C * {size}, "
                        f"{int(np.prod(grid))})")
    channels = rows // size
    kernels = np.zeros((rows, 1) + tuple(block), dtype_of(x))
    for c in range(channels):
        for j in range(size):
            kernels[(c * size + j, 0) + np.unravel_index(j, block)] = 1
    blocks = op.reshape(x, (n, rows) + tuple(grid))
    # The rows or columns past the last block (fewer than a stride): zeros at the end, as output padding.
    extra = [image[i] + pads[i] + pads[i + k] - (grid[i] - 1) * strides[i] - dilations[i] * (block[i] - 1) - 1
             for i in range(k)]
    conv = op.nn.conv3d_transpose if k == 3 else op.nn.conv2d_transpose
    return conv(blocks, const(kernels, dtype_of(x)), strides=tuple(strides), padding=tuple(pads),
                output_padding=tuple(extra), dilation=tuple(dilations), groups=channels)


# -- quantization --------------------------------------------------------------------------------------------------

#: The integer types ONNX quantizes to that Relax holds, and their ranges.
_QUANTIZED = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767)}


def _per_axis(node, value: Expr, shape: tuple, axis: int, block: int) -> Expr:
    """A scale or zero point laid out to broadcast against the input: a scalar (or one value) as it is, a 1-D one
    along ``axis``, a blocked one (``block_size``) repeated ``block`` times along ``axis`` (and cut to its size)."""
    vshape = _shape(value)
    if int(np.prod(vshape)) == 1:
        return op.reshape(value, ()) if vshape else value
    if not block:
        if len(vshape) != 1 or vshape[0] != shape[axis]:
            raise node.fail(f"a scale or zero point {vshape} for input {shape}: expected one value, or one per "
                            f"element of axis {axis} ({shape[axis]})")
        return op.reshape(value, (1,) * axis + (-1,) + (1,) * (len(shape) - axis - 1))
    spread = op.repeat(value, repeats=block, axis=axis)
    if _shape(spread)[axis] != shape[axis]:
        spread = op.strided_slice(spread, axes=[axis], begin=[0], end=[shape[axis]])
    if _shape(spread) != shape:
        raise node.fail(f"a blocked scale or zero point {vshape} (block_size {block}) does not fit input {shape}")
    return spread


def _quantization_axis(node, x: Expr) -> tuple[int, int]:
    rank = max(ndim_of(x), 1)
    return _axis(node, node.attrs.get("axis", 1) if ndim_of(x) > 1 else 0, rank), int(node.attrs.get("block_size", 0))


def quantize_linear(node, xs):
    """``QuantizeLinear``: ``saturate(round_half_even(x / scale) + zero_point)`` in the zero point's type
    (``output_dtype``, else uint8, without one), per tensor, per ``axis`` or per block; the division in
    ``precision``'s type where given."""
    x, scale = xs[:2]
    zero = _given(xs, 2)
    dtype = dtype_of(zero) if zero is not None else \
        (_np_dtype(node, node.attrs["output_dtype"]) if node.attrs.get("output_dtype") else "uint8")
    if dtype not in _QUANTIZED:
        raise node.fail(f"quantizing to {dtype}: expected one of {', '.join(_QUANTIZED)} (narrower and float8 "
                        "types have no Relax tensor)")
    shape = _shape(x)
    axis, block = _quantization_axis(node, x)
    scale = _per_axis(node, scale, shape, axis, block)
    if node.attrs.get("precision"):  # (opset 25: the division in that type)
        precision = _np_dtype(node, node.attrs["precision"])
        x, scale = op.astype(x, precision), op.astype(scale, precision)
    scaled = op.round(op.divide(x, scale))
    wide = dtype_of(scaled)
    if zero is not None:
        scaled = op.add(scaled, op.astype(_per_axis(node, zero, shape, axis, block), wide))
    low, high = _QUANTIZED[dtype]
    return op.astype(op.clip(scaled, min=float(low), max=float(high)), dtype)


def dequantize_linear(node, xs):
    """``DequantizeLinear``: ``(x - zero_point) * scale`` in float32, of the scale's type (``output_dtype`` if given),
    per tensor, per ``axis`` or per block."""
    x, scale = xs[:2]
    zero = _given(xs, 2)
    if dtype_of(x) not in _QUANTIZED and dtype_of(x) != "int32":
        raise node.fail(f"dequantizing {dtype_of(x)}: expected one of {', '.join(_QUANTIZED)}, int32")
    shape = _shape(x)
    axis, block = _quantization_axis(node, x)
    dx = op.astype(x, "float32")
    if zero is not None:
        dx = op.subtract(dx, op.astype(_per_axis(node, zero, shape, axis, block), "float32"))
    y = op.multiply(dx, op.astype(_per_axis(node, scale, shape, axis, block), "float32"))
    out = _np_dtype(node, node.attrs["output_dtype"]) if node.attrs.get("output_dtype") else dtype_of(scale)
    return op.astype(y, out) if out != "float32" else y


def qlinear_matmul(node, xs):
    """``QLinearMatMul``: the int32 product of the inputs less their zero points, times ``a_scale * b_scale /
    y_scale`` (in the scales' type) in float64, plus the output zero point, rounded half to even and saturated."""
    a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero = xs
    dtype = dtype_of(y_zero) if y_zero is not None else dtype_of(a)
    if dtype not in _QUANTIZED:
        raise node.fail(f"output of {dtype}: expected one of {', '.join(_QUANTIZED)}")
    operands = []
    for t, zero in ((a, a_zero), (b, b_zero)):
        t = op.astype(t, "int32")
        operands.append(t if zero is None else op.subtract(t, op.astype(op.reshape(zero, ()), "int32")))
    product = op.astype(op.matmul(*operands), "float64")
    factor = op.divide(op.multiply(op.reshape(a_scale, ()), op.reshape(b_scale, ())), op.reshape(y_scale, ()))
    y = op.multiply(product, op.astype(factor, "float64"))
    if y_zero is not None:
        y = op.add(y, op.astype(op.reshape(y_zero, ()), "float64"))
    low, high = _QUANTIZED[dtype]
    return op.astype(op.clip(op.round(y), min=float(low), max=float(high)), dtype)


def dynamic_quantize_linear(node, xs):
    """``DynamicQuantizeLinear``: uint8 ``y``, its scale ``(max(0, max x) - min(0, min x)) / 255`` (1/255 for an
    all-zero range) and zero point ``round(clip(-min(0, min x) / scale, 0, 255))``, from the whole tensor."""
    x = xs[0]
    zero = const(0.0, "float32")
    wide = op.astype(x, "float32") if dtype_of(x) != "float32" else x
    high, low = op.maximum(op.max(wide), zero), op.minimum(op.min(wide), zero)
    span = op.subtract(high, low)
    scale = op.divide(op.where(op.equal(span, zero), const(1.0, "float32"), span), const(255.0, "float32"))
    point = op.round(op.clip(op.subtract(zero, op.divide(low, scale)), min=0.0, max=255.0))
    y = op.clip(op.add(op.round(op.divide(wide, scale)), point), min=0.0, max=255.0)
    return [op.astype(y, "uint8"), op.astype(scale, dtype_of(x)) if dtype_of(x) != "float32" else scale,
            op.astype(point, "uint8")][:len(node.proto.output)]


def _less_zero_point(t: Expr, zero: Optional[Expr], per: tuple) -> Expr:
    """An integer operand as int32 less its zero point: a scalar, or several laid out as ``per`` (one per row of
    MatMulInteger's A, per column of its B, per output channel of ConvInteger's weight)."""
    t = op.astype(t, "int32")
    if zero is None:
        return t
    zero = op.astype(zero, "int32")
    return op.subtract(t, op.reshape(zero, per if int(np.prod(_shape(zero))) > 1 else ()))


def matmul_integer(node, xs):
    """``MatMulInteger``: the int32 product of ``A - a_zero_point`` and ``B - b_zero_point``."""
    return op.matmul(_less_zero_point(xs[0], _given(xs, 2), (-1, 1)), _less_zero_point(xs[1], _given(xs, 3), (-1,)))


def conv_integer(node, xs, conv=None):
    """``ConvInteger``: the int32 convolution of ``x - x_zero_point`` and ``w - w_zero_point``, computed in float64
    (exact while every sum stays below 2**53) as the importer's ``Conv`` of the node's attributes."""
    x = _less_zero_point(xs[0], _given(xs, 2), ())
    w = _less_zero_point(xs[1], _given(xs, 3), (-1,) + (1,) * (ndim_of(xs[1]) - 1))
    return op.astype(conv(node, [op.astype(x, "float64"), op.astype(w, "float64")]), "int32")


def converters(reduce, conv) -> dict:
    """This module's converters by ONNX op name; ``reduce`` is :func:`.onnx._reduce` (axes and ``keepdims``),
    ``conv`` :func:`.onnx._conv`."""
    return {
        "Swish": swish, "SwiGLU": swiglu, "ThresholdedRelu": thresholded_relu, "Shrink": shrink, "Softsign": softsign,
        "ReduceLogSumExp": reduce(log_sum_exp), "ReduceLogSum": reduce(log_sum),
        "ReduceSumSquare": reduce(sum_square), "ReduceProd": reduce(op.prod), "GlobalMaxPool": global_max_pool,
        "MeanVarianceNormalization": mean_variance_normalization, "GroupNormalization": group_normalization,
        "SpaceToDepth": space_to_depth, "CenterCropPad": center_crop_pad, "GatherND": gather_nd,
        "Compress": compress, "ReverseSequence": reverse_sequence, "TensorScatter": tensor_scatter,
        "CumProd": cum_prod, "EyeLike": eye_like, "HannWindow": hann_window, "HammingWindow": hamming_window,
        "BlackmanWindow": blackman_window, "DFT": dft, "AffineGrid": affine_grid,
        "RotaryEmbedding": rotary_embedding, "QuantizeLinear": quantize_linear,
        "DequantizeLinear": dequantize_linear, "QLinearMatMul": qlinear_matmul, "GridSample": grid_sample,
        "CausalConvWithState": causal_conv_with_state, "LinearAttention": linear_attention, "Det": det,
        "MaxUnpool": max_unpool, "Col2Im": col2im, "DynamicQuantizeLinear": dynamic_quantize_linear,
        "MatMulInteger": matmul_integer, "ConvInteger": functools.partial(conv_integer, conv=conv),
    }

