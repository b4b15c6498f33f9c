"""Gradient of whole functions agrees with central finite differences (float64, NumPy interpreter).

Tolerance rtol 1e-5 / atol 1e-7: central differences with eps 1e-6 in float64 are accurate to ~1e-9 on these
smooth (almost everywhere) functions; random inputs keep ReLU away from its kink.
"""

from __future__ import annotations

import numpy as np
import pytest

from relax_mlir import interpret, op, transform
from relax_mlir.analysis import peak_live_bytes
from relax_mlir.ir import BlockBuilder, TensorStructInfo, Var
from relax_mlir.testing import finite_difference_gradients, roundtrip
from relax_mlir.models import deep_mlp

F64 = "float64"


def _assert_grads(mod, name, args, indices, got, target_index=0):
    expected = finite_difference_gradients(mod, name, args, indices, target_index)
    for i, (e, g) in enumerate(zip(expected, got)):
        for ee, gg in zip(e if isinstance(e, tuple) else (e,), g if isinstance(g, tuple) else (g,)):
            np.testing.assert_allclose(gg, ee, rtol=1e-5, atol=1e-7, err_msg=f"gradient {i}")


def mlp_loss_module(batch=4, sizes=(5, 7, 3)):
    x = Var("x", TensorStructInfo((batch, sizes[0]), F64))
    y = Var("y", TensorStructInfo((batch,), "int64"))
    params = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        params += [Var(f"w{i}", TensorStructInfo((a, b), F64)), Var(f"b{i}", TensorStructInfo((b,), F64))]
    bb = BlockBuilder()
    with bb.function("loss", [x, *params, y]):
        with bb.dataflow():
            h = x
            for i in range(len(sizes) - 1):
                h = bb.emit(op.add(op.matmul(h, params[2 * i]), params[2 * i + 1]))
                if i < len(sizes) - 2:
                    h = bb.emit(op.nn.relu(h))
            logp = bb.emit(op.nn.log_softmax(h))
            loss = bb.emit_output(op.nn.nll_loss(logp, y, reduction="sum"))
        bb.emit_func_output(loss)
    return bb.get(), params


def test_mlp_with_softmax_cross_entropy():
    mod, params = mlp_loss_module()
    after = roundtrip(transform.Gradient("loss", require_grads=params)(mod))
    rng = np.random.default_rng(0)
    args = [rng.normal(size=(4, 5))] + [rng.normal(size=tuple(p.struct_info.shape)) for p in params] + \
        [rng.integers(0, 3, size=4)]
    loss, grads = interpret(after, "loss_adjoint", *args)
    assert np.isclose(loss, interpret(mod, "loss", *args))
    _assert_grads(mod, "loss", args, range(1, 1 + len(params)), grads)


def test_several_blocks_and_a_tuple_parameter():
    text = '''
@R.function
def f(x: R.Tensor((3,), "float64"), wb: R.Tuple(R.Tensor((3,), "float64"), R.Tensor((), "float64"))):
    w = wb[0]
    s = R.multiply(x, w)
    with R.dataflow():
        e = R.exp(s)
        t = R.add(R.sum(e), wb[1])
        R.output(t)
    u = R.multiply(t, t)
    return u
'''
    from relax_mlir.ir import IRModule
    from relax_mlir.script import from_source

    mod = IRModule({"f": from_source(text)})
    after = roundtrip(transform.Gradient("f")(mod))
    rng = np.random.default_rng(1)
    args = [rng.normal(size=3), (rng.normal(size=3), np.array(0.5))]
    value, grads = interpret(after, "f_adjoint", *args)
    assert isinstance(grads[1], tuple) and len(grads[1]) == 2
    _assert_grads(mod, "f", args, [0, 1], grads)


def test_gradient_of_an_intermediate_variable():
    x = Var("x", TensorStructInfo((3,), F64))
    bb = BlockBuilder()
    with bb.function("f", [x]):
        with bb.dataflow():
            h = bb.emit(op.exp(x), "h")
            out = bb.emit_output(op.sum(op.multiply(h, h)))
        bb.emit_func_output(out)
    mod = bb.get()
    after = roundtrip(transform.Gradient("f", require_grads=[x, h])(mod))
    xv = np.array([0.1, -0.3, 0.7])
    _, (gx, gh) = interpret(after, "f_adjoint", xv)
    np.testing.assert_allclose(gh, 2 * np.exp(xv), rtol=1e-12)  # d/dh sum(h*h) = 2h
    np.testing.assert_allclose(gx, 2 * np.exp(2 * xv), rtol=1e-12)


def test_parameter_without_a_path_gets_zeros_and_dead_forward_code_is_dropped():
    x, z = Var("x", TensorStructInfo((2,), F64)), Var("z", TensorStructInfo((2,), F64))
    bb = BlockBuilder()
    with bb.function("f", [x, z]):
        with bb.dataflow():
            bb.emit(op.exp(z), "unused")
            out = bb.emit_output(op.sum(op.square(x)))
        bb.emit_func_output(out)
    after = roundtrip(transform.Gradient("f")(bb.get()))
    assert "unused" not in after["f_adjoint"].script()
    _, (gx, gz) = interpret(after, "f_adjoint", np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    np.testing.assert_array_equal(gz, [0.0, 0.0])
    np.testing.assert_allclose(gx, [2.0, 4.0])


def test_checkpointing_recomputes_and_keeps_gradients_exact():
    plain = deep_mlp(6, width=4, batch=3, segments=0)
    ckpt = deep_mlp(6, width=4, batch=3, segments=3)
    ws = plain["f"].params[1:]
    g_plain = roundtrip(transform.Gradient("f", require_grads=list(ws))(plain))
    g_ckpt = roundtrip(transform.Gradient("f", require_grads=list(ckpt["f"].params[1:]))(ckpt))
    assert "_recompute" in g_ckpt["f_adjoint"].script() and "_recompute" not in g_plain["f_adjoint"].script()
    rng = np.random.default_rng(2)
    args = [rng.normal(size=(3, 4)).astype(np.float32)] + \
        [rng.normal(size=(4, 4)).astype(np.float32) for _ in ws]
    a = interpret(g_plain, "f_adjoint", *args)
    b = interpret(g_ckpt, "f_adjoint", *args)
    np.testing.assert_array_equal(a[0], b[0])
    for x, y in zip(a[1], b[1]):
        np.testing.assert_array_equal(x, y)  # the same ops in the same order: bit-identical


@pytest.mark.parametrize("n", [16, 64])
def test_checkpointing_lowers_peak_memory_sublinearly(n):
    plain = peak_live_bytes(transform.Gradient("f")(deep_mlp(n, segments=0))["f_adjoint"]).peak_bytes
    ckpt = peak_live_bytes(transform.Gradient("f")(deep_mlp(n))["f_adjoint"]).peak_bytes
    activation = 16 * 32 * 4
    # Without checkpointing every layer's activation (and its relu mask input) stays alive: O(N).
    assert plain >= n * activation
    # With sqrt(N) segments: O(sqrt(N)) segment outputs + one segment's O(sqrt(N)) recomputed activations.
    assert ckpt <= 6 * int(np.ceil(np.sqrt(n))) * activation + 4 * activation, (plain, ckpt)


def test_linear_layer_with_a_transposed_weight():
    x, w = Var("x", TensorStructInfo((2, 3), F64)), Var("w", TensorStructInfo((4, 3), F64))
    bb = BlockBuilder()
    with bb.function("f", [x, w]):
        with bb.dataflow():
            wt = bb.emit(op.permute_dims(w))
            out = bb.emit_output(op.sum(op.tanh(op.matmul(x, wt))))
        bb.emit_func_output(out)
    mod = bb.get()
    after = roundtrip(transform.Gradient("f")(mod))
    rng = np.random.default_rng(4)
    args = [rng.normal(size=(2, 3)), rng.normal(size=(4, 3))]
    _, grads = interpret(after, "f_adjoint", *args)
    _assert_grads(mod, "f", args, [0, 1], grads)


def test_a_weight_shared_by_hundreds_of_unrolled_steps():
    # h_i = tanh(h_{i-1} * w) for 400 steps: w's adjoint sums 400 contributions, bound every MAX_NESTED_TERMS (one
    # nested sum was 400 calls deep and Gradient died of RecursionError).
    steps = 400
    x, w = Var("x", TensorStructInfo((4,), "float64")), Var("w", TensorStructInfo((4,), "float64"))
    bb = BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            h = x
            for _ in range(steps):
                h = bb.emit(op.tanh(op.multiply(h, w)))
            loss = bb.emit_output(op.sum(h))
        bb.emit_func_output(loss)
    mod = transform.Gradient("main")(bb.get())
    rng = np.random.default_rng(3)
    args = [rng.uniform(0.5, 1.0, 4), rng.uniform(0.9, 1.1, 4)]
    _, (_, dw) = interpret(mod, "main_adjoint", *args)
    np.testing.assert_allclose(dw, finite_difference_gradients(mod, "main", args, [1])[0], rtol=1e-5, atol=1e-8)
    roundtrip(mod)
