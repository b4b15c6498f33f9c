"""Slices the library builds "to the end" of an axis (``nn.pad``'s adjoint, the last piece of ``concat``'s adjoint,
``topk`` of every element): they ended at 2**31 - 1, TVM users' habit, which is past the end of a shorter axis only.
On an axis of 2**31 elements or more the slice stopped early (a static axis: the adjoint had a wrong shape) or
raised at run time (a symbolic one). They end at int64 max now (``grad_utils.SLICE_END``), past any axis' end.

The numbers are checked against NumPy on small axes, static and symbolic; the huge axes only through the built
IR (struct info, and each slice's length as NumPy's ``range(n)[begin:end:stride]``), nothing of that size is
allocated."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import TensorStructInfo as T, op
from relax_mlir.ir import BlockBuilder, Call, IRModule, Tuple, Var
from relax_mlir.ir.sym import evaluate
from relax_mlir.ir.visitor import post_order_visit
from relax_mlir.transform import Gradient

HUGE = 2**31 + 5
RNG = np.random.default_rng(0)


def _module(params: list[Var], body) -> IRModule:
    """``main(params)``: ``sum(body(*params) * w)`` with a weight parameter ``w`` of the body's shape last, so the
    adjoint of each parameter is a slice of ``w`` (differentiated as ``main_adjoint``)."""
    bb = BlockBuilder()
    out_sinfo = body(*params).struct_info
    w = Var("w", out_sinfo)
    with bb.function("main", params + [w]):
        with bb.dataflow():
            y = bb.emit(body(*params))
            loss = bb.emit_output(op.sum(op.multiply(y, w)))
        bb.emit_func_output(loss)
    return Gradient("main")(bb.get())


def _pad(x):
    return op.nn.pad(x, pad_width=(1, 0, 0, 2))  # after = 0 on axis 0: the adjoint slices it to the end


def _concat(a, b):
    return op.concat(Tuple([a, b]), axis=0)  # the second piece ends at the end of a symbolic axis


def _slices(expr) -> list[Call]:
    found = []
    post_order_visit(expr, lambda e: found.append(e) if isinstance(e, Call) and e.op is op.strided_slice else None)
    return found


def _assert_numpy_lengths(slices: list[Call], sizes: dict) -> None:
    """Each slice's inferred shape, with ``sizes`` for the size variables, is NumPy's slice of its input's."""
    assert slices
    for call in slices:
        shape = [evaluate(d, sizes) for d in call.args[0].struct_info.shape]
        want = list(shape)
        a = call.attrs
        for axis, b, e, s in zip(a["axes"], a["begin"], a["end"], a["strides"] or (1,) * len(a["axes"])):
            want[axis] = len(range(shape[axis])[evaluate(b, sizes):evaluate(e, sizes):s])
        assert [evaluate(d, sizes) for d in call.struct_info.shape] == want, (call.attrs, sizes)


def _run_both(mod, *args):
    compiled = rm.VirtualMachine(rm.compile(mod, num_threads=1))["main_adjoint"](*args)
    return compiled, rm.interpret(mod, "main_adjoint", *args)


@pytest.mark.parametrize("rows", [4, "n"])
def test_the_adjoint_of_pad_is_the_interior_of_the_weights(rows):
    mod = _module([Var("x", T((rows, 3), "float32"))], _pad)
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    w = RNG.standard_normal((5, 5)).astype(np.float32)
    for _, (dx, dw) in _run_both(mod, x, w):
        np.testing.assert_array_equal(dx, w[1:, :3])
        np.testing.assert_array_equal(dw, np.pad(x, ((1, 0), (0, 2))))


@pytest.mark.parametrize("rows", [3, "n"])
def test_the_adjoint_of_concat_is_the_weights_cut_at_the_boundary(rows):
    mod = _module([Var("a", T((rows, 2), "float32")), Var("b", T((3, 2), "float32"))], _concat)
    a, b = (RNG.standard_normal((3, 2)).astype(np.float32) for _ in range(2))
    w = RNG.standard_normal((6, 2)).astype(np.float32)
    for _, (da, db, dw) in _run_both(mod, a, b, w):
        np.testing.assert_array_equal(da, w[:3])
        np.testing.assert_array_equal(db, w[3:])
        np.testing.assert_array_equal(dw, np.concatenate([a, b]))


@pytest.mark.parametrize("cols", [5, "n"])
def test_topk_of_every_element_is_a_full_sort(cols):
    """``k=0`` takes the whole axis: compiled code runs the decomposition, the interpreter the NumPy reference."""
    x = Var("x", T((2, cols), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(op.topk(x, k=0, axis=1, largest=False))
        bb.emit_func_output(out)
    mod = bb.get()
    data = RNG.standard_normal((2, 5)).astype(np.float32)
    for values, indices in (rm.VirtualMachine(rm.compile(mod, num_threads=1))["main"](data),
                            rm.interpret(mod, "main", data)):
        np.testing.assert_array_equal(values, np.sort(data, axis=1))
        np.testing.assert_array_equal(indices, np.argsort(data, axis=1, kind="stable"))


def test_the_adjoint_of_pad_on_an_axis_of_2_31_elements_or_more_has_its_shape():
    """It had 2**31 - 2 rows: the slice of the adjoint stopped at 2**31 - 1 (nothing checked it)."""
    dx = _module([Var("x", T((HUGE, 3), "float32"))], _pad)["main_adjoint"].ret_struct_info.fields[1].fields[0]
    assert dx == T((HUGE, 3), "float32")


@pytest.mark.parametrize("params,body", [([Var("x", T(("n", 3), "float32"))], _pad),
                                         ([Var("a", T(("n", 2), "float32")), Var("b", T((3, 2), "float32"))],
                                          _concat)], ids=["pad", "concat"])
def test_an_adjoint_s_slices_have_numpy_s_length_on_a_symbolic_axis_of_2_31_elements_or_more(params, body):
    """The inference reads the bound as the end of the axis; NumPy (and compiled code, which raised) read 2**31 - 1
    as an index."""
    _assert_numpy_lengths(_slices(_module(params, body)["main_adjoint"]), {"n": HUGE})


@pytest.mark.parametrize("cols", [HUGE, "n"])
def test_topk_of_every_element_of_an_axis_of_2_31_elements_or_more(cols):
    """The decomposition compiled code runs: its slice keeps the whole axis (it kept 2**31 - 1 elements)."""
    call = op.topk(Var("x", T((2, cols), "float32")), k=0, axis=1)
    expr = call.op.decompose(call)
    _assert_numpy_lengths(_slices(expr), {"n": HUGE})
    assert expr.fields[1].struct_info == T((2, cols), "int32")
