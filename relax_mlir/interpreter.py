"""A reference interpreter: evaluates any Relax function with the ops' NumPy references.

It is the oracle every compiled result is compared with, so it checks as much as it can: arguments against the
parameters' struct info (binding symbolic sizes consistently), every binding's value against its variable's
struct info, ``match_cast`` at run time, and the result against the return struct info.

    out = interpret(mod, "main", x, w)            # NumPy arrays in, NumPy arrays (or nested tuples) out

Values: tensors are NumPy arrays, tuples are Python tuples, shapes are tuples of ints, ``PrimValue``s are Python
numbers, strings are ``str``; a function value (a nested ``Function``) is a closure over its environment.
A parameter of function type (``R.Callable``) takes a Python callable, and ``R.call_packed("name", ...)`` calls the
host function registered under ``name`` (``register_func``): both get the evaluated arguments, and a ``None``
result is the empty tuple.
"""

from __future__ import annotations

import sys

from dataclasses import dataclass
from typing import Any, Mapping, Optional

import numpy as np

from .ir import sym
from .ir.dtype import from_numpy
from .ir.expr import (Call, Constant, Expr, ExternFunc, Function, GlobalVar, If, MatchCast, PrimValue, SeqExpr,
                      ShapeExpr, StringImm, Tuple, TupleGetItem, Var, VarBinding)
from .ir.module import IRModule
from .ir.printer import format_struct_info
from .ir.struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
                             TensorStructInfo, TupleStructInfo)
from .ir.sym import SymDim
from .op.registry import substitute_attrs
from .transform.utils import call_cycle, recursion_message

Value = Any  # np.ndarray | tuple | int | float | str | _Closure


class InterpreterError(ValueError):
    """A value did not match what the IR says about it (an argument, a binding, a match_cast, the result)."""


class InterpreterIndexError(InterpreterError, IndexError):
    """An op's reference refused an index (``take`` beyond its axis, a class target beyond the classes): an
    ``IndexError``, as compiled code raises for the same call."""


@dataclass
class _Closure:
    func: Function
    env: dict
    name: str


def _describe(value: Value) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    return f"a {type(value).__name__} ({value!r})" if not isinstance(value, _Closure) else "a function"


class _Matcher:
    """Matches runtime values against struct info, binding plain size variables (``n``) as it goes.

    With ``bind`` false an unbound size variable is not an error: the dim is just not checked (a binding's
    struct info may mention sizes only a later match_cast pins down, which is ill-formed but not our concern).
    """

    def __init__(self, sizes: dict[str, int], where: str, bind: bool):
        self.sizes, self.where, self.bind = sizes, where, bind

    def fail(self, path: str, message: str):
        raise InterpreterError(f"{self.where}{path}: {message}")

    def match(self, sinfo: Optional[StructInfo], value: Value, path: str = "") -> None:
        """Bind size variables standing alone first, then check every dim (so ``2 * n`` may precede ``n``)."""
        self._walk(sinfo, value, path, define=True)
        self._walk(sinfo, value, path, define=False)

    def _walk(self, sinfo, value, path: str, define: bool) -> None:
        if sinfo is None or isinstance(sinfo, ObjectStructInfo):
            return
        if isinstance(sinfo, FuncStructInfo):
            if not (isinstance(value, _Closure) or callable(value)):
                self.fail(path, f"expected a function ({format_struct_info(sinfo)}), got {_describe(value)}")
            return
        if isinstance(sinfo, TupleStructInfo):
            if not isinstance(value, tuple):
                self.fail(path, f"expected a tuple of {len(sinfo.fields)}, got {_describe(value)}")
            if len(value) != len(sinfo.fields):
                self.fail(path, f"expected a tuple of {len(sinfo.fields)}, got a tuple of {len(value)}")
            for i, (f, v) in enumerate(zip(sinfo.fields, value)):
                self._walk(f, v, f"{path}[{i}]", define)
        elif isinstance(sinfo, TensorStructInfo):
            self._tensor(sinfo, value, path, define)
        elif isinstance(sinfo, ShapeStructInfo):
            if not (isinstance(value, tuple) and all(isinstance(d, int) for d in value)):
                self.fail(path, f"expected a shape (a tuple of ints), got {_describe(value)}")
            if sinfo.ndim != -1 and len(value) != sinfo.ndim:
                self.fail(path, f"expected a shape of {sinfo.ndim} dims, got {value}")
            self._dims(sinfo.values, value, path, define, f"shape {value}")
        elif isinstance(sinfo, PrimStructInfo):
            self._prim(sinfo, value, path, define)

    def _tensor(self, sinfo: TensorStructInfo, value, path: str, define: bool) -> None:
        expected = format_struct_info(sinfo)
        if not isinstance(value, np.ndarray):
            self.fail(path, f"expected {expected} (a NumPy array), got {_describe(value)}")
        if define:  # dtype and rank are checked once
            try:
                dtype = from_numpy(value.dtype)
            except ValueError:  # complex, object, ...: not a Relax dtype at all
                dtype = str(value.dtype)
            if dtype != sinfo.dtype:
                self.fail(path, f"expected dtype {sinfo.dtype}, got {value.dtype} ({expected})")
            if sinfo.ndim != -1 and value.ndim != sinfo.ndim:
                self.fail(path, f"expected {expected}, got rank {value.ndim} (shape {value.shape})")
        self._dims(sinfo.shape, value.shape, path, define, f"shape {value.shape} ({expected})")

    def _prim(self, sinfo: PrimStructInfo, value, path: str, define: bool) -> None:
        is_bool = isinstance(value, (bool, np.bool_))
        if sinfo.dtype == "bool":
            ok = is_bool
        elif sinfo.dtype.startswith(("int", "uint")):
            ok = isinstance(value, (int, np.integer)) and not is_bool
        else:
            ok = isinstance(value, (int, float, np.integer, np.floating)) and not is_bool
        if not ok:
            self.fail(path, f"expected a {sinfo.dtype} value, got {_describe(value)}")
        if sinfo.value is not None:
            self._dims([sinfo.value], (value,), path, define, f"value {value}")

    def _dims(self, dims, actual, path: str, define: bool, shown: str) -> None:
        if dims is None:
            return
        for d, a in zip(dims, actual):
            if isinstance(d, SymDim) and d.is_var():
                if define and self.bind:
                    bound = self.sizes.setdefault(d.name, int(a))
                    if bound != a:
                        self.fail(path, f"size {d.name} is {bound} (from an earlier value) but here {a}: {shown}")
                    continue
            if define:
                continue
            if isinstance(d, SymDim) and not d.free_vars() <= self.sizes.keys():
                continue  # see the class docstring
            want = sym.evaluate(d, self.sizes) if isinstance(d, SymDim) else d
            if want != a and not (want != want and a != a):  # (a NaN value matches R.Prim(value=nan))
                detail = f" with {', '.join(f'{v}={self.sizes[v]}' for v in sorted(d.free_vars()))}" \
                    if isinstance(d, SymDim) else ""
                self.fail(path, f"expected {d}{detail}, got {a}: {shown}")


class Interpreter:
    """Evaluates the functions of one module; ``Interpreter(mod).call("main", x)``."""

    def __init__(self, mod: IRModule):
        if not isinstance(mod, IRModule):
            raise TypeError(f"Interpreter: expected an IRModule, got {type(mod).__name__}")
        self.mod = mod

    def call(self, func_name: str, *args: Value) -> Value:
        """Run ``func_name`` on ``args`` and return its result."""
        if func_name not in self.mod:
            raise KeyError(f"interpret: the module has no function {func_name!r} "
                           f"(it has: {', '.join(self.mod) or 'none'})")
        cycle = call_cycle(self.mod, [func_name])
        if cycle:
            raise InterpreterError(f"interpret: {recursion_message(cycle)}")
        # Lists are accepted for tuples; a NumPy scalar is a 0-d array where the parameter is a tensor (elsewhere it
        # may be a PrimValue).
        params = self.mod[func_name].params
        args = [np.asarray(a) if isinstance(a, np.generic) and i < len(params) and
                isinstance(params[i].struct_info, TensorStructInfo) else a for i, a in enumerate(args)]
        return self._apply(self.mod[func_name], func_name, [_tuples(a) for a in args], {})

    __call__ = call

    def _apply(self, func: Function, name: str, args: list, outer_env: Mapping[Var, Value]) -> Value:
        if len(args) != len(func.params):
            raise InterpreterError(f"{name}: expected {len(func.params)} argument(s) "
                                   f"({', '.join(p.name_hint for p in func.params)}), got {len(args)}")
        sizes: dict[str, int] = {}
        env = dict(outer_env)
        for i, (p, a) in enumerate(zip(func.params, args)):
            _Matcher(sizes, f"{name}: argument {i} ('{p.name_hint}')", bind=True)._walk(p.struct_info, a, "", True)
            env[p] = a
        for i, (p, a) in enumerate(zip(func.params, args)):
            _Matcher(sizes, f"{name}: argument {i} ('{p.name_hint}')", bind=True)._walk(p.struct_info, a, "", False)
        frame = _Frame(self, name, env, sizes)
        result = frame.eval(func.body)
        _Matcher(sizes, f"{name}: result", bind=True).match(func.ret_struct_info, result)
        return result


class _Frame:
    """The evaluation of one function call: its variables and size variables."""

    def __init__(self, interp: Interpreter, name: str, env: dict, sizes: dict[str, int]):
        self.interp, self.name, self.env, self.sizes = interp, name, env, sizes
        self.binding = ""  # the binding being evaluated, named in an op's error

    def eval(self, e: Expr) -> Value:
        if isinstance(e, Var):
            if e not in self.env:
                raise InterpreterError(f"{self.name}: variable '{e.name_hint}' has no value (used before its "
                                       "definition or outside its scope)")
            return self.env[e]
        if isinstance(e, Constant):
            return e.data
        if isinstance(e, ShapeExpr):
            return tuple(self.size(d, f"the shape R.shape([{', '.join(map(str, e.values))}])") for d in e.values)
        if isinstance(e, PrimValue):
            return self.size(e.value, f"R.prim_value({e.value})") if isinstance(e.value, SymDim) else e.value
        if isinstance(e, StringImm):
            return e.value
        if isinstance(e, Tuple):
            return tuple(self.eval(f) for f in e.fields)
        if isinstance(e, TupleGetItem):
            return self.eval(e.tuple_value)[e.index]
        if isinstance(e, Call):
            return self.call(e)
        if isinstance(e, SeqExpr):
            for block in e.blocks:
                for b in block.bindings:
                    self.bind(b)
            return self.eval(e.body)
        if isinstance(e, If):
            return self.eval(e.true_branch if self.condition(e.cond) else e.false_branch)
        if isinstance(e, Function):
            return _Closure(e, dict(self.env), f"{self.name}.<lambda>")
        if isinstance(e, GlobalVar):
            return _Closure(self.interp.mod[e.name_hint], {}, e.name_hint)
        raise TypeError(f"interpret: unknown expression type {type(e).__name__}")

    def condition(self, cond: Expr) -> bool:
        """An If's condition: a 0-d bool array or a bool (an ``R.Prim("bool")``); anything else is refused, as the
        struct info of a well-formed condition promises."""
        value = self.eval(cond)
        if isinstance(value, np.ndarray) and value.dtype == np.bool_ and value.ndim == 0:
            return bool(value)
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        where = f"{self.name}: binding '{self.binding}'" if self.binding else self.name
        raise InterpreterError(f"{where}: the condition of an R.If must be a 0-d bool tensor or a bool, got "
                               f"{_describe(value)}")

    def size(self, d, where: str) -> int:
        """The value of the size ``d`` in this call; an ``InterpreterError`` naming a size variable nothing
        defined (no parameter's or match_cast's struct info binds it: the module is not well formed)."""
        try:
            return sym.evaluate(d, self.sizes)
        except sym.UnboundSizeError as exc:
            raise InterpreterError(f"{self.name}: {where} uses the size variable {exc.name!r}, which has no value "
                                   "(no parameter's or match_cast's struct info defines it)") from None

    def bind(self, b) -> None:
        self.binding = b.var.name_hint
        value = self.eval(b.value)
        where = f"{self.name}: binding '{b.var.name_hint}'"
        if isinstance(b, MatchCast):
            _Matcher(self.sizes, f"{self.name}: match_cast '{b.var.name_hint}'", bind=True).match(b.struct_info, value)
        elif isinstance(b, VarBinding):
            _Matcher(self.sizes, where, bind=False).match(b.var.struct_info, value)
        else:
            raise TypeError(f"interpret: unknown binding type {type(b).__name__}")
        self.env[b.var] = value

    def call(self, call: Call) -> Value:
        args = [self.eval(a) for a in call.args]
        callee = call.op
        if isinstance(callee, GlobalVar):
            return self.interp._apply(self.interp.mod[callee.name_hint], callee.name_hint, args, {})
        if isinstance(callee, Expr):
            closure = self.eval(callee)
            if isinstance(closure, _Closure):
                return self.interp._apply(closure.func, closure.name, args, closure.env)
            if callable(closure):  # a host function passed in as an argument (a callback parameter)
                return self._host_call(getattr(callee, "name_hint", str(callee)), closure, args)
            raise InterpreterError(f"{self.name}: {callee} is called but is {_describe(closure)}")
        if isinstance(callee, ExternFunc):
            return self._host_call(callee.global_symbol, get_global_func(callee.global_symbol), args)
        attrs = substitute_attrs(call.attrs, self.sizes)
        if callee.check_sizes is not None:
            refused = callee.check_sizes(call.struct_info, attrs, self.sizes)
            if refused:
                raise InterpreterError(f"{self.name}: binding '{self.binding}': {callee.name}: {refused}")
        try:
            return _as_value(callee.reference(*args, **attrs))
        except Exception as exc:  # name the op and the binding: a bare NumPy error says neither
            unbound = sorted(_attr_vars(call.attrs) - self.sizes.keys())
            if unbound:  # the reference got a symbolic attribute it cannot use: say which size lacks a value
                raise InterpreterError(f"{self.name}: {callee.name}'s attributes use the size variable {unbound[0]!r}"
                                       ", which has no value (no parameter's or match_cast's struct info defines it)"
                                       ) from exc
            kind = InterpreterIndexError if isinstance(exc, IndexError) else InterpreterError
            where = f"{self.name}: binding '{self.binding}'" if self.binding else self.name
            raise kind(f"{where}: {callee.name} failed on "
                       f"{', '.join(_describe(a) for a in args)}: {exc}") from exc

    def _host_call(self, name: str, fn, args: list) -> Value:
        try:
            result = fn(*args)
        except Exception as exc:  # name the binding: the host function's own error does not
            raise InterpreterError(f"{self.name}: the host function {name!r} raised {type(exc).__name__}: "
                                   f"{exc}") from exc
        return () if result is None else _as_value(result)


# -- host functions: what R.call_packed("name", ...) calls -------------------------------------------------------

_GLOBAL_FUNCS: dict[str, Any] = {}


def register_func(name: str, fn=None, override: bool = False):
    """Register ``fn`` as the host function ``name`` that ``R.call_packed(name, ...)`` calls (TVM's
    ``tvm.register_func``); without ``fn``, a decorator. Refuses to replace a registered one unless
    ``override``. Only the reference interpreter calls host functions."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_func: the name must be a non-empty string, got {name!r}")

    def register(f):
        if not callable(f):
            raise TypeError(f"register_func({name!r}): expected a callable, got {type(f).__name__}")
        if name in _GLOBAL_FUNCS and not override:
            raise ValueError(f"register_func: {name!r} is already registered (pass override=True to replace it)")
        _GLOBAL_FUNCS[name] = f
        return f
    return register if fn is None else register(fn)


def get_global_func(name: str, allow_missing: bool = False):
    """The host function registered as ``name`` (None if ``allow_missing`` and there is none)."""
    if name not in _GLOBAL_FUNCS:
        if allow_missing:
            return None
        known = ", ".join(sorted(_GLOBAL_FUNCS)) or "none"
        raise InterpreterError(f"R.call_packed: no host function named {name!r} is registered "
                               f"(relax_mlir.register_func; registered: {known})")
    return _GLOBAL_FUNCS[name]


def remove_global_func(name: str) -> None:
    """Forget the host function ``name`` (a KeyError if it is not registered)."""
    del _GLOBAL_FUNCS[name]


def _attr_vars(value) -> set[str]:
    """The size variables an op's attribute values (dims, nested in tuples and dicts) mention."""
    if isinstance(value, SymDim):
        return value.free_vars()
    if isinstance(value, (tuple, list)):
        return set().union(*map(_attr_vars, value))
    if isinstance(value, dict):
        return set().union(*map(_attr_vars, value.values()))
    return set()


def _as_value(v) -> Value:
    """Normalise what a caller or an op reference hands over: NumPy scalars become 0-d arrays, lists tuples."""
    if isinstance(v, np.generic):
        return np.asarray(v)
    if isinstance(v, (list, tuple)):
        return tuple(_as_value(x) for x in v)
    return v


def _tuples(v) -> Value:
    return tuple(_tuples(x) for x in v) if isinstance(v, (list, tuple)) else v


def interpret(mod: IRModule, func_name: str, *args: Value) -> Value:
    """Evaluate ``mod[func_name](*args)`` with the ops' NumPy references; see the module docstring."""
    try:
        return Interpreter(mod).call(func_name, *args)
    except RecursionError:
        raise RecursionError(f"interpret: {func_name}: the program nests too deeply for the interpreter (a chain of "
                             f"calls or tuples beyond Python's recursion limit, {sys.getrecursionlimit()} frames); "
                             "compile it instead (relax_mlir.compile), which has no such limit") from None
