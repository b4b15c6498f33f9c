"""Compiled gradients (and forwards) of conv2d_transpose and of strided / dilated conv2d against PyTorch's, and the
lowerings by phases (``legalize/nn.py``): a dilated convolution as the undilated convolution of its input's phases
(``_dilated_by_phases``), a strided one as stride-1 convolutions of its input's phases (``_strided_by_phases``), a
strided conv2d_transpose as one convolution per output phase (``_transposed_by_phases``).

The weight gradient of a convolution with stride ``s`` (and of a conv2d_transpose with stride ``s``) is a conv2d
dilated by ``s``; the schedules' direct forms take only undilated, stride-1 convolutions, so it ran as naive loops
(~10x the forward), a strided one through im2col, and conv2d_transpose multiplied the data dilated by its strides.
"""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir.interpreter import interpret
from relax_mlir.ir import BlockBuilder, Var
from relax_mlir.ir.struct_info import TensorStructInfo
from relax_mlir.op import nn
from relax_mlir.testing.gradcheck import vjp_module

torch = pytest.importorskip("torch")

_T = TensorStructInfo


def _compiled_vjp(op, x, w, attrs):
    """(output, [d data, d weight]) of the compiled op and of its compiled gradient rule, output adjoint ``g``."""
    sinfos = [_T(x.shape, "float32"), _T(w.shape, "float32")]
    vjp = relax_mlir.VirtualMachine(relax_mlir.compile(vjp_module(op, sinfos, attrs)))["vjp"]
    out_shape = tuple(op(Var("x", sinfos[0]), Var("w", sinfos[1]), **attrs).struct_info.shape)
    g = np.random.default_rng(1).standard_normal(out_shape).astype("float32")
    return g, [np.asarray(v) for v in vjp(x, w, g)]


def _torch_grads(fn, x, w, g):
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    fn(tx, tw).backward(torch.tensor(g))
    return [tx.grad.numpy(), tw.grad.numpy()]


def _close(got, want):
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(b).max())))


# (data shape, weight shape IOHW, stride, padding, output_padding, dilation, groups)
TRANSPOSE_CASES = [
    ((2, 4, 7, 6), (4, 3, 3, 3), 1, 1, 0, 1, 1),
    ((3, 8, 14, 14), (8, 8, 3, 3), 2, 1, 1, 1, 1),   # the decoder shape, small
    ((2, 3, 5, 6), (3, 2, 4, 3), 2, (2, 1), (1, 0), 1, 1),
    ((2, 4, 6, 5), (4, 2, 3, 3), 3, 0, 2, 1, 1),
    ((1, 3, 5, 7), (3, 5, 5, 5), 3, 2, (1, 2), 1, 1),
    ((2, 4, 5, 5), (4, 3, 3, 3), 2, 1, 1, 2, 1),     # dilated: its forward convolution is dilated too
    ((2, 6, 5, 6), (6, 2, 3, 3), 2, 1, 1, 1, 3),     # grouped
    ((2, 4, 6, 6), (4, 1, 3, 2), (2, 3), (0, 1), (1, 2), (1, 2), 2),
    ((2, 3, 4, 5), (3, 2, 2, 1), 3, 0, 2, 1, 1),      # a kernel shorter than the stride: phases no tap reaches
    ((1, 2, 5, 6), (2, 3, 3, 3), (2, 3), (3, 1), (1, 2), (3, 2), 1),  # stride and dilation: gcd 1 and 1
    ((1, 2, 5, 6), (2, 3, 3, 2), (4, 2), (2, 1), (3, 1), (2, 2), 1),  # gcd 2: every other tap, dilation 1
]


@pytest.mark.parametrize("case", TRANSPOSE_CASES, ids=lambda c: f"s{c[2]}-p{c[3]}-op{c[4]}-d{c[5]}-g{c[6]}")
def test_conv2d_transpose_gradients_match_pytorch(case):
    xs, ws, stride, pad, out_pad, dil, groups = case
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(xs).astype("float32"), rng.standard_normal(ws).astype("float32")
    attrs = dict(strides=stride, padding=pad, output_padding=out_pad, dilation=dil, groups=groups)
    g, got = _compiled_vjp(nn.conv2d_transpose, x, w, attrs)
    fn = lambda a, b: torch.nn.functional.conv_transpose2d(  # noqa: E731
        a, b, stride=stride, padding=pad, output_padding=out_pad, dilation=dil, groups=groups)
    _close(got, _torch_grads(fn, x, w, g))
    forward = relax_mlir.VirtualMachine(relax_mlir.compile(_module(nn.conv2d_transpose, xs, ws, attrs)))["main"]
    _close([np.asarray(forward(x, w))], [fn(torch.tensor(x), torch.tensor(w)).numpy()])



# (data shape, weight shape OIHW, stride, padding, dilation, groups)
CONV_CASES = [
    ((2, 3, 9, 10), (4, 3, 3, 3), 2, 1, 1, 1),
    ((2, 4, 11, 8), (5, 4, 3, 2), 3, (1, 0), 1, 1),
    ((1, 3, 12, 12), (2, 3, 3, 3), 1, 2, 2, 1),      # dilated, stride 1: the phases in the forward too
    ((2, 2, 10, 9), (3, 2, 2, 3), 2, 1, (2, 1), 1),   # stride and dilation on the height: naive loops
    ((2, 4, 9, 9), (4, 2, 3, 3), 2, 1, 1, 2),
    ((2, 3, 8, 7), (4, 3, 1, 1), 2, 0, 1, 1),        # 1x1, stride 2: one phase, no tap in the others
    ((1, 2, 13, 11), (3, 2, 5, 4), (3, 2), (2, 1), (1, 2), 1),  # strided height, dilated width
    ((1, 2, 1, 6), (3, 2, 5, 3), 2, 2, 1, 1),        # a phase of padding alone: the strided convolution
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"s{c[2]}-p{c[3]}-d{c[4]}-g{c[5]}")
def test_conv2d_gradients_match_pytorch(case):
    xs, ws, stride, pad, dil, groups = case
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(xs).astype("float32"), rng.standard_normal(ws).astype("float32")
    attrs = dict(strides=stride, padding=pad, dilation=dil, groups=groups)
    g, got = _compiled_vjp(nn.conv2d, x, w, attrs)
    fn = lambda a, b: torch.nn.functional.conv2d(a, b, stride=stride, padding=pad, dilation=dil,  # noqa: E731
                                                 groups=groups)
    _close(got, _torch_grads(fn, x, w, g))
    forward = relax_mlir.VirtualMachine(relax_mlir.compile(_module(nn.conv2d, xs, ws, attrs)))["main"]
    _close([np.asarray(forward(x, w))], [fn(torch.tensor(x), torch.tensor(w)).numpy()])


def _module(op, xs, ws, attrs):
    params = [Var("x", _T(xs, "float32")), Var("w", _T(ws, "float32"))]
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(op(*params, **attrs))
        bb.emit_func_output(out)
    return bb.get()


def test_a_strided_convolutions_weight_gradient_is_lowered_undilated():
    """The weight gradient of a stride-2 conv2d_transpose is a conv2d dilated by 2: lowered as the phases'
    undilated convolution (a batch 4x as large), not a dilated ``linalg.conv_2d_nchw_fchw`` (naive loops)."""
    mod = _module(nn.conv2d, (8, 64, 56, 56), (8, 64, 28, 28), dict(padding=1, dilation=2))
    text = relax_mlir.compile(mod).linalg_text
    assert "dilations = dense<1>" in text and "dilations = dense<2>" not in text, text
    assert "tensor<32x64x29x29xf32>" in text, text  # 4 phases of 8 images, 58 / 2 = 29 rows each


@pytest.mark.parametrize("xs, ws, attrs", [
    ((2, 3, 11, 12), (4, 3, 3, 2), dict(dilation=(2, 3), padding=(1, 0, 2, 1))),  # phases of unequal lengths
    ((1, 2, 9, 13), (3, 2, 2, 3), dict(dilation=(3, 2), strides=(1, 2), padding=1)),  # a strided undilated width
    ((2, 3, 11, 12), (4, 3, 3, 4), dict(strides=(2, 3), padding=(1, 0, 2, 1))),  # strided: the input's phases
])
def test_conv2d_by_phases_matches_the_reference_with_non_finite_data(xs, ws, attrs):
    """The zero rows that even out the phases reach only cropped outputs: an inf or NaN in the data spreads to
    exactly the outputs whose windows read it (as the interpreter's float64 reference)."""
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal(xs).astype("float32"), rng.standard_normal(ws).astype("float32")
    x[0, 0, -1, -1], x[-1, -1, -2, 0], x[0, 1, 0, 3] = np.inf, -np.inf, np.nan
    mod = _module(nn.conv2d, xs, ws, attrs)
    got = np.asarray(relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](x, w))
    want = np.asarray(interpret(mod, "main", x, w))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_strided_conv2d_transpose_is_lowered_as_one_convolution_per_output_phase():
    """Stride 2: four convolutions of the 28x28 data (kernels 2x2, 2x1, 1x2, 1x1), none over the data dilated
    by the strides (55x55, three zeros in every four products)."""
    mod = _module(nn.conv2d_transpose, (64, 8, 28, 28), (8, 8, 3, 3), dict(strides=2, padding=1, output_padding=1))
    text = relax_mlir.compile(mod).linalg_text
    then_branch = text.split("} else {")[0]
    assert then_branch.count("linalg.conv_2d_nchw_fchw") == 4, text
    assert "55x55" not in then_branch, text
    for kernel in ("8x8x2x2xf32", "8x8x2x1xf32", "8x8x1x2xf32", "8x8x1x1xf32"):
        assert kernel in then_branch, kernel


@pytest.mark.parametrize("xs, ws, attrs", [
    ((2, 3, 5, 6), (3, 4, 3, 3), dict(strides=2, padding=1, output_padding=1)),
    ((1, 2, 4, 5), (2, 3, 2, 4), dict(strides=(3, 2), padding=(0, 2, 1, 1), output_padding=(2, 0))),
])
def test_conv2d_transpose_by_phases_spreads_non_finite_data_as_the_reference(xs, ws, attrs):
    """Each phase multiplies only data elements (and zero padding) by finite weights: an inf or NaN in the data
    reaches exactly the outputs it scatters to (the interpreter's scatter form)."""
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal(xs).astype("float32"), rng.standard_normal(ws).astype("float32")
    x[0, 0, -1, -1], x[-1, -1, 1, 0], x[0, 1, 0, 2] = np.inf, -np.inf, np.nan
    mod = _module(nn.conv2d_transpose, xs, ws, attrs)
    got = np.asarray(relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](x, w))
    want = np.asarray(interpret(mod, "main", x, w))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_strided_conv2d_is_lowered_as_stride_1_convolutions_of_the_input_phases():
    """Stride 2, 3x3: four stride-1 convolutions (kernels 2x2, 2x1, 1x2, 1x1) of the padded input's phases, summed,
    instead of im2col and a contraction."""
    mod = _module(nn.conv2d, (64, 8, 56, 56), (8, 8, 3, 3), dict(strides=2, padding=1))
    text = relax_mlir.compile(mod).linalg_text
    assert text.count("linalg.conv_2d_nchw_fchw") == 4 and "strides = dense<2>" not in text, text
    for kernel in ("8x8x2x2xf32", "8x8x2x1xf32", "8x8x1x2xf32", "8x8x1x1xf32"):
        assert kernel in text, kernel


def test_conv2d_transpose_phase_reading_only_padding_is_zero():
    """Height 1, stride 3, dilation 2, pad_top 6, output_padding 2 (PyTorch has no one-sided padding): the one
    output row's only tap reads data row 2, past the data: the row is zero (it was a slice of negative size)."""
    attrs = dict(strides=3, padding=(6, 1, 0, 0), output_padding=2, dilation=2)
    mod = _module(nn.conv2d_transpose, (1, 2, 1, 2), (2, 2, 3, 3), attrs)
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((1, 2, 1, 2)).astype("float32"), rng.standard_normal((2, 2, 3, 3)).astype("float32")
    got = np.asarray(relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](x, w))
    np.testing.assert_allclose(got, np.asarray(interpret(mod, "main", x, w)), rtol=1e-5, atol=1e-5)
