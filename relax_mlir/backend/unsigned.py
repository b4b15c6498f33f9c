"""Unsigned integer tensors (``uint8`` ... ``uint64``) in compiled code.

MLIR's integers are signless: a ``uint8`` tensor is an ``i8`` tensor in the relax dialect and below, and what is
unsigned about it lives in the ops that read it. Each op's record says how it computes on unsigned integers (its
``unsigned`` and ``index_inputs`` fields, ``relax_mlir.op.registry.Op``), and the exporter applies that to every
call with an unsigned tensor among its operands or results (:func:`unsigned_attrs`):

* ``"agnostic"`` ops, whose lowering does the same on the bits whatever the sign (``add``, ``multiply``, the
  bitwise ops, every layout op, ``where``, ...), need nothing; an op's ``index_inputs`` are read as indices, which
  must be signed (``take`` of a ``uint8`` tensor compiles, ``take`` with ``uint8`` indices is refused);
* ``"aware"`` ops, whose lowering depends on the sign (comparisons, ``maximum``/``minimum``, division and
  remainders, ``abs``, ``sign``, ``clip``, the max/min/arg reductions, ``argsort`` (and so ``sort`` and ``topk``,
  which decompose to it), ``astype``, sums into a wider dtype), get the unit attributes :data:`UNSIGNED_IN` (their integer operands are unsigned) and :data:`UNSIGNED_OUT` (their
  integer results are), which the lowerings read (``legalize.core.unsigned``): ``arith.cmpi ult``, ``divui``,
  ``remui``, ``maxui``, ``uitofp``, ``extui``, unsigned identities for max and min; such an op must not mix signed
  and unsigned integer operands (NumPy would promote them to a wider signed type first: cast explicitly);
* every other op (``unsigned=None``) refuses unsigned tensors with an :class:`ExportError` naming the op, the binding and the dtype,
  rather than compiling signed arithmetic on them.

The function's boundary takes and returns NumPy arrays of the unsigned dtype (``FunctionSignature`` keeps the
Relax dtype; the storage is the same).
"""

from __future__ import annotations

from typing import Sequence

from ..ir.struct_info import StructInfo, TensorStructInfo, TupleStructInfo
from ..op.registry import Op
from .signature import ExportError

#: The op's integer tensor operands are unsigned.
UNSIGNED_IN = "relax_mlir.unsigned_in"
#: The op's integer tensor results are unsigned.
UNSIGNED_OUT = "relax_mlir.unsigned_out"


def _tensors(sinfo: StructInfo) -> list[TensorStructInfo]:
    if isinstance(sinfo, TensorStructInfo):
        return [sinfo]
    if isinstance(sinfo, TupleStructInfo):
        return [t for f in sinfo.fields for t in _tensors(f)]
    return []


def is_unsigned(dtype: str) -> bool:
    return dtype.startswith("uint")


def _signed(dtype: str) -> bool:
    return dtype.startswith("int")


def unsigned_attrs(op: Op, args: Sequence[StructInfo], results: Sequence[TensorStructInfo],
                   where: str) -> list[str]:
    """The unsigned attributes a call of ``op`` carries in its export (none when it has no unsigned tensor); raises
    :class:`ExportError` where the op cannot compute on unsigned integers (yet)."""
    op_name = op.name
    ins = [[t.dtype for t in _tensors(a)] for a in args]
    outs = [r.dtype for r in results]
    flat_in = [d for group in ins for d in group]
    if not any(is_unsigned(d) for d in flat_in + outs):
        return []
    dtype = next(d for d in flat_in + outs if is_unsigned(d))
    for i, name in enumerate(op.inputs):
        if name in op.index_inputs and i < len(ins) and any(is_unsigned(d) for d in ins[i]):
            raise ExportError(f"{where}: {op_name} reads {dtype} indices; compiled code takes signed indices "
                              "(cast them with R.astype(..., \"int64\"))")
    if op.unsigned == "agnostic":
        return []
    if op.unsigned != "aware":
        raise ExportError(f"{where}: {op_name} on {dtype} tensors is not supported by the MLIR backend yet "
                          "(cast to a signed or float dtype first)")
    unsigned_in = any(is_unsigned(d) for d in flat_in)
    if unsigned_in and any(_signed(d) for d in flat_in):
        raise ExportError(f"{where}: {op_name} mixes signed and unsigned integer operands "
                          f"({', '.join(flat_in)}); cast one of them explicitly")
    if op_name == "relax.matmul" and flat_in and outs and outs[0] != flat_in[0] and unsigned_in:
        raise ExportError(f"{where}: {op_name} of {flat_in[0]} into {outs[0]} is not supported by the MLIR "
                          "backend yet (cast the operands first)")
    if op_name != "relax.astype" and any(is_unsigned(d) for d in outs) and any(_signed(d) for d in flat_in):
        raise ExportError(f"{where}: {op_name} of {', '.join(flat_in)} into {', '.join(outs)} mixes signed and "
                          "unsigned integers; cast explicitly")
    attrs = [UNSIGNED_IN] if unsigned_in else []
    if any(is_unsigned(d) for d in outs):
        attrs.append(UNSIGNED_OUT)
    return attrs
