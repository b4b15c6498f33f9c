"""Store booleans one per byte: rewrite ``memref<...xi1>`` to ``memref<...xi8>`` before the LLVM conversion.

Why: in MLIR 22 (22.1.8 wheels, assertions on) ``finalize-memref-to-llvm`` aborts the whole process on any
``memref.load``/``memref.store`` of ``i1`` (``Assertion `integralElementType.getWidth() >= 8' failed``).
NumPy stores ``bool`` as one byte holding 0 or 1, which is exactly an ``i8`` memref, so after the linalg ops
have become loops every ``i1`` memref is retyped to ``i8``, each load of it is followed by ``arith.trunci`` and
each store is preceded by ``arith.extui``. Globals holding ``i1`` constants are rewritten the same way.

Runs on memrefs after ``convert-linalg-to-loops`` and ``convert-vector-to-scf``; a *vector* access to an ``i1``
memref (not produced by our schedules) is reported as unsupported rather than crashing.
"""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import arith

_SCALAR_ACCESS = {"memref.load", "memref.store"}


def _widen(t: ir.Type) -> ir.Type | None:
    if isinstance(t, ir.MemRefType) and str(t.element_type) == "i1":
        return ir.MemRefType.get(t.shape, ir.IntegerType.get_signless(8), t.layout, t.memory_space)
    if isinstance(t, ir.UnrankedMemRefType) and str(t.element_type) == "i1":
        return ir.UnrankedMemRefType.get(ir.IntegerType.get_signless(8), t.memory_space)
    return None


def _widen_function_type(op: ir.Operation) -> None:
    ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
    inputs = [_widen(t) or t for t in ftype.inputs]
    results = [_widen(t) or t for t in ftype.results]
    op.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))


def _widen_global(op: ir.Operation) -> None:
    new = _widen(ir.TypeAttr(op.attributes["type"]).value)
    if new is None:
        return
    op.attributes["type"] = ir.TypeAttr.get(new)
    if "initial_value" in op.attributes and isinstance(op.attributes["initial_value"], ir.DenseElementsAttr):
        op.attributes["initial_value"] = _bytes_of_bools(ir.DenseElementsAttr(op.attributes["initial_value"]))


def _bytes_of_bools(values: ir.DenseElementsAttr) -> ir.DenseElementsAttr:
    """The same values as one ``i8`` (0 or 1) each. Rebuilt from the values, not the printed text: MLIR prints
    large constants as packed hex, one bit per ``i1``."""
    shape = ir.ShapedType(values.type).shape
    byte = ir.IntegerType.get_signless(8)
    if values.is_splat:
        one = ir.IntegerAttr(values.get_splat_value()).value != 0
        return ir.DenseElementsAttr.get_splat(ir.RankedTensorType.get(shape, byte), ir.IntegerAttr.get(byte, int(one)))
    data = np.array(ir.DenseIntElementsAttr(values)).astype(np.int8).reshape(shape)
    return ir.DenseElementsAttr.get(data, type=ir.RankedTensorType.get(shape, byte))


def _is_bool_access(op: ir.Operation) -> bool:
    """A load of i1 (or a store of an i1 value) into a memref whose storage is now i8."""
    value = op.results[0] if op.name == "memref.load" else op.operands[0]
    return str(value.type) == "i1"


def _bool_vector_on_bytes(op: ir.Operation) -> bool:
    """A vector read or write of i1 data to a byte memref (a mask operand of i1 is fine)."""
    if not any(isinstance(v.type, ir.MemRefType) and str(v.type.element_type) == "i8" for v in op.operands):
        return False
    data = op.results[0] if len(op.results) else op.operands[0]
    return isinstance(data.type, ir.VectorType) and str(data.type.element_type) == "i1"


#: Ops a memref can come from that is not derived from another memref (subviews, casts and reshapes of an ``i1``
#: memref have a source among these, or among the functions' arguments).
_MEMREF_SOURCES = frozenset({"memref.alloc", "memref.alloca", "memref.get_global", "memref.global", "memref.view"})


def _has_bool_memrefs(module: ir.Module) -> bool:
    """Whether any memref of ``module`` holds ``i1``: a look at the memrefs' sources only (a fifth of the time of
    the full walk that retypes them, which most modules, holding no boolean buffer, then skip)."""
    found = [False]

    def visit(op: ir.Operation) -> ir.WalkResult:
        name = op.name
        if name in _MEMREF_SOURCES:
            types = ([ir.TypeAttr(op.attributes["type"]).value] if name == "memref.global"
                     else [r.type for r in op.results])
        elif name in ("func.func", "llvm.func") and "function_type" in op.attributes:
            ftype = ir.TypeAttr(op.attributes["function_type"]).value
            types = list(ir.FunctionType(ftype).inputs) + list(ir.FunctionType(ftype).results) \
                if isinstance(ftype, ir.FunctionType) else []
        else:
            return ir.WalkResult.ADVANCE
        if any(_widen(t) is not None for t in types):
            found[0] = True
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found[0]


def widen_bool_memrefs(module: ir.Module) -> int:
    """Retype every ``i1`` memref of ``module`` to ``i8`` in place; returns how many values were retyped."""
    if not _has_bool_memrefs(module):
        return 0
    retyped = 0
    accesses: list[ir.Operation] = []
    unsupported: list[str] = []

    def retype(value: ir.Value) -> None:
        nonlocal retyped
        new = _widen(value.type)
        if new is not None:
            value.set_type(new)
            retyped += 1

    def visit(op: ir.Operation) -> ir.WalkResult:
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    retype(arg)
        for res in op.results:
            retype(res)
        if op.name in ("func.func", "llvm.func") and "function_type" in op.attributes:
            _widen_function_type(op)
        elif op.name == "memref.global":
            _widen_global(op)
        elif op.name in _SCALAR_ACCESS:  # operands may already be retyped (defined earlier): check after
            accesses.append(op)
        elif op.name.startswith("vector.") and _bool_vector_on_bytes(op):
            unsupported.append(op.name)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    if unsupported:
        raise NotImplementedError(f"vector access to a boolean (i1) buffer: {sorted(set(unsupported))}")
    i1, i8 = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(8)
    accesses = [op for op in accesses if _is_bool_access(op)]
    for op in accesses:
        if op.name == "memref.load":
            op.results[0].set_type(i8)
            with ir.InsertionPoint(op), op.location:
                narrow = arith.TruncIOp(i1, op.results[0])
            narrow.operation.move_after(op)
            op.results[0].replace_all_uses_except(narrow.result, narrow.operation)
        else:  # memref.store %value, %memref[...]
            with ir.InsertionPoint(op), op.location:
                wide = arith.ExtUIOp(i8, op.operands[0])
            op.replace_uses_of_with(op.operands[0], wide.result)
    if retyped or accesses:
        module.operation.verify()
    return retyped
