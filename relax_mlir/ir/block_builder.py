"""``BlockBuilder``: builds Relax functions binding by binding, inferring struct info as it goes.

    bb = BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            lv0 = bb.emit(op.matmul(x, w))
            gv = bb.emit_output(op.nn.relu(lv0))
        bb.emit_func_output(gv)
    mod = bb.get()

Emitted expressions are normalised to A-normal form: a nested call in an argument is bound to a variable of
its own first, so every binding's value is one op call (or tuple, tuple item, constant, ...).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping, Optional, Sequence, Union


from .expr import (Binding, BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr, Function, GlobalVar, If,
                   MatchCast, PrimValue, SeqExpr, ShapeExpr, StringImm, Tuple, TupleGetItem, Var, VarBinding)
from .attrs import freeze_attr
from .expr import if_condition_problem
from .module import IRModule, check_function_name
from .struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
                          TensorStructInfo, TupleStructInfo, defined_size_vars, erase_to_well_defined, substitute)
from . import sym
from .sym import SymDim

_LEAVES = (Var, Constant, ShapeExpr, PrimValue, GlobalVar, StringImm)


class BlockBuilderError(RuntimeError):
    """A BlockBuilder method was used out of order (e.g. ``emit_output`` outside a dataflow block)."""


class _FunctionFrame:
    def __init__(self, name: str, params: Optional[Sequence[Var]], attrs: Mapping[str, Any], pure: bool):
        self.name = name
        self.params = list(params) if params is not None else None
        self.attrs = dict(attrs)
        self.pure = pure
        self.blocks: list[BindingBlock] = []
        self.names: dict[str, int] = {}
        self.emitted: dict[Expr, Var] = {}  # nested expressions already bound, by identity


class BlockBuilder:
    """Builds functions and modules; see the module docstring for the usual pattern."""

    def __init__(self, mod: Optional[IRModule] = None):
        self._mod = mod.copy() if mod is not None else IRModule()
        self._func: Optional[_FunctionFrame] = None
        self._bindings: Optional[list[Binding]] = None
        self._dataflow = False
        self._bound: dict[Var, Expr] = {}

    # -- functions ----------------------------------------------------------------------------------
    @contextlib.contextmanager
    def function(self, name: str, params: Union[Var, Sequence[Var], None] = None,
                 attrs: Optional[Mapping[str, Any]] = None, pure: bool = True,
                 private: bool = False) -> Iterator[None]:
        """Open a function; its body is built inside the ``with`` and closed by ``emit_func_output``."""
        if self._func is not None:
            raise BlockBuilderError(f"BlockBuilder.function({name!r}): already inside function "
                                    f"{self._func.name!r}; functions do not nest")
        check_function_name(name, f"BlockBuilder.function({name!r})")
        if isinstance(params, Var):
            params = [params]
        self._func = _FunctionFrame(name, params, {k: freeze_attr(v) for k, v in (attrs or {}).items()}, pure)
        self._begin(dataflow=False)
        try:
            yield
        except BaseException:
            self._func, self._bindings = None, None
            raise
        if self._func is not None:
            name, self._func, self._bindings = self._func.name, None, None
            raise BlockBuilderError(f"BlockBuilder.function({name!r}): the body ended without emit_func_output")

    def emit_func_output(self, output: Union[Expr, Sequence[Expr]], params: Optional[Sequence[Var]] = None) -> GlobalVar:
        """Finish the current function with ``output`` as its result and add it to the module."""
        frame = self._require_function("emit_func_output")
        if self._dataflow:
            raise BlockBuilderError("BlockBuilder.emit_func_output: close the dataflow block first "
                                    "(emit_func_output must be outside `with bb.dataflow()`)")
        if params is not None:
            if frame.params is not None:
                raise BlockBuilderError(f"BlockBuilder.emit_func_output: parameters of {frame.name!r} were "
                                        "already given to bb.function()")
            frame.params = [params] if isinstance(params, Var) else list(params)
        if frame.params is None:
            raise BlockBuilderError(f"BlockBuilder: function {frame.name!r} has no parameter list")
        if isinstance(output, (list, tuple)):
            output = Tuple(list(output))
        output = self.normalize(output)
        self._end()
        blocks = [b for b in frame.blocks if b.bindings]
        func = Function(frame.params, SeqExpr(blocks, output), function_result_struct_info(frame.params, output),
                        frame.attrs, frame.pure)
        self._func = None
        return self.add_func(func, frame.name)

    # -- blocks -------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def dataflow(self) -> Iterator[None]:
        """A dataflow block: emitted vars are ``DataflowVar``s unless emitted with ``emit_output``."""
        self._require_function("dataflow")
        if self._dataflow:
            raise BlockBuilderError("BlockBuilder.dataflow: dataflow blocks do not nest")
        self._end()
        self._begin(dataflow=True)
        try:
            yield
        finally:
            self._end()
            self._begin(dataflow=False)

    def begin_dataflow_block(self) -> None:
        self._end()
        self._begin(dataflow=True)

    def begin_binding_block(self) -> None:
        self._end()
        self._begin(dataflow=False)

    def end_block(self) -> BindingBlock:
        block = self._end()
        self._begin(dataflow=False)
        return block

    def current_block_is_dataflow(self) -> bool:
        return self._dataflow

    def _begin(self, dataflow: bool) -> None:
        self._bindings, self._dataflow = [], dataflow
        if self._func is not None:
            self._func.emitted = {}  # a block's dataflow variables are not visible in the next one

    def _end(self) -> BindingBlock:
        bindings = self._bindings or []
        block = DataflowBlock(bindings) if self._dataflow else BindingBlock(bindings)
        if self._func is not None and bindings:
            self._func.blocks.append(block)
        self._bindings, self._dataflow = [], False
        return block

    # -- emitting -----------------------------------------------------------------------------------
    def emit(self, expr: Expr, name_hint: str = "") -> Var:
        """Bind ``expr`` (normalised) to a new variable and return it."""
        if isinstance(expr, (list, tuple)):
            expr = Tuple(list(expr))
        value = self.normalize(expr)
        var_cls = DataflowVar if self._dataflow else Var
        return self._bind(VarBinding(var_cls(self._name(name_hint, "lv" if self._dataflow else "gv"),
                                             value.struct_info), value))

    def emit_output(self, expr: Expr, name_hint: str = "") -> Var:
        """In a dataflow block: bind ``expr`` to a (non-dataflow) variable visible after the block."""
        if not self._dataflow:
            raise BlockBuilderError("BlockBuilder.emit_output: only inside a dataflow block "
                                    "(use emit outside one)")
        if isinstance(expr, (list, tuple)):
            expr = Tuple(list(expr))
        value = self.normalize(expr)
        return self._bind(VarBinding(Var(self._name(name_hint, "gv"), value.struct_info), value))

    def match_cast(self, value: Expr, struct_info: StructInfo, name_hint: str = "") -> Var:
        """Bind ``value`` refined to ``struct_info`` (a checked cast; new size variables get bound)."""
        value = self.normalize(value)
        var_cls = DataflowVar if self._dataflow else Var
        return self._bind(MatchCast(var_cls(self._name(name_hint, "lv" if self._dataflow else "gv"),
                                            struct_info), value, struct_info))

    emit_match_cast = match_cast

    def emit_normalized(self, binding: Binding) -> None:
        """Append an already-normalised binding as it is."""
        self._bind(binding)

    def _bind(self, binding: Binding) -> Var:
        if self._bindings is None or self._func is None:
            raise BlockBuilderError("BlockBuilder: emit only inside `with bb.function(...)`")
        self._bindings.append(binding)
        self._bound[binding.var] = binding.value
        return binding.var

    def lookup_binding(self, var: Var) -> Optional[Expr]:
        """The value a variable emitted by this builder is bound to."""
        return self._bound.get(var)

    def _name(self, hint: str, default: str) -> str:
        frame = self._require_function("emit")
        base = hint or default
        count = frame.names.get(base, 0)
        frame.names[base] = count + 1
        # As TVM: the first is "lv", then "lv1", "lv2"; explicit hints are kept when new.
        return base if count == 0 else f"{base}{count}"

    def _require_function(self, what: str) -> _FunctionFrame:
        if self._func is None:
            raise BlockBuilderError(f"BlockBuilder.{what}: not inside `with bb.function(...)`")
        return self._func

    # -- normalisation ------------------------------------------------------------------------------
    def normalize(self, expr: Expr) -> Expr:
        """Fill in struct info and bring ``expr`` to A-normal form (nested calls are emitted first)."""
        if isinstance(expr, _LEAVES):
            return expr
        if isinstance(expr, Tuple):
            fields = [self._normalize_arg(f) for f in expr.fields]
            if all(a is b for a, b in zip(fields, expr.fields)) and expr.struct_info is not None:
                return expr
            return Tuple(fields, span=expr.span)
        if isinstance(expr, TupleGetItem):
            inner = self._normalize_arg(expr.tuple_value)
            return expr if inner is expr.tuple_value else TupleGetItem(inner, expr.index, span=expr.span)
        if isinstance(expr, Call):
            return self._normalize_call(expr)
        if isinstance(expr, If):
            return self._normalize_if(expr)
        if isinstance(expr, (Function, SeqExpr)):
            return expr
        raise TypeError(f"BlockBuilder.normalize: unknown expression type {type(expr).__name__}")

    def _normalize_arg(self, expr: Expr) -> Expr:
        # The same nested expression object used twice (a rule reusing a mask, say) is bound once.
        if self._func is not None and expr in self._func.emitted:
            return self._func.emitted[expr]
        normalized = self.normalize(expr)
        if isinstance(normalized, (Call, TupleGetItem)) and self._func is not None:
            var = self.emit(normalized)
            self._func.emitted[expr] = var
            return var
        return normalized

    def _normalize_call(self, call: Call) -> Call:
        args = [self._normalize_arg(a) for a in call.args]
        changed = any(a is not b for a, b in zip(args, call.args))
        if not changed and call.struct_info is not None:
            return call
        if isinstance(call.op, GlobalVar):
            sinfo = self.infer_call_to_function(call.op, args)
        else:
            sinfo = call.op.infer_struct_info(args, call.attrs)
        return Call(call.op, args, call.attrs, sinfo, span=call.span)

    def _normalize_if(self, if_: If) -> If:
        """``relax.If(cond, a, b)`` made well formed, as TVM's normaliser makes it: a nested condition is bound
        first (before the If), and a branch's result that is not a leaf (``R.add(x, y)``) is bound inside that branch.
        An If may not be bound in a dataflow block (TVM's rule), and its condition must be a bool scalar."""
        if self._dataflow:
            raise BlockBuilderError("BlockBuilder: an R.If cannot be emitted inside a dataflow block (TVM's rule); "
                                    "emit it after the block, outside `with bb.dataflow()`")
        cond = self._normalize_arg(if_.cond)
        problem = if_condition_problem(cond)
        if problem is not None:
            raise ValueError(f"BlockBuilder: {problem}")
        branches = [self._normalize_branch(b) for b in (if_.true_branch, if_.false_branch)]
        if cond is if_.cond and all(a is b for a, b in zip(branches, (if_.true_branch, if_.false_branch))):
            return if_
        return If(cond, *branches, span=if_.span)

    def _normalize_branch(self, branch: SeqExpr) -> SeqExpr:
        """``branch`` with its result bound to a variable of its own when it is not a leaf (a tuple of leaves is
        one), its nested calls first; the bindings stay in the branch, and nothing bound for one branch is reused in
        the other."""
        body = branch.body
        if isinstance(body, _LEAVES) or self._func is None or \
                isinstance(body, Tuple) and all(isinstance(f, _LEAVES) for f in body.fields):
            return branch
        frame = self._func
        saved = self._bindings, self._dataflow, frame.emitted
        self._bindings, self._dataflow, frame.emitted = [], False, {}
        try:
            body = self.normalize(body)
            if not isinstance(body, (_LEAVES, Tuple)):
                body = self.emit(body)
            tail = self._bindings
        finally:
            self._bindings, self._dataflow, frame.emitted = saved
        return SeqExpr(list(branch.blocks) + [BindingBlock(tail)], body, span=branch.span)

    def infer_call_to_function(self, gvar: GlobalVar, args: Sequence[Expr]) -> StructInfo:
        """The return struct info of a call to a module function, its size variables bound by the args."""
        callee_sinfo = gvar.struct_info
        if gvar.name_hint in self._mod:
            callee_sinfo = self._mod[gvar.name_hint].struct_info
        if not isinstance(callee_sinfo, FuncStructInfo):
            return ObjectStructInfo()
        return call_return_struct_info(gvar.name_hint, callee_sinfo, [a.struct_info for a in args])

    # -- the module ---------------------------------------------------------------------------------
    def add_func(self, func: Function, func_name: str) -> GlobalVar:
        """Add ``func`` under ``func_name`` (replacing a function of that name) and return its GlobalVar."""
        name = func_name.name_hint if isinstance(func_name, GlobalVar) else func_name
        check_function_name(name, f"BlockBuilder.add_func(..., {name!r})")
        self._mod[func_name] = func
        return self._mod.get_global_var(func_name)

    def update_func(self, gvar: Union[GlobalVar, str], func: Function) -> None:
        self._mod[gvar] = func

    def get(self) -> IRModule:
        """The module built so far."""
        if self._func is not None:
            raise BlockBuilderError(f"BlockBuilder.get: function {self._func.name!r} is still open")
        return self._mod.copy()

    def get_global_var(self, name: str) -> GlobalVar:
        return self._mod.get_global_var(name)


def function_result_struct_info(params: Sequence[Var], result: Expr) -> StructInfo:
    """A function's return struct info: its result's, erased to the sizes its parameters define (TVM's
    ``EraseToWellDefined``). A size the body defines (an ``R.match_cast``) is unknown to every caller."""
    return erase_to_well_defined(result.struct_info, set().union(*(defined_size_vars(p.struct_info) for p in params)))


def call_return_struct_info(name: str, callee: FuncStructInfo, args: Sequence[Optional[StructInfo]]) -> StructInfo:
    """Check a call's argument count and bind the callee's size variables from the argument shapes. A part of the
    result naming a size the arguments do not bind is erased (its rank or dtype kept), as TVM does: the callee's
    own name for it would otherwise become a size of the caller's."""
    env = call_size_bindings(callee, args, name)
    return substitute(erase_to_well_defined(callee.ret, env.keys()), env)


def call_size_bindings(callee: FuncStructInfo, args: Sequence[Optional[StructInfo]],
                       name: str = "function") -> dict[str, Any]:
    """The callee's size variables bound to the arguments' dims (checking count, dtypes and static dims)."""
    if len(args) != len(callee.params):
        raise ValueError(f"call to {name}: expected {len(callee.params)} argument(s), got {len(args)}")
    env: dict[str, Any] = {}
    for i, (param, arg) in enumerate(zip(callee.params, args)):
        if arg is not None:
            _bind_sizes(param, arg, env, f"call to {name}: argument {i}")
    return env


def _bind_sizes(param: StructInfo, arg: StructInfo, env: dict, where: str) -> None:
    """Bind the callee's plain size variables from ``arg``, then check every dim that is then known."""
    if isinstance(param, ObjectStructInfo):
        return
    if type(param) is not type(arg) and not isinstance(arg, ObjectStructInfo):
        raise ValueError(f"{where}: expected {param}, got {arg}")
    if isinstance(param, TensorStructInfo) and isinstance(arg, TensorStructInfo):
        if param.dtype != arg.dtype:
            raise ValueError(f"{where}: expected dtype {param.dtype}, got {arg.dtype}")
        if param.ndim != -1 and arg.ndim != -1 and param.ndim != arg.ndim:
            raise ValueError(f"{where}: expected rank {param.ndim}, got rank {arg.ndim}")
        _bind_dims(param.shape, arg.shape, env, where, param)
    elif isinstance(param, TupleStructInfo) and isinstance(arg, TupleStructInfo):
        if len(param.fields) != len(arg.fields):
            raise ValueError(f"{where}: expected a tuple of {len(param.fields)}, got {len(arg.fields)}")
        for i, (p, a) in enumerate(zip(param.fields, arg.fields)):
            _bind_sizes(p, a, env, f"{where}[{i}]")
    elif isinstance(param, ShapeStructInfo) and isinstance(arg, ShapeStructInfo):
        if param.ndim != -1 and arg.ndim != -1 and param.ndim != arg.ndim:
            raise ValueError(f"{where}: expected a shape of length {param.ndim}, got {arg.ndim}")
        _bind_dims(param.values, arg.values, env, where, param)
    elif isinstance(param, PrimStructInfo) and isinstance(arg, PrimStructInfo):
        value = param.value  # ``k: R.Prim(value="m")`` binds m, as a shape's dims do
        if isinstance(value, SymDim) and value.is_var() and value.name not in env and \
                isinstance(arg.value, (int, SymDim)) and not isinstance(arg.value, bool):
            env[value.name] = arg.value


def _bind_dims(params, args, env: dict, where: str, sinfo: StructInfo) -> None:
    if params is None or args is None:
        return
    for p, a in zip(params, args):
        if isinstance(p, SymDim) and p.is_var() and p.name not in env:
            env[p.name] = a
    for p, a in zip(params, args):
        expected = substitute_dim(p, env)
        if expected is not None and expected != a and not (isinstance(a, SymDim) or isinstance(expected, SymDim)):
            bound = f" with {' and '.join(f'{k}={v}' for k, v in env.items())}" if env else ""
            raise ValueError(f"{where}: expected {sinfo}{bound}, got dimension {a} where {expected} was expected")


def substitute_dim(d, env: dict):
    """``d`` with the bound size variables replaced, or ``None`` if some variable is unbound."""
    if isinstance(d, int):
        return d
    if not d.free_vars() <= env.keys():
        return None
    return sym.substitute(d, env.__getitem__)
