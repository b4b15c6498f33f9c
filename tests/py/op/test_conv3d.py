"""``relax.nn.conv3d``, ``conv1d_transpose``, ``max_pool3d``, ``avg_pool3d`` and ``adaptive_avg_pool3d`` against an
independent oracle, PyTorch's functional ops (the registry sweep checks each record's NumPy reference, gradient and
compiled code against one another): the reference, the interpreter and compiled code; the max pool's gradient at
ties; TVM's attribute spellings; and the decomposition that gives conv3d conv2d's schedules.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import relax_mlir  # noqa: E402
from relax_mlir import BlockBuilder, TensorStructInfo, Var, op, transform  # noqa: E402
from relax_mlir.ir.expr import Call  # noqa: E402
from relax_mlir.ir.visitor import post_order_visit  # noqa: E402

_RNG = np.random.default_rng(7)


def _module(build, *shapes, dtype="float32"):
    """``main(*params) = build(*params)``, one parameter per shape."""
    params = [Var(f"a{i}", TensorStructInfo(s, dtype)) for i, s in enumerate(shapes)]
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(build(*params))
        bb.emit_func_output(out)
    return bb.get()


def _both(mod, *arrays):
    """The interpreter's and the compiled code's results."""
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"]
    return [relax_mlir.interpret(mod, "main", *arrays), compiled(*arrays)]


def _randn(*shape):
    return _RNG.standard_normal(shape).astype("float32")


# (relax attributes, the torch call's keywords, padding for F.pad before it: (left, right, top, bottom, front, back))
_CONV3D = [
    ({}, {}, None),
    ({"padding": 1}, {"padding": 1}, None),
    ({"strides": (2, 1, 2), "padding": (1, 0, 2), "dilation": (1, 2, 1)},
     {"stride": (2, 1, 2), "padding": (1, 0, 2), "dilation": (1, 2, 1)}, None),
    ({"padding": (1, 0, 2, 0, 1, 1), "groups": 2}, {"groups": 2}, (2, 1, 0, 1, 1, 0)),  # front, top, left, back, ...
]


@pytest.mark.parametrize("attrs, torch_kw, pad", _CONV3D)
def test_conv3d_is_pytorchs(attrs, torch_kw, pad):
    x, w = _randn(2, 4, 5, 6, 7), _randn(6, 4 // attrs.get("groups", 1), 3, 2, 3)
    xt = torch.tensor(x) if pad is None else F.pad(torch.tensor(x), pad)
    want = F.conv3d(xt, torch.tensor(w), **torch_kw).numpy()
    call = op.nn.conv3d(Var("x", TensorStructInfo(x.shape, "float32")), Var("w", TensorStructInfo(w.shape, "float32")),
                        **attrs)
    np.testing.assert_allclose(call.op.reference(x, w, **call.attrs), want, rtol=1e-5, atol=1e-5)
    for got in _both(_module(lambda a, b: op.nn.conv3d(a, b, **attrs), x.shape, w.shape), x, w):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_conv3d_padding_takes_tvm_s_spellings():
    x = Var("x", TensorStructInfo((1, 2, 6, 6, 6), "float32"))
    w = Var("w", TensorStructInfo((3, 2, 3, 3, 3), "float32"))
    assert op.nn.conv3d(x, w, padding=1).attrs["padding"] == (1,) * 6
    assert op.nn.conv3d(x, w, padding=(1, 2, 0)).attrs["padding"] == (1, 2, 0, 1, 2, 0)
    assert op.nn.conv3d(x, w, padding=(1, 2, 0, 0, 1, 2)).struct_info.shape == (1, 3, 5, 7, 6)
    assert op.nn.conv3d(x, w, strides=2).attrs["strides"] == (2, 2, 2)
    with pytest.raises(ValueError, match=r"relax.nn.conv3d: padding must be an int or a tuple of 1, 3 or 6 ints, "
                                         r"got \(1, 1, 1, 1\)"):
        op.nn.conv3d(x, w, padding=(1, 1, 1, 1))


def _ops_of(mod) -> list[str]:
    names: list[str] = []
    post_order_visit(mod["main"], lambda e: names.append(e.op.name) if isinstance(e, Call) else None)
    return names


def test_conv3d_decomposes_into_one_conv2d():
    """Its forward is one conv2d (the op conv2d's schedules compile) whatever the kernel depth, and its gradients
    are conv2d's (a conv2d_transpose and a weight-gradient conv2d): no 3-D loop nest."""
    mod = _module(lambda a, b: op.sum(op.nn.conv3d(a, b, padding=1, strides=(2, 1, 1))), (2, 3, 6, 8, 8),
                  (4, 3, 3, 3, 3))
    names = _ops_of(transform.DecomposeOps()(mod))
    assert names.count("relax.nn.conv2d") == 1 and "relax.nn.conv3d" not in names
    grad = transform.DecomposeOps()(transform.Gradient("main")(mod))
    names = []
    post_order_visit(grad["main_adjoint"], lambda e: names.append(e.op.name) if isinstance(e, Call) else None)
    assert names.count("relax.nn.conv2d") == 2 and names.count("relax.nn.conv2d_transpose") == 1


def test_conv3d_gradients_are_pytorchs():
    x, w = _randn(2, 4, 5, 6, 6), _randn(6, 2, 3, 3, 2)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    weights = _randn(2, 6, 3, 3, 2)
    y = F.conv3d(xt, wt, stride=2, padding=(1, 1, 0), dilation=(1, 1, 2), groups=2)
    (y * torch.tensor(weights)).sum().backward()
    attrs = {"strides": 2, "padding": (1, 1, 0), "dilation": (1, 1, 2), "groups": 2}
    mod = _module(lambda a, b, c: op.sum(op.multiply(op.nn.conv3d(a, b, **attrs), c)), x.shape, w.shape,
                  weights.shape)
    adjoint = transform.Gradient("main", require_grads=["a0", "a1"])(mod)
    for run in (lambda *a: relax_mlir.interpret(adjoint, "main_adjoint", *a),
                relax_mlir.VirtualMachine(relax_mlir.compile(adjoint))["main_adjoint"]):
        _, (dx, dw) = run(x, w, weights)
        np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(dw, wt.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("attrs, torch_kw", [
    ({}, {}),
    ({"strides": 3, "padding": (2, 1), "output_padding": 1, "dilation": 2, "groups": 2},
     None),  # asymmetric padding: PyTorch's symmetric 1 and the extra left column cropped
])
def test_conv1d_transpose_is_pytorchs(attrs, torch_kw):
    x, w = _randn(2, 4, 6), _randn(4, 3, 3)
    if torch_kw is None:
        full = F.conv_transpose1d(torch.tensor(x), torch.tensor(w), stride=3, padding=1, output_padding=1, dilation=2,
                                  groups=2)
        want = full[:, :, 1:].numpy()
    else:
        want = F.conv_transpose1d(torch.tensor(x), torch.tensor(w)).numpy()
    for got in _both(_module(lambda a, b: op.nn.conv1d_transpose(a, b, **attrs), x.shape, w.shape), x, w):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


_POOLS = [  # (relax attributes, torch keywords)
    ({"pool_size": 2, "strides": 2}, {"kernel_size": 2}),
    ({"pool_size": 3, "strides": 2, "padding": 1, "ceil_mode": True},
     {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    ({"pool_size": (2, 3, 2), "strides": (1, 2, 3), "padding": (1, 1, 0)},
     {"kernel_size": (2, 3, 2), "stride": (1, 2, 3), "padding": (1, 1, 0)}),
]


@pytest.mark.parametrize("attrs, torch_kw", _POOLS)
def test_3d_pools_are_pytorchs(attrs, torch_kw):
    """Max, and average with TVM's and PyTorch's default ``count_include_pad=True`` and without it."""
    x = _randn(2, 3, 5, 6, 7)
    cases = [(op.nn.max_pool3d, {}, F.max_pool3d(torch.tensor(x), **torch_kw)),
             (op.nn.avg_pool3d, {}, F.avg_pool3d(torch.tensor(x), **torch_kw)),
             (op.nn.avg_pool3d, {"count_include_pad": False},
              F.avg_pool3d(torch.tensor(x), count_include_pad=False, **torch_kw))]
    for pool, extra, want in cases:
        for got in _both(_module(lambda a: pool(a, **attrs, **extra), x.shape), x):
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


def test_a_3d_max_pool_s_gradient_at_ties_goes_to_the_first_maximum_as_pytorch_s():
    x = _RNG.integers(0, 3, (2, 2, 4, 6, 7)).astype("float32")  # many ties in every window
    weights = _randn(2, 2, 3, 4, 4)
    xt = torch.tensor(x, requires_grad=True)
    (F.max_pool3d(xt, 3, stride=2, padding=1, ceil_mode=True) * torch.tensor(weights)).sum().backward()
    mod = _module(lambda a, c: op.sum(op.multiply(op.nn.max_pool3d(a, pool_size=3, strides=2, padding=1,
                                                                   ceil_mode=True), c)), x.shape, weights.shape)
    adjoint = transform.DecomposeOpsForTraining()(transform.Gradient("main", require_grads=["a0"])(mod))
    for run in (lambda *a: relax_mlir.interpret(adjoint, "main_adjoint", *a),
                relax_mlir.VirtualMachine(relax_mlir.compile(adjoint))["main_adjoint"]):
        _, (dx,) = run(x, weights)
        np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("size", [1, (2, 4, 3), (5, 2, 7)])
def test_adaptive_avg_pool3d_is_pytorchs(size):
    x = _randn(2, 3, 5, 6, 7)
    want = F.adaptive_avg_pool3d(torch.tensor(x), size).numpy()
    for got in _both(_module(lambda a: op.nn.adaptive_avg_pool3d(a, output_size=size), x.shape), x):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
