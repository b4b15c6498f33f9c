"""What a mutation fuzz of the text and file inputs found (s17): each input below once ran out of memory, leaked an
internal exception (IndexError, KeyError, TypeError) or was read silently wrong. Each is now one worded error
naming what is wrong and what was expected."""

from __future__ import annotations

import re
import warnings
import zipfile

import numpy as np
import pytest

from relax_mlir import op
from relax_mlir.ir import TensorStructInfo, Var
from relax_mlir.models import mlp
from relax_mlir.script import ParseError, from_source
from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer, Trainer
from relax_mlir.training.checkpoint_io import CheckpointError
from relax_mlir.transform import PipelineError, parse_pipeline

B, SIZES = 4, (6, 5, 3)


# -- R.split into a huge number of sections ------------------------------------------------------------------
_SPLIT = '@R.function\ndef main(x: R.Tensor({shape}, "float32")):\n    t = R.split(x, {n})\n    return t\n'


@pytest.mark.parametrize("shape", ['("n",)', "(0,)"])
@pytest.mark.parametrize("n", [2**31, 2**40, 65537])
def test_split_into_more_sections_than_the_limit_is_refused_at_once(shape, n):
    """A symbolic (or empty) axis gave no early refusal: a 40-byte text built a tuple of 2**31 fields (OOM kill)."""
    with pytest.raises(ParseError, match=rf"<string>:3:9: relax.split: {n} sections are too many: a split makes at "
                                         r"most 65536 \(2\*\*16\) pieces"):
        from_source(_SPLIT.format(shape=shape, n=n))


def test_split_through_the_api_is_refused_too_and_the_limit_itself_is_allowed():
    with pytest.raises(ValueError, match=r"relax.split: 2147483648 sections are too many"):
        op.split(Var("x", TensorStructInfo(("n", "m"), "float32")), 2**31, axis=1)
    func = from_source(_SPLIT.format(shape="(0,)", n=65536))  # every piece empty: a valid split
    assert len(func.ret_struct_info.fields) == 65536


# -- Trainer(train_mod): the attributes SetupTrainer wrote -------------------------------------------------
def _train_text() -> str:
    setup = SetupTrainer(CrossEntropyLoss(), SGD(0.1), [TensorStructInfo((B, 3), "float32"),
                                                        TensorStructInfo((B,), "int64")])
    return setup(mlp(B, SIZES)).script()


@pytest.mark.parametrize("old, new, message", [
    (', "rng_key_num": 0', "", r"rng_key_num must be an int >= 0, as SetupTrainer writes it; it has none"),
    ('"rng_key_num": 0', '"rng_key_num": "x"', r"rng_key_num must be an int >= 0, as SetupTrainer writes it; "
                                               r"got 'x' \(str\)"),
    ('"rng_key_num": 0', '"rng_key_num": -1', r"rng_key_num must be an int >= 0, .* got -1 \(int\)"),
    (', "optim_state": (R.const(0, "int64"),)', "", r"optim_state must be a tuple of arrays \(the optimizer's "
                                                    r"initial state\), as SetupTrainer writes it; it has none"),
    ('"optim_state": (R.const(0, "int64"),)', '"optim_state": 3', r"optim_state must be a tuple of arrays .*; "
                                                                  r"got 3 \(int\)"),
    ('"optim_state": (R.const(0, "int64"),)', '"optim_state": ("a",)', r"optim_state must be a tuple of arrays .*; "
                                                                      r"got \('a',\) \(tuple\)"),
    ('"state_num": 0', '"state_num": 0, "state_init": 5',
     r"state_init must be a dict of state names to their fill values \(numbers\), as SetupTrainer writes it; "
     r"got 5 \(int\)"),
    ('"state_num": 0', '"state_num": 0, "state_init": {"s": "one"}',
     r"state_init must be a dict .*; got \{'s': 'one'\}"),
    ('"input_num": 1', '"input_num": 1.5', r"input_num must be an int >= 1, .* got 1.5 \(float\)"),
    ('"param_num": 4', '"param_num": True', r"param_num must be an int >= 1, .* got True \(bool\)"),
    ('"state_num": 0', '"state_num": None', r"state_num must be an int >= 0, .* got None \(NoneType\)"),
    ('"param_num": 4', '"param_num": 3', r"input_num \+ param_num \+ state_num = 4, but predict takes 5 parameters"),
    ('"optimizer_kind": "SGD"', '"optimizer_kind": 7', r"optimizer_kind must be the optimizer's class name, a str, "
                                                       r".* got 7 \(int\)"),
])
def test_a_training_module_with_a_bad_attribute_is_refused_naming_it(old, new, message):
    text = _train_text()
    assert old in text
    with pytest.raises(ValueError, match=rf"^Trainer: the module attribute(s)? {message}"):
        Trainer(from_source(text.replace(old, new)))


def test_a_training_module_parsed_back_from_its_text_still_trains():
    trainer = Trainer(from_source(_train_text())).build(target="numpy")
    trainer.zero_init_params()
    trainer.update_params(np.ones((B, SIZES[0]), np.float32), np.zeros(B, np.int64))
    assert trainer.step == 1 and trainer.optim_state[0] == 1


# -- ONNX: inputs and initializers -------------------------------------------------------------------------
def _onnx(nodes, initializers=(), shape=(1, 4), opset=17):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], list(initializers))
    return onnx, helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("op_type, inputs, attrs, message", [
    ("Relu", [], {}, r"node y \(Relu\): takes 1 input \(X\), got 0$"),
    ("Add", ["x"], {}, r"node y \(Add\): takes 2 inputs \(A, B\), got 1$"),
    ("MatMul", [], {}, r"node y \(MatMul\): takes 2 inputs \(A, B\), got 0$"),
    ("Relu", ["x", "x"], {}, r"node y \(Relu\): takes 1 input \(X\), got 2$"),  # was dropped silently
    ("Sum", [], {}, r"node y \(Sum\): takes at least 1 input \(data_0...\), got 0$"),
    ("Clip", ["x", "", "", "x"], {}, r"node y \(Clip\): takes 1 to 3 inputs \(input, \[min\], \[max\]\), got 4$"),
    ("Clip", ["", "x"], {}, r"node y \(Clip\): input 0 \(input\) is required, but its name is empty$"),
    ("Gemm", ["x", ""], {}, r"node y \(Gemm\): input 1 \(B\) is required, but its name is empty$"),
    ("Resize", ["x"], {}, r"node y \(Resize\): neither scales nor sizes is given; expected one of them$"),
])
def test_onnx_node_with_the_wrong_inputs_names_the_node_and_what_its_op_takes(op_type, inputs, attrs, message):
    onnx, model = _onnx([__import__("onnx").helper.make_node(op_type, inputs, ["y"], **attrs)])
    from relax_mlir.frontend.onnx import OnnxImportError, from_onnx

    with pytest.raises(OnnxImportError, match=rf"^from_onnx: {message}"):
        from_onnx(model)


@pytest.mark.parametrize("data_type, message", [
    (0, r"element type UNDEFINED, dims \[4\]: not a readable tensor \(TypeError: The element type in the input tensor "
        r"is UNDEFINED.\); expected data of a known element type that fills its dims$"),
    (99, r"element type 99 \(not an ONNX type\), dims \[4\]: not a readable tensor \(KeyError: 99\)"),
    (16, r"element type BFLOAT16, dims \[4\]: not a readable tensor \(ValueError: cannot reshape"),
])
def test_onnx_initializer_that_cannot_be_read_is_named(data_type, message):
    pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    from relax_mlir.frontend.onnx import OnnxImportError, from_onnx

    bias = numpy_helper.from_array(np.ones(4, np.float32), "B")
    bias.data_type = data_type
    _, model = _onnx([helper.make_node("Add", ["x", "B"], ["y"])], [bias])
    with pytest.raises(OnnxImportError, match=rf"^from_onnx: initializer B: {message}"):
        from_onnx(model)



# -- ONNX: attributes ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("op_type, inputs, attribute", [
    ("MaxPool", ["x"], "kernel_shape"), ("AveragePool", ["x"], "kernel_shape"), ("Cast", ["x"], "to"),
    ("Concat", ["x", "x"], "axis"), ("DepthToSpace", ["x"], "blocksize"), ("Einsum", ["x"], "equation"),
    ("BitShift", ["x", "x"], "direction"), ("LRN", ["x"], "size"),
])
def test_onnx_node_missing_a_required_attribute_names_it(op_type, inputs, attribute):
    """Each was a bare KeyError from its converter (LRN's and BitShift's a refusal of the value None)."""
    onnx, model = _onnx([__import__("onnx").helper.make_node(op_type, inputs, ["y"], name="p")])
    from relax_mlir.frontend.onnx import OnnxImportError, from_onnx

    with pytest.raises(OnnxImportError, match=rf"^from_onnx: node p \({op_type}\): missing the required attribute "
                                              rf"{attribute}$"):
        from_onnx(model)


@pytest.mark.parametrize("op_type, inputs, attrs, message", [
    ("MaxPool", ["x"], {"kernel_shape": 2}, "attribute kernel_shape has type INT; expected INTS"),  # KeyError next
    ("Cast", ["x"], {"to": "float"}, "attribute to has type STRING; expected INT"),  # was KeyError: 'float'
    ("Einsum", ["x"], {"equation": 1}, "attribute equation has type INT; expected STRING"),  # was AttributeError
    ("Constant", [], {"value": 1.0}, "attribute value has type FLOAT; expected TENSOR"),  # was AttributeError
    ("CumSum", ["x", "x"], {"reverse": "no"}, "attribute reverse has type STRING; expected INT"),  # read as true
    ("Conv", ["x", "x"], {"kernel_shape": 3}, "attribute kernel_shape has type INT; expected INTS"),  # not read
    ("LeakyRelu", ["x"], {"alpha": 1}, "attribute alpha has type INT; expected FLOAT"),  # as onnx.checker says
])
def test_onnx_attribute_of_another_type_than_its_schema_is_refused_naming_it(op_type, inputs, attrs, message):
    onnx, model = _onnx([__import__("onnx").helper.make_node(op_type, inputs, ["y"], name="p", **attrs)])
    from relax_mlir.frontend.onnx import OnnxImportError, from_onnx

    with pytest.raises(OnnxImportError, match=rf"^from_onnx: node p \({op_type}\): {message}$"):
        from_onnx(model)


#: A value of another attribute type than each schema type (the probe of every converter's attributes).
_WRONG_TYPE = {"INT": ("a", 1.5, [1, 2]), "FLOAT": ("a", 1, [1.0, 2.0]), "INTS": (2, "a", [1.0, 2.0]),
               "FLOATS": (1.0, [1]), "STRING": (1, ["a", "b"], 1.0), "STRINGS": ("a", 1), "TENSOR": (1, 1.0, "a"),
               "SPARSE_TENSOR": (1,)}
_RIGHT_TYPE = {"INT": 1, "INTS": [1], "STRING": "a"}  # (the required attributes' types)


def _attribute_cases(opset: int):
    """(op type, attribute, wrong value) for every attribute of every converter op's schema in the opset."""
    from onnx import defs

    from relax_mlir.frontend.onnx import CONVERTERS

    for op_type in CONVERTERS:
        try:
            schema = defs.get_schema(op_type, opset, "")
        except defs.SchemaError:  # (an op newer than the opset)
            continue
        for name, attribute in sorted(schema.attributes.items()):
            for value in _WRONG_TYPE[attribute.type.name]:
                yield op_type, name, value


@pytest.mark.parametrize("opset", [17, 19])
def test_every_converter_attribute_of_another_type_is_refused_naming_it(opset):
    """Every attribute of every op the importer converts, given a value of each other type: one worded refusal
    (was a KeyError, TypeError or AttributeError for some, and silently read, or ignored, for many)."""
    onnx = pytest.importorskip("onnx")
    from onnx import defs, helper

    from relax_mlir.frontend.onnx import OnnxImportError, from_onnx

    for op_type, name, value in _attribute_cases(opset):
        schema = defs.get_schema(op_type, opset, "")
        required = {n: _RIGHT_TYPE[a.type.name] for n, a in schema.attributes.items() if a.required and n != name}
        node = helper.make_node(op_type, ["x"] * schema.min_input, ["y"], name="p", **required, **{name: value})
        given = onnx.AttributeProto.AttributeType.Name(next(a.type for a in node.attribute if a.name == name))
        _, model = _onnx([node], opset=opset)
        with pytest.raises(OnnxImportError, match=rf"^from_onnx: node p \({op_type}\): attribute {name} has type "
                                                  rf"{given}; expected {schema.attributes[name].type.name}$"):
            from_onnx(model)


@pytest.mark.parametrize("op_type, inputs, attrs, shape, message", [
    ("Cast", ["x"], {"to": 999}, (1, 4), r"to=999 is not an ONNX element type"),  # was KeyError: 999
    ("Concat", ["x", "x"], {"axis": 2}, (1, 4), r"axis 2 is out of range for rank 2 \(expected \[-2, 1\]\)"),
    ("Flatten", ["x"], {"axis": 3}, (1, 4), r"axis 3 is out of range for rank 2 \(expected \[-2, 2\]\)"),
    ("Split", ["x"], {"axis": -3}, (1, 4), r"axis -3 is out of range for rank 2 \(expected \[-2, 1\]\)"),
    ("DepthToSpace", ["x"], {"blocksize": 0}, (1, 4, 2, 2), r"blocksize=0; expected a positive blocksize"),
    ("DepthToSpace", ["x"], {"blocksize": 2, "mode": "RCD"}, (1, 4, 2, 2), r"mode='RCD'; expected 'DCR' or 'CRD'"),
    ("DepthToSpace", ["x"], {"blocksize": 2}, (1, 6, 2, 2),
     r"6 channels do not make blocks of blocksize\*\*2 = 4; expected a multiple of it"),
])
def test_onnx_attribute_value_out_of_its_range_is_refused_naming_it(op_type, inputs, attrs, shape, message):
    """A KeyError or ZeroDivisionError, or silently another axis (``axis % rank``) or mode (DCR), before."""
    onnx, model = _onnx([__import__("onnx").helper.make_node(op_type, inputs, ["y"], name="p", **attrs)], shape=shape)
    from relax_mlir.frontend.onnx import OnnxImportError, from_onnx

    with pytest.raises(OnnxImportError, match=rf"^from_onnx: node p \({op_type}\): {message}$"):
        from_onnx(model)


def test_onnx_layer_norm_axis_and_split_into_no_parts_are_refused_naming_the_node():
    """LayerNormalization's axis 2 of a rank-2 input normalized over every axis (``2 % 2``); Split's
    ``num_outputs=0`` was a ZeroDivisionError."""
    pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    from relax_mlir.frontend.onnx import OnnxImportError, from_onnx

    scale = numpy_helper.from_array(np.ones(4, np.float32), "s")
    _, model = _onnx([helper.make_node("LayerNormalization", ["x", "s"], ["y"], name="p", axis=2)], [scale])
    with pytest.raises(OnnxImportError, match=r"^from_onnx: node p \(LayerNormalization\): axis 2 is out of range for "
                                              r"rank 2 \(expected \[-2, 1\]\)$"):
        from_onnx(model)
    _, model = _onnx([helper.make_node("Split", ["x"], ["y"], name="p", num_outputs=0)], opset=18)
    with pytest.raises(OnnxImportError, match=r"^from_onnx: node p \(Split\): num_outputs=0; expected a positive "
                                              r"number of parts$"):
        from_onnx(model)


def test_onnx_attribute_referring_to_a_function_attribute_and_an_untyped_input_are_named():
    """A node of the graph whose attribute refers to a function's (``ref_attr_name``) was onnx's bare ValueError;
    a graph input of element type UNDEFINED a KeyError."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from relax_mlir.frontend.onnx import OnnxImportError, from_onnx

    node = helper.make_node("LeakyRelu", ["x"], ["y"], name="p")
    node.attribute.append(onnx.AttributeProto(name="alpha", ref_attr_name="a", type=onnx.AttributeProto.FLOAT))
    _, model = _onnx([node])
    with pytest.raises(OnnxImportError, match=r"^from_onnx: node p \(LeakyRelu\): attribute alpha refers to a, an "
                                              r"attribute of an enclosing function, which only a node of a function "
                                              r"body may; expected a value$"):
        from_onnx(model)
    _, model = _onnx([helper.make_node("Relu", ["x"], ["y"])])
    model.graph.input[0].type.tensor_type.elem_type = TensorProto.UNDEFINED
    with pytest.raises(OnnxImportError, match=r"^from_onnx: input x: element type UNDEFINED is not a tensor element "
                                              r"type$"):
        from_onnx(model)

# -- --passes ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, message", [
    ("BindSymbolicVars({[1]: 2})", r"in 'BindSymbolicVars\(\{\[1\]: 2\}\)', '\{\[1\]: 2\}' is not a literal "
                                   r"\(unhashable type: 'list'; a dict's keys are numbers, strings or tuples of "
                                   r"them\)$"),
    ('BindSymbolicVars({{"n": 1}: 4})', r"in .*, \"\{\{'n': 1\}: 4\}\" is not a literal \(unhashable type: 'dict'"),
    ("BindSymbolicVars(x=" + "-" * 1000 + "1)", r"in 'BindSymbolicVars\(x=-+'\.\.\. \(1021 characters\), an "
                                                r"option's value nests too deeply$"),
    ("BindSymbolicVars(x=" + "-" * 100000 + "1)", r"'BindSymbolicVars\(x=-+'\.\.\. \(100021 characters\) nests too "
                                                  r"deeply$"),
])
def test_pipeline_option_that_is_no_literal_is_a_pipeline_error(text, message):
    with pytest.raises(PipelineError, match=rf"^--passes: {message}"):
        parse_pipeline(text)


# -- checkpoints -------------------------------------------------------------------------------------------
def test_a_checkpoint_holding_one_member_twice_is_refused(tmp_path):
    """A zip may hold one name twice (np.savez never writes that); the later one was loaded without a word."""
    setup = SetupTrainer(CrossEntropyLoss(), SGD(0.1), [TensorStructInfo((B, 3), "float32"),
                                                        TensorStructInfo((B,), "int64")])
    trainer = Trainer(mlp(B, SIZES), 4, setup)
    trainer.zero_init_params()
    path = str(tmp_path / "twice.npz")
    trainer.save(path)
    with zipfile.ZipFile(path) as z:
        w0 = z.read("param/w0.npy")
    with warnings.catch_warnings(), zipfile.ZipFile(path, "a") as z:
        warnings.simplefilter("ignore")  # (zipfile warns of the duplicate name it writes)
        z.writestr("param/w0.npy", w0)
    with pytest.raises(CheckpointError, match=rf"^Trainer.load: {re.escape(path)}: the archive holds param/w0.npy more "
                                              r"than once; expected each array once, a checkpoint"):
        trainer.load(path)
