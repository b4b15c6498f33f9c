"""Loop coalescing (``backend/schedule/coalesce.py``): which loops merge, and values as the NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir.backend.pipeline import PipelineOptions
from relax_mlir.script import from_source

BATCH_NORM_LIKE = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(({n}, 16, 14, 14), "float32"), scale: R.Tensor((1, 16, 1, 1), "float32"),
             shift: R.Tensor((16, 1, 1), "float32")):
        with R.dataflow():
            y = R.add(R.multiply(x, scale), shift)
            z = R.nn.relu(y)
            s = R.sum(z, axis=[0, 2, 3])
            t = R.permute_dims(z, [0, 1, 3, 2])
            R.output(z, s, t)
        return (z, s, t)
"""


def _module(n):
    return from_source(BATCH_NORM_LIKE.format(n=n))


@pytest.mark.parametrize("n", [64, "n"])
def test_coalesced_loops_match_the_interpreter(n):
    """Broadcasts from (1, C, 1, 1) and (C, 1, 1), a reduction over (n, h, w), and a transpose of (h, w) (which
    must not merge them): the values are the interpreter's, for a static and a symbolic batch."""
    mod = _module(n)
    text = rm.to_mlir(mod, "scheduled", options=PipelineOptions(num_threads=1))
    assert "x16x196xf32" in text  # h and w merged
    vm = rm.VirtualMachine(rm.compile(mod, num_threads=1))
    rng = np.random.default_rng(0)
    for batch in ([64] if n == 64 else [1, 7]):
        args = (rng.standard_normal((batch, 16, 14, 14), dtype=np.float32),
                rng.standard_normal((1, 16, 1, 1), dtype=np.float32), rng.standard_normal((16, 1, 1), dtype=np.float32))
        got, want = vm["main"](*args), rm.interpret(mod, "main", *args)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[2], want[2])
        # a float32 sum of 196 * batch values in another order: a few ulps of the sum of magnitudes
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-5 * np.abs(want[0]).sum(axis=(0, 2, 3)).max())


def test_what_merges():
    """loop_groups on the fused generics: runs read contiguously by every operand merge; a loop one operand
    reads and another does not (a broadcast of it) stays apart; reduction and parallel loops never merge."""
    from mlir import ir

    from relax_mlir.backend.build import lower_to
    from relax_mlir.backend.schedule.coalesce import loop_groups

    module = lower_to(_module(64), "fused", options=PipelineOptions(num_threads=1))
    found = []
    with module.context:
        def visit(op):
            if op.name == "linalg.generic":
                found.append(loop_groups(op))
            return ir.WalkResult.ADVANCE
        module.operation.walk(visit)
    assert [[0], [1], [2, 3]] in found  # the fused multiply-add-relu and the sum over (n, h, w)
    assert all(g is None or [2, 3] in g for g in found)  # nothing else merges (the transpose stays 4-D)


CROPPED = """
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @main(%x: tensor<4x3x6x8xf32>) -> tensor<4x3x6x6xf32> {
  %s = tensor.extract_slice %x[0, 0, 0, 0] [4, 3, 6, 6] [1, 1, 1, 1] : tensor<4x3x6x8xf32> to tensor<4x3x6x6xf32>
  %e = tensor.empty() : tensor<4x3x6x6xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
       ins(%s : tensor<4x3x6x6xf32>) outs(%e : tensor<4x3x6x6xf32>) {
  ^bb0(%i: f32, %o: f32):
    %n = arith.negf %i : f32
    linalg.yield %n : f32
  } -> tensor<4x3x6x6xf32>
  return %r : tensor<4x3x6x6xf32>
}
"""


def test_a_cropped_slice_keeps_its_cut_dims_apart():
    """An operand sliced from wider rows (a convolution's output cropped: 6 of 8 columns) has its rows evenly
    spaced over (n, c, h) but (h, w) is not contiguous: (n, c, h) merge and w stays apart, so bufferization
    copies nothing before the generic. Without the crop the same generic merges all four loops."""
    from mlir import ir

    from relax_mlir.backend.schedule.coalesce import loop_groups

    def groups(text):
        with ir.Context(), ir.Location.unknown():
            module = ir.Module.parse(text)
            found = []
            module.operation.walk(lambda op: (found.append(loop_groups(op)) if op.name == "linalg.generic"
                                              else None) or ir.WalkResult.ADVANCE)
            return found[0]

    assert groups(CROPPED) == [[0, 1, 2], [3]]
    whole = CROPPED.replace("[0, 0, 0, 0] [4, 3, 6, 6]", "[0, 0, 0, 0] [4, 3, 6, 8]").replace(
        "to tensor<4x3x6x6xf32>", "to tensor<4x3x6x8xf32>").replace("ins(%s : tensor<4x3x6x6xf32>)",
                                                                     "ins(%s : tensor<4x3x6x8xf32>)")
    whole = whole.replace("tensor<4x3x6x6xf32>", "tensor<4x3x6x8xf32>")
    assert groups(whole) == [[0, 1, 2, 3]]


@pytest.mark.parametrize("subscripts,shapes", [
    ("bii->bi", [(2, 3, 3)]), ("...ii->...i", [(2, 2, 4, 4)]), ("ijj->ij", [(3, 4, 4)]),
    ("bij,bjj->bij", [(3, 5, 7), (3, 7, 7)]), ("bii->ib", [(64, 96, 96)])])
def test_a_diagonal_read_is_not_coalesced(subscripts, shapes):
    """An einsum's diagonal next to another loop reads its operand through ``(d0, d1, d1)``: loops d0 and d1 look
    adjacent at the map's first d1, but the operand's last dim is d1 again, so no collapse of adjacent dims walks it.
    Such a generic keeps its loops (it used to be planned past the operand's rank: IndexError); the values are
    NumPy's, small and (the last, split across threads) large."""
    from relax_mlir import BlockBuilder, TensorStructInfo, Var, op
    from relax_mlir.ir.expr import Tuple

    params = [Var(f"a{i}", TensorStructInfo(s, "float32")) for i, s in enumerate(shapes)]
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(op.einsum(Tuple(params), subscripts))
        bb.emit_func_output(out)
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
    got = rm.VirtualMachine(rm.compile(bb.get(), num_threads=2))["main"](*arrays)
    np.testing.assert_allclose(got, np.einsum(subscripts, *arrays), rtol=1e-6, atol=1e-6)


DIAGONAL = """
#diag = affine_map<(d0, d1) -> (d0, d1, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%x: tensor<2x3x3xf32>) -> tensor<2x3xf32> {
  %e = tensor.empty() : tensor<2x3xf32>
  %r = linalg.generic {indexing_maps = [#diag, #id], iterator_types = ["parallel", "parallel"]}
       ins(%x : tensor<2x3x3xf32>) outs(%e : tensor<2x3xf32>) {
  ^bb0(%i: f32, %o: f32):
    linalg.yield %i : f32
  } -> tensor<2x3xf32>
  return %r : tensor<2x3xf32>
}
"""


def test_a_map_reading_a_dim_twice_is_not_planned():
    from mlir import ir

    from relax_mlir.backend.schedule.coalesce import coalesce, loop_groups

    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(DIAGONAL)
        found = []
        module.operation.walk(lambda op: (found.append(op) if op.name == "linalg.generic" else None)
                              or ir.WalkResult.ADVANCE)
        assert loop_groups(found[0]) is None and not coalesce(found[0])
