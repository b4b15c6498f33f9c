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
