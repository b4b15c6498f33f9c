"""Sizes compiled code cannot know statically are checked at run time: what ``R.match_cast`` asserts, and each
result's sizes against its struct info (the runtime allocated the result with those). A mismatch raises
``ValueError`` after the call, names the binding or result, the dimension and the size found; nothing is read or
written outside a buffer meanwhile (a stand-in tensor of the expected sizes takes the bad value's place), and the
next call works. Expected values: NumPy and the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir.ir import Function, IRModule, SeqExpr, TensorStructInfo, Var
from relax_mlir.script import from_source

CAST = """
@I.ir_module
class Module:
    @R.function
    def static(x0: R.Tensor((2,), "float64"), x1: R.Tensor(("n",), "float64")) -> R.Tensor((), "float64"):
        twice = R.concat((x1, x1))
        c = R.match_cast(twice, R.Tensor((2,), "float64"))
        y = R.matmul(x0, c)
        return y

    @R.function
    def bound(x: R.Tensor(("n", 3), "float32"), y: R.Tensor(("m", 3), "float32")) -> R.Tensor(("n", 3), "float32"):
        c = R.match_cast(y, R.Tensor(("n", 3), "float32"))
        z = R.add(x, c)
        return z
"""


@pytest.fixture(scope="module")
def vm():
    return rm.VirtualMachine(rm.compile(from_source(CAST)))


def test_match_cast_to_a_static_size(vm):
    mod = from_source(CAST)
    x0, x1 = np.array([1.0, 2.0]), np.array([3.0])
    assert vm["static"](x0, x1) == rm.interpret(mod, "static", x0, x1) == 9.0
    with pytest.raises(ValueError, match=r"^static: binding 'c': match_cast to Tensor\(\(2,\), float64\): dimension 0 "
                                         r"is 4, expected 2$"):
        vm["static"](x0, np.array([3.0, 4.0]))
    assert vm["static"](x0, np.array([5.0])) == 15.0  # the slot was cleared


def test_match_cast_to_a_size_a_parameter_bound(vm):
    x, y = np.ones((2, 3), np.float32), np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(vm["bound"](x, y), x + y)
    with pytest.raises(ValueError, match=r"bound: binding 'c': match_cast to Tensor\(\(n, 3\), float32\): dimension 0 "
                                         r"is 4, expected n"):
        vm["bound"](x, np.zeros((4, 3), np.float32))


def test_a_result_of_other_sizes_than_its_struct_info_is_not_copied_out():
    """A function built by hand whose result claims the size of x but is y: compiled code used to copy y's m
    elements into the n-element result the runtime allocated."""
    x, y = Var("x", TensorStructInfo(("n",), "float32")), Var("y", TensorStructInfo(("m",), "float32"))
    f = rm.VirtualMachine(rm.compile(IRModule({"main": Function([x, y], SeqExpr([], y),
                                                                TensorStructInfo(("n",), "float32"))})))["main"]
    np.testing.assert_array_equal(f(np.ones(2, np.float32), np.full(2, 7, np.float32)), [7, 7])
    with pytest.raises(ValueError, match=r"main: result 'result': dimension 0 is 5, expected n"):
        f(np.ones(2, np.float32), np.arange(5, dtype=np.float32))


def test_without_checks_nothing_is_reported_and_memory_stays_safe():
    f = rm.VirtualMachine(rm.compile(from_source(CAST), checks=False))["static"]
    assert f(np.array([1.0, 2.0]), np.array([3.0])) == 9.0
    result = f(np.array([1.0, 2.0]), np.array([3.0, 4.0]))  # unspecified, but within the stand-in's buffer
    assert result.shape == ()


MATMUL = """
@I.ir_module
class Module:
    @R.function
    def main(x0: R.Tensor((2,), "float64"), x1: R.Tensor(("n",), "float64")) -> R.Tensor((), "float64"):
        twice = R.concat((x1, x1))
        y = R.matmul(x0, twice)
        return y
"""


def test_sizes_an_op_assumed_equal_are_checked():
    """matmul's inference accepts k = 2 against k = 2 * n (it cannot tell, as TVM's); the compiled matmul used to
    read 2 elements of a shorter or longer vector. Now: the interpreter's answer, or a ValueError."""
    mod = from_source(MATMUL)
    f = rm.VirtualMachine(rm.compile(mod))["main"]
    x0 = np.array([1.0, 2.0])
    assert f(x0, np.array([3.0])) == rm.interpret(mod, "main", x0, np.array([3.0])) == 9.0
    for n in (0, 2, 5):
        with pytest.raises(ValueError, match=r"main: binding 'y': matmul: an operand's dimension 0 is "
                                             rf"{2 * n}, but another operand of the same loop dimension"):
            f(x0, np.ones(n))
    assert f(x0, np.array([1.0])) == 3.0


def test_a_size_check_on_a_tuple_field_names_the_binding_and_field():
    """A split of a symbolic axis at static indices: its second field's static size is checked, and the message
    names the function, the binding and the field, as the interpreter does (it said '(unknown binding)')."""
    mod = from_source("""
@I.ir_module
class Module:
    @R.function
    def sp(x: R.Tensor(("n",), "float32")):
        with R.dataflow():
            a = R.split(x, indices_or_sections=[1, 4])
            b = a[1]
            R.output(b)
        return b
""")
    f = rm.VirtualMachine(rm.compile(mod))["sp"]
    with pytest.raises(ValueError, match=r"^sp: binding 'a'\[1\]: dimension 0 is 1, expected 3"):
        f(np.arange(2, dtype=np.float32))
    np.testing.assert_array_equal(f(np.arange(6, dtype=np.float32)), [1, 2, 3])


def test_symbolic_training_steps_keep_no_size_check():
    """Where every size traces back to the parameters' size variables the checks are proven and removed: the
    usual symbolic-batch training step pays nothing (and its ops stay outside scf.if, where fusion sees them)."""
    from relax_mlir.ir import TensorStructInfo as T
    from relax_mlir.models import cnn, mlp
    from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer

    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.01), [T(("n", 10), "float32"), T(("n",), "int64")])
    for model in (mlp("n", (64, 32, 10)), cnn("n", (1, 8, 8), (4, 8), 10)):
        assert rm.to_mlir(setup(model), "linalg").count("relax_mlir.size_check") == 0
