"""The table of default lowerings, keyed by op record, and the decorator that fills it.

Lowerings live in this package, one file per op family, and are attached to the records' ``legalize`` slot
when the package is imported (a record that already has a lowering keeps it)."""

from __future__ import annotations

from typing import Callable

from ...op.registry import Op

Rule = Callable  # (LegalizeContext, ir.Operation) -> Value | Sequence[Value]

RULES: dict[Op, Rule] = {}


def lowers(*ops: Op) -> Callable[[Rule], Rule]:
    """Decorator: ``rule`` is the lowering of every op in ``ops``."""
    def register(rule: Rule) -> Rule:
        for op in ops:
            if op in RULES:
                raise ValueError(f"{op.name} has two lowerings: {RULES[op].__name__} and {rule.__name__}")
            RULES[op] = rule
        return rule
    return register


def set_rule(op: Op, rule: Rule) -> None:
    """Register ``rule`` for one op (for rules made by a family helper)."""
    lowers(op)(rule)


def attach_all() -> None:
    """Fill each record's ``legalize`` slot from the table (records that have one keep theirs)."""
    for op, rule in RULES.items():
        if op.legalize is None:
            op.legalize = rule
