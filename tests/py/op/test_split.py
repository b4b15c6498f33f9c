"""``split`` as TVM defines it (``InferStructInfoSplit``, and its legalization by ``topi.split``): sections of
``ceil(size / sections)`` with a shorter last one, and the data itself, not a tuple, for one section or no index.
Interpreted and compiled against NumPy slicing; the gradient against hand-derived values."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import TensorStructInfo as T, op
from relax_mlir.ir import BlockBuilder, TupleGetItem, Var, sym
from relax_mlir.ir.struct_info import TupleStructInfo
from relax_mlir.transform import Gradient


def _split_module(sinfo, spec, axis):
    x = Var("x", sinfo)
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(op.split(x, spec, axis=axis))
        bb.emit_func_output(out)
    return bb.get()


def _run_both(mod, *arrays):
    """The results compiled and interpreted, each a list of arrays (one for a tensor result)."""
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*arrays)
    interpreted = relax_mlir.interpret(mod, "main", *arrays)
    return [[np.asarray(r)] if isinstance(r, np.ndarray) else [np.asarray(p) for p in r]
            for r in (compiled, interpreted)]


@pytest.mark.parametrize("spec", [1, []])
def test_one_piece_is_the_data_itself(spec):
    # TVM: "When the number of section is one / there is no index, return the input tensor's struct info."
    x = Var("x", T((2, 10, 4), "float32"))
    assert op.split(x, spec, axis=1).struct_info == T((2, 10, 4), "float32")
    n = Var("n", T(("a", "b"), "float32"))
    assert op.split(n, spec, axis=-1).struct_info == T(("a", "b"), "float32")
    data = np.arange(80, dtype=np.float32).reshape(2, 10, 4)
    for (got,) in _run_both(_split_module(T((2, 10, 4), "float32"), spec, 1), data):
        np.testing.assert_array_equal(got, data)


def test_sections_that_do_not_divide_the_size_are_tvms_ceil_pieces():
    x = Var("x", T((2, 10, 4), "float32"))
    want = TupleStructInfo([T((2, 4, 4), "float32"), T((2, 4, 4), "float32"), T((2, 2, 4), "float32")])
    assert op.split(x, 3, axis=1).struct_info == want
    assert op.split(x, 3, axis=-2).struct_info == want
    data = np.random.default_rng(0).standard_normal((2, 10, 4)).astype(np.float32)
    for got in _run_both(_split_module(T((2, 10, 4), "float32"), 3, 1), data):
        assert [g.shape for g in got] == [(2, 4, 4), (2, 4, 4), (2, 2, 4)]
        for g, w in zip(got, (data[:, 0:4], data[:, 4:8], data[:, 8:10])):
            np.testing.assert_array_equal(g, w)


def test_symbolic_sections_are_tvms_expressions():
    # TVM's test_split_infer_ty: split(z, 3) of (n, 16) is ((n + 2) // 3, (n + 2) // 3, n - (n + 2) // 3 * 2).
    n = sym.SizeVar("n")
    third = sym.floor_div(n + 2, 3)
    z = Var("z", T((n, 16), "float32"))
    assert op.split(z, 3).struct_info == TupleStructInfo([T((third, 16), "float32"), T((third, 16), "float32"),
                                                          T((n - third * 2, 16), "float32")])
    half = sym.floor_div(n + 1, 2)
    assert op.split(z, 2).struct_info == TupleStructInfo([T((half, 16), "float32"), T((n - half, 16), "float32")])


@pytest.mark.parametrize("n,sizes", [(10, [3, 3, 3, 1]), (9, [3, 3, 3, 0]), (12, [3, 3, 3, 3]), (0, [0, 0, 0, 0])])
def test_symbolic_sections_compiled_and_interpreted_against_numpy_slicing(n, sizes):
    mod = _split_module(T(("n", 3), "float32"), 4, 0)
    data = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
    bounds = np.cumsum([0] + sizes)
    for got in _run_both(mod, data):
        assert [g.shape[0] for g in got] == sizes
        for i, g in enumerate(got):
            np.testing.assert_array_equal(g, data[bounds[i]:bounds[i + 1]])


def test_sections_whose_full_pieces_pass_the_end_are_refused():
    # 5 in 4: three pieces of ceil(5 / 4) = 2 take 6, leaving -1 for the last. Statically at inference; for a
    # symbolic size when it runs, compiled (a size check: no piece reads past the data) and interpreted.
    with pytest.raises(ValueError, match=r"relax.split: cannot split axis 0 of \(5, 3\) \(size 5\) into 4 sections: "
                                         r"3 of ceil\(5 / 4\) = 2 already take 6"):
        op.split(Var("x", T((5, 3), "float32")), 4)
    # The third piece alone is the result: its size, (n + 3) // 4 = 2, is non-negative; only the split can tell.
    x = Var("x", T(("n", 3), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            parts = bb.emit(op.split(x, 4), "parts")
            third = bb.emit_output(TupleGetItem(parts, 2))
        bb.emit_func_output(third)
    mod = bb.get()
    data = np.arange(15, dtype=np.float32).reshape(5, 3)
    f = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"]
    with pytest.raises(ValueError, match=r"^main: binding 'parts': relax.split: axis 0 of size 5 cannot be split into "
                                         r"4 sections: 3 of ceil\(5 / 4\) already take 6$"):
        f(data)
    with pytest.raises(ValueError, match=r"main: binding 'parts': relax.split failed on an array of shape \(5, 3\) "
                                         r".*: axis 0 of size 5 cannot be split into 4 sections: 3 of ceil\(5 / 4\) "
                                         r"= 2 already take 6"):
        relax_mlir.interpret(mod, "main", data)
    np.testing.assert_array_equal(f(data[:4]), data[2:3])  # 4 in 4 fits: pieces of 1
    f = relax_mlir.VirtualMachine(relax_mlir.compile(_split_module(T(("n", 3), "float32"), 4, 0)))["main"]
    assert [p.shape[0] for p in f(np.zeros((6, 3), np.float32))] == [2, 2, 2, 0]  # 6 in 4 fits: 2, 2, 2, 0


def test_gradient_of_uneven_sections_and_of_one_piece():
    # loss = sum(p0 * w0) + sum(p2 * w2) of split(x, 3) along 1 (pieces 4, 4, 2): d loss / dx is w0 over the
    # first four columns, 0 over the next four, w2 over the last two.
    x = Var("x", T((2, 10), "float64"))
    w0, w2 = Var("w0", T((2, 4), "float64")), Var("w2", T((2, 2), "float64"))
    bb = BlockBuilder()
    with bb.function("main", [x, w0, w2]):
        with bb.dataflow():
            parts = bb.emit(op.split(x, 3, axis=1))
            p0 = bb.emit(TupleGetItem(parts, 0))
            p2 = bb.emit(TupleGetItem(parts, 2))
            loss = bb.emit_output(op.add(op.sum(op.multiply(p0, w0)), op.sum(op.multiply(p2, w2))))
        bb.emit_func_output(loss)
    mod = Gradient("main", require_grads=[x])(bb.get())
    rng = np.random.default_rng(1)
    xs, a, b = rng.standard_normal((2, 10)), rng.standard_normal((2, 4)), rng.standard_normal((2, 2))
    want = np.concatenate([a, np.zeros((2, 4)), b], axis=1)
    _, (compiled,) = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main_adjoint"](xs, a, b)
    _, (interpreted,) = relax_mlir.interpret(mod, "main_adjoint", xs, a, b)
    np.testing.assert_array_equal(compiled, want)
    np.testing.assert_array_equal(interpreted, want)

    bb = BlockBuilder()
    x = Var("x", T((3,), "float64"))
    with bb.function("main", [x]):
        with bb.dataflow():
            whole = bb.emit(op.split(x, 1))
            loss = bb.emit_output(op.sum(op.multiply(whole, whole)))
        bb.emit_func_output(loss)
    mod = Gradient("main")(bb.get())
    x0 = np.array([1.0, -2.0, 3.0])
    _, (compiled,) = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main_adjoint"](x0)
    _, (interpreted,) = relax_mlir.interpret(mod, "main_adjoint", x0)
    np.testing.assert_array_equal(compiled, 2 * x0)
    np.testing.assert_array_equal(interpreted, 2 * x0)
