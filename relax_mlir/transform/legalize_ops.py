"""``LegalizeOps``: TVM's pass that lowers Relax ops, with a way for users to override an op's lowering.

In relax-mlir the lowering itself runs on the MLIR side, when a module is exported (``relax_mlir.to_mlir``) or
compiled (``relax_mlir.compile``): each relax-dialect op is rewritten into linalg/tensor/arith/math by its op
record's ``legalize`` rule. So this pass does not change the Relax functions: it *records* the custom map in
the module, and ``to_mlir``/``compile`` honour it. A rule has the records' signature::

    def my_add(lc, op):                  # lc: relax_mlir.backend.legalize.LegalizeContext; op: mlir.ir.Operation
        from relax_mlir.backend.legalize.core import map_elementwise
        from mlir.dialects import arith
        return map_elementwise(lc.inputs, lc.result_type, arith.subf)   # any linalg/tensor/arith/math

    mod = LegalizeOps({"relax.add": my_add})(mod)
    ex = relax_mlir.compile(mod)          # relax.add is now lowered by my_add

Before/after (the IR is unchanged but for one module attribute, which prints and parses like any other)::

    I.module_attrs({"relax_mlir.legalize_map": {"relax.add": "tests.my_add#1"}})

The attribute holds, per op, a token naming the rule in this process's table (rules are Python functions, not
IR); a module parsed in another process must register its rules again (``register_rule``). Later passes keep
module attributes, so LegalizeOps may run anywhere in a pipeline; applying it twice merges the maps.
"""

from __future__ import annotations

from dataclasses import dataclass
import threading
from typing import Any, Callable, Mapping, Optional

from ..ir.module import IRModule
from ..op.registry import Op, get_op
from .options import check_options
from .pass_infra import Pass, PassContext

LEGALIZE_MAP_ATTR = "relax_mlir.legalize_map"

_RULES: dict[str, Callable] = {}
_TOKENS: dict[int, str] = {}
_LOCK = threading.Lock()


def register_rule(rule: Callable, token: Optional[str] = None) -> str:
    """Put ``rule`` in this process's table and return its token (the same token for the same function)."""
    with _LOCK:
        if token is None and id(rule) in _TOKENS and _RULES.get(_TOKENS[id(rule)]) is rule:
            return _TOKENS[id(rule)]
        base = token or f"{getattr(rule, '__module__', '?')}.{getattr(rule, '__qualname__', type(rule).__name__)}"
        token, n = base, 1
        while token in _RULES and _RULES[token] is not rule:
            n += 1
            token = f"{base}#{n}"
        _RULES[token] = rule
        _TOKENS[id(rule)] = token
        return token


def lookup_rule(token: str) -> Callable:
    """The rule registered under ``token``; a ``KeyError`` saying what to do if there is none."""
    try:
        return _RULES[token]
    except KeyError:
        raise KeyError(f"LegalizeOps: no lowering rule {token!r} is registered in this process "
                       "(rules are Python functions: apply LegalizeOps again, or register_rule(fn, token))") from None


def _op_name(key: Any) -> str:
    """The full name of the op a ``customize_legalize_map`` key names (an Op, ``"relax.add"`` or ``"add"``)."""
    if isinstance(key, Op):
        return key.name
    if not isinstance(key, str):
        raise TypeError(f"LegalizeOps: the keys of option customize_legalize_map are op names (\"relax.add\") or "
                        f"Ops, got {key!r} ({type(key).__name__})")
    try:
        return get_op(key).name
    except KeyError:
        raise ValueError(f"LegalizeOps: option customize_legalize_map has a lowering for {key!r}, but no op of "
                         "that name is registered (relax_mlir.op.list_ops() lists them)") from None


@dataclass(frozen=True)
class LegalizeOps(Pass):
    """Record custom lowerings for ``to_mlir``/``compile`` (see the module docstring).

    ``customize_legalize_map`` maps op names (``"relax.add"``, ``"nn.relu"``) or op records to rules
    ``rule(lc, op) -> Value | list[Value]``. ``enable_warning`` is accepted for TVM compatibility (every op has a
    lowering or is reported by the export).

    Example, applied as ``LegalizeOps({"relax.grad.no_grad": relax_mlir.backend.legalize.elementwise.identity})``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((3,), "float32")):
                y = R.grad.no_grad(x)
                return y

    becomes::

        @I.ir_module
        class Module:
            I.module_attrs({"relax_mlir.legalize_map": {"relax.grad.no_grad": "relax_mlir.backend.legalize.elementwise.identity"}})

            @R.function
            def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
                y: R.Tensor((3,), dtype="float32") = R.grad.no_grad(x)
                return y
    """

    name = "LegalizeOps"

    customize_legalize_map: Optional[Mapping[Any, Callable]] = None
    enable_warning: bool = False

    def __post_init__(self):
        check_options(self, ["enable_warning"])
        given = self.customize_legalize_map
        if given is not None and not isinstance(given, Mapping):
            raise TypeError(f"LegalizeOps: option customize_legalize_map={given!r} is not a dict or None "
                            "(op name -> lowering function)")
        table = {}
        for key, rule in (given or {}).items():
            name = _op_name(key)
            if not callable(rule):
                raise TypeError(f"LegalizeOps: the lowering of {name} must be callable, got {type(rule).__name__}")
            table[name] = rule
        # Keyed by full op name whichever spelling the caller used, so two equal maps give equal passes.
        object.__setattr__(self, "customize_legalize_map", table)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        if not self.customize_legalize_map:
            return mod
        merged = dict(mod.attrs.get(LEGALIZE_MAP_ATTR) or {})
        merged.update({name: register_rule(rule) for name, rule in self.customize_legalize_map.items()})
        return mod.with_attr(LEGALIZE_MAP_ATTR, dict(sorted(merged.items())))
