"""TVM's op tests replayed (s19), part A: calls TVM accepts that relax-mlir refused or built differently, and the
one it refused where relax-mlir accepted. Each is interpreted and compiled against a NumPy oracle written here:
``nn.prelu`` with one shared slope, ``full``/``full_like`` with a 0-d tensor fill value, ``reshape``'s -1 as a
floor quotient, poolings with padding wider than half the window, ``topk`` with ``k`` beyond the axis, and grouped
convolutions whose output channels no value makes divisible."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import BlockBuilder, TensorStructInfo as T, Var, op, transform
from relax_mlir.interpreter import interpret
from relax_mlir.ir import assert_structural_equal
from relax_mlir.ir.sym import SizeVar
from relax_mlir.script import from_source
from relax_mlir.testing import roundtrip


def _both(mod, *args, fn="main"):
    """The interpreter's result and the compiled one's (each checked by the caller)."""
    roundtrip(mod)
    return interpret(mod, fn, *args), relax_mlir.VirtualMachine(relax_mlir.compile(mod))[fn](*args)


def _one_op(make, *params, dataflow=True):
    """A module whose main returns ``make(*params)`` (in a dataflow block, or a plain one as ``_text`` writes)."""
    bb = BlockBuilder()
    with bb.function("main", list(params)):
        if dataflow:
            with bb.dataflow():
                out = bb.emit_output(make(*params))
        else:
            out = bb.emit(make(*params))
        bb.emit_func_output(out)
    return bb.get()


def _text(params: str, body: str, ret: str = "r"):
    return from_source(f"@I.ir_module\nclass M:\n    @R.function\n    def main({params}):\n"
                       + "".join(f"        {line}\n" for line in body.splitlines()) + f"        return {ret}\n")


# -- 1. prelu with one slope ---------------------------------------------------------------------------------

def test_prelu_with_one_slope_for_every_channel_as_pytorch_default_prelu():
    mod = _text('x: R.Tensor((2, 4, 3, 5), "float32"), a: R.Tensor((1,), "float32")', "r = R.nn.prelu(x, a)")
    assert mod["main"].ret_struct_info == T((2, 4, 3, 5), "float32")
    x = np.random.default_rng(0).standard_normal((2, 4, 3, 5)).astype("float32")
    a = np.array([0.25], "float32")
    for got in _both(mod, x, a):
        np.testing.assert_allclose(got, np.where(x > 0, x, 0.25 * x), rtol=1e-6)


def test_prelu_still_refuses_a_slope_count_that_is_neither_one_nor_the_channels():
    with pytest.raises(ValueError, match=r"relax.nn.prelu: alpha must have shape \(4,\) \(data's axis 1\) or "
                                         r"\(1,\), got \(3,\)"):
        op.nn.prelu(Var("x", T((2, 4, 3), "float32")), Var("a", T((3,), "float32")))


# -- 2. full / full_like with a 0-d tensor fill value --------------------------------------------------------

def test_full_with_a_tensor_fill_value_builds_what_the_parser_builds():
    v = Var("v", T((), "int32"))
    built = _one_op(lambda v: op.full((2, 3), v, "float32"), v, dataflow=False)
    parsed = _text('v: R.Tensor((), "int32")', 'r = R.full((2, 3), v, "float32")')
    assert_structural_equal(built, parsed)
    for got in _both(built, np.array(7, "int32")):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, np.full((2, 3), 7.0, np.float32))


def test_full_like_with_a_tensor_fill_value_takes_the_shape_and_dtype_of_x():
    x, v = Var("x", T(("n", 3), "float32")), Var("v", T((), "float64"))
    mod = _one_op(lambda x, v: op.full_like(x, v), x, v)
    assert mod["main"].ret_struct_info == T((SizeVar("n"), 3), "float32")
    for got in _both(mod, np.zeros((4, 3), "float32"), np.array(-0.0, "float64")):
        assert got.dtype == np.float32 and got.shape == (4, 3)
        assert np.all(got == 0) and np.all(np.signbit(got))  # -0.0 kept: no arithmetic on the value


def test_full_with_a_tensor_fill_value_of_its_own_dtype_is_a_broadcast_of_it():
    v = Var("v", T((), "float16"))
    call = op.full(("n", 2), v)
    assert call.op.name == "relax.broadcast_to" and call.args[0] is v
    assert call.struct_info == T((SizeVar("n"), 2), "float16")


@pytest.mark.parametrize("make,error", [
    (lambda: op.full((2,), Var("v", T((2,), "float32"))),
     r"relax.full: fill_value must be a 0-d tensor \(TVM's zero-rank fill value\) or a number, got "),
    (lambda: op.full_like(Var("x", T(None, "float32", 2)), Var("v", T((), "float32"))),
     r"relax.full_like: a fill value known only at run time needs the shape of x, got "),
    (lambda: op.full((2,), Var("v", T((), "float32")), "float8"), r"relax.full: dtype: unknown dtype 'float8'"),
    (lambda: op.full((2,), Var("v", T((), "float32")), fill_value=1), r"attribute 'fill_value' given twice")])
def test_tensor_fill_values_are_checked(make, error):
    with pytest.raises((ValueError, TypeError), match=error):
        make()


# -- 3. reshape's -1 as a floor quotient ---------------------------------------------------------------------

_RESHAPE = _text('x: R.Tensor(("a", "b", "c", "d"), "float32")', 'r = R.reshape(x, (2, -1, "a"))')


def test_reshape_infers_a_floor_quotient_as_tvm():
    assert _RESHAPE["main"].ret_struct_info.shape[1] == (SizeVar("b") * SizeVar("c") * SizeVar("d")) // 2
    assert "(b * c * d // 2)" in _RESHAPE.script()


def test_reshape_with_a_floor_quotient_runs_where_the_count_divides():
    x = np.arange(3 * 2 * 2 * 3, dtype="float32").reshape(3, 2, 2, 3)
    for got in _both(_RESHAPE, x):
        np.testing.assert_array_equal(got, x.reshape(2, 6, 3))


def test_reshape_with_a_floor_quotient_refuses_an_odd_count_at_run_time():
    x = np.ones((3, 1, 3, 3), "float32")  # 27 elements: (2, 4, 3) holds 24
    with pytest.raises(ValueError, match=r"binding 'r': reshape: the input has 27 elements, where the new shape "
                                         r"has 24"):
        relax_mlir.VirtualMachine(relax_mlir.compile(_RESHAPE))["main"](x)
    with pytest.raises(Exception, match=r"binding 'r': relax.reshape failed .* cannot reshape array of size 27"):
        interpret(_RESHAPE, "main", x)


def test_reshape_refuses_a_divisor_no_size_expression_holds():
    with pytest.raises(ValueError, match=r"relax.reshape: cannot reshape \(n, 4\) \(4 \* n elements\) to \(-1, m\): "
                                         r"4 \* n is not an exact multiple of m"):
        op.reshape(Var("x", T(("n", 4), "float32")), (-1, "m"))
    with pytest.raises(ValueError, match=r"cannot reshape \(2, 3\) \(6 elements\) to \(-1, 4\): 6 is not an exact"):
        op.reshape(Var("x", T((2, 3), "float32")), (-1, 4))


# -- 4. pooling with padding wider than half the window ----------------------------------------------------

def _pool_oracle(x, kind, k, s, pads, count_include_pad=False):
    """Direct loops over each output position: max over the window's positions on the input (-inf for none),
    average over them (0 for none; the padding counted too with ``count_include_pad``)."""
    pt, pl, pb, pr = pads
    n, c, h, w = x.shape
    oh, ow = (h + pt + pb - k) // s + 1, (w + pl + pr - k) // s + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            rows = [r for r in range(i * s - pt, i * s - pt + k) if 0 <= r < h]
            cols = [q for q in range(j * s - pl, j * s - pl + k) if 0 <= q < w]
            window = x[:, :, rows][:, :, :, cols].reshape(n, c, -1)
            if kind == "max":
                out[:, :, i, j] = window.max(axis=2) if window.shape[2] else -np.inf
            else:
                count = k * k if count_include_pad else window.shape[2]
                out[:, :, i, j] = window.sum(axis=2) / max(count, 1)
    return out


def test_pooling_with_padding_on_the_default_window_gives_tvm_s_shape():
    mod = _text('x: R.Tensor((2, 3, 32, 32), "float32")', "r = R.nn.max_pool2d(x, padding=1)")
    assert mod["main"].ret_struct_info == T((2, 3, 34, 34), "float32")


@pytest.mark.parametrize("kind,attrs", [
    ("max", {"padding": 1}),
    ("avg", {"padding": 1}),
    ("max", {"pool_size": 2, "padding": (3, 0, 2, 2), "strides": 2}),
    ("avg", {"pool_size": 2, "padding": (3, 0, 2, 2), "strides": 2}),
    ("avg", {"pool_size": 2, "padding": 2, "count_include_pad": True})])
def test_pooling_with_wide_padding_against_direct_loops(kind, attrs):
    x = np.random.default_rng(1).standard_normal((1, 2, 5, 6)).astype("float32")
    mod = _one_op(lambda v: getattr(op.nn, f"{kind}_pool2d")(v, **attrs), Var("x", T((1, 2, 5, 6), "float32")))
    k, s, p = attrs.get("pool_size", 1), attrs.get("strides", 1), attrs["padding"]
    want = _pool_oracle(x.astype(np.float64), kind, k, s, (p,) * 4 if isinstance(p, int) else p,
                        attrs.get("count_include_pad", False))
    for got in _both(mod, x):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_the_gradient_of_a_wide_padding_is_refused_with_the_rule_named():
    x = Var("x", T((1, 2, 5, 5), "float32"))
    mod = _one_op(lambda v: op.sum(op.nn.avg_pool2d(v, padding=1)), x)
    with pytest.raises(ValueError, match=r"relax.grad.avg_pool2d_backward: padding \(1, 1, 1, 1\) must be at most "
                                         r"half the \(dilated\) window \(1, 1\) \(in a gradient\)"):
        transform.Gradient("main")(mod)


# -- 5. topk with k beyond the axis -------------------------------------------------------------------------

def test_topk_with_k_beyond_the_axis_takes_all_of_it_as_tvm():
    mod = _text('x: R.Tensor((2, 10, 4), "float32")', "r = R.topk(x, k=6)")
    assert mod["main"].ret_struct_info.fields[0] == T((2, 10, 4), "float32")
    x = np.random.default_rng(2).permutation(80).reshape(2, 10, 4).astype("float32")
    for values, indices in _both(mod, x):
        np.testing.assert_array_equal(values, -np.sort(-x, axis=-1))
        np.testing.assert_array_equal(indices, np.argsort(-x, axis=-1))


# -- 6. grouped convolution whose output channels are never divisible ---------------------------------------

def test_grouped_conv_refuses_output_channels_no_value_makes_divisible():
    n, c, oc = SizeVar("n"), SizeVar("c"), SizeVar("oc")
    x = Var("x", T((n, c * 6, 28, 28), "float32"))
    for w in (Var("w", T((oc * 6 + 4, c, 3, 3), "float32")), Var("w", T((oc * 6 + 4, c * 6, 3, 3), "float32"))):
        with pytest.raises(ValueError, match=r"relax.nn.conv2d: the 6 \* oc \+ 4 output channels \(weight.shape"
                                             r"\[0\]\) must be divisible by groups 6$"):
            op.nn.conv2d(x, w, groups=6)
    # 3 * oc + 3 is divisible by 6 for odd oc: assumed, as TVM does (checked at run time)
    out = op.nn.conv2d(x, Var("w", T((oc * 3 + 3, c, 3, 3), "float32")), groups=6)
    assert out.struct_info == T((n, oc * 3 + 3, 26, 26), "float32")
    with pytest.raises(ValueError, match=r"the 4 \* oc \+ 2 output channels .* divisible by groups 4"):
        op.nn.conv2d(Var("x", T((1, 8, 5, 5), "float32")), Var("w", T((oc * 4 + 2, 2, 3, 3), "float32")), groups=4)


def test_the_module_form_of_the_grouped_conv_is_refused_where_it_is_written():
    with pytest.raises(Exception, match=r"5:13: relax.nn.conv2d: the 6 \* oc \+ 4 output channels"):
        _text('x: R.Tensor(("n", 6, 8, 8), "float32"), w: R.Tensor(("oc * 6 + 4", 1, 3, 3), "float32"), '
              'o: R.Tensor(("oc",), "float32")', "r = R.nn.conv2d(x, w, groups=6)")


# -- Part B: TVM ops added (the registry sweeps check every record's samples; these pin TVM's own examples) ------

def test_atan2_gives_each_quadrant_and_the_signed_zeros_as_numpy():
    y = np.array([1.0, 1.0, -1.0, -1.0, 0.0, -0.0, 0.0, -0.0, np.inf], "float32")
    x = np.array([1.0, -1.0, -1.0, 1.0, 0.0, 0.0, -0.0, -0.0, -np.inf], "float32")
    mod = _text('y: R.Tensor((9,), "float32"), x: R.Tensor((9,), "float32")', "r = R.atan2(y, x)")
    for got in _both(mod, y, x):
        np.testing.assert_allclose(got, np.arctan2(y, x), rtol=1e-6)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(np.arctan2(y, x)))


def test_atan2_gradient_is_zero_at_the_origin_as_pytorch():
    y, x = Var("y", T((2,), "float64")), Var("x", T((2,), "float64"))
    mod = transform.Gradient("main")(_one_op(lambda a, b: op.sum(op.atan2(a, b)), y, x))
    _, (gy, gx) = interpret(mod, "main_adjoint", np.array([0.0, 3.0]), np.array([0.0, 4.0]))
    np.testing.assert_allclose(gy, [0.0, 4 / 25])
    np.testing.assert_allclose(gx, [0.0, -3 / 25])


def test_relu6_is_tvm_s_clip_and_compiles():
    x = np.array([[-2, 0, 3, 6, 9]], "int32")
    mod = _one_op(op.nn.relu6, Var("x", T((1, 5), "int32")))
    for got in _both(mod, x):
        np.testing.assert_array_equal(got, [[0, 0, 3, 6, 6]])


def test_eye_and_eye_like_against_numpy():
    mod = _text('x: R.Tensor((3, 5), "int64")', 'a = R.eye(4, 3, k=-1)\nb = R.eye_like(x, k=2, dtype="float64")',
                ret="(a, b)")
    for a, b in _both(mod, np.zeros((3, 5), "int64")):
        np.testing.assert_array_equal(a, np.eye(4, 3, -1, "float32"))
        assert a.dtype == np.float32 and b.dtype == np.float64
        np.testing.assert_array_equal(b, np.eye(3, 5, 2))


def test_eye_with_sizes():
    call = op.eye("n", k="k")
    assert call.struct_info == T((SizeVar("n"), SizeVar("n")), "float32")


def test_collapse_sum_like_sums_to_the_target_s_shape():
    mod = _text('x: R.Tensor((2, 3, 4), "float32"), t: R.Tensor((3, 1), "int32")', "r = R.collapse_sum_like(x, t)")
    x = np.arange(24, dtype="float32").reshape(2, 3, 4)
    for got in _both(mod, x, np.zeros((3, 1), "int32")):
        np.testing.assert_array_equal(got, x.sum(axis=(0, 2))[:, None])


@pytest.mark.parametrize("data,indices,batch_dims,want", [
    ([[0, 1], [2, 3]], [[0, 0], [1, 1]], 0, [0, 3]),  # TVM's documented examples
    ([[[0, 1], [2, 3]], [[4, 5], [6, 7]]], [[1], [0]], 1, [[2, 3], [4, 5]]),
    ([[0, 1], [2, 3]], [[-1, 0], [0, -2]], 0, [2, 0])])  # negatives count from the end
def test_gather_nd_is_tvm_s_examples(data, indices, batch_dims, want):
    d, i = np.array(data, "float32"), np.array(indices, "int64")
    mod = _one_op(lambda a, b: op.gather_nd(a, b, batch_dims), Var("d", T(d.shape, "float32")),
                  Var("i", T(i.shape, "int64")))
    for got in _both(mod, d, i):
        np.testing.assert_array_equal(got, want)


def test_gather_nd_refuses_an_index_out_of_range_everywhere():
    mod = _one_op(op.gather_nd, Var("d", T((2, 3), "float32")), Var("i", T((1, 2), "int64")))
    d, i = np.zeros((2, 3), "float32"), np.array([[0, 3]])  # 3 is past axis 1, yet 0 * 3 + 3 is a valid row-major
    with pytest.raises(IndexError, match=r"index 3 at position 0 is out of range for an axis of size 3"):
        interpret(mod, "main", d, i)
    with pytest.raises(IndexError):
        relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](d, i)


def test_batch_flatten_keeps_the_batch():
    mod = _text('x: R.Tensor(("n", 3, 2), "float32")', "r = R.nn.batch_flatten(x)")
    assert mod["main"].ret_struct_info == T((SizeVar("n"), 6), "float32")
    x = np.arange(12, dtype="float32").reshape(2, 3, 2)
    for got in _both(mod, x):
        np.testing.assert_array_equal(got, x.reshape(2, 6))


def test_meshgrid_xy_swaps_the_first_two_axes_as_numpy():
    mod = _text('a: R.Tensor((3,), "float32"), b: R.Tensor((4,), "float32")', 'r = R.meshgrid((a, b), indexing="xy")')
    assert [f.shape for f in mod["main"].ret_struct_info.fields] == [(4, 3), (4, 3)]
    a, b = np.arange(3, dtype="float32"), np.arange(4, dtype="float32") + 10
    for ga, gb in _both(mod, a, b):
        for got, want in zip((ga, gb), np.meshgrid(a, b, indexing="xy")):
            np.testing.assert_array_equal(got, want)


def test_reverse_sequence_is_onnx_s_example():
    x = np.arange(16, dtype="float32").reshape(4, 4)  # time along axis 0, batch along axis 1
    mod = _one_op(lambda d, s: op.reverse_sequence(d, s, seq_axis=0, batch_axis=1), Var("x", T((4, 4), "float32")),
                  Var("s", T((4,), "int64")))
    want = [[12, 9, 6, 3], [8, 5, 2, 7], [4, 1, 10, 11], [0, 13, 14, 15]]  # lengths 4, 3, 2, 1
    for got in _both(mod, x, np.array([4, 3, 2, 1])):
        np.testing.assert_array_equal(got, want)


def test_cumprod_and_its_gradient_through_a_zero():
    x = np.array([[2.0, 0.0, 3.0, 4.0]])
    for exclusive, want in ((False, [[2, 0, 0, 0]]), (True, [[1, 2, 0, 0]])):
        mod = _one_op(lambda v: op.cumprod(v, 1, exclusive=exclusive), Var("x", T((1, 4), "float64")))
        for got in _both(mod, x):
            np.testing.assert_array_equal(got, want)
        # d sum / dx_1 (the zero): x0 + x0 x2 + x0 x2 x3 = 32 inclusive, x0 + x0 x2 = 8 exclusive; dx_0 = 1
        grad = transform.Gradient("main")(_one_op(lambda v: op.sum(op.cumprod(v, 1, exclusive=exclusive)),
                                                  Var("x", T((1, 4), "float64"))))
        _, (g,) = interpret(grad, "main_adjoint", x)
        want_g = [[1, 32, 0, 0]] if not exclusive else [[1, 8, 0, 0]]
        np.testing.assert_allclose(g, want_g)


def test_median_is_the_lower_one_with_tvm_s_outputs():
    x = np.array([[4.0, 1.0, 3.0, 2.0], [7.0, 7.0, 5.0, 9.0]], "float32")
    mod = _text('x: R.Tensor((2, 4), "float32")', "v, i = R.median(x, axis=1)\nw = R.median(x)", ret="(v, i, w)")
    for v, i, w in _both(mod, x):
        np.testing.assert_array_equal(v, [2.0, 7.0])  # the lower middles: of 1 2 3 4 and of 5 7 7 9
        np.testing.assert_array_equal(x[np.arange(2), i], v)
        assert i.dtype == np.int64 and w.shape == () and w == 4.0  # of 1 2 3 4 4 5 7 7 9: ... 8 values: 4.0


def test_linear_is_pytorch_s():
    import torch

    rng = np.random.default_rng(3)
    x, w, b = (rng.standard_normal(s).astype("float32") for s in ((2, 3, 4), (5, 4), (5,)))
    mod = _one_op(op.linear, *(Var(n, T(a.shape, "float32")) for n, a in zip("xwb", (x, w, b))))
    want = torch.nn.functional.linear(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)).numpy()
    for got in _both(mod, x, w, b):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
