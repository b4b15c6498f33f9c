"""What fuzzing the compiled ops found (each case failed before its mend): an integer division by zero, or of the
lowest value by -1, killed the process (the CPU's division traps: SIGFPE); sizes an op's inference assumed equal
were not checked where a reshape, a class-weight vector or a convolution's channels carried them, so compiled
code read past a buffer. Now the division is defined as NumPy's and the sizes are checked (ValueError naming the
binding), the op not run."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import relax_mlir
from relax_mlir.script import from_source

DIVISIONS = """
@I.ir_module
class M:
    @R.function
    def floor_div(a: R.Tensor((6,), "{dtype}"), b: R.Tensor((6,), "{dtype}")):
        r = R.floor_divide(a, b)
        return r

    @R.function
    def div(a: R.Tensor((6,), "{dtype}"), b: R.Tensor((6,), "{dtype}")):
        r = R.divide(a, b)
        return r
"""


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8"])
def test_integer_division_by_zero_or_overflowing_is_defined_not_a_trap(dtype):
    """Run in a child process: a regression would kill it with SIGFPE, not pytest. Quotients by zero are 0, the
    lowest value by -1 wraps to itself (NumPy's answers); the rest truncate (divide) or floor (floor_divide),
    exactly, as NumPy's integer arithmetic computes them (an independent oracle, not the interpreter)."""
    lowest = int(np.iinfo(dtype).min)
    script = "\n".join([
        "import numpy as np, relax_mlir",
        "from relax_mlir.script import from_source",
        f"m = from_source({DIVISIONS.format(dtype=dtype)!r})",
        "vm = relax_mlir.VirtualMachine(relax_mlir.compile(m))",
        f"a = np.array([7, 1, {lowest}, -7, 7, 0], {dtype!r})",
        f"b = np.array([0, 1, -1, 2, -2, 0], {dtype!r})",
        'print(vm["floor_div"](a, b).tolist(), vm["div"](a, b).tolist())',
        'print(relax_mlir.interpret(m, "floor_div", a, b).tolist(), relax_mlir.interpret(m, "div", a, b).tolist())'])
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    compiled, interpreted = done.stdout.splitlines()[-2:]
    floor_want = [0, 1, lowest, -4, -4, 0]
    trunc_want = [0, 1, lowest, -3, -3, 0]
    assert compiled == f"{floor_want} {trunc_want}" and interpreted == compiled


def test_int64_truncating_division_is_exact_beyond_float64():
    """2**53 + 1 survives division by 1 (the interpreter divided through float64 before)."""
    m = from_source(DIVISIONS.format(dtype="int64"))
    a = np.array([2 ** 53 + 1, -(2 ** 62) - 1, 9, -9, 10 ** 18, -1], "int64")
    b = np.array([1, 3, 4, 4, -7, 2], "int64")
    want = [int(x) // int(y) if (int(x) < 0) == (int(y) < 0) else -(abs(int(x)) // abs(int(y))) for x, y in zip(a, b)]
    assert relax_mlir.interpret(m, "div", a, b).tolist() == want
    assert relax_mlir.VirtualMachine(relax_mlir.compile(m))["div"](a, b).tolist() == want


SIZES = """
@I.ir_module
class M:
    @R.function
    def prelu(x: R.Tensor((2, "c"), "float32"), a: R.Tensor((3,), "float32")):
        r = R.nn.prelu(x, a, axis=1)
        return r

    @R.function
    def prelu_k(x: R.Tensor((2, "c"), "float32"), a: R.Tensor(("k",), "float32")):
        r = R.nn.prelu(x, a, axis=1)
        return r

    @R.function
    def nll(x: R.Tensor((1, "c"), "float32"), t: R.Tensor((1,), "int64"), w: R.Tensor((5,), "float32")):
        r = R.nn.nll_loss(x, t, w)
        return r

    @R.function
    def conv(x: R.Tensor((1, "c", 5, 5), "float32"), w: R.Tensor((2, 3, 3, 3), "float32")):
        r = R.nn.conv2d(x, w)
        return r

    @R.function
    def grouped(x: R.Tensor((1, "c", 5, 5), "float32"), w: R.Tensor((4, 1, 3, 3), "float32")):
        r = R.nn.conv2d(x, w, groups=2)
        return r
"""


@pytest.fixture(scope="module")
def sized():
    mod = from_source(SIZES)
    return mod, relax_mlir.VirtualMachine(relax_mlir.compile(mod))


@pytest.mark.parametrize("name, args, message", [
    ("prelu", [(2, 8), (3,)], "binding 'r': reshape: dimension 0 of the input has 3 elements"),
    ("prelu_k", [(2, 8), (3,)], "binding 'r': reshape: dimension 0 of the input has 3 elements"),
    ("nll", [(1, 1000), "target 999", (5,)], "binding 'r': nll_loss: the weights have 5 classes"),
    ("conv", [(1, 2, 5, 5), (2, 3, 3, 3)], "binding 'r': conv_2d_nchw_fchw: an operand's dimension 1 is 2"),
    ("conv", [(1, 1000, 5, 5), (2, 3, 3, 3)], "an operand's dimension 1 is 1000"),
    ("grouped", [(1, 4, 5, 5), (4, 1, 3, 3)], "binding 'r': conv_2d_ngchw_gfchw: an operand's dimension 2 is 2"),
])
def test_sizes_assumed_equal_are_checked_before_the_op_runs(sized, name, args, message):
    _, vm = sized
    arrays = [np.array([999]) if a == "target 999" else np.ones(a, "float32") for a in args]
    with pytest.raises(ValueError, match=message):
        vm[name](*arrays)


@pytest.mark.parametrize("name, args", [("prelu", [(2, 3), (3,)]), ("prelu_k", [(2, 3), (3,)]),
                                        ("nll", [(1, 5), "target 4", (5,)]),
                                        ("conv", [(1, 3, 5, 5), (2, 3, 3, 3)]),
                                        ("grouped", [(1, 2, 5, 5), (4, 1, 3, 3)])])
def test_the_same_functions_with_agreeing_sizes_match_the_interpreter(sized, name, args):
    mod, vm = sized
    rng = np.random.default_rng(len(name))
    arrays = [np.array([4]) if a == "target 4" else rng.standard_normal(a).astype("float32") for a in args]
    np.testing.assert_allclose(vm[name](*arrays), relax_mlir.interpret(mod, name, *arrays), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("compiled", [False, True])
def test_prod_gradient_is_the_product_of_the_others_at_zeros_too(compiled):
    """d prod(x) / d x_i is the product of the other elements: with one 0 in a row, the 0's gradient is the product
    of the rest and the others' are 0; with two 0s, all are 0 (``y / x`` gave NaN). Oracle: the products written
    out with NumPy, element by element."""
    from relax_mlir import transform

    mod = from_source("""
@I.ir_module
class M:
    @R.function
    def loss(x: R.Tensor((4, 4), "float32")):
        r = R.sum(R.prod(x, axis=[1]))
        return r
""")
    after = transform.Gradient("loss", require_grads=[mod["loss"].params[0]])(mod)
    x = np.array([[1, 2, 0, 3], [1, 2, 4, 3], [0, 2, 0, 3], [-1.5, 0.5, 2, 0]], "float32")
    want = np.array([[np.prod(np.delete(row, i)) for i in range(4)] for row in x], "float32")
    run = relax_mlir.VirtualMachine(relax_mlir.compile(after))["loss_adjoint"] if compiled else \
        (lambda a: relax_mlir.interpret(after, "loss_adjoint", a))
    np.testing.assert_allclose(run(x)[1][0], want, rtol=1e-6)


def test_a_maximum_of_no_elements_is_the_identity_and_its_index_an_error():
    """max/min over an axis of size 0 (symbolic or static) are their identities, -inf/+inf (ONNX's ReduceMax from
    opset 18; TVM starts from the lowest finite value, which is no identity), in compiled code and the interpreter;
    argmax/argmin have no index to give and raise ValueError after the call, as NumPy's; sums of no elements are 0."""
    mod = from_source("""
@I.ir_module
class M:
    @R.function
    def mx(x: R.Tensor((3, "k"), "float32")):
        r = R.max(x, axis=[1])
        return r

    @R.function
    def am(x: R.Tensor((3, "k"), "float32")):
        r = R.argmin(x, axis=1)
        return r

    @R.function
    def mn(x: R.Tensor((3, 0), "float32")):
        r = R.min(x, axis=[1])
        return r

    @R.function
    def total(x: R.Tensor((3, "k"), "float32")):
        r = R.sum(x, axis=[1])
        return r
""")
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod))
    empty = np.zeros((3, 0), np.float32)
    with pytest.raises(ValueError, match=r"am: binding 'r': argmin of no elements: a reduced axis has size 0"):
        vm["am"](empty)
    with pytest.raises(ValueError):  # the oracle refuses too
        relax_mlir.interpret(mod, "am", empty)
    for name, identity in [("mx", -np.inf), ("mn", np.inf)]:
        for got in (vm[name](empty), relax_mlir.interpret(mod, name, empty)):
            np.testing.assert_array_equal(got, np.full(3, identity, np.float32))
    x = np.random.default_rng(5).standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_array_equal(vm["mx"](x), x.max(axis=1))
    np.testing.assert_array_equal(vm["am"](x), x.argmin(axis=1))
    np.testing.assert_array_equal(vm["total"](empty), np.zeros(3, np.float32))
