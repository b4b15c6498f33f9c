"""The parser of the text format: TVMScript-style Python read with ``ast``, so variable names are kept.

It reads what the printer writes and what users write by hand: ``@I.ir_module`` classes of ``@R.function``s,
``with R.dataflow():`` blocks closed by ``R.output(...)``, op calls ``R.matmul(x, w)`` (tensor arguments first,
then attributes by position or keyword), ``cls.f(...)`` calls between functions, tuples and ``t[i]``,
``R.const``, ``R.shape``, ``R.prim_value``, ``R.match_cast``, ``R.func_attr``, ``I.module_attrs``, TVM's
``I.module_global_infos`` and ``vdevice=`` of the host CPU (checked, not kept: see ``_vdevice``). Errors give the
line and column and say what was expected.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import re
from typing import Any, Callable, Mapping, Optional

import numpy as np

from ..ir import sym
from ..ir.block_builder import call_return_struct_info, function_result_struct_info
from ..ir.dtype import DTYPES, check_dtype, is_float, to_numpy
from ..ir.expr import (PRIVATE_ATTR, BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr, ExternFunc,
                       Function, GlobalVar, If, MatchCast, PrimValue, SeqExpr, ShapeExpr, Span, StringImm, Tuple,
                       TupleGetItem, Var, VarBinding, check_prim_float, const, if_condition_problem)
from ..ir.module import IRModule
from ..ir.well_formed import find_problems
from ..ir.struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
                              TensorStructInfo, TupleStructInfo, defined_size_vars, is_base_of)
from ..op.registry import Elementwise, Op, get_op
from . import _vdevice


class ParseError(ValueError):
    """Malformed text: the message starts with ``source:line:column``."""


#: A lone surrogate: a str may hold one (decoded with errors="surrogateescape"), a text cannot (no UTF-8 for it).
_SURROGATE = re.compile("[\ud800-\udfff]")


class _Scope:
    """Function-local names: Relax variables (innermost wins) and nothing else."""

    def __init__(self):
        self.vars: dict[str, Var] = {}
        #: Dataflow variables of finished blocks that R.output did not name, with their block's line: they are
        #: not visible after the block (TVM's rule; a use after it is a ParseError saying so).
        self.block_locals: dict[str, int] = {}
        #: Sizes defined so far (by a parameter or an R.match_cast), which a local function's parameters may use.
        self.sizes: set[str] = set()
        #: Names the body bound to an op (``op = R.exp``), by the op's spelling (``R.exp``): ``op(x)`` calls it.
        self.aliases: dict[str, str] = {}


class Parser:
    """Parses one module or function. ``env`` resolves free Python names (``batch_size``)."""

    def __init__(self, source: str, filename: str = "<string>", line_offset: int = 0,
                 env: Optional[Mapping[str, Any]] = None, evaluate: bool = False, col_offset: int = 0,
                 check_well_formed: bool = True):
        self.source = source
        #: Whether the result is checked as TVM's parser checks it (``check_well_formed=False`` there and here;
        #: a decorator's ``check_well_formed=False`` in the text turns it off too).
        self.check_well_formed = check_well_formed
        self.filename = filename
        self.line_offset, self.col_offset = line_offset, col_offset  # where ``source`` starts in the file
        self.env = dict(env or {})
        # Decorator mode only: a Python expression in an argument or attribute (np.ones((2, 3), "float32"),
        # W * 2, float(k), [i for i in range(2)]) is evaluated in the defining scope, as TVM's parser does.
        # from_source never evaluates: a text from elsewhere cannot run code.
        self.evaluate = evaluate
        self.signatures: dict[str, FuncStructInfo] = {}
        self.function_nodes: dict[str, ast.FunctionDef] = {}
        self.parsed: dict[str, Function] = {}
        self.in_progress: set[str] = set()
        self.in_module = False
        self.module_name: Optional[str] = None  # the @I.ir_module class's: ``Module.f(x)`` calls f, as ``cls.f(x)``
        # Nested calls in arguments are bound to fresh variables first (A-normal form, as Relax's normaliser
        # does); they collect here until the statement that needed them is emitted.
        self.hoisted: list = []
        self.in_dataflow = False
        #: The kinds of the vdevices ``I.module_global_infos`` declares, in order (None: it declares none), which a
        #: tensor's ``vdevice="llvm:1"`` refers to by kind and index.
        self.vdevices: Optional[list[str]] = None

    # -- errors -------------------------------------------------------------------------------------
    def span(self, node: ast.AST) -> Span:
        return Span(getattr(node, "lineno", 0) + self.line_offset,
                    getattr(node, "col_offset", -1) + 1 + self.col_offset, self.filename)

    def error(self, node: ast.AST, message: str) -> ParseError:
        return ParseError(f"{self.span(node)}: {message}")

    def error_at(self, line: int, column: int, message: str) -> ParseError:
        """An error at ``line``/``column`` (1-based) of ``source``, reported in the file's terms as :meth:`error`
        reports a node's: for the errors that have no node (the text does not parse). No ParseError is made
        elsewhere, so every one names the file and its lines, in decorator mode too."""
        return ParseError(f"{self.filename}:{line + self.line_offset}:{column + self.col_offset}: {message}")

    def position(self, index: int) -> tuple[int, int]:
        """The 1-based line and column of ``source[index]``."""
        before = self.source[:index]
        return before.count("\n") + 1, len(before) - before.rfind("\n")

    def check_keywords(self, tree: ast.AST) -> None:
        """Refuse a keyword given twice in one call (``R.sum(x, axis=0, axis=1)``), as Python does: its compiler
        refuses it, not ``ast.parse``, so every reader of keywords would otherwise keep the last one silently."""
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                seen: set[str] = set()
                for kw in node.keywords:
                    if kw.arg in seen:
                        callee = _dotted(node.func) or _kind(node.func)
                        raise self.error(kw, f"{callee}: argument {kw.arg!r} given twice")
                    if kw.arg is not None:  # (**kwargs)
                        seen.add(kw.arg)

    def guard(self, node: ast.AST, fn: Callable[[], Any]) -> Any:
        """Run ``fn``; an inference or value error inside it is reported at ``node``."""
        try:
            return fn()
        except ParseError:
            raise
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            raise self.error(node, message) from None
        except ArithmeticError as exc:  # R.arange(0, 10, 1e-320): inf elements
            raise self.error(node, f"{type(exc).__name__}: {exc}") from None
        except RecursionError:
            raise self.error(node, "the expression nests too deeply") from None

    # -- entry points -------------------------------------------------------------------------------
    def parse(self) -> "IRModule | Function":
        if "\0" in self.source:  # Python's parser refuses it without saying where
            raise self.error_at(*self.position(self.source.index("\0")), "a NUL character; the text format is text")
        surrogate = _SURROGATE.search(self.source)
        if surrogate is not None:  # (a str decoded with errors="surrogateescape"): Python's parser cannot encode it
            raise self.error_at(*self.position(surrogate.start()),
                                f"a lone surrogate (U+{ord(surrogate.group()):04X}), which is no Unicode text (bytes "
                                "that were not UTF-8?); in a string literal write it as an escape, \"\\udcff\"")
        try:
            tree = ast.parse(self.source, filename=self.filename)
        except SyntaxError as exc:
            raise self.error_at(exc.lineno or 0, exc.offset or 0, f"invalid syntax: {exc.msg}") from None
        except (MemoryError, RecursionError) as exc:  # CPython's parser on deeply nested brackets
            raise self.error_at(1, 1, f"the text nests too deeply for Python's parser ({type(exc).__name__})") \
                from None
        self.check_keywords(tree)
        defs = [n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))]
        if not defs:
            raise self.error_at(1, 1, "expected an @I.ir_module class or an @R.function definition")
        decorated = [n for n in defs if any(_decorator_name(d) in (_MODULE_DECORATORS if isinstance(n, ast.ClassDef)
                                                                   else _FUNCTION_DECORATORS)
                                            for d in n.decorator_list)]
        candidates = decorated or defs  # (plain Python definitions beside a decorated one are not read)
        if len(candidates) > 1:
            names = ", ".join(f"{n.name} (line {n.lineno + self.line_offset})" for n in candidates)
            raise self.error(candidates[1], f"the text defines {len(candidates)} modules or functions ({names}); "
                                            "it is read as one: put the functions in one @I.ir_module class")
        node = candidates[0]
        if isinstance(node, ast.ClassDef):
            for dec in node.decorator_list:
                if _decorator_name(dec) not in _MODULE_DECORATORS:
                    raise self.error(dec, f"class {node.name}: expected the decorator @I.ir_module")
                self.module_options(dec)
        self.check_well_formed = self.check_well_formed and not self.unchecked(node)
        try:
            result = self.parse_module(node) if isinstance(node, ast.ClassDef) else self.parse_standalone(node)
        except RecursionError:  # an expression nested deeper than the parser's recursion (e.g. t[0][0]...[0])
            raise self.error(node, "the definition nests too deeply to read (Python's recursion limit)") from None
        self.check_result(node, result)
        return result

    def module_options(self, dec: ast.AST) -> None:
        """TVM's options of the module decorator: ``@I.ir_module(check_well_formed=False)`` (read by
        :meth:`unchecked`) and ``s_tir=True`` (TIR semantics for its ``T.prim_func``s: there are none here, so it is
        checked and dropped)."""
        if not isinstance(dec, ast.Call):
            return
        if dec.args:
            raise self.error(dec.args[0], "@I.ir_module takes its options by keyword (check_well_formed=, s_tir=)")
        for kw in dec.keywords:
            if kw.arg not in ("check_well_formed", "s_tir"):
                raise self.error(kw, f"@I.ir_module: unknown option {kw.arg!r} (expected check_well_formed or "
                                     "s_tir)")
            self.bool_option(kw, "@I.ir_module")

    def bool_option(self, kw: ast.keyword, where: str) -> bool:
        """A decorator's option ``kw``, which must be True or False."""
        value = self.literal(kw.value)
        if not isinstance(value, bool):
            raise self.error(kw.value, f"{where}: {kw.arg} must be True or False, got {value!r}")
        return value

    def unchecked(self, node: "ast.ClassDef | ast.FunctionDef") -> bool:
        """Whether the definition's decorator says ``check_well_formed=False`` (a member function's does not count:
        the module's decorator decides, as in TVM)."""
        return any(kw.arg == "check_well_formed" and self.bool_option(kw, f"@{_decorator_name(dec)}") is False
                   for dec in node.decorator_list if isinstance(dec, ast.Call) for kw in dec.keywords)

    def check_result(self, node: "ast.ClassDef | ast.FunctionDef", result: "IRModule | Function") -> None:
        """Refuse a result that is not well formed, as TVM's parser does unless told ``check_well_formed=False``.
        What the parser reads is mostly refused where it is written (with a line); this is the net under it (a
        size a binding's annotation or an ``R.shape`` names that nothing defines, for one). The struct info checks
        are left out: the parser infers every call as it reads it, and a binding annotated narrower than its value
        is taken and checked at run time here, which ``well_formed`` reports. It costs a walk of the result, at most
        about a tenth of the parse (3-10% measured, 200 to 4000 calls)."""
        if not self.check_well_formed:
            return
        # (a function in a module of its own, so that the problems name it)
        problems = find_problems(result if isinstance(result, IRModule) else IRModule({node.name: result}),
                                 check_struct_info=False)
        if problems:
            what = "module" if isinstance(node, ast.ClassDef) else "function"
            listed = "\n".join(f"  - {p}" for p in problems)
            raise self.error(node, f"{what} {node.name} is not well formed ({len(problems)} "
                                   f"problem{'s' * (len(problems) > 1)}):\n{listed}\n(check_well_formed=False in "
                                   "its decorator, or from_source's, parses it unchecked, as TVM's option does)")

    def parse_module(self, node: ast.ClassDef) -> IRModule:
        self.in_module, self.module_name = True, node.name
        attrs: dict[str, Any] = {}
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef):
                if stmt.name in self.function_nodes:
                    raise self.error(stmt, f"function {stmt.name!r} is defined twice")
                self.function_nodes[stmt.name] = stmt
            elif _is_call_to(stmt, "I.module_attrs"):
                attrs.update(self.literal_dict(stmt.value, "I.module_attrs"))
            elif _is_call_to(stmt, "I.module_global_infos"):
                self.vdevices = self.global_infos(stmt.value)
            elif isinstance(stmt, ast.Pass) or _is_docstring(stmt):
                continue
            else:
                raise self.error(stmt, "expected an @R.function definition, I.module_attrs({...}) or "
                                       "I.module_global_infos({...}) in the module class")
        for name in self.function_nodes:
            self.function(name)
        return IRModule({name: self.parsed[name] for name in self.function_nodes}, attrs)

    def parse_standalone(self, node: ast.FunctionDef) -> Function:
        self.function_nodes[node.name] = node
        return dataclasses.replace(self.function(node.name), name_hint=node.name)  # (it prints as ``def name``)

    def global_infos(self, call: ast.Call) -> list[str]:
        """``I.module_global_infos({"vdevice": [I.vdevice("llvm"), ...]})``: TVM's declaration of the module's
        virtual devices, each the host CPU's here (the only device). The kinds are kept for the tensors' references
        to check; the declaration itself is not (see ``_vdevice``)."""
        infos = call.args[0] if len(call.args) == 1 and not call.keywords else None
        if not isinstance(infos, ast.Dict):
            raise self.error(call, 'I.module_global_infos takes one dict: {"vdevice": [I.vdevice("llvm"), ...]}')
        kinds: list[str] = []
        for key, value in zip(infos.keys, infos.values):
            if not (isinstance(key, ast.Constant) and key.value == "vdevice"):
                raise self.error(key or value, f"I.module_global_infos: {_kind(key or value)} is not read; only "
                                               '"vdevice" (a list of I.vdevice(...)) is')
            if not isinstance(value, (ast.List, ast.Tuple)):
                raise self.error(value, 'I.module_global_infos: "vdevice" takes a list of I.vdevice(...)')
            kinds += [self.vdevice_declaration(e) for e in value.elts]
        return kinds

    def vdevice_declaration(self, node: ast.AST) -> str:
        """``I.vdevice(target, vdevice_id=0, memory_scope="global")``: its target's kind, the host CPU's."""
        if not (isinstance(node, ast.Call) and _dotted(node.func) in ("I.vdevice", "ir.vdevice")):
            raise self.error(node, f"expected I.vdevice(target), got {_kind(node)}")
        bound = _bind_args(self, node, ["target", "vdevice_id", "memory_scope"])
        if "target" not in bound:
            raise self.error(node, f'I.vdevice needs a target: I.vdevice("{_vdevice.HOST_KIND}")')
        target = self.literal(bound["target"])
        if "vdevice_id" in bound:
            index = self.literal(bound["vdevice_id"])
            if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                raise self.error(bound["vdevice_id"], f"I.vdevice: vdevice_id must be a non-negative int, "
                                                      f"got {index!r}")
        if "memory_scope" in bound:
            scope = self.literal(bound["memory_scope"])
            self.guard(bound["memory_scope"], lambda: _vdevice.check_memory_scope(scope, "I.vdevice"))
        return self.guard(bound["target"], lambda: _vdevice.target_kind(target, "I.vdevice"))

    def vdevice_reference(self, node: ast.AST) -> None:
        """A tensor's ``vdevice="llvm"`` (or ``"llvm:0"``): the host CPU, and when the module declares its vdevices,
        one of them, as TVM looks it up. Checked and dropped: every tensor is on the host CPU here."""
        value = self.literal(node)
        if value is None:
            return
        kind, index = self.guard(node, lambda: _vdevice.reference(value, "R.Tensor"))
        declared = self.vdevices.count(kind) if self.vdevices is not None else None
        if declared is not None and index >= declared:
            raise self.error(node, f"R.Tensor: vdevice {value!r}: I.module_global_infos declares {declared} "
                                   f"{kind} device(s), so its index must be below {declared}")

    # -- functions ----------------------------------------------------------------------------------
    def signature(self, name: str, at: ast.AST) -> FuncStructInfo:
        """The callee's struct info: from its annotations, or by parsing it first when its return is not
        annotated."""
        if name not in self.function_nodes:
            known = ", ".join(self.function_nodes) or "none"
            raise self.error(at, f"call to unknown function cls.{name} (the module defines: {known})")
        node = self.function_nodes[name]
        if node.returns is None:
            if name in self.in_progress:
                raise self.error(at, f"function {name!r} is called recursively: annotate its return type")
            return self.function(name).struct_info
        params = [self.struct_info(a.annotation, _Sizes()) if a.annotation else ObjectStructInfo()
                  for a in node.args.args]
        return FuncStructInfo(params, self.struct_info(node.returns, _Sizes()))

    def function(self, name: str) -> Function:
        if name in self.parsed:
            return self.parsed[name]
        node = self.function_nodes[name]
        self.in_progress.add(name)
        func = self.build_function(node, name, _Scope())
        self.parsed[name] = func
        self.in_progress.discard(name)
        return func

    def local_function(self, node: ast.FunctionDef, scope: _Scope, dataflow: bool, outputs: set) -> VarBinding:
        """A function defined inside another (``@R.function def inner(...)``): bound to a variable named after
        it, which later statements call (``inner(x)``); it may read the enclosing function's variables."""
        inner = _Scope()
        inner.vars = dict(scope.vars)  # a closure: the enclosing variables, then its own parameters
        inner.sizes, inner.aliases = set(scope.sizes), dict(scope.aliases)
        saved = self.hoisted, self.in_dataflow
        try:
            func = self.build_function(node, node.name, inner)
        finally:
            self.hoisted, self.in_dataflow = saved
        cls = DataflowVar if dataflow and node.name not in outputs else Var
        var = cls(node.name, func.struct_info, span=self.span(node))
        scope.vars[node.name] = var
        return VarBinding(var, func, span=self.span(node))

    def build_function(self, node: ast.FunctionDef, name: str, scope: _Scope) -> Function:
        pure, private = self.decorator(node)
        sizes = _Sizes()
        params = []
        if node.args.vararg or node.args.kwarg or node.args.kwonlyargs or node.args.defaults \
                or node.args.posonlyargs:
            raise self.error(node, f"function {name}: only plain positional parameters are supported")
        for arg in node.args.args:
            if any(p.name_hint == arg.arg for p in params):
                raise self.error(arg, f"function {name}: duplicate parameter {arg.arg!r}")
            if arg.annotation is None:
                raise self.error(arg, f"parameter {arg.arg!r} of {name} needs a struct info annotation, "
                                      'e.g. R.Tensor((2, 3), "float32")')
            var = Var(arg.arg, self.struct_info(arg.annotation, sizes), span=self.span(arg))
            scope.vars[arg.arg] = var
            params.append(var)
        self.check_parameter_sizes(node, name, params, scope)
        attrs, blocks, result = self.body(node, scope, sizes)
        ret = self.return_struct_info(node, name, params, result, sizes)
        if private:
            if "global_symbol" in attrs:
                raise self.error(node, f"function {name}: a private function has no global_symbol (drop one of "
                                       "private=True and the global_symbol attribute)")
            attrs[PRIVATE_ATTR] = True
        return Function(params, SeqExpr(blocks, result), ret, attrs, pure, span=self.span(node))

    def check_parameter_sizes(self, node: ast.FunctionDef, name: str, params: list, scope: _Scope) -> None:
        """Refuse a parameter whose annotation uses a size no parameter defines (``R.Tensor(("m + 1", "m * 2"))``
        with no ``"m"`` alone anywhere), as TVM's parser does: a size is defined where it stands alone as a dimension
        (or an ``R.Prim`` value) of some parameter, and ``m + 1`` is never solved for ``m``. Accepted, nothing would
        bind ``m``: the interpreter ran such a function on any shape, (3, 5) included. A local function's parameters
        may also use the sizes the enclosing function defined before it. ``check_well_formed=False`` reads it as
        written (the well-formedness check reports such a size; TVM's parser refuses it either way)."""
        scope.sizes |= set().union(*(defined_size_vars(p.struct_info) for p in params))
        for arg, param in zip(node.args.args, params) if self.check_well_formed else ():
            missing = sorted(_size_uses(param.struct_info) - scope.sizes)
            if missing:
                names = ", ".join(missing)
                raise self.error(arg.annotation, f"function {name}: parameter {param.name_hint!r} "
                                                 f"({_fmt(param.struct_info)}) uses the size{'s' * (len(missing) > 1)} "
                                                 f"{names}, which no parameter defines: a size is defined where a "
                                                 f"parameter's annotation has it alone as a dimension "
                                                 f"(R.Tensor((\"{missing[0]}\", ...))) or as an R.Prim value; an "
                                                 f"expression of it ({missing[0]} + 1) is not solved for it")

    def return_struct_info(self, node: ast.FunctionDef, name: str, params: list, result: Expr,
                           sizes: "_Sizes") -> StructInfo:
        """The function's return struct info. Inferred, it is the result's erased to the sizes the parameters
        define, as TVM's ``Function`` erases it: a size the body defines (by ``R.match_cast``) means nothing to a
        caller, and kept it would give every call's result that one size (two calls on 4 and 3 elements would both
        be ``(n,)``). An annotation is kept as written, so that every printed function parses back the same (passes
        may build one naming such a size); a call erases what its arguments do not bind either way
        (``call_return_struct_info``)."""
        if node.returns is None:
            return function_result_struct_info(params, result)
        ret = self.struct_info(node.returns, sizes)
        if result.struct_info is not None and not is_base_of(ret, result.struct_info):
            raise self.error(node.returns, f"function {name} returns {_fmt(result.struct_info)} but is annotated "
                                           f"to return {_fmt(ret)}")
        return ret

    def decorator(self, node: ast.FunctionDef) -> tuple[bool, bool]:
        """``(pure, private)`` from ``@R.function(pure=..., private=...)``."""
        pure, private = True, False
        for dec in node.decorator_list:
            if _decorator_name(dec) not in _FUNCTION_DECORATORS:
                raise self.error(dec, f"function {node.name}: expected the decorator @R.function")
            if isinstance(dec, ast.Call):
                if dec.args:
                    raise self.error(dec.args[0], "@R.function takes its options by keyword (pure=, private=)")
                for kw in dec.keywords:
                    if kw.arg not in ("pure", "private", "check_well_formed"):
                        raise self.error(kw, f"@R.function: unknown option {kw.arg!r} (expected pure, private or "
                                             "check_well_formed)")
                    value = self.bool_option(kw, "@R.function")  # (check_well_formed: read by check_result)
                    if kw.arg != "check_well_formed":
                        pure, private = (value, private) if kw.arg == "pure" else (pure, value)
        return pure, private

    def body(self, node: ast.FunctionDef, scope: _Scope, sizes: "_Sizes"):
        attrs: dict[str, Any] = {}
        blocks: list[BindingBlock] = []
        pending: list = []
        stmts = list(node.body)
        if stmts and _is_docstring(stmts[0]):
            stmts = stmts[1:]
        for i, stmt in enumerate(stmts):
            stmt = _bound_print(stmt)
            if _is_call_to(stmt, "R.func_attr"):
                attrs.update(self.func_attrs(stmt.value))
            elif isinstance(stmt, ast.With):
                if pending:
                    blocks.append(BindingBlock(pending))
                    pending = []
                blocks.append(self.dataflow(stmt, scope, sizes))
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                pending += self.assignment(stmt, scope, sizes, dataflow=False, outputs=set())
            elif isinstance(stmt, ast.FunctionDef):
                pending.append(self.local_function(stmt, scope, dataflow=False, outputs=set()))
            elif isinstance(stmt, ast.If):
                pending += self.if_statement(stmt, scope, sizes)
            elif isinstance(stmt, ast.Return):
                if i != len(stmts) - 1:
                    raise self.error(stmts[i + 1], "statements after return")
                if stmt.value is None:
                    raise self.error(stmt, "a Relax function must return a value")
                self.hoisted, self.in_dataflow = [], False
                result = self.returned_number(node, stmt.value, sizes) or self.expr(stmt.value, scope, sizes)
                pending += self.hoisted
                self.hoisted = []
                if isinstance(result, (Call, TupleGetItem)):
                    var = Var("gv", result.struct_info, span=self.span(stmt))
                    pending.append(VarBinding(var, result, span=self.span(stmt)))
                    result = var
                if pending:
                    blocks.append(BindingBlock(pending))
                return attrs, blocks, result
            elif isinstance(stmt, ast.Pass) or _is_docstring(stmt):
                continue
            else:
                raise self.error(stmt, f"unsupported statement in a Relax function: {_kind(stmt)}; expected an "
                                       "assignment, `with R.dataflow():`, `if`/`else`, a local `@R.function` or "
                                       "`return`")
        raise self.error(node, f"function {node.name} has no return statement")

    def returned_number(self, node: ast.FunctionDef, value: ast.AST, sizes: "_Sizes") -> Optional[PrimValue]:
        """``return 1`` in a function annotated ``-> T.int64`` (or ``-> R.Prim("int64")``): the number as a Prim of
        that dtype, as TVM's printer writes an ``R.prim_value`` returned (a number elsewhere is ``R.const``'s);
        ``return True`` under ``-> T.bool`` too. The number takes the dtype's Python type (``return 1`` under
        ``-> T.float32`` is 1.0), so the interpreter returns what the annotation says."""
        bool_literal = isinstance(value, ast.Constant) and isinstance(value.value, bool)
        number = value.value if bool_literal else _number(value)
        if number is None or node.returns is None or not (_tir_dtype(node.returns) or
                                                           _is_call_expr(node.returns, "R.Prim")):
            return None
        ret = self.struct_info(node.returns, sizes)
        return self.guard(value, lambda: PrimValue(_as_dtype_literal(number, ret.dtype), ret.dtype,
                                                   span=self.span(value)))

    def func_attrs(self, call: ast.Call) -> dict:
        """``R.func_attr({...})``. A ``global_symbol`` is the name the function is exported by, so a str: another
        value (``3``, ``None``) would parse, compile, and fail where the module is looked up by that name."""
        attrs = self.literal_dict(call, "R.func_attr")
        symbol = attrs.get("global_symbol")
        if "global_symbol" in attrs and not isinstance(symbol, str):
            given = call.args[0]
            if isinstance(given, ast.Dict):  # at the value (the last one: a dict keeps its last entry of a key)
                given = next((v for k, v in reversed(list(zip(given.keys, given.values)))
                              if isinstance(k, ast.Constant) and k.value == "global_symbol"), given)
            raise self.error(given, f"R.func_attr: global_symbol must be a string (the name the function is "
                                    f"exported by), got {symbol!r}")
        return attrs

    def dataflow(self, stmt: ast.With, scope: _Scope, sizes: "_Sizes") -> DataflowBlock:
        if len(stmt.items) != 1 or not _is_call_expr(stmt.items[0].context_expr, "R.dataflow"):
            raise self.error(stmt, "expected `with R.dataflow():`")
        if stmt.items[0].optional_vars is not None or stmt.items[0].context_expr.args or \
                stmt.items[0].context_expr.keywords:
            raise self.error(stmt.items[0].context_expr, "expected `with R.dataflow():` (no arguments, no `as`)")
        body = list(stmt.body)
        if not body or not _is_call_to(body[-1], "R.output"):
            raise self.error(body[-1] if body else stmt, "a dataflow block must end with R.output(...) naming "
                                                         "the variables used after it")
        out_call = body[-1].value
        if out_call.keywords:
            raise self.error(out_call.keywords[0], "R.output takes variable names, not keyword arguments")
        outputs = set()
        for arg in out_call.args:
            if not isinstance(arg, ast.Name):
                raise self.error(arg, "R.output takes variable names")
            outputs.add(arg.id)
        defined: set[str] = set()
        bindings: list = []
        for s in map(_bound_print, body[:-1]):
            if isinstance(s, ast.FunctionDef):
                new = [self.local_function(s, scope, dataflow=True, outputs=outputs)]
            elif isinstance(s, ast.If):
                raise self.error(s, "an `if` cannot be inside a dataflow block (TVM's rule): end the block with "
                                    "R.output(...) before it, and start another after it")
            elif not isinstance(s, (ast.Assign, ast.AnnAssign)):
                raise self.error(s, f"unsupported statement in a dataflow block: {_kind(s)}; expected an assignment")
            else:
                new = self.assignment(s, scope, sizes, dataflow=True, outputs=outputs)
            defined.update(b.var.name_hint for b in new)
            bindings += new
        for arg in out_call.args:
            if arg.id not in defined:
                raise self.error(arg, f"R.output({arg.id}): {arg.id} is not defined in this dataflow block")
        for b in bindings:
            if isinstance(b.var, DataflowVar) and scope.vars.get(b.var.name_hint) is b.var:
                del scope.vars[b.var.name_hint]
                scope.block_locals[b.var.name_hint] = stmt.lineno
        return DataflowBlock(bindings)

    def if_statement(self, stmt: ast.If, scope: _Scope, sizes: "_Sizes") -> list:
        """``if cond: ... else: ...``: an ``R.If`` bound to the name both branches assign last (TVM's form). The
        condition (a call is bound first) must be a bool scalar; each branch is a scope of its own, whose variables
        and sizes are not visible after the ``if``; the result's struct info is the least upper bound of the
        branches' (or their annotation of the name, which must agree)."""
        if not stmt.orelse:
            raise self.error(stmt, "an `if` in a Relax function needs an `else` (TVM's rule): both branches assign "
                                   "the name the `if` binds")
        self.hoisted, self.in_dataflow = [], False
        cond = self.leaf(stmt.test, scope, sizes)
        hoisted, self.hoisted = self.hoisted, []
        problem = if_condition_problem(cond)
        if problem is not None:
            raise self.error(stmt.test, problem)
        (then, name, then_ann), (other, other_name, other_ann) = \
            self.branch(stmt.body, "if", scope, sizes), self.branch(stmt.orelse, "else", scope, sizes)
        if name != other_name:
            raise self.error(stmt.orelse[-1], f"the branches of an `if` must assign the same name last (TVM's rule): "
                                              f"the `if` branch assigns {name!r}, the `else` branch {other_name!r}")
        if then_ann is not None and other_ann is not None and then_ann != other_ann:
            raise self.error(stmt.orelse[-1], f"the branches annotate {name!r} differently: {_fmt(then_ann)} and "
                                              f"{_fmt(other_ann)}")
        value = self.guard(stmt, lambda: If(cond, then, other, span=self.span(stmt)))
        annotated = stmt.body[-1] if then_ann is not None else stmt.orelse[-1]
        sinfo = self.check_annotation(annotated, then_ann or other_ann, value.struct_info)
        var = Var(name, sinfo, span=self.span(stmt))
        scope.vars[name] = var
        return hoisted + [VarBinding(var, value, span=self.span(stmt))]

    def branch(self, stmts: list, which: str, scope: _Scope, sizes: "_Sizes"):
        """One branch of an ``if``: ``(SeqExpr, the name it assigns last, that assignment's annotation)``. Its
        statements are read in a copy of the enclosing scope; the last assigns the ``if``'s name, and its value is the
        branch's result (a call stays bound to a variable of the branch's own, as Relax's normal form has it)."""
        last = stmts[-1]
        target = last.targets[0] if isinstance(last, ast.Assign) and len(last.targets) == 1 else \
            last.target if isinstance(last, ast.AnnAssign) else None
        if not isinstance(last, ast.If) and not isinstance(target, ast.Name):
            raise self.error(last, f"the `{which}` branch must end by assigning the name the `if` binds "
                                   f"(`y = ...`), got {_kind(last)}")
        inner = _Scope()
        inner.vars, inner.block_locals = dict(scope.vars), dict(scope.block_locals)
        inner.sizes, inner.aliases = set(scope.sizes), dict(scope.aliases)
        blocks: list[BindingBlock] = []
        pending: list = []
        for stmt in map(_bound_print, stmts):
            if isinstance(stmt, ast.With):
                blocks += [BindingBlock(pending), self.dataflow(stmt, inner, sizes)]
                pending = []
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                pending += self.assignment(stmt, inner, sizes, dataflow=False, outputs=set())
            elif isinstance(stmt, ast.FunctionDef):
                pending.append(self.local_function(stmt, inner, dataflow=False, outputs=set()))
            elif isinstance(stmt, ast.If):
                pending += self.if_statement(stmt, inner, sizes)
            elif not (isinstance(stmt, ast.Pass) or _is_docstring(stmt)):
                raise self.error(stmt, f"unsupported statement in an `{which}` branch: {_kind(stmt)}; expected an "
                                       "assignment, `with R.dataflow():`, `if`/`else` or a local `@R.function` (the "
                                       "branch's last assignment gives the `if`'s value)")
        name = last.targets[0].id if isinstance(last, ast.Assign) else last.target.id if target is not None \
            else pending[-1].var.name_hint if pending else None
        if not pending or pending[-1].var.name_hint != name:
            raise self.error(last, f"the `{which}` branch must end by assigning a Relax value to a name, got "
                                   f"{_kind(last)}")
        final = pending[-1]
        annotation = self.struct_info(last.annotation, sizes) if isinstance(last, ast.AnnAssign) else None
        if isinstance(final, VarBinding) and not isinstance(final.value, (Call, TupleGetItem, If, Function)):
            pending.pop()  # ``y = x``: the branch's result is ``x`` itself
            result = final.value
        else:
            result = final.var
        return SeqExpr(blocks + [BindingBlock(pending)], result, span=self.span(stmts[0])), name, annotation

    def assignment(self, stmt, scope: _Scope, sizes: "_Sizes", dataflow: bool, outputs: set) -> list:
        self.hoisted, self.in_dataflow = [], dataflow
        bindings = self._assignment(stmt, scope, sizes, dataflow, outputs)
        hoisted, self.hoisted = self.hoisted, []
        return hoisted + bindings

    def _assignment(self, stmt, scope: _Scope, sizes: "_Sizes", dataflow: bool, outputs: set) -> list:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if len(targets) != 1:
            raise self.error(stmt, "chained assignment is not supported")
        target = targets[0]
        annotation = self.struct_info(stmt.annotation, sizes) if isinstance(stmt, ast.AnnAssign) else None
        if isinstance(stmt, ast.AnnAssign) and stmt.value is None:
            raise self.error(stmt, "an annotated name needs a value")

        if _is_size_declaration(stmt.value) or _declares_sizes(stmt.value):
            return self.declare_size(stmt, target, annotation, sizes)
        if (self.in_module and isinstance(target, ast.Name) and target.id == "cls" and annotation is None
                and isinstance(stmt.value, ast.Name) and stmt.value.id == self.module_name):
            return []  # ``cls = Module``, the first line of each function TVM's printer writes: cls is the module
        spelled = self.op_named(stmt.value, scope)
        if spelled is not None and isinstance(target, ast.Name) and annotation is None:
            # ``op = R.exp``: a Python name for the op, as in TVM (it binds no Relax value); ``op(x)`` calls it
            scope.aliases[target.id] = spelled
            scope.vars.pop(target.id, None)
            return []

        def make_var(name: str, sinfo, node) -> Var:
            cls = DataflowVar if dataflow and name not in outputs else Var
            return cls(name, sinfo, span=self.span(node))

        if _is_call_expr(stmt.value, "R.match_cast"):
            if not isinstance(target, ast.Name):
                raise self.error(target, "R.match_cast binds one name")
            args = stmt.value.args
            if len(args) != 2 or stmt.value.keywords:
                raise self.error(stmt.value, "R.match_cast(value, struct_info) takes 2 positional arguments")
            value = self.expr(args[0], scope, sizes)
            sinfo = self.struct_info(args[1], sizes, define=True)
            var = make_var(target.id, sinfo, target)
            scope.vars[target.id] = var
            scope.sizes |= defined_size_vars(sinfo)
            return [MatchCast(var, value, sinfo, span=self.span(stmt))]
        value = self.expr(stmt.value, scope, sizes)
        if isinstance(target, ast.Name):
            sinfo = self.check_annotation(stmt, annotation, value.struct_info)
            var = make_var(target.id, sinfo, target)
            scope.vars[target.id] = var
            return [VarBinding(var, value, span=self.span(stmt))]
        if isinstance(target, ast.Tuple) and annotation is None:
            # `a, b = f(x)`: bind the tuple, then each field.
            if not isinstance(value.struct_info, TupleStructInfo) or \
                    len(value.struct_info.fields) != len(target.elts):
                raise self.error(target, f"cannot unpack {_fmt(value.struct_info)} into {len(target.elts)} names")
            tmp = make_var("_".join(self.name_of(e) for e in target.elts) + "_tuple", value.struct_info, target)
            out = [VarBinding(tmp, value, span=self.span(stmt))]
            for i, elt in enumerate(target.elts):
                item = TupleGetItem(tmp, i)
                var = make_var(self.name_of(elt), item.struct_info, elt)
                scope.vars[var.name_hint] = var
                out.append(VarBinding(var, item, span=self.span(stmt)))
            return out
        raise self.error(target, "expected a variable name on the left of `=`")

    def name_of(self, node: ast.AST) -> str:
        """The name a target of ``a, b = ...`` binds (``a, *b`` and ``(a, b), c`` bind no plain names)."""
        if not isinstance(node, ast.Name):
            raise self.error(node, f"expected a variable name in the tuple on the left of `=`, got {_kind(node)}")
        return node.id

    def declare_size(self, stmt, target: ast.AST, annotation, sizes: "_Sizes") -> list:
        """``n = T.int64()``: TVM's declaration of a symbolic size in a function's body (its printer writes one
        per size), or of several, ``n, m = T.int64(), T.int64()`` (TVM's tests write that). It binds nothing: ``n``
        names the size wherever a dimension is read from then on."""
        several = isinstance(stmt.value, ast.Tuple)
        calls = stmt.value.elts if several else [stmt.value]
        for call in calls:
            if call.args or any(kw.arg != "is_size_var" for kw in call.keywords):
                raise self.error(call, f"{_dotted(call.func)}() declares a symbolic size and takes no value here; "
                                       "a constant dimension is written as a number")
        names = target.elts if several and isinstance(target, ast.Tuple) else [target]
        if annotation is not None or len(names) != len(calls) or not all(isinstance(n, ast.Name) for n in names):
            spelled = _dotted(calls[0].func)
            raise self.error(target, f"{spelled}() declares one symbolic size: write `n = {spelled}()`, or several "
                                     f"at once, one per name: `n, m = {spelled}(), {spelled}()`")
        sizes.declared.update(n.id for n in names)
        return []

    def check_annotation(self, stmt, annotation: Optional[StructInfo], inferred: Optional[StructInfo]):
        if annotation is None:
            if inferred is None:
                raise self.error(stmt, "cannot infer the struct info of this value: annotate it")
            return inferred
        if inferred is None or isinstance(inferred, ObjectStructInfo):
            return annotation
        if is_base_of(annotation, inferred) or is_base_of(inferred, annotation):
            return annotation
        raise self.error(stmt.annotation, f"annotation {_fmt(annotation)} does not match the value's struct "
                                          f"info {_fmt(inferred)}")

    # -- expressions --------------------------------------------------------------------------------
    def expr(self, node: ast.AST, scope: _Scope, sizes: "_Sizes") -> Expr:
        if isinstance(node, ast.Name):
            if node.id in scope.vars:
                return scope.vars[node.id]
            if node.id in scope.block_locals:
                raise self.error(node, f"{node.id!r} is a dataflow variable of the block at line "
                                       f"{scope.block_locals[node.id] + self.line_offset}: only what its R.output "
                                       "names is visible after the block")
            if node.id in self.env:
                return self.guard(node, lambda: _to_expr(self.env[node.id], node.id))
            raise self.error(node, f"undefined variable {node.id!r}")
        if isinstance(node, ast.Tuple):
            return Tuple([self.leaf(e, scope, sizes) for e in node.elts], span=self.span(node))
        if isinstance(node, ast.Subscript):
            base = self.leaf(node.value, scope, sizes)
            index = self.literal(node.slice)
            if not isinstance(index, int) or isinstance(index, bool):  # (TVM's TupleGetItem takes an int, not True)
                raise self.error(node.slice, f"a tuple index must be an integer, got {_kind(node.slice)}")
            return self.guard(node, lambda: TupleGetItem(base, index, span=self.span(node)))
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
            return self.guard(node, lambda: const(node.value))  # 10**40 is beyond every dtype: a ParseError
        if isinstance(node, ast.Call) and (not self.evaluate or self.is_relax_call(node, scope)):
            return self.call(node, scope, sizes)
        if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Compare)) and self.names_relax(node, scope):
            return self.operator(node, scope, sizes)
        if self.evaluate and self.names_relax(node, scope):
            # evaluated as Python, a Relax variable's name would be read from the defining scope instead
            raise self.error(node, f"unsupported expression {_kind(node)} on a Relax variable; expected a call of "
                                   "an R. op (R.add, R.permute_dims, ...)")
        if self.evaluate:
            value = self.python_value(node)
            return self.guard(node, lambda: _to_expr(value, _kind(node)))
        raise self.error(node, f"unsupported expression {_kind(node)}; expected a variable, a tuple, t[i], "
                               "or a call of an R. op or cls. function")

    def is_relax_call(self, node: ast.Call, scope: _Scope) -> bool:
        """Decorator mode: whether ``node`` is a call the text format defines, not Python's (``np.ones``): of an op
        (``R.add``), of a module function (``cls.f``, ``Module.f``), of a local function (``inner(x)``), or the
        method ``x.astype(dtype)`` on a Relax value (a NumPy array's ``W.astype`` is Python's)."""
        if _is_relax_call(node) or isinstance(node.func, ast.Name) and node.func.id in scope.vars:
            return True
        if self.op_named(node.func, scope) is not None:
            return True
        if self.module_function(node.func) is not None:
            return True
        return _is_method_call(node) and self.names_relax(node.func.value, scope)

    def op_named(self, node: ast.AST, scope: _Scope) -> Optional[str]:
        """The spelling (``R.exp``) of the op or ``R.`` construct ``node`` names, when it names one other than by
        that spelling: a name the body bound to one (``op = R.exp``), or a Python name of the defining scope (or
        from_source's ``env``) whose value is one (``op = R.exp`` in Python, a test's parameter ``op``), which TVM's
        parser evaluates; for ``op = R.exp`` itself, its spelling. None for anything else: a Relax variable's name
        is the variable."""
        if isinstance(node, ast.Name):
            if node.id in scope.vars or node.id in scope.block_locals:
                return None
            return scope.aliases.get(node.id) or _spelling(self.env.get(node.id))
        name = _dotted(node)
        if name is None or not name.startswith(("R.", "relax.")):
            return None
        short = name.split(".", 1)[1]
        if short in _ALIASABLE:
            return f"R.{short}"
        try:
            return f"R.{get_op(short).short_name}"
        except (KeyError, ValueError, TypeError):
            return None

    def module_function(self, func: ast.AST) -> Optional[str]:
        """The function ``func`` names by the module class's name (``Module.f``, TVM's other spelling of
        ``cls.f``), or None."""
        name = _dotted(func)
        if not self.in_module or name is None or not name.startswith(f"{self.module_name}."):
            return None
        return name[len(self.module_name) + 1:]

    @staticmethod
    def names_relax(node: ast.AST, scope: _Scope) -> bool:
        """Whether ``node`` reads a Relax variable of the function (which shadows a Python name of the same name)."""
        return any(isinstance(n, ast.Name) and (n.id in scope.vars or n.id in scope.block_locals)
                   for n in ast.walk(node))

    def operator(self, node: ast.AST, scope: _Scope, sizes: "_Sizes") -> Expr:
        """``x * 2``, ``-x``, ``a < b`` on Relax values: the op TVM's Relax expressions overload the operator with
        (``R.multiply``, ``R.negative``, ``R.less``); a Python number on one side is a constant of the other side's
        dtype (refused when the number does not fit it: ``x * 1.5`` on an int tensor)."""
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.UAdd):
                return self.expr(node.operand, scope, sizes)
            if not isinstance(node.op, ast.USub):
                raise self.error(node, f"operator {type(node.op).__name__} is not defined on Relax values; "
                                       "write the R. op (R.logical_not, R.bitwise_not)")
            x = self.leaf(node.operand, scope, sizes)
            return self.guard(node, lambda: self.apply_op("negative", [x], node))
        if isinstance(node, ast.Compare):
            if len(node.ops) != 1:
                raise self.error(node, "a chained comparison of Relax values; write one comparison a line")
            name, left, right = _COMPARISONS.get(type(node.ops[0])), node.left, node.comparators[0]
            operator = type(node.ops[0]).__name__
        else:
            name, left, right = _ARITHMETIC.get(type(node.op)), node.left, node.right
            operator = type(node.op).__name__
        if name is None:
            raise self.error(node, f"operator {operator} is not defined on Relax values; write the R. op "
                                   "(R.equal, R.floor_mod, R.matmul, ...)")
        a, b = self.operand(left, scope, sizes), self.operand(right, scope, sizes)
        if _is_number(a):  # a number takes the Relax side's dtype
            a = self.guard(left, lambda: _const_like(a, b))
        elif _is_number(b):  # (one side names a Relax variable, so it is not a number too)
            b = self.guard(right, lambda: _const_like(b, a))
        return self.guard(node, lambda: self.apply_op(name, [a, b], node))

    def operand(self, node: ast.AST, scope: _Scope, sizes: "_Sizes") -> "Expr | int | float":
        """An operand of ``x * 2``: a Python number stays a number (to take the other side's dtype), else a leaf.
        A number the scope gives is one as a literal is, as TVM's parser evaluates both alike: ``x * k`` with
        ``k = 2`` defined in Python (or named by from_source's ``env``), and in decorator mode a Python expression
        of no Relax variable (``x * (k + 1)``, ``x * float(k)``), evaluated once. NumPy scalars keep their dtype."""
        number = _number(node)
        if number is not None:
            return number
        if self.names_relax(node, scope):
            return self.leaf(node, scope, sizes)
        if isinstance(node, ast.Name):
            value = self.env.get(node.id)
            return value if _is_number(value) else self.leaf(node, scope, sizes)
        if not self.evaluate or isinstance(node, (ast.Tuple, ast.List, ast.Subscript, ast.Constant)) or \
                isinstance(node, ast.Call) and self.is_relax_call(node, scope):
            return self.leaf(node, scope, sizes)
        value = self.python_value(node)  # what expr() would evaluate, once
        return value if _is_number(value) else self.guard(node, lambda: _to_expr(value, _kind(node)))

    def apply_op(self, op: "Op | str", args: list, node: ast.AST, kwargs: Optional[dict] = None) -> Call:
        """The call of ``op`` on ``args`` (and ``kwargs``: tensors or attributes by name), its struct info inferred."""
        op = get_op(op) if isinstance(op, str) else op
        tensors, attrs = op.bind_arguments(args, kwargs or {})
        if isinstance(op.lowering, Elementwise) and len(op.inputs) == 2:
            tensors = _prim_operands(op, tensors)
        return Call(op, tensors, attrs, op.infer_struct_info(tensors, attrs), span=self.span(node))

    def python_value(self, node: ast.AST) -> Any:
        """Decorator mode: ``node`` evaluated as Python in the scope the decorated code was defined in."""
        expression = ast.fix_missing_locations(ast.Expression(body=node))
        try:
            return eval(compile(expression, self.filename, "eval"), dict(self.env))  # noqa: S307 - see __init__
        except Exception as exc:
            raise self.error(node, f"evaluating {_kind(node)} in the defining scope failed: "
                                   f"{type(exc).__name__}: {exc}") from None

    def leaf(self, node: ast.AST, scope: _Scope, sizes: "_Sizes") -> Expr:
        """An argument: a call or tuple item inside it is bound to a fresh variable first."""
        e = self.expr(node, scope, sizes)
        if isinstance(e, Tuple):
            fields = [self.bind_fresh(f, scope) for f in e.fields]
            return Tuple(fields, span=e.span) if any(a is not b for a, b in zip(fields, e.fields)) else e
        return self.bind_fresh(e, scope)

    def bind_fresh(self, e: Expr, scope: _Scope) -> Expr:
        if not isinstance(e, (Call, TupleGetItem)):
            return e
        i, name = 0, "lv"
        while name in scope.vars or any(b.var.name_hint == name for b in self.hoisted):
            i += 1
            name = f"lv{i}"
        var = (DataflowVar if self.in_dataflow else Var)(name, e.struct_info, span=e.span)
        self.hoisted.append(VarBinding(var, e, span=e.span))
        return var

    def call(self, node: ast.Call, scope: _Scope, sizes: "_Sizes") -> Expr:
        if isinstance(node.func, ast.Name) and node.func.id in scope.vars:
            return self.call_local(node, scope.vars[node.func.id], scope, sizes)
        if isinstance(node.func, ast.Name):
            spelled = self.op_named(node.func, scope)
            if spelled is not None:  # ``op(x)`` with ``op = R.exp``: read as ``R.exp(x)``
                node = _respelled(node, spelled)
        name = _dotted(node.func)
        if name is not None and name.startswith("cls."):
            return self.call_function(node, name[4:], scope, sizes)
        function = self.module_function(node.func)
        if function is not None:
            return self.call_function(node, function, scope, sizes)
        if _is_method_call(node) and (name is None or not name.startswith(("R.", "relax."))):
            return self.call_method(node, scope, sizes)
        if name is None:
            raise self.error(node.func, "expected a call of an R. op or a cls. function")
        if not name.startswith(("R.", "relax.")):
            raise self.error(node.func, f"unknown callee {name}: expected R.<op>, cls.<function> or "
                                        "<value>.astype(dtype)")
        short = name.split(".", 1)[1]
        special = _SPECIAL.get(short)
        if special is not None:
            return special(self, node, scope, sizes)
        try:
            op = get_op(short)
        except KeyError:
            raise self.error(node.func, f"unknown op R.{short}") from None
        return self.call_op(op, node, scope, sizes)

    def call_op(self, op: Op, node: ast.Call, scope: _Scope, sizes: "_Sizes") -> Call:
        n_in = len(op.inputs)
        too_many = op.arity_problem(len(node.args))  # (before the extra ones are read as attributes)
        if too_many:
            raise self.error(node, too_many)
        args: list = []
        for i, a in enumerate(node.args):
            if i < n_in:
                if op.tuple_input and i == 0 and isinstance(a, (ast.Tuple, ast.List)):
                    args.append(Tuple([self.leaf(e, scope, sizes) for e in a.elts], span=self.span(a)))
                else:
                    args.append(self.leaf(a, scope, sizes))
            else:
                args.append(self.attribute(a, scope, sizes))
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise self.error(kw, "**kwargs are not supported in op calls")
            if kw.arg not in op.inputs and kw.arg not in op.attrs:  # (before its value is read as an attribute)
                takes = ", ".join((*op.inputs, *op.attrs)) or "no arguments"
                raise self.error(kw, f"{op.name}: unknown argument {kw.arg!r}; it takes {takes}")
            kwargs[kw.arg] = self.leaf(kw.value, scope, sizes) if kw.arg in op.inputs \
                else self.attribute(kw.value, scope, sizes)

        return self.guard(node, lambda: self.apply_op(op, args, node, kwargs))

    def attribute(self, node: ast.AST, scope: _Scope, sizes: "_Sizes") -> Any:
        """An op's attribute: a literal, or a Relax variable holding a shape or a number whose value its struct info
        knows, taken by that value as ``R.shape([...])`` and ``R.prim_value(...)`` are (TVM's ``R.reshape(x, s)``
        with ``s: R.Shape(["n", "m"])`` or ``s = R.shape([2, n])``: the sizes ``s`` defines)."""
        if not (isinstance(node, ast.Name) and node.id in scope.vars):
            return self.literal(node, sizes)
        sinfo = scope.vars[node.id].struct_info
        if isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
            return sinfo.values
        if isinstance(sinfo, PrimStructInfo) and sinfo.value is not None:
            return sinfo.value
        raise self.error(node, f"{node.id} is {_fmt(sinfo)}: an op's attribute takes a shape or a number whose "
                               "value the struct info gives (R.Shape([\"n\", \"m\"]), R.Prim(value=...)) or a "
                               "literal")

    def call_method(self, node: ast.Call, scope: _Scope, sizes: "_Sizes") -> Call:
        """``x.astype(dtype)``: ``R.astype(x, dtype)``, the one method TVM's Relax values have that the text format
        writes (TVM's printer and expected modules use it)."""
        receiver = node.func.value
        as_op = ast.copy_location(ast.Call(func=ast.Attribute(value=ast.Name(id="R", ctx=ast.Load()), attr="astype",
                                                              ctx=ast.Load()),
                                           args=[receiver, *node.args], keywords=node.keywords), node)
        return self.call_op(get_op("astype"), as_op, scope, sizes)

    def call_function(self, node: ast.Call, name: str, scope: _Scope, sizes: "_Sizes") -> Call:
        if not self.in_module:
            raise self.error(node.func, f"cls.{name}: calls between functions need an @I.ir_module class")
        if node.keywords:
            raise self.error(node, f"cls.{name}: keyword arguments are not supported")
        args = [self.leaf(a, scope, sizes) for a in node.args]
        sig = self.signature(name, node.func)
        gvar = GlobalVar(name, sig)
        sinfo = self.guard(node, lambda: call_return_struct_info(name, sig, [a.struct_info for a in args]))
        return Call(gvar, args, {}, sinfo, span=self.span(node))

    def call_local(self, node: ast.Call, callee: Var, scope: _Scope, sizes: "_Sizes") -> Call:
        """A call of a variable holding a function (a local ``@R.function``)."""
        sig = callee.struct_info
        if not isinstance(sig, FuncStructInfo):
            raise self.error(node.func, f"{callee.name_hint} is {_fmt(sig)}, not a function: it cannot be called")
        if node.keywords:
            raise self.error(node, f"{callee.name_hint}: keyword arguments are not supported")
        args = [self.leaf(a, scope, sizes) for a in node.args]
        sinfo = self.guard(node, lambda: call_return_struct_info(callee.name_hint, sig, [a.struct_info for a in args]))
        return Call(callee, args, {}, sinfo, span=self.span(node))

    # -- struct info --------------------------------------------------------------------------------
    def struct_info(self, node: ast.AST, sizes: "_Sizes", define: bool = True) -> StructInfo:
        name = _dotted(node.func if isinstance(node, ast.Call) else node)
        short = name.split(".", 1)[1] if name and name.startswith(("R.", "relax.")) else None
        if short in ("Object", "Any"):  # (R.Any: TVM's newer spelling of R.Object)
            return ObjectStructInfo()
        dtype = _tir_dtype(node)
        if dtype is not None:  # ``-> T.int64``: TVM's printer writes an R.Prim("int64") so
            return self.guard(node, lambda: PrimStructInfo(dtype))
        if short == "Shape" and not isinstance(node, ast.Call):
            return ShapeStructInfo()  # a bare R.Shape, as TVM reads it: a shape of any length
        if short == "Tensor" and not isinstance(node, ast.Call):
            return TensorStructInfo(None, DEFAULT_DTYPE, -1)  # a bare R.Tensor: any shape, the default dtype
        if not isinstance(node, ast.Call) or short not in _SINFO:
            raise self.error(node, "expected struct info: R.Tensor(shape, dtype), R.Tuple(...), R.Shape(...), "
                                   "R.Prim(dtype) (or T.int64, ...), R.Object or R.Any")
        return _SINFO[short](self, node, sizes)

    def sinfo_tensor(self, node: ast.Call, sizes: "_Sizes") -> TensorStructInfo:
        """``R.Tensor(shape, dtype, vdevice, ndim)``, TVM's arguments. Without a dtype (``R.Tensor((2, 3))``, a bare
        ``R.Tensor``) it is float32, as ``R.Tensor(...)`` called from Python is: TVM reads such a tensor as of any
        dtype, which nothing here represents, and float32 is what those programs pass (another dtype is refused
        where the value meets the annotation, naming both). ``dtype=None`` or ``"void"``, TVM's explicit "any", is
        refused rather than guessed."""
        bound = _bind_args(self, node, ["shape", "dtype", "vdevice", "ndim"])
        given = bound.get("shape")
        if isinstance(given, ast.Constant) and isinstance(given.value, str) and "dtype" not in bound:
            bound["dtype"] = bound.pop("shape")  # R.Tensor("float32", ndim=2): TVM's form without a shape
            given = None
        shape = None if given is None or isinstance(given, ast.Constant) and given.value is None else \
            self.shape(given, sizes)
        if "vdevice" in bound:
            self.vdevice_reference(bound["vdevice"])
        dtype = self.literal(bound["dtype"]) if "dtype" in bound else DEFAULT_DTYPE
        if dtype is None or dtype == "void":
            raise self.error(node, f"{_dotted(node.func)} with dtype={dtype!r}: {_NO_DTYPE}")
        ndim = self.literal(bound["ndim"]) if "ndim" in bound else -1
        return self.guard(node, lambda: TensorStructInfo(shape, dtype, ndim))

    def sinfo_tuple(self, node: ast.Call, sizes: "_Sizes") -> TupleStructInfo:
        """``R.Tuple(a, b)``, or ``R.Tuple([a, b])`` (one list or tuple of fields), as TVM takes both."""
        if node.keywords:
            raise self.error(node, "R.Tuple takes struct infos as positional arguments, or one list of them")
        fields = node.args
        if len(fields) == 1 and isinstance(fields[0], (ast.List, ast.Tuple)):
            fields = fields[0].elts
        return TupleStructInfo([self.struct_info(a, sizes) for a in fields])

    def sinfo_shape(self, node: ast.Call, sizes: "_Sizes") -> ShapeStructInfo:
        bound = _bind_args(self, node, ["values", "ndim"])
        values = self.shape(bound["values"], sizes) if "values" in bound else None
        ndim = self.literal(bound["ndim"]) if "ndim" in bound else -1
        return self.guard(node, lambda: ShapeStructInfo(values, ndim))

    def sinfo_prim(self, node: ast.Call, sizes: "_Sizes") -> PrimStructInfo:
        bound = _bind_args(self, node, ["dtype", "value"])
        if len(node.args) == 2 and all(isinstance(a, ast.Constant) for a in node.args) and \
                node.args[1].value in DTYPES and node.args[0].value not in DTYPES:
            bound["dtype"], bound["value"] = bound["value"], bound["dtype"]  # R.Prim(value, dtype), positionally
        dtype = self.literal(bound["dtype"]) if "dtype" in bound else "int64"
        value = None
        if "value" in bound:  # a symbolic size as R.prim_value reads it ("n", n + 1), else a literal
            given = bound["value"]
            value = self.literal(given, sizes) if _is_prim_literal(given) else self.dim(given, sizes)

        def build():
            check_prim_float(dtype, value, "R.Prim")  # (PrimStructInfo checks it too; this names R.Prim)
            return PrimStructInfo(dtype, value)

        return self.guard(node, build)

    def sinfo_callable(self, node: ast.Call, sizes: "_Sizes") -> FuncStructInfo:
        if len(node.args) != 2 or node.keywords or not isinstance(node.args[0], (ast.Tuple, ast.List)):
            raise self.error(node, "expected R.Callable((param struct infos...), return struct info)")
        return FuncStructInfo([self.struct_info(a, sizes) for a in node.args[0].elts],
                              self.struct_info(node.args[1], sizes))

    def shape(self, node: ast.AST, sizes: "_Sizes") -> tuple:
        if not isinstance(node, (ast.Tuple, ast.List)):
            raise self.error(node, "expected a shape: a tuple of ints or size-variable names, e.g. (\"n\", 784)")
        return tuple(self.dim(e, sizes) for e in node.elts)

    def dim(self, node: ast.AST, sizes: "_Sizes"):
        def lookup(name: str):
            if name in sizes.declared:
                return sym.SizeVar(name)
            if name not in self.env:
                return sym.SizeVar(name)
            value = self.env[name]
            if isinstance(value, sym.SymDim):
                return value
            if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
                return int(value)
            raise self.error(node, f"dimension {name!r} is a {type(value).__name__}, expected an int")

        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return self.guard(node, lambda: sym.parse_dim(node.value))
        return self.guard(node, lambda: sym.dim_from_ast(node, lookup))

    # -- literals (attributes) ----------------------------------------------------------------------
    def literal(self, node: ast.AST, sizes: Optional["_Sizes"] = None) -> Any:
        """Evaluate an attribute value: numbers, strings, None, tuples, lists, dicts, names of Python
        values, ``float("inf")``, ``R.const([...], dtype)`` (an array) and struct info; a value of another kind
        (``b"xx"``, ``1j``, ``...``, a Python object) is a ParseError here, not a module the printer cannot
        write."""
        value = self._literal(node, sizes)
        if isinstance(value, float) and math.isnan(value):
            # One NaN object for every NaN read: struct info compares values with ``in``/``==``, which holds for NaN
            # only by identity (``R.Prim(value=float("nan"))`` annotating an ``R.prim_value(float("nan"))``).
            value = math.nan
        bad = _unwritable(value)
        if bad is not None:
            raise self.error(node, f"attribute value of type {bad} is not supported; expected a number, a string, "
                                   "None, a tuple, list or dict of them, an array or a struct info")
        return value

    def _literal(self, node: ast.AST, sizes: Optional["_Sizes"] = None) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self.literal(e, sizes) for e in node.elts)
        if sizes is not None and isinstance(node, (ast.Name, ast.BinOp)) and any(
                isinstance(n, ast.Name) and n.id in sizes.declared for n in ast.walk(node)):
            return self.dim(node, sizes)  # a size the function declared (``n = T.int64()``), whatever Python's n is
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise self.error(node, "dict unpacking is not supported in attributes")
            return {self.literal(k, sizes): self.literal(v, sizes) for k, v in zip(node.keys, node.values)}
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            value = self.literal(node.operand, sizes)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            raise self.error(node, f"undefined name {node.id!r} in an attribute")
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name == "float" and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant):
                return self.guard(node, lambda: float(node.args[0].value))
            typed = _typed_number(self, node)
            if typed is not None:  # TVM's printer writes a typed number so: roi=[T.float32(0.0), ...]
                return _as_dtype_literal(*typed)
            if name in ("R.const", "relax.const"):
                return _const_array(self, node).data
            if name and name.split(".", 1)[-1] in _SINFO or name in ("R.Object", "R.Any"):
                return self.struct_info(node, sizes or _Sizes())
        if isinstance(node, ast.Attribute) and _dotted(node) in ("R.Object", "R.Any"):
            return ObjectStructInfo()
        if _is_call_expr(node, "R.shape") and len(node.args) == 1 and not node.keywords:
            return self.shape(node.args[0], sizes or _Sizes())  # R.shape([3, 5]) where an op takes a shape
        if _is_call_expr(node, "R.prim_value") and len(node.args) == 1 and not node.keywords:
            typed = _typed_number(self, node.args[0])  # R.prim_value(T.int64(2))
            return typed[0] if typed is not None else self.literal(node.args[0], sizes)  # R.prim_value(2)
        if self.evaluate:
            return _python_literal(self.python_value(node))
        raise self.error(node, f"unsupported attribute value {_kind(node)}; expected a literal "
                               "(number, string, None, tuple, list or dict)")

    def literal_dict(self, call: ast.Call, what: str) -> dict:
        if len(call.args) != 1 or call.keywords:
            raise self.error(call, f"{what} takes one dict")
        value = self.literal(call.args[0])
        if not isinstance(value, dict):
            raise self.error(call.args[0], f"{what} takes a dict, got {type(value).__name__}")
        return value


class _Sizes:
    """Per-function size-variable bookkeeping. Size vars are identified by name; ``declared`` holds the names a
    ``n = T.int64()`` statement declared, which stand for the size even where the defining Python scope has a
    value of that name."""

    def __init__(self):
        self.declared: set[str] = set()


# -- special forms ------------------------------------------------------------------------------------

def _bind_args(p: Parser, node: ast.Call, names: list[str]) -> dict[str, ast.AST]:
    if len(node.args) > len(names):
        raise p.error(node, f"{_dotted(node.func)} takes at most {len(names)} positional arguments "
                            f"({', '.join(names)})")
    bound = dict(zip(names, node.args))
    for kw in node.keywords:
        if kw.arg not in names:
            raise p.error(kw, f"{_dotted(node.func)}: unknown argument {kw.arg!r}; expected {', '.join(names)}")
        if kw.arg in bound:
            raise p.error(kw, f"{_dotted(node.func)}: argument {kw.arg!r} given twice")
        bound[kw.arg] = kw.value
    return bound


def _const_array(p: Parser, node: ast.Call) -> Constant:
    """``R.const(value, dtype)``; ``shape=`` (written by the printer for an empty array whose nested lists cannot
    say it: ``R.const([], "float32", shape=(0, 3))``) reshapes the value."""
    bound = _bind_args(p, node, ["value", "dtype", "shape"])
    if "value" not in bound:
        raise p.error(node, "R.const(value, dtype) needs a value")
    value = p.literal(bound["value"])
    dtype = p.literal(bound["dtype"]) if "dtype" in bound else None
    if isinstance(value, np.ndarray):  # (without a dtype, R.const's rule: int64 and float64 arrays are narrowed)
        result = p.guard(node, lambda: const(value) if dtype is None else Constant(value.astype(to_numpy(dtype))))
    else:
        _check_elements(p, bound["value"], value)
        result = p.guard(node, lambda: const(_nested_lists(value), dtype))
    if "shape" not in bound:
        return result
    shape = p.literal(bound["shape"])
    if not isinstance(shape, tuple) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                               for d in shape):
        raise p.error(bound["shape"], f"R.const: shape must be a tuple of non-negative ints, got {shape!r}")
    if int(np.prod(shape)) != result.data.size:
        raise p.error(bound["shape"], f"R.const: shape {shape} does not hold the {result.data.size} value(s) given")
    return p.guard(node, lambda: Constant(result.data.reshape(shape)))


def _check_elements(p: Parser, node: ast.AST, value, path: str = "") -> None:
    """A ParseError at the first element of ``R.const``'s value that is no number (``None``, a string, a dict):
    NumPy would read None as NaN in a float array, silently."""
    if isinstance(value, tuple):
        elts = node.elts if isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) == len(value) else None
        for i, v in enumerate(value):
            _check_elements(p, elts[i] if elts else node, v, f"{path}[{i}]")
    elif not isinstance(value, (bool, int, float, np.bool_, np.number, np.ndarray)):
        where, shown = f"element {path} of " if path else "", repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise p.error(node, f"R.const: {where}the value is {shown}, not a number")


def _nested_lists(value):
    return [_nested_lists(v) for v in value] if isinstance(value, tuple) else value


def _sp_const(p: Parser, node, scope, sizes):
    return _const_array(p, node)


def _sp_shape(p: Parser, node, scope, sizes):
    if len(node.args) != 1 or node.keywords:
        raise p.error(node, "R.shape([dims...]) takes one list")
    dims = p.shape(node.args[0], sizes)
    return p.guard(node, lambda: ShapeExpr(dims, span=p.span(node)))


def _sp_prim_value(p: Parser, node, scope, sizes):
    bound = _bind_args(p, node, ["value", "dtype"])
    if "value" not in bound:
        raise p.error(node, "R.prim_value(value, dtype=...) takes a value: a number or a size variable")
    typed = _typed_number(p, bound["value"])
    if typed is not None:  # TVM's printer writes R.prim_value(T.float32(2.0)): the dtype is T's
        value, written = typed
        dtype = p.literal(bound["dtype"]) if "dtype" in bound else written
        if dtype != written:
            raise p.error(node, f"R.prim_value: the value is T.{written}(...) but dtype={dtype!r} is given")
    else:
        value = p.literal(bound["value"]) if _is_prim_literal(bound["value"]) else p.dim(bound["value"], sizes)
        dtype = p.literal(bound["dtype"]) if "dtype" in bound else ("float64" if isinstance(value, float) else "int64")
    # T.float32(2) and R.prim_value(2, "float32") hold 2.0, as TVM's FloatImm
    return p.guard(node, lambda: PrimValue(_as_dtype_literal(value, dtype), check_dtype(dtype, "R.prim_value")))


def _sp_full(p: Parser, node, scope, sizes):
    """``R.full(shape, fill_value, dtype)``. TVM's fill value is a 0-d tensor expression; a number or a constant is
    the record's ``fill_value`` attribute, and a tensor known only at run time (a parameter, a computed value) is
    ``broadcast_to(astype(v, dtype), shape)``, the same values (the record holds no tensor operand)."""
    op = get_op("full")
    bound = _bind_args(p, node, ["shape", "fill_value", "dtype"])
    fill = bound.get("fill_value")
    if fill is None or not _names_tensor(fill, scope):
        return p.call_op(op, node, scope, sizes)
    value = p.leaf(fill, scope, sizes)
    sinfo = value.struct_info
    if not isinstance(sinfo, TensorStructInfo) or sinfo.ndim != 0:
        raise p.error(fill, f"R.full: fill_value must be a 0-d tensor (TVM's zero-rank fill value) or a number, got "
                            f"{_fmt(sinfo)}")
    shape = p.attribute(bound["shape"], scope, sizes) if "shape" in bound else None
    if shape is None:
        raise p.error(node, "R.full: missing the shape")
    dtype = p.attribute(bound["dtype"], scope, sizes) if "dtype" in bound else None
    if dtype is not None and dtype != sinfo.dtype:
        value = p.bind_fresh(p.guard(node, lambda: p.apply_op("astype", [value], node, {"dtype": dtype})), scope)
    return p.guard(node, lambda: p.apply_op("broadcast_to", [value], node, {"shape": shape}))


def _names_tensor(node: ast.AST, scope: _Scope) -> bool:
    """Whether ``node`` is a Relax tensor value: a tensor variable, or an expression reading a Relax variable."""
    if isinstance(node, ast.Name) and node.id in scope.vars:
        return isinstance(scope.vars[node.id].struct_info, TensorStructInfo)
    return isinstance(node, ast.Call) and any(isinstance(n, ast.Name) and n.id in scope.vars for n in ast.walk(node))


def _sp_str(p: Parser, node, scope, sizes):
    if len(node.args) != 1 or not isinstance(node.args[0], ast.Constant) or not isinstance(node.args[0].value, str):
        raise p.error(node, "R.str takes one string literal")
    return StringImm(node.args[0].value)


def _sp_call_packed(p: Parser, node, scope, sizes):
    if not node.args or not isinstance(node.args[0], ast.Constant) or not isinstance(node.args[0].value, str):
        raise p.error(node, 'R.call_packed takes the function\'s name first: R.call_packed("name", *args, '
                            "sinfo_args=R.Object)")
    ret: StructInfo = ObjectStructInfo()
    for kw in node.keywords:
        if kw.arg != "sinfo_args":
            raise p.error(kw, f"R.call_packed: unknown argument {kw.arg!r}; expected sinfo_args")
        given = kw.value.elts if isinstance(kw.value, (ast.List, ast.Tuple)) else [kw.value]
        if len(given) != 1:
            raise p.error(kw.value, "R.call_packed: sinfo_args takes one struct info (the result's)")
        ret = p.struct_info(given[0], sizes)
    args = [p.leaf(a, scope, sizes) for a in node.args[1:]]
    return Call(ExternFunc(node.args[0].value, ret), args, {}, ret, span=p.span(node))


def _sp_layout_transform(p: Parser, node, scope, sizes):
    """``R.layout_transform(x, index_map=lambda n, c, h, w: (n, h, w, c), ...)``: TVM writes the map as a lambda
    (its printer as ``T.index_map(lambda ...)``), which the record holds as text. The lambda is read from the AST,
    never evaluated; a Python callable the defining scope names (``index_map=transformation``) is traced."""
    args = list(node.args)
    if len(args) > 1:
        args[1] = _index_map_text(p, args[1])
    keywords = [ast.copy_location(ast.keyword(arg=kw.arg, value=_index_map_text(p, kw.value)), kw)
                if kw.arg == "index_map" else kw for kw in node.keywords]
    call = ast.copy_location(ast.Call(func=node.func, args=args, keywords=keywords), node)
    return p.call_op(get_op("layout_transform"), call, scope, sizes)


def _index_map_text(p: Parser, node: ast.AST) -> ast.AST:
    """The map ``node`` writes as a string constant of its text; another node (a string already) as it is."""
    if isinstance(node, ast.Call) and _dotted(node.func) in ("T.index_map", "tir.index_map"):
        extra = [kw for kw in node.keywords if kw.arg != "index_dtype"]
        if len(node.args) != 1 or extra:
            raise p.error(node, "T.index_map takes the lambda (and index_dtype=): T.index_map(lambda i: (i // 4, "
                                "i % 4))")
        node = node.args[0]
    if isinstance(node, ast.Lambda):
        text = ast.unparse(node)
    elif isinstance(node, ast.Name) and node.id in p.env and callable(p.env[node.id]):
        from ..op.layout import index_map_text

        text = p.guard(node, lambda: index_map_text(p.env[node.id]))
    else:
        return node
    return ast.copy_location(ast.Constant(text), node)


def _sp_print(p: Parser, node, scope, sizes):
    """``R.print(x, y, format="x={} y={}")`` (TVM's form; its printer writes ``format=R.str("...")``), or
    ``R.print((x, y), format=...)``, the values as one tuple, as this project's printer writes the call."""
    from ..op.debug import PRINT

    fmt = ""
    for kw in node.keywords:
        if kw.arg != "format":
            raise p.error(kw, f"R.print: unknown argument {kw.arg!r}; it takes the values and format=")
        value = kw.value.args[0] if _is_call_expr(kw.value, "R.str") and len(kw.value.args) == 1 else kw.value
        if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
            raise p.error(kw.value, 'R.print: format must be a string literal: format="x = {}"')
        fmt = value.value
    args = node.args[0].elts if len(node.args) == 1 and isinstance(node.args[0], ast.Tuple) else node.args
    values = Tuple([p.leaf(a, scope, sizes) for a in args], span=p.span(node))
    attrs = p.guard(node, lambda: PRINT.complete_attrs({"format": fmt}))
    return Call(PRINT, [values], attrs, PRINT.infer_struct_info([values], attrs), span=p.span(node))


def _sp_tuple(p: Parser, node, scope, sizes):
    if node.keywords:
        raise p.error(node.keywords[0], "R.tuple takes its fields as positional arguments")
    return Tuple([p.leaf(a, scope, sizes) for a in node.args], span=p.span(node))


def _sp_misplaced(what: str):
    def handler(p: Parser, node, scope, sizes):
        raise p.error(node, f"{what}")
    return handler


#: The ``R.`` constructs other than ops that a Python name may stand for (``c = R.const``).
_ALIASABLE = ("const", "shape", "prim_value", "str", "tuple")


def _spelling(value: Any) -> Optional[str]:
    """``R.exp`` for the op ``exp`` (``relax_mlir.op.exp``, ``R.exp``), ``R.const`` for ``R.const``, ...; None for a
    value that is neither."""
    if isinstance(value, Op):
        return f"R.{value.short_name}"
    from . import relax as namespace  # (local: the namespace's decorators import this module)

    return next((f"R.{name}" for name in _ALIASABLE if value is getattr(namespace, name)), None) \
        if callable(value) else None


def _respelled(node: ast.Call, spelled: str) -> ast.Call:
    """``node`` with its callee written ``spelled`` (``R.exp``), at the callee's place (errors point there)."""
    func = ast.parse(spelled, mode="eval").body
    for part in ast.walk(func):
        ast.copy_location(part, node.func)
    return ast.copy_location(ast.Call(func=func, args=node.args, keywords=node.keywords), node)


def _decorator_name(dec: ast.AST) -> Optional[str]:
    """``R.function`` for ``@R.function`` and ``@R.function(private=True)`` alike."""
    return _dotted(dec.func if isinstance(dec, ast.Call) else dec)


_FUNCTION_DECORATORS = ("R.function", "relax.function")
_MODULE_DECORATORS = ("I.ir_module", "ir.ir_module", "tvm.script.ir_module")

#: The ops TVM's Relax expressions overload Python's operators with.
_ARITHMETIC = {ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "divide",
               ast.FloorDiv: "floor_divide", ast.Pow: "power"}
_COMPARISONS = {ast.Lt: "less", ast.LtE: "less_equal", ast.Gt: "greater", ast.GtE: "greater_equal"}

_SPECIAL = {
    "const": _sp_const, "shape": _sp_shape, "prim_value": _sp_prim_value, "str": _sp_str, "tuple": _sp_tuple,
    "full": _sp_full,
    "call_packed": _sp_call_packed, "layout_transform": _sp_layout_transform, "print": _sp_print,
    "match_cast": _sp_misplaced("R.match_cast must be the whole right-hand side of an assignment"),
    "output": _sp_misplaced("R.output(...) must be the last statement of a dataflow block"),
    "dataflow": _sp_misplaced("R.dataflow() is used as `with R.dataflow():`"),
    "func_attr": _sp_misplaced("R.func_attr({...}) is a statement of its own"),
}
#: The dtype of an ``R.Tensor`` that gives none, as ``R.Tensor(...)`` from Python has it.
DEFAULT_DTYPE = "float32"
#: Why an explicit "any dtype" is refused here, and how to give one.
_NO_DTYPE = ("TVM reads it as a tensor of any dtype, which this project does not represent (every tensor's dtype is "
             'known); give one: R.Tensor((2, 3), "float32"), R.Tensor(dtype="float32", ndim=2) (any shape of rank 2) '
             'or R.Tensor(dtype="float32") (any rank)')
_SINFO = {"Tensor": Parser.sinfo_tensor, "Tuple": Parser.sinfo_tuple, "Shape": Parser.sinfo_shape,
          "Prim": Parser.sinfo_prim, "Callable": Parser.sinfo_callable}


# -- small AST helpers --------------------------------------------------------------------------------

def _dotted(node: ast.AST) -> Optional[str]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _is_call_expr(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and _dotted(node.func) in (name, name.replace("R.", "relax.", 1))


#: TVM's declarations of a symbolic size (``n = T.int64()``); sizes are int64 here, so an int32 one is the same.
_SIZE_DECLARATIONS = ("T.int64", "T.int32", "tir.int64", "tir.int32")


def _is_size_declaration(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and _dotted(node.func) in _SIZE_DECLARATIONS


def _declares_sizes(node: ast.AST) -> bool:
    """``T.int64(), T.int64()``: the value of TVM's declaration of several sizes at once."""
    return isinstance(node, ast.Tuple) and bool(node.elts) and all(map(_is_size_declaration, node.elts))


def _tir_dtype(node: ast.AST) -> Optional[str]:
    """The dtype of ``T.int64`` (``T.float32``, ...) written as an annotation, TVM's spelling of an ``R.Prim``; else
    None."""
    name = _dotted(node) if isinstance(node, ast.Attribute) else None
    prefix, _, dtype = (name or "").rpartition(".")
    return dtype if prefix in ("T", "tir") and dtype in DTYPES else None


def _is_relax_call(node: ast.Call) -> bool:
    """A call the text format defines (``R.add``, ``relax.op...``, ``cls.f``), not Python's (``np.ones``)."""
    name = _dotted(node.func) or ""
    return name.split(".", 1)[0] in ("R", "relax", "cls", "T")


def _is_method_call(node: ast.Call) -> bool:
    """Whether ``node`` calls a method of a Relax value that the text format reads: ``x.astype(dtype)``."""
    return isinstance(node.func, ast.Attribute) and node.func.attr == "astype"


def _unwritable(value: Any) -> Optional[str]:
    """The type name of the first part of an attribute value the text format cannot write, or None."""
    if value is None or isinstance(value, (str, bool, int, float, np.integer, np.floating, np.ndarray, sym.SymDim,
                                           StructInfo)):
        return None
    if isinstance(value, (tuple, list)):
        return next((bad for bad in map(_unwritable, value) if bad is not None), None)
    if isinstance(value, dict):
        return next((bad for bad in map(_unwritable, [*value.keys(), *value.values()]) if bad is not None), None)
    return type(value).__name__


def _python_literal(value: Any) -> Any:
    """A value evaluated in the defining scope, as the parser's literals are: NumPy scalars as Python numbers,
    lists as tuples; arrays stay arrays (``R.const`` takes them)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list):
        return tuple(_python_literal(v) for v in value)
    return value


def _bound_print(stmt: ast.stmt) -> ast.stmt:
    """A bare ``R.print(...)`` statement (TVM writes it so) as the binding ``_ = R.print(...)``; other statements as
    they are."""
    if not _is_call_to(stmt, "R.print"):
        return stmt
    return ast.copy_location(ast.Assign(targets=[ast.copy_location(ast.Name(id="_", ctx=ast.Store()), stmt)],
                                        value=stmt.value), stmt)


def _is_call_to(stmt: ast.stmt, name: str) -> bool:
    return isinstance(stmt, ast.Expr) and _is_call_expr(stmt.value, name)


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _kind(node: ast.AST) -> str:
    try:
        text = ast.unparse(node).splitlines()[0]
    except Exception:  # pragma: no cover - unparse handles every node ast.parse makes
        text = type(node).__name__
    return f"`{text[:60]}`"


def _fmt(sinfo) -> str:
    from ..ir.printer import format_struct_info

    return format_struct_info(sinfo)


def _number(node: ast.AST) -> Optional[float]:
    """The Python number ``node`` writes (``2``, ``-0.5``), or None."""
    negative = isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
    value = getattr(node.operand if negative else node, "value", None)
    if not isinstance(node.operand if negative else node, ast.Constant) or isinstance(value, bool) \
            or not isinstance(value, (int, float)):
        return None
    return -value if negative else value


def _as_dtype_literal(value, dtype: str):
    """A literal written for a Prim of ``dtype`` as that dtype's Python type: ``1`` of a float dtype is ``1.0``, ``1``
    of bool ``True``, as TVM's FloatImm and IntImm(bool) hold it. Other pairs (``1.5`` of int64, ``True`` of float32)
    are left as written, for ``PrimValue`` to refuse with its message."""
    if is_float(dtype) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if dtype == "bool" and isinstance(value, int) and value in (0, 1):
        return bool(value)
    return value


def _is_number(value: Any) -> bool:
    """A Python number (not a bool, and not a NumPy scalar, whose dtype is its own)."""
    return isinstance(value, (int, float)) and not isinstance(value, (bool, np.generic))


def _is_prim_literal(node: ast.AST) -> bool:
    """Whether ``R.prim_value``'s (or ``R.Prim``'s) value ``node`` is a literal, not a size (``"n"``, ``n + 1``): a
    constant other than a string (``2``, ``True``), a signed number (``-1.5``) or ``float("nan")``,
    ``-float("inf")``, as the printer writes them."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
        if isinstance(node, ast.Constant):
            return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.Constant):
        return not isinstance(node.value, str)
    return isinstance(node, ast.Call) and _dotted(node.func) == "float" and len(node.args) == 1 and \
        not node.keywords and isinstance(node.args[0], ast.Constant)


def _typed_number(p: Parser, node: ast.AST) -> Optional[tuple[Any, str]]:
    """``(value, dtype)`` of TVM's typed literal ``T.float32(2)``, ``T.int64(-1)``, ``T.bool(True)``, or None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _dotted(node.func.value) == "T"
            and node.func.attr in DTYPES and len(node.args) == 1 and not node.keywords
            and _is_prim_literal(node.args[0])):
        return None
    return p.literal(node.args[0]), node.func.attr


def _prim_operands(op: Op, args: list) -> list:
    """A binary elementwise op's ``R.Prim`` operands (TVM takes them as scalars beside a tensor:
    ``R.add(x, R.prim_value(T.float32(2)))``) as 0-d constants of their dtype, the result TVM infers. A Prim whose
    value is not a number written here (a parameter, a size ``n``), or two Prim operands (TVM's result is a Prim),
    are refused: the op records take tensors."""
    prims = [i for i, a in enumerate(args) if isinstance(a, Expr) and isinstance(a.struct_info, PrimStructInfo)]
    if not prims:
        return args
    if len(prims) == len(args):
        raise ValueError(f"{op.name}: both operands are R.Prim values; TVM computes a Prim from them, which this "
                         "project does not represent; give a tensor operand (R.const(v, dtype))")
    out = list(args)
    for i in prims:
        sinfo = args[i].struct_info
        if not isinstance(sinfo.value, (int, float, bool, np.generic)) or isinstance(sinfo.value, sym.SymDim):
            known = "a size, " + str(sinfo.value) if sinfo.value is not None else "known only at run time"
            raise ValueError(f"{op.name}: operand {op.inputs[i]!r} is {_fmt(sinfo)} ({known}); a Prim operand is taken "
                             "only as a number written in the program (R.prim_value(T.float32(2))): pass a 0-d "
                             f"tensor (R.Tensor((), \"{sinfo.dtype}\")) instead")
        out[i] = const(sinfo.value, sinfo.dtype)
    return out


def _size_uses(sinfo: Optional[StructInfo]) -> set[str]:
    """The sizes ``sinfo`` names, alone or in an expression (a callee's signature names its own, not these)."""
    if isinstance(sinfo, TensorStructInfo):
        return sinfo.free_vars()
    if isinstance(sinfo, ShapeStructInfo):
        return set().union(*(sym.free_vars(d) for d in sinfo.values or ()))
    if isinstance(sinfo, PrimStructInfo):
        return sym.free_vars(sinfo.value) if isinstance(sinfo.value, sym.SymDim) else set()
    if isinstance(sinfo, TupleStructInfo):
        return set().union(*(_size_uses(f) for f in sinfo.fields))
    return set()


def _const_like(number: float, partner: Expr) -> Expr:
    """``number`` as a constant of ``partner``'s dtype (a tensor's), else of its own (``R.const``'s default)."""
    sinfo = partner.struct_info
    dtype = sinfo.dtype if isinstance(sinfo, TensorStructInfo) and sinfo.dtype else None
    return const(number, dtype) if dtype else const(number)


def _to_expr(value, name: str) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, (int, float, bool, np.ndarray, np.generic)):
        return const(value)
    raise TypeError(f"Python name {name!r} is a {type(value).__name__}, not a Relax value")


def from_source(text: str, filename: str = "<string>", env: Optional[Mapping[str, Any]] = None,
                check_well_formed: bool = True):
    """Parse a module (``@I.ir_module class ...``) or a function (``@R.function def ...``) from text.

    Unlike the decorators, this never evaluates Python: ``env`` may name values (sizes, arrays) the text refers
    to by name, and any other expression that is not the text format (``np.ones(...)``, ``W * 2``) is a
    ParseError. A text from elsewhere cannot run code. The result is checked as TVM's ``from_source`` checks it
    (``well_formed``, struct info aside: see ``Parser.check_result``) unless ``check_well_formed=False``."""
    return Parser(text, filename, env=env, check_well_formed=check_well_formed).parse()
