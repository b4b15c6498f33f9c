"""The ops real models need (issue 11), on TVM's documented examples and hand-derived values, compiled and
interpreted: attention's causal masks as TVM's docstring draws them, rounding ties, signs of zeros, the
embedding gradient's scatter-add, einsum against NumPy. The registry tests check every sample besides."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import TensorStructInfo as T, op
from relax_mlir.ir import BlockBuilder, Var
from relax_mlir.transform import Gradient


def _one_op(call_of, *sinfos):
    """A module ``main(params) = call_of(*params)``, and a function running it compiled and interpreted."""
    params = [Var(f"a{i}", s) for i, s in enumerate(sinfos)]
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(call_of(*params))
        bb.emit_func_output(out)
    mod = bb.get()
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod))

    def run(*arrays):
        return vm["main"](*arrays), relax_mlir.interpret(mod, "main", *arrays)
    return mod, run


# TVM's docstring of R.nn.attention: the masks for (seq_len, seq_len_kv) = (4, 2) and (2, 4).
TVM_MASKS = {
    (4, 2, "TopLeft"): [[1, 0], [1, 1], [1, 1], [1, 1]],
    (4, 2, "BottomRight"): [[1, 1], [1, 1], [1, 1], [1, 1]],
    (2, 4, "TopLeft"): [[1, 0, 0, 0], [1, 1, 0, 0]],
    (2, 4, "BottomRight"): [[1, 1, 1, 0], [1, 1, 1, 1]],
}


@pytest.mark.parametrize("seq,seq_kv,mask", list(TVM_MASKS))
def test_attention_causal_masks_are_tvms(seq, seq_kv, mask):
    # Zero queries and keys give equal scores: each row's weights are 1 / (its unmasked count) on the unmasked
    # keys. With value = identity (head_dim_v = seq_len_kv) the output is that weight matrix itself.
    _, run = _one_op(lambda q, k, v: op.nn.attention(q, k, v, causal_mask=mask),
                     T((1, seq, 1, 3), "float32"), T((1, seq_kv, 1, 3), "float32"), T((1, seq_kv, 1, seq_kv), "float32"))
    keep = np.array(TVM_MASKS[seq, seq_kv, mask], dtype=np.float32)
    want = keep / keep.sum(axis=1, keepdims=True)
    value = np.eye(seq_kv, dtype=np.float32).reshape(1, seq_kv, 1, seq_kv)
    for got in run(np.zeros((1, seq, 1, 3), np.float32), np.zeros((1, seq_kv, 1, 3), np.float32), value):
        np.testing.assert_allclose(got[0, :, 0, :], want, rtol=1e-6)


def test_attention_scale_and_bias_against_numpy():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 2, 4), (2, 5, 2, 4), (2, 5, 2, 6)))
    bias = rng.standard_normal((1, 2, 1, 5)).astype(np.float32)
    _, run = _one_op(lambda *a: op.nn.attention(*a, scale=0.3), *(T(x.shape, "float32") for x in (q, k, v, bias)))
    s = np.einsum("bsnh,btnh->bnst", q, k) * 0.3 + bias
    p = np.exp(s - s.max(-1, keepdims=True))
    want = np.einsum("bnst,btnh->bsnh", p / p.sum(-1, keepdims=True), v)
    for got in run(q, k, v, bias):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_round_ties_go_to_even_and_sign_keeps_zero_and_nan():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.49, -3.51], np.float32)
    _, run = _one_op(op.round, T((8,), "float32"))
    for got in run(x):
        np.testing.assert_array_equal(got, [-2, -2, -0.0, 0, 2, 2, 3, -4])
    s = np.array([-2.0, -0.0, 0.0, 3.0, 1e-30, np.nan], np.float32)
    _, run = _one_op(op.sign, T((6,), "float32"))
    for got in run(s):
        np.testing.assert_array_equal(got, [-1, 0, 0, 1, 1, np.nan])


def test_embedding_gradient_scatter_adds_repeated_tokens():
    # take(weight, ids, axis=0) as nn.Embedding; the weight's gradient adds each output row's adjoint into the row
    # of its token, so a token used three times gets three rows' worth.
    weight = Var("weight", T((5, 3), "float64"))
    ids = Var("ids", T((2, 3), "int64"))
    bb = BlockBuilder()
    with bb.function("main", [weight, ids]):
        with bb.dataflow():
            emb = bb.emit(op.take(weight, ids, axis=0))
            loss = bb.emit_output(op.sum(emb * emb))
        bb.emit_func_output(loss)
    mod = Gradient("main")(bb.get())
    w = np.arange(15, dtype=np.float64).reshape(5, 3)
    tokens = np.array([[1, 4, 1], [0, 1, -1]])
    want = np.zeros_like(w)
    for t in tokens.reshape(-1):
        want[t] += 2 * w[t]  # d/dw sum(w[t]^2) per use
    _, (grads,) = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main_adjoint"](w, tokens)
    np.testing.assert_allclose(grads, want)
    assert want[1].tolist() == (6 * w[1]).tolist() and not want[2].any()


@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ii->i", [(4, 4)]), ("ii", [(3, 3)]), ("ij->", [(2, 5)]),
    ("i,j->ij", [(3,), (4,)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("...ij,...jk", [(3, 1, 2, 4), (6, 4, 2)]),
    ("ijk,jil->kl", [(3, 4, 5), (4, 3, 2)])])
def test_einsum_against_numpy(subscripts, shapes):
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    _, run = _one_op(lambda *xs: op.einsum(list(xs), subscripts), *(T(s, "float32") for s in shapes))
    for got in run(*arrays):
        np.testing.assert_allclose(got, np.einsum(subscripts, *arrays), rtol=1e-5, atol=1e-5)


def test_attention_trains_through_its_decomposition():
    # The Gradient pass on a module using attention, then DecomposeOpsForTraining; the compiled gradient against
    # central differences of the interpreted forward function.
    from relax_mlir.testing import finite_difference_gradients

    sinfos = [T((1, 3, 2, 4), "float64"), T((1, 3, 2, 4), "float64"), T((1, 3, 2, 4), "float64")]
    params = [Var(n, s) for n, s in zip("qkv", sinfos)]
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit(op.nn.attention(*params, causal_mask="TopLeft"))
            loss = bb.emit_output(op.sum(out * out))
        bb.emit_func_output(loss)
    forward = bb.get()
    mod = relax_mlir.transform.DecomposeOpsForTraining()(Gradient("main")(forward))
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal(s.shape) for s in sinfos]
    _, grads = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main_adjoint"](*arrays)
    want = finite_difference_gradients(forward, "main", arrays, [0, 1, 2])
    for g, w in zip(grads, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)


def test_one_hot_takes_tvms_prim_values():
    from relax_mlir.ir.expr import PrimValue

    ids = Var("ids", T((3,), "int64"))
    call = op.one_hot(ids, PrimValue(5, "int32"), PrimValue(-1, "int32"), 4, 0)
    assert call.attrs == {"on_value": 5, "off_value": -1, "depth": 4, "axis": 0, "dtype": "int32"}
    assert call.struct_info == T((4, 3), "int32")
    _, run = _one_op(lambda i: op.one_hot(i, PrimValue(5, "int32"), PrimValue(-1, "int32"), 4, 0), T((3,), "int64"))
    for got in run(np.array([2, 0, 3])):
        np.testing.assert_array_equal(got, np.where(np.arange(4)[:, None] == [2, 0, 3], 5, -1))


@pytest.mark.parametrize("descending", [False, True])
def test_argsort_is_stable_and_nan_is_the_largest(descending):
    """NaN last ascending, first descending: PyTorch's order (``torch.sort(..., stable=True)``; by hand below)."""
    x = np.array([[3.0, np.nan, 1.0, 3.0, -2.0, np.nan, 1.0, np.inf]], np.float32)
    _, run = _one_op(lambda a: op.argsort(a, descending=descending, dtype="int64"), T((1, 8), "float32"))
    want = [[1, 5, 7, 0, 3, 2, 6, 4]] if descending else [[4, 2, 6, 0, 3, 7, 1, 5]]
    for got in run(x):
        np.testing.assert_array_equal(got, want)


def test_topk_and_a_descending_sort_take_nan_first():
    x = np.array([[1.0, np.nan, 3.0, 2.0], [np.nan, 0.0, np.nan, 5.0]], np.float32)
    _, run = _one_op(lambda a: op.sort(a, axis=1, descending=True), T((2, 4), "float32"))
    for got in run(x):
        np.testing.assert_array_equal(got, [[np.nan, 3, 2, 1], [np.nan, np.nan, 5, 0]])
    _, run = _one_op(lambda a: op.topk(a, k=2, axis=1), T((2, 4), "float32"))
    for values, indices in run(x):
        np.testing.assert_array_equal(values, [[np.nan, 3], [np.nan, np.nan]])
        np.testing.assert_array_equal(indices, [[1, 2], [0, 2]])


def test_topk_both_outputs_and_its_gradient_scatter_back():
    x = np.array([[0.5, 2.0, -1.0, 2.0, 3.0]], np.float64)
    _, run = _one_op(lambda a: op.topk(a, k=3), T((1, 5), "float64"))
    for values, indices in run(x):
        np.testing.assert_array_equal(values, [[3.0, 2.0, 2.0]])
        np.testing.assert_array_equal(indices, [[4, 1, 3]])
    data = Var("x", T((1, 5), "float64"))
    bb = BlockBuilder()
    with bb.function("main", [data]):
        with bb.dataflow():
            top = bb.emit(op.topk(data, k=3, ret_type="values"))
            loss = bb.emit_output(op.sum(top * relax_mlir.ir.expr.const(np.array([1.0, 10.0, 100.0]), "float64")))
        bb.emit_func_output(loss)
    _, (grad,) = relax_mlir.VirtualMachine(relax_mlir.compile(Gradient("main")(bb.get())))["main_adjoint"](x)
    np.testing.assert_array_equal(grad, [[0, 10, 0, 100, 1]])


@pytest.mark.parametrize("fill", [np.array(2.5, np.float32), 2.5, np.array(-2.75)])
def test_full_like_takes_the_dtype_of_x_not_of_the_fill_value(fill):
    # TVM's full_like and torch.full_like: x's dtype; for a fill given as R.const(2.5, "float32") (the text format
    # passes it as a 0-d array, R.const's data) too, as for a bare 2.5. The fraction is truncated toward zero.
    torch = pytest.importorskip("torch")
    mod, run = _one_op(lambda x: op.full_like(x, fill), T((3,), "int8"))
    assert mod["main"].ret_struct_info == T((3,), "int8")
    want = torch.full_like(torch.zeros(3, dtype=torch.int8), float(fill)).numpy()
    for got in run(np.zeros(3, np.int8)):
        assert got.dtype == np.int8
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("like", [False, True])
@pytest.mark.parametrize("fill, dtype", [(np.int64(300), "int8"), (np.float32(1e10), "int32"), (-1, "uint8"),
                                         (np.float32("nan"), "int32"), (float("inf"), "int64"), (1e5, "float16")])
def test_full_refuses_a_fill_value_its_dtype_cannot_hold(fill, dtype, like):
    # PyTorch refuses these too (NumPy the -1 as uint8, which PyTorch wraps); interpreted, NumPy wrapped or
    # saturated them, and the compiled code gave other values (300 as int8 was 44) or crashed on NaN.
    torch = pytest.importorskip("torch")
    if dtype == "uint8":
        with pytest.raises(OverflowError, match="out of bounds for uint8"):
            np.full((2,), fill, dtype)
    else:
        with pytest.raises(RuntimeError, match="value cannot be converted to type .* without overflow"):
            torch.full((2,), fill.item() if isinstance(fill, np.generic) else fill, dtype=getattr(torch, dtype))
    with pytest.raises(ValueError, match=rf"^relax\.full(_like)?: fill_value .* (is not representable in|overflows) "
                                         rf"{dtype}"):
        op.full_like(Var("x", T((2,), dtype)), fill) if like else op.full((2,), fill, dtype)
