"""The ``relax.nn`` gradient rules and their backward ops, beyond the registry-wide finite-difference check:
struct info with symbolic sizes and narrow dtypes, the conventions at kinks and ties, and conv2d_transpose
against an independent loop."""

from __future__ import annotations

import re
import zlib

import numpy as np
import pytest

from relax_mlir import op as relax_op
from relax_mlir.interpreter import interpret
from relax_mlir.ir import Var
from relax_mlir.ir.struct_info import TensorStructInfo, TupleStructInfo, free_vars, substitute
from relax_mlir.ir.structural_equal import structural_equal
from relax_mlir.op import nn
from relax_mlir.testing.gradcheck import vjp_module
from relax_mlir.op.grad import nn as backward
from relax_mlir.op.registry import NOT_DIFFERENTIABLE, SECOND_ORDER_UNSUPPORTED, substitute_attrs
from relax_mlir.testing import roundtrip

from ..conftest import random_inputs
from .test_registry import SIZES

_T = TensorStructInfo
NN_OPS = [o for o in relax_op.list_ops() if o.name.startswith("relax.nn.")]
BACKWARD_OPS = [o for o in relax_op.list_ops() if o.name.startswith("relax.grad.") and o.name.endswith("_backward")]


def _run(op, *arrays, **attrs):
    return op.reference(*arrays, **op.complete_attrs(attrs))


def _vjp(op, arrays, attrs, w):
    sinfos = [_T(a.shape, str(a.dtype)) for a in arrays]
    return interpret(vjp_module(op, sinfos, attrs), "vjp", *arrays, w)


def _like(rng, a):
    return rng.uniform(-1, 1, a.shape).astype(a.dtype)


def _sample_cases():
    for op in NN_OPS:
        if op.gradient in (None, NOT_DIFFERENTIABLE, SECOND_ORDER_UNSUPPORTED):
            continue
        for i, sample in enumerate(op.samples):
            yield pytest.param(op, sample, id=f"{op.name}-{i}")


@pytest.mark.parametrize("op,sample", list(_sample_cases()))
def test_rule_keeps_struct_info_and_symbolic_sizes(op, sample):
    """On the samples as written (size variables, float16/bfloat16), each gradient has its argument's struct
    info, the module round-trips through the text format, and with the sizes bound it computes what the
    same rule computes on static shapes."""
    sinfos = [TupleStructInfo(a) if isinstance(a, (list, tuple)) else a for a in sample.args]
    call = op(*[Var("a", s) for s in sinfos], **sample.attrs)
    if op is nn.conv2d and call.struct_info.shape is None:  # no SymDim output size: no output_padding either
        with pytest.raises(TypeError, match=r"relax.nn.conv2d gradient: needs static or symbolic shapes"):
            vjp_module(op, sinfos, sample.attrs)
        return
    mod = roundtrip(vjp_module(op, sinfos, sample.attrs))
    got = mod["vjp"].body.body.struct_info  # the returned tuple of gradients
    assert structural_equal(got, TupleStructInfo(sinfos), map_free_vars=True), f"{op.name}: {got} vs {sinfos}"
    if not any(free_vars(s) for s in sinfos):
        return
    rng = np.random.default_rng(zlib.crc32(op.name.encode()))
    env = {name: SIZES[name] for s in sinfos for name in free_vars(s)} | sample.sizes
    concrete = [substitute(s, env) for s in sinfos]
    attrs = substitute_attrs(op.complete_attrs(sample.attrs), env)
    arrays = sample.make(rng, concrete, attrs) if sample.make else random_inputs(rng, concrete, sample.low,
                                                                                   sample.high)
    out = op.reference(*arrays, **attrs)
    w = tuple(_like(rng, o) for o in out) if isinstance(out, tuple) else _like(rng, out)
    symbolic = interpret(mod, "vjp", *arrays, w)
    static = interpret(vjp_module(op, concrete, attrs), "vjp", *arrays, w)
    for a, b in zip(symbolic, static):
        np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=1e-6)


@pytest.mark.parametrize("op", NN_OPS + BACKWARD_OPS, ids=lambda o: o.name)
def test_bad_samples_are_refused(op):
    for bad in op.bad_samples:
        args = [Var(f"a{i}", TupleStructInfo(a) if isinstance(a, (list, tuple)) else a)
                for i, a in enumerate(bad.args)]
        with pytest.raises((TypeError, ValueError)) as info:
            op(*args, **bad.attrs)
        assert re.search(bad.error, str(info.value)), f"{op.name}: {info.value!r} does not match {bad.error!r}"


# -- kinks, ties and conventions ----------------------------------------------------------------------------

def test_relu_and_leakyrelu_have_slope_one_at_zero():
    x, w = np.array([-1.0, 0.0, 2.0]), np.array([3.0, 5.0, 7.0])
    np.testing.assert_array_equal(_vjp(nn.relu, [x], {}, w)[0], [0.0, 5.0, 7.0])
    np.testing.assert_array_equal(_vjp(nn.leakyrelu, [x], {"alpha": 0.5}, w)[0], [1.5, 5.0, 7.0])


def test_max_pool2d_backward_gives_ties_to_the_first_maximum():
    x = np.array([[[[1.0, 3.0, 3.0], [3.0, 0.0, 2.0], [1.0, 1.0, 1.0]]]])
    g = np.array([[[[10.0, 20.0], [30.0, 40.0]]]])
    got = _run(backward.max_pool2d_backward, g, x, pool_size=2)
    # Windows (row-major first maximum): (0,0) -> x[0,1]; (0,1) -> x[0,1]; (1,0) -> x[1,0]; (1,1) -> x[1,2].
    np.testing.assert_array_equal(got[0, 0], [[0.0, 30.0, 0.0], [30.0, 0.0, 40.0], [0.0, 0.0, 0.0]])


def test_avg_pool2d_backward_divides_by_the_forward_divisor():
    x = np.zeros((1, 1, 3, 3))
    g = np.ones((1, 1, 2, 2))
    for include, corner in ((False, 1 / 1), (True, 1 / 4)):
        got = _run(backward.avg_pool2d_backward, g, x, pool_size=2, strides=2, padding=1, count_include_pad=include)
        assert got[0, 0, 0, 0] == corner  # the top-left window covers one input cell and three padding cells


def test_nll_loss_backward_values():
    pred = np.log(np.full((3, 4), 0.25))
    targets = np.array([1, -100, 3])
    weights = np.array([1.0, 2.0, 3.0, 4.0])
    got = _run(backward.nll_loss_backward, np.array(6.0), pred, targets, weights)
    want = np.zeros((3, 4))
    want[0, 1], want[2, 3] = -6.0 * 2.0 / 6.0, -6.0 * 4.0 / 6.0  # mean: divided by the weights of kept targets
    np.testing.assert_array_equal(got, want)
    none = _run(backward.nll_loss_backward, np.array([1.0, 2.0, 3.0]), pred, targets, weights, reduction="none")
    np.testing.assert_array_equal(none[[0, 2], [1, 3]], [-2.0, -12.0])
    assert np.isnan(_run(backward.nll_loss_backward, np.array(1.0), pred[0], np.array(-100))).all()  # 0 / 0


def test_dropout_gradient_is_the_output_grad_times_the_mask():
    x = np.arange(6.0).reshape(2, 3)
    w = (np.full((2, 3), 2.0), np.full((2, 3), 9.0))  # the mask's adjoint flows nowhere
    np.testing.assert_array_equal(_vjp(nn.dropout, [x], {"rate": 0.4}, w)[0], w[0])


def test_batch_norm_moving_statistics_get_no_gradient():
    assert nn.batch_norm.no_grad_inputs == ("moving_mean", "moving_var")
    args = [Var(n, _T((4, 3), "float32") if n == "data" else _T((3,), "float32")) for n in nn.batch_norm.inputs]
    for training in (False, True):
        call = nn.batch_norm(*args, training=training)
        grads = nn.batch_norm.gradient(Var("y", call.struct_info), call, Var("g", call.struct_info))
        assert grads[3] is None and grads[4] is None and all(g is not None for g in grads[:3])


# -- conv2d_transpose ---------------------------------------------------------------------------------------

def _conv_transpose_loop(x, w, stride, pad, out_pad, dil, groups):
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    pt, pl, pb, pr = pad
    oh = (h - 1) * stride[0] - pt - pb + dil[0] * (kh - 1) + out_pad[0] + 1
    ow = (wd - 1) * stride[1] - pl - pr + dil[1] * (kw - 1) + out_pad[1] + 1
    out = np.zeros((n, og * groups, oh, ow))
    cg = c // groups
    for b in range(n):
        for ic in range(c):
            grp = ic // cg
            for y in range(h):
                for z in range(wd):
                    for oc in range(og):
                        for i in range(kh):
                            for j in range(kw):
                                r = y * stride[0] + i * dil[0] - pt
                                q = z * stride[1] + j * dil[1] - pl
                                if 0 <= r < oh and 0 <= q < ow:
                                    out[b, grp * og + oc, r, q] += x[b, ic, y, z] * w[ic, oc, i, j]
    return out


_TRANSPOSE_CASES = [((1, 1), (0, 0, 0, 0), (0, 0), (1, 1), 1),
                    ((2, 3), (1, 0, 2, 1), (1, 2), (1, 1), 2),
                    ((2, 2), (1, 1, 1, 1), (1, 0), (2, 1), 1),
                    ((3, 1), (0, 2, 1, 0), (2, 0), (1, 2), 4)]


@pytest.mark.parametrize("stride,pad,out_pad,dil,groups", _TRANSPOSE_CASES)
def test_conv2d_transpose_matches_loop(rng, stride, pad, out_pad, dil, groups):
    x = rng.standard_normal((2, 4, 4, 5))
    w = rng.standard_normal((4, 6 // groups if groups != 4 else 2, 3, 2))
    attrs = dict(strides=stride, padding=pad, output_padding=out_pad, dilation=dil, groups=groups)
    got = _run(nn.conv2d_transpose, x, w, **attrs)
    # A floor of 16 ulps of the largest sum of |products|: an element that cancels keeps its terms' rounding, and
    # the reference's NumPy contraction sums in the order of the host's BLAS kernel (rtol alone: 0.3 of the way).
    terms = _conv_transpose_loop(np.abs(x), np.abs(w), stride, pad, out_pad, dil, groups).max()
    np.testing.assert_allclose(got, _conv_transpose_loop(x, w, stride, pad, out_pad, dil, groups), rtol=1e-12,
                               atol=16 * np.finfo(np.float64).eps * terms)
    call = nn.conv2d_transpose(Var("x", _T(x.shape, "float64")), Var("w", _T(w.shape, "float64")), **attrs)
    assert tuple(call.struct_info.shape) == got.shape


@pytest.mark.parametrize("stride,pad,out_pad,dil,groups", _TRANSPOSE_CASES)
def test_conv2d_transpose_is_the_adjoint_of_conv2d(rng, stride, pad, out_pad, dil, groups):
    """<conv2d(x, w), y> == <x, conv2d_transpose(y, w)> with the same window attributes."""
    y = rng.standard_normal((2, 4, 4, 5))
    w = rng.standard_normal((4, 2, 3, 2))
    attrs = dict(strides=stride, padding=pad, dilation=dil, groups=groups)
    x = rng.standard_normal(_run(nn.conv2d_transpose, y, w, output_padding=out_pad, **attrs).shape)
    lhs = np.sum(_run(nn.conv2d, x, w, **attrs) * y)
    rhs = np.sum(x * _run(nn.conv2d_transpose, y, w, output_padding=out_pad, **attrs))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-10)


def test_conv2d_transpose_int8_accumulates_in_out_dtype():
    x = np.full((1, 2, 2, 2), 100, "int8")
    w = np.full((2, 1, 1, 1), 100, "int8")
    got = _run(nn.conv2d_transpose, x, w, out_dtype="int32")
    assert got.dtype == np.int32 and (got == 2 * 100 * 100).all()


def test_grouped_conv2d_gradient_of_an_empty_symbolic_batch():
    """The weight gradient reshaped the output gradient to ``(n, groups, -1, oh, ow)``: with ``n = 0`` NumPy cannot
    infer the ``-1`` and the interpreter failed, although the size is known (``out_channels // groups``). Both
    modes give zero loss and gradients of the right shapes; and for n = 2 they agree."""
    import relax_mlir
    from relax_mlir import BlockBuilder, transform

    x, w = Var("x", TensorStructInfo(("n", 4, 5, 5), "float32")), Var("w", TensorStructInfo((6, 2, 3, 3), "float32"))
    bb = BlockBuilder()
    with bb.function("f", [x, w]):
        with bb.dataflow():
            y = bb.emit(nn.conv2d(x, w, groups=2))
            loss = bb.emit_output(bb.emit(relax_op.sum(relax_op.multiply(y, y))))
        bb.emit_func_output(loss)
    mod = transform.Gradient("f")(bb.get())
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["f_adjoint"]
    ws = np.random.default_rng(0).standard_normal((6, 2, 3, 3)).astype("float32")
    for n in (0, 2):
        xs = np.random.default_rng(n).standard_normal((n, 4, 5, 5)).astype("float32")
        got = [interpret(mod, "f_adjoint", xs, ws), compiled(xs, ws)]
        for value, (dx, dw) in got:
            assert dx.shape == xs.shape and dw.shape == ws.shape
        if n == 0:
            assert all(float(v) == 0 and not np.any(dw) for v, (_, dw) in got)
        np.testing.assert_allclose(np.asarray(got[1][1][1]), np.asarray(got[0][1][1]), rtol=1e-4, atol=1e-4)
