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


# Three functions whose loop nests are the same kernel but for its name (``same_a``, ``same_b``: scale by 2) and
# one that differs in a constant only (``other``: scale by 3).
_SCALE = """
func.func @{name}(%a: memref<64xf32>, %b: memref<64xf32>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %k = arith.constant {k} : f32
  scf.for %i = %c0 to %c64 step %c1 {{
    %x = memref.load %a[%i] : memref<64xf32>
    %y = arith.mulf %x, %k : f32
    memref.store %y, %b[%i] : memref<64xf32>
  }} {{loop_annotation = #llvm.loop_annotation<unroll = <disable = true>>}}
  return
}}
"""
_THREE = "".join(_SCALE.format(name=n, k=k) for n, k in (("same_a", "2.0"), ("same_b", "2.0"), ("other", "3.0")))


def _kernel_calls(module: ir.Module) -> dict[str, list[str]]:
    calls: dict[str, list[str]] = {}
    for op in module.body.operations:
        op = op.operation
        if not ir.StringAttr(op.attributes["sym_name"]).value.startswith(outline.KERNEL_PREFIX):
            found = []

            def visit(inner: ir.Operation) -> ir.WalkResult:
                if inner.name == "func.call":
                    found.append(ir.FlatSymbolRefAttr(inner.attributes["callee"]).value)
                return ir.WalkResult.ADVANCE

            op.walk(visit)
            calls[ir.StringAttr(op.attributes["sym_name"]).value] = found
    return calls


def test_kernels_equal_but_for_their_names_are_compiled_once():
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(_THREE)
        assert outline.outline_kernels(module) == 3
        module.operation.verify()
        names = [ir.StringAttr(op.attributes["sym_name"]).value for op in outline.kernels(module, "func.func")]
        assert names == ["relax_mlir_kernel_same_a_0", "relax_mlir_kernel_other_0"]  # same_b's copy erased
        assert _kernel_calls(module) == {"same_a": ["relax_mlir_kernel_same_a_0"],
                                         "same_b": ["relax_mlir_kernel_same_a_0"],
                                         "other": ["relax_mlir_kernel_other_0"]}


_TENSOR_SCALE = """
func.func @{name}(%a: tensor<64xf32>) -> tensor<64xf32> {{
  %k = arith.constant {k} : f32
  %e = tensor.empty() : tensor<64xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}} ins(%a : tensor<64xf32>) outs(%e : tensor<64xf32>) {{
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %k : f32
    linalg.yield %y : f32
  }} -> tensor<64xf32>
  return %r : tensor<64xf32>
}}
"""


def test_merged_kernels_compute_each_callers_result():
    import numpy as np

    from relax_mlir.backend.runtime import compile_module

    text = "".join(_TENSOR_SCALE.format(name=n, k=k) for n, k in (("same_a", "2.0"), ("same_b", "2.0"),
                                                                    ("other", "3.0")))
    compiled = compile_module(text)
    assert compiled.llvm_text.count("llvm.func @relax_mlir_kernel_") == 2
    x = np.arange(64, dtype=np.float32) - 20.5
    for name, k in (("same_a", 2), ("same_b", 2), ("other", 3)):
        np.testing.assert_array_equal(compiled[name](x), x * k)
