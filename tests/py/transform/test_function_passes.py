"""The functions-and-parameters passes: the errors a user gets for bad options, and cases the property test
does not draw (sizes shared between parameters, recursion, whole-tuple uses)."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import transform
from relax_mlir.script import from_source

MOD = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor(("n", 3), "float32"), w: R.Tensor((3, 2), "float32")):
        R.func_attr({"num_input": 1})
        y = R.matmul(x, w)
        return y
'''


def test_bind_params_then_values_are_the_matmul():
    w = np.arange(6, dtype=np.float32).reshape(3, 2)
    bound = transform.BindParams("main", {"w": w})(from_source(MOD))
    x = np.ones((4, 3), np.float32)
    np.testing.assert_array_equal(relax_mlir.interpret(bound, "main", x), x @ w)


def test_bundle_model_params_refuses_a_bad_num_input():
    mod = from_source(MOD.replace('"num_input": 1', '"num_input": 5'))
    with pytest.raises(ValueError, match=r"main has num_input=5; expected an integer from 0 to its 2 parameters"):
        transform.BundleModelParams()(mod)


def test_update_param_struct_info_checks_its_function():
    with pytest.raises(TypeError, match="sinfo_func must be callable"):
        transform.UpdateParamStructInfo("n")
    with pytest.raises(TypeError, match=r"sinfo_func\(x\) in main returned str"):
        transform.UpdateParamStructInfo(lambda v: "bad")(from_source(MOD))


def test_inline_private_functions_refuses_recursion():
    mod = from_source('''
@I.ir_module
class M:
    @R.function
    def loop(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        y = cls.loop(x)
        return y

    @R.function
    def main(x: R.Tensor((2,), "float32")):
        y = cls.loop(x)
        return y
''')
    with pytest.raises(ValueError, match="loop calls itself"):
        transform.InlinePrivateFunctions()(mod)


def test_remove_unused_outputs_keeps_a_tuple_used_whole():
    mod = from_source('''
@I.ir_module
class M:
    @R.function
    def helper(x: R.Tensor((2,), "float32")):
        a = R.exp(x)
        b = R.sin(x)
        return (a, b)

    @R.function
    def main(x: R.Tensor((2,), "float32")):
        t = cls.helper(x)
        u = t[0]
        return (u, t)
''')
    assert transform.RemoveUnusedOutputs()(mod) is mod


def test_remove_unused_outputs_sees_the_calls_in_local_functions():
    # The callers' reads were collected from top-level bindings only: a call from a local function alone gave no
    # used fields and a bare KeyError: 0; next to a top-level call, the field only `inner` reads (2) was dropped.
    text = '''
@I.ir_module
class M:
    @R.function(private=True)
    def helper(a: R.Tensor((3,), "float32")):
        b = R.exp(a)
        c = R.sin(a)
        d = R.cos(a)
        return (b, c, d)

    @R.function
    def main(x: R.Tensor((3,), "float32")):
        t = cls.helper(x)
        t0 = t[0]
        @R.function
        def inner(y: R.Tensor((3,), "float32")):
            z = cls.helper(y)
            z2 = z[2]
            return z2
        o = inner(x)
        r = R.add(t0, o)
        return r
'''
    x = np.array([0.0, 0.5, -1.0], "float32")
    for source, want, kept in ((text, np.exp(x) + np.cos(x), 2),
                               (text.replace("        t = cls.helper(x)\n        t0 = t[0]\n", "")
                                    .replace("r = R.add(t0, o)", "r = R.add(o, o)"), 2 * np.cos(x), 1)):
        mod = from_source(source)
        out = transform.RemoveUnusedOutputs()(mod)
        assert len(out["helper"].ret_struct_info.fields) == kept
        np.testing.assert_allclose(relax_mlir.interpret(out, "main", x), want, rtol=1e-6)


def test_entry_functions_keep_their_signatures():
    mod = from_source(MOD)
    for p in (transform.RemoveUnusedParameters(), transform.ExpandTupleArguments(), transform.RemoveUnusedOutputs(),
              transform.InlinePrivateFunctions()):
        assert p(mod) is mod or relax_mlir.ir.structural_equal(p(mod), mod), p.name
