"""``R.print(*values, format="")``: TVM's debugging op. It prints its values on the host and returns the empty tuple;
it is impure (dead-code elimination and the dataflow passes keep it where it is).

The values are rendered as TVM's ``relax.run.print`` renders them (a tensor as NumPy prints it, a tuple as ``(a,
b)``, a number or a shape as Python prints it) and printed space-separated, or, with a ``format``, as
``format.format(*rendered)`` (so the fields are strings: ``"x = {}"``, not ``"{:.2f}"``).

Only the reference interpreter runs it. The record is not in the registry: it has no lowering (compiled code
refuses it, naming the binding, as it refuses ``R.call_packed``), no gradient and no dialect op, which the
registry's sweeps ask of every op; the parser reads ``R.print`` itself (``relax_mlir.script.parser``).
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass

import numpy as np

from ..ir.expr import Call, Tuple
from ..ir.struct_info import TupleStructInfo
from .registry import Op, fail


@dataclass(frozen=True, eq=False)
class HostOp(Op):
    """An op whose one input is a tuple of values of any kind (tensors, shapes, numbers), run on the host."""

    def infer_struct_info(self, args, attrs):
        sinfos = [a.struct_info for a in args]
        if any(s is None for s in sinfos):
            return None
        if not isinstance(sinfos[0], TupleStructInfo):
            raise TypeError(f"{self.name}: argument {self.inputs[0]!r} must be a tuple of values, got {sinfos[0]}")
        return self.infer(sinfos, attrs)


def render(value) -> str:
    """A value as TVM's ``relax.run.print`` shows it."""
    if isinstance(value, np.ndarray):
        return str(value)
    if isinstance(value, tuple):
        return "(" + ", ".join(render(v) for v in value) + ")"
    return str(value)


def _reference(values, format):
    rendered = [render(v) for v in values]
    builtins.print(format.format(*rendered) if format else " ".join(rendered))
    return ()


def _check(attrs: dict) -> None:
    if not isinstance(attrs["format"], str):
        fail(f"format must be a string, got {attrs['format']!r}")


PRINT = HostOp(
    name="relax.print", inputs=("values",), tuple_input=True, attrs={"format": ""},
    infer=lambda args, attrs: TupleStructInfo([]), check_attrs=_check, reference=_reference, pure=False,
    doc="Print the values on the host (TVM's ``R.print(*values, format=...)``); returns the empty tuple. "
        "Interpreter only.")


def print(*values, format: str = "") -> Call:  # noqa: A001  (TVM's name: relax.op.print)
    """``R.print(x, y, format="x={} y={}")`` built in Python (TVM's ``relax.op.print``)."""
    attrs = PRINT.complete_attrs({"format": format})
    args = [Tuple(list(values))]
    return Call(PRINT, args, attrs, PRINT.infer_struct_info(args, attrs))
