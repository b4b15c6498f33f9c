"""TVM's LegalizeOps, on the MLIR side: every relax-dialect op becomes linalg/tensor/arith/math.

Each op record names its lowering (``Op.lowering``): ``"shape:take"`` is the function ``take`` of ``shape.py`` here,
an ``Elementwise`` spec the record's scalar function mapped by ``elementwise.lower_elementwise``. :func:`lowering_of`
resolves it on first use; the records themselves never change. A lowering is
``rule(lc: LegalizeContext, op: mlir.ir.Operation) -> Value | Sequence[Value]`` (see ``core.py``); the families
are ``elementwise``, ``reduce``, ``shape``, ``index``, ``sort``, ``linalg``, ``nn``, ``grad`` and
``random``.

:func:`legalize_module` rewrites a module in place; ``overrides`` (op name or record -> rule) take precedence
over the records' slots: that is how ``relax_mlir.transform.LegalizeOps(customize_legalize_map)`` is honoured.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any, Callable, Mapping, Optional, Sequence

from mlir import ir

from ...op.registry import Elementwise, Op, get_op
from ..dialect import dialect_ops
from ..error_slot import CHECKS_OFF_ATTR
from .core import LegalizeContext, LegalizeError, cast_to, signedness_of

__all__ = ["LegalizeContext", "LegalizeError", "legalize_module", "lowering_of", "resolve_reference"]

FAMILIES = ("elementwise", "grad", "index", "linalg", "nn", "random", "reduce", "shape", "sort")


def __getattr__(name: str) -> Any:
    """``relax_mlir.backend.legalize.nn`` (any family, and ``checks``/``core``) without importing it first, as a
    LegalizeOps rule written ``relax_mlir.backend.legalize.elementwise.exp`` expects."""
    if name in FAMILIES or name in ("checks", "core"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def resolve_reference(reference: str) -> Callable:
    """The function ``"family:name"`` names: ``name`` in ``relax_mlir.backend.legalize.<family>``."""
    family, sep, name = reference.partition(":")
    if not sep or family not in FAMILIES or not name:
        raise LegalizeError(f"bad lowering reference {reference!r}: expected 'family:function' with family one of "
                            f"{', '.join(FAMILIES)}")
    module = importlib.import_module(f"{__name__}.{family}")
    rule = getattr(module, name, None)
    if not callable(rule):
        raise LegalizeError(f"bad lowering reference {reference!r}: {module.__name__} has no function {name!r}")
    return rule


@functools.lru_cache(maxsize=None)
def lowering_of(record: Op) -> Optional[Callable]:
    """The lowering rule of ``record`` (``None`` if it has none): its reference resolved, once."""
    spec = record.lowering
    if spec is None:
        return None
    if isinstance(spec, Elementwise):
        from .elementwise import lower_elementwise

        return lower_elementwise(spec)
    if isinstance(spec, str):
        return resolve_reference(spec)
    raise LegalizeError(f"{record.name}: its lowering must be a 'family:function' reference or an Elementwise, "
                        f"got {type(spec).__name__}")


def _rule_for(record: Op, overrides: Mapping[str, Any]):
    rule = overrides.get(record.name) or lowering_of(record)
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
                    extra: Sequence[Op] = (), checks: bool = True) -> int:
    """Lower every relax op of ``module`` in place; returns how many were lowered.

    ``overrides`` maps op names (``"relax.add"``) or records to rules used instead of the records' own.
    ``checks=False`` marks the module (``relax_mlir.checks_off``) so that the lowerings emit no runtime index
    checks (``checks.report_if``). Raises :class:`LegalizeError` naming every op without a lowering at once."""
    if not checks:
        module.operation.attributes[CHECKS_OFF_ATTR] = ir.UnitAttr.get(module.context)
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
    missing = sorted({rec.name for _, rec in found if rec.name not in overrides and rec.lowering is None} | unknown)
    if missing:
        raise LegalizeError(f"no lowering to linalg for: {', '.join(missing)}")
    for op, record in found:
        rule = _rule_for(record, overrides)
        with ir.InsertionPoint(op), op.location, signedness_of(op):
            values = _results(op, rule(LegalizeContext(op, record), op), record)
        for r, v in zip(op.results, values):
            r.replace_all_uses_with(v)
        op.erase()
    return len(found)
