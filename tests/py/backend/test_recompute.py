"""recompute.py: a cheap elementwise producer read by several elementwise consumers is fused into each of them."""

from __future__ import annotations

import numpy as np
import pytest
from mlir import ir

from relax_mlir.backend.pipeline import PipelineOptions, lower
from relax_mlir.backend.recompute import recompute_cheap_producers
from relax_mlir.backend.runtime import compile_module

# A dense layer with ReLU and ReLU's gradient: ``a = z + b`` is read by ``relu(a)`` and by ``a < 0 ? 0 : g``.
# ``{body}`` is the producer's body (``%s`` its result), ``{third}`` an extra consumer of ``a`` when not empty.
_LAYER = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @main(%x: tensor<16x32xf32>, %w: tensor<32x48xf32>, %b: tensor<48xf32>, %g: tensor<16x48xf32>)
    -> (tensor<16x48xf32>, tensor<16x48xf32>, tensor<16xf32>) {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x48xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<16x48xf32>) -> tensor<16x48xf32>
  %z = linalg.matmul ins(%x, %w : tensor<16x32xf32>, tensor<32x48xf32>) outs(%acc : tensor<16x48xf32>) -> tensor<16x48xf32>
  %a = linalg.generic {{indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%z, %b : tensor<16x48xf32>, tensor<48xf32>) outs(%e : tensor<16x48xf32>) {{
  ^bb0(%zi: f32, %bi: f32, %o: f32):
    {body}
    linalg.yield %s : f32
  }} -> tensor<16x48xf32>
  %r = linalg.generic {{indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%a : tensor<16x48xf32>) outs(%e : tensor<16x48xf32>) {{
  ^bb0(%ai: f32, %o: f32):
    %m = arith.maximumf %ai, %zero : f32
    linalg.yield %m : f32
  }} -> tensor<16x48xf32>
  %d = linalg.generic {{indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%a, %g : tensor<16x48xf32>, tensor<16x48xf32>) outs(%e : tensor<16x48xf32>) {{
  ^bb0(%ai: f32, %gi: f32, %o: f32):
    %neg = arith.cmpf olt, %ai, %zero : f32
    %sel = arith.select %neg, %zero, %gi : f32
    linalg.yield %sel : f32
  }} -> tensor<16x48xf32>
  %re = tensor.empty() : tensor<16xf32>
  %racc = linalg.fill ins(%zero : f32) outs(%re : tensor<16xf32>) -> tensor<16xf32>
  %sum = linalg.generic {{indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}}
      ins({third} : tensor<16x48xf32>) outs(%racc : tensor<16xf32>) {{
  ^bb0(%v: f32, %o: f32):
    %t = arith.addf %v, %o : f32
    linalg.yield %t : f32
  }} -> tensor<16xf32>
  return %r, %d, %sum : tensor<16x48xf32>, tensor<16x48xf32>, tensor<16xf32>
}}
"""
_ADD = "%s = arith.addf %zi, %bi : f32"


def _layer(body: str = _ADD, third: str = "%g") -> str:
    return _LAYER.format(body=body, third=third)


def _run(text: str, producer):
    """The compiled function's results next to NumPy's (float64) for the producer ``producer(z, b)``."""
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((32, 48)).astype(np.float32)
    b, g = rng.standard_normal(48).astype(np.float32), rng.standard_normal((16, 48)).astype(np.float32)
    got = compile_module(text, options=PipelineOptions(num_threads=1))["main"](x, w, b, g)
    a = producer(x.astype(np.float64) @ w, b)
    return got, (np.maximum(a, 0), np.where(a < 0, 0, g), None)


def test_bias_addition_is_recomputed_in_relu_and_its_gradient():
    """The bias addition has two elementwise users: each gets a copy, fused into it (two generics left out of
    three, both adding the bias), and the values are NumPy's."""
    text = _layer()
    fused = lower(text, "fused")
    generics = fused.split("linalg.generic")[1:]
    assert len(generics) == 3, fused  # relu(z + b), (z + b < 0 ? 0 : g), and the row sums of g
    assert sum("arith.addf %in, %in_" in g.split("linalg.yield")[0] and "maximumf" in g for g in generics) == 1
    assert sum("arith.addf" in g and "arith.cmpf olt" in g for g in generics) == 1, fused
    got, want = _run(text, lambda z, b: z + b)
    for have, expected in zip(got[:2], want[:2]):
        np.testing.assert_allclose(have, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("body, third, why", [
    ("%s = arith.divf %zi, %bi : f32", "%g", "a division is not cheap"),
    ("%s0 = arith.addf %zi, %bi : f32\n    %s1 = arith.mulf %s0, %s0 : f32\n    %s2 = arith.addf %s1, %zi : f32\n"
     "    %s3 = arith.mulf %s2, %bi : f32\n    %s = arith.addf %s3, %s0 : f32", "%g", "five ops are too many"),
    (_ADD, "%a", "a reduction reads it too"),
])
def test_producers_that_stay_whole(body, third, why):
    """Not copied, so the fusion pass leaves the producer a loop of its own (four generics): an expensive or long
    body, or a user that is not elementwise (a reduction would compute the producer whole anyway)."""
    with ir.Context():
        module = ir.Module.parse(lower(_layer(body, third), "linalg"))
        assert recompute_cheap_producers(module) == 0, why
    assert lower(_layer(body, third), "fused").count("linalg.generic") == 4, why


def test_recompute_counts_the_producers_it_copied():
    with ir.Context():
        module = ir.Module.parse(lower(_layer(), "linalg"))
        assert recompute_cheap_producers(module) == 1
        assert str(module).count("linalg.generic") == 5  # the producer and its copy, before the fusion pass
