"""Schedules at their edges, found by a bug hunt (2026-11-27): a split across threads that read the wrong input
(a strided convolution of one image on two threads: every value wrong), boolean tensors given vector code that has
no byte layout (a compile error), and a convolution with no filters that turned every schedule of its module off."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import relax_mlir
from relax_mlir.script import from_source


def _conv_module(x_shape, w_shape, strides, padding=(0, 0)):
    n, c, h, w = x_shape
    return from_source(f"""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor({tuple(x_shape)}, "float32"), w: R.Tensor({tuple(w_shape)}, "float32")):
        with R.dataflow():
            y = R.nn.conv2d(x, w, strides={list(strides)}, padding={list(padding)})
            R.output(y)
        return y
""")


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("x_shape, w_shape, strides, padding", [
    ((1, 1, 128, 128), (1, 1, 3, 3), (2, 1), (0, 0)),   # the im2col copy has 2^16+ points and one image
    ((1, 3, 64, 64), (8, 3, 7, 7), (2, 2), (3, 3)),     # a ResNet-like stem, one image
    ((2, 2, 96, 96), (4, 2, 3, 3), (1, 2), (1, 1)),
])
def test_strided_convolutions_of_few_images_split_across_threads_match_the_interpreter(threads, x_shape, w_shape,
                                                                                       strides, padding):
    mod = _conv_module(x_shape, w_shape, strides, padding)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape, dtype=np.float32)
    w = rng.standard_normal(w_shape, dtype=np.float32)
    got = relax_mlir.VirtualMachine(relax_mlir.compile(mod, num_threads=threads))["main"](x, w)
    want = relax_mlir.interpret(mod, "main", x, w)
    # float32 sums of C*KH*KW products in another order than the interpreter's
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.sqrt(np.prod(w_shape[1:])))


def test_no_generic_is_split_along_a_loop_read_through_floordiv_or_mod():
    """The rule behind the fix, on the im2col copy itself: its patch loop (read through floordiv and mod) is not a
    thread's chunk; the plan splits a loop that indexes plainly, or nothing."""
    from mlir import ir

    from relax_mlir.backend.schedule.elementwise import _splittable_loops

    text = """
#in = affine_map<(d0, d1, d2) -> (d0, d1 floordiv 9, (d2 floordiv 126) * 2 + (d1 mod 9) floordiv 3, d2 mod 126 + d1 mod 3)>
#out = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @f(%x: tensor<1x1x128x128xf32>, %o: tensor<1x9x7938xf32>) -> tensor<1x9x7938xf32> {
  %r = linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<1x1x128x128xf32>) outs(%o : tensor<1x9x7938xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  } -> tensor<1x9x7938xf32>
  return %r : tensor<1x9x7938xf32>
}
"""
    with ir.Context(), ir.Location.unknown():
        mod = ir.Module.parse(text)
        generic = mod.body.operations[0].regions[0].blocks[0].operations[0]
        assert _splittable_loops(generic.operation, 3) == {0}


@pytest.mark.parametrize("shape, perm", [((64, 32), [1, 0]), ((256, 1024), [1, 0]), ((8, 4, 128, 64), [3, 0, 1, 2])])
def test_boolean_transposes_compile_and_match(shape, perm):
    mod = from_source(f"""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor({tuple(shape)}, "float32")):
        with R.dataflow():
            t = R.permute_dims(R.greater(x, R.const(0.0, "float32")), {perm})
            R.output(t)
        return t
""")
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    for threads in (1, 2):
        got = relax_mlir.VirtualMachine(relax_mlir.compile(mod, num_threads=threads))["main"](x)
        np.testing.assert_array_equal(got, np.transpose(x > 0, perm))


def test_a_boolean_result_of_a_long_body_over_short_rows_compiles():
    """softmax over 10 classes compared with a threshold: the short-row vectorization would write vector<...xi1>."""
    mod = from_source("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((64, 10), "float32")):
        with R.dataflow():
            m = R.greater(R.nn.softmax(x, axis=1), R.const(0.1, "float32"))
            R.output(m)
        return m
""")
    x = np.random.default_rng(2).standard_normal((64, 10)).astype(np.float32)
    got = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](x)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_array_equal(got, relax_mlir.interpret(mod, "main", x))
    np.testing.assert_array_equal(got, e / e.sum(1, keepdims=True) > 0.1)


def test_a_convolution_with_no_filters_leaves_the_other_schedules_on():
    """Zero output channels: nothing to compute; the schedule failed on it and the fallback dropped every schedule
    of the module (with a misleading 'matmul schedule failed' warning)."""
    mod = from_source("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 3, 8, 8), "float32"), w: R.Tensor((0, 3, 3, 3), "float32"), a: R.Tensor((256, 512), "float32"), b: R.Tensor((512, 256), "float32")):
        with R.dataflow():
            y = R.nn.conv2d(x, w)
            z = R.matmul(a, b)
            R.output(y, z)
        return (y, z)
""")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        text = relax_mlir.to_mlir(mod, "scheduled")
        vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod, num_threads=1))
    assert "vector.contract" in text  # the matmul kept its schedule
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((256, 512), dtype=np.float32), rng.standard_normal((512, 256), dtype=np.float32)
    y, z = vm["main"](np.ones((4, 3, 8, 8), np.float32), np.ones((0, 3, 3, 3), np.float32), a, b)
    assert y.shape == (4, 0, 6, 6)
    np.testing.assert_allclose(z, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * np.sqrt(512))


@pytest.mark.parametrize("rows", [4, 64])
def test_a_boolean_mask_of_a_product_is_not_read_in_the_register_tiles(rows):
    """``where(mask, g @ w, 0)`` (dropout's gradient): the matmul's register tiles would read the bool mask as
    vectors (a compile error); the mask's generic stays a loop of its own, values as NumPy's."""
    mod = from_source(f"""
@I.ir_module
class Module:
    @R.function
    def main(m: R.Tensor(({rows}, 64), "bool"), g: R.Tensor(({rows}, 5), "float32"), w: R.Tensor((5, 64), "float32")):
        with R.dataflow():
            y = R.where(m, R.matmul(g, w), R.const(0.0, "float32"))
            R.output(y)
        return y
""")
    rng = np.random.default_rng(4)
    m = rng.random((rows, 64)) > 0.5
    g, w = rng.random((rows, 5), np.float32), rng.random((5, 64), np.float32)
    got = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](m, g, w)
    np.testing.assert_allclose(got, np.where(m, g.astype(np.float64) @ w, 0), rtol=1e-6, atol=1e-6)


def test_an_mlp_with_dropout_trains_compiled_as_interpreted():
    from relax_mlir import BlockBuilder, TensorStructInfo as T, Var, op
    from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer, Trainer

    x, w0, w1 = Var("x", T((16, 32), "float32")), Var("w0", T((32, 64), "float32")), Var("w1", T((64, 5), "float32"))
    bb = BlockBuilder()
    with bb.function("backbone", [x, w0, w1]):
        with bb.dataflow():
            hidden = bb.emit(op.nn.relu(op.matmul(x, w0)))
            dropped = bb.emit(op.nn.dropout(hidden, rate=0.3))
            out = bb.emit_output(op.matmul(bb.emit(dropped[0]), w1))
        bb.emit_func_output(out)
    mod = bb.get().with_attrs({"param_num": 2, "state_num": 0})
    setup = SetupTrainer(CrossEntropyLoss(), SGD(0.1), [T((16, 5), "float32"), T((16,), "int64")])
    rng = np.random.default_rng(5)
    xs, ys = rng.standard_normal((16, 32)).astype(np.float32), rng.integers(0, 5, 16)
    trainers = [Trainer(mod, 2, setup).build(target) for target in ("cpu", "numpy")]
    for t in trainers:
        t.xavier_uniform_init_params(seed=1)
    for _ in range(3):
        losses = [float(t.update_params(xs, ys)) for t in trainers]
        np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)
    for a, b in zip(trainers[0].params, trainers[1].params):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_returning_a_value_after_its_reshape_compiles():
    """``return (reshape(v), v)``: rewriting the returned reshape erased ``v``'s buffer while the return still
    held it (the process died: SIGSEGV or an assertion of MLIR's bindings). Run in a child process."""
    import subprocess
    import sys

    code = """
import numpy as np, relax_mlir
from relax_mlir.script import from_source
mod = from_source('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((33,), "float32")):
        with R.dataflow():
            v = R.exp(x)
            r = R.reshape(v, (3, 11))
            res = (r, v)
            R.output(res)
        return res
''')
x = np.arange(33, dtype=np.float32) / 10
a, b = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](x)
assert a.shape == (3, 11) and np.allclose(a.ravel(), np.exp(x)) and np.allclose(b, np.exp(x))
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "RELAX_MLIR_CACHE": "0"})
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
