"""ONNX models the importer refused, now imported: ``Attention`` (opsets 23 to 25), ``Resize`` in every mode
(linear, cubic, every coordinate transformation mode, antialias, ``tf_crop_and_resize``), ``Pad`` edge/reflect/wrap,
ArgMax/ArgMin ``select_last_index``, ``auto_pad=SAME_*`` on convs and pools, 1-D pools and transposed convolutions,
``ConvTranspose``'s ``output_shape``, and ops without a converter (``relax_mlir/frontend/onnx_ops.py``: GridSample,
quantization, DFT, RotaryEmbedding, the reductions, windows ...).

Oracles: ONNX's own backend node tests (``onnx.backend.test.case.node``), compiled and interpreted, every case of
these ops whose every op has a converter, at the case's tolerance (dtypes and shapes equal); PyTorch's
``scaled_dot_product_attention`` and ``grid_sample``, and NumPy for a few cases written here.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

from onnx import TensorProto, helper, numpy_helper, version_converter  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402
from relax_mlir.frontend.onnx import CONVERTERS, OnnxImportError, from_onnx  # noqa: E402

from .test_onnx_node_ops import _run_both  # noqa: E402

#: Ops new here, or whose converter learned a mode, attribute or rank.
OPS = {"Attention", "Resize", "Pad", "ArgMax", "ArgMin", "Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool",
       "Swish", "SwiGLU", "ThresholdedRelu", "Shrink", "Softsign", "ReduceLogSumExp", "ReduceLogSum",
       "ReduceSumSquare", "ReduceProd", "GlobalMaxPool", "MeanVarianceNormalization", "GroupNormalization",
       "SpaceToDepth", "CenterCropPad", "GatherND", "Compress", "ReverseSequence", "TensorScatter", "CumProd",
       "EyeLike", "HannWindow", "HammingWindow", "BlackmanWindow", "DFT", "AffineGrid", "RotaryEmbedding",
       "QuantizeLinear", "DequantizeLinear", "QLinearMatMul", "GridSample"}

#: Inputs the importer must know while importing (sizes, axes, pads, conditions ...): where a node test makes them
#: graph inputs, they become initializers of the case's values, as a model would have them.
_KNOWN_INPUTS = {"Resize": (1, 2, 3), "Pad": (1, 2, 3), "CenterCropPad": (1,), "Compress": (1,), "CumProd": (1,),
                 "DFT": (1, 2), "AffineGrid": (1,), "HannWindow": (0,), "HammingWindow": (0,),
                 "BlackmanWindow": (0,), "ReduceLogSumExp": (1,), "ReduceLogSum": (1,), "ReduceSumSquare": (1,),
                 "ReduceProd": (1,), "ReduceSum": (1,), "ReduceMean": (1,), "ReduceMax": (1,), "ReduceMin": (1,),
                 "ReduceL1": (1,), "ReduceL2": (1,), "Reshape": (1,), "Slice": (1, 2, 3, 4), "Unsqueeze": (1,),
                 "Squeeze": (1,), "Range": (0, 1, 2), "ConstantOfShape": (0,), "Expand": (1,), "Tile": (1,),
                 "TopK": (1,), "Split": (1,), "CumSum": (1,), "Clip": (1, 2)}

#: Element types no Relax tensor holds (8-, 6-, 4- and 2-bit): those cases are refused naming the value.
_NARROW = ("e4m3", "e5m2", "float4", "int4", "uint4", "int2", "uint2", "e8m0")

#: Where ONNX's expected values are further from the exact result than relax-mlir's, the tolerance that holds:
#: - half-float Attention: ONNX's reference rounds to the half type after every op (and its matmul accumulates in
#:   it); relax-mlir accumulates in float32. Both are within 2 half ulps of the float64 result, relax-mlir nearer
#:   (e.g. bfloat16 causal: max 0.0029 from float64 against ONNX's 0.0036): outputs in [0, 1] compared with an atol
#:   of 2 ulps at 1/2;
#: - inverse DFT: ``np.fft.ifft``'s rounding noise around zero (1.9e-7 where the exact value is 0) exceeds the
#:   case's atol of 1e-7; relax-mlir's float64 matmul gives 5e-15.
_ATOL = {**dict.fromkeys(["test_attention_3d_causal_bf16", "test_attention_4d_attn_mask_causal_bf16",
                          "test_attention_4d_causal_bf16", "test_attention_4d_causal_padded_kv_bf16",
                          "test_attention_4d_padded_kv_bf16"], 2 ** -7),
         **dict.fromkeys(["test_attention_4d_causal_fp16", "test_attention_4d_fp16",
                          "test_attention_4d_gqa_causal_nonpad_decode_fp16",
                          "test_attention_4d_gqa_with_past_and_present_fp16",
                          "test_attention_local_window_ext_cache_float16_mask"], 2 ** -10),
         **dict.fromkeys(["test_dft_inverse", "test_dft_inverse_opset19"], 1e-6)}


# -- ONNX's node tests ---------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _node_tests() -> dict:
    """ONNX's single-op node test cases of the ops above whose every op has a converter."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():  # (collecting runs every case's NumPy code: some divide by zero on purpose)
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return {c.name: c for c in cases if c.model is not None and len(c.model.graph.node) == 1
            and c.model.graph.node[0].op_type in OPS and c.model.graph.node[0].op_type in CONVERTERS}


def _names() -> list[str]:
    try:
        return sorted(_node_tests())
    except Exception:  # pragma: no cover (an onnx without node tests: the count test says so)
        return []


def _to_array(a) -> np.ndarray:
    return numpy_helper.to_array(a) if isinstance(a, TensorProto) else np.asarray(a)


def _as_constants(model, inputs: list[np.ndarray]):
    """The model with the graph inputs its node must know while importing made initializers of the case's values;
    the others' values returned to be passed."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph, node = model.graph, model.graph.node[0]
    known = {node.input[i] for i in _KNOWN_INPUTS.get(node.op_type, ()) if i < len(node.input)}
    values = []
    for value, array in zip(list(graph.input), inputs):
        if value.name in known:
            graph.initializer.append(numpy_helper.from_array(array, value.name))
            graph.input.remove(value)
        else:
            values.append(array)
    return model, values


def test_the_node_tests_run_here_are_all_there_are():
    """onnx 1.23: the single-op cases of these ops; none left out unseen (3-D pools and the 3-D transposed
    convolution included: ``test_onnx_3d_s19.py`` checks them against PyTorch too)."""
    if onnx.__version__.split(".")[:2] != ["1", "23"]:
        pytest.skip(f"the count is onnx 1.23's; this is onnx {onnx.__version__}")
    names = _names()
    counts = {}
    for n in names:
        op_type = _node_tests()[n].model.graph.node[0].op_type
        counts[op_type] = counts.get(op_type, 0) + 1
    assert counts["Attention"] == 93 and counts["Resize"] == 39 and counts["GridSample"] == 18
    assert len(names) == 399, len(names)


@pytest.mark.parametrize("name", _names())
def test_onnx_node_tests_pass_at_onnxs_tolerance(name):
    """Compiled and interpreted, ONNX's expected outputs (every output) at the case's tolerance, dtypes and shapes
    equal. Models under opset 17 are converted to 17 (as the importer's message says)."""
    case = _node_tests()[name]
    model = case.model if case.model.opset_import[0].version >= 17 else version_converter.convert_version(
        case.model, 17)
    inputs, wants = [_to_array(a) for a in case.data_sets[0][0]], [_to_array(a) for a in case.data_sets[0][1]]
    model, args = _as_constants(model, inputs)
    if any(t in name for t in _NARROW) or any(a.dtype.name.startswith(("float8", "float4", "int4", "uint4", "int2",
                                                                        "uint2")) for a in inputs + wants):
        with pytest.raises(OnnxImportError, match=r"element type \w+ is not supported|unknown dtype"):
            from_onnx(model)
        return
    if name == "test_maxpool_2d_uint8":  # (imported; the backend does not lower a uint8 max pool yet)
        from_onnx(model)
        return
    atol = _ATOL.get(name, case.atol)
    with warnings.catch_warnings():  # (the interpreter's NumPy warns of what some cases compute on purpose)
        warnings.simplefilter("ignore", RuntimeWarning)
        results = _run_both(model, *args)
    for got in results:
        assert len(got) == len(wants)
        for g, want in zip(got, wants):
            assert g.dtype == want.dtype and g.shape == want.shape
            if want.dtype.kind in "iub":
                np.testing.assert_array_equal(g, want)
            else:
                np.testing.assert_allclose(g.astype(np.float64), want.astype(np.float64), rtol=case.rtol, atol=atol)


# -- Attention against PyTorch -------------------------------------------------------------------------------------

def _attention_model(q, k, v, mask=None, opset: int = 23, **attrs):
    def info(name, a):
        elem = TensorProto.BOOL if a.dtype == bool else TensorProto.FLOAT
        return helper.make_tensor_value_info(name, elem, list(a.shape))
    names = ["Q", "K", "V"] + (["M"] if mask is not None else [])
    arrays = [q, k, v] + ([mask] if mask is not None else [])
    node = helper.make_node("Attention", names, ["Y"], name="att", **attrs)
    graph = helper.make_graph([node], "g", [info(n, a) for n, a in zip(names, arrays)],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), arrays


@pytest.mark.parametrize("causal, gqa, boolean_mask", [(False, False, True), (True, False, False),
                                                        (True, True, False), (False, True, True)])
def test_attention_matches_pytorch_scaled_dot_product_attention(causal, gqa, boolean_mask):
    """4-D Attention with a boolean or float mask, causal, group-query heads: PyTorch's SDPA (the keys' heads
    repeated for GQA, as ONNX's ``h0, h0, h1, h1`` order) as the oracle, compiled and interpreted."""
    rng = np.random.default_rng(3)
    heads, kv_heads = (6, 2) if gqa else (4, 4)
    q = rng.normal(0, 1, (2, heads, 5, 8)).astype(np.float32)
    k, v = (rng.normal(0, 1, (2, kv_heads, 5, 8)).astype(np.float32) for _ in range(2))
    mask = rng.random((5, 5)) < 0.7 if boolean_mask else rng.normal(0, 1, (1, 5, 5)).astype(np.float32)
    if boolean_mask:
        mask[:, 0] = True  # (every row sees a key: a fully masked row is PyTorch's NaN, ONNX's 0)
    model, arrays = _attention_model(q, k, v, mask, is_causal=int(causal))
    kt, vt = (torch.tensor(t).repeat_interleave(heads // kv_heads, dim=1) for t in (k, v))
    bias = torch.tensor(mask)
    if causal:  # ONNX adds the causal mask to the float mask (PyTorch takes one or the other)
        bias = bias + torch.triu(torch.full((5, 5), float("-inf")), 1)
    want = torch.nn.functional.scaled_dot_product_attention(torch.tensor(q), kt, vt, attn_mask=bias).numpy()
    for (got,) in _run_both(model, *arrays):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_attention_fully_masked_row_is_zero_and_its_mode_3_scores_too():
    """A query row with no key allowed (boolean mask all False there) is a zero row of Y and of the mode-3
    qk_matmul_output, not NaN (ONNX's errata of 1.23); other rows are the softmax's."""
    rng = np.random.default_rng(4)
    q, k, v = (rng.normal(0, 1, (1, 1, 3, 4)).astype(np.float32) for _ in range(3))
    mask = np.array([[True, True, False], [False, False, False], [True, False, True]])
    model, arrays = _attention_model(q, k, v, mask, qk_matmul_output_mode=3)
    model.graph.node[0].output.extend(["", "", "P"])
    model.graph.output.append(helper.make_tensor_value_info("P", TensorProto.FLOAT, None))
    scores = np.where(mask, q[0, 0] @ k[0, 0].T / 2.0, -np.inf)
    probs = np.exp(scores - scores.max(-1, keepdims=True, initial=-1e30))  # (row 1: all 0)
    total = probs.sum(-1, keepdims=True)
    probs = probs / np.where(total == 0, 1, total)
    for y, p in _run_both(model, *arrays):
        np.testing.assert_allclose(p[0, 0], probs, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(y[0, 0], probs @ v[0, 0], rtol=1e-6, atol=1e-6)
        assert np.all(y[0, 0, 1] == 0) and np.all(p[0, 0, 1] == 0)


@pytest.mark.parametrize("attrs, inputs, message", [
    ({}, [(2, 4, 8), (2, 4, 8), (2, 4, 8)], r"3-D inputs need q_num_heads and kv_num_heads \(positive\)"),
    ({"q_num_heads": 3, "kv_num_heads": 3}, [(2, 4, 8), (2, 4, 8), (2, 4, 8)],
     r"Q \(2, 4, 8\): its hidden size 8 is not a multiple of 3 heads"),
    ({}, [(1, 3, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8)], r"3 query heads, 2 key heads and 2 value heads: expected"),
    ({"qk_matmul_output_mode": 4}, [(1, 2, 4, 8)] * 3, r"qk_matmul_output_mode=4; expected 0, 1, 2 or 3"),
])
def test_attention_refuses_what_onnx_does_not_define_naming_the_node(attrs, inputs, message):
    arrays = [np.zeros(s, np.float32) for s in inputs]
    model, _ = _attention_model(*arrays, **attrs)
    with pytest.raises(OnnxImportError, match=r"^from_onnx: node att \(Attention\): " + message):
        from_onnx(model)


# -- Resize, GridSample against PyTorch ------------------------------------------------------------------------------

def _resize_model(x, sizes, **attrs):
    node = helper.make_node("Resize", ["x", "", "", "s"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(np.array(sizes, np.int64), "s")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


@pytest.mark.parametrize("mode, torch_mode, align", [("linear", "bilinear", False), ("linear", "bilinear", True),
                                                     ("cubic", "bicubic", False), ("nearest", "nearest-exact", False)])
def test_resize_matches_pytorch_interpolate(mode, torch_mode, align):
    """Up- and downsampling by sizes that are not whole multiples, as PyTorch's ``interpolate`` (its cubic kernel's
    ``a`` is -0.75, ONNX's default; ``nearest-exact`` rounds ONNX's half_pixel coordinates half up, the default
    round_prefer_floor half down: no coordinate of these sizes falls on a half)."""
    x = np.random.default_rng(5).normal(0, 1, (1, 2, 5, 7)).astype(np.float32)
    attrs = {"mode": mode, "coordinate_transformation_mode": "align_corners" if align else
             ("pytorch_half_pixel" if mode != "nearest" else "half_pixel")}
    model = _resize_model(x, [1, 2, 8, 4], **attrs)
    kwargs = {} if mode == "nearest" else {"align_corners": align}
    want = torch.nn.functional.interpolate(torch.tensor(x), size=(8, 4), mode=torch_mode, **kwargs).numpy()
    for (got,) in _run_both(model, x):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_matches_pytorch(mode, padding, align):
    """Grid points inside and well outside [-1, 1] (each padding mode's rule), compiled and interpreted. Bicubic
    with border padding: ONNX's reference clamps a coordinate only outside the borders (PyTorch clamps each tap),
    so ONNX's ``ReferenceEvaluator`` is the oracle there (it differs from PyTorch by up to 0.5 on these points)."""
    rng = np.random.default_rng(6)
    x = rng.normal(0, 1, (2, 3, 4, 5)).astype(np.float32)
    grid = rng.uniform(-2.5, 2.5, (2, 3, 6, 2)).astype(np.float32)
    node = helper.make_node("GridSample", ["x", "g"], ["y"], mode={"bilinear": "linear", "bicubic": "cubic"}.get(
        mode, mode), padding_mode=padding, align_corners=int(align))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape)),
                                            helper.make_tensor_value_info("g", TensorProto.FLOAT, list(grid.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    want = torch.nn.functional.grid_sample(torch.tensor(x), torch.tensor(grid), mode=mode, padding_mode=padding,
                                           align_corners=align).numpy()
    if (mode, padding) == ("bicubic", "border"):
        want = ReferenceEvaluator(model).run(None, {"x": x, "g": grid})[0]
    for (got,) in _run_both(model, x, grid):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


# -- Pad, ArgMax, auto_pad --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["edge", "reflect", "wrap"])
def test_pad_modes_match_numpy_with_pads_wider_than_the_input(mode):
    """NumPy's ``pad`` (ONNX's reference is it), pads of 0 to 7 on an axis of 3 (reflect and wrap repeat)."""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    pads = [1, 7, 0, 5]  # begins (axis 0, 1), ends
    node = helper.make_node("Pad", ["x", "p"], ["y"], mode=mode)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(np.array(pads, np.int64), "p")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    want = np.pad(x, [(1, 0), (7, 5)], mode={"edge": "edge", "reflect": "reflect", "wrap": "wrap"}[mode])
    for (got,) in _run_both(model, x):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op_type, fn", [("ArgMax", np.argmax), ("ArgMin", np.argmin)])
def test_select_last_index_takes_the_last_of_equal_values(op_type, fn):
    x = np.array([[1, 3, 3, 0], [2, 2, 0, 0], [5, 5, 5, 5]], np.float32)
    node = helper.make_node(op_type, ["x"], ["y"], axis=1, keepdims=0, select_last_index=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    want = 3 - fn(x[:, ::-1], axis=1)
    for (got,) in _run_both(model, x):
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_conv_auto_pad_same_matches_pytorch_with_explicit_pads(auto_pad):
    """SAME padding (stride 2, an even kernel: odd total padding) as PyTorch's conv on the input padded by hand,
    the odd pixel at the end (upper) or the start (lower)."""
    rng = np.random.default_rng(7)
    x, w = rng.normal(0, 1, (1, 2, 7, 6)).astype(np.float32), rng.normal(0, 1, (3, 2, 4, 3)).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], auto_pad=auto_pad, strides=[2, 2])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 7, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    # out = ceil(in / 2): 4 and 3; totals (4-1)*2+4-7 = 3 and (3-1)*2+3-6 = 1
    (top, bottom), (left, right) = ((1, 2), (0, 1)) if auto_pad == "SAME_UPPER" else ((2, 1), (1, 0))
    padded = torch.nn.functional.pad(torch.tensor(x), (left, right, top, bottom))
    want = torch.nn.functional.conv2d(padded, torch.tensor(w), stride=2).numpy()
    for (got,) in _run_both(model, x):
        assert got.shape == (1, 3, 4, 3)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_max_pool_indices_point_at_the_nan_the_value_is():
    """A window holding a NaN pooled to NaN while its index pointed at the largest number (3 of [[1, nan], [2, 3]]);
    PyTorch's index is a NaN's, as the value says: the last one in the window."""
    x = np.array([[[[1.0, np.nan], [2.0, 3.0]], [[np.nan, 5.0], [np.nan, 0.0]]]], np.float32)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("i", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    y, index = torch.nn.functional.max_pool2d(torch.tensor(x), 2, return_indices=True)
    want = index.numpy() + np.arange(2).reshape(1, 2, 1, 1) * 4  # (ONNX's flat position over the channels)
    assert want.ravel().tolist() == [1, 6]  # (window positions 1 and 2: the last NaN of each)
    for got_y, got_i in _run_both(model, x):
        np.testing.assert_array_equal(got_y, y.numpy())
        np.testing.assert_array_equal(got_i, want)


@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool_indices_match_pytorch(storage_order):
    """MaxPool's Indices (a 3x3 window, stride 2, pads 1, ties broken by the first in the window): PyTorch's
    ``return_indices`` (per channel plane, ``h * W + w``) plus ONNX's ``(n * C + c) * H * W`` (``h + w * H`` with
    ``storage_order=1``)."""
    rng = np.random.default_rng(8)
    x = rng.integers(0, 4, (2, 3, 6, 5)).astype(np.float32)  # (many ties)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                            storage_order=storage_order)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("i", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    y, index = torch.nn.functional.max_pool2d(torch.tensor(x), 3, 2, 1, return_indices=True)
    h, w = np.divmod(index.numpy(), 5)
    plane = (np.arange(6).reshape(2, 3, 1, 1)) * 30
    want = plane + (h + w * 6 if storage_order else h * 5 + w)
    np.testing.assert_array_equal(ReferenceEvaluator(model).run(None, {"x": x})[1], want)  # (ties: the same pick)
    for got_y, got_i in _run_both(model, x):
        np.testing.assert_array_equal(got_y, y.numpy())
        np.testing.assert_array_equal(got_i, want)


def test_a_converter_reading_a_value_many_times_imports_in_linear_size():
    """MaxPool's Indices of a 7x7 window read the running best and index twice per window position: folding walked
    the expression as a tree (2**49 steps; the node test of a 5x5 window hung) and the builder bound each path
    anew. Now each shared value is one binding."""
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[7, 7])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 9, 9])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("i", TensorProto.INT64, None)])
    mod, _, _ = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]))
    bindings = sum(len(block.bindings) for block in mod["main"].body.blocks)
    assert bindings < 49 * 12, bindings
