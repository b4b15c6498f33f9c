"""Strided convolutions and poolings over a symbolic height and width: their sizes are floor quotients
(``((h + 1) // 2)``), they compile, and the compiled forward and gradients equal PyTorch's at several sizes."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import transform
from relax_mlir.ir.sym import SizeVar, floor_div
from relax_mlir.script import from_source

torch = pytest.importorskip("torch")  # the dev extra installs it: this runs in CI

SOURCE = '''
@I.ir_module
class Module:
    @R.function
    def f(x: R.Tensor((2, 3, "h", "w"), "float32"), k: R.Tensor((4, 3, 3, 3), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            a = R.nn.conv2d(x, k, strides=[2, 2], padding=[1, 1, 1, 1])
            b = R.nn.max_pool2d(a, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1])
            c = R.nn.avg_pool2d(b, pool_size=[2, 2], strides=[2, 2], ceil_mode=True)
            d = R.sum(R.multiply(c, c))
            R.output(d)
        return d
'''


def _torch_loss(x, k):
    a = torch.nn.functional.conv2d(x, k, stride=2, padding=1)
    b = torch.nn.functional.max_pool2d(a, 3, 2, 1)
    c = torch.nn.functional.avg_pool2d(b, 2, 2, ceil_mode=True)
    return (c * c).sum(), c


def test_window_sizes_are_floor_quotients_that_read_back():
    mod = from_source(SOURCE)
    h = SizeVar("h")
    c = mod["f"].body.blocks[0].bindings[2].var.struct_info
    # conv (h + 2 - 3) // 2 + 1, max-pool the same again, avg-pool with ceil: one quotient, h + 7 over 8
    assert c.shape[2] == floor_div(h + 7, 8)
    assert "((h + 7) // 8)" in mod.script()
    assert relax_mlir.ir.structural_equal(from_source(mod.script()), mod)


def test_compiled_forward_and_gradients_equal_pytorch_at_several_sizes():
    mod = transform.Gradient("f")(from_source(SOURCE))
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod))
    rng = np.random.default_rng(0)
    # (at w = 4 the 2-wide ceil-mode average-pooling window meets a 1-wide input: one output, as in PyTorch)
    for h, w in [(8, 8), (9, 13), (16, 5), (11, 4)]:
        x = rng.standard_normal((2, 3, h, w)).astype("float32")
        k = rng.standard_normal((4, 3, 3, 3)).astype("float32")
        tx, tk = torch.tensor(x, requires_grad=True), torch.tensor(k, requires_grad=True)
        loss, _ = _torch_loss(tx, tk)
        loss.backward()
        value, (dx, dk) = vm["f_adjoint"](x, k)
        np.testing.assert_allclose(value, loss.item(), rtol=1e-5)
        np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(dk, tk.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_a_slice_to_symbolic_bounds_is_checked_against_its_inferred_size():
    mod = from_source('''
@I.ir_module
class Module:
    @R.function
    def f(x: R.Tensor(("n", "m"), "float32"), y: R.Tensor(("k",), "float32")) -> R.Tensor(("k", "m"), "float32"):
        with R.dataflow():
            a = R.strided_slice(x, axes=[0], begin=[0], end=["k"])
            R.output(a)
        return a
''')
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod))
    x = np.arange(12, dtype="float32").reshape(4, 3)
    np.testing.assert_array_equal(vm["f"](x, np.zeros(3, "float32")), x[:3])
    # k = 6 is past the 4 rows: the slice is clamped into x (nothing outside it is read) and the result's size,
    # 4 rows where its struct info says k = 6, is reported.
    with pytest.raises(ValueError, match="result .result.: dimension 0 is 4, expected k"):
        vm["f"](x, np.zeros(6, "float32"))


@pytest.mark.parametrize("call, extent", [("R.nn.conv2d(x, k)", 5), ("R.nn.conv2d(x, k, dilation=[2, 1])", 9),
                                          ("R.nn.max_pool2d(x, pool_size=[7, 7], strides=[2, 2], ceil_mode=True)", 7),
                                          ("R.nn.avg_pool2d(x, pool_size=[7, 7], strides=[2, 2], ceil_mode=True)", 7)])
def test_a_window_larger_than_the_symbolic_input_is_refused_at_run_time(call, extent):
    """A 5-row window (9 dilated by 2) does not fit 4 rows: no output (the static-shape inference refuses it; the
    loops gave an empty conv2d). In ceil mode a window may hang past the input by less than a stride (PyTorch's
    rule): a 7-row one over 4 rows at stride 2 hangs by 3 and is refused too. Each fits 9 rows."""
    mod = from_source(f'''
@I.ir_module
class Module:
    @R.function
    def f(x: R.Tensor((1, 2, "h", "w"), "float32"), k: R.Tensor((3, 2, 5, 5), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            c = {call}
            s = R.sum(c)
            R.output(s)
        return s
''')
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod))
    k = np.ones((3, 2, 5, 5), "float32")
    with pytest.raises(ValueError, match=rf"^f: binding 'c': relax\.nn\.\w+: the height window \(extent {extent}\) is "
                                         r"larger than the padded input \(4\)$"):
        vm["f"](np.ones((1, 2, 4, 9), "float32"), k)
    x = np.ones((1, 2, 9, 9), "float32")
    if "conv2d" in call:  # PyTorch refuses the 4 rows too
        with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input size"):
            torch.nn.functional.conv2d(torch.ones(1, 2, 4, 9), torch.from_numpy(k), dilation=(extent // 4, 1))
        want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(k), dilation=(extent // 4, 1)).sum()
    else:
        with pytest.raises(RuntimeError, match="Output size is too small"):
            getattr(torch.nn.functional, call[5:15])(torch.ones(1, 2, 4, 9), 7, 2, ceil_mode=True)
        want = getattr(torch.nn.functional, call[5:15])(torch.from_numpy(x), 7, 2, ceil_mode=True).sum()
    np.testing.assert_allclose(vm["f"](x, k), want.item(), rtol=1e-6)


@pytest.mark.parametrize("pool", ["max_pool2d", "avg_pool2d"])
@pytest.mark.parametrize("width, kernel, stride", [(1, 2, 2), (3, 5, 3), (4, 5, 5), (5, 2, 2)])
def test_a_ceil_mode_window_may_hang_past_the_input_by_less_than_a_stride(pool, width, kernel, stride):
    """PyTorch's (and TVM's) ceil mode: a 2-wide window over one column gives one output, statically and for a size
    known at run time, interpreted and compiled."""
    x = (np.arange(width, dtype="float32") + 1).reshape(1, 1, 1, width)
    want = getattr(torch.nn.functional, pool)(torch.from_numpy(x), (1, kernel), (1, stride), ceil_mode=True).numpy()
    for w in (width, '"w"'):
        mod = from_source(f'''
@I.ir_module
class Module:
    @R.function
    def f(x: R.Tensor((1, 1, 1, {w}), "float32")):
        y = R.nn.{pool}(x, pool_size=[1, {kernel}], strides=[1, {stride}], ceil_mode=True)
        return y
''')
        for got in (relax_mlir.interpret(mod, "f", x), relax_mlir.VirtualMachine(relax_mlir.compile(mod))["f"](x)):
            np.testing.assert_allclose(got, want, rtol=1e-6)
