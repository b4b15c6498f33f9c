"""A number returned under a Prim annotation (``-> T.bool``, ``-> T.float32``, ``-> R.Prim("float32")``) is a Prim of
that dtype holding the dtype's Python type, as TVM's FloatImm and IntImm(bool) hold it: ``return True`` under
``-> T.bool`` parses (a bool constant was a bool tensor, refused against the annotation) and ``return 1`` under
``-> T.float32`` returns 1.0 from the interpreter, not the int 1."""

from __future__ import annotations

import pytest

import relax_mlir as rm
from relax_mlir.script import ParseError, from_source
from relax_mlir.testing import roundtrip


def _returning(annotation: str, literal: str):
    return from_source(f"@R.function\ndef main() -> {annotation}:\n    return {literal}\n")


def _run(func):
    return rm.interpret(rm.IRModule.from_expr(func), "main")


@pytest.mark.parametrize("annotation", ["T.bool", 'R.Prim("bool")'])
@pytest.mark.parametrize("literal, expected", [("True", True), ("False", False)])
def test_a_bool_literal_under_a_bool_annotation_is_a_bool_prim(annotation, literal, expected):
    func = _returning(annotation, literal)
    result = _run(func)
    assert type(result) is bool and result is expected
    assert func.ret_struct_info.dtype == "bool"
    roundtrip(func)


@pytest.mark.parametrize("annotation", ["T.float32", 'R.Prim("float32")', "T.float64", "T.float16"])
def test_an_int_literal_under_a_float_annotation_returns_a_float(annotation):
    result = _run(_returning(annotation, "1"))
    assert type(result) is float and result == 1.0
    assert type(_run(_returning(annotation, "-2"))) is float


def test_an_int_literal_under_an_int_annotation_stays_an_int():
    result = _run(_returning("T.int64", "1"))
    assert type(result) is int and result == 1


def test_prim_value_of_a_float_dtype_written_as_an_int_holds_a_float():
    # R.prim_value(T.float32(2)) and R.prim_value(2, "float32"): TVM's FloatImm 2.0
    for text in ("R.prim_value(T.float32(2))", 'R.prim_value(2, "float32")'):
        func = from_source(f"@R.function\ndef main() -> R.Prim(\"float32\"):\n    v = {text}\n    return v\n")
        result = _run(func)
        assert type(result) is float and result == 2.0, text


def test_a_bool_literal_under_an_int_annotation_is_refused_naming_value_and_dtype():
    with pytest.raises(ParseError, match=r"<string>:3:12: PrimStructInfo: True \(bool\) is not a value of dtype int64"):
        _returning("T.int64", "True")


def test_a_fraction_under_an_int_annotation_is_refused_naming_value_and_dtype():
    with pytest.raises(ParseError, match=r"<string>:3:12: PrimStructInfo: 1.5 \(float\) is not a value of dtype int64"):
        _returning("T.int64", "1.5")
