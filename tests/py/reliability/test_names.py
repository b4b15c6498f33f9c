"""Names users write: function names the text format and MLIR can carry (else a clear error where the name is
given), and non-ASCII binding names quoted as written in compiled code's messages."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import BlockBuilder, TensorStructInfo, Var, op
from relax_mlir.backend.signature import ExportError
from relax_mlir.ir import IRModule
from relax_mlir.script import from_source


def _double(name: str):
    x = Var("x", TensorStructInfo((2,), "float32"))
    bb = BlockBuilder()
    with bb.function(name, [x]):
        bb.emit_func_output(bb.emit(op.add(x, x)))
    return bb.get()


@pytest.mark.parametrize("name", ["my func", "main.x", "return", "1f", ""])
def test_a_function_name_the_text_format_cannot_write_is_refused_where_it_is_given(name):
    with pytest.raises(ValueError, match="a function's name must be a Python identifier that is not a keyword"):
        _double(name)
    with pytest.raises(ValueError, match="a function's name must be a Python identifier"):
        IRModule({name: _double("f")["f"]})


def test_a_non_ascii_function_name_prints_and_parses_but_does_not_compile():
    mod = _double("größe")
    assert relax_mlir.ir.structural_equal(from_source(mod.script()), mod)
    np.testing.assert_array_equal(relax_mlir.interpret(mod, "größe", np.ones(2, "float32")), [2, 2])
    with pytest.raises(ExportError, match="function 'größe': MLIR's symbol names are ASCII; rename the function"):
        relax_mlir.compile(mod)


def test_a_non_ascii_binding_is_quoted_as_written_in_compiled_messages():
    mod = from_source('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32")):
        größe = R.strided_slice(x, axes=[0], begin=[0], end=[2])
        return größe
''')
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod))
    with pytest.raises(ValueError, match="main: binding 'größe': dimension 0 is 1, expected 2"):
        vm["main"](np.ones(1, "float32"))
