"""``from_onnx``: attributes checked as ``onnx.checker``, its shape inference and onnxruntime check them: a conv's or
pool's per-axis attributes of the wrong length, a conv's ``kernel_shape`` that disagrees with its weight, attributes
the op's schema does not list, and inputs or initializers of an element type no Relax tensor holds, each refused
naming the node (or the value); the models PyTorch's exporter writes still import and compute what PyTorch does."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, defs, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import relax_mlir  # noqa: E402
from relax_mlir.frontend.onnx import _UNCHECKED_ATTRIBUTES, CONVERTERS, OnnxImportError, from_onnx  # noqa: E402

X4 = (1, 4, 8, 8)


def _model(node, shapes=(("x", X4),), initializers=(), opset=18, elem_type=TensorProto.FLOAT):
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, elem_type, s) for n, s in shapes],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in node.output],
                              list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _weight(*shape, name="w"):
    return numpy_helper.from_array(np.random.default_rng(0).standard_normal(shape).astype(np.float32), name)


def _refused(model, message):
    with pytest.raises(OnnxImportError, match=rf"^from_onnx: {message}$"):
        from_onnx(model)


# -- per-axis attributes of a conv or pool ---------------------------------------------------------------------

_EACH_OF_2 = r"each of the 2 spatial axes of the input \(1, 4, 8, 8\)"


@pytest.mark.parametrize("op_type, inputs, weight, attrs, message", [
    ("MaxPool", ["x"], None, {"kernel_shape": [2]},
     rf"attribute kernel_shape has 1 value \(\[2\]\); expected 2, one for {_EACH_OF_2}"),  # was a 2x2 window
    ("AveragePool", ["x"], None, {"kernel_shape": [2, 2, 2]},
     rf"attribute kernel_shape has 3 values \(\[2, 2, 2\]\); expected 2, one for {_EACH_OF_2}"),
    ("MaxPool", ["x"], None, {"kernel_shape": [2, 2], "pads": [1]},
     rf"attribute pads has 1 value \(\[1\]\); expected 4, a begin and an end for {_EACH_OF_2}"),  # padded every side
    ("AveragePool", ["x"], None, {"kernel_shape": [3, 3], "pads": [1, 1]},  # was read as symmetric (h, w) pads
     rf"attribute pads has 2 values \(\[1, 1\]\); expected 4, a begin and an end for {_EACH_OF_2}"),
    ("MaxPool", ["x"], None, {"kernel_shape": [2, 2], "strides": [1]},
     rf"attribute strides has 1 value \(\[1\]\); expected 2, one for {_EACH_OF_2}"),
    ("MaxPool", ["x"], None, {"kernel_shape": [2, 2], "dilations": [2]},
     rf"attribute dilations has 1 value \(\[2\]\); expected 2, one for {_EACH_OF_2}"),
    ("Conv", ["x", "w"], (2, 4, 3, 3), {"kernel_shape": [3]},
     rf"attribute kernel_shape has 1 value \(\[3\]\); expected 2, one for {_EACH_OF_2}"),
    ("Conv", ["x", "w"], (2, 4, 3, 3), {"strides": [2]},
     rf"attribute strides has 1 value \(\[2\]\); expected 2, one for {_EACH_OF_2}"),
    ("Conv", ["x", "w"], (2, 4, 3, 3), {"pads": [1, 1]},
     rf"attribute pads has 2 values \(\[1, 1\]\); expected 4, a begin and an end for {_EACH_OF_2}"),
    ("ConvTranspose", ["x", "w"], (4, 2, 3, 3), {"strides": [2, 2], "output_padding": [1]},
     rf"attribute output_padding has 1 value \(\[1\]\); expected 2, one for {_EACH_OF_2}"),
    ("ConvTranspose", ["x", "w"], (4, 2, 3, 3), {"pads": [0]},
     rf"attribute pads has 1 value \(\[0\]\); expected 4, a begin and an end for {_EACH_OF_2}"),
])
def test_per_axis_attribute_of_the_wrong_length_is_refused_naming_it(op_type, inputs, weight, attrs, message):
    """Relax's ops expand one value to every axis (and take two pads of a 2-D op as symmetric ones), so each of
    these was imported as something else; ONNX's shape inference refuses them ("Attribute ... has incorrect
    size")."""
    initializers = [_weight(*weight)] if weight else []
    model = _model(helper.make_node(op_type, inputs, ["y"], name="p", **attrs), initializers=initializers)
    _refused(model, rf"node p \({op_type}\): {message}")


def test_per_axis_attribute_of_a_1d_conv_names_its_one_axis():
    model = _model(helper.make_node("Conv", ["x", "w"], ["y"], name="p", pads=[1]), (("x", (1, 4, 8)),),
                   [_weight(2, 4, 3)])
    _refused(model, r"node p \(Conv\): attribute pads has 1 value \(\[1\]\); expected 2, a begin and an end for the "
                    r"1 spatial axis of the input \(1, 4, 8\)")


@pytest.mark.parametrize("op_type, weight, kernel", [
    ("Conv", (2, 4, 3, 3), [5, 5]), ("Conv", (2, 4, 3, 3), [3, 1]), ("ConvTranspose", (4, 2, 3, 3), [2, 2]),
])
def test_conv_kernel_shape_disagreeing_with_the_weight_is_refused(op_type, weight, kernel):
    """ONNX infers ``kernel_shape`` from the weight when it is absent, and onnxruntime refuses one that disagrees;
    it was silently ignored (the weight's shape used)."""
    model = _model(helper.make_node(op_type, ["x", "w"], ["y"], name="p", kernel_shape=kernel),
                   initializers=[_weight(*weight)])
    _refused(model, rf"node p \({op_type}\): kernel_shape \[{kernel[0]}, {kernel[1]}\] disagrees with the weight's "
                    rf"spatial shape \[3, 3\] \(W \({', '.join(map(str, weight))}\)\); expected them equal")


@pytest.mark.parametrize("op_type, weight, attrs", [
    ("Conv", (2, 4, 3, 3), {"kernel_shape": [3, 3], "strides": [2, 1], "pads": [1, 0, 1, 2], "dilations": [1, 2]}),
    ("Conv", (2, 4, 3), {"kernel_shape": [3], "strides": [2], "pads": [1, 0], "dilations": [2]}),
    ("ConvTranspose", (4, 2, 3, 3), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                     "output_padding": [1, 0]}),
    ("MaxPool", None, {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1], "dilations": [1, 2]}),
    ("AveragePool", None, {"kernel_shape": [3, 2], "strides": [1, 2], "pads": [1, 1, 1, 0]}),
])
def test_per_axis_attributes_of_the_right_length_match_the_reference_evaluator(op_type, weight, attrs):
    """The checks refuse nothing well formed: asymmetric per-axis attributes, each of its own value per axis."""
    shape = (1, 4, 8) if weight and len(weight) == 3 else X4
    inputs, initializers = (["x", "w"], [_weight(*weight)]) if weight else (["x"], [])
    model = _model(helper.make_node(op_type, inputs, ["y"], **attrs), (("x", shape),), initializers)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    expected = ReferenceEvaluator(model).run(None, {"x": x})[0]
    mod, params, _ = from_onnx(model)
    got = relax_mlir.interpret(mod, "main", x, *params.values())
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


# -- attributes the schema does not list -----------------------------------------------------------------------

@pytest.mark.parametrize("op_type, inputs, attrs, opset, why", [
    ("Split", ["x"], {"split": [2, 2]}, 18, "it became an input at 13"),  # was read (a TypeError for an INT)
    ("ReduceSum", ["x"], {"axes": [0]}, 17, "it became an input at 13"),  # was read as the axes
    ("ReduceMean", ["x"], {"axes": [0]}, 18, "it became an input at 18"),
    ("BatchNormalization", ["x", "s", "s", "s", "s"], {"spatial": 1}, 17, "ONNX removed it at 9"),
    ("Relu", ["x"], {"alpha": 0.1}, 17, "it has none"),  # was ignored
    ("Gemm", ["x", "x"], {"transpose_a": 1}, 17, "its attributes: alpha, beta, transA, transB"),
])
def test_attribute_the_schema_does_not_list_is_refused_naming_it(op_type, inputs, attrs, opset, why):
    """``onnx.checker`` refuses these ("Unrecognized attribute"), and so does onnxruntime; the importer ignored them,
    or read the ones an older opset had."""
    node = helper.make_node(op_type, inputs, ["y"], name="p", **attrs)
    with pytest.raises(onnx.checker.ValidationError, match=f"Unrecognized attribute: {next(iter(attrs))}"):
        _check_node(node, opset)
    model = _model(node, (("x", (4, 4)),), [numpy_helper.from_array(np.ones(4, np.float32), "s")], opset=opset)
    _refused(model, rf"node p \({op_type}\): attribute {next(iter(attrs))} is not an attribute of {op_type} at opset "
                    rf"{opset} \({why}\)")


def _check_node(node, opset: int) -> None:
    """``onnx.checker``'s verdict on the node alone (a model's graph outputs would need shapes)."""
    context = onnx.checker.C.CheckerContext()
    context.ir_version, context.opset_imports = onnx.IR_VERSION, {"": opset}
    onnx.checker.check_node(node, context)


def _node_with_an_unknown_attribute(op_type: str, schema):
    """A node of the op with the inputs, outputs and required attributes its schema asks for, and the attribute
    ``zzz``."""
    right = {"INT": 1, "INTS": [1], "STRING": "a"}
    required = {n: right[a.type.name] for n, a in schema.attributes.items() if a.required}
    outputs = [f"y{i}" for i in range(max(1, schema.min_output))]
    return helper.make_node(op_type, ["x"] * schema.min_input, outputs, name="p", **required, zzz=1)


def test_every_converter_op_refuses_an_unknown_attribute_exactly_where_onnx_checker_does():
    """For every op the importer converts, at every opset from 17 to onnx's newest: an attribute its schema does not
    list is refused by ``from_onnx`` exactly where ``onnx.checker`` refuses it, so ``_UNCHECKED_ATTRIBUTES`` (the
    schemas that allow any attribute, which onnx's Python API does not tell) is checker's own list."""
    allowed = set()
    for op_type in CONVERTERS:
        for opset in range(17, defs.onnx_opset_version() + 1):
            try:
                schema = defs.get_schema(op_type, opset, "")
            except defs.SchemaError:  # (an op newer than the opset)
                continue
            if schema.deprecated:  # (GroupNormalization-18: onnx.checker refuses the op itself there)
                continue
            node = _node_with_an_unknown_attribute(op_type, schema)
            try:
                _check_node(node, opset)
                allowed.add(op_type)
                continue
            except onnx.checker.ValidationError as exc:
                assert "Unrecognized attribute: zzz" in str(exc), (op_type, opset, str(exc))
            with pytest.raises(OnnxImportError, match=rf"^from_onnx: node p \({op_type}\): attribute zzz is not an "
                                                      rf"attribute of {op_type} at opset {opset} \("):
                from_onnx(_model(node, (("x", (1, 4)),), opset=opset))
    assert allowed == _UNCHECKED_ATTRIBUTES


def test_layer_norm_takes_attributes_its_schema_does_not_list_as_onnx_does():
    """LayerNormalization's schema allows unlisted attributes (``onnx.checker`` passes them): ignored, as there."""
    node = helper.make_node("LayerNormalization", ["x", "s"], ["y"], stash_type=1, zzz=1)
    _check_node(node, 18)
    model = _model(node, (("x", (2, 4)),), [numpy_helper.from_array(np.ones(4, np.float32), "s")])
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    mod, params, _ = from_onnx(model)
    centred = x - x.mean(-1, keepdims=True)
    expected = centred / np.sqrt((centred ** 2).mean(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(relax_mlir.interpret(mod, "main", x, *params.values()), expected, rtol=1e-5,
                               atol=1e-6)


# -- element types no Relax tensor holds -----------------------------------------------------------------------

_HELD = "FLOAT, UINT8, INT8, UINT16, INT16, INT32, INT64, BOOL, FLOAT16, DOUBLE, UINT32, UINT64, BFLOAT16"


@pytest.mark.parametrize("elem_type, name", [(TensorProto.STRING, "STRING"), (TensorProto.COMPLEX64, "COMPLEX64"),
                                             (TensorProto.FLOAT8E4M3FN, "FLOAT8E4M3FN")])
def test_input_of_an_element_type_relax_does_not_hold_is_named(elem_type, name):
    """Was Relax's bare ``ValueError: TensorStructInfo: unknown dtype 'object'``, which named no input."""
    model = _model(helper.make_node("Identity", ["x"], ["y"]), (("x", (4,)),), elem_type=elem_type)
    _refused(model, rf"input x: element type {name} is not supported; expected one of {_HELD}")


@pytest.mark.parametrize("tensor", [
    helper.make_tensor("c", TensorProto.STRING, [2], [b"a", b"b"]),
    numpy_helper.from_array(np.array([1 + 2j], np.complex64), "c"),
])
def test_initializer_of_an_element_type_relax_does_not_hold_is_named(tensor):
    """Was Relax's bare ``ValueError: R.const: unknown dtype 'object'``."""
    model = _model(helper.make_node("Identity", ["c"], ["y"]), (), [tensor])
    name = TensorProto.DataType.Name(tensor.data_type)
    _refused(model, rf"initializer c: element type {name} is not supported; expected one of {_HELD}")


# -- what PyTorch's exporter writes ----------------------------------------------------------------------------

def _convs_and_pools():
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv1d(4, 4, 3, padding=1, stride=2)
            self.c2 = nn.Conv2d(4, 6, (3, 5), padding=(1, 2), stride=(2, 1), dilation=(1, 2), groups=2)
            self.ct = nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1)
            self.bn = nn.BatchNorm2d(4)

        def forward(self, x):
            y = self.bn(self.ct(self.c2(x)))
            pooled = nn.functional.max_pool2d(y, (3, 2), (2, 1), ceil_mode=True).mean(dim=(2, 3)) + \
                nn.functional.avg_pool2d(y, 3, 2, padding=1, count_include_pad=False).sum(dim=(2, 3))
            a, b = torch.split(pooled, [1, 3], dim=1)
            line = self.c1(x.flatten(2)[:, :, :16])
            return a + b.mean(dim=1, keepdim=True) + line.amax(dim=(1, 2)).unsqueeze(1)

    return torch, Model().eval()


@pytest.mark.parametrize("opset", [17, 18])
def test_models_pytorch_exports_carry_no_attribute_the_checks_refuse(opset):
    """Convolutions, pools, a split and reductions as ``torch.onnx.export`` (TorchScript) writes them, at an opset
    before and after the reductions' axes became inputs: every attribute is one the schema lists, and the model
    imports and computes what PyTorch computes."""
    torch, model = _convs_and_pools()
    x = torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(0))
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), f, dynamo=False, opset_version=opset, do_constant_folding=False,
                          input_names=["x"])
    proto = onnx.load_from_string(f.getvalue())
    for node in proto.graph.node:
        listed = defs.get_schema(node.op_type, opset, node.domain).attributes
        assert all(a.name in listed for a in node.attribute), (node.op_type, [a.name for a in node.attribute])
    assert {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "Split"} <= {n.op_type for n in proto.graph.node}
    mod, params, states = from_onnx(proto)
    got = relax_mlir.interpret(mod, "main", x.numpy(), *params.values(), *states.values())
    np.testing.assert_allclose(got[0] if states else got, model(x).detach().numpy(), rtol=1e-4, atol=1e-5)
