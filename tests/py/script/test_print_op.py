"""``R.print`` as TVMScript writes it (a bare statement or ``_ = R.print(...)``, ``format=R.str("...")`` as TVM's
printer writes it): the interpreter prints the values as TVM's ``relax.run.print`` renders them (expected text written
by hand), the call prints and parses back, passes keep it (it is impure), and compiled code refuses it by name."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import transform
from relax_mlir.interpreter import InterpreterError, interpret
from relax_mlir.ir import TensorStructInfo, TupleStructInfo, Var
from relax_mlir.op import debug
from relax_mlir.script import ParseError, from_source
from relax_mlir.testing import roundtrip

_SOURCE = '''
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        z = R.add(x, x)
        R.print(format=R.str("Hi mom!"))
        R.print(z, x, format="z={} x={}")
        _ = R.print(z, (x, R.prim_value(3)))
        with R.dataflow():
            w = R.multiply(z, z)
            R.output(w)
        return w
'''


def test_tvm_forms_parse_and_the_interpreter_prints_as_tvm_renders(capsys):
    mod = from_source(_SOURCE)
    out = interpret(mod, "main", np.array([1, 2], np.float32))
    np.testing.assert_array_equal(out, [4, 16])
    assert capsys.readouterr().out == "Hi mom!\nz=[2. 4.] x=[1. 2.]\n[2. 4.] ([1. 2.], 3)\n"


def test_each_print_is_a_binding_of_the_empty_tuple_and_round_trips():
    mod = from_source(_SOURCE)
    prints = [b for b in mod["main"].body.blocks[0].bindings if getattr(b.value.op, "name", "") == "relax.print"]
    assert [b.value.attrs["format"] for b in prints] == ["Hi mom!", "z={} x={}", ""]
    assert all(b.var.struct_info == TupleStructInfo([]) for b in prints)
    assert 'R.print((z, x), format="z={} x={}")' in mod.script()
    roundtrip(mod)


def test_passes_keep_a_print_nothing_reads(capsys):
    mod = transform.DeadCodeElimination()(from_source(_SOURCE))
    interpret(mod, "main", np.array([1, 2], np.float32))
    assert capsys.readouterr().out.count("\n") == 3


def test_compiled_code_refuses_it_naming_the_binding_and_the_function():
    from relax_mlir.backend.export import ExportError

    with pytest.raises(ExportError,
                       match=r"relax.print \(used by _ in main\) runs on the host \(Python\), which compiled code "
                             r"cannot do; relax_mlir.interpret runs such modules"):
        relax_mlir.compile(from_source(_SOURCE))


def test_a_bare_print_in_an_if_branch_and_a_dataflow_block_parses(capsys):
    mod = from_source('''
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(c: R.Tensor((), "bool"), x: R.Tensor((2,), "int32")):
        if c:
            R.print(x, format="then {}")
            y = x
        else:
            y = x
        with R.dataflow():
            R.print(y, format="in a block")
            z = R.add(y, y)
            R.output(z)
        return z
''')
    interpret(mod, "main", np.array(True), np.array([5, 6], np.int32))
    assert capsys.readouterr().out == "then [5 6]\nin a block\n"
    roundtrip(mod)


def test_a_bad_format_is_reported_naming_the_binding():
    mod = from_source('''
@R.function(pure=False)
def main(x: R.Tensor((2,), "float32")):
    R.print(x, format="{:.2f}")
    return x
''')
    # (TVM formats the rendered strings: a float format does not apply)
    with pytest.raises(InterpreterError, match=r"main: binding '_': relax.print failed on a tuple of 1: Unknown "
                                               r"format code 'f'"):
        interpret(relax_mlir.IRModule.from_expr(mod), "main", np.ones(2, np.float32))


@pytest.mark.parametrize("call, message", [
    ("R.print(x, fmt=\"{}\")", r"<string>:3:16: R.print: unknown argument 'fmt'; it takes the values and format="),
    ("R.print(x, format=x)", r"<string>:3:23: R.print: format must be a string literal"),
])
def test_bad_calls_are_refused_at_the_argument(call, message):
    with pytest.raises(ParseError, match=message):
        from_source(f'@R.function(pure=False)\ndef main(x: R.Tensor((2,), "float32")):\n    {call}\n    return x\n')


def test_the_python_builder_makes_the_same_call():
    x = Var("x", TensorStructInfo((2,), "float32"))
    call = debug.print(x, format="{}")
    assert call.op is debug.PRINT and call.attrs == {"format": "{}"} and call.struct_info == TupleStructInfo([])
