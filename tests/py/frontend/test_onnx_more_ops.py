"""ONNX ops beyond the MLP/CNN/transformer set — trigonometry, rounding, float classes, bits, TopK, Range, OneHot,
GatherElements, the scatters, LRN, LpNormalization, Hardmax, CumSum's reverse, integer Pow and ReduceMean — each
imported, run by the interpreter and compiled, against ``onnx.reference.ReferenceEvaluator`` (or NumPy written
from ONNX's spec where the reference evaluator departs from it), and their attributes' refusals naming the node."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.frontend.onnx import OnnxImportError, from_onnx  # noqa: E402
from relax_mlir.testing import roundtrip  # noqa: E402

make = helper.make_node


def _model(nodes, inputs: dict, initializers=(), outputs=None, opset: int = 19):
    """A model of ``nodes`` on ``inputs`` (NumPy arrays, dtypes kept) returning ``outputs`` (else the last node's)."""
    info = lambda k, v: helper.make_tensor_value_info(  # noqa: E731
        k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
    graph = helper.make_graph(
        nodes, "g", [info(k, v) for k, v in inputs.items()],
        [helper.make_tensor_value_info(o, 0, None) for o in (outputs or list(nodes[-1].output))],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _run_both(model, inputs: dict) -> list[list[np.ndarray]]:
    """The imported module's outputs on ``inputs``, interpreted and compiled (its text reads back as itself)."""
    mod, params, _ = from_onnx(model)
    roundtrip(mod)
    args = [*inputs.values(), *params.values()]
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"]
    runs = []
    for got in (relax_mlir.interpret(mod, "main", *args), compiled(*args)):
        runs.append([np.asarray(g) for g in got] if isinstance(got, (tuple, list)) else [np.asarray(got)])
    return runs


def _assert_matches(model, inputs: dict, want=None, rtol=1e-5, atol=1e-6):
    """Every output, interpreted and compiled, has the expected shape, dtype and values: ``want`` (NumPy from the
    spec), else the reference evaluator's."""
    if want is None:
        with np.errstate(all="ignore"):
            want = ReferenceEvaluator(model).run(None, inputs)
    for got in _run_both(model, inputs):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)


_RNG = np.random.default_rng(11)
_UNIT = _RNG.uniform(-0.95, 0.95, (3, 4)).astype(np.float32)
_X = _RNG.standard_normal((3, 4)).astype(np.float32)
_I32 = np.array([[-7, -4, 0, 3], [5, 9, -1, 12], [2, -6, 8, -3]], np.int32)

_TRIG = ["Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Atanh"]


def test_trigonometry_and_hyperbolic_functions():
    nodes = [make(name, ["u"], [name.lower()]) for name in _TRIG]
    nodes += [make("Abs", ["u"], ["a"]), make("Constant", [], ["one"], value_float=1.0),
              make("Add", ["a", "one"], ["a1"]), make("Acosh", ["a1"], ["acosh"])]  # Acosh is defined from 1
    model = _model(nodes, {"u": _UNIT}, outputs=[n.lower() for n in _TRIG] + ["acosh"])
    _assert_matches(model, {"u": _UNIT})


def test_sign_round_floor_ceil():
    """Round takes halves to the even neighbour (ONNX's rule, NumPy's round): -2.5 -> -2, 0.5 -> 0, 1.5 -> 2."""
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -0.0, 3.7, -3.2, 0.0, 7.5], np.float32)
    nodes = [make("Sign", ["x"], ["s"]), make("Round", ["x"], ["r"]), make("Floor", ["x"], ["f"]),
             make("Ceil", ["x"], ["c"]), make("Sign", ["i"], ["si"])]
    inputs = {"x": x, "i": _I32}
    model = _model(nodes, inputs, outputs=["s", "r", "f", "c", "si"])
    _assert_matches(model, inputs)
    np.testing.assert_array_equal(_run_both(model, inputs)[1][1][:6], [-2, -2, -0, 0, 2, 2])


@pytest.mark.parametrize("negative, positive", [(1, 1), (1, 0), (0, 1), (0, 0)])
def test_isnan_and_isinf_with_its_detect_attributes(negative, positive):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -1.0, 3.0e38], np.float32)
    nodes = [make("IsNaN", ["x"], ["n"]),
             make("IsInf", ["x"], ["i"], detect_negative=negative, detect_positive=positive)]
    _assert_matches(_model(nodes, {"x": x}, outputs=["n", "i"]), {"x": x})


def test_mod_both_signs_rules():
    """``fmod=0``: the sign of the divisor (Python's %); ``fmod=1``: of the dividend (C's fmod)."""
    b = np.array([[3, -3, 5, -5], [4, 4, -4, 7], [2, -2, 3, -7]], np.int32)
    fb = np.array([1.5, -1.5, 2.0, -0.7], np.float32)
    nodes = [make("Mod", ["a", "b"], ["m0"]), make("Mod", ["a", "b"], ["m1"], fmod=1),
             make("Mod", ["x", "fb"], ["fm"], fmod=1)]
    inputs = {"a": _I32, "b": b, "x": _X, "fb": fb}
    _assert_matches(_model(nodes, inputs, outputs=["m0", "m1", "fm"]), inputs)


@pytest.mark.parametrize("dtype", ["uint8", "uint32", "uint64"])
def test_bit_shift_both_directions_with_shifts_past_the_width(dtype):
    """A shift by the width or more gives 0 (the reference evaluator's; the CPU's shift would wrap the count)."""
    bits = np.dtype(dtype).itemsize * 8
    x = np.array([1, 3, 200, 255, 7, 129, 0, 96], dtype)
    s = np.array([0, 1, 3, 7, bits - 1, bits, bits + 5, 2], dtype)
    nodes = [make("BitShift", ["x", "s"], ["l"], direction="LEFT"),
             make("BitShift", ["x", "s"], ["r"], direction="RIGHT")]
    inputs = {"x": x, "s": s}
    _assert_matches(_model(nodes, inputs, outputs=["l", "r"]), inputs)


@pytest.mark.parametrize("dtype", ["int32", "uint8", "int64"])
def test_bitwise_and_or_xor_not(dtype):
    a = np.array([0, 1, 6, 100, 127, 85], dtype)
    b = np.array([3, 1, 12, 27, 64, 170 if dtype == "uint8" else -3], dtype)
    nodes = [make("BitwiseAnd", ["a", "b"], ["x"]), make("BitwiseOr", ["a", "b"], ["o"]),
             make("BitwiseXor", ["a", "b"], ["y"]), make("BitwiseNot", ["a"], ["n"])]
    inputs = {"a": a, "b": b}
    _assert_matches(_model(nodes, inputs, outputs=["x", "o", "y", "n"], opset=18), inputs)


_TIES = np.array([[3, 1, 3, 2, 1], [0, 0, 0, 0, 0], [-1, 5, 5, -1, 2]], np.int32)


@pytest.mark.parametrize("k, attrs, data", [
    (2, {}, _X),                                          # largest along the last axis
    (3, {"axis": 0, "largest": 0}, _X),                   # smallest, along the first axis
    (4, {"axis": -1}, _TIES),                             # ties: in order of position
    (2, {"axis": 1, "largest": 0, "sorted": 0}, _TIES),   # sorted=0: any order, the sorted one given
    (4, {"axis": 1}, _X),                                 # K = the whole axis
    (0, {"axis": 1}, _X),                                 # K = 0: empty outputs
])
def test_top_k_values_and_indices(k, attrs, data):
    model = _model([make("TopK", ["x", "k"], ["v", "i"], **attrs)], {"x": data},
                   [("k", np.array([k], np.int64))])
    _assert_matches(model, {"x": data})


def test_top_k_larger_than_its_axis_or_computed_at_run_time_is_refused():
    node = make("TopK", ["x", "k"], ["v", "i"], name="top", axis=0)
    with pytest.raises(OnnxImportError, match=r"node top \(TopK\): K=4 must be one number in \[0, 3\], the size of "
                                              r"axis 0 of X \(3, 4\)"):
        from_onnx(_model([node], {"x": _X}, [("k", np.array([4], np.int64))]))
    with pytest.raises(OnnxImportError, match=r"node top \(TopK\): K must be a constant"):
        from_onnx(_model([node], {"x": _X, "k": np.array([2], np.int64)}))


@pytest.mark.parametrize("start, limit, delta", [
    (np.int64(2), np.int64(11), np.int64(3)), (np.int32(5), np.int32(-4), np.int32(-2)),
    (np.float32(0.5), np.float32(2.0), np.float32(0.25)), (np.int64(4), np.int64(1), np.int64(1)),  # empty
])
def test_range_of_constants(start, limit, delta):
    nodes = [make("Range", ["s", "l", "d"], ["r"]), make("Cast", ["r"], ["rf"], to=1),
             make("Mul", ["rf", "one"], ["y"])]  # the range computed while importing, used at run time
    one = np.ones(1, np.float32)
    model = _model(nodes, {"one": one}, [("s", start), ("l", limit), ("d", delta)], outputs=["r", "y"])
    _assert_matches(model, {"one": one})


def test_range_refusals_name_the_node():
    node = make("Range", ["s", "l", "d"], ["r"], name="rg")
    with pytest.raises(OnnxImportError, match=r"node rg \(Range\): delta is 0"):
        from_onnx(_model([node], {}, [("s", np.int64(0)), ("l", np.int64(3)), ("d", np.int64(0))]))
    with pytest.raises(OnnxImportError, match=r"node rg \(Range\): limit must be a constant"):
        from_onnx(_model([node], {"l": np.array(3, np.int64)}, [("s", np.int64(0)), ("d", np.int64(1))]))


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_gather_elements_with_negative_indices_and_axes(axis):
    indices = np.array([[0, -1, 2], [1, 0, -3], [-2, 2, 1]], np.int64)
    data = _RNG.standard_normal((3, 3)).astype(np.float32)  # (the reference evaluator wants the shapes equal)
    inputs = {"x": data, "i": indices}
    _assert_matches(_model([make("GatherElements", ["x", "i"], ["y"], axis=axis)], inputs), inputs)


@pytest.mark.parametrize("axis, dtype", [(-1, "int64"), (0, "int32"), (1, "int64"), (2, "float32")])
def test_one_hot_with_negative_and_out_of_range_indices(axis, dtype):
    """A negative index counts from ``depth``; one outside ``[-depth, depth)`` (5, -6) is a row of ``off``."""
    indices = np.array([[0, 4, -1], [-5, 5, -6], [2, 3, 1]], dtype)
    nodes = [make("OneHot", ["i", "depth", "values"], ["y"], axis=axis)]
    inits = [("depth", np.array(5.0, np.float32)), ("values", np.array([-0.5, 2.0], np.float32))]
    _assert_matches(_model(nodes, {"i": indices}, inits), {"i": indices})


def test_one_hot_values_computed_at_run_time():
    indices = np.array([1, 0, 3], np.int64)
    values = np.array([7, 9], np.int32)
    nodes = [make("OneHot", ["i", "depth", "v"], ["y"], axis=0)]
    inputs = {"i": indices, "v": values}
    _assert_matches(_model(nodes, inputs, [("depth", np.array(4, np.int64))]), inputs)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "min", "max"])
def test_scatter_elements_reductions(reduction):
    data = _RNG.standard_normal((3, 5)).astype(np.float32)
    indices = np.array([[1, -1], [0, 3], [4, 4 if reduction != "none" else 2]], np.int64)
    updates = _RNG.standard_normal((3, 2)).astype(np.float32)
    inputs = {"d": data, "i": indices, "u": updates}
    node = make("ScatterElements", ["d", "i", "u"], ["y"], axis=-1, reduction=reduction)
    _assert_matches(_model([node], inputs, opset=18), inputs)


@pytest.mark.parametrize("case", ["elements", "rows", "slices of a 3-d", "add with repeats", "negative"])
def test_scatter_nd(case):
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    indices, reduction = {
        "elements": (np.array([[0, 1, 2], [1, 2, 3], [1, 0, 0]]), "none"),
        "rows": (np.array([[[1, 2]], [[0, 0]]]), "none"),
        "slices of a 3-d": (np.array([[1], [0]]), "none"),
        "add with repeats": (np.array([[0, 1], [0, 1], [1, 2]]), "add"),
        "negative": (np.array([[-1, -3], [0, -1]]), "mul"),
    }[case]
    indices = indices.astype(np.int64)
    updates = _RNG.standard_normal(indices.shape[:-1] + data.shape[indices.shape[-1]:]).astype(np.float32)
    inputs = {"d": data, "i": indices, "u": updates}
    _assert_matches(_model([make("ScatterND", ["d", "i", "u"], ["y"], reduction=reduction)], inputs, opset=18),
                    inputs)


def test_scatter_nd_index_outside_data_raises_index_error():
    """A row outside ``data`` (here ``[0, 4]`` on rows of 4) would land on the next row once flattened: it is
    refused at run time, by the interpreter and by compiled code."""
    data = np.zeros((2, 4), np.float32)
    inputs = {"d": data, "i": np.array([[0, 4]], np.int64), "u": np.ones(1, np.float32)}
    mod, _, _ = from_onnx(_model([make("ScatterND", ["d", "i", "u"], ["y"])], inputs))
    with pytest.raises(IndexError):
        relax_mlir.interpret(mod, "main", *inputs.values())
    with pytest.raises(IndexError):
        relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*inputs.values())


def _lrn_from_the_spec(x, size, alpha, beta, bias):
    """ONNX's formula: the sum of squares over channels ``c - floor((size-1)/2)`` .. ``c + ceil((size-1)/2)``.
    (The reference evaluator loops over the batch axis instead of the channels; PyTorch centres an even window
    the other way.)"""
    x64 = x.astype(np.float64)
    out = np.empty_like(x64)
    for c in range(x.shape[1]):
        lo, hi = max(0, c - (size - 1) // 2), min(x.shape[1], c + size // 2 + 1)
        out[:, c] = x64[:, c] / (bias + alpha / size * np.sum(x64[:, lo:hi] ** 2, axis=1)) ** beta
    return out.astype(x.dtype)


@pytest.mark.parametrize("size, shape", [(3, (2, 5, 3, 3)), (4, (1, 6, 2, 2)), (1, (2, 3, 4)), (5, (1, 7, 2, 3, 2))])
def test_lrn_odd_and_even_windows(size, shape):
    x = _RNG.standard_normal(shape).astype(np.float32)
    attrs = dict(size=size, alpha=0.3, beta=0.6, bias=1.5)
    model = _model([make("LRN", ["x"], ["y"], **attrs)], {"x": x})
    _assert_matches(model, {"x": x}, want=[_lrn_from_the_spec(x, **attrs)])
    if shape[0] == shape[1] or size % 2:  # where the reference evaluator or PyTorch computes ONNX's formula
        torch = pytest.importorskip("torch")
        np.testing.assert_allclose(_lrn_from_the_spec(x, **attrs), torch.nn.functional.local_response_norm(
            torch.from_numpy(x), size, alpha=0.3, beta=0.6, k=1.5).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("p, axis", [(2, -1), (2, 0), (1, 1), (1, -2)])
def test_lp_normalization_with_a_zero_norm(p, axis):
    """L1 is the sum of absolute values (the reference evaluator sums ``x`` itself); a zero norm gives 0."""
    x = _X.copy()
    x[1, :] = 0.0
    x[:, 2] = 0.0
    norm = np.sum(np.abs(x) ** p, axis=axis, keepdims=True) ** (1.0 / p)
    want = np.where(norm == 0, 0, x / np.where(norm == 0, 1, norm)).astype(np.float32)
    model = _model([make("LpNormalization", ["x"], ["y"], p=p, axis=axis)], {"x": x})
    if p == 2:
        with np.errstate(invalid="ignore"):  # (its 0 / 0 where the norm is 0, not taken)
            np.testing.assert_allclose(ReferenceEvaluator(model).run(None, {"x": x})[0], want, rtol=1e-6)
    _assert_matches(model, {"x": x}, [want])


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_hardmax_first_of_ties(axis):
    x = np.array([[1.0, 3.0, 3.0, 0.5], [2.0, 2.0, -1.0, 2.0], [2.0, -4.0, 3.0, 0.0]], np.float32)
    _assert_matches(_model([make("Hardmax", ["x"], ["y"], axis=axis)], {"x": x}), {"x": x})


@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("axis", [1, -2])
def test_cumsum_exclusive_and_reverse(exclusive, reverse, axis):
    inputs = {"x": _X, "i": _I32}
    nodes = [make("CumSum", ["x", "ax"], ["y"], exclusive=exclusive, reverse=reverse),
             make("CumSum", ["i", "ax"], ["yi"], exclusive=exclusive, reverse=reverse)]
    _assert_matches(_model(nodes, inputs, [("ax", np.array(axis, np.int64))], outputs=["y", "yi"]), inputs)


@pytest.mark.parametrize("upper, k", [(1, -1), (0, 2), (1, 5), (0, -4)])
def test_trilu_of_ints_beyond_the_diagonals(upper, k):
    inputs = {"i": _I32}
    _assert_matches(_model([make("Trilu", ["i", "k"], ["y"], upper=upper)], inputs, [("k", np.array(k, np.int64))]),
                    inputs)


@pytest.mark.parametrize("base, exponent", [
    (np.array([2, -3, 5, 0, 7, -1], np.int32), np.array([10, 3, 0, 4, 2, 7], np.int64)),
    (np.array([3, 2, 10, -2], np.int32), np.array([21, 31, 9, 31], np.int32)),         # int32 results wrap
    (np.array([3, 2, -5, 10], np.int64), np.array([33, 52, 21, 15], np.int64)),        # exact below 2**53
    (np.array([4, 9, 2, 7], np.int64), np.array([0.5, 0.5, 1.5, 0.0], np.float32)),    # float exponents truncate
    (np.array([3, 2, 255, 16], np.uint32), np.array([20, 31, 4, 8], np.uint32)),       # unsigned, wrapping
])
def test_integer_pow(base, exponent):
    inputs = {"a": base, "b": exponent}
    _assert_matches(_model([make("Pow", ["a", "b"], ["y"])], inputs), inputs)


@pytest.mark.parametrize("axes, keepdims", [([1], 1), ([0], 0), (None, 0), ([-1, 0], 1)])
@pytest.mark.parametrize("dtype", ["int32", "int64", "uint32"])
def test_integer_reduce_mean_truncates(axes, keepdims, dtype):
    """ONNX's reference (NumPy's ``mean(dtype=int)``) and onnxruntime truncate the mean toward zero: -7/3 is -2."""
    x = (_I32 if dtype != "uint32" else np.abs(_I32)).astype(dtype)
    node = make("ReduceMean", ["x"] + (["axes"] if axes else []), ["y"], keepdims=keepdims)
    inits = [("axes", np.array(axes, np.int64))] if axes else []
    _assert_matches(_model([node], {"x": x}, inits, opset=18), {"x": x})
    if dtype == "int32" and axes == [1]:
        np.testing.assert_array_equal(_run_both(_model([node], {"x": x}, inits, opset=18), {"x": x})[1][0],
                                      [[-2], [6], [0]])


@pytest.mark.parametrize("node, inputs, inits, message", [
    (make("GatherElements", ["x", "i"], ["y"], name="n", axis=2), {"x": _X, "i": np.zeros((3, 4), np.int64)}, (),
     r"axis 2 is out of range for rank 2 \(expected \[-2, 1\]\)"),
    (make("OneHot", ["i", "d", "v"], ["y"], name="n", axis=-3), {"i": np.zeros(3, np.int64)},
     [("d", np.int64(4)), ("v", np.array([0, 1], np.int64))], r"axis -3 is out of range for rank 2"),
    (make("OneHot", ["i", "d", "v"], ["y"], name="n"), {"i": np.zeros(3, np.int64)},
     [("d", np.int64(0)), ("v", np.array([0, 1], np.int64))], r"depth must be one positive number, got 0"),
    (make("BitShift", ["a", "b"], ["y"], name="n", direction="UP"),
     {"a": np.zeros(2, np.uint8), "b": np.zeros(2, np.uint8)}, (), r"direction='UP'; expected 'LEFT' or 'RIGHT'"),
    (make("BitShift", ["a", "b"], ["y"], name="n", direction="LEFT"),
     {"a": np.zeros(2, np.int32), "b": np.zeros(2, np.int64)}, (),
     r"shifts of int32 by int64: ONNX's BitShift takes two tensors of one integer dtype \(unsigned, or signed since "
     r"opset 28\)"),
    (make("LpNormalization", ["x"], ["y"], name="n", p=3), {"x": _X}, (), r"p=3; ONNX's LpNormalization takes p=1"),
    (make("ScatterElements", ["x", "i", "u"], ["y"], name="n", reduction="mean"),
     {"x": _X, "i": np.zeros((1, 4), np.int64), "u": np.zeros((1, 4), np.float32)}, (),
     r"reduction='mean'; expected one of none, add, mul, min, max"),
    (make("ScatterND", ["x", "i", "u"], ["y"], name="n"),
     {"x": _X, "i": np.zeros((2, 1), np.int64), "u": np.zeros((2, 3), np.float32)}, (),
     r"indices \(2, 1\) and updates \(2, 3\) do not fit data \(3, 4\)"),
    (make("CumSum", ["x", "ax"], ["y"], name="n"), {"x": _X}, [("ax", np.array(-3, np.int64))],
     r"axis -3 is out of range for rank 2"),
    (make("Hardmax", ["x"], ["y"], name="n", axis=2), {"x": _X}, (), r"axis 2 is out of range for rank 2"),
    (make("LRN", ["x"], ["y"], name="n"), {"x": _X}, (), r"missing the required attribute size$"),
])
def test_unsupported_attribute_values_are_refused_naming_the_node(node, inputs, inits, message):
    with pytest.raises(OnnxImportError, match=rf"^from_onnx: node n \({node.op_type}\): {message}"):
        from_onnx(_model([node], inputs, inits))
