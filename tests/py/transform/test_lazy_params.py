"""LazyGetInput, LazySetOutput, LazyTransformParams and the host calls they rely on (R.Callable parameters,
R.call_packed, register_func): the rewritten functions run in the interpreter with Python callbacks and give the
original values, each weight is asked for once and only if read, results are handed over as soon as computed;
what compiled code cannot do is refused clearly."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import transform, tvm
from relax_mlir.interpreter import InterpreterError, remove_global_func
from relax_mlir.ir import Var
from relax_mlir.ir.struct_info import ObjectStructInfo
from relax_mlir.script import from_source
from relax_mlir.testing import roundtrip
from relax_mlir.transform.utils import all_var_uses

MLP = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), w1: R.Tensor((4, 8), "float32"), b1: R.Tensor((8,), "float32"),
             w2: R.Tensor((8, 3), "float32"), unused: R.Tensor((5,), "float32")):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            w1t = R.permute_dims(R.permute_dims(w1))
            h = R.nn.relu(R.add(R.matmul(x, w1t), b1))
            y = R.matmul(h, w2)
            R.output(y)
        return y
"""


def _weights(rng):
    return {"w1": rng.standard_normal((4, 8)).astype(np.float32), "b1": rng.standard_normal(8).astype(np.float32),
            "w2": rng.standard_normal((8, 3)).astype(np.float32), "unused": np.zeros(5, np.float32)}


def test_lazy_get_input_asks_for_each_weight_it_reads_once():
    mod = from_source(MLP)
    lazy = transform.LazyGetInput()(mod)
    roundtrip(lazy)
    main = lazy["main"]
    assert [p.name_hint for p in main.params] == ["x", "fget_param"] and main.attrs["num_input"] == 2
    rng = np.random.default_rng(0)
    weights = _weights(rng)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    asked = []

    def fget(index, name):
        asked.append((index, name))
        return weights[name]

    got = relax_mlir.interpret(lazy, "main", x, fget)
    want = relax_mlir.interpret(mod, "main", x, *weights.values())
    np.testing.assert_array_equal(got, want)
    assert asked == [(0, "w1"), (1, "b1"), (2, "w2")]  # index among the weights; `unused` never asked for


def test_lazy_get_input_checks_what_the_callback_returns():
    lazy = transform.LazyGetInput()(from_source(MLP))
    x = np.zeros((2, 4), np.float32)
    with pytest.raises(InterpreterError, match=r"match_cast 'w1'.*\(4, 8\)"):
        relax_mlir.interpret(lazy, "main", x, lambda i, name: np.zeros((3, 3), np.float32))
    with pytest.raises(InterpreterError, match="argument 1 \\('fget_param'\\).*expected a function"):
        relax_mlir.interpret(lazy, "main", x, np.zeros(3))
    with pytest.raises(InterpreterError, match="host function 'fget_param' raised KeyError"):
        relax_mlir.interpret(lazy, "main", x, lambda i, name: {}[name])


def test_lazy_get_input_leaves_functions_without_num_input():
    text = MLP.replace('        R.func_attr({"num_input": 1})\n', "")
    mod = from_source(text)
    assert transform.LazyGetInput()(mod) is mod


OUTPUTS = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32"), w: R.Tensor((3,), "float32")):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            a = R.exp(x)
            R.output(a)
        b = R.multiply(a, w)
        c = R.add(b, R.const(1.0, "float32"))
        return (a, w, c, a, R.const(2.0, "float32"))
"""


def test_lazy_set_output_hands_each_result_over_as_soon_as_it_exists():
    mod = from_source(OUTPUTS)
    lazy = transform.LazySetOutput()(mod)
    roundtrip(lazy)
    main = lazy["main"]
    assert [p.name_hint for p in main.params] == ["x", "fset_output", "w"] and main.attrs["num_input"] == 2
    assert not main.is_pure
    x, w = np.arange(3, dtype=np.float32), np.full(3, 2.0, np.float32)
    got = []
    assert relax_mlir.interpret(lazy, "main", x, lambda i, v: got.append((i, v)), w) == ()
    want = relax_mlir.interpret(mod, "main", x, w)
    # the parameter at once, then a after its block (at both of its indices), c after its binding, the constant last
    assert [i for i, _ in got] == [1, 0, 3, 2, 4]
    for i, v in got:
        np.testing.assert_array_equal(v, want[i])


def test_lazy_set_output_of_a_single_result_uses_index_zero():
    mod = from_source("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32")):
        y = R.exp(x)
        return y
""")
    got = []
    relax_mlir.interpret(transform.LazySetOutput()(mod), "main", np.zeros(3, np.float32),
                         lambda i, v: got.append((i, v.tolist())))
    assert got == [(0, [1.0, 1.0, 1.0])]


@pytest.fixture()
def host_store():
    """get_item/set_item host functions over a dict of weights; unregistered afterwards."""
    store = {"weights": {}, "results": {}, "log": []}

    def get_item(*args):
        *extra, i = args
        store["log"].append(("get", *extra, i))
        return store["weights"][i]

    def set_item(*args):
        *extra, i, value = args
        store["log"].append(("set", *extra, i))
        store["results"][i] = value

    relax_mlir.register_func("test.get_item", get_item)
    relax_mlir.register_func("test.set_item", set_item)
    yield store
    remove_global_func("test.get_item")
    remove_global_func("test.set_item")


def test_lazy_transform_params_after_lift_transform_params(host_store):
    mod = transform.LiftTransformParams()(from_source(MLP))
    before = mod["main_transform_params"]
    lazy = transform.LazyTransformParams("test.get_item", "test.set_item")(mod)
    roundtrip(lazy)
    func = lazy["main_transform_params"]
    assert func.params == () and not func.is_pure and "main" in dict(lazy.items())
    rng = np.random.default_rng(1)
    weights = [rng.standard_normal(tuple(int(d) for d in p.struct_info.shape)).astype(np.float32)
               for p in before.params]
    host_store["weights"] = dict(enumerate(weights))
    assert relax_mlir.interpret(lazy, "main_transform_params") == ()
    want = relax_mlir.interpret(mod, "main_transform_params", *weights)
    assert sorted(host_store["results"]) == list(range(len(want)))
    for i, value in enumerate(want):
        np.testing.assert_array_equal(host_store["results"][i], value)
    gets = [entry[-1] for entry in host_store["log"] if entry[0] == "get"]
    read = [i for i, p in enumerate(before.params) if p in all_var_uses(before.body)]
    assert sorted(gets) == read and len(read) < len(weights)  # each weight it reads, once; `unused` never
    # lazily: the first result is stored before the last weight is loaded
    log = host_store["log"]
    assert log.index(next(e for e in log if e[0] == "set")) < log.index(("get", read[-1]))


def test_lazy_transform_params_passes_the_extra_parameters(host_store):
    mod = from_source("""
@I.ir_module
class Module:
    @R.function
    def main_transform_params(w: R.Tensor((2, 3), "float32")):
        with R.dataflow():
            wt = R.permute_dims(w)
            R.output(wt)
        return (wt,)
""")
    loader, saver = Var("loader", ObjectStructInfo()), Var("saver", ObjectStructInfo())
    lazy = transform.LazyTransformParams("test.get_item", "test.set_item", [loader], [saver])(mod)
    assert [p.name_hint for p in lazy["main_transform_params"].params] == ["loader", "saver"]
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    host_store["weights"] = {0: w}
    relax_mlir.interpret(lazy, "main_transform_params", "L", "S")
    assert host_store["log"] == [("get", "L", 0), ("set", "S", 0)]
    np.testing.assert_array_equal(host_store["results"][0], w.T)
    with pytest.raises(TypeError, match="extra_get_item_params must be relax Vars"):
        transform.LazyTransformParams(extra_get_item_params=["loader"])


PACKED = """
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((2,), "float32")):
        s = R.call_packed("test.scale", x, R.prim_value(3), sinfo_args=R.Tensor((2,), "float32"))
        y = R.add(s, x)
        return y
"""


def test_call_packed_runs_in_the_interpreter_and_is_refused_compiled():
    mod = from_source(PACKED)
    roundtrip(mod)
    assert 'R.call_packed("test.scale", x, R.prim_value(3), sinfo_args=R.Tensor((2,), dtype="float32"))' in \
        mod.script()
    with pytest.raises(InterpreterError, match="no host function named 'test.scale' is registered"):
        relax_mlir.interpret(mod, "main", np.ones(2, np.float32))

    @tvm.register_func("test.scale")
    def scale(x, k):
        return x * k

    try:
        np.testing.assert_array_equal(relax_mlir.interpret(mod, "main", np.ones(2, np.float32)), [4.0, 4.0])
        with pytest.raises(ValueError, match="'test.scale' is already registered"):
            relax_mlir.register_func("test.scale", scale)
        with pytest.raises(Exception, match=r"call_packed\('test.scale'\) calls a host \(Python\) function"):
            relax_mlir.compile(mod)
    finally:
        remove_global_func("test.scale")
