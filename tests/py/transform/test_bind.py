"""BindParams and BindSymbolicVars: weights baked in, sizes fixed; numbers checked against the interpreter run on
the original module with the same weights and sizes."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir.analysis import well_formed
from relax_mlir.ir import TensorStructInfo
from relax_mlir.models import mlp
from relax_mlir.script import from_source
from relax_mlir.transform import BindParams, BindSymbolicVars

RNG = np.random.default_rng(3)


def _weights(mod):
    return {p.name_hint: RNG.normal(size=tuple(p.struct_info.shape)).astype(np.float32)
            for p in mod["backbone"].params[1:]}


def test_bind_params_bakes_the_weights_in():
    mod = mlp("n", (4, 5, 3))
    weights = _weights(mod)
    bound = BindParams("backbone", weights)(mod)
    assert [p.name_hint for p in bound["backbone"].params] == ["x"]
    x = RNG.normal(size=(6, 4)).astype(np.float32)
    want = rm.interpret(mod, "backbone", x, *weights.values())
    np.testing.assert_allclose(rm.VirtualMachine(rm.compile(bound))["backbone"](x), want, rtol=1e-5, atol=1e-6)


def test_bind_params_binds_the_sizes_an_array_gives():
    mod = from_source("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), y: R.Tensor(("n", 4), "float32")):
        z = R.add(x, y)
        return z
""")
    y = np.ones((3, 4), np.float32)
    bound = BindParams("main", {"y": y})(mod)
    assert bound["main"].params[0].struct_info.shape == (3, 4)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(rm.interpret(bound, "main", x), x + y)


@pytest.mark.parametrize("params, message", [
    ({"nope": np.ones(5)}, r"backbone has no parameter 'nope'; its parameters: x, w0, b0, w1, b1"),
    ({"w0": np.ones((5, 4), np.float32)}, r"parameter 'w0' has shape \(4, 5\), got an array of shape \(5, 4\)"),
    ({"b0": np.ones(5, np.complex64)}, r"parameter 'b0' is float32, got an array of complex64"),
    # the policy of compiled calls (docs/arguments.md): a float64 beyond float32 was bound as inf, an int64 rounded
    ({"b0": np.array([1.0, 1e300, 0, 0, 0])}, r"parameter 'b0': expected float32; the float64 value 1e\+300 at flat "
                                              r"position 1 is beyond its range \(it would become inf\)"),
    ({"b0": np.array([0, 0, 2**62 + 1, 0, 0])}, r"parameter 'b0': .*4611686018427387905"),
])
def test_bind_params_refuses_what_does_not_fit(params, message):
    with pytest.raises((ValueError, TypeError), match=message):
        BindParams("backbone", params)(mlp("n", (4, 5, 3)))


def test_bind_symbolic_vars_fixes_a_size_everywhere():
    mod = mlp("n", (4, 5, 3))
    fixed = BindSymbolicVars({"n": 8})(mod)
    assert fixed["backbone"].params[0].struct_info.shape == (8, 4)
    assert fixed["backbone"].ret_struct_info.shape == (8, 3)
    weights = _weights(mod)
    x = RNG.normal(size=(8, 4)).astype(np.float32)
    np.testing.assert_allclose(rm.VirtualMachine(rm.compile(fixed))["backbone"](x, *weights.values()),
                               rm.interpret(mod, "backbone", x, *weights.values()), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"no size variable 'm' in the module \(its size variables: n\)"):
        BindSymbolicVars({"m": 8})(mod)
    with pytest.raises(ValueError, match="'n' = -1 is negative"):
        BindSymbolicVars({"n": -1})(mod)


_CALLER = """
@I.ir_module
class Module:
    @R.function
    def helper(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 4), "float32"):
        y = R.add(x, x)
        return y

    @R.function
    def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 4), "float32"):
        h = cls.helper(x)
        return h
"""


def test_binding_sizes_of_a_caller_binds_its_calls_results_too():
    mod = from_source(_CALLER)
    x = np.arange(12, dtype="float32").reshape(3, 4)
    for bound in (BindSymbolicVars({"n": 3})(mod), BindSymbolicVars({"n": 3}, func_name="main")(mod),
                  BindParams("main", {"x": x})(mod)):
        assert well_formed(bound)
        h = bound["main"].body.blocks[0].bindings[0]
        assert h.value.struct_info == TensorStructInfo((3, 4), "float32") == h.var.struct_info
    np.testing.assert_array_equal(rm.interpret(BindSymbolicVars({"n": 3})(mod), "main", x), 2 * x)
    # binding the callee alone would leave main passing it sizes it no longer takes
    with pytest.raises(ValueError, match=r"'main' \(binding 'h'\) calls 'helper', whose signature this binds, and "
                                         r"its calls are not rewritten: it now returns Tensor\(\(3, 4\), float32\), "
                                         r"where 'h' is Tensor\(\(n, 4\), float32\); bind the sizes of the arguments "
                                         r"'main' passes to the same values too"):
        BindSymbolicVars({"n": 3}, func_name="helper")(mod)


_STATIC_CALLER = """
@I.ir_module
class Module:
    @R.function(private=True)
    def helper(x: R.Tensor(("n",), "float32"), b: R.Tensor(("n",), "float32")):
        y = R.add(x, b)
        return y

    @R.function
    def main(x: R.Tensor((3,), "float32"), b: R.Tensor((3,), "float32")):
        o = cls.helper(x, b)
        return o
"""


def test_binding_a_size_only_a_callee_has_must_agree_with_its_callers():
    mod = from_source(_STATIC_CALLER)
    # n is helper's alone: bound to 5 in every function, main's call passed tensors of 3 to a helper of 5 (the module
    # was then refused as not well formed, naming neither the binding nor what to do)
    with pytest.raises(ValueError, match=r"BindSymbolicVars: 'main' \(binding 'o'\) calls 'helper', whose signature "
                                         r"this binds, and its calls are not rewritten: call to helper: argument 0: "
                                         r"expected Tensor\(\(5,\), float32\), got dimension 3 where 5 was expected"):
        BindSymbolicVars({"n": 5})(mod)
    # the value main passes is fine, with or without func_name
    x, b = np.arange(3, dtype=np.float32), np.full(3, 10, np.float32)
    for bound in (BindSymbolicVars({"n": 3})(mod), BindSymbolicVars({"n": 3}, func_name="helper")(mod)):
        assert well_formed(bound) and bound["helper"].params[0].struct_info.shape == (3,)
        np.testing.assert_array_equal(rm.interpret(bound, "main", x, b), x + b)


def test_bind_params_refuses_a_function_another_one_calls():
    # main's call would still pass b, and main's b would be replaced by the array: refused, naming both functions
    with pytest.raises(ValueError, match=r"BindParams: 'main' calls 'helper', which would no longer take 'b' \(its "
                                         r"calls are not rewritten\); bind the values in the function they come from, "
                                         r"or inline 'helper' into 'main' first \(InlineFunctions\(\['main'\]\)\)"):
        BindParams("helper", {"b": np.ones(3, np.float32)})(from_source(_STATIC_CALLER))
    bound = BindParams("main", {"b": np.full(3, 10, np.float32)})(from_source(_STATIC_CALLER))
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(rm.interpret(bound, "main", x), x + 10)
