"""Losses: ``relax.nn.cross_entropy_with_logits`` and ``relax.nn.nll_loss``.

The numerics follow ``shared/reference/training_semantics.md``; references compute in float64.
"""

from __future__ import annotations

import numpy as np

from ... import op
from ...ir.dtype import to_numpy
from ...ir.struct_info import TensorStructInfo
from ..common import check_dims_match, fmt, is_int_value, require_float, require_int, require_ndim, require_same_dtype
from ..registry import BadSample, Op, Sample, fail, register
from .grad_helpers import count, known_shape

_T = TensorStructInfo
_F64 = np.float64


def _ce_infer(args, attrs):
    pred, labels = args
    require_float(pred, "predictions")
    dtype = require_same_dtype([pred, labels], ["predictions", "labels"])
    if -1 not in (pred.ndim, labels.ndim) and pred.ndim != labels.ndim:
        fail(f"predictions and labels must have the same rank, got {pred.ndim} and {labels.ndim}")
    if pred.shape is not None and labels.shape is not None:
        for i, (a, b) in enumerate(zip(pred.shape, labels.shape)):
            check_dims_match(a, b, f"predictions and labels must have the same shape, got {fmt(pred.shape)} "
                                   f"and {fmt(labels.shape)} (dim {i})")
    return _T((), dtype)


def _ce_ref(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    total = -(x.astype(_F64) * y.astype(_F64)).sum()
    return np.asarray(total / x.shape[0] if x.ndim > 1 else total).astype(x.dtype)


def _ce_grad(orig, call, grad):
    # [-g * y / N, -g * x / N] for rank > 1 (N = x.shape[0]); without the division for rank 1.
    x, y = call.args
    shape = known_shape(x, call.op.name)
    scale = op.negative(grad) if len(shape) < 2 else op.negative(grad) / count(shape[:1], grad)
    return [scale * y, scale * x]


cross_entropy_with_logits = register(Op(
    name="relax.nn.cross_entropy_with_logits", lowering="nn:cross_entropy_with_logits",
    inputs=("predictions", "labels"), infer=_ce_infer,
    reference=_ce_ref, gradient=_ce_grad,
    samples=[Sample([_T((4, 3), "float32"), _T((4, 3), "float32")]),
             Sample([_T(("n", 10), "float32"), _T(("n", 10), "float32")]),
             Sample([_T((5,), "float64"), _T((5,), "float64")]),
             Sample([_T((2, 3, 4), "float16"), _T((2, 3, 4), "float16")])],
    bad_samples=[BadSample([_T((4, 3), "float32"), _T((4, 2), "float32")], {},
                           r"same shape, got \(4, 3\) and \(4, 2\)"),
                 BadSample([_T((4, 3), "float32"), _T((12,), "float32")], {}, r"same rank, got 2 and 1"),
                 BadSample([_T((4, 3), "float32"), _T((4, 3), "float64")], {}, r"same dtype"),
                 BadSample([_T((4,), "int32"), _T((4,), "int32")], {}, r"predictions must have a float dtype")],
    doc="Scalar ``-sum(x * y) / N`` with ``N = x.shape[0]`` when ``x`` has rank > 1, else ``-sum(x * y)``. "
        "Despite the name, ``x`` is usually log-probabilities (``log_softmax`` output) and ``y`` one-hot labels."))


_REDUCTIONS = ("mean", "sum", "none")


def _nll_check(attrs: dict) -> None:
    if attrs["reduction"] not in _REDUCTIONS:
        fail(f"reduction must be one of {', '.join(map(repr, _REDUCTIONS))}, got {attrs['reduction']!r}")
    if not is_int_value(attrs["ignore_index"]):
        fail(f"ignore_index must be an int, got {attrs['ignore_index']!r}")


def _nll_infer(args, attrs):
    pred, targets = args[:2]
    weights = args[2] if len(args) > 2 else None
    require_float(pred, "predictions")
    require_int(targets, "targets")
    if weights is not None:
        require_same_dtype([pred, weights], ["predictions", "weights"])
        require_ndim(weights, 1, "weights")
    if pred.ndim == 0:
        fail("predictions must have rank >= 1: (N, C, d1, ..., dk) or (C,), got rank 0")
    if -1 not in (pred.ndim, targets.ndim) and targets.ndim != pred.ndim - 1:
        fail(f"targets must have rank {pred.ndim - 1} (predictions without the class axis), got {targets.ndim}")
    per_item = targets.shape
    if pred.shape is not None:
        per_item = pred.shape[:1] + pred.shape[2:] if pred.ndim > 1 else ()
        classes = pred.shape[1] if pred.ndim > 1 else pred.shape[0]
        if targets.shape is not None:
            for a, b in zip(per_item, targets.shape):
                check_dims_match(a, b, f"targets must have shape {fmt(per_item)} to match predictions "
                                       f"{fmt(pred.shape)}, got {fmt(targets.shape)}")
        if weights is not None and weights.shape is not None:
            check_dims_match(weights.shape[0], classes,
                             f"weights must have shape ({classes},) (one per class), got {fmt(weights.shape)}")
    if attrs["reduction"] != "none":
        return _T((), pred.dtype)
    return _T(per_item, pred.dtype, pred.ndim - 1 if pred.ndim != -1 else targets.ndim)


def _nll_ref(pred, targets, weights=None, *, reduction: str, ignore_index: int):
    classes = pred.shape[1] if pred.ndim > 1 else pred.shape[0]
    w = np.ones(classes) if weights is None else weights.astype(_F64)
    # The class axis goes last so one take_along_axis picks pred[n, t, i...].
    p = np.moveaxis(pred.astype(_F64), 1, -1) if pred.ndim > 1 else pred.astype(_F64)
    valid = targets != ignore_index
    bad = valid & ((targets < 0) | (targets >= classes))
    if bad.any():
        raise IndexError(f"relax.nn.nll_loss: target {targets[bad].flat[0]} is out of range [0, {classes})")
    t = np.where(valid, targets, 0).astype(np.int64)
    picked = np.take_along_axis(p, t[..., None], axis=-1)[..., 0]
    wt = np.where(valid, w[t], 0.0)
    out = -picked * wt
    if reduction == "none":
        return out.astype(pred.dtype)
    if reduction == "sum":
        return np.asarray(out.sum()).astype(pred.dtype)
    with np.errstate(invalid="ignore", divide="ignore"):  # every target ignored: 0/0 = NaN, as in TVM
        return np.asarray(out.sum() / wt.sum()).astype(pred.dtype)


def _nll_make(rng, sinfos, attrs):
    """Inputs for nll_loss samples: log-probabilities, targets in range with about a fifth ignored, weights > 0."""
    pred = rng.uniform(-3.0, 0.0, size=sinfos[0].shape).astype(to_numpy(sinfos[0].dtype))
    classes = pred.shape[1] if pred.ndim > 1 else pred.shape[0]
    targets = rng.integers(0, classes, size=sinfos[1].shape)
    targets = np.where(rng.random(targets.shape) < 0.2, attrs["ignore_index"], targets)
    targets.reshape(-1)[:1] = 0  # keep one target so "mean" does not divide by zero
    out = [pred, targets.astype(to_numpy(sinfos[1].dtype))]
    if len(sinfos) > 2:
        out.append(rng.uniform(0.5, 2.0, size=sinfos[2].shape).astype(to_numpy(sinfos[2].dtype)))
    return out


def _nll_grad(orig, call, grad):
    from ..grad import nll_loss_backward  # grad/nn.py builds on this module's helpers

    return [nll_loss_backward(grad, *call.args, **call.attrs)] + [None] * (len(call.args) - 1)


nll_loss = register(Op(
    name="relax.nn.nll_loss", lowering="nn:nll_loss", inputs=("predictions", "targets", "weights"), num_optional=1,
    attrs={"reduction": "mean", "ignore_index": -100}, infer=_nll_infer, check_attrs=_nll_check,
    reference=_nll_ref, gradient=_nll_grad, no_grad_inputs=("targets", "weights"),
    samples=[Sample([_T((4, 5), "float32"), _T((4,), "int64")], make=_nll_make),
             Sample([_T(("n", 5), "float32"), _T(("n",), "int64"), _T((5,), "float32")], make=_nll_make),
             Sample([_T((2, 3, 4, 2), "float64"), _T((2, 4, 2), "int32"), _T((3,), "float64")],
                    {"reduction": "sum", "ignore_index": 1}, make=_nll_make),
             Sample([_T(("n", 3, "m"), "float32"), _T(("n", "m"), "int64")], {"reduction": "none"},
                    make=_nll_make),
             Sample([_T((6,), "float32"), _T((), "int64"), _T((6,), "float32")], make=_nll_make),
             Sample([_T((6,), "float16"), _T((), "int64")], {"reduction": "none"}, make=_nll_make)],
    bad_samples=[BadSample([_T((4, 5), "float32"), _T((4,), "float32")], {}, r"targets must have an integer dtype"),
                 BadSample([_T((4, 5), "float32"), _T((4, 1), "int64")], {}, r"targets must have rank 1"),
                 BadSample([_T((4, 5), "float32"), _T((3,), "int64")], {}, r"targets must have shape \(4,\)"),
                 BadSample([_T((4, 5), "float32"), _T((4,), "int64"), _T((4,), "float32")], {},
                           r"weights must have shape \(5,\)"),
                 BadSample([_T((4, 5), "float32"), _T((4,), "int64"), _T((5,), "float64")], {}, r"same dtype"),
                 BadSample([_T((), "float32"), _T((), "int64")], {}, r"predictions must have rank >= 1"),
                 BadSample([_T((4, 5), "float32"), _T((4,), "int64")], {"reduction": "avg"},
                           r"reduction must be one of 'mean', 'sum', 'none', got 'avg'")],
    doc="Negative log-likelihood of class-index ``targets`` under log-probabilities ``predictions`` "
        "((N, C, d1..dk) with targets (N, d1..dk), or (C,) with a 0-d target), optional per-class ``weights`` (C,). "
        "``out = -pred[n, t, ...] * weights[t]`` (0 where ``t == ignore_index``); ``reduction`` ``'none'`` keeps "
        "it, ``'sum'`` sums it, ``'mean'`` divides the sum by the sum of the weights of non-ignored targets "
        "(NaN if all are ignored). Differentiable in ``predictions`` only (``relax.grad.nll_loss_backward``): "
        "targets and weights get no gradient."))
