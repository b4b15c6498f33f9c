"""The trickier ``relax.nn`` references against hand-derived values and independent loop implementations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from relax_mlir.ir import Var
from relax_mlir.ir.struct_info import TensorStructInfo
from relax_mlir.op import nn


def _run(op, *arrays, **attrs):
    return op.reference(*arrays, **op.complete_attrs(attrs))


# -- loop implementations, written independently of nn.py -------------------------------------------------

def _conv_loop(x, w, stride, pad, dil, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    pt, pl, pb, pr = pad
    oh = (h + pt + pb - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + pl + pr - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    for b in range(n):
        for oc in range(o):
            g = oc // (o // groups)
            for y in range(oh):
                for z in range(ow):
                    acc = 0.0
                    for ic in range(cg):
                        for i in range(kh):
                            for j in range(kw):
                                r = y * stride[0] - pt + i * dil[0]
                                q = z * stride[1] - pl + j * dil[1]
                                if 0 <= r < h and 0 <= q < wd:
                                    acc += x[b, g * cg + ic, r, q] * w[oc, ic, i, j]
                    out[b, oc, y, z] = acc
    return out


def _torch_out(size, k, s, p_before, p_after, d, ceil):
    """PyTorch's pooling_output_shape, generalised to asymmetric padding."""
    span = d * (k - 1) + 1
    num = size + p_before + p_after - span
    out = (num + (s - 1 if ceil else 0)) // s + 1
    if ceil and (out - 1) * s >= size + p_before:
        out -= 1
    return out


def _pool_loop(x, k, s, pad, d, ceil, kind, include_pad=False):
    n, c, h, w = x.shape
    pt, pl, pb, pr = pad
    oh = _torch_out(h, k[0], s[0], pt, pb, d[0], ceil)
    ow = _torch_out(w, k[1], s[1], pl, pr, d[1], ceil)
    out = np.zeros((n, c, oh, ow))
    for y in range(oh):
        for z in range(ow):
            vals, count = [], 0
            for i in range(k[0]):
                for j in range(k[1]):
                    r, q = y * s[0] - pt + i * d[0], z * s[1] - pl + j * d[1]
                    if 0 <= r < h and 0 <= q < w:
                        vals.append(x[:, :, r, q])
                    if -pt <= r < h + pb and -pl <= q < w + pr:
                        count += 1
            if kind == "max":
                out[:, :, y, z] = np.max(vals, axis=0)
            else:
                out[:, :, y, z] = np.sum(vals, axis=0) / (count if include_pad else len(vals))
    return out


# -- conv2d and pooling -------------------------------------------------------------------------------------

@pytest.mark.parametrize("stride,pad,dil,groups", [
    ((1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((2, 1), (1, 0, 2, 1), (1, 2), 1),
    ((2, 2), (1, 1, 1, 1), (2, 1), 2),
    ((1, 3), (0, 2, 1, 0), (1, 1), 4),
])
def test_conv2d_matches_loop(rng, stride, pad, dil, groups):
    x = rng.standard_normal((2, 4, 7, 8)).astype("float32")
    w = rng.standard_normal((4, 4 // groups, 3, 2)).astype("float32")
    got = _run(nn.conv2d, x, w, strides=stride, padding=pad, dilation=dil, groups=groups)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, _conv_loop(x, w, stride, pad, dil, groups), rtol=1e-5, atol=1e-5)


def test_conv2d_int8_accumulates_in_out_dtype(rng):
    x = np.full((1, 2, 3, 3), 100, "int8")
    w = np.full((1, 2, 3, 3), 100, "int8")
    got = _run(nn.conv2d, x, w, out_dtype="int32")
    assert got.dtype == np.int32 and got.item() == 18 * 100 * 100


def test_conv2d_padding_is_stored_canonically():
    data = Var("x", TensorStructInfo(("n", 3, 8, 8), "float32"))
    weight = Var("w", TensorStructInfo((4, 3, 3, 3), "float32"))
    assert nn.conv2d(data, weight, padding=1).attrs["padding"] == (1, 1, 1, 1)
    call = nn.conv2d(data, weight, padding=(1, 2), strides=2)
    assert call.attrs["padding"] == (1, 2, 1, 2) and call.attrs["strides"] == (2, 2)
    assert call.attrs["out_layout"] == "NCHW"
    assert str(call.struct_info) == "Tensor((n, 4, 4, 5), float32)"  # (8+2-3)//2+1, (8+4-3)//2+1


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("k,s,pad,d,ceil,include", [
    ((2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False, False),
    ((3, 3), (2, 2), (1, 1, 1, 1), (1, 1), True, False),
    ((3, 3), (2, 2), (1, 1, 1, 1), (1, 1), True, True),
    ((2, 2), (3, 3), (1, 1, 1, 1), (1, 1), True, True),   # the last window would start in the padding: dropped
    ((3, 2), (2, 1), (1, 0, 0, 1), (1, 1), True, True),
    ((2, 2), (2, 2), (1, 0, 1, 0), (2, 2), True, False),
])
def test_pool_matches_loop(rng, kind, k, s, pad, d, ceil, include):
    x = rng.standard_normal((2, 3, 5, 6)).astype("float64")
    attrs = dict(pool_size=k, strides=s, padding=pad, dilation=d, ceil_mode=ceil)
    if kind == "avg":
        got = _run(nn.avg_pool2d, x, count_include_pad=include, **attrs)
    else:
        got = _run(nn.max_pool2d, x, **attrs)
    np.testing.assert_allclose(got, _pool_loop(x, k, s, pad, d, ceil, kind, include), rtol=1e-12)


def test_ceil_mode_drops_a_window_starting_in_the_padding():
    # 5 wide, window 2, stride 3, padding 1: windows start at -1, 2 and (ceil) 5 = in the right padding.
    x = np.arange(25, dtype="float32").reshape(1, 1, 5, 5)
    got = _run(nn.max_pool2d, x, pool_size=2, strides=3, padding=1, ceil_mode=True)
    assert got.shape == (1, 1, 2, 2)
    np.testing.assert_array_equal(got[0, 0], [[0, 3], [15, 18]])
    # count_include_pad counts the padding cells inside a window, not the cells past the padding.
    # Here the last window covers columns 5, 6 (padding) and 7 (past it): 2 x 3 cells are counted.
    y = np.ones((1, 1, 6, 6), "float32")
    avg = _run(nn.avg_pool2d, y, pool_size=3, strides=2, padding=1, ceil_mode=True, count_include_pad=True)
    np.testing.assert_allclose(avg[0, 0, 0], [4 / 9, 6 / 9, 6 / 9, 2 / 6], rtol=1e-6)


# -- losses -------------------------------------------------------------------------------------------------

def test_nll_loss_weighted_mean_with_ignore_index():
    pred = np.log(np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [0.25, 0.25, 0.5]], "float32"))
    targets = np.array([0, 2, -100, 1], "int64")
    weights = np.array([1.0, 2.0, 3.0], "float32")
    terms = [-math.log(0.7) * 1.0, -math.log(0.1) * 3.0, 0.0, -math.log(0.25) * 2.0]
    none = _run(nn.nll_loss, pred, targets, weights, reduction="none")
    np.testing.assert_allclose(none, terms, rtol=1e-6)
    np.testing.assert_allclose(_run(nn.nll_loss, pred, targets, weights, reduction="sum"), sum(terms), rtol=1e-6)
    mean = _run(nn.nll_loss, pred, targets, weights)
    assert mean.shape == () and mean.dtype == np.float32
    np.testing.assert_allclose(mean, sum(terms) / (1.0 + 3.0 + 2.0), rtol=1e-6)
    # Without weights the mean is over the non-ignored targets only.
    np.testing.assert_allclose(_run(nn.nll_loss, pred, targets),
                               (-math.log(0.7) - math.log(0.1) - math.log(0.25)) / 3, rtol=1e-6)


def test_nll_loss_spatial_and_no_batch():
    rng = np.random.default_rng(1)
    pred = rng.standard_normal((2, 3, 4)).astype("float64")
    targets = np.array([[0, 1, 2, 1], [2, 2, 0, 5]])
    got = _run(nn.nll_loss, pred, targets, reduction="none", ignore_index=5)
    want = [[-pred[n, targets[n, i], i] if targets[n, i] != 5 else 0.0 for i in range(4)] for n in range(2)]
    np.testing.assert_allclose(got, want)
    p = np.array([-1.0, -2.0, -3.0], "float32")
    w = np.array([2.0, 4.0, 8.0], "float32")
    for reduction, want in [("none", 8.0), ("sum", 8.0), ("mean", 2.0)]:
        assert _run(nn.nll_loss, p, np.array(1), w, reduction=reduction).item() == want
    assert np.isnan(_run(nn.nll_loss, p, np.array(-100), w))  # all ignored: 0 / 0
    assert _run(nn.nll_loss, p, np.array(-100), w, reduction="sum").item() == 0.0


def test_cross_entropy_with_logits():
    x = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], "float32")
    y = np.array([[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]], "float32")
    np.testing.assert_allclose(_run(nn.cross_entropy_with_logits, x, y), -(2.0 + 3.0 + 5.5) / 3, rtol=1e-6)
    assert _run(nn.cross_entropy_with_logits, x[0], y[0]).item() == -2.0


def test_softmax_is_stable():
    x = np.array([[1000.0, 1000.0, -1000.0]], "float32")
    np.testing.assert_allclose(_run(nn.softmax, x), [[0.5, 0.5, 0.0]])
    np.testing.assert_allclose(_run(nn.log_softmax, x), [[-math.log(2), -math.log(2), -2000 - math.log(2)]])


def test_activation_values():
    x = np.array([-1.0, 0.0, 1.0], "float64")
    np.testing.assert_allclose(_run(nn.gelu, x), [-0.15865525393145707, 0.0, 0.8413447460685429], rtol=1e-12)
    np.testing.assert_allclose(_run(nn.gelu_tanh, x), [-0.15880800939172324, 0.0, 0.8411919906082768], rtol=1e-12)
    np.testing.assert_allclose(_run(nn.silu, x), x / (1 + np.exp(-x)), rtol=1e-12)
    np.testing.assert_allclose(_run(nn.leakyrelu, x, alpha=0.2), [-0.2, 0.0, 1.0])


# -- normalisation and dropout ------------------------------------------------------------------------------

def test_batch_norm_training_and_inference(rng):
    x = rng.standard_normal((4, 3, 2, 2))
    gamma, beta = np.array([1.0, 2.0, 0.5]), np.array([0.0, -1.0, 3.0])
    moving_mean, moving_var = np.array([0.1, 0.2, 0.3]), np.array([1.0, 2.0, 0.5])
    out, new_mean, new_var = _run(nn.batch_norm, x, gamma, beta, moving_mean, moving_var, training=True,
                                  momentum=0.25, epsilon=1e-3)
    for c in range(3):
        values = x[:, c].ravel()
        mu = values.sum() / values.size
        var = ((values - mu) ** 2).sum() / values.size  # biased
        np.testing.assert_allclose(out[:, c], (x[:, c] - mu) / math.sqrt(var + 1e-3) * gamma[c] + beta[c])
        np.testing.assert_allclose(new_mean[c], 0.75 * moving_mean[c] + 0.25 * mu)
        np.testing.assert_allclose(new_var[c], 0.75 * moving_var[c] + 0.25 * var)
    out, m, v = _run(nn.batch_norm, x, gamma, beta, moving_mean, moving_var, center=False)
    np.testing.assert_array_equal(m, moving_mean)
    np.testing.assert_array_equal(v, moving_var)
    want = (x - moving_mean[:, None, None]) / np.sqrt(moving_var[:, None, None] + 1e-5) * gamma[:, None, None]
    np.testing.assert_allclose(out, want)


def test_layer_norm_axes_order(rng):
    x = rng.standard_normal((2, 3, 4))
    gamma, beta = rng.standard_normal((4, 2)), rng.standard_normal((4, 2))  # dims of axes (2, 0), in that order
    got = _run(nn.layer_norm, x, gamma, beta, axes=(2, 0))
    for c in range(3):
        s = x[:, c, :]
        want = (s - s.mean()) / np.sqrt(s.var() + 1e-5) * gamma.T + beta.T
        np.testing.assert_allclose(got[:, c, :], want, rtol=1e-12)


def test_dropout_inference_is_identity():
    x = np.arange(6, dtype="float32").reshape(2, 3)
    out, mask = _run(nn.dropout, x, rate=0.3)
    np.testing.assert_array_equal(out, x)
    assert mask.dtype == np.float32 and (mask == 1).all()


def test_silu_reference_keeps_its_digits_far_below_zero():
    # x/2 * (1 + tanh(x/2)) cancelled: 0.3% off at -32.6 and 0 below -35, where x * sigmoid(x) is -1e-20 at -50
    from scipy.special import expit

    from relax_mlir import op as relax_op

    x = np.concatenate([np.linspace(-700, 700, 2801), [-0.0, 0.0, 1e-300, -1e-300]])
    got = relax_op.nn.silu.reference(x)
    np.testing.assert_allclose(got, x * expit(x), rtol=4 * np.finfo(np.float64).eps, atol=0)
