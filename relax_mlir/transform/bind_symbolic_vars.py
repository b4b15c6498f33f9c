"""``BindSymbolicVars(binding_map, func_name=None)``: size variables become the values given.

    def main(x: R.Tensor(("n", 4)))   ->   def main(x: R.Tensor((8, 4)))      (binding_map={"n": 8})

Keys are size-variable names; values ints or dims over other size variables (``{"n": "2 * m"}`` as text, or a
SizeVar expression). Every struct info, attribute and match_cast of the function follows. A name no function
uses is an error (a typo would otherwise bind nothing), as is a negative size. Local functions and a host
call's declared result (``sinfo_args``) follow too. Calls of a function whose
signature this binds are not rewritten: one whose arguments then have other sizes than the function takes (``n``
bound to 5 where only the callee has an ``n`` and its caller passes a tensor of 3, or of the caller's own ``m``) is
an error naming the caller, the binding and the argument.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from ..ir import sym
from ..ir.block_builder import call_return_struct_info
from ..ir.expr import Call, Function, GlobalVar
from ..ir.struct_info import free_vars as struct_free_vars
from ..ir.struct_info import is_base_of
from ..ir.visitor import post_order_visit
from .pass_infra import Pass
from .utils import bind_sizes, callees


@dataclass(frozen=True)
class BindSymbolicVars(Pass):
    """Replace size variables by the values ``binding_map`` gives, in ``func_name`` or every function.

    Example, applied as ``BindSymbolicVars({"n": 8})``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor(("n", 4), "float32")):
                y = R.reshape(x, ("n", 2, 2))
                return y

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((8, 4), dtype="float32")) -> R.Tensor((8, 2, 2), dtype="float32"):
                y: R.Tensor((8, 2, 2), dtype="float32") = R.reshape(x, (8, 2, 2))
                return y
    """

    binding_map: Mapping[str, Any]
    func_name: Optional[str] = None
    name = "BindSymbolicVars"

    def transform_module(self, mod, ctx):
        sizes = _sizes(self.binding_map)
        names = list(mod) if self.func_name is None else [self.func_name]
        missing = [n for n in names if n not in mod]
        if missing:
            raise ValueError(f"BindSymbolicVars: the module has no function {missing[0]!r} (it has: {', '.join(mod)})")
        used: set[str] = set()
        out = mod.copy()
        for name in names:
            func = mod[name]
            if isinstance(func, Function):
                used |= size_names(func)
                out[name] = bind_sizes(func, sizes)
        unknown = sorted(set(sizes) - used)
        if unknown:
            raise ValueError(f"BindSymbolicVars: no size variable {', '.join(map(repr, unknown))} in "
                             f"{'function ' + repr(self.func_name) if self.func_name else 'the module'} "
                             f"(its size variables: {', '.join(sorted(used)) or 'none'})")
        _check_calls(out, {n for n in names if out[n].struct_info != mod[n].struct_info})
        return out


def _check_calls(mod, changed: set[str]) -> None:
    """Every call of a function whose signature this bound must pass what it now takes: the calls are not rewritten,
    and a caller whose arguments have other sizes (its own, or static ones the binding contradicts) is refused."""
    for caller, func in mod.items():
        if not isinstance(func, Function) or not changed & callees(func):
            continue
        for block in func.blocks:
            for b in block.bindings:
                for call in _calls_of(b.value, changed):
                    callee = call.op.name_hint
                    args = [getattr(a, "struct_info", None) for a in call.args]
                    try:
                        ret = call_return_struct_info(callee, mod[callee].struct_info, args)
                    except ValueError as exc:
                        problem = str(exc)
                    else:
                        if call is not b.value or b.var.struct_info is None or is_base_of(b.var.struct_info, ret):
                            continue
                        problem = f"it now returns {ret}, where {b.var.name_hint!r} is {b.var.struct_info}"
                    raise ValueError(f"BindSymbolicVars: {caller!r} (binding {b.var.name_hint!r}) calls {callee!r}, "
                                     f"whose signature this binds, and its calls are not rewritten: {problem}; bind "
                                     f"the sizes of the arguments {caller!r} passes to the same values too, or bind "
                                     f"values they have")


def _calls_of(value, names: set[str]) -> list:
    found: list = []
    post_order_visit(value, lambda e: found.append(e) if isinstance(e, Call) and isinstance(e.op, GlobalVar)
                     and e.op.name_hint in names else None)
    return found


def _sizes(binding_map: Mapping[Any, Any]) -> dict[str, Any]:
    if not isinstance(binding_map, Mapping):
        raise TypeError(f"BindSymbolicVars: binding_map must be a dict of size variable to value, "
                        f"got {type(binding_map).__name__}")
    sizes: dict[str, Any] = {}
    for key, value in binding_map.items():
        name = key.name if isinstance(key, sym.SymDim) and key.is_var() else key
        if not isinstance(name, str):
            raise TypeError(f"BindSymbolicVars: keys are size-variable names, got {key!r}")
        if isinstance(value, str):
            value = sym.parse_dim(value)
        if isinstance(value, bool) or not isinstance(value, (int, sym.SymDim)):
            raise TypeError(f"BindSymbolicVars: {name!r} must be bound to an int or a dim, got {value!r}")
        if isinstance(value, int) and value < 0:
            raise ValueError(f"BindSymbolicVars: {name!r} = {value} is negative")
        sizes[name] = value
    return sizes


def size_names(func: Function) -> set[str]:
    """The size variables ``func``'s parameters and bindings use, its local functions' included (which a host
    call's ``sinfo_args`` can only repeat: a size is defined by a parameter or a match_cast)."""
    names: set[str] = set()
    for p in func.params:
        names |= struct_free_vars(p.struct_info) if p.struct_info is not None else set()
    for block in func.blocks:
        for b in block.bindings:
            if b.var.struct_info is not None:
                names |= struct_free_vars(b.var.struct_info)
            if isinstance(b.value, Function):
                names |= size_names(b.value)
    return names
