"""``if``/``else`` in the text format (TVM's form of R.If), printed back the same, and run by the interpreter (only
the chosen branch)."""

from __future__ import annotations

import numpy as np
import pytest

from relax_mlir import interpret, register_func
from relax_mlir.interpreter import InterpreterError, remove_global_func
from relax_mlir.ir import If, TensorStructInfo, assert_structural_equal, check_well_formed
from relax_mlir.script import ParseError, from_source

SELECT = '''
@I.ir_module
class Module:
    @R.function
    def main(c: R.Tensor((), "bool"), x: R.Tensor((3,), "float32")):
        if c:
            w = R.exp(x)
            y = R.add(w, x)
        else:
            y = R.multiply(x, x)
        return y
'''


def _round_trip(text: str):
    mod = from_source(text)
    again = from_source(mod.script())
    assert_structural_equal(mod, again)
    assert again.script() == mod.script()
    return mod


def test_an_if_statement_binds_an_r_if_whose_branches_end_in_the_assigned_value():
    mod = _round_trip(SELECT)
    binding = mod["main"].body.blocks[0].bindings[0]
    assert binding.var.name_hint == "y" and isinstance(binding.value, If)
    assert binding.var.struct_info == TensorStructInfo((3,), "float32")
    then, other = binding.value.true_branch, binding.value.false_branch
    assert [b.var.name_hint for b in then.blocks[0].bindings] == ["w", "y"]  # the call stays bound in the branch
    assert then.body is then.blocks[0].bindings[-1].var and other.body is other.blocks[0].bindings[-1].var
    check_well_formed(mod)


def test_the_printer_writes_tvms_form():
    # (the If's variable is named first, so a branch's own `y` is renamed)
    assert from_source(SELECT).script().endswith('''    ) -> R.Tensor((3,), dtype="float32"):
        if c:
            w: R.Tensor((3,), dtype="float32") = R.exp(x)
            y_1: R.Tensor((3,), dtype="float32") = R.add(w, x)
            y: R.Tensor((3,), dtype="float32") = y_1
        else:
            y_2: R.Tensor((3,), dtype="float32") = R.multiply(x, x)
            y: R.Tensor((3,), dtype="float32") = y_2
        return y
''')


def test_a_branch_may_assign_a_variable_of_the_enclosing_scope_and_hold_a_dataflow_block():
    mod = _round_trip('''
@I.ir_module
class Module:
    @R.function
    def main(c: R.Tensor((), "bool"), x: R.Tensor((3,), "float32"), z: R.Tensor((4,), "float32")):
        if c:
            with R.dataflow():
                lv = R.exp(x)
                gv = R.add(lv, x)
                R.output(gv)
            y = gv
        else:
            y = z
        return y
''')
    assert mod["main"].ret_struct_info == TensorStructInfo(None, "float32", 1)  # (3,) or (4,): the rank
    out = interpret(mod, "main", np.array(False), np.ones(3, "float32"), np.arange(4, dtype="float32"))
    np.testing.assert_array_equal(out, np.arange(4, dtype="float32"))


def test_nested_ifs_and_elif():
    mod = _round_trip('''
@I.ir_module
class Module:
    @R.function
    def main(a: R.Tensor((), "bool"), b: R.Tensor((), "bool"), x: R.Tensor((2,), "float32")):
        if a:
            y = R.exp(x)
        elif b:
            y = R.negative(x)
        else:
            y = x
        return y
''')
    x = np.array([0.5, -1.0], "float32")
    for a, b, expected in ((True, False, np.exp(x)), (False, True, -x), (False, False, x)):
        np.testing.assert_allclose(interpret(mod, "main", np.array(a), np.array(b), x), expected, rtol=1e-6)


def test_an_annotation_of_the_result_is_kept():
    mod = _round_trip('''
@I.ir_module
class Module:
    @R.function
    def main(c: R.Tensor((), "bool"), x: R.Tensor((3,), "float32")):
        if c:
            y: R.Tensor(dtype="float32", ndim=1) = x
        else:
            y: R.Tensor(dtype="float32", ndim=1) = R.exp(x)
        return y
''')
    assert mod["main"].body.blocks[0].bindings[0].var.struct_info == TensorStructInfo(None, "float32", 1)


def test_the_interpreter_runs_only_the_chosen_branch():
    calls = []
    register_func("test_if.record", lambda v: calls.append(float(v[0])) or v, override=True)
    try:
        mod = from_source('''
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(c: R.Tensor((), "bool"), x: R.Tensor((3,), "float32")):
        if c:
            y = R.call_packed("test_if.record", x, sinfo_args=R.Tensor((3,), "float32"))
        else:
            y = R.multiply(x, x)
        return y
''')
        x = np.array([2.0, 3.0, 4.0], "float32")
        np.testing.assert_array_equal(interpret(mod, "main", np.array(False), x), x * x)
        assert calls == []
        np.testing.assert_array_equal(interpret(mod, "main", np.array(True), x), x)
        assert calls == [2.0]
    finally:
        remove_global_func("test_if.record")
    np.testing.assert_allclose(interpret(from_source(SELECT), "main", np.array(True), x), np.exp(x) + x, rtol=1e-6)


def test_the_interpreter_refuses_a_condition_that_is_no_bool():
    mod = from_source('''
@I.ir_module
class Module:
    @R.function
    def main(c: R.Object, x: R.Tensor((3,), "float32")):
        if c:
            y = x
        else:
            y = x
        return y
''')
    with pytest.raises(InterpreterError, match=r"main: binding 'y': the condition of an R.If must be a 0-d bool "
                                               r"tensor or a bool, got an array of shape \(2,\)"):
        interpret(mod, "main", np.array([True, False]), np.ones(3, "float32"))


@pytest.mark.parametrize("body, line, message", [
    ("        if c:\n            y = x\n        return x\n", 6,
     r"an `if` in a Relax function needs an `else` \(TVM's rule\)"),
    ("        if c:\n            y = x\n        else:\n            z = x\n        return x\n", 9,
     r"the branches of an `if` must assign the same name last \(TVM's rule\): the `if` branch assigns 'y', the "
     r"`else` branch 'z'"),
    ("        if x:\n            y = x\n        else:\n            y = x\n        return y\n", 6,
     r'the condition of an R.If must be a 0-d bool tensor .* got R.Tensor\(\(3,\), dtype="float32"\)'),
    ("        if c:\n            y = x\n            R.func_attr({})\n        else:\n            y = x\n"
     "        return y\n", 8, r"the `if` branch must end by assigning the name the `if` binds"),
    ("        if c:\n            y = x\n        else:\n            y = x\n        return w\n", 10,
     r"undefined variable 'w'"),
    ("        if c:\n            w = R.exp(x)\n            y = w\n        else:\n            y = x\n"
     "        return w\n", 11, r"undefined variable 'w'"),  # a branch's variable is its own
    ("        with R.dataflow():\n            if c:\n                y = x\n            else:\n                y = x\n"
     "            R.output(y)\n        return y\n", 7, r"an `if` cannot be inside a dataflow block \(TVM's rule\)"),
    ("        if c:\n            y: R.Tensor((3,), \"float32\") = x\n        else:\n"
     "            y: R.Tensor(ndim=1, dtype=\"float32\") = x\n        return y\n", 9,
     r"the branches annotate 'y' differently"),
])
def test_parse_errors_say_where_and_what(body, line, message):
    text = ("@I.ir_module\nclass Module:\n    @R.function\n"
            "    def main(c: R.Tensor((), \"bool\"), x: R.Tensor((3,), \"float32\")):\n" + body)
    text = "\n" + text  # (line numbers count the leading newline: the `if` of each body is on line 6)
    with pytest.raises(ParseError, match=rf"<string>:{line}:\d+: {message}"):
        from_source(text)
