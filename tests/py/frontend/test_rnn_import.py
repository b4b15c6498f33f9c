"""Recurrent layers imported (``relax_mlir/frontend/rnn.py``): PyTorch's ``nn.LSTM``/``nn.GRU``/``nn.RNN`` (kept
whole as ``aten.lstm.input`` ...) and ONNX's ``LSTM``/``GRU``/``RNN`` unrolled into Relax ops.

Oracles: PyTorch's modules and autograd, ``torch.optim.SGD``, and ``onnx.reference.ReferenceEvaluator`` for ONNX
forms PyTorch does not write (ONNX's gate orders, ``linear_before_reset=0``, ``layout=1``, reverse direction).

Tolerance of the forward comparisons: 1e-5 absolute and relative. Both sides compute in float32 with the same
formulas, but sums of products in another order (a matmul's, PyTorch's fused kernels) and another ``tanh``/
``sigmoid`` differ in the last bits, and a state goes through a few steps, each adding a rounding of ~1e-7 to
values of order 1; 1e-5 leaves room for that and is far below any error of a gate's order or a bias (~1e-1).
"""

from __future__ import annotations

import copy
import io
import types
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir import transform  # noqa: E402
from relax_mlir.frontend.common import Names  # noqa: E402
from relax_mlir.frontend.onnx import OnnxImportError, from_onnx  # noqa: E402
from relax_mlir.frontend.torch import _promoted_convert, from_exported_program  # noqa: E402
from relax_mlir.frontend.torch_converters import TorchImportError  # noqa: E402
from relax_mlir.ir import TensorStructInfo, Var  # noqa: E402
from relax_mlir.ir.sym import SizeVar  # noqa: E402
from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer, Trainer  # noqa: E402

TOL = dict(rtol=1e-5, atol=1e-5)


class _Layer(torch.nn.Module):
    """A recurrent layer whose outputs (output, h_n[, c_n]) are the program's; the initial states are inputs."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x, *states):
        if not states:
            y, final = self.layer(x)
        else:
            y, final = self.layer(x, states if len(states) == 2 else states[0])
        return (y, *final) if isinstance(final, tuple) else (y, final)


def _states(layer, batch: int, gen) -> list:
    """Random initial states of ``layer`` for a batch: ``h0`` (and ``c0`` for an LSTM)."""
    count = layer.num_layers * (2 if layer.bidirectional else 1)
    h_size = getattr(layer, "proj_size", 0) or layer.hidden_size
    h0 = torch.randn(count, batch, h_size, generator=gen)
    return [h0, torch.randn(count, batch, layer.hidden_size, generator=gen)] if isinstance(layer, torch.nn.LSTM) \
        else [h0]


_TORCH = {  # name: (layer, initial states given)
    "LSTM 2 layers bidirectional batch_first, h0 and c0": (
        lambda: torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True), True),
    "LSTM bias=False, proj_size": (lambda: torch.nn.LSTM(3, 5, proj_size=2, bias=False), False),
    "GRU 2 layers": (lambda: torch.nn.GRU(3, 4, num_layers=2), False),
    "GRU bidirectional bias=False, h0": (lambda: torch.nn.GRU(3, 4, bidirectional=True, bias=False), True),
    "RNN relu 2 layers bidirectional": (lambda: torch.nn.RNN(3, 4, num_layers=2, nonlinearity="relu",
                                                             bidirectional=True), False),
    "RNN tanh batch_first, h0": (lambda: torch.nn.RNN(3, 4, batch_first=True), True),
}


def _torch_case(name: str):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    make, initial = _TORCH[name]
    layer = make().eval()
    x = torch.randn(2, 3, 3, generator=gen)  # (batch, sequence) or (sequence, batch): either way 3 steps
    batch = x.shape[0] if layer.batch_first else x.shape[1]
    return _Layer(layer), [x, *(_states(layer, batch, gen) if initial else [])]


def _import(model, inputs):
    with warnings.catch_warnings():  # torch.export's note on nn.LSTM's _flat_weights
        warnings.simplefilter("ignore", UserWarning)
        return from_exported_program(torch.export.export(model, tuple(inputs)))


@pytest.mark.parametrize("name", list(_TORCH))
def test_torch_recurrent_layers_compute_what_pytorch_computes(name):
    model, inputs = _torch_case(name)
    mod, params, _ = _import(model, inputs)
    expected = [t.detach().numpy() for t in model(*inputs)]
    arrays = [t.numpy() for t in inputs] + list(params.values())
    runs = [relax_mlir.interpret(mod, "main", *arrays)]
    if name.startswith("GRU bi"):  # compiled too (once: the LSTM is compiled by the training test)
        runs.append(relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*arrays))
    for got in runs:
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(np.asarray(g), e, **TOL)


def test_torch_lstm_exported_for_training_keeps_its_dropout_between_layers():
    """PyTorch's decomposition of ``aten.lstm.input`` drops the dropout between layers (its condition is never
    true), so a training export imported without it: kept whole, the layer gets Relax's dropout where PyTorch's
    eager LSTM applies it, once between two layers; an inference export has none."""
    layer = torch.nn.LSTM(3, 4, num_layers=2, dropout=0.25)
    x = torch.randn(3, 2, 3)
    trained = _import(_Layer(layer.train()), [x]).mod.script()
    assert trained.count("R.nn.dropout(") == 1 and "rate=0.25" in trained
    assert "dropout" not in _import(_Layer(layer.eval()), [x]).mod.script()


def test_torch_symbolic_sequence_length_is_refused_naming_the_node():
    """torch.export specializes a recurrent layer's sequence length, so the converter is given one by hand (as the
    importer calls it): an unrolled layer needs a static length."""
    layer = torch.nn.LSTM(3, 4)
    x = Var("x", TensorStructInfo((SizeVar("seq"), 2, 3), "float32"))
    h0, c0 = (Var(n, TensorStructInfo((1, 2, 4), "float32")) for n in ("h0", "c0"))
    params = [Var(n, TensorStructInfo(tuple(p.shape), "float32")) for n, p in layer.named_parameters()]
    node = types.SimpleNamespace(name="lstm", target="aten.lstm.input", meta={})
    with pytest.raises(TorchImportError, match=r"from_exported_program: node lstm \(aten.lstm.input\): the sequence "
                       r"length is the symbolic size seq; a recurrent layer is unrolled over its steps, which needs "
                       r"a static length"):
        _promoted_convert(None, node, [x, [h0, c0], params, True, 1, 0.0, False, False, False], {})


class _WeightedSum(torch.nn.Module):
    """A recurrent layer's outputs weighted by fixed random tensors and summed: a loss whose gradient reaches
    every output and final state."""

    def __init__(self, layer, shapes):
        super().__init__()
        self.inner = _Layer(layer)
        gen = torch.Generator().manual_seed(3)
        for i, shape in enumerate(shapes):
            self.register_buffer(f"w{i}", torch.randn(shape, generator=gen))

    def forward(self, x, *states):
        return sum((o * getattr(self, f"w{i}")).sum() for i, o in enumerate(self.inner(x, *states)))


@pytest.mark.parametrize("name", ["LSTM 2 layers bidirectional batch_first, h0 and c0",
                                  "GRU bidirectional bias=False, h0"])
def test_torch_recurrent_gradients_are_pytorch_autograds(name):
    model, inputs = _torch_case(name)
    loss = _WeightedSum(model.layer, [o.shape for o in model(*inputs)])
    mod, params, _ = _import(loss, inputs)
    adjoint = transform.Gradient("main", require_grads=mod["main"].params)(mod)
    leaves = [t.clone().requires_grad_(True) for t in inputs]
    value = loss(*leaves)
    value.backward()
    expected = [t.grad.numpy() for t in leaves] + [p.grad.numpy() for p in loss.parameters()]
    assert len(expected) == len(inputs) + len(params)
    arrays = [t.numpy() for t in inputs] + list(params.values())
    runs = [relax_mlir.interpret(adjoint, "main_adjoint", *arrays)]
    if name.startswith("GRU"):
        runs.append(relax_mlir.VirtualMachine(relax_mlir.compile(adjoint))["main_adjoint"](*arrays))
    for got, grads in runs:
        np.testing.assert_allclose(float(got), value.item(), rtol=1e-5)
        for g, e in zip(grads, expected):
            np.testing.assert_allclose(np.asarray(g), e, **TOL)


class _Tagger(torch.nn.Module):
    """A sequence classifier: an LSTM, its last step's features to 3 classes."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(3, 4, batch_first=True)
        self.head = torch.nn.Linear(4, 3)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.head(y[:, -1])


def test_torch_recurrent_model_trains_as_with_torch_sgd():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    model = _Tagger()
    x, y = torch.randn(4, 3, 3, generator=gen), torch.randint(0, 3, (4,), generator=gen)
    mod, params, _ = _import(copy.deepcopy(model), [x])
    setup = SetupTrainer(CrossEntropyLoss("mean"), SGD(0.5), [mod["main"].ret_struct_info,
                                                              TensorStructInfo((4,), "int64")])
    trainer = Trainer(mod, len(params), setup).build("cpu")
    trainer.load_params(params)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    losses, expected = [], []
    for _ in range(3):
        losses.append(float(trainer.update_params(x.numpy(), y.numpy())))
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        expected.append(loss.item())
    np.testing.assert_allclose(losses, expected, rtol=1e-5)
    assert losses[-1] < losses[0]
    names = Names()
    want = {names(k): v.detach().numpy() for k, v in model.named_parameters()}
    got = trainer.export_params()
    assert set(got) == set(want)
    for key, value in got.items():
        np.testing.assert_allclose(value, want[key], **TOL, err_msg=key)


# -- ONNX ------------------------------------------------------------------------------------------------------------

def _onnx_export(model, inputs) -> onnx.ModelProto:
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, tuple(inputs), f, dynamo=False, opset_version=17)
    return onnx.load_from_string(f.getvalue())


@pytest.mark.parametrize("name", ["LSTM 2 layers bidirectional batch_first, h0 and c0", "GRU 2 layers",
                                  "RNN relu 2 layers bidirectional"])
def test_onnx_recurrent_layers_pytorch_exported_compute_what_pytorch_computes(name):
    """``torch.onnx.export(..., dynamo=False)``'s form: one node per layer, PyTorch's weights reordered to ONNX's
    gates, GRU's ``linear_before_reset=1``, an RNN's ``activations=["Relu"]`` (ONNX's reference evaluator has no
    Relu: PyTorch is the oracle)."""
    model, inputs = _torch_case(name)
    mod, params, _ = from_onnx(_onnx_export(model, inputs))
    expected = [t.detach().numpy() for t in model(*inputs)]
    got = relax_mlir.interpret(mod, "main", *[t.numpy() for t in inputs], *params.values())
    for g, e in zip(got, expected):
        np.testing.assert_allclose(np.asarray(g), e, **TOL)


def _onnx_node_model(op_type: str, x_shape, hidden: int, attrs: dict, bias: bool = True, initial: int = 0,
                     outputs=("Y", "Y_h", "Y_c"), extra: dict = None, seed: int = 0):
    """One ``op_type`` node on input ``X``: random weights as initializers, ``initial`` initial states as graph
    inputs; returns the model and its inputs."""
    rng = np.random.default_rng(seed)
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op_type]
    layout = attrs.get("layout", 0)
    directions = 2 if attrs.get("direction") == "bidirectional" else 1
    batch = x_shape[0] if layout else x_shape[1]
    weights = {"W": rng.normal(0, 0.5, (directions, gates * hidden, x_shape[-1])),
               "R": rng.normal(0, 0.5, (directions, gates * hidden, hidden))}
    if bias:
        weights["B"] = rng.normal(0, 0.5, (directions, 2 * gates * hidden))
    weights.update(extra or {})
    state_shape = (batch, directions, hidden) if layout else (directions, batch, hidden)
    feeds = {"X": rng.normal(0, 1, x_shape).astype(np.float32)}
    names = ["X", "W", "R", "B" if bias else "", "sequence_lens" if "sequence_lens" in weights else ""]
    for i, state in enumerate(["initial_h", "initial_c"][:initial]):
        feeds[state] = rng.normal(0, 1, state_shape).astype(np.float32)
        names.append(state)
    if "P" in weights:
        names += [""] * (7 - len(names)) + ["P"]
    while names and not names[-1]:
        names.pop()
    node = helper.make_node(op_type, names, list(outputs), **{"hidden_size": hidden, **attrs})
    graph = helper.make_graph(
        [node], "rnn", [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in feeds.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs if o],
        [helper.make_tensor(k, TensorProto.INT32 if k == "sequence_lens" else TensorProto.FLOAT, v.shape,
                            v.astype(np.int32 if k == "sequence_lens" else np.float32).ravel())
         for k, v in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), feeds


_ONNX = {  # name: (op_type, x shape, attributes, keywords of _onnx_node_model)
    "LSTM bidirectional, B, initial_h and initial_c": ("LSTM", (3, 2, 3), {"direction": "bidirectional"},
                                                       {"initial": 2}),
    "LSTM reverse layout=1 without B, Y and Y_c only": ("LSTM", (2, 3, 3), {"direction": "reverse", "layout": 1},
                                                        {"bias": False, "initial": 2, "outputs": ("Y", "", "Y_c")}),
    "GRU linear_before_reset=0 bidirectional": ("GRU", (3, 2, 3), {"direction": "bidirectional"},
                                                {"initial": 1, "outputs": ("Y", "Y_h")}),
    "GRU linear_before_reset=1 layout=1": ("GRU", (2, 3, 3), {"linear_before_reset": 1, "layout": 1},
                                           {"outputs": ("Y", "Y_h")}),
    "RNN reverse, initial_h, Y_h only": ("RNN", (3, 2, 3), {"direction": "reverse"},
                                         {"initial": 1, "outputs": ("", "Y_h")}),
}


@pytest.mark.parametrize("name", list(_ONNX))
def test_onnx_recurrent_nodes_compute_what_the_reference_evaluator_computes(name):
    op_type, x_shape, attrs, kw = _ONNX[name]
    model, feeds = _onnx_node_model(op_type, x_shape, 4, attrs, **kw)
    expected = ReferenceEvaluator(model).run(None, feeds)
    mod, params, _ = from_onnx(model)
    arrays = list(feeds.values()) + list(params.values())
    runs = [relax_mlir.interpret(mod, "main", *arrays)]
    if name.startswith("GRU linear_before_reset=0"):
        runs.append(relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*arrays))
    for got in runs:
        got = list(got) if isinstance(got, (list, tuple)) else [got]
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(np.asarray(g), e, **TOL)


def test_onnx_long_sequence_imports_in_linear_time_without_deep_recursion():
    """An unrolled sequence is as deep as it is long: each step is bound after the one before it, so neither the
    builder's normalization nor the importer's constant folding recurses through (or copies) the sequence."""
    model, feeds = _onnx_node_model("LSTM", (250, 1, 2), 2, {"direction": "bidirectional"}, initial=2)
    mod, params, _ = from_onnx(model)
    assert mod.script().count("R.sigmoid(") == 250 * 2 * 3  # three sigmoid gates a step, each computed once
    got = relax_mlir.interpret(mod, "main", *feeds.values(), *params.values())
    for g, e in zip(got, ReferenceEvaluator(model).run(None, feeds)):
        np.testing.assert_allclose(np.asarray(g), e, **TOL)


_REFUSED = {  # name: (op_type, attributes, keywords of _onnx_node_model, the error's message)
    "sequence_lens": ("GRU", {}, {"extra": {"sequence_lens": np.array([3, 2])}},
                      r"node Y \(GRU\): input 4 \(sequence_lens\) is not supported: every sequence of the batch is "
                      r"as long as the input; expected it left out"),
    "peepholes": ("LSTM", {}, {"extra": {"P": np.zeros((1, 12))}},
                  r"node Y \(LSTM\): input 7 \(P\) is not supported \(peepholes\); expected it left out"),
    "other activations": ("LSTM", {"activations": ["Sigmoid", "Tanh", "Relu"]}, {},
                          r"node Y \(LSTM\): activations \['Sigmoid', 'Tanh', 'Relu'\] are not supported; expected "
                          r"\['Sigmoid', 'Tanh', 'Tanh'\] for each of the 1 direction\(s\)"),
    "clip": ("RNN", {"clip": 3.0}, {}, r"node Y \(RNN\): clip=3.0 is not supported; expected it left out"),
    "input_forget": ("LSTM", {"input_forget": 1}, {},
                     r"node Y \(LSTM\): input_forget=1 is not supported; expected it left out"),
    "layout 2": ("RNN", {"layout": 2}, {}, r"node Y \(RNN\): direction='forward', layout=2: expected direction "
                 r"forward, reverse or bidirectional and layout 0 or 1"),
    "hidden_size": ("GRU", {"hidden_size": 5}, {}, r"node Y \(GRU\): hidden_size=5 disagrees with R \(1, 12, 4\), "
                    r"whose last dim is the hidden size"),
}


@pytest.mark.parametrize("name", list(_REFUSED))
def test_onnx_recurrent_node_refusals_name_the_node(name):
    op_type, attrs, kw, message = _REFUSED[name]
    model, _ = _onnx_node_model(op_type, (3, 2, 3), 4, attrs, outputs=("Y",), **kw)
    with pytest.raises(OnnxImportError, match=message):
        from_onnx(model)
