"""LiftTransformParams(shared_transform=...): one ``transform_params`` for several functions (TVM's cases rebuilt;
its ``transform_params`` takes its weights bundled in a tuple, this one as separate parameters, as ``<name>_
transform_params`` does). For every target, f(inputs, weights) == new f(inputs, *transform_params(weights)),
interpreted and compiled."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import transform
from relax_mlir.ir import assert_structural_equal
from relax_mlir.script import from_source
from relax_mlir.testing import roundtrip

T2 = 'R.Tensor((4, 4), "float32")'


def _func(name, body, weights="w1, w2", ret=T2):
    """A function of an input x and the weights ``w1, w2`` (all 4x4 float32 by default)."""
    params = ", ".join([f"x: {T2}"] + [f"{w.strip()}: {T2}" for w in weights.split(",") if w.strip()])
    lines = "\n".join("            " + line for line in body.strip().splitlines())
    return f'''
    @R.function
    def {name}({params}) -> {ret}:
        R.func_attr({{"num_input": 1}})
        with R.dataflow():
{lines}
        return output
'''


def _module(*funcs):
    return from_source("@I.ir_module\nclass Module:" + "".join(funcs))


def _lifted(name, body, params):
    """A function after lifting: x, then ``params`` (the transform function's results), the kept ``body``."""
    return _func(name, body, weights=params)


def _transform(body, results, weights="w1, w2"):
    params = ", ".join(f"{w.strip()}: {T2}" for w in weights.split(","))
    lines = "\n".join("        " + line for line in body.strip().splitlines())
    return f'''
    @R.function
    def transform_params({params}):
{lines}
        return ({results},)
'''


FUSED = '''
    @R.function(private=True)
    def fused(x: R.Tensor((4, 4), "float32"), weight: R.Tensor((4, 4), "float32")) -> R.Tensor((4, 4), "float32"):
        with R.dataflow():
            weight_t = R.permute_dims(weight)
            y = R.matmul(x, weight_t)
            R.output(y)
        return y
'''

BOTH = '''
w1_t = R.permute_dims(w1)
y1 = R.matmul(x, w1_t)
w2_t = R.permute_dims(w2)
y2 = R.matmul(x, w2_t)
output = R.{op}(y1, y2)
R.output(output)
'''
SWAPPED = '''
w2_t = R.permute_dims(w2)
w1_t = R.permute_dims(w1)
y1 = R.matmul(x, w1_t)
y2 = R.matmul(x, w2_t)
output = R.add(y1, y2)
R.output(output)
'''
FUSED_W2 = '''
w1_t = R.permute_dims(w1)
y1 = R.matmul(x, w1_t)
y2 = Module.fused(x, w2)
output = R.add(y1, y2)
R.output(output)
'''
KEPT_BOTH = '''
y1 = R.matmul(x, w1_t)
y2 = R.matmul(x, w2_t)
output = R.{op}(y1, y2)
R.output(output)
'''
KEPT_W2 = '''
y1 = R.matmul(x, w1_t)
w2_t = R.permute_dims(w2)
y2 = R.matmul(x, w2_t)
output = R.add(y1, y2)
R.output(output)
'''
KEPT_FUSED = '''
y1 = R.matmul(x, w1_t)
y2 = Module.fused(x, w2)
output = R.add(y1, y2)
R.output(output)
'''


def _check_numerics(before, after, names, n_weights=2, seed=0):
    """Each target with transform_params' results gives what it gave with the weights, interpreted and compiled."""
    rng = np.random.default_rng(seed)
    x, *weights = (rng.standard_normal((4, 4)).astype("float32") for _ in range(1 + n_weights))
    transformed = rm.interpret(after, "transform_params", *weights)
    vm = rm.VirtualMachine(rm.compile(after))
    compiled = vm["transform_params"](*weights)
    for name in names:
        want = np.asarray(rm.interpret(before, name, x, *weights))
        np.testing.assert_allclose(np.asarray(rm.interpret(after, name, x, *transformed)), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(vm[name](x, *compiled)), want, rtol=1e-5, atol=1e-5)


def test_identical_transforms_are_shared():
    before = _module(_func("func1", BOTH.format(op="add")), _func("func2", BOTH.format(op="multiply")))
    after = roundtrip(transform.LiftTransformParams(shared_transform=True)(before))
    expected = _module(
        _lifted("func1", KEPT_BOTH.format(op="add"), "w1_t, w2_t"),
        _lifted("func2", KEPT_BOTH.format(op="multiply"), "w1_t, w2_t"),
        _transform("w1_t = R.permute_dims(w1)\nw2_t = R.permute_dims(w2)", "w1_t, w2_t"))
    assert_structural_equal(after, expected)
    _check_numerics(before, after, ["func1", "func2"])
    # an empty list means the same as True (TVM's reading); a second run finds nothing more to share
    assert_structural_equal(transform.LiftTransformParams(shared_transform=[])(before), expected)
    assert transform.LiftTransformParams(shared_transform=True)(after) is after


def test_only_what_every_function_computes_is_shared():
    # func2 computes w2's transpose inside a private function: w1_t is shared, w2 passes through, and func1 keeps
    # its own w2_t. transform_params returns the weights first, then the lifted values.
    before = _module(_func("func1", BOTH.format(op="add")), _func("func2", FUSED_W2), FUSED)
    after = transform.LiftTransformParams(shared_transform=True)(before)
    expected = _module(_lifted("func1", KEPT_W2, "w2, w1_t"), _lifted("func2", KEPT_FUSED, "w2, w1_t"), FUSED,
                       _transform("w1_t = R.permute_dims(w1)", "w2, w1_t"))
    assert_structural_equal(after, expected)
    _check_numerics(before, after, ["func1", "func2"])


def test_a_weight_one_function_does_not_read_still_passes_through():
    # as TVM: func2 never reads w2, but w2_t is not computed by func2, so it stays in func1 and w2 is passed
    only_w1 = "w1_t = R.permute_dims(w1)\noutput = R.matmul(x, w1_t)\nR.output(output)"
    before = _module(_func("func1", BOTH.format(op="add")), _func("func2", only_w1))
    after = transform.LiftTransformParams(shared_transform=True)(before)
    expected = _module(_lifted("func1", KEPT_W2, "w2, w1_t"),
                       _lifted("func2", "output = R.matmul(x, w1_t)\nR.output(output)", "w2, w1_t"),
                       _transform("w1_t = R.permute_dims(w1)", "w2, w1_t"))
    assert_structural_equal(after, expected)
    _check_numerics(before, after, ["func1", "func2"])


def test_the_order_is_the_first_function_s_by_name():
    # func2 computes w1_t first, func1 (first by name) w2_t: transform_params follows func1
    before = _module(_func("func2", BOTH.format(op="add")), _func("func1", SWAPPED))
    after = transform.LiftTransformParams(shared_transform=True)(before)
    expected = _module(
        _lifted("func2", KEPT_BOTH.format(op="add"), "w2_t, w1_t"),
        _lifted("func1", KEPT_BOTH.format(op="add"), "w2_t, w1_t"),
        _transform("w2_t = R.permute_dims(w2)\nw1_t = R.permute_dims(w1)", "w2_t, w1_t"))
    assert_structural_equal(after, expected)
    assert after["func1"] is not after["func2"]  # both public functions stay, although alike
    _check_numerics(before, after, ["func1", "func2"])


def test_a_list_names_the_functions_that_share():
    # func3 transposes both weights inside `fused`: with it, nothing of w1 could be shared; it is left as it is
    func3 = "y1 = Module.fused(x, w1)\ny2 = Module.fused(x, w2)\noutput = R.add(y1, y2)\nR.output(output)"
    before = _module(_func("func1", BOTH.format(op="add")), _func("func2", FUSED_W2), _func("func3", func3), FUSED)
    after = transform.LiftTransformParams(shared_transform=["func1", "func2"])(before)
    expected = _module(_lifted("func1", KEPT_W2, "w2, w1_t"), _lifted("func2", KEPT_FUSED, "w2, w1_t"),
                       _func("func3", func3), FUSED, _transform("w1_t = R.permute_dims(w1)", "w2, w1_t"))
    assert_structural_equal(after, expected)
    assert after["func3"] is before["func3"]
    _check_numerics(before, after, ["func1", "func2"])
    with_all = transform.LiftTransformParams(shared_transform=True)(before)
    assert with_all is before  # func3 lifts nothing, so nothing is shared by all three


SYMBOLIC = '''
@I.ir_module
class M:
    @R.function
    def decode(x: R.Tensor(("b", 3), "float32"), w: R.Tensor(("m", 3), "float32"), s: R.Tensor((), "float32")):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            wt = R.permute_dims(w, [1, 0])
            ones = R.ones((3,), "float32")
            w2 = R.multiply(wt, s)
            w3 = R.multiply(wt, s)
            y = R.matmul(x, w2)
            t = R.sum(w3)
            z = R.add(y, t)
            R.output(z)
        return z

    @R.function
    def prefill(x: R.Tensor(("b", "t", 3), "float32"), w: R.Tensor(("m", 3), "float32"),
                s: R.Tensor((), "float32")):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            wt = R.permute_dims(w, [1, 0])
            w2 = R.multiply(wt, s)
            neg = R.negative(w)
            y = R.matmul(x, w2)
            t = R.sum(neg)
            z = R.add(y, t)
            R.output(z)
        return z
'''


def test_symbolic_weights_repeated_and_unshared_bindings():
    # decode computes `wt * s` twice (both read w2, passed once); `ones` and `neg`, each in one function only,
    # stay there; `w` passes through for prefill's `neg`
    mod = from_source(SYMBOLIC)
    after = roundtrip(transform.LiftTransformParams(shared_transform=True)(mod))
    prep, decode, prefill = after["transform_params"], after["decode"], after["prefill"]
    assert [p.name_hint for p in prep.params] == ["w", "s"]
    assert [b.var.name_hint for b in prep.body.blocks[0].bindings] == ["wt", "w2"]
    assert [p.name_hint for p in decode.params] == ["x", "w", "w2"]
    assert [p.name_hint for p in prefill.params] == ["x", "w", "w2"]
    assert [b.var.name_hint for b in decode.body.blocks[0].bindings] == ["ones", "y", "t", "z"]
    assert "R.sum(w2)" in decode.script() and "R.negative(w)" in prefill.script()
    rng = np.random.default_rng(1)
    w, s = rng.standard_normal((5, 3)).astype("float32"), np.array(0.5, "float32")
    transformed = rm.interpret(after, "transform_params", w, s)
    vm = rm.VirtualMachine(rm.compile(after))
    compiled = vm["transform_params"](w, s)
    for name, shape in (("decode", (2, 3)), ("prefill", (2, 4, 3))):
        x = rng.standard_normal(shape).astype("float32")
        want = x @ (w.T * s) + ((w.T * s).sum() if name == "decode" else (-w).sum())
        np.testing.assert_allclose(np.asarray(rm.interpret(mod, name, x, w, s)), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(rm.interpret(after, name, x, *transformed)), want, rtol=1e-5,
                                   atol=1e-5)
        np.testing.assert_allclose(np.asarray(vm[name](x, *compiled)), want, rtol=1e-5, atol=1e-5)


def test_a_size_only_the_weights_define_is_carried_by_a_weight():
    # both functions use `m`, which only w defines and the shared result `v` does not carry: w is passed, last
    mod = from_source('''
@I.ir_module
class M:
    @R.function
    def f(x: R.Tensor((3,), "float32"), w: R.Tensor(("m", 3), "float32")):
        m = T.int64()
        R.func_attr({"num_input": 1})
        with R.dataflow():
            v = R.sum(w, axis=[0])
            o = R.full((m,), R.const(2.0, "float32"), "float32")
            r = R.sum(o)
            q = R.multiply(R.add(x, v), r)
            R.output(q)
        return q

    @R.function
    def g(x: R.Tensor((3,), "float32"), w: R.Tensor(("m", 3), "float32")):
        m = T.int64()
        R.func_attr({"num_input": 1})
        with R.dataflow():
            v = R.sum(w, axis=[0])
            o = R.full((m,), R.const(1.0, "float32"), "float32")
            r = R.sum(o)
            q = R.multiply(v, r)
            R.output(q)
        return q
''')
    after = roundtrip(transform.LiftTransformParams(shared_transform=True)(mod))
    assert [p.name_hint for p in after["f"].params] == [p.name_hint for p in after["g"].params] == ["x", "v", "w"]
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal(3).astype("float32"), rng.standard_normal((5, 3)).astype("float32")
    vm = rm.VirtualMachine(rm.compile(after))
    for name, want in (("f", (x + w.sum(0)) * 10), ("g", w.sum(0) * 5)):
        np.testing.assert_allclose(rm.interpret(after, name, x, *rm.interpret(after, "transform_params", w)), want,
                                   rtol=1e-5)
        np.testing.assert_allclose(vm[name](x, *vm["transform_params"](w)), want, rtol=1e-5)


def test_false_is_the_per_function_lift():
    text = _module(_func("func1", BOTH.format(op="add")), _func("func2", BOTH.format(op="multiply"))).script()
    default = transform.LiftTransformParams()(from_source(text))
    off = transform.LiftTransformParams(shared_transform=False)(from_source(text))
    assert off.script() == default.script()
    assert set(off) == {"func1", "func2", "func1_transform_params", "func2_transform_params"}


# -- errors ---------------------------------------------------------------------------------------------------------

def test_the_weights_must_match():
    one = _func("func1", "w1_t = R.permute_dims(w1)\noutput = R.matmul(x, w1_t)\nR.output(output)", weights="w1")
    with pytest.raises(ValueError, match=r"'func2' takes 2 weights \(parameters after its num_input\), 'func1' "
                                         r"takes 1: the functions sharing transform_params must take the same"):
        transform.LiftTransformParams(shared_transform=True)(_module(one, _func("func2", BOTH.format(op="add"))))
    for new in ('R.Tensor((2, 4), "float32")', 'R.Tensor((4, 4), "float16")'):
        text = _func("func2", "output = R.matmul(x, w1)\nR.output(output)").replace(f"w2: {T2}", f"w2: {new}")
        mod = _module(_func("func1", BOTH.format(op="add")), text)
        shown = new.replace('"', "").replace("R.Tensor((", "").split(")")[0]
        with pytest.raises(ValueError, match=rf"weight 1 of 'func2', w2: R.Tensor\(\({shown}\).*differs from "
                                             r"'func1''s, w2: R.Tensor\(\(4, 4\), dtype=\"float32\"\)"):
            transform.LiftTransformParams(shared_transform=True)(mod)


def test_names_that_are_not_targets_are_refused():
    mod = _module(_func("func1", BOTH.format(op="add")),
                  _func("func2", BOTH.format(op="add")).replace('        R.func_attr({"num_input": 1})\n', ""))
    with pytest.raises(ValueError, match=r"shared_transform=\[...\]\): the module has no function 'func9' "
                                         r"\(it has: func1, func2\)"):
        transform.LiftTransformParams(shared_transform=["func1", "func9"])(mod)
    with pytest.raises(ValueError, match=r"function 'func2' has no num_input attribute"):
        transform.LiftTransformParams(shared_transform=["func1", "func2"])(mod)
    with pytest.raises(TypeError, match=r"option shared_transform='func1' is not a bool or a list of str"):
        transform.LiftTransformParams(shared_transform="func1")


def test_match_cast_and_an_existing_transform_params_are_refused():
    cast = BOTH.format(op="add").replace("w1_t = R.permute_dims(w1)",
                                         'w1_t = R.match_cast(R.permute_dims(w1), R.Tensor((4, 4), "float32"))')
    mod = _module(_func("func1", cast), _func("func2", BOTH.format(op="add")))
    with pytest.raises(ValueError, match=r"'func1', binding 'w1_t': R.match_cast is not lifted into a shared "
                                         r"transform_params"):
        transform.LiftTransformParams(shared_transform=True)(mod)
    existing = _module(_func("func1", BOTH.format(op="add")), _func("func2", BOTH.format(op="add")),
                       _transform("w1_t = R.permute_dims(w1)", "w1_t"))
    with pytest.raises(ValueError, match="already has a function 'transform_params'"):
        transform.LiftTransformParams(shared_transform=True)(existing)


def test_a_size_no_tensor_has_is_passed_as_a_shape():
    # `m` comes from the weight R.Shape(["m"]) only: every function takes the leading R.Shape, as TVM's
    func = '''
    @R.function
    def NAME(x: R.Tensor((8,), "float32"), sh: R.Shape(["m"]), w: R.Tensor((4,), "float32")):
        R.func_attr({"num_input": 1})
        m = T.int64()
        with R.dataflow():
            s = R.sum(w)
            y = R.strided_slice(x, axes=[0], begin=[0], end=[m])
            z = R.multiply(y, SCALE)
            R.output(z)
        return z
'''
    mod = _module(func.replace("NAME", "a").replace("SCALE", "s"),
                  func.replace("NAME", "b").replace("SCALE", "R.negative(s)"))
    after = roundtrip(transform.LiftTransformParams(shared_transform=True)(mod))
    for name in "ab":
        assert [p.name_hint for p in after[name].params] == ["x", "vars_from_compile_time_params", "s"]
    assert "R.negative(s)" in after["b"].script()  # b's alone
    x, w = np.arange(8, dtype="float32"), np.array([1.0, 2.0, 3.5, -1.0], "float32")
    transformed = rm.interpret(after, "transform_params", (5,), w)
    assert tuple(transformed[0]) == (5,)
    for name, sign in (("a", 1), ("b", -1)):
        np.testing.assert_allclose(rm.interpret(after, name, x, *transformed), sign * x[:5] * w.sum(), rtol=1e-6)
