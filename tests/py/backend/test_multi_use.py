"""multi_use.py: elementwise producers that the step also returns (Adam's new moments) are merged into their
elementwise consumer (the parameter's update) as extra results: one loop, the same values as NumPy's."""

from __future__ import annotations

import numpy as np
import pytest
from mlir import ir

from relax_mlir.backend.multi_use import merge_multi_use_producers
from relax_mlir.backend.pipeline import PipelineOptions, lower
from relax_mlir.backend.runtime import compile_module

B1, B2, LR, EPS = 0.9, 0.999, 0.01, 1e-8

# One Adam update written as the training step lowers it: m' and v' read the gradient g, the update reads m' and v'
# (and the bias corrections c1, c2, 0-d), and m', v' are returned too. ``{extra}`` adds a third user of m' when
# not empty; ``{mout}`` is m''s init.
_ADAM = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#s = affine_map<(d0, d1) -> ()>
func.func @main(%w: tensor<24x40xf32>, %g: tensor<24x40xf32>, %m: tensor<24x40xf32>, %v: tensor<24x40xf32>,
                %c1: tensor<f32>, %c2: tensor<f32>) -> (tensor<24x40xf32>, tensor<24x40xf32>, tensor<24x40xf32>{extra_type}) {{
  %b1 = arith.constant {b1:e} : f32
  %nb1 = arith.constant {nb1:e} : f32
  %b2 = arith.constant {b2:e} : f32
  %nb2 = arith.constant {nb2:e} : f32
  %lr = arith.constant {lr:e} : f32
  %eps = arith.constant {eps:e} : f32
  %e = tensor.empty() : tensor<24x40xf32>
  %m2 = linalg.generic {{indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%m, %g : tensor<24x40xf32>, tensor<24x40xf32>) outs({mout} : tensor<24x40xf32>) {{
  ^bb0(%mi: f32, %gi: f32, %o: f32):
    %a = arith.mulf %mi, %b1 : f32
    %b = arith.mulf %gi, %nb1 : f32
    %c = arith.addf %a, %b : f32
    linalg.yield %c : f32
  }} -> tensor<24x40xf32>
  %v2 = linalg.generic {{indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%v, %g : tensor<24x40xf32>, tensor<24x40xf32>) outs(%e : tensor<24x40xf32>) {{
  ^bb0(%vi: f32, %gi: f32, %o: f32):
    %a = arith.mulf %vi, %b2 : f32
    %sq = arith.mulf %gi, %gi : f32
    %b = arith.mulf %sq, %nb2 : f32
    %c = arith.addf %a, %b : f32
    linalg.yield %c : f32
  }} -> tensor<24x40xf32>
  {extra}
  %w2 = linalg.generic {{indexing_maps = [#id, #id, #s, #id, #s, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%w, %m2, %c1, %v2, %c2 : tensor<24x40xf32>, tensor<24x40xf32>, tensor<f32>, tensor<24x40xf32>, tensor<f32>)
      outs(%e : tensor<24x40xf32>) {{
  ^bb0(%wi: f32, %mi: f32, %ci: f32, %vi: f32, %di: f32, %o: f32):
    %mh = arith.divf %mi, %ci : f32
    %vh = arith.divf %vi, %di : f32
    %r = math.sqrt %vh : f32
    %den = arith.addf %r, %eps : f32
    %q = arith.divf %mh, %den : f32
    %st = arith.mulf %q, %lr : f32
    %n = arith.subf %wi, %st : f32
    linalg.yield %n : f32
  }} -> tensor<24x40xf32>
  return %m2, %v2, %w2{extra_ret} : tensor<24x40xf32>, tensor<24x40xf32>, tensor<24x40xf32>{extra_type}
}}
"""
_THIRD_USER = """%neg = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m2 : tensor<24x40xf32>) outs(%e : tensor<24x40xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.negf %x : f32
    linalg.yield %y : f32
  } -> tensor<24x40xf32>"""


def _adam(extra: bool = False, mout: str = "%e") -> str:
    return _ADAM.format(b1=B1, nb1=1 - B1, b2=B2, nb2=1 - B2, lr=LR, eps=EPS, mout=mout,
                        extra=_THIRD_USER if extra else "", extra_ret=", %neg" if extra else "",
                        extra_type=", tensor<24x40xf32>" if extra else "")


def _inputs():
    rng = np.random.default_rng(2)
    w, g, m = (rng.standard_normal((24, 40)).astype(np.float32) for _ in range(3))
    v = rng.uniform(0.1, 1.0, (24, 40)).astype(np.float32)
    return w, g, m, v, np.array(1 - B1 ** 3, np.float32), np.array(1 - B2 ** 3, np.float32)


def _numpy(w, g, m, v, c1, c2):
    w, g, m, v = (a.astype(np.float64) for a in (w, g, m, v))
    m2, v2 = B1 * m + (1 - B1) * g, B2 * v + (1 - B2) * g * g
    return m2, v2, w - LR * (m2 / float(c1)) / (np.sqrt(v2 / float(c2)) + EPS)


def _merged(text: str) -> tuple[int, str]:
    with ir.Context() as ctx:
        ctx.allow_unregistered_dialects = False
        module = ir.Module.parse(text)
        count = merge_multi_use_producers(module)
        module.operation.verify()
        return count, str(module)


def test_adams_moments_are_computed_in_the_update_and_returned_from_it():
    count, text = _merged(_adam())
    assert count == 2
    generics = text.split("linalg.generic")[1:]
    assert len(generics) == 1, text  # one loop: reads w, g, m, v once; writes m', v', w'
    assert "-> (tensor<24x40xf32>, tensor<24x40xf32>, tensor<24x40xf32>)" in generics[0]
    ins = generics[0].split("ins(")[1].split(":")[0]
    assert sorted(ins.replace(" ", "").split(",")) == ["%arg0", "%arg1", "%arg2", "%arg3", "%arg4", "%arg5"], ins
    ret = text.split("return")[1]
    assert ret.count("#0") == 1 and ret.count("#1") == 1 and ret.count("#2") == 1, ret


@pytest.mark.parametrize("threads", [1, 2])
def test_the_merged_update_gives_numpys_values(threads):
    """Compiled through the whole pipeline (merged at the fused stage, the three results in three buffers)."""
    fused = lower(_adam(), "fused")
    assert fused.count("linalg.generic") == 1, fused
    args = _inputs()
    got = compile_module(_adam(), options=PipelineOptions(num_threads=threads))["main"](*args)
    for a, want in zip(got, _numpy(*args)):
        np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-6)  # float32 arithmetic against float64
    assert not np.shares_memory(got[0], got[1]) and not np.shares_memory(got[1], got[2])


def test_a_producer_with_another_elementwise_user_is_left_alone():
    """m' is also negated by a third generic: merging would need that generic to come after the merged op, and
    activations read twice are not merged (module docstring); v' still is."""
    count, text = _merged(_adam(extra=True))
    assert count == 1
    assert text.count("linalg.generic") == 3, text
    args = _inputs()
    got = compile_module(_adam(extra=True), options=PipelineOptions(num_threads=1))["main"](*args)
    want = _numpy(*args)
    for a, b in zip(got[:3], want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[3], -want[0], rtol=1e-5, atol=1e-6)


def test_a_producer_whose_init_is_not_empty_is_left_alone():
    """m' written into the gradient's buffer (``outs(%g)``): not a plain elementwise init, not merged."""
    count, text = _merged(_adam(mout="%g"))
    assert count == 1 and text.count("linalg.generic") == 2, text


_MOMENTUM = """
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%x: tensor<16x24xf32>, %d: tensor<16x32xf32>, %w: tensor<24x32xf32>, %v: tensor<24x32xf32>)
    -> (tensor<24x32xf32>, tensor<24x32xf32>) {
  %zero = arith.constant 0.0 : f32
  %mu = arith.constant 0.9 : f32
  %lr = arith.constant 0.01 : f32
  %xe = tensor.empty() : tensor<24x16xf32>
  %xt = linalg.transpose ins(%x : tensor<16x24xf32>) outs(%xe : tensor<24x16xf32>) permutation = [1, 0]
  %e = tensor.empty() : tensor<24x32xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<24x32xf32>) -> tensor<24x32xf32>
  %g = linalg.matmul ins(%xt, %d : tensor<24x16xf32>, tensor<16x32xf32>) outs(%acc : tensor<24x32xf32>) -> tensor<24x32xf32>
  %v2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%v, %g : tensor<24x32xf32>, tensor<24x32xf32>) outs(%e : tensor<24x32xf32>) {
  ^bb0(%vi: f32, %gi: f32, %o: f32):
    %a = arith.mulf %vi, %mu : f32
    %c = arith.addf %a, %gi : f32
    linalg.yield %c : f32
  } -> tensor<24x32xf32>
  %w2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w, %v2 : tensor<24x32xf32>, tensor<24x32xf32>) outs(%e : tensor<24x32xf32>) {
  ^bb0(%wi: f32, %vi: f32, %o: f32):
    %s = arith.mulf %vi, %lr : f32
    %n = arith.subf %wi, %s : f32
    linalg.yield %n : f32
  } -> tensor<24x32xf32>
  return %v2, %w2 : tensor<24x32xf32>, tensor<24x32xf32>
}
"""


def test_momentums_velocity_is_merged_and_both_run_in_the_matmuls_tiles():
    """The new velocity (the gradient product's only reader, also returned) is merged into the weight's update; the
    merged two-result op then runs in the product's register tiles (epilogue.py), which write the velocity and the
    weight: no generic is left, and the values are NumPy's."""
    count, text = _merged(_MOMENTUM)
    assert count == 1 and text.count("linalg.generic") == 1
    scheduled = lower(_MOMENTUM, "scheduled", PipelineOptions(num_threads=1))
    assert "linalg.generic" not in scheduled, scheduled
    rng = np.random.default_rng(4)
    x, d = rng.standard_normal((16, 24)).astype(np.float32), rng.standard_normal((16, 32)).astype(np.float32)
    w, v = rng.standard_normal((24, 32)).astype(np.float32), rng.standard_normal((24, 32)).astype(np.float32)
    v2, w2 = compile_module(_MOMENTUM, options=PipelineOptions(num_threads=1))["main"](x, d, w, v)
    want_v = 0.9 * v.astype(np.float64) + x.astype(np.float64).T @ d
    np.testing.assert_allclose(v2, want_v, rtol=1e-5, atol=1e-5 * 16)  # float32 sums of 16 products
    np.testing.assert_allclose(w2, w - 0.01 * want_v, rtol=1e-5, atol=1e-5)


def test_a_10_class_velocity_is_merged_its_matmul_takes_no_epilogue():
    """With 10 columns the gradient product is padded to whole vectors (schedule/matmul.py, padded_width), which
    takes no epilogue: the velocity is merged into the update like Adam's moments (30 columns: 16 + 8 + 4 + 2
    pieces, padded to 32, the same)."""
    for n in (10, 30):
        count, text = _merged(_MOMENTUM.replace("x32xf32", f"x{n}xf32"))
        assert count == 1 and text.count("linalg.generic") == 1, n


def test_an_integer_two_result_update_runs_in_the_tiles_a_row_at_a_time():
    """The momentum step in int32: four tiles held (velocity and weight read, both written) do not fit the
    registers, so the tiles compute the body a row at a time and insert the rows into tiles of the results' own
    type (integers here); values are NumPy's, exactly."""
    text = (_MOMENTUM.replace("f32", "i32").replace("0.0 : i32", "0 : i32").replace("0.9 : i32", "3 : i32")
            .replace("0.01 : i32", "2 : i32").replace("arith.mulf", "arith.muli").replace("arith.addf", "arith.addi")
            .replace("arith.subf", "arith.subi"))
    scheduled = lower(text, "scheduled", PipelineOptions(num_threads=1))
    assert "linalg.generic" not in scheduled and "vector.insert" in scheduled, scheduled
    rng = np.random.default_rng(0)
    x, d = rng.integers(-5, 5, (16, 24)).astype(np.int32), rng.integers(-5, 5, (16, 32)).astype(np.int32)
    w, v = rng.integers(-5, 5, (24, 32)).astype(np.int32), rng.integers(-5, 5, (24, 32)).astype(np.int32)
    v2, w2 = compile_module(text, options=PipelineOptions(num_threads=1))["main"](x, d, w, v)
    want_v = 3 * v + x.T @ d
    np.testing.assert_array_equal(v2, want_v)
    np.testing.assert_array_equal(w2, w - 2 * want_v)
