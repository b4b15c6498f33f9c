"""What a hunt over this session's new ops found, each mended: the interpreter refusing valid calls compiled code
runs (reshape's -1 beside a 0, gather_nd's 0-d result, cumprod and median over empty axes), a raw error at compile
(resize2d to size 0, eye with a huge k), a gradient that leaked a TypeError (scatter_nd with empty index tuples), a
user pass silently replacing a built-in, 3-D pools refusing the padding the 2-D ones take, and gather_nd's compiled
range error naming an internal index. Oracles: NumPy, hand-derived values, loops written out here."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import relax_mlir
from relax_mlir import op, transform
from relax_mlir.interpreter import InterpreterError, interpret
from relax_mlir.ir import BlockBuilder, TensorStructInfo as T, Var


def _one(fn, params, *args, **kwargs):
    """A module whose ``main`` is one call of ``fn`` on parameters of the given (shape, dtype)s."""
    vs = [Var(f"a{i}", T(*p)) for i, p in enumerate(params)]
    bb = BlockBuilder()
    with bb.function("main", vs):
        with bb.dataflow():
            gv = bb.emit_output(fn(*vs, *args, **kwargs))
        bb.emit_func_output(gv)
    return bb.get()


def _both(mod, *args, fn="main"):
    """The interpreter's result, then the compiled one's."""
    return interpret(mod, fn, *args), relax_mlir.VirtualMachine(relax_mlir.compile(mod))[fn](*args)


# -- 1. reshape's -1 over symbolic sizes, a size 0 at run time ------------------------------------------------------

@pytest.mark.parametrize("shape, target, value, want", [
    (("n", "m", 2), (-1, "m"), (2, 0, 2), (4, 0)),   # -1 is 2 * n
    (("n", "m"), ("m", -1), (3, 0), (0, 3)),         # -1 is n
    (("n", "n"), ("n", -1), (0, 0), (0, 0)),
    (("n", "m", 2), (-1, "m"), (2, 3, 2), (4, 3))])  # (not empty: as before)
def test_reshape_minus_one_is_the_inferred_size_even_beside_a_zero(shape, target, value, want):
    """NumPy cannot resolve a -1 beside a 0; the inferred shape can, and compiled code reshapes to it."""
    mod = _one(op.reshape, [(shape, "float32")], target)
    x = np.arange(int(np.prod(value)), dtype="float32").reshape(value)
    for got in _both(mod, x):
        assert got.shape == want
        np.testing.assert_array_equal(got.reshape(-1), x.reshape(-1))


# -- 2. gather_nd with a 0-d result ------------------------------------------------------------------------------

@pytest.mark.parametrize("data_shape, index", [((4,), [2]), ((3, 4), [2, -1])])
def test_gather_nd_picking_one_element_gives_a_0_d_tensor(data_shape, index):
    mod = _one(op.gather_nd, [(data_shape, "float32"), ((len(index),), "int64")])
    data = np.arange(int(np.prod(data_shape)), dtype="float32").reshape(data_shape)
    for got in _both(mod, data, np.array(index)):
        assert np.shape(got) == ()
        assert float(got) == data[tuple(index)]


# -- 3. resize2d to an output size of 0 ------------------------------------------------------------------------

@pytest.mark.parametrize("method, mode", [("linear", "half_pixel"), ("nearest_neighbor", "asymmetric"),
                                          ("cubic", "align_corners"), ("linear", "tf_crop_and_resize")])
def test_resize2d_to_size_0_is_an_empty_result(method, mode):
    """TVM computes over the output's shape, so a 0 gives an empty tensor (PyTorch's interpolate refuses size 0; the
    inference here already gave the empty shape, and compile ended in a ZeroDivisionError)."""
    mod = _one(op.image.resize2d, [((1, 2, 4, 4), "float32")], (0, 3), method=method,
               coordinate_transformation_mode=mode)
    for got in _both(mod, np.ones((1, 2, 4, 4), "float32")):
        assert got.shape == (1, 2, 0, 3) and got.dtype == np.float32


def test_resize2d_from_an_empty_axis_to_pixels_is_refused_in_words():
    with pytest.raises(ValueError, match=r"relax.image.resize2d: the input height is 0, so output height 2 has no "
                                         r"pixel to read"):
        _one(op.image.resize2d, [((1, 1, 0, 4), "float32")], (2, 3))
    mod = _one(op.image.resize2d, [((1, 1, "h", 4), "float32")], (2, 3))  # 0 only at run time
    with pytest.raises(InterpreterError, match=r"the input height is 0, so output height 2"):
        interpret(mod, "main", np.ones((1, 1, 0, 4), "float32"))


# -- 4. eye with any int k ----------------------------------------------------------------------------------------

def _eye_module(n, m, k):
    bb = BlockBuilder()
    with bb.function("main", []):
        with bb.dataflow():
            gv = bb.emit_output(op.eye(n, m, k, "float32"))
        bb.emit_func_output(gv)
    return bb.get()


@pytest.mark.parametrize("k", [2 ** 31, -2 ** 31 - 1, 2 ** 63 - 1, -2 ** 63, 2 ** 70, -2 ** 70, 2, -1, 3, -3])
def test_eye_with_a_k_beyond_the_matrix_or_int32_is_zeros(k):
    """A diagonal past the matrix is empty (NumPy's ``eye``); compile named an int32 constant the user never wrote,
    or overflowed."""
    want = np.zeros((3, 3), "float32") if abs(k) >= 3 else np.eye(3, 3, k, "float32")
    for got in _both(_eye_module(3, 3, k)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("k", [2 ** 63 - 1, -2 ** 70, 1])
def test_eye_like_of_symbolic_sizes_with_any_k(k):
    mod = _one(op.eye_like, [(("n", "m"), "float32")], k=k)
    for got in _both(mod, np.ones((2, 4), "float32")):
        np.testing.assert_array_equal(got, np.eye(2, 4, 1 if k == 1 else 0, "float32") * (k == 1))


# -- 5. cumprod and median over empty axes --------------------------------------------------------------------

@pytest.mark.parametrize("shape", [("n", "m"), (3, 0)])
def test_exclusive_cumprod_over_an_empty_axis_is_empty(shape):
    mod = _one(op.cumprod, [(shape, "float32")], axis=1, exclusive=True)
    for got in _both(mod, np.zeros((3, 0), "float32")):
        assert got.shape == (3, 0)


@pytest.mark.parametrize("axis", [1, -1])
def test_exclusive_cumprod_still_starts_at_one(axis):
    mod = _one(op.cumprod, [((2, 3), "float32")], axis=axis, exclusive=True)
    for got in _both(mod, np.array([[2, 3, 4], [5, 0, 7]], "float32")):
        np.testing.assert_array_equal(got, [[1, 2, 6], [1, 5, 0]])


@pytest.mark.parametrize("keepdims, want", [(False, (0,)), (True, (0, 1))])
def test_median_with_an_empty_kept_axis_is_empty(keepdims, want):
    mod = _one(op.median, [(("n", 4), "float32")], axis=1, keepdims=keepdims)
    for values, indices in _both(mod, np.zeros((0, 4), "float32")):
        assert values.shape == want and indices.shape == want and indices.dtype == np.int64


def test_median_over_several_axes_still_the_lower_median():
    mod = _one(op.median, [((2, 2, 2), "float32")], axis=(1, 2))
    x = np.array([[[4, 1], [3, 2]], [[8, 6], [5, 7]]], "float32")
    for got in _both(mod, x):
        np.testing.assert_array_equal(got, [2, 6])


# -- 6. scatter_nd's gradient with index tuples of length 0 ---------------------------------------------------

@pytest.mark.parametrize("reduction, dx, du", [("add", [1, 1, 1], [[1, 1, 1], [1, 1, 1]]),
                                               ("update", [0, 0, 0], [[0, 0, 0], [1, 1, 1]])])
def test_scatter_nd_gradient_with_empty_index_tuples(reduction, dx, du):
    """An empty tuple names all of data: 'add' adds each update to it, 'update' leaves the last one (hand-derived
    gradients of ``sum``)."""
    x, i, u = Var("x", T((3,), "float64")), Var("i", T((2, 0), "int64")), Var("u", T((2, 3), "float64"))
    bb = BlockBuilder()
    with bb.function("main", [x, i, u]):
        with bb.dataflow():
            gv = bb.emit_output(op.sum(op.scatter_nd(x, i, u, reduction)))
        bb.emit_func_output(gv)
    adjoint = transform.Gradient("main", require_grads=[x, u])(bb.get())
    args = (np.zeros(3), np.zeros((2, 0), "int64"), np.arange(6.0).reshape(2, 3))
    for _, (gx, gu) in _both(adjoint, *args, fn="main_adjoint"):
        np.testing.assert_array_equal(gx, dx)
        np.testing.assert_array_equal(gu, du)


# -- 8. a user pass named as a built-in ----------------------------------------------------------------------

def test_a_users_pass_named_as_a_built_in_is_refused_and_the_built_in_stays():
    """``class Normalize(Pass)`` at a module's top level has the built-in's qualified name, but not its module."""
    from relax_mlir.transform.normalize import Normalize as BuiltIn

    def transform_module(self, mod, ctx):
        return mod

    with pytest.raises(ValueError, match=r"pass name 'Normalize' of \S*test_new_ops_fixes_s19\.Normalize is already "
                                         r"taken by relax_mlir\.transform\.normalize\.Normalize"):
        type("Normalize", (transform.Pass,), {"name": "Normalize", "__module__": __name__,
                                              "__qualname__": "Normalize", "transform_module": transform_module})
    assert transform.PASSES["Normalize"] is BuiltIn
    assert type(transform.parse_pipeline("Normalize")[0]) is BuiltIn


def test_the_same_pass_class_defined_again_replaces_itself():
    """As a module reloaded: the same module and qualified name."""
    made = []
    try:
        for _ in range(2):
            class Reloaded(transform.Pass):
                name = "TestOnlyReloaded"
            made.append(Reloaded)
        assert transform.PASSES["TestOnlyReloaded"] is made[1]
    finally:
        del transform.PASSES["TestOnlyReloaded"]


# -- 9. 3-D pools take any padding, as the 2-D ones ------------------------------------------------------------

def _pool3d_oracle(x, k, pads, avg, count_include_pad):
    """Windows of stride 1 written out: a window over only padding gives -inf (max) or 0 (average)."""
    n, c = x.shape[:2]
    front = [p[0] for p in pads]
    out_shape = [x.shape[2 + a] + pads[a][0] + pads[a][1] - k[a] + 1 for a in range(3)]
    out = np.zeros((n, c, *out_shape))
    for pos in itertools.product(*(range(s) for s in out_shape)):
        cells = [tuple(p - f + j for p, f, j in zip(pos, front, off)) for off in itertools.product(*map(range, k))]
        inside = [q for q in cells if all(0 <= q[a] < x.shape[2 + a] for a in range(3))]
        values = [x[(slice(None), slice(None)) + q] for q in inside]
        if not avg:
            out[(slice(None), slice(None)) + pos] = np.max(values, axis=0) if values else -np.inf
        else:
            count = len(cells) if count_include_pad else len(inside)
            out[(slice(None), slice(None)) + pos] = np.sum(values, axis=0) / max(count, 1) if values else 0.0
    return out


@pytest.mark.parametrize("kind, count_include_pad", [("max", False), ("avg", False), ("avg", True)])
def test_3d_pools_take_padding_wider_than_half_the_window(kind, count_include_pad):
    x = np.random.default_rng(0).standard_normal((1, 2, 2, 3, 3)).astype("float64")
    pool = op.nn.max_pool3d if kind == "max" else op.nn.avg_pool3d
    mod = _one(pool, [((1, 2, 2, 3, 3), "float64")], pool_size=2, padding=(3, 0, 2, 0, 2, 1),
               count_include_pad=count_include_pad)
    want = _pool3d_oracle(x, (2, 2, 2), ((3, 0), (0, 2), (2, 1)), kind == "avg", count_include_pad)
    for got in _both(mod, x):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# -- 10. gather_nd's compiled range error names the user's index -------------------------------------------------

@pytest.mark.parametrize("indices, batch_dims, message", [
    ([[0, 1], [2, 4]], 0, r"index 4 at position 1 .* out of range for axis 1 of size 4"),
    ([[0, 1], [-4, 1]], 0, r"index -4 at position 1 .* out of range for axis 0 of size 3")])
def test_gather_nd_out_of_range_compiled_names_the_index_and_its_axis(indices, batch_dims, message):
    mod = _one(op.gather_nd, [((3, 4), "float32"), ((2, 2), "int64")], batch_dims=batch_dims)
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod))
    with pytest.raises(IndexError, match=message):
        vm["main"](np.zeros((3, 4), "float32"), np.array(indices))


def test_gather_nd_with_batch_dims_still_matches_a_loop():
    mod = _one(op.gather_nd, [((2, 3, 4), "float32"), ((2, 2, 2), "int32")], batch_dims=1)
    data = np.arange(24, dtype="float32").reshape(2, 3, 4)
    idx = np.array([[[0, -1], [2, 1]], [[-3, 3], [1, 0]]], "int32")
    want = np.array([[data[b, i, j] for i, j in idx[b]] for b in range(2)])
    for got in _both(mod, data, idx):
        np.testing.assert_array_equal(got, want)
