"""relax_mlir.compile refuses R.If (no scf.if lowering yet) with an error naming the function and the binding."""

from __future__ import annotations

import pytest

import relax_mlir
from relax_mlir.backend.signature import ExportError
from relax_mlir.script import from_source


def test_compile_refuses_an_if_naming_the_function_and_binding():
    mod = from_source('''
@I.ir_module
class Module:
    @R.function
    def helper(c: R.Tensor((), "bool"), x: R.Tensor((3,), "float32")):
        if c:
            picked = R.exp(x)
        else:
            picked = x
        return picked

    @R.function
    def main(c: R.Tensor((), "bool"), x: R.Tensor((3,), "float32")):
        y = cls.helper(c, x)
        return y
''')
    with pytest.raises(ExportError, match=r"^helper: binding 'picked': R.If is not supported by the MLIR backend yet "
                                          r".*relax_mlir.interpret runs such modules"):
        relax_mlir.compile(mod)
