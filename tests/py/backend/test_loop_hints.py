"""Which loops LLVM may unroll (loop_hints.py): short scalar loop nests only."""

from __future__ import annotations

from mlir import ir

from relax_mlir.backend import loop_hints

LOOPS = """
func.func @f(%a: memref<64xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c17 = arith.constant 17 : index
  %c64 = arith.constant 64 : index
  %z = arith.constant 0.0 : f32
  %v = arith.constant dense<0.0> : vector<8xf32>
  scf.for %i = %c0 to %c16 step %c1 {
    memref.store %z, %a[%i] : memref<64xf32>
  } {tag = "short"}
  scf.for %i = %c0 to %c17 step %c1 {
    memref.store %z, %a[%i] : memref<64xf32>
  } {tag = "seventeen"}
  scf.for %i = %c0 to %c64 step %c8 {
    vector.store %v, %a[%i] : memref<64xf32>, vector<8xf32>
  } {tag = "vector"}
  scf.for %i = %c0 to %n step %c1 {
    scf.for %j = %c0 to %c8 step %c1 {
      memref.store %z, %a[%j] : memref<64xf32>
    } {tag = "inner"}
  } {tag = "dynamic"}
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %j = %c0 to %c64 step %c1 {
      memref.store %z, %a[%j] : memref<64xf32>
    } {tag = "long_inner"}
  } {tag = "short_around_long"}
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %j = %c0 to %c16 step %c1 {
      memref.store %z, %a[%j] : memref<64xf32>
    } {tag = "short_inner"}
  } {tag = "short_around_short"}
  return
}
"""


def _marked(module: ir.Module) -> dict[str, bool]:
    found = {}

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "scf.for":
            found[ir.StringAttr(op.attributes["tag"]).value] = "loop_annotation" in op.attributes
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def test_only_short_scalar_loops_are_left_to_llvm():
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(LOOPS)
        assert loop_hints.mark_unrolling(module, max_trip=16) == 5
        assert _marked(module) == {"short": False, "seventeen": True, "vector": True, "dynamic": True,
                                   "inner": False, "long_inner": True, "short_around_long": True,
                                   "short_inner": False, "short_around_short": False}


def test_trip_counts():
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(LOOPS)
        loops = []
        module.operation.walk(lambda op: (loops.append(op) if op.name == "scf.for" else None)
                              or ir.WalkResult.ADVANCE)
        assert [loop_hints.trip_count(op) for op in loops] == [16, 17, 8, 8, None, 64, 8, 16, 8]  # post-order: the inner loop first
