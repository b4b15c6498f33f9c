"""LiftTransformParams: main(inputs, weights) == new main(inputs, *main_transform_params(weights)), interpreted
and compiled; what cannot or need not be lifted is left alone."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import transform
from relax_mlir.script import from_source
from relax_mlir.testing import roundtrip

SOURCE = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 3), "float32"), w: R.Tensor((4, 3), "float32"), b: R.Tensor((4,), "float32"),
             scale: R.Tensor((), "float32")):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            wt = R.permute_dims(w, [1, 0])
            ws = R.multiply(wt, scale)
            wc = R.match_cast(ws, R.Tensor((3, 4), "float32"))
            y = R.matmul(x, wc)
            z = R.add(y, b)
            r = R.nn.relu(z)
            R.output(r)
        return (r, scale)

    @R.function
    def untouched(x: R.Tensor((3,), "float32"), w: R.Tensor((3,), "float32")):
        y = R.add(x, w)
        return y
"""


def _args(n=5, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, 3)).astype("float32"), rng.standard_normal((4, 3)).astype("float32"),
            rng.standard_normal(4).astype("float32"), np.array(1.5, "float32")]


def test_lifted_computation_gives_the_same_values():
    mod = from_source(SOURCE)
    lifted = roundtrip(transform.LiftTransformParams()(mod))
    assert set(lifted) == {"main", "main_transform_params", "untouched"}
    main, prep = lifted["main"], lifted["main_transform_params"]
    assert [p.name_hint for p in main.params] == ["x", "wc", "b", "scale"]  # first-use order; b, scale pass through
    assert [p.name_hint for p in prep.params] == ["w", "b", "scale"]
    assert "R.permute_dims" not in main.script() and "R.match_cast" in prep.script()
    x, w, b, s = _args()
    want = rm.interpret(mod, "main", x, w, b, s)
    transformed = rm.interpret(lifted, "main_transform_params", w, b, s)
    got = rm.interpret(lifted, "main", x, *transformed)
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(want[0]))
    vm = rm.VirtualMachine(rm.compile(lifted))
    compiled = vm["main"](x, *vm["main_transform_params"](w, b, s))
    np.testing.assert_allclose(np.asarray(compiled[0]), np.asarray(want[0]), rtol=1e-6, atol=1e-6)
    assert transform.LiftTransformParams()(mod)["untouched"] is mod["untouched"]


def test_nothing_to_lift_leaves_the_module_and_a_second_run_is_a_no_op():
    mod = from_source(SOURCE)
    once = transform.LiftTransformParams()(mod)
    assert transform.LiftTransformParams()(once) is once  # main's weights are now used as they are
    plain = from_source(SOURCE.replace('        R.func_attr({"num_input": 1})\n', ""))
    assert transform.LiftTransformParams()(plain) is plain


def test_an_existing_transform_function_is_refused():
    text = SOURCE + """
    @R.function
    def main_transform_params(w: R.Tensor((4, 3), "float32")):
        return w
"""
    with pytest.raises(ValueError, match="already has a function 'main_transform_params'"):
        transform.LiftTransformParams()(from_source(text))
