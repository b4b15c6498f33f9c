"""Op semantics that differed from TVM Relax (found by replaying TVM's ``tests/python/relax/test_op_*.py``), each
compiled and interpreted against NumPy or hand-derived values:

* ``split`` at indices that are negative or out of order: TVM's ``InferStructInfoSplit`` clamps each bound into
  ``[0, size]`` and makes a piece that ends before its start empty (its test splits 10 at ``[-2, 2, 6, 4, 8, 12,
  9]`` into 0, 2, 4, 0, 4, 2, 0, 1); a negative index is 0, not counted from the end as NumPy's ``split`` does;
* ``scatter_elements(..., reduction="mean")``: TVM's kernel's running mean, ``(old + update) / 2`` per write, for
  float data (its integer form divides ints, which TVM refuses);
* ``sum``/``max``/``prod``/``min`` of bool tensors: bool, ``any`` or ``all`` (TVM's ``topi.sum`` of bool is
  ``any``, its ``prod`` a logical and); ``mean``/``variance`` and ``argmax`` of bool stay refused;
* ``gather_elements(..., negative_indices=False)``: PyTorch's ``gather`` refuses a negative index (ONNX's
  GatherElements counts it from the end, Relax's default); the error names the op, binding, index, axis and the
  range, and the PyTorch importer writes it instead of a ``one_hot`` check.
"""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import TensorStructInfo as T, op
from relax_mlir.ir import BlockBuilder, TupleGetItem, Var, const
from relax_mlir.ir.struct_info import TupleStructInfo
from relax_mlir.script import from_source
from relax_mlir.transform import Gradient


def _module(fn, *sinfos, name="out"):
    """``main(*params) = fn(*params)``, one binding named ``name``."""
    params = [Var(f"p{i}", s) for i, s in enumerate(sinfos)]
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(fn(*params), name)
        bb.emit_func_output(out)
    return bb.get()


def _runs(mod, fn="main"):
    """The interpreter and the compiled function, each called as ``run(*arrays)``."""
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(mod))[fn]
    return [lambda *a: relax_mlir.interpret(mod, fn, *a), compiled]


def _pieces(result):
    return [np.asarray(result)] if isinstance(result, np.ndarray) else [np.asarray(p) for p in result]


# -- split at negative and out-of-order indices -----------------------------------------------------------------

TVM_INDICES = [-2, 2, 6, 4, 8, 12, 9]


def test_split_at_negative_and_unordered_indices_is_tvms_clamped_pieces():
    x = Var("x", T((2, 10, 4), "float32"))
    want = TupleStructInfo([T((2, n, 4), "float32") for n in (0, 2, 4, 0, 4, 2, 0, 1)])  # TVM's test's sizes
    assert op.split(x, TVM_INDICES, axis=1).struct_info == want
    data = np.arange(80, dtype=np.float32).reshape(2, 10, 4)
    slices = [(0, 0), (0, 2), (2, 6), (6, 6), (4, 8), (8, 10), (10, 10), (9, 10)]
    for run in _runs(_module(lambda p: op.split(p, TVM_INDICES, axis=1), T((2, 10, 4), "float32"))):
        got = _pieces(run(data))
        assert len(got) == len(slices)
        for g, (b, e) in zip(got, slices):
            np.testing.assert_array_equal(g, data[:, b:e])


def test_a_negative_split_index_is_zero_not_counted_from_the_end():
    # NumPy's split([0..5], [-2]) is [0, 1, 2], [3, 4]; TVM's clamped bound gives nothing, then everything.
    mod = _module(lambda p: op.split(p, [-2]), T((5,), "int32"))
    assert mod["main"].ret_struct_info == TupleStructInfo([T((0,), "int32"), T((5,), "int32")])
    data = np.arange(5, dtype=np.int32)
    for run in _runs(mod):
        first, second = _pieces(run(data))
        assert first.shape == (0,)
        np.testing.assert_array_equal(second, data)


def test_split_of_a_symbolic_axis_at_unordered_indices():
    # A symbolic size is assumed to reach past every index: pieces 0, 2, 4, 0, 4, 4 (8 to 12), 0 and n - 9.
    n_in = Var("x", T((2, "n"), "float32"))
    sizes = [p.shape[1] for p in op.split(n_in, TVM_INDICES, axis=1).struct_info.fields]
    assert [str(s) for s in sizes] == ["0", "2", "4", "0", "4", "4", "0", "n - 9"]
    mod = _module(lambda p: op.split(p, TVM_INDICES, axis=1), T((2, "n"), "float32"))
    data = np.arange(30, dtype=np.float32).reshape(2, 15)
    slices = [(0, 0), (0, 2), (2, 6), (6, 6), (4, 8), (8, 12), (12, 12), (9, 15)]
    for run in _runs(mod):
        for g, (b, e) in zip(_pieces(run(data)), slices):
            np.testing.assert_array_equal(g, data[:, b:e])
        with pytest.raises(ValueError, match=r"binding 'out'.*expected 4"):  # n = 10: 8 to 12 has only 2
            run(np.zeros((2, 10), np.float32))


def test_gradient_of_overlapping_split_pieces_sums_them_back():
    # Pieces [0, 6), [6, 6), [4, 8), [8, 8) and [0, 10) (the -1 is 0) of a row of 10, weighted 1..5 in the loss.
    x = Var("x", T((2, 10), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            parts = bb.emit(op.split(x, [6, 4, 8, -1], axis=1))
            total = None
            for k in range(5):
                term = bb.emit(op.sum(op.multiply(TupleGetItem(parts, k), const(float(k + 1), "float32"))))
                total = term if total is None else bb.emit(op.add(total, term))
            out = bb.emit_output(total)
        bb.emit_func_output(out)
    mod = Gradient("main")(bb.get())
    want = np.full((2, 10), 5.0, np.float32)  # the last piece covers everything
    want[:, 0:6] += 1
    want[:, 4:8] += 3
    data = np.random.default_rng(0).standard_normal((2, 10)).astype(np.float32)
    for run in _runs(mod, "main_adjoint"):
        np.testing.assert_allclose(run(data)[1][0], want)


# -- scatter_elements reduction="mean" ----------------------------------------------------------------------------

def _running_mean(data, indices, updates, axis):
    """NumPy's loop over the indices in row-major order: ``(old + update) / 2`` per write."""
    out = data.copy()
    for pos in np.ndindex(*indices.shape):
        target = list(pos)
        target[axis] = indices[pos] % data.shape[axis]
        out[tuple(target)] = (out[tuple(target)] + updates[pos]) / 2
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_scatter_elements_mean_is_tvms_running_mean(dtype):
    mod = _module(lambda d, i, u: op.scatter_elements(d, i, u, axis=0, reduction="mean"),
                  T((3, 4), dtype), T((2, 4), "int64"), T((2, 4), dtype))
    data = np.zeros((3, 4), dtype)
    indices = np.array([[0, 1, -1, 0], [0, 2, 2, 1]])
    updates = np.array([[3, 4, 5, 6], [6, 8, 1, 2]], dtype)
    # by hand: column 0 gets 3 then 6 at row 0: (0 + 3) / 2 = 1.5, (1.5 + 6) / 2 = 3.75 (PyTorch's mean: 3)
    want = np.array([[3.75, 0, 0, 3], [0, 2, 0, 1], [0, 4, 1.75, 0]], dtype)
    np.testing.assert_array_equal(_running_mean(data, indices, updates, 0), want)
    for run in _runs(mod):
        got = run(data, indices, updates)
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, want)


def test_scatter_elements_mean_along_the_last_axis_against_numpy():
    rng = np.random.default_rng(1)
    data = rng.standard_normal((3, 5)).astype(np.float32)
    indices = rng.integers(-5, 5, (3, 7))
    updates = rng.standard_normal((3, 7)).astype(np.float32)
    mod = _module(lambda d, i, u: op.scatter_elements(d, i, u, axis=-1, reduction="mean"),
                  T((3, 5), "float32"), T((3, 7), "int64"), T((3, 7), "float32"))
    want = _running_mean(data, indices, updates, 1)
    for run in _runs(mod):
        np.testing.assert_allclose(run(data, indices, updates), want, rtol=1e-6)


def test_scatter_elements_mean_of_integers_and_its_gradient_are_refused():
    d, i = Var("d", T((3, 4), "int32")), Var("i", T((2, 4), "int64"))
    with pytest.raises(ValueError, match=r"scatter_elements: reduction 'mean' needs float data .*, got int32"):
        op.scatter_elements(d, i, Var("u", T((2, 4), "int32")), reduction="mean")
    with pytest.raises(Exception, match=r"no gradient rule for relax\.scatter_elements with reduction 'mean' "
                                        r"\(only 'update' and 'add' have one\)"):
        Gradient("main")(_module(lambda d, i, u: op.sum(op.scatter_elements(d, i, u, reduction="mean")),
                                 T((3, 4), "float32"), T((2, 4), "int64"), T((2, 4), "float32")))
    with pytest.raises(ValueError, match=r"reduction must be one of update, add, mul, mean, min, max, got 'median'"):
        op.scatter_elements(d, i, Var("u", T((2, 4), "int32")), reduction="median")


# -- reductions of bool tensors -------------------------------------------------------------------------------

_LOGICAL = {"sum": np.any, "max": np.any, "prod": np.all, "min": np.all}


def _bools():
    x = np.random.default_rng(2).random((3, 4, 5)) < 0.3
    x[0] = False  # a row with no true
    x[1] = True  # one with no false
    return x


@pytest.mark.parametrize("name", list(_LOGICAL))
@pytest.mark.parametrize("attrs", [{}, {"axis": 1}, {"axis": (0, 2), "keepdims": True}, {"axis": -1}])
def test_reductions_of_bool_are_bool_any_or_all(name, attrs):
    x = _bools()
    mod = _module(lambda p: getattr(op, name)(p, **attrs), T((3, 4, 5), "bool"))
    want = _LOGICAL[name](x, axis=attrs.get("axis"), keepdims=attrs.get("keepdims", False))
    assert mod["main"].ret_struct_info == T(want.shape, "bool")
    for run in _runs(mod):
        got = run(x)
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, want)


def test_sum_and_prod_of_an_empty_bool_axis_are_false_and_true():
    x = np.zeros((2, 0), bool)
    for name, value in (("sum", False), ("prod", True)):
        for run in _runs(_module(lambda p: getattr(op, name)(p, axis=1), T((2, 0), "bool"))):
            np.testing.assert_array_equal(run(x), np.full(2, value))


@pytest.mark.parametrize("name, message", [("mean", r"must have a float dtype, got bool"),
                                           ("variance", r"must have a float dtype, got bool"),
                                           ("argmax", r"must be numeric, got bool")])
def test_reductions_of_bool_without_a_bool_result_are_refused(name, message):
    # TVM infers bool for mean of bool, then divides the any-sum by an int: no consistent result
    with pytest.raises(ValueError, match=rf"relax\.{name}: input {message}"):
        getattr(op, name)(Var("x", T((3,), "bool")))


# -- gather_elements negative_indices -------------------------------------------------------------------------

def _gather_module(negative_indices, data=T((2, 3), "float32"), indices=T((2, 2), "int64"), axis=1):
    return _module(lambda d, i: op.gather_elements(d, i, axis=axis, negative_indices=negative_indices),
                   data, indices, name="picked")


def test_gather_elements_counts_negative_indices_from_the_end_by_default():
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    indices = np.array([[-1, 0], [-3, 2]])
    want = np.take_along_axis(data, indices % 3, axis=1)
    for run in _runs(_gather_module(True)):
        np.testing.assert_array_equal(run(data, indices), want)
        with pytest.raises(IndexError, match=r"binding 'picked'.*relax\.gather_elements.*index -4 at position 3 "
                                             r".*out of range for (axis 1 of size 3|an axis of size 3)"):
            run(data, np.array([[0, 1], [2, -4]]))


def test_gather_elements_without_negative_indices_refuses_them_naming_the_range():
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    good = np.array([[2, 0], [1, 1]])
    for run in _runs(_gather_module(False)):
        np.testing.assert_array_equal(run(data, good), np.take_along_axis(data, good, axis=1))
        with pytest.raises(IndexError, match=r"^main: binding 'picked': relax\.gather_elements.*index -1 at position 2 "
                                             r"of the indices .*axis 1 .*\[0, 3\)"):
            run(data, np.array([[2, 0], [-1, 1]]))
        with pytest.raises(IndexError, match=r"index 3 at position 1 .*axis 1 .*\[0, 3\)"):
            run(data, np.array([[2, 3], [1, 1]]))


def test_gather_elements_on_a_symbolic_axis_names_its_size_in_the_range():
    mod = _gather_module(False, T(("n", 2), "float32"), T(("m", 2), "int64"), axis=0)
    for run in _runs(mod):
        with pytest.raises(IndexError, match=r"index -2 at position 1 .*axis 0 of size 5.*\[0, 5\)"):
            run(np.zeros((5, 2), np.float32), np.array([[4, -2], [0, 1]]))


def test_negative_indices_prints_and_parses_and_is_checked():
    mod = _gather_module(False)
    text = mod.script()
    assert "R.gather_elements(p0, p1, axis=1, negative_indices=False)" in text
    relax_mlir.ir.assert_structural_equal(from_source(text), mod)
    assert "negative_indices" not in _gather_module(True).script()  # the default is not written
    with pytest.raises(ValueError, match=r"negative_indices must be a bool, got 0"):
        op.gather_elements(Var("d", T((2, 3), "float32")), Var("i", T((2, 2), "int64")), negative_indices=0)


def test_torch_gather_imports_as_gather_elements_without_negative_indices():
    torch = pytest.importorskip("torch")
    from relax_mlir.frontend.torch import from_exported_program

    class Gather(torch.nn.Module):
        def forward(self, x, i):
            return torch.gather(x, 1, i)

    x, index = torch.arange(6.0).reshape(2, 3), torch.tensor([[2, 0], [1, 1]])
    mod, _, _ = from_exported_program(torch.export.export(Gather(), (x, index)))
    text = mod.script()
    assert "negative_indices=False" in text and "one_hot" not in text
    bad = torch.tensor([[2, 0], [-1, 1]])
    with pytest.raises(RuntimeError, match="index -1 is out of bounds for dimension 1 with size 3"):
        Gather()(x, bad)
    for run in _runs(mod):
        np.testing.assert_array_equal(run(x.numpy(), index.numpy()), Gather()(x, index).numpy())
        with pytest.raises(IndexError, match=r"binding '\w+': relax\.gather_elements.*index -1 at position 2 .*"
                                             r"axis 1 .*\[0, 3\)"):
            run(x.numpy(), bad.numpy())


def test_onnx_gather_elements_keeps_counting_negative_indices_from_the_end():
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    from relax_mlir.frontend.onnx import from_onnx

    node = helper.make_node("GatherElements", ["d", "i"], ["y"], axis=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("d", TensorProto.FLOAT, (2, 3)),
                                            helper.make_tensor_value_info("i", TensorProto.INT64, (2, 2))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (2, 2))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    data, indices = np.arange(6, dtype=np.float32).reshape(2, 3), np.array([[-1, 0], [-3, 2]])
    (want,) = ReferenceEvaluator(model).run(None, {"d": data, "i": indices})
    mod, _, _ = from_onnx(model)
    for run in _runs(mod):
        np.testing.assert_array_equal(run(data, indices), want)
