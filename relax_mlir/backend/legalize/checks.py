"""Runtime checks inside compiled code: an op whose memory access depends on data checks it.

``take``'s indices and ``nll_loss``'s class targets decide which element is read. A lowering that reads by such
a value first checks it; when it is out of range the kernel reads a safe element instead (so no access ever
leaves a buffer) and records the violation in the module's **error slot**, a global ``memref<4xi64>``:
``[check id, offending value, flat position, extent]`` (the first violation of a call wins; the extent is the size
a dynamic axis had, for the message). The runtime reads the
slot after every call of a module that has checks and raises ``IndexError`` with the check's message, which
names the function, the op and its Relax binding (``main: binding 'lv1'``), the value and its position. The
results of such a call are discarded.

The messages live in the module attribute ``relax_mlir.checks`` (a list of strings, the check id is the
1-based index); the slot's address is returned by the public function ``relax_mlir_error_address``, which
the runtime calls once after compiling.
"""

from __future__ import annotations

import re

from mlir import ir
from mlir.dialects import arith, func, memref, scf

from ..error_slot import CHECKS_ATTR, CHECKS_OFF_ATTR, ERROR_ADDRESS_FN, ERROR_GLOBAL, SLOT_WORDS


def _module_of(op: ir.Operation) -> ir.Operation:
    while op.name != "builtin.module":
        op = op.parent
    return op


def _ensure_slot(module: ir.Operation) -> None:
    """Add the error slot and its address function to the module, once."""
    body = module.regions[0].blocks[0]
    if any(getattr(op, "sym_name", None) is not None and ir.StringAttr(op.sym_name).value == ERROR_GLOBAL
           for op in body.operations):
        return
    slot_t = ir.MemRefType.get([SLOT_WORDS], ir.IntegerType.get_signless(64))
    i64 = ir.IntegerType.get_signless(64)
    with ir.InsertionPoint.at_block_begin(body), ir.Location.unknown():
        memref.GlobalOp(ERROR_GLOBAL, ir.TypeAttr.get(slot_t), sym_visibility="private",
                        initial_value=ir.DenseElementsAttr.get_splat(
                            ir.RankedTensorType.get([SLOT_WORDS], i64), ir.IntegerAttr.get(i64, 0)))
    with ir.InsertionPoint(body), ir.Location.unknown():
        fn = func.FuncOp(ERROR_ADDRESS_FN, ir.FunctionType.get([], [i64]))
        with ir.InsertionPoint(fn.add_entry_block()):
            slot = memref.get_global(slot_t, ERROR_GLOBAL)
            address = memref.extract_aligned_pointer_as_index(slot)
            func.ReturnOp([arith.index_cast(i64, address)])


def _register(module: ir.Operation, message: str) -> int:
    """Append a check's message to the module's table; returns its id (1-based)."""
    old = list(ir.ArrayAttr(module.attributes[CHECKS_ATTR])) if CHECKS_ATTR in module.attributes else []
    module.attributes[CHECKS_ATTR] = ir.ArrayAttr.get(old + [ir.StringAttr.get(message)])
    return len(old) + 1


def where(op: ir.Operation) -> str:
    """The Relax binding an exported op came from (``main: binding 'lv1'``), from its location (its name as
    written: the location's text escapes non-ASCII bytes)."""
    loc = op.location
    if loc.is_a_name():
        return loc.name_str
    found = re.match(r'loc\("(.*)"', str(loc))
    return found.group(1).replace('\\"', '"') if found else "(unknown binding)"


def report_if(op: ir.Operation, bad: ir.Value, value: ir.Value, position: ir.Value, message: str,
              extent: ir.Value | None = None) -> None:
    """At the current insertion point: if ``bad``, record ``value`` (any integer), ``position`` (index) and
    ``extent`` (index: the size a dynamic check compared against) in the error slot under a new check whose
    ``message`` may use ``{value}``, ``{position}`` and ``{extent}``. Nothing, in a module compiled with
    ``checks=False`` (``relax_mlir.checks_off``)."""
    module = _module_of(op.operation)
    if CHECKS_OFF_ATTR in module.attributes:
        return
    _ensure_slot(module)
    check = _register(module, message)
    i64 = ir.IntegerType.get_signless(64)
    slot_t = ir.MemRefType.get([SLOT_WORDS], i64)
    if_op = scf.IfOp(bad)
    with ir.InsertionPoint(if_op.then_block):
        slot = memref.get_global(slot_t, ERROR_GLOBAL)
        zero, one, two, three = (arith.constant(ir.IndexType.get(), k) for k in range(4))
        first = arith.cmpi(arith.CmpIPredicate.eq, memref.load(slot, [zero]), arith.constant(i64, 0))
        store = scf.IfOp(first)
        with ir.InsertionPoint(store.then_block):
            memref.store(arith.constant(i64, check), slot, [zero])
            v = value if value.type == i64 else arith.extsi(i64, value) if ir.IntegerType(value.type).width < 64 \
                else value
            memref.store(v, slot, [one])
            memref.store(arith.index_cast(i64, position), slot, [two])
            if extent is not None:
                memref.store(arith.index_cast(i64, extent), slot, [three])
            scf.YieldOp([])
        scf.YieldOp([])


def guarded_extract(source: ir.Value, coords: list, bad: ir.Value) -> ir.Value:
    """``source[coords]``, or 0 without reading when ``bad``: a read by a checked index never leaves a buffer, even
    one of an empty axis (where no clamped index is inside)."""
    from mlir.dialects import tensor

    from .core import elem, scalar

    t = elem(source)
    read = scf.IfOp(bad, [t], has_else=True)
    with ir.InsertionPoint(read.then_block):
        scf.YieldOp([scalar(0, t)])
    with ir.InsertionPoint(read.else_block):
        scf.YieldOp([tensor.extract(source, coords)])
    return read.results[0]


def linear_position(loops: list[int], sizes: list) -> ir.Value:
    """The row-major flat position of the iteration over ``loops`` (loop dims) of extents ``sizes``."""
    from .core import loop_index

    return flat_position([loop_index(axis) for axis in loops], sizes)


def flat_position(coords: list, sizes: list) -> ir.Value:
    """The row-major flat position of the ``index`` values ``coords`` in extents ``sizes``."""
    from .core import as_index

    pos = arith.constant(ir.IndexType.get(), 0)
    for c, size in zip(coords, sizes):
        pos = arith.addi(arith.muli(pos, as_index(size)), c)
    return pos
