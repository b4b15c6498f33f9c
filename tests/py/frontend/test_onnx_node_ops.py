"""ONNX ops the importer lacked that real exports use: CastLike (torch.onnx's dynamo exporter writes it everywhere,
and ONNX's "_expanded" function bodies use it), Size, NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss and
RMSNormalization (opset 23).

Oracles: ONNX's own backend node tests (``onnx.backend.test.case.node``) at each case's tolerance, compiled and
interpreted: every case of these ops and every "_expanded" case the new converters make importable; NumPy for
RMSNormalization's ``stash_type`` (ONNX's function body, step by step); PyTorch's autograd for the losses'
gradients.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

import relax_mlir  # noqa: E402
from onnx import TensorProto, helper, numpy_helper, version_converter  # noqa: E402
from relax_mlir import transform  # noqa: E402
from relax_mlir.frontend.onnx import CONVERTERS, OnnxImportError, from_onnx  # noqa: E402

NEW_OPS = {"CastLike", "Size", "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss", "RMSNormalization"}


def _run_both(model, *args):
    """(compiled, interpreted) outputs of the imported model, each a list."""
    mod, params, _ = from_onnx(model)
    args = [*args, *params.values()]
    as_list = lambda r: list(r) if isinstance(r, (tuple, list)) else [r]  # noqa: E731
    return (as_list(relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*args)),
            as_list(relax_mlir.interpret(mod, "main", *args)))


# -- ONNX's node tests ---------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _node_tests() -> dict:
    """ONNX's node test cases that use one of the new ops and whose every op has a converter."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():  # (collecting runs every case's NumPy code: some divide by zero on purpose)
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return {c.name: c for c in cases if any(n.op_type in NEW_OPS for n in c.model.graph.node)
            and all(n.op_type in CONVERTERS for n in c.model.graph.node)}


def _names() -> list[str]:
    try:
        return sorted(_node_tests())
    except Exception:  # pragma: no cover (an onnx without node tests: the one test below says so)
        return []


#: CastLike from or to an element type no Relax tensor holds (8-, 4- and 2-bit): refused naming the input.
_NARROW = ("FLOAT8", "FLOAT4", "INT4", "UINT4", "INT2", "UINT2")
#: Attention's function body pads its bias with a Pad whose constant_value is a 1-element 1-D tensor: the Pad
#: converter called float() on it (NumPy 2: "only 0-dimensional arrays can be converted"), these failed.
_PAD_VALUE_1D = {"test_attention_4d_diff_heads_mask4d_padded_kv_expanded",
                 "test_attention_4d_padded_kv_bf16_expanded", "test_attention_4d_causal_padded_kv_bf16_expanded",
                 "test_attention_causal_boolmask_nan_robustness_expanded",
                 "test_attention_24_fullymasked_qk_matmul_output_mode3_zero_expanded",
                 "test_attention_24_qk_matmul_output_mode3_softmax_precision_expanded",
                 "test_attention_4d_causal_nonpad_attn_mask_composition_expanded",
                 "test_attention_local_window_rank1_boolean_mask_expanded",
                 "test_attention_local_window_ext_cache_rank3_head_mask_expanded",
                 "test_attention_local_window_ext_cache_rank4_batch_mask_expanded",
                 "test_attention_local_window_ext_cache_rank2_mask_expanded",
                 "test_attention_local_window_ext_cache_float16_mask_expanded",
                 "test_attention_local_window_gqa_rank4_mask_expanded"}
#: Half-float Attention function bodies: ONNX's expected values are NumPy's, rounded to the half type after every
#: op (its MatMul accumulates in the half type); Relax accumulates in float32. Both are within 2 half ulps of the
#: float64 result (and Relax the nearer): outputs in [0, 1] compared with an atol of 2 ulps of the dtype at 1/2.
#: The other float16 cases differ by 1 ulp, which just above 1/2 is 0.95-0.975 of ONNX's rtol 1e-3: a float32 sum
#: the host orders otherwise that rounds to the other neighbour (2 ulps) failed them, so they get the same atol.
_HALF_ATTENTION = {**dict.fromkeys(["test_attention_4d_causal_bf16_expanded", "test_attention_3d_causal_bf16_expanded",
                                     "test_attention_4d_attn_mask_causal_bf16_expanded",
                                     "test_attention_4d_padded_kv_bf16_expanded",
                                     "test_attention_4d_causal_padded_kv_bf16_expanded"], 2 ** -7),
                   **dict.fromkeys(["test_attention_4d_causal_fp16_expanded", "test_attention_4d_fp16_expanded",
                                    "test_attention_4d_gqa_with_past_and_present_fp16_expanded",
                                    "test_attention_4d_gqa_causal_nonpad_decode_fp16_expanded"], 2 ** -10)}


def _to_array(a) -> np.ndarray:
    return numpy_helper.to_array(a) if isinstance(a, TensorProto) else np.asarray(a)


def _as_constants(model, inputs: list[np.ndarray]):
    """The model with its integer graph inputs after the first (a ReduceSum's axes in ONNX's expanded ReduceL2 and
    ReduceLogSumExp) made initializers of the case's values: the importer needs axes known while importing. The
    float inputs are returned to be passed."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph, keep = model.graph, []
    for i, (value, array) in enumerate(zip(list(graph.input), inputs)):
        if i and array.dtype.kind in "iu":
            graph.initializer.append(numpy_helper.from_array(array, value.name))
        else:
            keep.append(array)
    return model, keep


def test_the_node_tests_run_here_are_all_there_are():
    """onnx 1.23: 373 cases use a new op and have every op converted (the rest still miss one: Attention,
    ReduceLogSumExp ...); none is left out unseen."""
    if onnx.__version__.split(".")[:2] != ["1", "23"]:
        pytest.skip(f"the count is onnx 1.23's; this is onnx {onnx.__version__}")
    names = _names()
    narrow = [n for n in names if n.startswith("test_castlike") and any(t in n for t in _NARROW)]
    assert (len(names), len(narrow)) == (373, 48)
    assert _PAD_VALUE_1D <= set(names) and set(_HALF_ATTENTION) <= set(names)
    counts = {op_type: sum(any(node.op_type == op_type for node in _node_tests()[n].model.graph.node) for n in names)
              for op_type in NEW_OPS}
    assert counts == {"CastLike": 209, "Size": 59, "NegativeLogLikelihoodLoss": 52, "SoftmaxCrossEntropyLoss": 34,
                      "RMSNormalization": 19}


@pytest.mark.parametrize("name", _names())
def test_onnx_node_tests_pass_at_onnxs_tolerance(name):
    """Compiled and interpreted, ONNX's expected outputs (every output: SoftmaxCrossEntropyLoss's log_prob too) at
    the case's tolerance, dtypes and shapes equal. Models under opset 17 are converted to 17 (as the importer's
    message says); narrow CastLike types are refused naming the input and its type."""
    case = _node_tests()[name]
    model = case.model if case.model.opset_import[0].version >= 17 else version_converter.convert_version(
        case.model, 17)
    if name.startswith("test_castlike") and any(t in name for t in _NARROW):
        with pytest.raises(OnnxImportError, match=r"from_onnx: input (input|like): element type \w+ is not supported"):
            from_onnx(model)
        return
    atol = _HALF_ATTENTION.get(name, case.atol)
    for inputs, outputs in case.data_sets:
        inputs, wants = [_to_array(a) for a in inputs], [_to_array(a) for a in outputs]
        case_model, args = _as_constants(model, inputs) if "_expanded" in name and "reduce" in name else (model, inputs)
        with warnings.catch_warnings():  # (the interpreter's NumPy warns of what some cases compute on purpose:
            warnings.simplefilter("ignore", RuntimeWarning)  # a fully masked softmax row, log(0) of an empty sum)
            results = _run_both(case_model, *args)
        for got in results:
            assert len(got) == len(wants)
            for g, want in zip(got, wants):
                assert g.dtype == want.dtype and g.shape == want.shape
                np.testing.assert_allclose(g.astype(np.float64), want.astype(np.float64), rtol=case.rtol, atol=atol)


# -- CastLike, Size ------------------------------------------------------------------------------------------------

def _model(nodes, inputs, outputs, opset: int = 23, initializer=()):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
                              initializer=list(initializer))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("to, elem", [("int32", TensorProto.INT32), ("uint8", TensorProto.UINT8),
                                      ("float16", TensorProto.FLOAT16), ("bool", TensorProto.BOOL)])
def test_castlike_casts_as_cast_does(to, elem):
    """CastLike to the second input's element type gives what the importer's Cast gives (float->int truncation
    toward 0 for values in range; NumPy's astype as the oracle there), the second input's values unused."""
    x = np.array([-2.75, -1.5, -0.25, 0.0, 0.5, 1.5, 2.99, 100.25], np.float32)
    if to == "uint8":
        x = np.abs(x)
    like = _model([helper.make_node("CastLike", ["x", "t"], ["y"])],
                  [("x", TensorProto.FLOAT, [8]), ("t", elem, [1])], [("y", elem, [8])])
    cast = _model([helper.make_node("Cast", ["x"], ["y"], to=elem)], [("x", TensorProto.FLOAT, [8])],
                  [("y", elem, [8])])
    (want,), _ = _run_both(cast, x)
    np.testing.assert_array_equal(want, x.astype(to))
    for (got,) in _run_both(like, x, np.zeros(1, to)):
        assert got.dtype == np.dtype(to)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape", [(), (0, 3), (2, 3, 4), (7,)])
def test_size_is_a_constant_int64_element_count(shape):
    """Size is evaluated while importing (as Shape is): a 0-d int64 constant, so that shape arithmetic built on it
    (RMSNormalization's function body: ``Range(axis, Size(Shape(X)))``) folds."""
    model = _model([helper.make_node("Size", ["x"], ["n"])], [("x", TensorProto.FLOAT, list(shape))],
                   [("n", TensorProto.INT64, [])])
    mod, _, _ = from_onnx(model)
    assert isinstance(mod["main"].body.body, relax_mlir.ir.expr.Constant)
    for (got,) in _run_both(model, np.zeros(shape, np.float32)):
        assert got.dtype == np.int64 and got.shape == ()
        assert int(got) == int(np.prod(shape))


# -- RMSNormalization ----------------------------------------------------------------------------------------------

def _rms_function_body(x, scale, axis: int, epsilon: float, stash) -> np.ndarray:
    """ONNX's function body: X cast to the stash type, normalized there, cast back, times scale in X's type."""
    xu = x.astype(stash)
    axes = tuple(range(axis % x.ndim, x.ndim))
    normalized = xu / np.sqrt((xu * xu).mean(axis=axes, keepdims=True) + stash(epsilon))
    return normalized.astype(x.dtype) * scale


@pytest.mark.parametrize("dtype, elem, stash_type, axis, scale_shape", [
    ("float64", TensorProto.DOUBLE, None, -1, (5,)),            # default stash: float32, even for a float64 X
    ("float64", TensorProto.DOUBLE, TensorProto.DOUBLE, 1, (4, 5)),
    ("float16", TensorProto.FLOAT16, None, 2, (1,)),            # scale broadcasts
    ("float32", TensorProto.FLOAT, None, 1, (1, 5)),
])
def test_rms_normalization_follows_onnxs_function_body(dtype, elem, stash_type, axis, scale_shape):
    rng = np.random.default_rng(0)
    x = rng.normal(0, 3, (2, 4, 5)).astype(dtype)
    scale = rng.uniform(0.5, 2, scale_shape).astype(dtype)
    attrs = {"axis": axis, "epsilon": 1e-3, **({"stash_type": stash_type} if stash_type else {})}
    model = _model([helper.make_node("RMSNormalization", ["x", "s"], ["y"], **attrs)],
                   [("x", elem, [2, 4, 5]), ("s", elem, list(scale_shape))], [("y", elem, [2, 4, 5])])
    stash = np.float64 if stash_type == TensorProto.DOUBLE else np.float32
    want = _rms_function_body(x, scale, axis, float(np.float32(1e-3)), stash)
    tol = {"float64": 1e-14 if stash is np.float64 else 1e-6, "float32": 1e-6, "float16": 1e-3}[dtype]
    for (got,) in _run_both(model, x, scale):
        assert got.dtype == x.dtype
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    if stash_type is None and dtype == "float64":  # computed in float32: float64 arithmetic differs beyond 1e-9
        exact = _rms_function_body(x, scale, axis, 1e-3, np.float64)
        assert np.abs(_run_both(model, x, scale)[0][0] - exact).max() > 1e-9


def test_rms_normalization_refuses_a_stash_type_that_is_no_float():
    model = _model([helper.make_node("RMSNormalization", ["x", "s"], ["y"], stash_type=TensorProto.INT64)],
                   [("x", TensorProto.FLOAT, [2, 3]), ("s", TensorProto.FLOAT, [3])],
                   [("y", TensorProto.FLOAT, [2, 3])])
    with pytest.raises(OnnxImportError, match=r"node y \(RMSNormalization\): stash_type=7 is not a float element type"):
        from_onnx(model)


# -- the losses: refusals and gradients ----------------------------------------------------------------------------

def _loss_model(op_type: str, shape, weight: bool, **attrs):
    inputs = [("x", TensorProto.FLOAT, list(shape)), ("t", TensorProto.INT64, [shape[0], *shape[2:]])]
    inputs += [("w", TensorProto.FLOAT, [shape[1]])] if weight else []
    out = [] if attrs.get("reduction") != "none" else [shape[0], *shape[2:]]
    return _model([helper.make_node(op_type, [n for n, _, _ in inputs], ["loss"], **attrs)], inputs,
                  [("loss", TensorProto.FLOAT, out)])


@pytest.mark.parametrize("op_type", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
def test_losses_refuse_an_unknown_reduction_and_a_rank_1_input(op_type):
    with pytest.raises(OnnxImportError, match=rf"node loss \({op_type}\): reduction 'avg' is not one of 'none', "
                                              "'sum', 'mean'"):
        from_onnx(_loss_model(op_type, (3, 4), False, reduction="avg"))
    model = _model([helper.make_node(op_type, ["x", "t"], ["loss"])],
                   [("x", TensorProto.FLOAT, [4]), ("t", TensorProto.INT64, [])], [("loss", TensorProto.FLOAT, [])])
    with pytest.raises(OnnxImportError, match=rf"node loss \({op_type}\): the input must have shape \(N, C\) or "
                                              r"\(N, C, d1, ..., dk\), got \(4,\)"):
        from_onnx(model)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("op_type", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
def test_loss_gradients_match_pytorch(op_type, reduction):
    """The imported loss and its gradient in the scores (``Gradient`` over the graph input), with weights and an
    ignore_index, compiled and interpreted, against PyTorch's ``nll_loss``/``cross_entropy`` and autograd."""
    rng = np.random.default_rng(1)
    x = rng.normal(0, 2, (3, 4, 5)).astype(np.float32)
    t = rng.integers(0, 4, (3, 5)).astype(np.int64)
    t[0, :2] = 2  # the ignored class
    w = rng.uniform(0.5, 2, 4).astype(np.float32)
    model = _loss_model(op_type, x.shape, True, reduction=reduction, ignore_index=2)
    mod, _, _ = from_onnx(model)
    adjoint = transform.DecomposeOpsForTraining()(transform.Gradient("main", require_grads=mod["main"].params[:1])(mod))
    xt = torch.tensor(x, requires_grad=True)
    fn = torch.nn.functional.nll_loss if op_type == "NegativeLogLikelihoodLoss" else torch.nn.functional.cross_entropy
    value = fn(xt, torch.tensor(t), torch.tensor(w), ignore_index=2, reduction=reduction)
    value.backward()
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(adjoint))["main_adjoint"](x, t, w)
    for got, (grad,) in (relax_mlir.interpret(adjoint, "main_adjoint", x, t, w), compiled):
        np.testing.assert_allclose(got, value.item(), rtol=1e-5)
        np.testing.assert_allclose(grad, xt.grad.numpy(), rtol=1e-5, atol=1e-7)
    assert np.all(xt.grad.numpy()[0, :, :2] == 0)  # (the ignored targets get no gradient)
