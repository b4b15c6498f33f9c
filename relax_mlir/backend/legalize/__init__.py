"""TVM's LegalizeOps, on the MLIR side: every relax-dialect op becomes linalg/tensor/arith/math.

Importing this package attaches the default lowering of each op family (``elementwise``, ``reduce``,
``shape``, ``linalg``, ``nn``, ``grad``, ``random``) to its op record's ``legalize`` slot. A lowering is
``legalize(lc: LegalizeContext, op: mlir.ir.Operation) -> Value | Sequence[Value]`` (see ``core.py``).

:func:`legalize_module` rewrites a module in place; ``overrides`` (op name or record -> rule) take precedence
over the records' slots: that is how ``relax_mlir.transform.LegalizeOps(customize_legalize_map)`` is honoured.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from mlir import ir

from ...op.registry import Op, get_op
from ..dialect import dialect_ops
from . import elementwise, grad, linalg, nn, random, reduce, shape  # noqa: F401 - each registers its rules
from .core import LegalizeContext, LegalizeError, cast_to
from .rules import RULES, attach_all, lowers

attach_all()

__all__ = ["LegalizeContext", "LegalizeError", "RULES", "legalize_module", "lowers"]


def _rule_for(record: Op, overrides: Mapping[str, Any]):
    rule = overrides.get(record.name, record.legalize)
    if rule is None:
        raise LegalizeError(f"{record.name}: no lowering to linalg (not supported by the MLIR backend yet)")
    return rule


def _results(op: ir.Operation, values: Any, record: Op) -> list[ir.Value]:
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    values = [v.result if isinstance(v, ir.OpView) else v for v in values]
    if len(values) != len(op.results):
        raise LegalizeError(f"{record.name}: its lowering returned {len(values)} value(s) for {len(op.results)} "
                            "result(s)")
    out = []
    for i, (v, r) in enumerate(zip(values, op.results)):
        if v.type != r.type:
            if not (isinstance(v.type, ir.RankedTensorType) and v.type.rank == r.type.rank
                    and v.type.element_type == r.type.element_type):
                raise LegalizeError(f"{record.name}: its lowering returned {v.type} for result {i}, "
                                    f"expected {r.type}")
            v = cast_to(v, r.type)
        out.append(v)
    return out


def legalize_module(module: ir.Module, overrides: Optional[Mapping[Any, Any]] = None,
                    extra: Sequence[Op] = ()) -> int:
    """Lower every relax op of ``module`` in place; returns how many were lowered.

    ``overrides`` maps op names (``"relax.add"``) or records to rules used instead of the records' own.
    Raises :class:`LegalizeError` naming every op without a lowering at once."""
    overrides = {(k.name if isinstance(k, Op) else k): v for k, v in (overrides or {}).items()}
    by_name = dialect_ops(list(extra) + [get_op(name) for name in overrides])
    found: list[tuple[ir.Operation, Op]] = []
    unknown: set[str] = set()

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("relax."):
            if op.name in by_name:
                found.append((op, by_name[op.name]))
            else:
                unknown.add(op.name)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    missing = sorted({rec.name for _, rec in found if overrides.get(rec.name, rec.legalize) is None} | unknown)
    if missing:
        raise LegalizeError(f"no lowering to linalg for: {', '.join(missing)}")
    for op, record in found:
        rule = _rule_for(record, overrides)
        with ir.InsertionPoint(op), op.location:
            values = _results(op, rule(LegalizeContext(op, record), op), record)
        for r, v in zip(op.results, values):
            r.replace_all_uses_with(v)
        op.erase()
    return len(found)
