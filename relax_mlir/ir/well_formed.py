"""The well-formedness check (TVM's ``relax.analysis.well_formed``), run after every pass in the tests.

It reports every problem at once, each naming the function and the binding or parameter:

* scoping: a variable used before its definition or never defined; a ``DataflowVar`` defined outside a dataflow
  block or used after its block; a variable defined twice (a parameter also bound counts);
* calls: a call of a function the module does not have, or with the wrong number or kinds of arguments;
* struct info (unless ``check_struct_info=False``): missing on a parameter, binding variable or call; a binding
  variable whose struct info does not describe what its value's re-inference gives (a base of it, such as
  ``R.Tensor(ndim=2)`` or ``R.Object``, does, as in TVM; a ``MatchCast`` variable's must be the cast's);
  a return struct info that does not describe the body's result; an op call its op refuses;
* size variables used before a parameter or a ``MatchCast`` defines them; a tuple index out of range;
* ``R.If``: inside a dataflow block (TVM's rule), a condition that is not a leaf or not a bool scalar, a branch's
  variable (or size) used after the If.

    check_well_formed(mod)
    WellFormedError: module is not well formed (2 problems):
      - main, binding 'lv1': var 'z' is not defined in this function
      - main, binding 'gv': struct info R.Tensor((3,), dtype="float32") disagrees with its value's ...
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

from .block_builder import call_return_struct_info
from .expr import (BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr, ExternFunc, Function, GlobalVar,
                   If, MatchCast, PrimValue, SeqExpr, ShapeExpr, Tuple, TupleGetItem, Var, VarBinding,
                   branch_struct_info, if_condition_problem)
from .module import IRModule
from .printer import format_expr, format_struct_info
from .struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
                          TensorStructInfo, TupleStructInfo, defined_size_vars, is_base_of, struct_info_lca)
from .sym import SymDim, free_vars as dim_free_vars
from .visitor import ExprVisitor


class WellFormedError(ValueError):
    """The IR is not well formed; ``problems`` lists every problem found, one message each."""

    def __init__(self, problems: Sequence[str], what: str = "module"):
        self.problems = list(problems)
        n = len(self.problems)
        super().__init__(f"{what} is not well formed ({n} problem{'s' if n != 1 else ''}):\n"
                         + "\n".join(f"  - {p}" for p in self.problems))


def find_problems(obj: Union[IRModule, Function], check_struct_info: bool = True) -> list[str]:
    """Every well-formedness problem of a module or a function, as messages (empty when well formed)."""
    problems: list[str] = []
    if isinstance(obj, IRModule):
        for name, func in obj.items():
            _Checker(obj, name, check_struct_info, problems).check_function(func)
    elif isinstance(obj, Function):
        symbol = obj.attrs.get("global_symbol")
        name = symbol if isinstance(symbol, str) else "<function>"  # (a symbol of another type is a problem)
        _Checker(None, name, check_struct_info, problems).check_function(obj)
    else:
        raise TypeError(f"well_formed: expected an IRModule or a Function, got {type(obj).__name__}")
    return problems


def well_formed(obj: Union[IRModule, Function], check_struct_info: bool = True) -> bool:
    """True when ``obj`` has none of the problems listed in the module docstring."""
    return not find_problems(obj, check_struct_info)


def check_well_formed(obj: Union[IRModule, Function], check_struct_info: bool = True, where: str = "") -> None:
    """Raise :class:`WellFormedError` listing every problem of ``obj``; ``where`` (e.g. "after Gradient")
    says when the check ran."""
    problems = find_problems(obj, check_struct_info)
    if problems:
        what = "module" if isinstance(obj, IRModule) else "function"
        raise WellFormedError(problems, f"{what} {where}" if where else what)


def _short(e: Expr) -> str:
    try:
        text = " ".join(format_expr(e).split())
    except TypeError:
        text = type(e).__name__
    return text if len(text) <= 80 else text[:77] + "..."


plain_size_vars = defined_size_vars  # (its older name: passes that drop parameters ask which sizes the others define)


def _size_uses(sinfo: Optional[StructInfo]) -> set[str]:
    if isinstance(sinfo, TensorStructInfo):
        return set().union(*(dim_free_vars(d) for d in sinfo.shape or ()))
    if isinstance(sinfo, ShapeStructInfo):
        return set().union(*(dim_free_vars(d) for d in sinfo.values or ()))
    if isinstance(sinfo, PrimStructInfo):
        return dim_free_vars(sinfo.value) if isinstance(sinfo.value, SymDim) else set()
    if isinstance(sinfo, TupleStructInfo):
        return set().union(*(_size_uses(f) for f in sinfo.fields))
    if isinstance(sinfo, FuncStructInfo):
        return set()  # a callee's signature has its own size variables
    return set()


def _same_kind(param: StructInfo, arg: StructInfo) -> bool:
    """Whether an argument can be passed for a parameter at all (shapes and dtypes are checked elsewhere)."""
    if isinstance(param, ObjectStructInfo):
        return True
    if isinstance(param, TupleStructInfo) and isinstance(arg, TupleStructInfo):
        return len(param.fields) == len(arg.fields) and all(map(_same_kind, param.fields, arg.fields))
    return type(param) is type(arg)


class _Checker(ExprVisitor):
    """Checks one function; problems are appended to the shared list."""

    def __init__(self, mod: Optional[IRModule], func_name: str, check_sinfo: bool, problems: list[str]):
        self.mod, self.func_name, self.check_sinfo, self.problems = mod, func_name, check_sinfo, problems
        self.where = "signature"
        self.scope: set[Var] = set()  # variables visible here
        self.defined: set[Var] = set()  # every variable defined so far (for "defined twice")
        self.expired: set[Var] = set()  # DataflowVars of blocks already closed
        self.all_defs: set[Var] = set()  # every variable the function defines anywhere (for "used before")
        self.sizes: set[str] = set()
        self.unknown_sizes: set[str] = set()  # already reported: one problem per undefined size variable
        self.in_dataflow = False
        self.block_vars: list[Var] = []
        self.inferred: dict[Call, Optional[StructInfo]] = {}
        self.binding_value: Optional[Expr] = None
        self.branch_vars: set[Var] = set()  # variables of the branches of Ifs already closed

    def report(self, message: str) -> None:
        self.problems.append(f"{self.func_name}, {self.where}: {message}")

    # -- functions -----------------------------------------------------------------------------------
    def check_function(self, func: Function) -> None:
        collector = _DefCollector()
        collector.visit_expr(func)
        self.all_defs = collector.defs
        self.visit_function_(func)

    def visit_function_(self, func: Function) -> None:
        outer = (set(self.scope), set(self.sizes), self.where)
        symbol = func.attrs.get("global_symbol")
        if "global_symbol" in func.attrs and not isinstance(symbol, str):
            # (the name the function is exported and looked up by: a BlockBuilder can set any value)
            self.where = "attributes"
            self.report(f"global_symbol must be a string, got {symbol!r} ({type(symbol).__name__})")
        for p in func.params:
            self.where = f"parameter '{p.name_hint}'"
            self.visit_var_def(p)
            self.sizes |= defined_size_vars(p.struct_info)
        for p in func.params:  # after all of them: a parameter may use a size another one defines
            self.where = f"parameter '{p.name_hint}'"
            self.check_sizes(p.struct_info)
        self.visit_expr(func.body)
        self.where = "return value"
        ret, body = func.ret_struct_info, self.infer(func.body)
        if ret is None:
            self.sinfo_problem("the function has no return struct info")
        elif self.check_sinfo and body is not None and not is_base_of(ret, body):
            self.report(f"return struct info {format_struct_info(ret)} does not describe the body's "
                        f"{format_struct_info(body)}")
        self.check_sizes(ret)
        self.scope, self.sizes, self.where = outer

    def visit_seq_expr_(self, seq: SeqExpr) -> None:
        for block in seq.blocks:
            self.visit_binding_block(block)
        self.where = "return value"
        self.visit_expr(seq.body)

    # -- blocks and bindings -------------------------------------------------------------------------
    def visit_binding_block_(self, block: BindingBlock) -> None:
        saved = self.in_dataflow, self.block_vars
        self.in_dataflow, self.block_vars = isinstance(block, DataflowBlock), []
        for b in block.bindings:
            self.visit_binding(b)
        # A block's DataflowVars go out of scope with it.
        self.scope -= set(self.block_vars)
        self.expired |= set(self.block_vars)
        self.in_dataflow, self.block_vars = saved

    def visit_dataflow_block_(self, block: DataflowBlock) -> None:
        self.visit_binding_block_(block)

    def visit_var_binding_(self, b: VarBinding) -> None:
        self.where = f"binding '{b.var.name_hint}'"
        self.binding_value = b.value
        self.visit_expr(b.value)
        self.binding_value = None
        self.visit_var_def(b.var)
        inferred = self.infer(b.value)
        if self.check_sinfo and b.var.struct_info is not None and inferred is not None:
            # As in TVM, an annotation may be a base of the value's struct info (R.Tensor(ndim=2), R.Object):
            # it describes the value, less precisely. A narrower or an incompatible one does not.
            if not is_base_of(b.var.struct_info, inferred):
                self.report(f"struct info {format_struct_info(b.var.struct_info)} disagrees with its value's "
                            f"{format_struct_info(inferred)} ({_short(b.value)})")
            elif isinstance(b.value, Call) and b.value.struct_info not in (None, inferred):
                self.report(f"the call's struct info {format_struct_info(b.value.struct_info)} disagrees with "
                            f"the one inferred from its arguments, {format_struct_info(inferred)}")
        self.check_sizes(b.var.struct_info)

    def visit_match_cast_(self, b: MatchCast) -> None:
        self.where = f"match_cast '{b.var.name_hint}'"
        self.visit_expr(b.value)
        self.sizes |= defined_size_vars(b.struct_info)  # the cast defines (or re-checks) these
        self.check_sizes(b.struct_info)
        self.visit_var_def(b.var)
        if self.check_sinfo and b.var.struct_info is not None and b.var.struct_info != b.struct_info:
            self.report(f"struct info {format_struct_info(b.var.struct_info)} differs from the cast's "
                        f"{format_struct_info(b.struct_info)}")

    def visit_var_def_(self, var: Var) -> None:
        kind = type(var).__name__
        if var in self.defined:
            self.report(f"{kind} '{var.name_hint}' is defined twice (the same Var object is bound again)")
        if isinstance(var, DataflowVar):
            if not self.in_dataflow:
                self.report(f"DataflowVar '{var.name_hint}' is defined outside a dataflow block")
            self.block_vars.append(var)
        if var.struct_info is None:
            self.sinfo_problem(f"{kind} '{var.name_hint}' has no struct info")
        self.defined.add(var)
        self.scope.add(var)

    # -- uses ----------------------------------------------------------------------------------------
    def visit_var_(self, var: Var) -> None:
        if var in self.scope:
            return
        if var in self.expired:
            self.report(f"DataflowVar '{var.name_hint}' is used outside its dataflow block")
        elif var in self.branch_vars:
            self.report(f"var '{var.name_hint}' is defined in a branch of an R.If and is not visible after it (the "
                        "If's own binding is)")
        elif var in self.all_defs:
            self.report(f"var '{var.name_hint}' is used before its definition")
        else:
            self.report(f"var '{var.name_hint}' is not defined in this function")

    def visit_if_(self, if_: If) -> None:
        """Each branch sees what was visible before the If and defines its own variables and sizes, which go out of
        scope with it (the If's binding is what is visible after it)."""
        if self.in_dataflow:
            self.report("an R.If cannot be inside a dataflow block (TVM's rule): bind it after the block")
        if not isinstance(if_.cond, (Var, Constant, PrimValue)):
            self.report(f"the condition of an R.If must be a variable or a constant, got {_short(if_.cond)}")
        self.visit_expr(if_.cond)
        problem = if_condition_problem(if_.cond) if self.check_sinfo else None
        if problem is not None:
            self.report(problem)
        outer = set(self.scope), set(self.sizes), self.where, self.binding_value, self.in_dataflow
        for branch in (if_.true_branch, if_.false_branch):
            if not isinstance(branch, SeqExpr):  # (the constructor makes one; a frozen node can still be forced)
                self.report(f"a branch of an R.If must be a SeqExpr, got {type(branch).__name__}")
            self.in_dataflow = False
            self.visit_expr(branch)
            self.branch_vars |= self.scope - outer[0]
            self.scope, self.sizes = set(outer[0]), set(outer[1])
        _, _, self.where, self.binding_value, self.in_dataflow = outer

    def visit_global_var_(self, gvar: GlobalVar) -> None:
        if self.mod is not None and gvar.name_hint not in self.mod:
            self.report(f"reference to undefined function '{gvar.name_hint}'")

    def visit_shape_expr_(self, shape: ShapeExpr) -> None:
        self.check_sizes(shape.struct_info)

    def visit_prim_value_(self, value: PrimValue) -> None:
        self.check_sizes(value.struct_info)

    def visit_tuple_getitem_(self, item: TupleGetItem) -> None:
        self.visit_expr(item.tuple_value)
        sinfo = self.infer(item.tuple_value)
        if isinstance(sinfo, TupleStructInfo) and not 0 <= item.index < len(sinfo.fields):
            self.report(f"tuple index {item.index} is out of range for a tuple of {len(sinfo.fields)} field(s) "
                        f"({_short(item.tuple_value)})")
        elif sinfo is not None and not isinstance(sinfo, (TupleStructInfo, ObjectStructInfo)):
            self.report(f"{_short(item.tuple_value)} is indexed but is not a tuple ({format_struct_info(sinfo)})")

    def visit_call_(self, call: Call) -> None:
        for arg in call.args:
            self.visit_expr(arg)
        if isinstance(call.op, Var):
            self.visit_expr(call.op)
        inferred = self.inferred[call] = self.infer_call(call)
        if call.struct_info is None:
            self.sinfo_problem(f"call {_short(call)} has no struct info")
        elif (self.check_sinfo and call is not self.binding_value and inferred is not None
              and call.struct_info != inferred):
            self.report(f"the struct info {format_struct_info(call.struct_info)} of {_short(call)} disagrees with "
                        f"the one inferred from its arguments, {format_struct_info(inferred)}")

    # -- inference -----------------------------------------------------------------------------------
    def infer_call(self, call: Call) -> Optional[StructInfo]:
        """The struct info the call's arguments give (``None`` when unknown or refused, which is reported)."""
        op = call.op
        if isinstance(op, GlobalVar):
            return self.infer_function_call(op, call.args)
        if isinstance(op, Expr):  # a local function's variable: its sizes are bound from the arguments too
            if not isinstance(op.struct_info, FuncStructInfo):
                return None
            return self.infer_callee_result(_short(op), op.struct_info, call.args)
        if isinstance(op, ExternFunc):  # a host function: its result is what the call declares
            return op.ret
        if not self.check_sinfo:
            return None
        try:
            op.complete_attrs(call.attrs)
            return op.infer_struct_info(call.args, call.attrs)
        except (ValueError, TypeError, IndexError) as exc:
            self.report(f"{_short(call)}: {exc}")
            return None

    def infer_function_call(self, gvar: GlobalVar, args: Sequence[Expr]) -> Optional[StructInfo]:
        name = gvar.name_hint
        if self.mod is not None and name not in self.mod:
            self.report(f"call to undefined function '{name}'")
            return None
        callee = self.mod[name].struct_info if self.mod is not None else gvar.struct_info
        return self.infer_callee_result(name, callee, args) if isinstance(callee, FuncStructInfo) else None

    def infer_callee_result(self, name: str, callee: FuncStructInfo, args: Sequence[Expr]) -> Optional[StructInfo]:
        """The result of calling ``callee`` (a global function or a local function's variable, named ``name``) on
        ``args``: its return struct info with its size variables bound from the arguments' shapes, the sizes they
        leave unbound erased (``call_return_struct_info``), or ``None`` when unknown or refused (reported)."""
        if len(args) != len(callee.params):
            self.report(f"call to {name}: expected {len(callee.params)} argument(s), got {len(args)}")
            return None
        arg_sinfo = [self.infer(a) for a in args]
        if not self.check_sinfo or any(s is None for s in arg_sinfo):
            return None
        for i, (p, a) in enumerate(zip(callee.params, arg_sinfo)):
            if not _same_kind(p, a):
                self.report(f"call to {name}: argument {i}: expected {format_struct_info(p)}, "
                            f"got {format_struct_info(a)}")
                return None
        try:
            return call_return_struct_info(name, callee, arg_sinfo)
        except ValueError as exc:
            self.report(str(exc))
            return None

    def infer(self, e: Expr) -> Optional[StructInfo]:
        """The struct info ``e`` has given its parts (calls re-inferred), or ``None`` when unknown."""
        if isinstance(e, Call):
            return self.inferred.get(e, e.struct_info) if self.check_sinfo else e.struct_info
        if isinstance(e, Tuple):
            fields = [self.infer(f) for f in e.fields]
            return None if any(f is None for f in fields) else TupleStructInfo(fields)
        if isinstance(e, TupleGetItem):
            sinfo = self.infer(e.tuple_value)
            if isinstance(sinfo, TupleStructInfo) and 0 <= e.index < len(sinfo.fields):
                return sinfo.fields[e.index]
            return None
        if isinstance(e, SeqExpr):
            return self.infer(e.body)
        if isinstance(e, If):
            sides = [branch_struct_info(b, self.infer(b)) for b in (e.true_branch, e.false_branch)]
            return e.struct_info if any(s is None for s in sides) else struct_info_lca(*sides)
        return e.struct_info

    def sinfo_problem(self, message: str) -> None:
        if self.check_sinfo:
            self.report(message)

    def check_sizes(self, sinfo: Optional[StructInfo]) -> None:
        missing = _size_uses(sinfo) - self.sizes - self.unknown_sizes
        self.unknown_sizes |= missing
        if missing:
            names = ", ".join(sorted(missing))
            self.report(f"size variable{'s' if len(missing) > 1 else ''} {names} in {format_struct_info(sinfo)} "
                        "not defined by a parameter or an earlier match_cast")


class _DefCollector(ExprVisitor):
    def __init__(self):
        self.defs: set[Var] = set()

    def visit_var_def_(self, var: Var) -> None:
        self.defs.add(var)
