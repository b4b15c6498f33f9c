"""LiftTransformParams: main(inputs, weights) == new main(inputs, *main_transform_params(weights)), interpreted
and compiled; what cannot or need not be lifted is left alone."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import transform
from relax_mlir.backend.signature import ExportError
from relax_mlir.interpreter import remove_global_func
from relax_mlir.ir import IRModule
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


def test_host_calls_and_plain_blocks_are_not_lifted():
    # A host call in a plain block of a pure=False main moved into the (pure) transform function: it ran once
    # ahead of time instead of on every call of main. As TVM, only pure bindings of dataflow blocks are lifted.
    calls = []
    rm.register_func("test.lift_log", lambda w: (calls.append(1), w)[1], override=True)
    mod = from_source('''
@I.ir_module
class M:
    @R.function(pure=False)
    def main(x: R.Tensor((2, 3), "float32"), w: R.Tensor((3, 3), "float32"), v: R.Tensor((3, 3), "float32")):
        R.func_attr({"num_input": 1})
        lw = R.call_packed("test.lift_log", w, sinfo_args=R.Tensor((3, 3), "float32"))
        plain = R.negative(v)
        with R.dataflow():
            vt = R.permute_dims(v, [1, 0])
            y = R.matmul(x, vt)
            R.output(y)
        z = R.matmul(y, lw)
        r = R.matmul(z, plain)
        return r
''')
    lifted = transform.LiftTransformParams()(mod)
    main, prep = lifted["main"], lifted["main_transform_params"]
    assert [p.name_hint for p in main.params] == ["x", "w", "v", "vt"] and not main.is_pure
    assert [b.var.name_hint for b in prep.body.blocks[0].bindings] == ["vt"]
    rng = np.random.default_rng(1)
    x, w, v = (rng.standard_normal(s).astype("float32") for s in ((2, 3), (3, 3), (3, 3)))
    transformed = rm.interpret(lifted, "main_transform_params", w, v)
    calls.clear()
    for _ in range(3):
        got = rm.interpret(lifted, "main", x, *transformed)  # w and v pass through
    assert len(calls) == 3  # once per call of main, as before the pass
    np.testing.assert_allclose(got, x @ v.T @ w @ -v, rtol=1e-5, atol=1e-5)
    in_dataflow = from_source('''
@I.ir_module
class M:
    @R.function(pure=False)
    def main(x: R.Tensor((2, 3), "float32"), w: R.Tensor((3, 3), "float32")):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            lw = R.call_packed("test.lift_log", w, sinfo_args=R.Tensor((3, 3), "float32"))
            y = R.matmul(x, lw)
            R.output(y)
        return y
''')
    assert transform.LiftTransformParams()(in_dataflow) is in_dataflow  # a host call even in a dataflow block
    remove_global_func("test.lift_log")


SIZE_OF_A_WEIGHT = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((8,), "float32"), w: R.Tensor(("m",), "float32")):
        R.func_attr({"num_input": 1})
        m = T.int64()
        with R.dataflow():
            s = R.sum(w)
            y = R.strided_slice(x, axes=[0], begin=[0], end=[m])
            z = R.multiply(y, s)
            R.output(z)
        return z
'''


@pytest.mark.parametrize("weight", ['w: R.Tensor(("m",), "float32")', "w: R.Tensor(ndim=1, dtype=\"float32\")"])
def test_a_size_only_the_weights_define_is_passed_in_a_tensor_s_shape(weight):
    # `m` is defined by the weight `w` (or by a lifted match_cast of it) and used by main, but no value main
    # receives carried it: main was left with `m` undefined (WellFormedError). Then (as TVM) the transform function
    # returned R.shape([m]), which main took as `vars_from_compile_time_params: R.Shape`: interpreted, not compiled
    # (only tensors cross function boundaries there). Now the tensor that defines `m` is passed, last.
    source = SIZE_OF_A_WEIGHT.replace('w: R.Tensor(("m",), "float32")', weight)
    carrier = "w"
    if "ndim" in weight:
        source = source.replace("s = R.sum(w)", 'wc = R.match_cast(w, R.Tensor((m,), "float32"))\n            '
                                                "s = R.sum(wc)")
        carrier = "wc"
    mod = from_source(source)
    lifted = roundtrip(transform.LiftTransformParams()(mod))
    main, prep = lifted["main"], lifted["main_transform_params"]
    assert [p.name_hint for p in main.params] == ["x", "s", carrier]
    assert str(main.params[2].struct_info) == str(prep.ret_struct_info.fields[1]) == "Tensor((m,), float32)"
    x = np.arange(8, dtype="float32")
    # main compiles; a transform function whose result has a size only its match_cast defines does not (the runtime
    # allocates results with the parameters' sizes), nor did the function before the pass
    vm = rm.VirtualMachine(rm.compile(lifted if carrier == "w" else IRModule({"main": main})))
    for w in (np.array([1.0, 2.0, 3.5, -1.0, 0.5], "float32"), np.array([2.0, -3.0], "float32")):
        want = x[:len(w)] * w.sum()
        transformed = rm.interpret(lifted, "main_transform_params", w)
        np.testing.assert_allclose(rm.interpret(lifted, "main", x, *transformed), want, rtol=1e-6)
        np.testing.assert_allclose(vm["main"](x, *transformed), want, rtol=1e-6)
        if carrier == "w":
            np.testing.assert_allclose(vm["main"](x, *vm["main_transform_params"](w)), want, rtol=1e-6)
    # LazyTransformParams hands the carrier over like any other result (index 1)
    stored = {}
    rm.register_func("test.lift_get", lambda i: w, override=True)
    rm.register_func("test.lift_set", lambda i, value: stored.__setitem__(int(i), value), override=True)
    try:
        rm.interpret(transform.LazyTransformParams("test.lift_get", "test.lift_set")(lifted), "main_transform_params")
    finally:
        remove_global_func("test.lift_get")
        remove_global_func("test.lift_set")
    assert sorted(stored) == [0, 1] and stored[1].shape == (2,)
    np.testing.assert_allclose(rm.interpret(lifted, "main", x, stored[0], stored[1]), want, rtol=1e-6)


def test_a_size_only_the_weights_define_is_passed_as_a_shape():
    # A weight R.Shape(["m"]) defines `m`, which main uses, and no tensor has it as a dimension: passed as TVM does,
    # as the leading `vars_from_compile_time_params: R.Shape` (compiled no more than `sh` was before the pass).
    mod = from_source(SIZE_OF_A_WEIGHT.replace('w: R.Tensor(("m",), "float32")',
                                               'sh: R.Shape(["m"]), w: R.Tensor((4,), "float32")'))
    lifted = roundtrip(transform.LiftTransformParams()(mod))
    main, prep = lifted["main"], lifted["main_transform_params"]
    assert [p.name_hint for p in main.params] == ["x", "vars_from_compile_time_params", "s"]
    assert str(main.params[1].struct_info) == str(prep.ret_struct_info.fields[0]) == "Shape((m,))"
    x, w = np.arange(8, dtype="float32"), np.array([1.0, 2.0, 3.5, -1.0], "float32")
    transformed = rm.interpret(lifted, "main_transform_params", (5,), w)
    assert tuple(transformed[0]) == (5,)
    np.testing.assert_allclose(rm.interpret(lifted, "main", x, *transformed), x[:5] * w.sum(), rtol=1e-6)
    with pytest.raises(ExportError, match="main: vars_from_compile_time_params has struct info Shape"):
        rm.compile(lifted)  # the MLIR backend passes tensors only between functions


def test_sizes_unknown_ahead_of_time_stay_in_main():
    # `wr` reads only a weight but its size is the input's `n`: it was lifted, leaving `n` undefined in the
    # transform function. A weight whose shape uses `n` keeps the whole function as it is.
    source = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor(("n",), "float32"), w: R.Tensor((8,), "float32")):
        R.func_attr({"num_input": 1})
        n = T.int64()
        with R.dataflow():
            wr = R.strided_slice(w, axes=[0], begin=[0], end=[n])
            s = R.sum(w)
            y = R.add(x, wr)
            z = R.multiply(y, s)
            R.output(z)
        return z
'''
    mod = from_source(source)
    lifted = transform.LiftTransformParams()(mod)
    assert [p.name_hint for p in lifted["main"].params] == ["x", "w", "s"]
    x, w = np.array([1.0, 2.0, 3.0], "float32"), np.arange(8, dtype="float32")
    got = rm.interpret(lifted, "main", x, *rm.interpret(lifted, "main_transform_params", w))
    np.testing.assert_allclose(got, (x + w[:3]) * w.sum(), rtol=1e-6)
    doubled = from_source(source.replace('w: R.Tensor((8,), "float32")', 'w: R.Tensor(("n * 2",), "float32")'))
    assert transform.LiftTransformParams()(doubled) is doubled


def test_a_weight_a_kept_binding_reads_twice_is_passed_once():
    # `R.add(w, w)` (kept: a plain block) listed `w` twice among main's parameters: the same Var bound twice
    mod = from_source('''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((2,), "float32"), w: R.Tensor((3,), "float32")):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            ws = R.sum(w)
            R.output(ws)
        gv = R.add(w, w)
        y = R.multiply(gv, ws)
        z = R.sum(x)
        r = R.add(y, z)
        return r
''')
    lifted = transform.LiftTransformParams()(mod)
    assert [p.name_hint for p in lifted["main"].params] == ["x", "w", "ws"]
    x, w = np.array([1.0, -2.0], "float32"), np.array([0.5, 1.0, 2.0], "float32")
    got = rm.interpret(lifted, "main", x, *rm.interpret(lifted, "main_transform_params", w))
    np.testing.assert_allclose(got, 2 * w * w.sum() + x.sum(), rtol=1e-6)
