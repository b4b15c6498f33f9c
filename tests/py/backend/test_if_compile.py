"""relax_mlir.compile runs R.If as ``scf.if``: compiled results equal the interpreter's (and NumPy's) for both
branch outcomes, with several bindings a branch, tuple results, symbolic shapes, nested ifs, calls, runtime checks
and schedules inside a branch; branches of different static shapes give a tensor of dynamic size (usable inside the
function, refused as a function's result, as any result of unknown shape); what compiled code cannot carry (an
``R.Prim`` condition, branches of different dtypes) is refused naming the function and binding."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import interpret
from relax_mlir.backend.options import PipelineOptions
from relax_mlir.backend.signature import ExportError
from relax_mlir.runtime import load_module
from relax_mlir.script import from_source

F32 = np.float32


def _run(text: str, *args, **options):
    """The module's ``main`` compiled and run on ``args``, with the interpreter's result for the same."""
    mod = from_source(text)
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod, **options))
    return vm["main"](*args), interpret(mod, "main", *args)


SEVERAL_BINDINGS = '''
@I.ir_module
class Module:
    @R.function
    def main(c: R.Tensor((), "bool"), x: R.Tensor((3,), "float32")):
        if c:
            a = R.exp(x)
            b = R.add(a, x)
            picked = R.multiply(b, R.const(2.0, "float32"))
        else:
            picked = R.multiply(x, x)
        y = R.subtract(picked, x)
        return y
'''


@pytest.mark.parametrize("c", [True, False])
def test_both_outcomes_of_branches_with_several_bindings(c):
    x = np.array([0.5, -1.0, 2.0], F32)
    got, want = _run(SEVERAL_BINDINGS, np.array(c), x)
    expected = (np.exp(x) + x) * 2 - x if c else x * x - x
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_the_if_is_exported_as_scf_if_on_the_extracted_condition():
    text = relax_mlir.to_mlir(from_source(SEVERAL_BINDINGS), "relax")
    assert "tensor.extract %arg0[] : tensor<i1>" in text
    assert "scf.if %extracted -> (tensor<3xf32>)" in text
    assert '"relax.exp"' in text.split("} else {")[0] and '"relax.multiply"(%arg1, %arg1)' in text.split("} else {")[1]


TUPLE_SYMBOLIC = '''
@I.ir_module
class Module:
    @R.function
    def main(c: R.Tensor((), "bool"), x: R.Tensor(("n", 3), "float32"), w: R.Tensor((3, 4), "float32")):
        n = T.int64()
        if c:
            a = R.matmul(x, w)
            b = R.nn.relu(a)
            y = (b, R.sum(b, axis=[1]))
        else:
            a2 = R.matmul(x, w)
            y = (R.negative(a2), R.max(a2, axis=[1]))
        return y
'''


@pytest.mark.parametrize("c", [True, False])
@pytest.mark.parametrize("n", [1, 5])
def test_a_tuple_result_over_a_symbolic_size(c, n):
    rng = np.random.default_rng(n)
    x, w = rng.standard_normal((n, 3)).astype(F32), rng.standard_normal((3, 4)).astype(F32)
    (g0, g1), (w0, w1) = _run(TUPLE_SYMBOLIC, np.array(c), x, w)
    a = x @ w
    e0, e1 = (np.maximum(a, 0), np.maximum(a, 0).sum(1)) if c else (-a, a.max(1))
    for got, want, expected in ((g0, w0, e0), (g1, w1, e1)):
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


NESTED = '''
@I.ir_module
class Module:
    @R.function
    def main(a: R.Tensor((), "bool"), b: R.Tensor((), "bool"), x: R.Tensor((2,), "float32")):
        if a:
            y = R.exp(x)
        elif b:
            t = R.negative(x)
            y = R.add(t, t)
        else:
            y = x
        return y
'''


@pytest.mark.parametrize("a, b", [(True, False), (True, True), (False, True), (False, False)])
def test_nested_ifs(a, b):
    x = np.array([0.5, -1.0], F32)
    got, want = _run(NESTED, np.array(a), np.array(b), x)
    np.testing.assert_allclose(got, np.exp(x) if a else -2 * x if b else x, rtol=1e-6)
    np.testing.assert_allclose(got, want, rtol=1e-6)


DIFFERENT_SHAPES = '''
@I.ir_module
class Module:
    @R.function
    def main(c: R.Tensor((), "bool"), x: R.Tensor((3,), "float32"), z: R.Tensor((4,), "float32")):
        if c:
            y = R.exp(x)
        else:
            y = z
        s = R.sum(y)
        return s
'''


@pytest.mark.parametrize("c", [True, False])
def test_branches_of_different_static_shapes_give_a_tensor_of_dynamic_size(c):
    x, z = np.array([0.0, 1.0, 2.0], F32), np.arange(4, dtype=F32)
    assert "scf.if %extracted -> (tensor<?xf32>)" in relax_mlir.to_mlir(from_source(DIFFERENT_SHAPES), "relax")
    got, want = _run(DIFFERENT_SHAPES, np.array(c), x, z)
    np.testing.assert_allclose(got, np.exp(x).sum() if c else 6.0, rtol=1e-6)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_match_cast_of_a_dynamic_if_result_is_checked_when_it_runs():
    mod = from_source(DIFFERENT_SHAPES.replace("s = R.sum(y)", 's = R.match_cast(y, R.Tensor((3,), "float32"))'))
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod))
    x, z = np.array([0.0, 1.0, 2.0], F32), np.arange(4, dtype=F32)
    np.testing.assert_allclose(vm["main"](np.array(True), x, z), np.exp(x), rtol=1e-6)
    with pytest.raises(ValueError, match=r"^main: binding 's': match_cast to Tensor\(\(3,\), float32\): dimension 0 "
                                         r"is 4, expected 3"):
        vm["main"](np.array(False), x, z)


def test_returning_branches_of_different_static_shapes_is_refused_as_a_result_of_unknown_shape():
    mod = from_source(DIFFERENT_SHAPES.replace("s = R.sum(y)", "s = y"))
    with pytest.raises(ValueError, match=r"^main: result has an unknown shape \(Tensor\(ndim=1, float32\)\); a "
                                         r"compiled function must be able to allocate its results"):
        relax_mlir.compile(mod)


SIZES_IN_BRANCHES = '''
@I.ir_module
class Module:
    @R.function
    def main(c: R.Tensor((), "bool"), x: R.Tensor(("n",), "float32")):
        n = T.int64()
        if c:
            m = T.int64()
            v = R.match_cast(x, R.Tensor((m,), "float32"))
            e = R.exp(v)
            y = R.reshape(e, R.shape([n, 1]))
        else:
            y = R.reshape(x, R.shape([n, 1]))
        r = R.reshape(y, R.shape([1, n]))
        return r
'''


@pytest.mark.parametrize("c", [True, False])
def test_sizes_a_branch_reads_or_binds_stay_in_it(c):
    # n is first read inside the then branch (its tensor.dim must not be reused after the If, which that branch's
    # region does not dominate), and m is the branch's own
    x = np.arange(4, dtype=F32)
    got, want = _run(SIZES_IN_BRANCHES, np.array(c), x)
    np.testing.assert_allclose(got, (np.exp(x) if c else x).reshape(1, 4), rtol=1e-6)
    np.testing.assert_allclose(got, want, rtol=1e-6)


CALL_AND_CHECKS = '''
@I.ir_module
class Module:
    @R.function
    def twice(x: R.Tensor(("k", 3), "float32")):
        y = R.add(x, x)
        return y

    @R.function
    def main(c: R.Tensor((), "bool"), x: R.Tensor((4, 3), "float32"), i: R.Tensor((2,), "int64")):
        if c:
            t = R.take(x, i, axis=0)
            y = cls.twice(t)
        else:
            y = R.strided_slice(x, axes=[0], begin=[0], end=[2])
        return y
'''


def test_calls_and_runtime_checks_inside_a_branch_run_only_with_it():
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(from_source(CALL_AND_CHECKS)))
    x = np.arange(12, dtype=F32).reshape(4, 3)
    np.testing.assert_array_equal(vm["main"](np.array(True), x, np.array([3, 1])), 2 * x[[3, 1]])
    np.testing.assert_array_equal(vm["main"](np.array(False), x, np.array([9, 1])), x[:2])  # the take does not run
    with pytest.raises(IndexError, match=r"main: binding 't'"):
        vm["main"](np.array(True), x, np.array([9, 1]))


@pytest.mark.parametrize("options", [{"opt_level": 0}, {"checks": False}, {"num_threads": 1}])
def test_branches_run_with_naive_loops_without_checks_and_on_one_thread(options):
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(from_source(CALL_AND_CHECKS), **options))
    x = np.arange(12, dtype=F32).reshape(4, 3)
    np.testing.assert_array_equal(vm["main"](np.array(True), x, np.array([3, 1])), 2 * x[[3, 1]])
    np.testing.assert_array_equal(vm["main"](np.array(False), x, np.array([3, 1])), x[:2])
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(from_source(SIZES_IN_BRANCHES), **options))
    np.testing.assert_allclose(vm["main"](np.array(True), x[0]), np.exp(x[:1]), rtol=1e-6)


SCHEDULED = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((256, 256), "float32"), w: R.Tensor((256, 256), "float32")):
        s = R.sum(x)
        c = R.greater(s, R.const(0.0, "float32"))
        if c:
            a = R.matmul(x, w)
            y = R.nn.softmax(a, axis=1)
        else:
            y = R.add(x, w)
        z = R.multiply(y, R.const(2.0, "float32"))
        return z
'''


@pytest.mark.parametrize("sign", [1, -1])
def test_a_computed_condition_with_scheduled_threaded_ops_in_a_branch(sign):
    rng = np.random.default_rng(0)
    x = sign * np.abs(rng.standard_normal((256, 256))).astype(F32)
    w = rng.standard_normal((256, 256)).astype(F32)
    scheduled = relax_mlir.to_mlir(from_source(SCHEDULED), "scheduled",
                                   options=PipelineOptions(num_threads=2))
    assert "vector.contract" in scheduled.split("scf.if")[1]  # the matmul in the branch has its register tiles
    got, want = _run(SCHEDULED, x, w, num_threads=2)
    if sign > 0:
        a = x.astype(np.float64) @ w
        e = np.exp(a - a.max(1, keepdims=True))
        expected = 2 * e / e.sum(1, keepdims=True)
    else:
        expected = 2 * (x + w)
    np.testing.assert_allclose(got, expected, rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-6)


def test_modules_differing_only_inside_a_branch_compile_apart(tmp_path):
    negated = SEVERAL_BINDINGS.replace("picked = R.multiply(x, x)", "picked = R.negative(x)")
    x = np.array([0.5, -1.0, 2.0], F32)
    first = relax_mlir.VirtualMachine(relax_mlir.compile(from_source(SEVERAL_BINDINGS)))["main"]
    second = relax_mlir.compile(from_source(negated))
    np.testing.assert_allclose(first(np.array(False), x), x * x - x, rtol=1e-6)
    np.testing.assert_allclose(relax_mlir.VirtualMachine(second)["main"](np.array(False), x), -2 * x, rtol=1e-6)
    second.export_library(tmp_path / "if.so")  # and the library file runs it without MLIR's engine
    lib = load_module(tmp_path / "if.so")
    np.testing.assert_allclose(lib["main"](np.array(False), x), -2 * x, rtol=1e-6)
    np.testing.assert_allclose(lib["main"](np.array(True), x), (np.exp(x) + x) * 2 - x, rtol=1e-6)


def test_a_prim_condition_is_refused():
    mod = from_source(SEVERAL_BINDINGS.replace('c: R.Tensor((), "bool")', 'c: R.Prim("bool")'))
    with pytest.raises(ExportError, match=r"^main: c has struct info Prim\(bool\); only tensors and tuples of tensors"):
        relax_mlir.compile(mod)


def test_branches_of_different_dtypes_are_refused_naming_the_binding():
    mod = from_source('''
@I.ir_module
class Module:
    @R.function
    def main(c: R.Tensor((), "bool"), x: R.Tensor((3,), "float32"), z: R.Tensor((3,), "int32")):
        if c:
            y = R.exp(x)
        else:
            y = z
        r = R.add(x, x)
        return r
''')
    with pytest.raises(ExportError, match=r"^main: binding 'y': R.If has struct info Object; only tensors and tuples"):
        relax_mlir.compile(mod)
