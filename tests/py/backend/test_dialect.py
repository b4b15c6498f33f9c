"""The relax dialect: the committed IRDL and README are what the registry generates, names are unambiguous, and
every module the op tests export is verified by ``mlir-opt --irdl-file`` (outside Python)."""

from __future__ import annotations

import pytest
from mlir import ir

from relax_mlir import op as relax_op
from relax_mlir.backend import dialect, dialect_gen
from relax_mlir.backend.export import export_module
from relax_mlir.ir import IRModule

from .op_cases import compilable, make_case, mlir_opt_verify

REGENERATE = "regenerate with `python -m relax_mlir.backend.dialect_gen --write`"


def test_irdl_file_is_generated_from_the_registry():
    assert dialect.IRDL_PATH.read_text(encoding="utf-8") == dialect.irdl_text(), REGENERATE


def test_readme_is_generated_from_the_registry():
    assert dialect.README_PATH.read_text(encoding="utf-8") == dialect_gen.readme_text(), REGENERATE


def test_op_names_are_injective_and_valid_irdl_names():
    names = [dialect.dialect_op_name(op) for op in relax_op.list_ops()]
    assert len(set(names)) == len(names)
    for name in names:
        short = name.split(".", 1)[1]
        assert short.replace("_", "").isalnum() and short == short.lower() and "__" not in short, name
    assert dialect.dialect_op_name(relax_op.get_op("relax.nn.relu")) == "relax.nn_relu"
    assert dialect.dialect_op_name(relax_op.get_op("relax.grad.no_grad")) == "relax.grad_no_grad"


def test_every_lowered_op_is_in_the_dialect():
    text = dialect.irdl_text()
    for op in dialect.dialect_records():
        assert f"irdl.operation @{dialect.dialect_op_name(op).split('.', 1)[1]} {{" in text


def test_loaded_dialect_verifies_ops():
    with ir.Context() as ctx, ir.Location.unknown():
        names = dialect.load_relax_dialect(ctx)
        assert "relax.matmul" in names and "relax.nn_conv2d" in names
        good = ir.Module.parse('func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n'
                               '  %0 = "relax.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}')
        assert good.operation.verify()
        with pytest.raises(ir.MLIRError, match="expects exactly 2 operands"):
            ir.Module.parse('func.func @f(%x: tensor<4xf32>) {\n'
                            '  %0 = "relax.add"(%x) : (tensor<4xf32>) -> tensor<4xf32>\n  return\n}')


@pytest.mark.parametrize("name,value,text", [
    ("axis", None, "unit"), ("keepdims", True, "true"), ("axis", -1, "-1 : i64"), ("alpha", 0.5, "5.000000e-01 : f64"),
    ("dtype", "bool", "i1"), ("out_dtype", "bfloat16", "bf16"), ("layout", "NCHW", '"NCHW"'),
    ("axes", (0, 2), "array<i64: 0, 2>"), ("axes", (), "array<i64>"), ("min", float("-inf"), "0xFFF0000000000000 : f64"),
])
def test_attributes_round_trip(name, value, text):
    with ir.Context(), ir.Location.unknown():
        attr = dialect.encode_attr(name, value)
        assert str(attr) == text
        assert dialect.decode_attr(attr) == value


def test_unsupported_attribute_and_dtype_say_so():
    with ir.Context(), ir.Location.unknown():
        with pytest.raises(ValueError, match="only tuples of ints have an MLIR encoding"):
            dialect.encode_attr("begin", (1, "n"))
        with pytest.raises(ValueError, match="dtype int4 is not supported by the MLIR backend yet"):
            dialect.element_type("int4")
        assert str(dialect.element_type("uint8")) == "i8"  # signless: the ops carry what is unsigned


def test_exported_sample_modules_pass_mlir_opt():
    """Every sample of every lowered op, exported as one module (symbolic where the sizes can be bound), verified
    by mlir-opt against the committed IRDL file."""
    functions = {}
    for op in dialect.dialect_records():
        for i, sample in enumerate(op.samples):
            case = make_case(op, sample)
            mod = case.mod_symbolic if compilable(case.mod_symbolic) else case.mod_static
            functions[f"{op.short_name.replace('.', '_')}_{i}"] = mod["main"]
    text = export_module(IRModule(functions))
    mlir_opt_verify(text)
    # plus the runtime's accessor of the error slot (size checks of symbolic results): error_slot.py
    assert len(functions) > 400 and text.count("func.func") == len(functions) + text.count("func.func @relax_mlir_error")
