"""``ExprVisitor`` and ``ExprMutator``: walk or rewrite Relax IR, modelled on TVM's ``relax.expr_functor``.

Dispatch is on the node type: ``visit_expr`` calls ``visit_call_``, ``visit_var_``, ...; ``visit_binding``
calls ``visit_var_binding_`` / ``visit_match_cast_``; ``visit_binding_block`` calls ``visit_binding_block_`` /
``visit_dataflow_block_``; ``visit_var_def`` calls ``visit_var_def_`` / ``visit_dataflow_var_def_``.
Override the ``*_`` hooks. A mutator that rewrites every ``exp`` into ``sigmoid``:

    class ExpToSigmoid(ExprMutator):
        def visit_call_(self, call):
            call = self.visit_expr_post_order(call)   # rewrite the arguments first
            return op.sigmoid(call.args[0]) if call.op is op.exp else call

    new_mod = ExpToSigmoid().mutate_module(mod)

The mutator rebuilds only what changed (an untouched node comes back as the same object), re-infers the struct
info of rebuilt calls, gives a binding whose value's struct info changed a fresh variable, and remaps the later
uses of the old one. Rewrites may return nested expressions: they are brought back to A-normal form by binding
the inner calls first, as ``BlockBuilder.normalize`` does.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from .block_builder import call_return_struct_info, function_result_struct_info
from .expr import (Binding, BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr, Function, GlobalVar, If,
                   MatchCast, PrimValue, SeqExpr, ShapeExpr, StringImm, Tuple, TupleGetItem, Var, VarBinding)
from .module import IRModule
from .struct_info import FuncStructInfo, ObjectStructInfo, StructInfo

_EXPR_HOOKS = {
    DataflowVar: "visit_dataflow_var_", Var: "visit_var_", GlobalVar: "visit_global_var_",
    Constant: "visit_constant_", ShapeExpr: "visit_shape_expr_", PrimValue: "visit_prim_value_",
    StringImm: "visit_string_imm_", Call: "visit_call_", Tuple: "visit_tuple_",
    TupleGetItem: "visit_tuple_getitem_", SeqExpr: "visit_seq_expr_", Function: "visit_function_",
    If: "visit_if_",
}
_BINDING_HOOKS = {VarBinding: "visit_var_binding_", MatchCast: "visit_match_cast_"}
_BLOCK_HOOKS = {DataflowBlock: "visit_dataflow_block_", BindingBlock: "visit_binding_block_"}
_VAR_DEF_HOOKS = {DataflowVar: "visit_dataflow_var_def_", Var: "visit_var_def_"}


def _dispatch(self, table: dict, node, kind: str):
    # Walk the MRO so that subclasses of IR nodes (and DataflowVar before Var) find the closest hook.
    for cls in type(node).__mro__:
        name = table.get(cls)
        if name is not None:
            return getattr(self, name)(node)
    raise TypeError(f"{type(self).__name__}: unknown {kind} type {type(node).__name__}")


class ExprVisitor:
    """Visits every node of an expression, binding, block, function or module; returns nothing."""

    # -- entry points --------------------------------------------------------------------------------
    def visit_expr(self, expr: Expr) -> None:
        """Visit an expression by dispatching on its type."""
        _dispatch(self, _EXPR_HOOKS, expr, "expression")

    def visit_binding(self, binding: Binding) -> None:
        _dispatch(self, _BINDING_HOOKS, binding, "binding")

    def visit_binding_block(self, block: BindingBlock) -> None:
        _dispatch(self, _BLOCK_HOOKS, block, "binding block")

    def visit_var_def(self, var: Var) -> None:
        _dispatch(self, _VAR_DEF_HOOKS, var, "variable")

    def visit_module(self, mod: IRModule) -> None:
        """Visit every function of ``mod``, in order."""
        for _, func in mod.items():
            self.visit_expr(func)

    # -- leaves --------------------------------------------------------------------------------------
    def visit_var_(self, var: Var) -> None:
        pass

    def visit_dataflow_var_(self, var: DataflowVar) -> None:
        self.visit_var_(var)

    def visit_global_var_(self, gvar: GlobalVar) -> None:
        pass

    def visit_constant_(self, const: Constant) -> None:
        pass

    def visit_shape_expr_(self, shape: ShapeExpr) -> None:
        pass

    def visit_prim_value_(self, value: PrimValue) -> None:
        pass

    def visit_string_imm_(self, value: StringImm) -> None:
        pass

    # -- compound expressions ------------------------------------------------------------------------
    def visit_call_(self, call: Call) -> None:
        if isinstance(call.op, Expr):  # a GlobalVar or a Var holding a function; Op records are not Exprs
            self.visit_expr(call.op)
        for arg in call.args:
            self.visit_expr(arg)

    def visit_tuple_(self, tup: Tuple) -> None:
        for f in tup.fields:
            self.visit_expr(f)

    def visit_tuple_getitem_(self, item: TupleGetItem) -> None:
        self.visit_expr(item.tuple_value)

    def visit_seq_expr_(self, seq: SeqExpr) -> None:
        for block in seq.blocks:
            self.visit_binding_block(block)
        self.visit_expr(seq.body)

    def visit_function_(self, func: Function) -> None:
        for p in func.params:
            self.visit_var_def(p)
        self.visit_expr(func.body)

    def visit_if_(self, if_: If) -> None:
        self.visit_expr(if_.cond)
        self.visit_expr(if_.true_branch)
        self.visit_expr(if_.false_branch)

    # -- bindings, blocks, definitions ---------------------------------------------------------------
    def visit_var_binding_(self, binding: VarBinding) -> None:
        self.visit_expr(binding.value)
        self.visit_var_def(binding.var)

    def visit_match_cast_(self, binding: MatchCast) -> None:
        self.visit_expr(binding.value)
        self.visit_var_def(binding.var)

    def visit_binding_block_(self, block: BindingBlock) -> None:
        for b in block.bindings:
            self.visit_binding(b)

    def visit_dataflow_block_(self, block: DataflowBlock) -> None:
        self.visit_binding_block_(block)

    def visit_var_def_(self, var: Var) -> None:
        pass

    def visit_dataflow_var_def_(self, var: DataflowVar) -> None:
        self.visit_var_def_(var)


def post_order_visit(expr: Expr, fn: Callable[[Expr], None]) -> None:
    """Call ``fn`` on every expression under ``expr``, children before parents (TVM's ``post_order_visit``)."""

    class _PostOrder(ExprVisitor):
        def visit_expr(self, e: Expr) -> None:
            super().visit_expr(e)
            fn(e)

    _PostOrder().visit_expr(expr)


class ExprMutator:
    """Rewrites IR bottom-up; see the module docstring. ``mod`` gives callee signatures for calls to functions.

    While a block is being rebuilt, ``emit``/``emit_normalized`` append bindings to it (a hook may emit extra
    bindings before returning its rewrite), and ``lookup_binding`` finds the rebuilt value of a variable.
    """

    def __init__(self, mod: Optional[IRModule] = None):
        self.mod = mod
        self.var_remap_: dict[Var, Var] = {}
        self._bindings: Optional[list[Binding]] = None  # the block being rebuilt
        self._dataflow = False
        self._bound: dict[Var, Expr] = {}

    @property
    def builder_(self) -> "ExprMutator":
        """TVM's spelling: passes written for TVM call ``self.builder_.emit(...)``; the mutator is its own builder."""
        return self

    # -- entry points --------------------------------------------------------------------------------
    def visit_expr(self, expr: Expr) -> Expr:
        """The rewritten expression (``expr`` itself when nothing under it changed), normalised."""
        # As TVM: every rewrite is normalised, so a hook may return nested calls or calls without struct info.
        return self.normalize(_dispatch(self, _EXPR_HOOKS, expr, "expression"))

    def visit_binding(self, binding: Binding) -> None:
        """Rewrite one binding, emitting the result into the block being rebuilt."""
        _dispatch(self, _BINDING_HOOKS, binding, "binding")

    def visit_binding_block(self, block: BindingBlock) -> BindingBlock:
        return _dispatch(self, _BLOCK_HOOKS, block, "binding block")

    def visit_var_def(self, var: Var) -> Var:
        """The variable a definition introduces; a hook returning a new Var remaps the later uses."""
        return _dispatch(self, _VAR_DEF_HOOKS, var, "variable")

    def visit_function(self, func: Function) -> Function:
        """Rewrite one function (the same object when nothing changed)."""
        return self.visit_expr(func)

    def mutate_module(self, mod: IRModule) -> IRModule:
        """Rewrite every function of ``mod``; returns ``mod`` itself when no function changed."""
        self.mod = mod
        new_funcs = {name: self.visit_function(func) for name, func in mod.items()}
        if all(new_funcs[name] is func for name, func in mod.items()):
            return mod
        return IRModule(new_funcs, mod.attrs)

    def visit_expr_post_order(self, expr: Expr) -> Expr:
        """Rebuild ``expr`` from its rewritten children without calling the subclass hook for ``expr`` itself."""
        hook = _EXPR_HOOKS.get(type(expr)) or next(
            (_EXPR_HOOKS[c] for c in type(expr).__mro__ if c in _EXPR_HOOKS), None)
        if hook is None:
            raise TypeError(f"{type(self).__name__}: unknown expression type {type(expr).__name__}")
        return self.normalize(getattr(ExprMutator, hook)(self, expr))

    # -- var remapping -------------------------------------------------------------------------------
    def set_var_remap(self, old: Var, new: Var) -> None:
        self.var_remap_[old] = new

    def get_var_remap(self) -> dict[Var, Var]:
        return self.var_remap_

    def lookup_binding(self, var: Var) -> Optional[Expr]:
        """The (rewritten) value bound to ``var`` in the function being rewritten, if it is bound by a VarBinding."""
        return self._bound.get(var)

    @staticmethod
    def with_struct_info(var: Var, sinfo: Optional[StructInfo]) -> Var:
        """``var`` itself when ``sinfo`` equals its struct info, else a fresh Var of the same kind and name."""
        if sinfo == var.struct_info:
            return var
        return type(var)(var.name_hint, sinfo, span=var.span)

    # -- leaves --------------------------------------------------------------------------------------
    def visit_var_(self, var: Var) -> Expr:
        return self.var_remap_.get(var, var)

    def visit_dataflow_var_(self, var: DataflowVar) -> Expr:
        return self.visit_var_(var)

    def visit_global_var_(self, gvar: GlobalVar) -> Expr:
        return gvar

    def visit_constant_(self, const: Constant) -> Expr:
        return const

    def visit_shape_expr_(self, shape: ShapeExpr) -> Expr:
        return shape

    def visit_prim_value_(self, value: PrimValue) -> Expr:
        return value

    def visit_string_imm_(self, value: StringImm) -> Expr:
        return value

    # -- compound expressions ------------------------------------------------------------------------
    def visit_call_(self, call: Call) -> Expr:
        new_op = self.visit_expr(call.op) if isinstance(call.op, Expr) else call.op
        args = [self.visit_expr(a) for a in call.args]
        if new_op is call.op and all(a is b for a, b in zip(args, call.args)):
            return call
        return Call(new_op, args, call.attrs, span=call.span)  # visit_expr re-infers its struct info

    def visit_tuple_(self, tup: Tuple) -> Expr:
        fields = [self.visit_expr(f) for f in tup.fields]
        if all(a is b for a, b in zip(fields, tup.fields)):
            return tup
        return Tuple(fields, span=tup.span)

    def visit_tuple_getitem_(self, item: TupleGetItem) -> Expr:
        inner = self.visit_expr(item.tuple_value)
        return item if inner is item.tuple_value else TupleGetItem(inner, item.index, span=item.span)

    def visit_seq_expr_(self, seq: SeqExpr) -> Expr:
        blocks = [self.visit_binding_block(b) for b in seq.blocks]
        # The result is rewritten in a block of its own, which holds any bindings its normalisation needs.
        body, tail = self._in_block(False, lambda: self.visit_expr(seq.body))
        unchanged = not tail and body is seq.body and all(a is b for a, b in zip(blocks, seq.blocks))
        if unchanged:
            return seq
        blocks = [b for b in blocks if b.bindings] + ([BindingBlock(tail)] if tail else [])
        return SeqExpr(blocks, body, span=seq.span)

    def visit_if_(self, if_: If) -> Expr:
        """Each branch is rewritten as a scope of its own: what a hook emits while rewriting it goes into that branch
        (a rewritten result needing bindings gets them there), and a branch's rewritten bindings are not looked up
        from the other branch or after the If."""
        cond = self.visit_expr(if_.cond)
        branches = [self._visit_branch(b) for b in (if_.true_branch, if_.false_branch)]
        if cond is if_.cond and all(a is b for a, b in zip(branches, (if_.true_branch, if_.false_branch))):
            return if_
        return If(cond, *branches, span=if_.span)

    def _visit_branch(self, branch: Expr) -> Expr:
        saved_bound, saved_dataflow = dict(self._bound), self._dataflow
        try:
            self._dataflow = False
            return self.visit_expr(branch)
        finally:
            self._bound, self._dataflow = saved_bound, saved_dataflow

    def visit_function_(self, func: Function) -> Expr:
        params = []
        for p in func.params:
            new_p = self.visit_var_def(p)
            if new_p is not p:
                self.var_remap_[p] = new_p
            params.append(new_p)
        saved, self._bound = self._bound, {}
        try:
            body = self.visit_expr(func.body)
        finally:
            self._bound = saved
        if body is func.body and all(a is b for a, b in zip(params, func.params)):
            return func
        return Function(params, body, self._rebuilt_return(func, params, body), func.attrs, func.is_pure,
                        span=func.span)

    @staticmethod
    def _rebuilt_return(func: Function, params: Sequence[Var], body: Expr) -> Optional[StructInfo]:
        """The return struct info of ``func`` rebuilt with ``params`` and ``body``. One inferred from the old body
        (its result erased to the sizes the parameters define) is inferred again from the new one, erased the same
        way; one that restated the old result unerased (an annotation naming a size the body's match_cast defines,
        kept as written) follows the new result. A deliberately different (coarser) one is kept, and well_formed
        judges it."""
        ret = func.ret_struct_info
        if body.struct_info is None:
            return ret
        if ret == function_result_struct_info(func.params, func.body):
            return function_result_struct_info(params, body)
        return body.struct_info if ret == func.body.struct_info else ret

    # -- bindings, blocks, definitions ---------------------------------------------------------------
    def visit_var_binding_(self, binding: VarBinding) -> None:
        value = self.visit_expr(binding.value)
        var = self.visit_var_def(binding.var)
        if var is binding.var and value is binding.value:
            self.emit_normalized(binding)
            return
        new_var = self.with_struct_info(var, value.struct_info)
        if new_var is not binding.var:
            self.var_remap_[binding.var] = new_var
        self.emit_normalized(VarBinding(new_var, value, span=binding.span))

    def visit_match_cast_(self, binding: MatchCast) -> None:
        value = self.visit_expr(binding.value)
        var = self.visit_var_def(binding.var)
        if var is not binding.var:
            self.var_remap_[binding.var] = var
        if var is binding.var and value is binding.value:
            self.emit_normalized(binding)
        else:
            self.emit_normalized(MatchCast(var, value, binding.struct_info, span=binding.span))

    def visit_binding_block_(self, block: BindingBlock) -> BindingBlock:
        return self._rebuild_block(block, dataflow=False)

    def visit_dataflow_block_(self, block: DataflowBlock) -> BindingBlock:
        return self._rebuild_block(block, dataflow=True)

    def visit_var_def_(self, var: Var) -> Var:
        return var

    def visit_dataflow_var_def_(self, var: DataflowVar) -> Var:
        return self.visit_var_def_(var)

    def _rebuild_block(self, block: BindingBlock, dataflow: bool) -> BindingBlock:
        _, bindings = self._in_block(dataflow, lambda: [self.visit_binding(b) for b in block.bindings])
        if len(bindings) == len(block.bindings) and all(a is b for a, b in zip(bindings, block.bindings)):
            return block
        return (DataflowBlock if dataflow else BindingBlock)(bindings)

    def _in_block(self, dataflow: bool, fn: Callable[[], object]) -> tuple[object, list[Binding]]:
        saved = self._bindings, self._dataflow
        self._bindings, self._dataflow = [], dataflow
        try:
            result = fn()
            return result, self._bindings
        finally:
            self._bindings, self._dataflow = saved

    # -- building ------------------------------------------------------------------------------------
    def emit_normalized(self, binding: Binding) -> None:
        """Append ``binding`` as it is to the block being rebuilt."""
        if self._bindings is None:
            raise RuntimeError(f"{type(self).__name__}: bindings can only be emitted while a block is rebuilt")
        self._bindings.append(binding)
        if isinstance(binding, VarBinding):
            self._bound[binding.var] = binding.value

    def emit(self, expr: Expr, name_hint: str = "") -> Var:
        """Normalise ``expr`` and bind it to a fresh variable (a DataflowVar inside a dataflow block)."""
        value = self.normalize(expr)
        cls = DataflowVar if self._dataflow else Var
        var = cls(name_hint or ("lv" if self._dataflow else "gv"), value.struct_info)
        self.emit_normalized(VarBinding(var, value))
        return var

    def normalize(self, expr: Expr) -> Expr:
        """Fill in struct info and bring ``expr`` to A-normal form, binding nested calls first."""
        if isinstance(expr, Call):
            args = [self._normalize_arg(a) for a in expr.args]
            if all(a is b for a, b in zip(args, expr.args)) and expr.struct_info is not None:
                return expr
            return Call(expr.op, args, expr.attrs, self._infer_call(expr.op, args, expr.attrs), span=expr.span)
        if isinstance(expr, Tuple):
            fields = [self._normalize_arg(f) for f in expr.fields]
            if all(a is b for a, b in zip(fields, expr.fields)) and expr.struct_info is not None:
                return expr
            return Tuple(fields, span=expr.span)
        if isinstance(expr, TupleGetItem):
            inner = self._normalize_arg(expr.tuple_value)
            return expr if inner is expr.tuple_value else TupleGetItem(inner, expr.index, span=expr.span)
        if isinstance(expr, If):
            cond = self._normalize_arg(expr.cond)
            return expr if cond is expr.cond else If(cond, expr.true_branch, expr.false_branch, span=expr.span)
        return expr

    def _normalize_arg(self, expr: Expr) -> Expr:
        expr = self.normalize(expr)
        if isinstance(expr, (Call, TupleGetItem)) and self._bindings is not None:
            return self.emit(expr)
        return expr

    def _infer_call(self, callee, args: Sequence[Expr], attrs) -> Optional[StructInfo]:
        if isinstance(callee, GlobalVar):
            sinfo = callee.struct_info
            if self.mod is not None and callee.name_hint in self.mod:
                sinfo = self.mod[callee.name_hint].struct_info
            if not isinstance(sinfo, FuncStructInfo):
                return ObjectStructInfo()
            return call_return_struct_info(callee.name_hint, sinfo, [a.struct_info for a in args])
        if isinstance(callee, Expr):  # a Var holding a function value
            sinfo = callee.struct_info
            return sinfo.ret if isinstance(sinfo, FuncStructInfo) else ObjectStructInfo()
        return callee.infer_struct_info(args, attrs)
