"""Kernel outlining's grouping (outline.py): allocations and views move up, never above a deallocation; adjacent
loop nests (with copies between them) share a kernel up to the size limit; a nest LLVM unrolls stays alone."""

from __future__ import annotations

from mlir import ir

from relax_mlir.backend import outline

FUNC = """
func.func @f(%a: memref<64xf32>, %b: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c64 = arith.constant 64 : index
  %z = arith.constant 0.0 : f32
  scf.for %i = %c0 to %c64 step %c1 {
    memref.store %z, %a[%i] : memref<64xf32>
  } {loop_annotation = 1, tag = "first"}
  %t = memref.alloc() : memref<64xf32>
  %v = memref.expand_shape %t [[0, 1]] output_shape [8, 8] : memref<64xf32> into memref<8x8xf32>
  scf.for %i = %c0 to %c64 step %c1 {
    memref.store %z, %t[%i] : memref<64xf32>
  } {loop_annotation = 1, tag = "second"}
  memref.copy %t, %b : memref<64xf32> to memref<64xf32>
  scf.for %i = %c0 to %c4 step %c1 {
    memref.store %z, %b[%i] : memref<64xf32>
  } {tag = "unrolled"}
  memref.dealloc %t : memref<64xf32>
  %u = memref.alloc() : memref<64xf32>
  scf.for %i = %c0 to %c64 step %c1 {
    memref.store %z, %u[%i] : memref<64xf32>
  } {loop_annotation = 1, tag = "after_free"}
  memref.dealloc %u : memref<64xf32>
  return
}
"""


def _top(module: ir.Module) -> ir.Block:
    return module.body.operations[0].regions[0].blocks[0]


def _names(block: ir.Block) -> list[str]:
    return [op.operation.name for op in block.operations if op.operation.name != "arith.constant"]


def _tags(ops: list[ir.Operation]) -> list[str]:
    return [ir.StringAttr(op.attributes["tag"]).value if "tag" in op.attributes else op.name for op in ops]


def test_memory_moves_up_but_not_above_a_deallocation():
    with ir.Context() as ctx, ir.Location.unknown():
        ctx.allow_unregistered_dialects = True
        module = ir.Module.parse(FUNC)
        outline._hoist_memory(_top(module))
        assert _names(_top(module)) == [
            "memref.alloc", "memref.expand_shape",  # above the first loop now
            "scf.for", "scf.for", "memref.copy", "scf.for", "memref.dealloc",
            "memref.alloc",  # stays below the deallocation it may reuse
            "scf.for", "memref.dealloc", "func.return"]


def test_adjacent_nests_and_copies_share_a_kernel_and_an_unrolled_nest_stays_alone(monkeypatch):
    with ir.Context() as ctx, ir.Location.unknown():
        ctx.allow_unregistered_dialects = True
        module = ir.Module.parse(FUNC)
        outline._hoist_memory(_top(module))
        groups = [_tags(ops) for ops, _ in outline._groups(_top(module))]
        assert groups == [["first", "second", "memref.copy"], ["unrolled"], ["after_free"]]
        monkeypatch.setattr(outline, "MERGE_BELOW_OPS", 1)  # every nest over the limit: one kernel each
        groups = [_tags(ops) for ops, _ in outline._groups(_top(module))]
        assert groups == [["first"], ["second"], ["unrolled"], ["after_free"]]  # the copy alone stays
