"""Two results the ONNX backend node tests found, compiled against the interpreter and an independent oracle.

* ``max``/``min`` over an empty reduced axis give the reduction's identity, as ONNX's ReduceMax/ReduceMin define it
  from opset 18: -inf/+inf for floats, the integer dtype's lowest/highest, False/True for bool (they raised
  ``max of no elements``). ``argmax``/``argmin`` of an empty axis have no index to give and still refuse.
* ``conv2d_transpose`` with an inf or NaN weight: the lowering convolves the kernel with the zeros it inserts
  between and around the input, and ``0 * inf`` is NaN, so every output gave NaN where PyTorch's scatter form
  (and the interpreter) gives finite values. With a non-finite weight it now sums only the taps that meet the data.
"""

from __future__ import annotations

import copy
import functools
import warnings

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import BlockBuilder, TensorStructInfo, Var, op
from relax_mlir.script import from_source

ml_dtypes = pytest.importorskip("ml_dtypes")

EMPTY_REDUCTIONS = from_source("""
@I.ir_module
class M:
    @R.function
    def max_dynamic(x: R.Tensor(("m", "k"), "float32")):
        r = R.max(x, axis=[1])
        return r

    @R.function
    def min_dynamic_keepdims(x: R.Tensor((3, "k", 2), "float32")):
        r = R.min(x, axis=[1], keepdims=True)
        return r

    @R.function
    def max_static_int(x: R.Tensor((3, 0, 2), "int32")):
        r = R.max(x, axis=[1])
        return r

    @R.function
    def min_static_int64_keepdims(x: R.Tensor((0, 4), "int64")):
        r = R.min(x, axis=[0], keepdims=True)
        return r

    @R.function
    def max_uint8(x: R.Tensor((2, 0), "uint8")):
        r = R.max(x, axis=[1])
        return r

    @R.function
    def min_uint8(x: R.Tensor((2, "k"), "uint8")):
        r = R.min(x, axis=[1])
        return r

    @R.function
    def max_bool(x: R.Tensor((2, "k"), "bool")):
        r = R.max(x, axis=[1])
        return r

    @R.function
    def min_bool(x: R.Tensor((2, 0), "bool")):
        r = R.min(x, axis=[1])
        return r

    @R.function
    def max_all_float16(x: R.Tensor((2, "k"), "float16")):
        r = R.max(x)
        return r

    @R.function
    def min_bfloat16(x: R.Tensor((0, 3), "bfloat16")):
        r = R.min(x, axis=[0])
        return r

    @R.function
    def argmax_dynamic(x: R.Tensor((3, "k"), "float32")):
        r = R.argmax(x, axis=1)
        return r

    @R.function
    def argmin_static(x: R.Tensor((3, 0), "float32")):
        r = R.argmin(x, axis=1)
        return r
""")

INF = float("inf")
# name: (input, expected result: the identity, hand-written)
IDENTITIES = {
    "max_dynamic": (np.zeros((4, 0), np.float32), np.full(4, -INF, np.float32)),
    "min_dynamic_keepdims": (np.zeros((3, 0, 2), np.float32), np.full((3, 1, 2), INF, np.float32)),
    "max_static_int": (np.zeros((3, 0, 2), np.int32), np.full((3, 2), -2**31, np.int32)),
    "min_static_int64_keepdims": (np.zeros((0, 4), np.int64), np.full((1, 4), 2**63 - 1, np.int64)),
    "max_uint8": (np.zeros((2, 0), np.uint8), np.zeros(2, np.uint8)),
    "min_uint8": (np.zeros((2, 0), np.uint8), np.full(2, 255, np.uint8)),
    "max_bool": (np.zeros((2, 0), bool), np.array([False, False])),
    "min_bool": (np.zeros((2, 0), bool), np.array([True, True])),
    "max_all_float16": (np.zeros((2, 0), np.float16), np.array(-INF, np.float16)),
    "min_bfloat16": (np.zeros((0, 3), ml_dtypes.bfloat16), np.full(3, INF, ml_dtypes.bfloat16)),
}


@pytest.fixture(scope="module")
def reductions():
    return rm.VirtualMachine(rm.compile(EMPTY_REDUCTIONS, num_threads=1))


@pytest.mark.parametrize("name", sorted(IDENTITIES))
def test_max_and_min_over_an_empty_axis_are_the_identity(reductions, name):
    x, want = IDENTITIES[name]
    for got in (reductions[name](x), rm.interpret(EMPTY_REDUCTIONS, name, x)):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_max_and_min_of_elements_are_unchanged(reductions):
    """Starting from the identity changes nothing where there are elements: NaN still wins, -inf stays -inf."""
    x = np.array([[1, np.nan, 3], [-INF, -INF, -INF], [2, -1, 0.5], [-0.0, -5, -7]], np.float32)
    want = np.array([np.nan, -INF, 2, -0.0], np.float32)
    for got in (reductions["max_dynamic"](x), rm.interpret(EMPTY_REDUCTIONS, "max_dynamic", x)):
        np.testing.assert_array_equal(got, want)
    u = np.array([[7, 0, 200], [255, 255, 254]], np.uint8)
    np.testing.assert_array_equal(reductions["min_uint8"](u), np.array([0, 254], np.uint8))
    b = np.array([[True, False], [True, True]])
    np.testing.assert_array_equal(reductions["max_bool"](b), np.array([True, True]))


@pytest.mark.parametrize("name,what", [("argmax_dynamic", "argmax"), ("argmin_static", "argmin")])
def test_argmax_and_argmin_of_an_empty_axis_still_refuse(reductions, name, what):
    """An index of no elements has no value (NumPy, TVM and PyTorch refuse too)."""
    x = np.zeros((3, 0), np.float32)
    with pytest.raises(ValueError, match=rf"{name}: binding 'r': {what} of no elements: a reduced axis has size 0 "
                                         r"\(the reduction has no value\)"):
        reductions[name](x)
    with pytest.raises(ValueError, match=rf"relax.{what} failed on an array of shape \(3, 0\).*empty sequence"):
        rm.interpret(EMPTY_REDUCTIONS, name, x)


@functools.lru_cache(maxsize=None)
def _onnx_node_tests() -> dict:
    """ONNX's node test cases by name, collected once (collecting runs every case's NumPy code: some divide by zero
    or overflow on purpose, which must not stop it halfway)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {c.name: c for c in collect_testcases(None)}


@pytest.mark.parametrize("case_name", ["test_reduce_max_empty_set", "test_reduce_min_empty_set",
                                       "test_reduce_max_empty_set_bool"])
def test_onnx_reduce_max_and_min_empty_set_node_tests_pass(case_name):
    """ONNX's own node tests, their ``axes`` input given as an initializer (the importer needs it constant)."""
    onnx = pytest.importorskip("onnx")
    from relax_mlir.frontend.onnx import from_onnx

    case = _onnx_node_tests()[case_name]
    (inputs, (want,)), = case.data_sets
    model = copy.deepcopy(case.model)
    model.graph.initializer.append(onnx.numpy_helper.from_array(inputs[1], model.graph.input[1].name))
    del model.graph.input[1]
    mod, _, _ = from_onnx(model)
    for got in (rm.VirtualMachine(rm.compile(mod, num_threads=1))["main"](inputs[0]),
                rm.interpret(mod, "main", inputs[0])):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


# --- conv2d_transpose with non-finite weights -------------------------------------------------------------------
def _scatter_oracle(x, w, strides, padding, output_padding, dilation, groups):
    """Each input element times each tap added into its output position (PyTorch's col2im), in float64: an output
    gets only the products of the taps that reach it."""
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = c // groups
    (pt, pl, pb, pr), (sh, sw), (dh, dw), (oph, opw) = padding, strides, dilation, output_padding
    full = np.zeros((n, og * groups, (h - 1) * sh + dh * (kh - 1) + 1 + oph,
                     (wd - 1) * sw + dw * (kw - 1) + 1 + opw))
    for g in range(groups):
        xs, ws = x[:, g * cg:(g + 1) * cg].astype(np.float64), w[g * cg:(g + 1) * cg].astype(np.float64)
        for i in range(kh):
            for j in range(kw):
                with np.errstate(invalid="ignore"):
                    tap = np.einsum("ncyz,co->noyz", xs, ws[:, :, i, j])
                full[:, g * og:(g + 1) * og, i * dh:i * dh + (h - 1) * sh + 1:sh,
                     j * dw:j * dw + (wd - 1) * sw + 1:sw] += tap
    return full[:, :, pt:full.shape[2] - pb, pl:full.shape[3] - pr].astype(np.float32)


CONVT = [  # strides, padding, output_padding, dilation, groups
    ((1, 1), (0, 0, 0, 0), (0, 0), (1, 1), 1),
    ((2, 2), (1, 1, 1, 1), (1, 1), (1, 1), 1),
    ((3, 2), (2, 0, 1, 3), (1, 0), (1, 2), 1),
    ((2, 1), (0, 1, 0, 0), (0, 0), (2, 1), 2),
    ((1, 2), (3, 3, 3, 3), (0, 1), (1, 1), 1),
]


@pytest.mark.parametrize("strides,padding,output_padding,dilation,groups", CONVT)
def test_conv2d_transpose_with_non_finite_weights_equals_the_interpreter(strides, padding, output_padding, dilation,
                                                                         groups):
    xs, ws = (2, 4, 5, 4), (4, 3, 3, 2)
    attrs = dict(strides=strides, padding=padding, output_padding=output_padding, dilation=dilation, groups=groups)
    params = [Var("x", TensorStructInfo(xs, "float32")), Var("w", TensorStructInfo(ws, "float32"))]
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            gv = bb.emit_output(op.nn.conv2d_transpose(*params, **attrs))
        bb.emit_func_output(gv)
    mod = bb.get()
    run = rm.VirtualMachine(rm.compile(mod, num_threads=1))["main"]
    rng = np.random.default_rng(7)
    x = rng.standard_normal(xs).astype(np.float32)
    for special in (None, INF, -INF, np.nan):
        w = rng.standard_normal(ws).astype(np.float32)
        if special is not None:
            w[1, 2, 0, 1] = w[3, 0, 2, 0] = special
        want = _scatter_oracle(x, w, **attrs)
        got, interpreted = run(x, w), rm.interpret(mod, "main", x, w)
        assert np.isfinite(want).any()  # the special weights leave outputs they do not reach finite
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)  # NaN where the oracle's, and only there
        np.testing.assert_allclose(got, interpreted, rtol=1e-5, atol=1e-5)


def test_conv2d_transpose_with_an_inf_weight_of_symbolic_sizes():
    """The report's case (stride 1: only the border padding meets the inf), sizes symbolic, one inf tap."""
    mod = from_source("""
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor(("n", 1, "h", "w"), "float32"), k: R.Tensor((1, 1, 3, 3), "float32")):
        r = R.nn.conv2d_transpose(x, k)
        return r
""")
    x, w = np.ones((1, 1, 3, 3), np.float32), np.ones((1, 1, 3, 3), np.float32)
    w[0, 0, 0, 0] = INF
    want = np.array([[INF, INF, INF, 2, 1], [INF, INF, INF, 4, 2], [INF, INF, INF, 6, 3], [2, 4, 6, 4, 2],
                     [1, 2, 3, 2, 1]], np.float32)  # PyTorch's conv_transpose2d
    np.testing.assert_array_equal(rm.VirtualMachine(rm.compile(mod, num_threads=1))["main"](x, w)[0, 0], want)
    np.testing.assert_array_equal(rm.interpret(mod, "main", x, w)[0, 0], want)
