"""DecomposeOpsForTraining / DecomposeOpsForInference: every composite, in both modes, interpreted after
decomposition equals its NumPy reference in that mode; batch norm's training statistics also equal an independent
NumPy computation written here; dropout's masks are checked statistically and bit for bit; the Gradient of a
small CNN after DecomposeOpsForTraining agrees with finite differences.

Tolerances: float64 decompositions agree with the references to rounding (rtol 1e-12); float32 to rtol/atol
1e-5 (the references compute in float64); float16 to 2e-3 (a few ulps of a half; the decomposition normalises in
float32). Dropout masks are compared exactly. Gradients: rtol 1e-5 / atol 1e-7 as in test_gradient_models.py
(central differences with eps 1e-6 in float64 are accurate to ~1e-9; relu and max_pool are almost everywhere
smooth and random inputs keep away from their kinks).
"""

from __future__ import annotations

import numpy as np
import pytest

from relax_mlir import interpret, op, transform
from relax_mlir.ir import BlockBuilder, TensorStructInfo, Var
from relax_mlir.ir.dtype import to_numpy
from relax_mlir.ir.expr import Call
from relax_mlir.ir.visitor import post_order_visit
from relax_mlir.op import Op, Sample
from relax_mlir.script import from_source
from relax_mlir.testing import finite_difference_gradients, roundtrip

_T = TensorStructInfo
TOL = {"float64": dict(rtol=1e-12, atol=1e-12), "float32": dict(rtol=1e-5, atol=1e-5),
       "float16": dict(rtol=2e-3, atol=2e-3)}


def single_op_module(call_fn, sinfos, names):
    """``main(params...)`` returning ``call_fn(*params)``."""
    params = [Var(n, s) for n, s in zip(names, sinfos)]
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(call_fn(*params))
        bb.emit_func_output(out)
    return bb.get()


def op_names(mod, func="main") -> set[str]:
    found: set[str] = set()
    post_order_visit(mod[func], lambda e: found.add(e.op.name) if isinstance(e, Call) and isinstance(e.op, Op)
                     else None)
    return found


def param_names(mod, func="main") -> list[str]:
    return [p.name_hint for p in mod[func].params]


def _close(got, want, dtype):
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), **TOL[dtype])


# -- batch_norm ---------------------------------------------------------------------------------------------------

BN_CASES = [((4, 3, 5, 5), 1, {}, "float32"),
            ((6, 4), 1, {"momentum": 0.3, "epsilon": 1e-3}, "float64"),
            ((2, 5, 3), -1, {"center": False, "scale": False}, "float32"),
            ((3, 2, 4), 0, {"center": False}, "float64"),
            ((8, 3), 1, {}, "float16")]


def _bn_module(shape, axis, attrs, dtype, training):
    c = shape[axis]
    sinfos = [_T(shape, dtype)] + [_T((c,), dtype)] * 4
    return single_op_module(lambda *a: op.nn.batch_norm(*a, axis=axis, training=training, **attrs), sinfos,
                            ["x", "gamma", "beta", "moving_mean", "moving_var"])


def _bn_inputs(rng, shape, axis, dtype):
    c, dt = shape[axis], to_numpy(dtype)
    x = rng.normal(1.0, 2.0, size=shape).astype(dt)
    gamma, beta, mean = (rng.normal(size=c).astype(dt) for _ in range(3))
    return [x, gamma, beta, mean, rng.uniform(0.5, 2.0, size=c).astype(dt)]


def numpy_batch_norm_training(x, gamma, beta, moving_mean, moving_var, axis, eps, momentum, center, scale):
    """Written independently of the op's reference: move ``axis`` last and flatten the rest."""
    xm = np.moveaxis(x.astype(np.float64), axis, -1)
    flat = xm.reshape(-1, xm.shape[-1])
    mean = flat.sum(axis=0) / flat.shape[0]
    var = ((flat - mean) ** 2).sum(axis=0) / flat.shape[0]  # biased
    y = (xm - mean) / np.sqrt(var + eps)
    y = y * (gamma if scale else 1.0) + (beta if center else 0.0)
    return (np.moveaxis(y, -1, axis), (1 - momentum) * moving_mean + momentum * mean,
            (1 - momentum) * moving_var + momentum * var)


@pytest.mark.parametrize("shape,axis,attrs,dtype", BN_CASES)
def test_batch_norm_training_decomposition(shape, axis, attrs, dtype):
    mod = _bn_module(shape, axis, attrs, dtype, training=False)  # MutateOpsForTraining switches it
    after = roundtrip(transform.DecomposeOpsForTraining()(mod))
    assert "relax.nn.batch_norm" not in op_names(after)
    assert {"relax.mean", "relax.variance"} <= op_names(after)
    args = _bn_inputs(np.random.default_rng(0), shape, axis, dtype)
    got = interpret(after, "main", *args)
    full = op.nn.batch_norm.complete_attrs(dict(attrs, axis=axis, training=True))
    _close(got, op.nn.batch_norm.reference(*args, **full), dtype)
    indep = numpy_batch_norm_training(*[a.astype(np.float64) for a in args], axis=axis, eps=full["epsilon"],
                                      momentum=full["momentum"], center=full["center"], scale=full["scale"])
    _close(got, tuple(a.astype(to_numpy(dtype)) for a in indep), dtype)


@pytest.mark.parametrize("shape,axis,attrs,dtype", BN_CASES)
@pytest.mark.parametrize("training_attr", [False, True])
def test_batch_norm_inference_decomposition(shape, axis, attrs, dtype, training_attr):
    # Inference decomposes with the moving statistics even when the call says training=True (as TVM's).
    mod = _bn_module(shape, axis, attrs, dtype, training=training_attr)
    after = roundtrip(transform.DecomposeOpsForInference()(mod))
    assert not op_names(after) & {"relax.nn.batch_norm", "relax.mean", "relax.variance"}
    args = _bn_inputs(np.random.default_rng(1), shape, axis, dtype)
    out, new_mean, new_var = interpret(after, "main", *args)
    full = op.nn.batch_norm.complete_attrs(dict(attrs, axis=axis, training=False))
    _close(out, op.nn.batch_norm.reference(*args, **full)[0], dtype)
    np.testing.assert_array_equal(new_mean, args[3])  # the moving statistics, unchanged
    np.testing.assert_array_equal(new_var, args[4])


def test_batch_norm_with_a_symbolic_batch():
    sinfos = [_T(("n", 3, 4, 4), "float32")] + [_T((3,), "float32")] * 4
    mod = single_op_module(lambda *a: op.nn.batch_norm(*a), sinfos, ["x", "g", "b", "m", "v"])
    after = roundtrip(transform.DecomposeOpsForTraining()(mod))
    assert after["main"].ret_struct_info == mod["main"].ret_struct_info
    for n in (2, 5):
        args = _bn_inputs(np.random.default_rng(n), (n, 3, 4, 4), 1, "float32")
        want = op.nn.batch_norm.reference(*args, **op.nn.batch_norm.complete_attrs({"training": True}))
        _close(interpret(after, "main", *args), want, "float32")


# -- layer_norm ---------------------------------------------------------------------------------------------------

LN_CASES = [((4, 6), -1, (6,), {}, "float32"),
            ((2, 3, 4), (-2, -1), (3, 4), {}, "float64"),
            ((2, 3, 4), (2, 0), (4, 2), {}, "float64"),
            ((3, 5), 0, (3,), {"scale": False}, "float32"),
            ((4, 8), -1, (8,), {"epsilon": 1e-3, "center": False}, "float16")]


@pytest.mark.parametrize("shape,axes,pshape,attrs,dtype", LN_CASES)
@pytest.mark.parametrize("mode", [transform.DecomposeOpsForTraining, transform.DecomposeOpsForInference])
def test_layer_norm_decomposition(shape, axes, pshape, attrs, dtype, mode):
    sinfos = [_T(shape, dtype), _T(pshape, dtype), _T(pshape, dtype)]
    mod = single_op_module(lambda *a: op.nn.layer_norm(*a, axes=axes, **attrs), sinfos, ["x", "gamma", "beta"])
    after = roundtrip(mode()(mod))
    assert "relax.nn.layer_norm" not in op_names(after)
    assert param_names(after) == ["x", "gamma", "beta"]  # no key: layer norm is the same in both modes
    rng = np.random.default_rng(2)
    args = [rng.normal(size=s).astype(to_numpy(dtype)) for s in (shape, pshape, pshape)]
    want = op.nn.layer_norm.reference(*args, **op.nn.layer_norm.complete_attrs(dict(attrs, axes=axes)))
    _close(interpret(after, "main", *args), want, dtype)


# -- dropout ------------------------------------------------------------------------------------------------------

def _dropout_module(shape, rate, dtype="float32", sites=1):
    x = Var("x", _T(shape, dtype))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            outs, h = [], x
            for _ in range(sites):
                d = bb.emit(op.nn.dropout(h, rate))
                h = bb.emit(d[0])
                outs += [h, bb.emit(d[1])]
            out = bb.emit_output(tuple(outs))
        bb.emit_func_output(out)
    return bb.get()


def test_dropout_inference_is_the_identity():
    mod = _dropout_module((5, 7), 0.4)
    after = roundtrip(transform.DecomposeOpsForInference()(mod))
    assert op_names(after) == {"relax.ones_like"} and param_names(after) == ["x"]
    x = np.random.default_rng(3).normal(size=(5, 7)).astype(np.float32)
    out, mask = interpret(after, "main", x)
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(mask, np.ones_like(x))


@pytest.mark.parametrize("rate,dtype", [(0.5, "float32"), (0.1, "float64"), (0.25, "float16"), (0.0, "float32")])
def test_dropout_training_mask(rate, dtype):
    shape = (200, 500)
    after = roundtrip(transform.DecomposeOpsForTraining()(_dropout_module(shape, rate, dtype)))
    assert param_names(after) == ["x", "rng_key"]
    assert "relax.random.uniform" in op_names(after) and "relax.nn.dropout" not in op_names(after)
    x = np.random.default_rng(4).uniform(0.5, 1.5, size=shape).astype(to_numpy(dtype))
    key = np.array(12345, dtype=np.int64)
    out, mask = interpret(after, "main", x, key)
    scale = np.asarray(1 / (1 - rate), to_numpy(dtype))
    assert set(np.unique(mask).tolist()) <= {0.0, float(scale)}
    assert abs(np.mean(mask == 0) - rate) < 0.01  # binomial std over 1e5 elements: < 0.0016
    np.testing.assert_array_equal(out, x * mask)
    # The decomposition is the op's training reference, bit for bit.
    want_out, want_mask = op.nn.dropout.reference(x, key, rate=rate)
    np.testing.assert_array_equal(mask, want_mask)
    np.testing.assert_array_equal(out, want_out)


def test_dropout_keys_decide_the_mask():
    after = transform.DecomposeOpsForTraining()(_dropout_module((64, 64), 0.5, sites=2))
    x = np.ones((64, 64), np.float32)
    run = lambda k: interpret(after, "main", x, np.array(k, dtype=np.int64))  # noqa: E731
    _, m1, _, m2 = run(7)
    _, again1, _, again2 = run(7)
    np.testing.assert_array_equal(m1, again1)  # same key, same masks
    np.testing.assert_array_equal(m2, again2)
    assert not np.array_equal(m1, run(8)[1])  # another key, another mask
    assert np.mean(m1 != m2) > 0.4  # two sites, two independent masks (disagree on ~half the elements)
    assert 0.4 < np.mean(run(-2 ** 63)[1] == 0) < 0.6  # extreme keys are keys like any other


def test_dropout_positional_rate_and_the_training_form_in_text():
    mod = _dropout_module((3, 4), 0.3)
    assert mod["main"].blocks[0].bindings[0].value.attrs == {"rate": 0.3}
    text = transform.MutateOpsForTraining()(mod).script()
    assert "R.nn.dropout(x, rng_key, rate=0.3)" in text
    # TVMScript's positional rate too (the parser makes the literal a constant first).
    parsed = from_source(text.replace("R.nn.dropout(x, rng_key, rate=0.3)", "R.nn.dropout(x, 0.1)"))
    assert "R.nn.dropout(x, rate=0.1)" in parsed.script()


# -- a CNN, its gradient after decomposition ----------------------------------------------------------------------

def cnn_loss_module(batch=4, c=2, hw=6, out_c=3, classes=5, dtype="float64"):
    """conv2d -> batch_norm -> relu -> max_pool2d -> reshape -> matmul -> log_softmax -> nll_loss, returning
    ``(loss, new running mean, new running var)``."""
    feats = out_c * (hw // 2) ** 2
    x, y = Var("x", _T((batch, c, hw, hw), dtype)), Var("y", _T((batch,), "int64"))
    params = [Var("w", _T((out_c, c, 3, 3), dtype)), Var("gamma", _T((out_c,), dtype)),
              Var("beta", _T((out_c,), dtype)), Var("dense", _T((feats, classes), dtype))]
    states = [Var("mean", _T((out_c,), dtype)), Var("var", _T((out_c,), dtype))]
    bb = BlockBuilder()
    with bb.function("loss", [x, *params, *states, y]):
        with bb.dataflow():
            h = bb.emit(op.nn.conv2d(x, params[0], padding=1))
            bn = bb.emit(op.nn.batch_norm(h, params[1], params[2], *states, axis=1))
            h = bb.emit(op.nn.relu(bn[0]))
            h = bb.emit(op.nn.max_pool2d(h, pool_size=(2, 2), strides=(2, 2)))
            h = bb.emit(op.reshape(h, (batch, feats)))
            logp = bb.emit(op.nn.log_softmax(op.matmul(h, params[3])))
            loss = bb.emit(op.nn.nll_loss(logp, y))
            out = bb.emit_output((loss, bn[1], bn[2]))
        bb.emit_func_output(out)
    return bb.get(), params


def test_cnn_gradient_after_decompose_for_training_matches_finite_differences():
    mod, _ = cnn_loss_module()
    decomposed = roundtrip(transform.DecomposeOpsForTraining("loss")(mod))
    assert "relax.nn.batch_norm" not in op_names(decomposed, "loss")
    params = decomposed["loss"].params[1:5]
    after = roundtrip(transform.Gradient("loss", require_grads=params)(decomposed))
    rng = np.random.default_rng(5)
    args = ([rng.normal(size=(4, 2, 6, 6))] + [rng.normal(size=tuple(p.struct_info.shape)) for p in params]
            + [np.zeros(3), np.ones(3), rng.integers(0, 5, size=4)])
    (loss, new_mean, new_var), grads = interpret(after, "loss_adjoint", *args)
    # The decomposed forward is batch norm in training mode: the same as the composite with training=True.
    want = interpret(transform.MutateOpsForTraining()(mod), "loss", *args)
    np.testing.assert_allclose([loss, *new_mean, *new_var], [want[0], *want[1], *want[2]], rtol=1e-12)
    expected = finite_difference_gradients(decomposed, "loss", args, range(1, 5), target_index=0)
    for p, g, e in zip(params, grads, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-7, err_msg=f"gradient of {p.name_hint}")


def test_gradient_through_decomposed_dropout_matches_finite_differences():
    x, w = Var("x", _T((6, 4), "float64")), Var("w", _T((4, 3), "float64"))
    bb = BlockBuilder()
    with bb.function("loss", [x, w]):
        with bb.dataflow():
            d = bb.emit(op.nn.dropout(op.matmul(x, w), rate=0.4))
            out = bb.emit_output(op.sum(op.multiply(d[0], d[0])))
        bb.emit_func_output(out)
    decomposed = transform.DecomposeOpsForTraining()(bb.get())
    after = roundtrip(transform.Gradient("loss", require_grads=[decomposed["loss"].params[1]])(decomposed))
    rng = np.random.default_rng(6)
    args = [rng.normal(size=(6, 4)), rng.normal(size=(4, 3)), np.array(99, dtype=np.int64)]
    _, (grad,) = interpret(after, "loss_adjoint", *args)
    np.testing.assert_allclose(grad, finite_difference_gradients(decomposed, "loss", args, [1])[0],
                               rtol=1e-5, atol=1e-7)


# -- the pass itself ----------------------------------------------------------------------------------------------

def test_func_name_limits_the_pass_and_unknown_names_are_refused():
    mod = _bn_module((4, 3), 1, {}, "float32", training=False)
    mod["other"] = mod["main"]
    after = transform.DecomposeOpsForTraining("main")(mod)
    assert "relax.nn.batch_norm" not in op_names(after, "main")
    assert after["other"] is mod["other"]
    with pytest.raises(ValueError, match=r"DecomposeOpsForInference: the module has no function 'nope'"):
        transform.DecomposeOpsForInference("nope")(mod)


def test_any_record_with_a_decompose_slot_is_decomposed():
    # The pass names no op: a new composite is decomposed as soon as its record has the slot, and composites
    # used by a decomposition are decomposed in turn.
    inner = Op("test.twice", ("x",), infer=lambda args, attrs: args[0], reference=lambda x: x + x,
               decompose=lambda call: call.args[0] + call.args[0], samples=[Sample([_T((2,), "float32")])])
    outer = Op("test.quad", ("x",), infer=lambda args, attrs: args[0], reference=lambda x: 4 * x,
               decompose=lambda call: inner(inner(call.args[0])))
    mod = single_op_module(lambda x: outer(x), [_T((2,), "float32")], ["x"])
    after = transform.DecomposeOps()(mod)
    assert op_names(after) == {"relax.add"}
    np.testing.assert_array_equal(interpret(after, "main", np.array([1.0, 2.0], np.float32)), [4.0, 8.0])


def test_a_wrong_or_endless_decomposition_is_reported():
    bad = Op("test.bad", ("x",), infer=lambda args, attrs: args[0], reference=None,
             decompose=lambda call: op.astype(call.args[0], "float64"))
    mod = single_op_module(lambda x: bad(x), [_T((2,), "float32")], ["x"])
    with pytest.raises(ValueError, match=r"decomposition of test.bad gives R.Tensor\(\(2,\), dtype=\"float64\"\), "
                                         r"but the call has R.Tensor\(\(2,\), dtype=\"float32\"\)"):
        transform.DecomposeOps()(mod)
    made: dict = {}  # records are frozen: the decomposition finds its own record through this
    loop = Op("test.loop", ("x",), infer=lambda args, attrs: args[0], reference=None,
              decompose=lambda call: made["loop"](call.args[0]))
    made["loop"] = loop
    with pytest.raises(ValueError, match=r"decomposing test.loop keeps producing composites"):
        transform.DecomposeOps()(single_op_module(lambda x: loop(x), [_T((2,), "float32")], ["x"]))
