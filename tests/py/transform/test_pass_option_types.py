"""Every registered pass checks each of its options against the option's annotation when it is made (the base
``Pass.__post_init__``), not only the few passes that called ``check_options`` themselves: a value of no annotated
type is a ``TypeError`` (or the pass's own ``ValueError``) that names the pass, before any module is seen."""

from __future__ import annotations

import dataclasses
import typing

import numpy as np
import pytest

import relax_mlir  # noqa: F401  (registers every pass)
from relax_mlir.ir.block_builder import BlockBuilder
from relax_mlir.ir.struct_info import TensorStructInfo
from relax_mlir.transform.pass_infra import PASSES
from relax_mlir import op


def _loss_function():
    bb = BlockBuilder()
    x = relax_mlir.ir.expr.Var("x", TensorStructInfo((2,), "float32"))
    with bb.function("loss", [x]):
        bb.emit_func_output(bb.emit(op.sum(x)))
    return bb.get()["loss"]


#: Valid values for the options a pass requires (the rest keep their defaults).
REQUIRED = {
    "AppendLoss": lambda: {"func_name": "main", "loss_function": _loss_function()},
    "BindParams": lambda: {"func_name": "main", "params": {"w": np.ones(2, np.float32)}},
    "BindSymbolicVars": lambda: {"binding_map": {"n": 2}},
    "ConvertLayout": lambda: {"desired_layouts": {"relax.nn.conv2d": ["NHWC", "OHWI"]}},
    "Gradient": lambda: {"func_name": "main"},
    "UpdateParamStructInfo": lambda: {"sinfo_func": lambda v: None},
}

_NOTHING = object()  # of no annotated type: not a str, number, sequence, mapping or function


def _cases():
    for name, cls in sorted(PASSES.items()):
        hints = typing.get_type_hints(cls)
        for field in dataclasses.fields(cls):
            if hints.get(field.name, typing.Any) is not typing.Any:
                yield pytest.param(name, field.name, id=f"{name}.{field.name}")


def test_every_registered_pass_is_made_with_its_defaults_or_required_options():
    for name, cls in PASSES.items():
        cls(**REQUIRED.get(name, dict)())


@pytest.mark.parametrize("name, option", list(_cases()))
def test_an_option_of_no_annotated_type_is_refused_naming_the_pass(name, option):
    options = {**REQUIRED.get(name, dict)(), option: _NOTHING}
    with pytest.raises((TypeError, ValueError), match=rf"^{name}\b|\b{name}[:(]") as info:
        PASSES[name](**options)
    assert "object object at" in str(info.value) or option in str(info.value), info.value


def test_the_base_check_words_passes_that_had_none():
    """DecomposeOpsForTraining and BindSymbolicVars checked nothing: a wrong ``func_name`` was kept and found no
    function (or failed inside the pass) when the pass ran."""
    with pytest.raises(TypeError, match=r"^DecomposeOpsForTraining: option func_name=3 is not a str or None$"):
        PASSES["DecomposeOpsForTraining"](func_name=3)
    with pytest.raises(TypeError, match=r"^BindSymbolicVars: option func_name=\['main'\] is not a str or None$"):
        PASSES["BindSymbolicVars"]({"n": 2}, func_name=["main"])
