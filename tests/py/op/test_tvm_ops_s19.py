"""TVM Relax ops TVMScript programs use: ``scatter_nd``, ``ewise_fma``, ``image.resize2d`` and
``dynamic_strided_slice``, read from TVM's text, interpreted and compiled, against NumPy, PyTorch and hand-derived
values (the registry sweeps check each record's samples besides)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import relax_mlir
from relax_mlir import op, transform
from relax_mlir.interpreter import interpret
from relax_mlir.ir import BlockBuilder, TensorStructInfo, Var
from relax_mlir.op.indexing import DYNAMIC_SLICE_CASES
from relax_mlir.script import from_source
from relax_mlir.script import relax as R
from relax_mlir.testing import roundtrip


def _run_both(mod, fn, *args):
    """The interpreter's result and the compiled one's, which must agree."""
    want = interpret(mod, fn, *args)
    got = relax_mlir.VirtualMachine(relax_mlir.compile(mod))[fn](*args)
    return want, got


def _module(params: str, body: str, ret: str = "r"):
    return from_source(f"@I.ir_module\nclass M:\n    @R.function\n    def main({params}):\n"
                       + "".join(f"        {line}\n" for line in body.splitlines()) + f"        return {ret}\n")


# -- scatter_nd -------------------------------------------------------------------------------------------------

def test_scatter_nd_is_tvm_s_documented_example_interpreted_and_compiled():
    mod = _module('d: R.Tensor((8,), "float32"), i: R.Tensor((4, 1), "int64"), u: R.Tensor((4,), "float32")',
                  "r = R.scatter_nd(d, i, u)")
    d, i, u = np.arange(1, 9, dtype="float32"), np.array([[4], [3], [1], [7]]), np.array([9, 10, 11, 12], "float32")
    for got in _run_both(mod, "main", d, i, u):
        np.testing.assert_array_equal(got, [1, 11, 3, 10, 9, 6, 7, 12])


def _nd_oracle(data, indices, updates, reduction):
    """ONNX's ScatterND written out with NumPy's unbuffered ``ufunc.at`` (repeated targets combine in order)."""
    out = data.copy()
    k = indices.shape[-1]
    target = tuple(np.moveaxis(indices.reshape(-1, k), -1, 0))
    rows = updates.reshape((-1,) + data.shape[k:])
    if reduction == "update":
        for j in range(rows.shape[0]):
            out[tuple(t[j] for t in target)] = rows[j]
        return out
    {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}[reduction].at(out, target, rows)
    return out


@pytest.mark.parametrize("reduction", ["update", "add", "mul", "min", "max"])
def test_scatter_nd_reductions_with_repeated_and_negative_indices(reduction):
    mod = _module('d: R.Tensor((3, 4, 2), "float64"), i: R.Tensor((2, 3, 2), "int32"), '
                  'u: R.Tensor((2, 3, 2), "float64")', f'r = R.scatter_nd(d, i, u, reduction="{reduction}")')
    rng = np.random.default_rng(1)
    d, u = rng.uniform(-2, 2, (3, 4, 2)), rng.uniform(-2, 2, (2, 3, 2))
    i = np.array([[[0, 1], [2, -1], [-3, 1]], [[1, 0], [0, 1], [2, 3]]], "int32")  # (0, 1) three times, -3 is 0
    want = _nd_oracle(d, np.where(i < 0, i + np.array([3, 4]), i), u, reduction)
    for got in _run_both(mod, "main", d, i, u):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_scatter_nd_whole_index_tuples_write_single_elements():
    mod = _module('d: R.Tensor((2, 3), "int64"), i: R.Tensor((2, 2), "int64"), u: R.Tensor((2,), "int64")',
                  "r = R.scatter_nd(d, i, u, 'add')")
    d, i, u = np.zeros((2, 3), "int64"), np.array([[1, 2], [0, 0]]), np.array([5, 7])
    for got in _run_both(mod, "main", d, i, u):
        np.testing.assert_array_equal(got, [[7, 0, 0], [0, 0, 5]])


def test_scatter_nd_refuses_an_out_of_range_index_naming_its_axis():
    mod = _module('d: R.Tensor((3, 4), "float32"), i: R.Tensor((2, 2), "int64"), u: R.Tensor((2,), "float32")',
                  "r = R.scatter_nd(d, i, u)")
    args = (np.zeros((3, 4), "float32"), np.array([[0, 1], [2, 4]]), np.ones(2, "float32"))
    with pytest.raises(IndexError, match=r"index 4 at position 3 .* out of range for axis 1 of size 4"):
        interpret(mod, "main", *args)
    with pytest.raises(IndexError, match=r"binding 'r': relax.scatter_nd: index 4 at position 3 of the indices "
                                         r"\(flat, shape \(2, 2\)\) is out of range for axis 1 of size 4"):
        relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*args)


def test_scatter_nd_update_gradient_goes_to_the_last_writer():
    """d/d data is 0 where anything was written; of the updates, a target written twice gives the adjoint to the
    later write only (TVM's serial order)."""
    x = Var("x", TensorStructInfo((4, 2), "float64"))
    u = Var("u", TensorStructInfo((3, 2), "float64"))
    w = Var("w", TensorStructInfo((4, 2), "float64"))
    idx = relax_mlir.const(np.array([[1], [3], [1]]), "int64")
    bb = BlockBuilder()
    with bb.function("main", [x, u, w]):
        with bb.dataflow():
            y = bb.emit(op.scatter_nd(x, idx, u))
            out = bb.emit_output(op.sum(op.multiply(y, w)))
        bb.emit_func_output(out)
    adjoint = transform.Gradient("main", require_grads=[x, u])(bb.get())
    wv = np.arange(8.0).reshape(4, 2) + 1
    args = (np.zeros((4, 2)), np.ones((3, 2)), wv)
    for _, (gx, gu) in _run_both(adjoint, "main_adjoint", *args):
        np.testing.assert_array_equal(gx, [[1, 2], [0, 0], [5, 6], [0, 0]])
        np.testing.assert_array_equal(gu, [[0, 0], [7, 8], [3, 4]])


def test_scatter_nd_add_gradient_reads_the_adjoint_at_each_target():
    x = Var("x", TensorStructInfo((3, 2, 2), "float64"))
    u = Var("u", TensorStructInfo((2, 2), "float64"))
    w = Var("w", TensorStructInfo((3, 2, 2), "float64"))
    idx = relax_mlir.const(np.array([[2, -1], [2, 1]]), "int64")  # the same target twice
    bb = BlockBuilder()
    with bb.function("main", [x, u, w]):
        with bb.dataflow():
            out = bb.emit_output(op.sum(op.multiply(op.scatter_nd(x, idx, u, "add"), w)))
        bb.emit_func_output(out)
    adjoint = transform.Gradient("main", require_grads=[x, u])(bb.get())
    wv = np.arange(12.0).reshape(3, 2, 2)
    for _, (gx, gu) in _run_both(adjoint, "main_adjoint", np.zeros((3, 2, 2)), np.ones((2, 2)), wv):
        np.testing.assert_array_equal(gx, wv)
        np.testing.assert_array_equal(gu, [wv[2, 1], wv[2, 1]])


def test_scatter_nd_inference_refuses_updates_of_the_wrong_shape():
    with pytest.raises(Exception, match=r"updates \(2, 3\) must have the shape indices.shape\[:-1\] \+ "
                                        r"data.shape\[2:\] = \(2,\)"):
        _module('d: R.Tensor((3, 4), "float32"), i: R.Tensor((2, 2), "int64"), u: R.Tensor((2, 3), "float32")',
                "r = R.scatter_nd(d, i, u)")


# -- ewise_fma --------------------------------------------------------------------------------------------------

def test_ewise_fma_is_a_multiply_then_an_add():
    mod = _module('a: R.Tensor(("n", 3), "float32"), b: R.Tensor(("n", 3), "float32"), '
                  'c: R.Tensor(("n", 3), "float32")', "r = R.ewise_fma(a, b, c)")
    rng = np.random.default_rng(2)
    a, b, c = (rng.standard_normal((4, 3)).astype("float32") for _ in range(3))
    for got in _run_both(mod, "main", a, b, c):
        np.testing.assert_array_equal(got, a * b + c)
    assert roundtrip(mod)


def test_ewise_fma_refuses_broadcasting_as_tvm_does():
    with pytest.raises(Exception, match=r"relax.ewise_fma: the 3 operands must have the same shape"):
        _module('a: R.Tensor((2, 3), "float32"), b: R.Tensor((2, 3), "float32"), c: R.Tensor((1, 3), "float32")',
                "r = R.ewise_fma(a, b, c)")


def test_ewise_fma_gradient():
    a, b, c = (Var(n, TensorStructInfo((2, 2), "float64")) for n in "abc")
    bb = BlockBuilder()
    with bb.function("main", [a, b, c]):
        with bb.dataflow():
            out = bb.emit_output(op.sum(op.ewise_fma(a, b, c)))
        bb.emit_func_output(out)
    adjoint = transform.Gradient("main")(bb.get())
    av, bv, cv = np.array([[1.0, 2], [3, 4]]), np.array([[5.0, 6], [7, 8]]), np.zeros((2, 2))
    for loss, (ga, gb, gc) in _run_both(adjoint, "main_adjoint", av, bv, cv):
        assert loss == 70.0
        np.testing.assert_array_equal(ga, bv)
        np.testing.assert_array_equal(gb, av)
        np.testing.assert_array_equal(gc, np.ones((2, 2)))


# -- image.resize2d ---------------------------------------------------------------------------------------------

_TORCH_MODES = [  # (method, coordinate_transformation_mode, rounding_method) -> torch's interpolate keywords
    (("linear", "half_pixel", ""), dict(mode="bilinear", align_corners=False)),
    (("linear", "align_corners", ""), dict(mode="bilinear", align_corners=True)),
    (("nearest_neighbor", "asymmetric", "floor"), dict(mode="nearest")),
    (("nearest_neighbor", "half_pixel", "round_prefer_ceil"), dict(mode="nearest-exact")),
    (("cubic", "half_pixel", ""), dict(mode="bicubic", align_corners=False)),
    (("cubic", "align_corners", ""), dict(mode="bicubic", align_corners=True)),
]


def _resize_module(shape, size, dtype="float32", **attrs):
    x = Var("x", TensorStructInfo(shape, dtype))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(op.image.resize2d(x, size, **attrs))
        bb.emit_func_output(out)
    return bb.get()


@pytest.mark.parametrize("ours, theirs", _TORCH_MODES, ids=lambda v: str(v))
@pytest.mark.parametrize("size", [(9, 5), (3, 2)], ids=["up", "down"])
def test_resize2d_matches_torch_interpolate(ours, theirs, size):
    method, mode, rounding = ours
    x = np.random.default_rng(3).standard_normal((2, 3, 6, 4)).astype("float32")
    want = torch.nn.functional.interpolate(torch.from_numpy(x), size=size, **theirs).numpy()
    mod = _resize_module((2, 3, 6, 4), size, method=method, coordinate_transformation_mode=mode,
                         rounding_method=rounding)
    for got in _run_both(mod, "main", x):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_resize2d_nhwc_is_nchw_between_permutations():
    x = np.random.default_rng(4).standard_normal((1, 5, 4, 3)).astype("float32")
    want = torch.nn.functional.interpolate(torch.from_numpy(x).permute(0, 3, 1, 2), size=(7, 6),
                                           mode="bilinear", align_corners=False).permute(0, 2, 3, 1).numpy()
    for got in _run_both(_resize_module((1, 5, 4, 3), (7, 6), layout="NHWC"), "main", x):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_resize2d_tf_crop_and_resize_by_hand():
    """A 1x3 row, 2x2 output: roi rows 0 to 0 (both output rows at input row 0), columns from -0.5 to 1, so the
    input columns -1 (outside: the extrapolation value) and 2 (the last pixel)."""
    x = np.array([[[[1.0, 2.0, 4.0]]]], "float32")
    mod = _resize_module((1, 1, 1, 3), (2, 2), coordinate_transformation_mode="tf_crop_and_resize",
                         roi=(0.0, -0.5, 0.0, 1.0), extrapolation_value=-7.0)
    for got in _run_both(mod, "main", x):
        np.testing.assert_array_equal(got, [[[[-7.0, 4.0], [-7.0, 4.0]]]])


def test_resize2d_cubic_exclude_renormalizes_the_taps_inside_by_hand():
    """Upscaling 2 pixels [0, 1] to 4 with half_pixel: output 0 reads coordinate -0.25, floor -1, t = 0.75. With
    ``cubic_exclude`` only the taps at 0 and 1 stay: Keys' weights (alpha -0.5) w2 = 0.15625, w3 = -0.03125... of
    t = 0.75 there: (a+2)t^3-(a+3)t^2+1 and -(a+2)t^3+(2a+3)t^2-a t, normalized."""
    a, t = -0.5, 0.75
    w_at_0 = -(a + 2) * t**3 + (2 * a + 3) * t**2 - a * t  # the tap at base + 1 = 0
    w_at_1 = -a * t**3 + a * t**2  # the tap at base + 2 = 1
    want0 = (w_at_0 * 0 + w_at_1 * 1) / (w_at_0 + w_at_1)
    x = np.array([[[[0.0, 1.0]]]])
    mod = _resize_module((1, 1, 1, 2), (1, 4), "float64", method="cubic", cubic_exclude=1, cubic_alpha=a)
    for got in _run_both(mod, "main", x):
        np.testing.assert_allclose(got[0, 0, 0, 0], want0, rtol=1e-12)
        np.testing.assert_allclose(got[0, 0, 0], 1 - got[0, 0, 0, ::-1], rtol=1e-12)  # symmetric


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_resize2d_gradient_matches_torch_autograd(mode):
    x = np.random.default_rng(5).standard_normal((1, 2, 3, 5))
    w = np.random.default_rng(6).standard_normal((1, 2, 7, 4))
    tx = torch.from_numpy(x).requires_grad_()
    (torch.nn.functional.interpolate(tx, size=(7, 4), mode=mode, **({"align_corners": False} if mode == "bilinear"
                                                                      else {})) * torch.from_numpy(w)).sum().backward()
    xv, wv = Var("x", TensorStructInfo((1, 2, 3, 5), "float64")), Var("w", TensorStructInfo((1, 2, 7, 4), "float64"))
    bb = BlockBuilder()
    method, rounding, ctm = ("linear", "", "half_pixel") if mode == "bilinear" else \
        ("nearest_neighbor", "floor", "asymmetric")
    with bb.function("main", [xv, wv]):
        with bb.dataflow():
            y = op.image.resize2d(xv, (7, 4), method=method, rounding_method=rounding,
                                  coordinate_transformation_mode=ctm)
            out = bb.emit_output(op.sum(op.multiply(y, wv)))
        bb.emit_func_output(out)
    adjoint = transform.Gradient("main", require_grads=[xv])(bb.get())
    for _, (gx,) in _run_both(adjoint, "main_adjoint", x, w):
        np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_resize2d_reads_tvm_s_printed_form():
    """As TVM's importer tests print it: the size as ``R.shape``, the roi as typed numbers."""
    mod = _module('x: R.Tensor((1, 3, 10, 10), dtype="float32")',
                  'r: R.Tensor((1, 3, 20, 20), dtype="float32") = R.image.resize2d(x, R.shape([20, 20]), '
                  'roi=[T.float32(0.0), T.float32(0.0), T.float32(0.0), T.float32(0.0)], layout="NCHW", '
                  'method="linear", coordinate_transformation_mode="half_pixel", rounding_method="round", '
                  'cubic_alpha=-0.75, cubic_exclude=0, extrapolation_value=0.0)')
    assert "R.image.resize2d(x, (20, 20))" in mod.script()
    assert roundtrip(mod)
    assert R.image.resize2d is op.image.resize2d


def test_resize2d_needs_static_spatial_sizes_to_compile():
    mod = _resize_module((1, 1, "h", 4), (2, 2))
    x = np.ones((1, 1, 3, 4), "float32")
    np.testing.assert_array_equal(interpret(mod, "main", x), np.ones((1, 1, 2, 2)))
    with pytest.raises(Exception, match=r"input height and width \(h, 4\) .* must be static"):
        relax_mlir.compile(mod)


# -- dynamic_strided_slice --------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, dtype, bounds", DYNAMIC_SLICE_CASES, ids=[str(c[2]) for c in DYNAMIC_SLICE_CASES])
def test_dynamic_strided_slice_is_numpy_s_slice(shape, dtype, bounds):
    static = tuple(3 if isinstance(d, str) else d for d in shape)
    x = np.arange(int(np.prod(static))).reshape(static).astype(dtype)
    b, e, s = (np.array(v, np.int64) for v in bounds)
    want = x[tuple(slice(*t) for t in zip(b.tolist(), e.tolist(), s.tolist()))]
    n = len(shape)
    dims = ", ".join(f'"{d}"' if isinstance(d, str) else str(d) for d in shape) + ("," if n == 1 else "")
    out = ", ".join(map(str, want.shape)) + ("," if want.ndim == 1 else "")
    mod = _module(f'x: R.Tensor(({dims}), "{dtype}"), b: R.Tensor(({n},), "int64"), e: R.Tensor(({n},), "int64"), '
                  f's: R.Tensor(({n},), "int64")',
                  f"y = R.dynamic_strided_slice(x, b, e, s)\nr = R.match_cast(y, R.Tensor(({out}), \"{dtype}\"))")
    assert mod["main"].body.blocks[0].bindings[0].var.struct_info == TensorStructInfo(None, dtype, n)
    for got in _run_both(mod, "main", x, b, e, s):
        np.testing.assert_array_equal(got, want)


def test_dynamic_strided_slice_refuses_a_zero_stride():
    mod = _module('x: R.Tensor((4,), "float32"), b: R.Tensor((1,), "int64"), e: R.Tensor((1,), "int64"), '
                  's: R.Tensor((1,), "int64")', "y = R.dynamic_strided_slice(x, b, e, s)\nr = R.sum(y)")
    args = (np.ones(4, "float32"), np.array([0]), np.array([4]), np.array([0]))
    with pytest.raises(ValueError, match="stride 0 on axis 0"):
        interpret(mod, "main", *args)
    with pytest.raises(ValueError, match=r"binding 'y': relax.dynamic_strided_slice: stride 0 on axis 0"):
        relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*args)


def test_dynamic_strided_slice_gradient_puts_the_adjoint_back_where_it_read():
    x = Var("x", TensorStructInfo((4, 5), "float64"))
    bounds = [Var(n, TensorStructInfo((2,), "int64")) for n in "bes"]
    bb = BlockBuilder()
    with bb.function("main", [x, *bounds]):
        with bb.dataflow():
            y = bb.emit(op.dynamic_strided_slice(x, *bounds))
            y = bb.match_cast(y, TensorStructInfo((2, 3), "float64"))  # (the adjoint of sum needs a shape)
            out = bb.emit_output(op.sum(op.multiply(y, y)))
        bb.emit_func_output(out)
    adjoint = transform.Gradient("main", require_grads=[x])(bb.get())
    xv = np.arange(20.0).reshape(4, 5)
    b, e, s = np.array([-1, 0]), np.array([0, 5]), np.array([-2, 2])
    want = np.zeros_like(xv)
    want[-1:0:-2, 0:5:2] = 2 * xv[-1:0:-2, 0:5:2]
    for loss, (gx,) in _run_both(adjoint, "main_adjoint", xv, b, e, s):
        assert loss == np.sum(xv[-1:0:-2, 0:5:2] ** 2)
        np.testing.assert_array_equal(gx, want)
