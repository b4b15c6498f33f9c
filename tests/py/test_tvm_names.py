"""The TVM names the README's table promises, used as TVM's documentation uses them; expected values computed here
with NumPy or by hand.

(Issue 11: ``relax.Tuple``, ``TupleGetItem``, ``ShapeExpr``, ``ShapeStructInfo``, ``DataflowVar``, ``relax.analysis``,
``relax.get_pipeline``, ``relax.testing``, ``tvm.runtime``, ``tvm.nd.empty``, the VM's stateful interface and
``time_evaluator``, ``show``/``script`` options, ``profile=True`` with ``vm.profile``.)
"""

from __future__ import annotations

import numpy as np
import pytest

from relax_mlir import tvm
from relax_mlir.script import from_source
from relax_mlir.tvm import relax

SOURCE = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")):
        with R.dataflow():
            s = R.add(x, y)
            p = R.multiply(x, y)
            t = (s, p)
            R.output(t)
        return t
"""


def _vm():
    return relax.VirtualMachine(tvm.compile(from_source(SOURCE), "llvm"), tvm.cpu())


X = np.arange(6, dtype=np.float32).reshape(2, 3)
Y = np.full((2, 3), 2.0, np.float32)


def test_expression_names_build_what_tvm_builds():
    x = relax.Var("x", relax.TensorStructInfo((2, 3), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            t = bb.emit(relax.Tuple([x, relax.op.add(x, x)]))
            second = bb.emit(relax.TupleGetItem(t, 1))
            assert isinstance(second, relax.DataflowVar)  # a variable bound inside a dataflow block
            out = bb.emit_output(second)
        bb.emit_func_output(out)
    mod = bb.get()
    np.testing.assert_array_equal(relax.VirtualMachine(tvm.compile(mod), tvm.cpu())["main"](X).numpy(), X + X)
    assert relax.ShapeExpr([2, 3]).struct_info == relax.ShapeStructInfo([2, 3])
    assert isinstance(t.struct_info, relax.TupleStructInfo) and len(t.struct_info.fields) == 2


def test_analysis_names():
    mod = from_source(SOURCE)
    func = mod["main"]
    assert relax.analysis.well_formed(mod)
    names = [v.name_hint for v in relax.analysis.all_vars(func)]
    assert names[:2] == ["x", "y"] and set(names) == {"x", "y", "s", "p", "t"}
    assert relax.analysis.free_vars(func) == []  # a function binds every variable it uses
    body = relax.analysis.get_var2val(func)
    assert {v.name_hint for v in body} == {"s", "p", "t"}
    assert [f.name_hint for f in relax.analysis.free_vars(body[next(v for v in body if v.name_hint == "t")])] == \
        ["s", "p"]  # the tuple (s, p) uses s and p, bound elsewhere
    report = relax.analysis.estimate_memory_usage(mod)
    # two op calls, each a 2x3 float32 result: 2 * 24 bytes, by hand
    assert "2 constant-size memory allocation(s) with total size" in report and "(48 bytes)" in report


def test_get_pipeline_prepares_a_module_and_names_the_known_ones():
    mod = relax.get_pipeline("default")(from_source(SOURCE))
    np.testing.assert_array_equal(relax.VirtualMachine(tvm.compile(mod), tvm.cpu())["main"](X, Y)[1].numpy(), X * Y)
    with pytest.raises(ValueError, match="unknown pipeline 'O3'; available: default, default_build, zero"):
        relax.get_pipeline("O3")
    assert relax.testing.roundtrip is not None


def test_stateful_interface_and_outputs():
    vm = _vm()
    vm.set_input("main", X, y=Y)
    vm.invoke_stateful("main")
    s, p = vm.get_outputs("main")
    np.testing.assert_array_equal(s.numpy(), X + Y)
    np.testing.assert_array_equal(p.numpy(), X * Y)
    with pytest.raises(ValueError, match=r"call set_input\('other'"):
        vm.invoke_stateful("other")
    with pytest.raises(TypeError, match=r"set_input: main takes \(x, y\)"):
        vm.set_input("main", X, z=Y)


def test_keyword_inputs_of_a_library_loaded_without_its_module(tmp_path):
    """A loaded library has no Relax module: set_input's keywords come from its signature's parameter names."""
    path = str(tmp_path / "lib.so")
    tvm.compile(from_source(SOURCE), "llvm").export_library(path)
    vm = relax.VirtualMachine(tvm.runtime.load_module(path), tvm.cpu())
    vm.set_input("main", X, y=Y)
    vm.invoke_stateful("main")
    np.testing.assert_array_equal(vm.get_outputs("main")[1].numpy(), X * Y)
    with pytest.raises(TypeError, match=r"set_input: main takes \(x, y\)"):
        vm.set_input("main", X, z=Y)


def test_time_evaluator_reports_seconds_per_call():
    vm = _vm()
    timer = vm.time_evaluator("main", tvm.cpu(), number=3, repeat=4)
    result = timer(X, Y)
    assert len(result.results) == 4 and all(0 < r < 1 for r in result.results)
    assert result.min <= result.median <= result.max and result.mean == pytest.approx(np.mean(result.results))
    assert str(result).startswith("Execution time summary:\n")
    vm.set_input("main", X, Y)
    assert len(vm.time_evaluator("main", tvm.cpu(), repeat=2)().results) == 2  # the inputs set_input gave
    long = vm.time_evaluator("main", tvm.cpu(), number=1, repeat=1, min_repeat_ms=5)(X, Y)
    assert long.results[0] > 0  # the repeat was stretched to 5 ms by calling more often, not by waiting


def test_profile_reports_per_function_times_and_is_not_silently_ignored():
    vm = relax.VirtualMachine(tvm.compile(from_source(SOURCE)), tvm.cpu(), profile=True)
    np.testing.assert_array_equal(vm["main"](X, Y)[0].numpy(), X + Y)  # a profiling VM still calls as usual
    report = vm.profile("main", X, Y)
    assert [name for name, _ in report.rows] == ["main"] and 0 < report.rows[0][1] < 1e6
    assert str(report).splitlines()[0].split()[:3] == ["Name", "Duration", "(us)"]
    with pytest.raises(ValueError, match="profile=True"):
        _vm().profile("main", X, Y)


def test_runtime_and_nd_names(tmp_path):
    e = tvm.nd.empty((2, 3), "int32")
    assert isinstance(e, tvm.nd.NDArray) and e.shape == (2, 3) and e.dtype == np.int32
    assert tvm.runtime.NDArray is tvm.nd.NDArray and tvm.runtime.ndarray is tvm.nd
    ex = tvm.compile(from_source(SOURCE))
    ex.export_library(str(tmp_path / "m.so"))
    lib = tvm.runtime.load_module(str(tmp_path / "m.so"))
    np.testing.assert_array_equal(lib["main"](X, Y)[0], X + Y)


def test_show_and_script_take_tvms_options(capsys):
    mod = from_source(SOURCE)
    assert mod.script(show_meta=True) == mod.script()
    mod.show(black_format=True)
    assert capsys.readouterr().out.strip() == mod.script().strip()
    mod["main"].show(black_format=False, show_meta=True)
    assert "def main" in capsys.readouterr().out
    with pytest.raises(TypeError, match="black_format must be True or False"):
        mod.show(black_format="yes")


def test_tvm_ir_and_irmodule_from_expr():
    from relax_mlir import tvm
    from relax_mlir.script import from_source

    f = from_source('@R.function\ndef f(x: R.Tensor((2,), "float32")):\n    y = R.exp(x)\n    return y\n')
    mod = tvm.IRModule.from_expr(f)
    assert list(mod) == ["main"] and mod["main"] is f
    tvm.ir.assert_structural_equal(mod, tvm.ir.IRModule({"main": f}))
    assert tvm.ir.structural_equal(mod, mod) and tvm.ir.structural_hash(mod) == tvm.ir.structural_hash(mod)
    with pytest.raises(TypeError, match="from_expr: expected a relax Function"):
        tvm.IRModule.from_expr(mod)


def test_training_append_loss_is_the_pass():
    # TVM: from tvm.relax.training import AppendLoss; relax.training.AppendLoss(...) in test_training_loss.
    from relax_mlir.training import AppendLoss
    from relax_mlir.transform import AppendLoss as Pass

    assert relax.training.AppendLoss is AppendLoss is Pass


@pytest.mark.parametrize("count_include_pad", [False, True])
def test_max_pool2d_takes_tvms_count_include_pad_and_ignores_it(count_include_pad):
    # TVM's signature: (data, pool_size, strides, padding, dilation, ceil_mode, count_include_pad, layout,
    # out_layout). Max pooling ignores count_include_pad: padding never wins the max.
    import relax_mlir
    from relax_mlir.transform import Gradient

    x = relax.Var("x", relax.TensorStructInfo((1, 2, 5, 5), "float64"))
    by_keyword = relax.op.nn.max_pool2d(x, (3, 3), strides=(2, 2), padding=(1, 1), count_include_pad=count_include_pad)
    by_position = relax.op.nn.max_pool2d(x, (3, 3), (2, 2), (1, 1), (1, 1), False, count_include_pad, "NCHW")
    assert by_keyword.attrs == by_position.attrs and by_keyword.attrs["count_include_pad"] is count_include_pad
    assert by_keyword.struct_info == relax.TensorStructInfo((1, 2, 3, 3), "float64")
    with pytest.raises(ValueError, match=r"layout must be one of 'NCHW', 'NHWC', got 'NCDHW'"):
        relax.op.nn.max_pool2d(x, (3, 3), layout="NCDHW")
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            pooled = bb.emit_output(by_keyword)
        bb.emit_func_output(pooled)
    with bb.function("loss", [x]):
        with bb.dataflow():
            loss = bb.emit_output(relax.op.sum(by_keyword))
        bb.emit_func_output(loss)
    mod = Gradient("loss")(bb.get())
    data = np.random.default_rng(0).standard_normal((1, 2, 5, 5))
    padded = np.pad(data, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    want, want_grad = np.empty((1, 2, 3, 3)), np.zeros((1, 2, 5, 5))
    for c, i, j in np.ndindex(2, 3, 3):
        window = padded[0, c, 2 * i:2 * i + 3, 2 * j:2 * j + 3]
        want[0, c, i, j] = window.max()
        r, q = np.unravel_index(window.argmax(), (3, 3))
        want_grad[0, c, 2 * i + r - 1, 2 * j + q - 1] += 1.0  # back to unpadded coordinates
    vm = relax.VirtualMachine(tvm.compile(mod, "llvm"), tvm.cpu())
    np.testing.assert_array_equal(vm["main"](data).numpy(), want)
    np.testing.assert_array_equal(relax_mlir.interpret(mod, "main", data), want)
    np.testing.assert_array_equal(relax_mlir.interpret(mod, "loss_adjoint", data)[1][0], want_grad)
    np.testing.assert_array_equal(np.asarray(vm["loss_adjoint"](data)[1][0]), want_grad)
