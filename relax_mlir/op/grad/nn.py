"""Backward ops of ``relax.nn`` gradients (``relax.grad.<op>_backward``), as TVM Relax has them.

Each computes the gradient of one forward op with respect to its main input, from the output gradient and
the forward inputs: ``relax.grad.nll_loss_backward``, ``relax.grad.max_pool2d_backward`` and
``relax.grad.avg_pool2d_backward``. They only appear inside gradients, so their own gradient is
``SECOND_ORDER_UNSUPPORTED``. References compute in float64.
"""

from __future__ import annotations

import numpy as np

from ...ir import Var
from ...ir.dtype import to_numpy
from ...ir.struct_info import TensorStructInfo
from ..common import check_dims_match, fmt, require_ndim, require_same_dtype
from ..registry import SECOND_ORDER_UNSUPPORTED, BadSample, Op, Sample, fail, register
from ..nn.conv import _pool_attrs, _pool_infer, _pool_windows, avg_pool2d, max_pool2d, pool_canon_nchw
from ..nn.loss import _nll_check, _nll_infer, _nll_make, nll_loss

_T = TensorStructInfo
_F64 = np.float64


def _check_output_grad(grad: TensorStructInfo, want: TensorStructInfo, forward: str) -> None:
    """``output_grad`` must look like the forward op's output ``want``: same dtype, rank and (known) dims."""
    require_same_dtype([grad, want], ["output_grad", f"{forward}'s output"])
    if -1 not in (grad.ndim, want.ndim) and grad.ndim != want.ndim:
        fail(f"output_grad must have rank {want.ndim} ({forward}'s output {fmt(want.shape)}), got rank {grad.ndim}")
    if grad.shape is not None and want.shape is not None:
        for a, b in zip(grad.shape, want.shape):
            check_dims_match(a, b, f"output_grad must have shape {fmt(want.shape)} ({forward}'s output), "
                                   f"got {fmt(grad.shape)}")


# -- nll_loss_backward -------------------------------------------------------------------------------------------

def _nll_backward_infer(args, attrs):
    grad, forward_args = args[0], args[1:]
    _check_output_grad(grad, _nll_infer(forward_args, attrs), "nll_loss")
    return forward_args[0]


def _nll_backward_ref(output_grad, pred, targets, weights=None, *, reduction: str, ignore_index: int):
    classes = pred.shape[1] if pred.ndim > 1 else pred.shape[0]
    w = np.ones(classes) if weights is None else weights.astype(_F64)
    valid = targets != ignore_index
    bad = valid & ((targets < 0) | (targets >= classes))
    if bad.any():
        raise IndexError(f"relax.grad.nll_loss_backward: target {targets[bad].flat[0]} is out of range "
                         f"[0, {classes})")
    t = np.where(valid, targets, 0).astype(np.int64)
    wt = np.where(valid, w[t], 0.0)
    g = output_grad.astype(_F64)
    total = wt.sum() if reduction == "mean" else 1.0
    coef = -g * wt / (total or 1.0)
    # The class axis goes last so that one put_along_axis writes out[n, t, i...].
    out = np.zeros(t.shape + (classes,))
    np.put_along_axis(out, t[..., None], np.broadcast_to(coef, t.shape)[..., None], axis=-1)
    if not total:
        out[...] = np.nan  # "mean" with every target ignored: 0 / 0, as the loss
    return (np.moveaxis(out, -1, 1) if pred.ndim > 1 else out).astype(pred.dtype)


def _nll_backward_make(rng, sinfos, attrs):
    grad = rng.uniform(-1.0, 1.0, size=sinfos[0].shape).astype(to_numpy(sinfos[0].dtype))
    return [grad] + _nll_make(rng, sinfos[1:], attrs)


def _nll_backward_samples() -> list[Sample]:
    out = []
    for s in nll_loss.samples:
        want = nll_loss(*[Var(f"a{i}", a) for i, a in enumerate(s.args)], **s.attrs).struct_info
        out.append(Sample([want] + list(s.args), s.attrs, make=_nll_backward_make))
    return out


_NLL_X = [_T((4, 5), "float32"), _T((4,), "int64")]

nll_loss_backward = register(Op(
    name="relax.grad.nll_loss_backward", lowering="grad:nll_loss_backward",
    inputs=("output_grad", "predictions", "targets", "weights"),
    num_optional=1, attrs={"reduction": "mean", "ignore_index": -100}, infer=_nll_backward_infer,
    check_attrs=_nll_check, reference=_nll_backward_ref, gradient=SECOND_ORDER_UNSUPPORTED,
    samples=_nll_backward_samples(),
    bad_samples=[BadSample([_T((4,), "float32")] + _NLL_X, {}, r"output_grad must have rank 0"),
                 BadSample([_T((3,), "float32")] + _NLL_X, {"reduction": "none"},
                           r"output_grad must have shape \(4,\) \(nll_loss's output\), got \(3,\)"),
                 BadSample([_T((), "float64")] + _NLL_X, {}, r"same dtype, got output_grad: float64"),
                 BadSample([_T((), "float32"), _T((4, 5), "float32"), _T((4,), "float32")], {},
                           r"targets must have an integer dtype"),
                 BadSample([_T((), "float32")] + _NLL_X, {"reduction": "avg"}, r"reduction must be one of")],
    doc="The gradient of ``relax.nn.nll_loss`` with respect to ``predictions`` (same attributes): zero except "
        "``grad[n, t, i...] = -g * weights[t]`` at each non-ignored target ``t = targets[n, i...]``, where ``g`` "
        "is ``output_grad[n, i...]`` (``'none'``), ``output_grad`` (``'sum'``) or ``output_grad`` divided by "
        "the sum of the non-ignored targets' weights (``'mean'``; NaN everywhere if all are ignored, as the loss)."))


# -- pooling -----------------------------------------------------------------------------------------------------

def _pool_backward_infer(forward: Op):
    pool_infer = _pool_infer(float_only=True)

    def infer(args, attrs):
        grad, data = args
        require_ndim(grad, 4, "output_grad")
        _check_output_grad(grad, pool_infer([data], attrs), forward.short_name)
        return data
    return infer


def _scatter_windows(contrib: np.ndarray, data_shape, attrs: dict) -> np.ndarray:
    """The adjoint of the window gather: add ``contrib`` (KH, KW, N, C, OH, OW) back to the input positions
    each kernel offset read, dropping what lands on the padding or past it."""
    (kh, kw, n, c, oh, ow), (h, w) = contrib.shape, data_shape[2:]
    pt, pl, pb, pr = attrs["padding"]
    (sh, sw), (dh, dw) = attrs["strides"], attrs["dilation"]
    full = np.zeros((n, c, max(h + pt + pb, sh * (oh - 1) + dh * (kh - 1) + 1),
                     max(w + pl + pr, sw * (ow - 1) + dw * (kw - 1) + 1)))
    for i in range(kh):
        for j in range(kw):
            full[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw] += contrib[i, j]
    return full[:, :, pt:pt + h, pl:pl + w]


def _max_pool_backward_ref(output_grad, data, **attrs):
    win = _pool_windows(data.astype(_F64), attrs, -np.inf)
    kh, kw = win.shape[:2]
    first = win.reshape((kh * kw,) + win.shape[2:]).argmax(axis=0)  # argmax returns the first maximum
    picked = np.arange(kh * kw).reshape((kh * kw,) + (1,) * first.ndim) == first
    contrib = picked.reshape(win.shape) * output_grad.astype(_F64)
    return _scatter_windows(contrib, data.shape, attrs).astype(data.dtype)


def _avg_pool_backward_ref(output_grad, data, **attrs):
    ones = np.ones((1, 1) + data.shape[2:])
    divisor = _pool_windows(ones, attrs, 0.0, 1.0 if attrs["count_include_pad"] else 0.0).sum(axis=(0, 1))
    (kh, kw), share = attrs["pool_size"], output_grad.astype(_F64) / divisor
    return _scatter_windows(np.broadcast_to(share, (kh, kw) + share.shape), data.shape, attrs).astype(data.dtype)


def _pool_backward_samples(forward: Op) -> list[Sample]:
    out = []
    for s in forward.samples:
        if s.args[0].dtype.startswith("int") or s.attrs.get("layout", "NCHW") != "NCHW":
            continue  # the backward ops are NCHW's (an NHWC pooling is differentiated through NCHW)
        want = forward(Var("x", s.args[0]), **s.attrs).struct_info
        if want.shape is not None:
            out.append(Sample([want, s.args[0]], s.attrs, low=s.low, high=s.high))
    return out


def _pool_backward_bad(name: str) -> list[BadSample]:
    x = _T((1, 2, 6, 6), "float32")
    return [BadSample([_T((1, 2, 3, 3), "float32"), x], {"pool_size": 2},
                      rf"output_grad must have shape \(1, 2, 5, 5\) \({name}'s output\), got \(1, 2, 3, 3\)"),
            BadSample([_T((1, 2, 5), "float32"), x], {"pool_size": 2}, r"output_grad must have rank 4"),
            BadSample([_T((1, 2, 3, 3), "float64"), x], {"pool_size": 2, "strides": 2}, r"same dtype"),
            BadSample([_T((1, 2, 3, 3), "int32"), _T((1, 2, 6, 6), "int32")], {"pool_size": 2, "strides": 2},
                      r"data must have a float dtype, got int32"),
            BadSample([_T((1, 2, 3, 3), "float32"), x], {"pool_size": 2, "padding": 2}, r"must be at most half")]


def _pool_backward(forward: Op, reference, rule: str) -> Op:
    short = forward.name.split(".")[-1]
    return register(Op(
        name=f"relax.grad.{short}_backward", inputs=("output_grad", "data"),
        attrs=_pool_attrs(avg="count_include_pad" in forward.attrs), infer=_pool_backward_infer(forward),
        canonicalize=pool_canon_nchw, reference=reference, gradient=SECOND_ORDER_UNSUPPORTED,
        lowering=f"grad:{short}_backward",
        samples=_pool_backward_samples(forward), bad_samples=_pool_backward_bad(forward.short_name),
        doc=f"The gradient of ``{forward.name}`` with respect to ``data`` (same attributes; ``output_grad`` has "
            f"the pooled shape): {rule} Float only."))


max_pool2d_backward = _pool_backward(
    max_pool2d, _max_pool_backward_ref,
    "each window's output gradient goes to the position of its maximum; on ties, to the first maximum in "
    "row-major window order (as ``argmax``). Windows that overlap add up.")
avg_pool2d_backward = _pool_backward(
    avg_pool2d, _avg_pool_backward_ref,
    "each window's output gradient, divided by the window's divisor (the forward's), goes to every input "
    "position of the window; padding positions take none.")
