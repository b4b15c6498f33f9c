"""``IRModule``: named functions plus module attributes, with TVM's interface."""

from __future__ import annotations

import keyword
import unicodedata
from typing import Any, Iterator, Mapping, Optional, Union

from .expr import Function, GlobalVar


class IRModule:
    """A set of named functions and module attributes (``param_num``, ``state_num``, ...).

    As in TVM: ``IRModule({"main": func})``, ``mod["main"]``, ``mod["f"] = func``, ``mod.attrs``,
    ``mod.with_attrs({...})``, ``mod.get_global_var("main")``, ``mod.script()``, ``mod.show()``.
    """

    def __init__(self, functions: Optional[Mapping[Union[str, GlobalVar], Function]] = None,
                 attrs: Optional[Mapping[str, Any]] = None):
        self._functions: dict[str, Function] = {}
        self._global_vars: dict[str, GlobalVar] = {}
        self.attrs: dict[str, Any] = dict(attrs or {})
        for key, func in (functions or {}).items():
            self[key] = func

    @classmethod
    def from_expr(cls, func: Function, attrs: Optional[Mapping[str, Any]] = None) -> "IRModule":
        """``IRModule.from_expr(func)``: a module of one function, named ``main`` (TVM's)."""
        if not isinstance(func, Function):
            raise TypeError(f"IRModule.from_expr: expected a relax Function, got {type(func).__name__}")
        return cls({"main": func}, attrs)

    # -- mapping interface -------------------------------------------------------------------------
    @staticmethod
    def _name(key: Union[str, GlobalVar]) -> str:
        if isinstance(key, GlobalVar):
            return key.name_hint
        if isinstance(key, str):
            return key
        raise TypeError(f"IRModule: functions are looked up by name or GlobalVar, got {type(key).__name__}")

    def __getitem__(self, key: Union[str, GlobalVar]) -> Function:
        name = self._name(key)
        if name not in self._functions:
            known = ", ".join(self._functions) or "none"
            raise KeyError(f"IRModule has no function {name!r} (it has: {known})")
        return self._functions[name]

    def __setitem__(self, key: Union[str, GlobalVar], func: Function) -> None:
        if not isinstance(func, Function):
            raise TypeError(f"IRModule[{self._name(key)!r}]: expected a relax Function, got {type(func).__name__}")
        name = self._name(key)
        check_function_name(name, f"IRModule[{name!r}]")
        self._functions[name] = func
        self._global_vars[name] = GlobalVar(name, func.struct_info)

    def __delitem__(self, key: Union[str, GlobalVar]) -> None:
        name = self._name(key)
        del self._functions[name]
        del self._global_vars[name]

    def __contains__(self, key: Union[str, GlobalVar]) -> bool:
        return self._name(key) in self._functions

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)

    def items(self):
        return self._functions.items()

    @property
    def functions(self) -> dict[GlobalVar, Function]:
        """The functions keyed by their ``GlobalVar``, as TVM's ``mod.functions``."""
        return {self._global_vars[n]: f for n, f in self._functions.items()}

    def get_global_var(self, name: str) -> GlobalVar:
        if name not in self._global_vars:
            raise KeyError(f"IRModule has no function {name!r} (it has: {', '.join(self._functions) or 'none'})")
        return self._global_vars[name]

    def get_global_vars(self) -> list[GlobalVar]:
        return list(self._global_vars.values())

    def update_func(self, key: Union[str, GlobalVar], func: Function) -> None:
        self[key] = func

    # -- attributes --------------------------------------------------------------------------------
    def with_attrs(self, attrs: Mapping[str, Any]) -> "IRModule":
        """A copy of the module with more (or changed) module attributes."""
        out = self.copy()
        out.attrs.update(attrs)
        return out

    def with_attr(self, key: str, value: Any) -> "IRModule":
        return self.with_attrs({key: value})

    def without_attr(self, key: str) -> "IRModule":
        out = self.copy()
        out.attrs.pop(key, None)
        return out

    def get_attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    def copy(self) -> "IRModule":
        """A shallow copy: functions are immutable, so sharing them is safe."""
        return IRModule(dict(self._functions), dict(self.attrs))

    # -- text --------------------------------------------------------------------------------------
    def script(self, name: str = "Module", *, show_meta: bool = False) -> str:
        """The module in the TVMScript-style text format (parse it back with ``relax_mlir.script.from_source``).
        ``show_meta`` is TVM's option; constants are always printed in full here, so it changes nothing."""
        from .printer import format_module

        _check_flag("script", "show_meta", show_meta)
        return format_module(self, name)

    def show(self, *, black_format: bool = False, show_meta: bool = False) -> None:
        """Print :meth:`script`. TVM's ``black_format`` is accepted: the printer's layout already is black's
        (one binding per line, long signatures split), so it changes nothing."""
        _check_flag("show", "black_format", black_format)
        print(self.script(show_meta=show_meta))

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        return f"IRModule({', '.join(self._functions)})"


def check_function_name(name: str, where: str) -> None:
    """A function's name must be a Python identifier that is not a keyword (the text format writes ``def name``),
    in NFKC form: Python reads identifiers normalised, so ``ﬁ`` would come back as ``fi``, and a module's functions
    are keyed by name (the printer cannot rename one)."""
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"{where}: a function's name must be a Python identifier that is not a keyword (the text "
                         f"format writes it as `def name`), got {name!r}")
    normal = unicodedata.normalize("NFKC", name)
    if normal != name:
        raise ValueError(f"{where}: a function's name must be in NFKC form, as Python reads identifiers (the text "
                         f"format would read {name!r} back as {normal!r})")


def _check_flag(method: str, name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{method}: {name} must be True or False, got {value!r}")
