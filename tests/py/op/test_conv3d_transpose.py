"""``relax.nn.conv3d_transpose`` against an independent oracle, PyTorch's ``conv_transpose3d`` (the registry sweep
checks the record's NumPy reference, gradient and compiled code against one another): the reference, the
interpreter and compiled code, values and gradients, over strides 1, 2 and 3, TVM's padding spellings (1, 3 and 6
values), output_padding, dilation and groups; TVM's attributes and defaults; and the decomposition that gives it
conv2d_transpose's schedules.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import relax_mlir  # noqa: E402
from relax_mlir import TensorStructInfo, Var, op, transform  # noqa: E402
from relax_mlir.ir.expr import Call  # noqa: E402
from relax_mlir.ir.visitor import post_order_visit  # noqa: E402

from .test_conv3d import _module  # noqa: E402

_RNG = np.random.default_rng(11)


def _randn(*shape):
    return _RNG.standard_normal(shape).astype("float32")


def _torch(x, w, attrs):
    """PyTorch's transposed convolution with relax's attributes: PyTorch pads symmetrically, so the result is
    computed unpadded and cropped by ``(front, top, left, back, bottom, right)``."""
    three = lambda v: (v,) * 3 if isinstance(v, int) else tuple(v)  # noqa: E731
    pad = attrs.get("padding", 0)
    pad = (pad,) * 6 if isinstance(pad, int) else tuple(pad) * 2 if len(pad) == 3 else tuple(pad)
    full = F.conv_transpose3d(x, w, stride=three(attrs.get("strides", 1)), dilation=three(attrs.get("dilation", 1)),
                              output_padding=three(attrs.get("output_padding", 0)), groups=attrs.get("groups", 1))
    return full[(slice(None), slice(None)) + tuple(slice(pad[a], full.shape[2 + a] - pad[3 + a]) for a in range(3))]


# (data shape, weight shape, relax attributes)
_CASES = [
    ((2, 4, 3, 4, 5), (4, 3, 2, 3, 3), {}),
    ((2, 4, 3, 4, 4), (4, 2, 3, 3, 2), {"strides": 2, "padding": 1, "output_padding": 1}),
    ((1, 4, 3, 3, 4), (4, 3, 3, 2, 3), {"strides": 3, "padding": (2, 1, 0), "output_padding": (2, 0, 1),
                                        "dilation": (2, 1, 2), "groups": 2}),
    ((2, 6, 2, 3, 3), (6, 1, 2, 3, 2), {"strides": (1, 2, 3), "padding": (1, 0, 2, 0, 2, 1),
                                        "output_padding": (0, 1, 2), "dilation": (1, 2, 1), "groups": 3}),
    ((1, 2, 4, 3, 3), (2, 2, 1, 2, 2), {"strides": (3, 1, 2), "padding": (0, 1, 0, 2, 0, 1)}),  # one kernel depth
]


@pytest.mark.parametrize("xs, ws, attrs", _CASES)
def test_conv3d_transpose_is_pytorchs(xs, ws, attrs):
    x, w = _randn(*xs), _randn(*ws)
    want = _torch(torch.tensor(x), torch.tensor(w), attrs).numpy()
    call = op.nn.conv3d_transpose(Var("x", TensorStructInfo(xs, "float32")), Var("w", TensorStructInfo(ws, "float32")),
                                  **attrs)
    assert call.struct_info.shape == want.shape
    np.testing.assert_allclose(call.op.reference(x, w, **call.attrs), want, rtol=1e-5, atol=1e-5)
    mod = _module(lambda a, b: op.nn.conv3d_transpose(a, b, **attrs), xs, ws)
    for run in (lambda *a: relax_mlir.interpret(mod, "main", *a),
                lambda *a: relax_mlir.interpret(transform.DecomposeOps()(mod), "main", *a),
                relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"]):
        np.testing.assert_allclose(run(x, w), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("xs, ws, attrs", _CASES)
def test_conv3d_transpose_gradients_are_pytorchs(xs, ws, attrs):
    x, w = _randn(*xs), _randn(*ws)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    y = _torch(xt, wt, attrs)
    weights = _randn(*y.shape)
    (y * torch.tensor(weights)).sum().backward()
    mod = _module(lambda a, b, c: op.sum(op.multiply(op.nn.conv3d_transpose(a, b, **attrs), c)), xs, ws,
                  weights.shape)
    adjoint = transform.Gradient("main", require_grads=["a0", "a1"])(mod)
    for run in (lambda *a: relax_mlir.interpret(adjoint, "main_adjoint", *a),
                relax_mlir.VirtualMachine(relax_mlir.compile(adjoint))["main_adjoint"]):
        _, (dx, dw) = run(x, w, weights)
        np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(dw, wt.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_int8_with_an_int32_out_dtype_is_exact():
    x = _RNG.integers(-4, 4, (1, 2, 3, 3, 2)).astype("int8")
    w = _RNG.integers(-4, 4, (2, 3, 2, 2, 3)).astype("int8")
    attrs = {"strides": 2, "padding": (1, 0, 1), "output_padding": 1, "out_dtype": "int32"}
    want = _torch(torch.tensor(x, dtype=torch.float64), torch.tensor(w, dtype=torch.float64), attrs).numpy()
    mod = _module(lambda a, b: op.nn.conv3d_transpose(a, b, **attrs), x.shape, w.shape, dtype="int8")
    got = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](x, w)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want.astype(np.int32))


def test_attributes_are_tvms():
    """TVM's defaults (NCDHW data, IODHW weight, the output layout the data's) and spellings: an int or ``(d, h,
    w)`` padding stored as the 6 values ``(front, top, left, back, bottom, right)``, ints as triples."""
    x = Var("x", TensorStructInfo((1, 4, 3, 3, 3), "float32"))
    w = Var("w", TensorStructInfo((4, 2, 3, 3, 3), "float32"))
    call = op.nn.conv3d_transpose(x, w)
    assert call.attrs == {"strides": (1, 1, 1), "padding": (0,) * 6, "output_padding": (0, 0, 0),
                          "dilation": (1, 1, 1), "groups": 1, "data_layout": "NCDHW", "kernel_layout": "IODHW",
                          "out_layout": "NCDHW", "out_dtype": None}
    assert call.struct_info.shape == (1, 2, 5, 5, 5)
    call = op.nn.conv3d_transpose(x, w, strides=2, padding=(1, 2, 0), output_padding=1, dilation=2, groups=2)
    assert (call.attrs["strides"], call.attrs["padding"], call.attrs["output_padding"], call.attrs["dilation"]) == \
        ((2, 2, 2), (1, 2, 0, 1, 2, 0), (1, 1, 1), (2, 2, 2))
    assert call.struct_info.shape == (1, 4, 8, 6, 10)
    with pytest.raises(ValueError, match=r"relax.nn.conv3d_transpose: output_padding \(2, 0, 0\) must be smaller "
                                         r"than strides \(2, 2, 2\) in each dimension"):
        op.nn.conv3d_transpose(x, w, strides=2, output_padding=(2, 0, 0))
    with pytest.raises(ValueError, match=r"relax.nn.conv3d_transpose: only data_layout 'NCDHW' is supported, "
                                         r"got 'NDHWC'"):
        op.nn.conv3d_transpose(x, w, data_layout="NDHWC")


def _ops_of(func) -> list[str]:
    names: list[str] = []
    post_order_visit(func, lambda e: names.append(e.op.name) if isinstance(e, Call) else None)
    return names


def test_conv3d_transpose_decomposes_into_one_conv2d_transpose():
    """Its forward is one conv2d_transpose (the op conv2d_transpose's schedules compile) whatever the kernel depth,
    and its gradients are conv2d_transpose's (a conv2d and a weight-gradient conv2d): no 3-D loop nest."""
    attrs = {"padding": 1, "strides": (2, 1, 2), "output_padding": (1, 0, 1)}
    mod = _module(lambda a, b: op.sum(op.nn.conv3d_transpose(a, b, **attrs)), (2, 3, 4, 5, 5), (3, 4, 3, 3, 3))
    names = _ops_of(transform.DecomposeOps()(mod)["main"])
    assert names.count("relax.nn.conv2d_transpose") == 1 and "relax.nn.conv3d_transpose" not in names
    grad = transform.DecomposeOps()(transform.Gradient("main")(mod))
    names = _ops_of(grad["main_adjoint"])
    assert names.count("relax.nn.conv2d_transpose") == 1 and names.count("relax.nn.conv2d") == 2
    assert "relax.nn.conv3d_transpose" not in names and "relax.nn.conv3d" not in names
