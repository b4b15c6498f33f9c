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


# Ops lowered without indexing maps (insert_slice, tensor.extract in loops) compare the sizes they take from
# one operand for another themselves. Bad calls run in a fresh interpreter: before the checks these wrote or
# read past a buffer (glibc's abort, a segfault or garbage), which would take the test session down with them.
ASSUMED = """
@I.ir_module
class Module:
    @R.function
    def cat(x: R.Tensor(("n", 3), "float32"), y: R.Tensor(("m", "b"), "float32")):
        c = R.concat([x, y], axis=0)
        return c

    @R.function
    def cat_sym(x: R.Tensor(("a", "n"), "float32"), y: R.Tensor(("b", "m"), "float32")):
        c = R.concat([x, y, x], axis=1)
        return c

    @R.function
    def scatter(x: R.Tensor(("n", 3), "float32"), i: R.Tensor(("m", 3), "int64"), u: R.Tensor(("p", 3), "float32")):
        s = R.scatter_elements(x, i, u, axis=0, reduction="add")
        return s

    @R.function
    def nll(p: R.Tensor(("n", 3), "float32"), t: R.Tensor(("m",), "int64")):
        loss = R.nn.nll_loss(p, t, reduction="sum")
        return loss

    @R.function
    def nll_none(p: R.Tensor(("n", 3, "h"), "float32"), t: R.Tensor(("m", "w"), "int64")):
        loss = R.nn.nll_loss(p, t, reduction="none")
        return loss

    @R.function
    def slice_grad(g: R.Tensor(("k", 3), "float32")):
        dx = R.grad.strided_slice_backward(g, axes=[0], begin=[0], end=[2], strides=[1], shape=(4, 3))
        return dx

    @R.function
    def max_grad(g: R.Tensor(("a", "b", "c", "d"), "float32"), x: R.Tensor((1, 2, 5, 5), "float32")):
        dx = R.grad.max_pool2d_backward(g, x, pool_size=(2, 2), strides=(1, 1))
        return dx

    @R.function
    def avg_grad(g: R.Tensor(("a", "b", "c", "d"), "float32"), x: R.Tensor((1, 2, 5, 5), "float32")):
        dx = R.grad.avg_pool2d_backward(g, x, pool_size=(2, 2), strides=(1, 1))
        return dx
"""

# Compiles ASSUMED, makes each call (read from stdin), prints one JSON line per call.
RUNNER = """
import json, sys
import numpy as np
import relax_mlir
from relax_mlir.script import from_source
vm = relax_mlir.VirtualMachine(relax_mlir.compile(from_source(sys.argv[1])))
for name, args in json.loads(sys.stdin.read()):
    try:
        out = vm[name](*[np.asarray(a, dtype=d).reshape(s) for a, d, s in args])
        print(json.dumps({"ok": np.asarray(out).tolist()}), flush=True)
    except ValueError as err:
        print(json.dumps({"ValueError": str(err)}), flush=True)
"""


def _calls(*calls) -> list:
    """The results of ``calls`` (function name, arrays) in one fresh interpreter; every bad call is also checked
    against the interpreter, which raises for it."""
    import json
    import subprocess
    import sys

    encoded = json.dumps([[name, [[np.asarray(a).tolist(), str(np.asarray(a).dtype), list(np.shape(a))]
                                  for a in args]] for name, args in calls])
    proc = subprocess.run([sys.executable, "-c", RUNNER, ASSUMED], input=encoded, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"the process died (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    mod = from_source(ASSUMED)
    for (name, args), result in zip(calls, results):
        if "ValueError" in result:
            with pytest.raises(ValueError):
                rm.interpret(mod, name, *args)
    return results


def _f32(shape, start: float = 0.0) -> np.ndarray:
    return (np.arange(int(np.prod(shape)), dtype=np.float32) + start).reshape(shape)


def test_concat_checks_the_dims_off_its_axis():
    """Each input is inserted with its own sizes into a result sized from the first: a wider one was written
    past the result (heap corruption), a narrower one left part of it unwritten."""
    x, y, z = _f32((1, 3)), _f32((2, 3), 10), _f32((2, 2), 7)
    results = _calls(("cat", (x, y)), ("cat", (x, _f32((40, 500)))), ("cat", (x, _f32((2, 2)))),
                     ("cat_sym", (z, _f32((2, 1)))), ("cat_sym", (z, _f32((3, 1)))), ("cat", (x, y)))
    assert results[0] == results[5] == {"ok": np.concatenate([x, y]).tolist()}  # and the slot was cleared
    message = "cat: binding 'c': relax.concat: dimension 1 of input 1 is {}, where input 0 has 3 (all but the " \
              "concatenation axis 0 must match)"
    assert results[1] == {"ValueError": message.format(500)}
    assert results[2] == {"ValueError": message.format(2)}
    assert results[3] == {"ok": np.concatenate([z, _f32((2, 1)), z], axis=1).tolist()}
    assert results[4] == {"ValueError": "cat_sym: binding 'c': relax.concat: dimension 0 of input 1 is 3, where "
                                        "input 0 has 2 (all but the concatenation axis 1 must match)"}


def test_a_proven_concat_keeps_no_size_check():
    mod = from_source("""
@I.ir_module
class Module:
    @R.function
    def cat(x: R.Tensor(("n", "a"), "float32"), y: R.Tensor(("m", "a"), "float32")):
        c = R.concat([x, y], axis=0)
        return c
""")
    assert rm.to_mlir(mod, "linalg").count("relax_mlir.size_check") == 0


def test_scatter_elements_checks_its_updates_against_its_indices():
    """The loops run over the indices and read the updates at the same positions: fewer updates were read past
    their buffer (garbage in the result)."""
    x, i, u = np.zeros((3, 3), np.float32), np.array([[0, 1, 2], [2, 2, 0]]), _f32((2, 3), 1)
    results = _calls(("scatter", (x, i, u)), ("scatter", (x, np.zeros((2000, 3), np.int64), _f32((1, 3)))))
    want = x.copy()
    for (r, c), v in zip(np.ndindex(*i.shape), u.ravel()):
        want[i[r, c], c] += v
    assert results[0] == {"ok": want.tolist()}
    assert results[1] == {"ValueError": "scatter: binding 's': relax.scatter_elements: dimension 0 of the updates "
                                        "is 1, where the indices have 2000 (the updates must have the indices' "
                                        "shape)"}


def test_the_interpreter_refuses_more_updates_than_indices_as_compiled_code_does():
    x, i, u = np.zeros((3, 3), np.float32), np.zeros((1, 3), np.int64), _f32((2, 3))
    with pytest.raises(Exception, match=r"updates \(2, 3\) must have the shape of indices \(1, 3\)"):
        rm.interpret(from_source(ASSUMED), "scatter", x, i, u)
    assert _calls(("scatter", (x, i, u)))[0] == {
        "ValueError": "scatter: binding 's': relax.scatter_elements: dimension 0 of the updates is 2, where the "
                      "indices have 1 (the updates must have the indices' shape)"}


def test_nll_loss_checks_its_targets_against_its_predictions():
    """The loop runs over the targets and reads the predictions at the same items: more targets than
    predictions read past them (a wrong loss, or a segfault)."""
    p, t = np.log(_f32((2, 3), 1)), np.array([2, 0])
    p3, t2 = np.log(_f32((2, 3, 4), 1)), np.array([[0, 1, 2, 1], [2, 2, 0, 1]])
    results = _calls(("nll", (p, t)), ("nll", (p, np.zeros(5, np.int64))), ("nll_none", (p3, t2)),
                     ("nll_none", (p3, np.zeros((2, 7), np.int64))))
    np.testing.assert_allclose(results[0]["ok"], -(p[0, 2] + p[1, 0]), rtol=1e-6)
    assert results[1] == {"ValueError": "nll: binding 'loss': relax.nn.nll_loss: dimension 0 of the targets is 5, "
                                        "where the predictions have 2 (the targets must have the predictions' shape "
                                        "without the class axis)"}
    want = -np.take_along_axis(p3, t2[:, None, :], axis=1)[:, 0, :]
    np.testing.assert_allclose(results[2]["ok"], want, rtol=1e-6)
    assert results[3]["ValueError"].startswith("nll_none: binding 'loss': relax.nn.nll_loss: dimension 1 of the "
                                               "targets is 7, where the predictions have 4 ")


def test_strided_slice_backward_checks_its_output_grad():
    """The gradient is inserted into zeros with its own sizes: a larger one was written past the result."""
    results = _calls(("slice_grad", (_f32((2, 3), 1),)), ("slice_grad", (_f32((50, 3)),)))
    want = np.zeros((4, 3), np.float32)
    want[:2] = _f32((2, 3), 1)
    assert results[0] == {"ok": want.tolist()}
    assert results[1] == {"ValueError": "slice_grad: binding 'dx': relax.grad.strided_slice_backward: dimension 0 "
                                        "of output_grad is 50, where the slice has 2"}


X_POOL = np.random.default_rng(0).standard_normal((1, 2, 5, 5)).astype(np.float32)


def test_max_pool2d_backward_checks_its_output_grad():
    """The argmax of each window is read at the gradient's positions: a taller gradient read past it."""
    g = _f32((1, 2, 4, 4), 1)
    results = _calls(("max_grad", (g, X_POOL)), ("max_grad", (_f32((1, 2, 40, 40)), X_POOL)))
    np.testing.assert_allclose(results[0]["ok"], rm.interpret(from_source(ASSUMED), "max_grad", g, X_POOL), rtol=1e-6)
    assert results[1] == {"ValueError": "max_grad: binding 'dx': relax.grad.max_pool2d_backward: dimension 2 of "
                                        "output_grad is 40, where the forward op's output has 4"}


def test_avg_pool2d_backward_checks_its_output_grad():
    """The gradient is read over the data's batch and channels: one of fewer channels was read past."""
    g = _f32((1, 2, 4, 4), 1)
    results = _calls(("avg_grad", (g, X_POOL)), ("avg_grad", (_f32((1, 1, 4, 4)), X_POOL)))
    np.testing.assert_allclose(results[0]["ok"], rm.interpret(from_source(ASSUMED), "avg_grad", g, X_POOL), rtol=1e-6)
    assert results[1] == {"ValueError": "avg_grad: binding 'dx': relax.grad.avg_pool2d_backward: dimension 1 of "
                                        "output_grad is 1, where the forward op's output has 2"}
