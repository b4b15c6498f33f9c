"""Fixes from a random-program hunt on the passes: SetupTrainer keeps (and flattens) the functions a backbone calls,
Gradient sees a local function's captures, BindSymbolicVars binds inside local functions and host calls' declared
results, rewrite_call and the pattern passes rewrite to a fixed point, and pass options of the wrong type are
refused when the pass is made, naming the pass, the option and what it takes."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import op as O
from relax_mlir import transform as T
from relax_mlir.dpl import is_op, rewrite_call, wildcard
from relax_mlir.ir import Call, IRModule, TensorStructInfo, check_well_formed, structural_equal
from relax_mlir.script import from_source
from relax_mlir.training import SetupTrainer, Trainer
from relax_mlir.training.loss import MSELoss
from relax_mlir.training.optimizer import SGD

# -- 1. SetupTrainer: a backbone calling other functions ---------------------------------------------------------

_HEAD = '''
@I.ir_module
class Module:
    I.module_attrs({"param_num": 2, "state_num": 0})
'''
_SIG = '(x: R.Tensor((3, 4), "float32"), w: R.Tensor((4, 4), "float32"), v: R.Tensor((4, 4), "float32"))'

INLINE = _HEAD + f'''
    @R.function
    def backbone{_SIG}:
        h = R.matmul(x, w)
        r = R.nn.relu(h)
        y = R.matmul(r, v)
        return y
'''

# A private layer, called through a public block (calls two levels deep).
CALLED = _HEAD + f'''
    @R.function(private=True)
    def layer(a: R.Tensor((3, 4), "float32"), k: R.Tensor((4, 4), "float32")):
        h = R.matmul(a, k)
        return h

    @R.function
    def block{_SIG}:
        h = cls.layer(x, w)
        r = R.nn.relu(h)
        y = cls.layer(r, v)
        return y

    @R.function
    def backbone{_SIG}:
        with R.dataflow():
            y = cls.block(x, w, v)
            R.output(y)
        return y
'''

# A local function that captures the parameter w.
LOCAL = _HEAD + f'''
    @R.function
    def backbone{_SIG}:
        @R.function
        def layer(a: R.Tensor((3, 4), "float32")):
            h = R.matmul(a, w)
            r = R.nn.relu(h)
            return r
        r = layer(x)
        y = R.matmul(r, v)
        return y
'''


def _setup():
    return SetupTrainer(MSELoss(reduction="sum"), SGD(0.01),
                        [TensorStructInfo((3, 4), "float32"), TensorStructInfo((3, 4), "float32")])


def _train(src: str, target: str, steps: int = 3):
    rng = np.random.default_rng(0)
    x, t = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(3, 4)).astype(np.float32)
    params = [rng.normal(size=(4, 4)).astype(np.float32) for _ in range(2)]
    trainer = Trainer(from_source(src), None, _setup()).build(target=target)
    trainer.load_params([p.copy() for p in params])
    losses = [float(trainer.update_params(x, t).numpy()) for _ in range(steps)]
    return losses, [np.asarray(p) for p in trainer.params], (x, t, params)


def _numpy_sgd(x, t, params, steps, lr=0.01):
    """relu(x @ w) @ v against t, summed squared error, plain SGD, by hand in float64."""
    w, v = (p.astype(np.float64) for p in params)
    x, t = x.astype(np.float64), t.astype(np.float64)
    losses = []
    for _ in range(steps):
        h = x @ w
        r = np.maximum(h, 0)
        d = r @ v - t
        losses.append((d * d).sum())
        gy = 2 * d
        gv, gr = r.T @ gy, gy @ v.T
        gw = x.T @ (gr * (h > 0))
        w, v = w - lr * gw, v - lr * gv
    return losses, [w, v]


@pytest.mark.parametrize("target", ["numpy", "cpu"])
@pytest.mark.parametrize("src", [CALLED, LOCAL], ids=["called", "local"])
def test_a_backbone_calling_layers_trains_as_the_same_backbone_written_inline(src, target):
    losses, params, data = _train(src, target)
    want_losses, want_params = _train(INLINE, target)[:2]
    assert losses == want_losses  # the same function once flattened: the same float32 arithmetic
    for got, want in zip(params, want_params):
        np.testing.assert_array_equal(got, want)
    oracle_losses, oracle_params = _numpy_sgd(*data, steps=3)
    np.testing.assert_allclose(losses, oracle_losses, rtol=1e-5)
    for got, want in zip(params, oracle_params):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_the_backbone_is_kept_as_written_with_the_functions_it_calls():
    out = _setup()(from_source(CALLED))
    check_well_formed(out)
    assert {"backbone", "block", "layer", "predict", "loss", "loss_adjoint", "update_params"} <= set(out)
    for name in ("predict", "loss"):  # flattened: Gradient differentiates one function's bindings
        calls = [b.value for blk in out[name].blocks for b in blk.bindings
                 if isinstance(b.value, Call) and not hasattr(b.value.op, "compilable")]
        assert not calls, name
    x = np.ones((3, 4), np.float32)
    w = np.eye(4, dtype=np.float32)
    np.testing.assert_array_equal(rm.interpret(out, "backbone", x, w, w), rm.interpret(out, "predict", x, w, w))


def test_main_of_an_imported_module_keeps_its_callees():
    out = _setup()(from_source(CALLED.replace("def backbone", "def main")))
    assert "backbone" in out and "block" in out and "layer" in out


def test_a_called_function_named_as_one_the_training_module_adds_is_refused():
    src = CALLED.replace("cls.block", "cls.loss").replace("def block", "def loss")
    with pytest.raises(ValueError, match=r"SetupTrainer: the backbone calls 'loss', a name of the functions the "
                                         r"training module adds \(predict, loss, .*\); rename it"):
        _setup()(from_source(src))


def test_gradient_refuses_a_local_function_that_captures_a_required_parameter():
    """Before, the captured w's path was invisible: its gradient came out as zeros, silently."""
    mod = from_source('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 4), "float32"), w: R.Tensor((4, 4), "float32")):
        @R.function
        def layer(a: R.Tensor((3, 4), "float32")):
            h = R.matmul(a, w)
            return h
        y = layer(x)
        s = R.sum(y)
        return s
''')
    with pytest.raises(T.GradientError, match=r"calls of local functions \(layer\) are not differentiated; lift and "
                                              r"inline them first \(LambdaLift, then InlineFunctions\) \(used by y\)"):
        T.Gradient("main", require_grads=[mod["main"].params[1]])(mod)


# -- 2. BindSymbolicVars: local functions, host calls' sinfo_args, shape and prim values -----------------------

rm.register_func("test_pass_hunt_fixes.twice", lambda x: x * 2)

LOCAL_N = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), w: R.Tensor((4, 4), "float32")):
        @R.function
        def loc(y: R.Tensor(("n", 4), "float32")):
            z = R.matmul(y, w)
            return z
        a = loc(x)
        return a
'''
HOST_N = '''
@I.ir_module
class M:
    @R.function(pure=False)
    def main(x: R.Tensor(("n", 4), "float32")):
        a = R.call_packed("test_pass_hunt_fixes.twice", x, sinfo_args=R.Tensor(("n", 4), "float32"))
        return a
'''
VALUES_N = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")):
        n = T.int64()
        s = R.shape([n, 4])
        p = R.prim_value(n)
        y = R.reshape(x, s)
        return (y, p)
'''


@pytest.mark.parametrize("src", [LOCAL_N, HOST_N, VALUES_N], ids=["local", "host", "values"])
@pytest.mark.parametrize("func_name", [None, "main"])
def test_bind_symbolic_vars_binds_everywhere(src, func_name):
    mod = from_source(src)
    out = T.BindSymbolicVars({"n": 3}, func_name)(mod)
    check_well_formed(out)
    assert '"n"' not in out.script() and "n = T.int64" not in out.script()
    assert [str(p.struct_info) for p in out["main"].params][0] == "Tensor((3, 4), float32)"
    args = [np.arange(12, dtype=np.float32).reshape(3, 4)] + [np.eye(4, dtype=np.float32)] * (src is LOCAL_N)
    want, got = rm.interpret(mod, "main", *args), rm.interpret(out, "main", *args)
    for g, w in zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_a_size_only_a_local_function_uses_can_be_bound():
    mod = from_source('''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((3, 4), "float32")):
        @R.function
        def loc(y: R.Tensor(("k", 4), "float32")):
            z = R.exp(y)
            return z
        a = loc(x)
        return a
''')
    out = T.BindSymbolicVars({"k": 3})(mod)
    check_well_formed(out)
    assert '"k"' not in out.script()


# -- 3. rewrite_call and the pattern passes: to a fixed point ----------------------------------------------------

SUM3 = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((3, 4), "float32"), a: R.Tensor((4, 4), "float32"), b: R.Tensor((4, 4), "float32"),
             c: R.Tensor((4, 4), "float32")):
        with R.dataflow():
            s = R.add(a, b)
            s2 = R.add(s, c)
            y = R.matmul(x, s2)
            R.output(y)
        return y
'''
TAKE2 = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((3, 4), "float32"), w: R.Tensor((4, 4), "float32")):
        with R.dataflow():
            t1 = R.take(w, R.const([3, 3, 0, 1], "int64"), axis=1)
            t2 = R.take(t1, R.const([0, 2, 1, 3], "int64"), axis=1)
            y = R.matmul(x, t2)
            R.output(y)
        return y
'''


def _matmul_operands(mod, bound_to: str) -> list:
    """The ops bound to the second operands of main's matmuls (what a matmul still multiplies by)."""
    bindings = {b.var: b.value for blk in mod["main"].blocks for b in blk.bindings}
    out = []
    for value in bindings.values():
        if isinstance(value, Call) and getattr(value.op, "name", "") == "relax.matmul":
            operand = bindings.get(value.args[1])
            out.append(getattr(getattr(operand, "op", None), "name", None))
    return [name for name in out if name == bound_to]


@pytest.mark.parametrize("pass_, src, leftover, args", [
    (T.ExpandMatmulOfSum, SUM3, "relax.add", 4),
    (T.ReorderTakeAfterMatmul, TAKE2, "relax.take", 2),
])
def test_one_run_of_a_pattern_pass_is_the_whole_rewrite(pass_, src, leftover, args):
    mod = from_source(src)
    once = pass_()(mod)
    assert _matmul_operands(once, leftover) == []  # before: one matmul still multiplied by an add / a take
    assert structural_equal(pass_()(once), once)
    check_well_formed(once)
    rng = np.random.default_rng(1)
    inputs = [rng.normal(size=(3, 4) if i == 0 else (4, 4)).astype(np.float32) for i in range(args)]
    if src is SUM3:
        want = inputs[0].astype(np.float64) @ (inputs[1] + inputs[2] + inputs[3]).astype(np.float64)
    else:
        want = inputs[0].astype(np.float64) @ inputs[1].astype(np.float64)[:, [3, 3, 0, 1]][:, [0, 2, 1, 3]]
    np.testing.assert_allclose(np.asarray(rm.interpret(once, "main", *inputs)), want, rtol=1e-5, atol=1e-5)


def test_rewrite_call_rewrites_what_its_own_results_make_match():
    """The user's own recursive rule, x @ (a + b) -> x @ a + x @ b, splits a sum of three in one call, as TVM's."""
    x, a, b = wildcard(), wildcard(), wildcard()
    total = is_op("relax.add")(a, b)
    func = from_source(SUM3)["main"]
    new = rewrite_call(is_op("relax.matmul")(x, total),
                       lambda e, m: O.add(O.matmul(m[x], m[a]), O.matmul(m[x], m[b])), func)
    mod = IRModule({"main": new})
    check_well_formed(mod)
    assert _matmul_operands(mod, "relax.add") == []
    n_matmuls = sum(isinstance(b.value, Call) and b.value.op.name == "relax.matmul"
                    for blk in new.blocks for b in blk.bindings)
    assert n_matmuls == 3


def test_a_rewrite_that_never_settles_is_an_error_not_a_hang():
    x = wildcard()
    flip = (is_op("relax.exp") | is_op("relax.sin"))(x)
    func = from_source('''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((3,), "float32")):
        y = R.exp(x)
        return y
''')["main"]
    with pytest.raises(RuntimeError, match=r"rewrite_call: the rewrite does not converge: the function still "
                                           r"changed after 1000 rounds"):
        rewrite_call(flip, lambda e, m: O.sin(m[x]) if e.op.name == "relax.exp" else O.exp(m[x]), func)
    grow = is_op("relax.exp")(x)
    with pytest.raises(RuntimeError, match=r"rewrite_call: the rewrite does not converge: the function grew "
                                           r"past 10100 bindings in \d+ rounds"):
        rewrite_call(grow, lambda e, m: O.exp(O.exp(m[x])), func)


# -- 4. pass options of the wrong type -----------------------------------------------------------------------------

def _lowering(lc, call):
    return None


@pytest.mark.parametrize("make, error, message", [
    (lambda: T.FuseOps(fuse_opt_level="x"), TypeError, r"^FuseOps: option fuse_opt_level='x' is not an int$"),
    (lambda: T.LegalizeOps([1]), TypeError,
     r"^LegalizeOps: option customize_legalize_map=\[1\] is not a dict or None \(op name -> lowering function\)$"),
    (lambda: T.LegalizeOps({"relax.nope": _lowering}), ValueError,
     r"^LegalizeOps: option customize_legalize_map has a lowering for 'relax.nope', but no op of that name is "
     r"registered"),
    (lambda: T.LegalizeOps({3: _lowering}), TypeError,
     r"^LegalizeOps: the keys of option customize_legalize_map are op names .* or Ops, got 3 \(int\)$"),
    (lambda: T.LegalizeOps(enable_warning="yes"), TypeError,
     r"^LegalizeOps: option enable_warning='yes' is not a bool$"),
    (lambda: T.Gradient("main", require_grads=3), TypeError,
     r"^Gradient: option require_grads=3 is not a Var or a str or a list of Var or a str or None$"),
    (lambda: T.Gradient("main", target_index="0"), TypeError, r"^Gradient: option target_index='0' is not an int$"),
    (lambda: T.CombineParallelMatmul(check=3), TypeError,
     r"^CombineParallelMatmul: option check=3 is not a Python function .* or None$"),
    (lambda: T.BundleModelParams(param_tuple_name=3), TypeError,
     r"^BundleModelParams: option param_tuple_name=3 is not a str or None$"),
    (lambda: T.BindParams("main", [1, 2]), TypeError, r"^BindParams: option params=\[1, 2\] is not a dict$"),
    (lambda: T.BindParams(3, {}), TypeError, r"^BindParams: option func_name=3 is not a str$"),
    (lambda: T.ToMixedPrecision(fp16_input_names=3), TypeError,
     r"^ToMixedPrecision\(fp16_input_names\): expected a list of input names or None, got 3 \(int\)$"),
    (lambda: T.ToMixedPrecision(fp16_input_names="w1"), TypeError,
     r"^ToMixedPrecision\(fp16_input_names\): expected a list of input names, got the string 'w1' "
     r"\(write \['w1'\]\)$"),
])
def test_pass_options_of_the_wrong_type_are_refused_when_the_pass_is_made(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_options_of_the_right_type_in_python_forms_are_taken():
    """NumPy integers, tuples and any mapping are what the annotations say, as the Python API is used."""
    from types import MappingProxyType

    T.FuseOps(fuse_opt_level=np.int64(2))
    T.Gradient("main", target_index=np.int32(0), require_grads=("w",))
    T.BindParams("main", MappingProxyType({"w": np.ones(3, np.float32)}))
    T.LegalizeOps({"relax.add": _lowering}, enable_warning=True)
    T.ToMixedPrecision(fp16_input_names=["x"])
    T.CombineParallelMatmul(check=lambda v, ws: True)


def test_the_command_line_words_option_errors_as_the_constructors():
    with pytest.raises(T.PipelineError, match=r"^--passes: FuseOps: option fuse_opt_level='x' is not an int; its "
                                              r"options: fuse_opt_level$"):
        T.parse_pipeline("FuseOps(fuse_opt_level=x)")
