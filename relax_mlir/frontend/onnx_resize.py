"""ONNX's ``Resize`` along one axis at a time (it is separable), for every mode: ``nearest`` (each
``nearest_mode``), ``linear`` and ``cubic`` (``cubic_coeff_a``, ``exclude_outside``, ``antialias``), in every
``coordinate_transformation_mode`` (``tf_crop_and_resize``'s ``roi`` and ``extrapolation_value`` too).

The shapes are static, so which input pixels each output pixel reads, and with which weights, is computed here
with NumPy as ONNX's specification defines it: the output coordinate ``y`` mapped to an input coordinate ``x``,
the ``n`` pixels nearest to ``x`` (the kernel's width; past the border the edge pixel), the kernel's weights at
their distances. The module then has one ``take`` of those pixels per axis, and (linear, cubic) their weighted
sum, in float32 for half floats (float64 for float64 input) and rounded once, as ONNX's reference computes in
float64 and casts once (an integer result rounded half to even and saturated).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .. import op
from ..ir.expr import Expr, const
from .common import dtype_of

#: ONNX's coordinate transformation modes.
COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def source_coordinates(mode: str, in_size: int, out_size: int, scale: float,
                       roi: Optional[tuple[float, float]]) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """Each output pixel's coordinate in the input, and (``tf_crop_and_resize``) whether it falls outside it."""
    y = np.arange(out_size, dtype=np.float64)
    length = scale * in_size  # ONNX's "output_width": the scale times the input, not rounded
    if mode == "align_corners":
        return (np.zeros(out_size) if length == 1 else y * (in_size - 1) / (length - 1)), None
    if mode == "asymmetric":
        return y / scale, None
    if mode == "pytorch_half_pixel":
        return (np.full(out_size, -0.5) if length == 1 else (y + 0.5) / scale - 0.5), None
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5, None
    if mode == "half_pixel_symmetric":  # the crop's centre on the output's centre
        offset = in_size / 2 * (1 - out_size / length)
        return offset + (y + 0.5) / scale - 0.5, None
    start, end = roi  # tf_crop_and_resize: the output spans [start, end] of the input, in its own pixels
    x = np.full(out_size, (end - start) * (in_size - 1) / 2) if length == 1 else \
        y * (end - start) * (in_size - 1) / (length - 1)
    x = x + start * (in_size - 1)
    return x, (x < 0) | (x > in_size - 1)


def _nearest(ratio: float, nearest_mode: str) -> list[float]:
    if ratio == 1:  # x is a pixel: that pixel (the right one of the two)
        return [0.0, 1.0]
    right = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5, "floor": False,
             "ceil": True}[nearest_mode]
    return [float(not right), float(right)]


def _cubic(distances: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic kernel with parameter ``a`` at each distance."""
    d = np.abs(distances)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _kernel(mode: str, ratio: float, scale: float, antialias: bool, a: float, nearest_mode: str) -> np.ndarray:
    """The weights of the ``n`` pixels around ``x``, ``ratio`` being ``x``'s distance past the pixel before it (in
    ``(0, 1]``; the pixels are at ``i - ratio`` for ``i`` from ``1 - n/2`` to ``n/2``). An antialiasing kernel is
    stretched by ``1 / scale`` when downsampling, and normalized."""
    if mode == "nearest":
        return np.array(_nearest(ratio, nearest_mode))
    if not antialias:
        return np.array([1 - ratio, ratio]) if mode == "linear" else _cubic(np.arange(-1, 3) - ratio, a)
    scale = min(scale, 1.0)
    reach = 1 if mode == "linear" else 2
    first = int(np.floor(-reach / scale) + 1)
    distances = (np.arange(first, 2 - first) - ratio) * scale
    weights = np.clip(1 - np.abs(distances), 0, 1) if mode == "linear" else _cubic(distances, a)
    return weights / weights.sum()


def interpolation(mode: str, coordinate_mode: str, in_size: int, out_size: int, scale: float, *,
                  roi: Optional[tuple[float, float]] = None, nearest_mode: str = "round_prefer_floor",
                  cubic_coeff_a: float = -0.75, exclude_outside: bool = False, antialias: bool = False
                  ) -> tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """``(indices, weights, outside)``: the input pixels ``(out_size, n)`` each output pixel reads (clamped to the
    input: past the border, the edge pixel), their weights, and which output pixels fall outside the input
    (``tf_crop_and_resize``, else None)."""
    x, outside = source_coordinates(coordinate_mode, in_size, out_size, scale, roi)
    before = np.floor(x)
    ratios = np.where(x == before, 1.0, x - before)
    weights = np.stack([_kernel(mode, float(r), scale, antialias, cubic_coeff_a, nearest_mode) for r in ratios]) \
        if out_size else np.zeros((0, 2))
    n = weights.shape[1]
    # the n pixels nearest to x, ties to the smaller: from the pixel before x (x itself when it is one) back n/2 - 1
    first = before.astype(np.int64) - n // 2 + np.where(x == before, 0, 1)
    indices = first[:, None] + np.arange(n)[None, :]
    if exclude_outside:  # the weights of pixels past the border dropped, the rest normalized
        weights = np.where((indices < 0) | (indices >= in_size), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    return np.clip(indices, 0, in_size - 1), weights, outside


def resize_axis(x: Expr, axis: int, indices: np.ndarray, weights: np.ndarray, outside: Optional[np.ndarray],
                extrapolation_value: float, nearest: bool) -> Expr:
    """``x`` resized along ``axis``: the pixel of weight 1 (nearest), or the weighted sum of the ``n`` pixels, in
    the computing dtype of :func:`compute_dtype` (the caller casts back); ``outside`` pixels get
    ``extrapolation_value``."""
    shape = tuple(x.struct_info.shape)
    out, n = indices.shape
    rest = (1,) * (len(shape) - axis - 1)
    if nearest:
        chosen = indices[np.arange(out), np.argmax(weights, axis=1)]
        y = op.take(x, const(chosen.astype(np.int64), "int64"), axis=axis)
    else:
        used = np.flatnonzero(np.any(weights != 0, axis=0))  # (taps no output pixel weighs are left out)
        indices, weights, n = indices[:, used], weights[:, used], len(used)
        gathered = op.take(x, const(indices.reshape(-1).astype(np.int64), "int64"), axis=axis)
        gathered = op.reshape(gathered, shape[:axis] + (out, n) + shape[axis + 1:])
        dtype = dtype_of(x)
        y = op.sum(op.multiply(gathered, const(weights.reshape((out, n) + rest).astype(dtype), dtype)),
                   axis=[axis + 1])
    if outside is not None and outside.any():
        y = op.where(const(outside.reshape((out,) + rest), "bool"), const(extrapolation_value, dtype_of(y)), y)
    return y


def compute_dtype(dtype: str) -> str:
    """The dtype weighted sums are computed in: float32 for half floats and integers up to 16 bits, float64 for
    float64 and wider integers."""
    if dtype in ("float32", "float64"):
        return dtype
    if dtype in ("float16", "bfloat16", "int8", "uint8", "int16", "uint16", "bool"):
        return "float32"
    return "float64"


def cast_back(y: Expr, dtype: str) -> Expr:
    """The float result as ``dtype``: an integer one rounded half to even and saturated, as ONNX's reference."""
    if dtype_of(y) == dtype:
        return y
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        y = op.clip(op.round(y), min=float(info.min), max=float(info.max))
    return op.astype(y, dtype)
