"""Export a Relax ``IRModule`` to MLIR: one ``func.func`` per Relax function, on builtin tensors, with the ops
of the ``relax`` dialect (``dialect.py``).

The calling convention, the same at every stage and in the runtime:

* **Tuples are flattened** at function boundaries: a tuple parameter or result becomes several tensor
  parameters or results, in order, nested tuples depth-first (``(x, (y, z))`` is ``x, y, z``). Inside a
  function ``Tuple`` and ``TupleGetItem`` are resolved statically: no tuple value exists in MLIR.
* **Calls between functions** are ``func.call`` on the flattened arguments and results.
* **R.If** is ``scf.if`` on ``tensor.extract`` of its 0-d bool condition, with the flattened tensors of its struct
  info as results (sizes the branches do not share are ``?``); each branch's bindings are exported into its region
  and its value is ``scf.yield``ed. Later stages walk the regions as the function body (legalization, size checks,
  fusion, schedules, bufferization); kernel outlining takes only the function body's loop nests.
* **Size variables** are dynamic (``?``) dimensions; where an op needs one's value (the dynamic ``dims``
  operands of ops with a ``shape`` attribute) it is ``tensor.dim`` of the first parameter (or
  ``match_cast``) that binds it, and ``arith`` for expressions such as ``2 * n``.
* **Constants** are ``arith.constant dense<...>``; **attributes** follow ``dialect.py``.
* A ``match_cast`` is a ``tensor.cast`` to the refined type, its sizes checked at run time (``checked``): the
  runtime checks the arguments of the function called from Python only. So are the sizes a binding's variable
  declares beyond its value's struct info (``y: R.Tensor((2, 3)) = R.add(x, x)`` with ``x`` of any 2-d shape),
  the arguments of a call of another function against its parameters, and the results against the function's
  return struct info: where the interpreter checks a value, compiled code does, and no op runs on sizes other
  than those its types say.
* The members of a variadic group (``concat``'s tensors, ``split``'s results) are cast to their common type
  (IRDL binds a variadic constraint to one type) and back; ``concat(t, axis=None)`` is exported as ``concat``
  of the ``flatten``ed members on axis 0, since they may differ in rank.

Composite ops are decomposed first when their record has ``decompose(call) -> Expr`` (built with op
constructors, as gradient rules are). Ops with neither a lowering nor a decomposition are reported all at once.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

import numpy as np
from mlir import ir
from mlir.dialects import arith, func, scf, tensor

from ..ir.block_builder import call_size_bindings
from ..ir.dtype import to_numpy
from ..ir.expr import (Call, Constant, Expr, Function, GlobalVar, If, MatchCast, PrimValue, SeqExpr, ShapeExpr,
                       Tuple, TupleGetItem, Var, VarBinding)
from ..ir.module import IRModule
from ..ir.struct_info import StructInfo, TensorStructInfo, TupleStructInfo, substitute
from ..ir.sym import Quotient, SymDim
from ..ir.sym import free_vars as sym_free_vars
from ..ir.sym import substitute as sym_substitute
from ..ir.visitor import post_order_visit
from ..op.registry import REQUIRED, Op, get_op
from .error_slot import CHECKS_OFF_ATTR, SHAPE_CHECK_PREFIX
from .signature import ExportError, flatten_struct_info  # noqa: F401 - ExportError: re-exported
from .unsigned import unsigned_attrs
from ..transform.utils import call_cycle, reachable, recursion_message
from .legalize.checks import report_if
from .legalize.size_checks import ARG_SIZES
from .dialect import (SYMBOLIC_ENTRY, VARIADIC, dialect_op_name, element_type, encode_attr, has_dims_operands,
                      load_relax_dialect, result_arity)

Flat = Union[ir.Value, tuple]


# --- struct info -> types ----------------------------------------------------------------------------------------
def tensor_type(sinfo: TensorStructInfo, where: str) -> ir.RankedTensorType:
    """``tensor<?x784xf32>`` for ``Tensor((n, 784), "float32")``; an unknown shape of known rank is all ``?``."""
    if sinfo.shape is None:
        if sinfo.ndim < 0:
            raise ExportError(f"{where}: a tensor of unknown rank ({sinfo}) has no MLIR type")
        shape = [ir.ShapedType.get_dynamic_size()] * sinfo.ndim
    else:
        shape = [d if isinstance(d, int) else ir.ShapedType.get_dynamic_size() for d in sinfo.shape]
        static = [d for d in sinfo.shape if isinstance(d, int)]
        if math.prod(static) * to_numpy(sinfo.dtype).itemsize >= 2 ** 63:
            raise ExportError(f"{where}: a tensor of {' x '.join(map(str, static))} {sinfo.dtype} elements is larger "
                              "than any address space (2**63 bytes)")
    try:
        return ir.RankedTensorType.get(shape, element_type(sinfo.dtype))
    except ValueError as exc:
        raise ExportError(f"{where}: {exc}") from None


def flat_values(v: Flat) -> list[ir.Value]:
    return [v] if isinstance(v, ir.Value) else [x for f in v for x in flat_values(f)]


def nest(values: Sequence[Any], sinfo: StructInfo) -> tuple[Any, int]:
    """Rebuild the nesting of a flattened tuple (depth-first) from its leading values: (nested, count used)."""
    if isinstance(sinfo, TupleStructInfo):
        out, used = [], 0
        for f in sinfo.fields:
            v, n = nest(values[used:], f)
            out.append(v)
            used += n
        return tuple(out), used
    return values[0], 1


def constant(data: np.ndarray, sinfo: TensorStructInfo, where: str) -> ir.Value:
    """``arith.constant dense<...>`` holding ``data``."""
    t = tensor_type(TensorStructInfo(data.shape, sinfo.dtype), where)
    data = np.ascontiguousarray(data, dtype=to_numpy(sinfo.dtype))
    if sinfo.dtype == "bool":
        attr = ir.DenseElementsAttr.get(np.packbits(data.reshape(-1), bitorder="little"), type=t)
    elif sinfo.dtype == "bfloat16":
        attr = ir.DenseElementsAttr.get(data.view(np.uint16), type=t)
    elif data.dtype.kind == "u":  # signless integers: the same bits, read as signed
        attr = ir.DenseElementsAttr.get(data.view(data.dtype.str.replace("u", "i")), type=t)
    else:
        attr = ir.DenseElementsAttr.get(data, type=t)
    return arith.ConstantOp(t, attr).result


def join_type(types: Sequence[ir.RankedTensorType], where: str) -> ir.RankedTensorType:
    """The one type a variadic group of the dialect holds (IRDL binds a constraint to a single type): the same
    rank and element type, a dimension static only where every member has that same size."""
    if not types:
        raise ExportError(f"{where}: an empty tuple of tensors")
    first = types[0]
    if any(t.rank != first.rank or t.element_type != first.element_type for t in types):
        raise ExportError(f"{where}: the tensors {', '.join(map(str, types))} differ in rank or dtype; a variadic "
                          "group of the relax dialect needs one rank and dtype")
    shape = [d if all(t.shape[i] == d for t in types) else ir.ShapedType.get_dynamic_size()
             for i, d in enumerate(first.shape)]
    return ir.RankedTensorType.get(shape, first.element_type)


def coerce(v: ir.Value, t: ir.Type, where: str) -> ir.Value:
    """``v`` as type ``t``: itself, or a ``tensor.cast`` between static and dynamic dims."""
    if v.type == t:
        return v
    if (isinstance(v.type, ir.RankedTensorType) and isinstance(t, ir.RankedTensorType) and v.type.rank == t.rank
            and v.type.element_type == t.element_type):
        return tensor.cast(t, v)
    raise ExportError(f"{where}: a value of type {v.type} is used where {t} is expected")


# --- sizes -------------------------------------------------------------------------------------------------------
class _Sizes:
    """Size variables of one function: where each is first bound, and its ``index`` value once materialized."""

    def __init__(self) -> None:
        self.sources: dict[str, tuple[ir.Value, int]] = {}
        self.values: dict[str, ir.Value] = {}

    def bind(self, value: Flat, sinfo: Optional[StructInfo]) -> None:
        if isinstance(sinfo, TupleStructInfo) and isinstance(value, tuple):
            for v, f in zip(value, sinfo.fields):
                self.bind(v, f)
        elif isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None and isinstance(value, ir.Value):
            for axis, d in enumerate(sinfo.shape):
                if isinstance(d, SymDim) and d.is_var() and d.name not in self.sources:
                    self.sources[d.name] = (value, axis)

    def var(self, name: str, where: str) -> ir.Value:
        if name not in self.values:
            if name not in self.sources:
                raise ExportError(f"{where}: size variable {name!r} is not bound by any parameter or match_cast")
            value, axis = self.sources[name]
            self.values[name] = tensor.dim(value, arith.constant(ir.IndexType.get(), axis))
        return self.values[name]

    def dim(self, d: Union[int, SymDim], where: str) -> ir.Value:
        """The ``index`` value of a dimension (``arith`` over the size variables for a polynomial, a floor
        division for a quotient)."""
        idx = ir.IndexType.get()
        if isinstance(d, int):
            return arith.constant(idx, d)
        total: Optional[ir.Value] = None
        for mono, coef in d.terms:
            term = arith.constant(idx, coef) if coef != 1 or not mono else None
            for v in mono:
                factor = arith.floordivsi(self.dim(v.numerator, where), arith.constant(idx, v.divisor)) \
                    if isinstance(v, Quotient) else self.var(v, where)
                term = factor if term is None else arith.muli(term, factor)
            total = term if total is None else arith.addi(total, term)
        return total if total is not None else arith.constant(idx, 0)


def _unsized(sinfo: StructInfo, known: set[str]) -> StructInfo:
    """``sinfo`` with the shape of each tensor over a size variable not in ``known`` forgotten (its rank kept)."""
    if isinstance(sinfo, TupleStructInfo):
        return TupleStructInfo(_unsized(f, known) for f in sinfo.fields)
    if isinstance(sinfo, TensorStructInfo) and not sinfo.free_vars() <= known:
        return TensorStructInfo(dtype=sinfo.dtype, ndim=sinfo.ndim)
    return sinfo


# --- one function --------------------------------------------------------------------------------------------
class _FunctionExporter:
    def __init__(self, owner: "Exporter", name: str, fn: Function, func_op: func.FuncOp):
        self.owner, self.name, self.fn, self.func_op = owner, name, fn, func_op
        self.values: dict[Var, Flat] = {}
        self.shape_values: set[Var] = set()  # bindings of a shape or prim value (``binding``)
        # A nested call object a decomposition uses twice (``xs`` in ``(xs - mean(xs)) / std(xs)``) is exported
        # once: by identity, keeping the call alive so that its id stays its own.
        self.nested: dict[int, tuple[Call, Flat]] = {}
        self.sizes = _Sizes()
        self.where = name

    def run(self) -> None:
        self.record_arg_sizes()
        block = self.func_op.add_entry_block()
        args = list(block.arguments)
        for p in self.fn.params:
            n = len(flatten_struct_info(p.struct_info, p.name_hint, self.name))
            value, _ = nest(args[:n], p.struct_info)
            args = args[n:]
            self.values[p] = value
            self.sizes.bind(value, p.struct_info)
        with ir.InsertionPoint(block):
            result = self.expr(self.fn.body)
            self.where = self.name
            # The runtime allocates each result with the sizes its struct info gives (from the parameters'): a
            # result of other sizes would be copied out of bounds, so they are checked here.
            leaves = flatten_struct_info(self.fn.ret_struct_info, "result", self.name)
            values = flat_values(result)
            func.ReturnOp([self.checked(v, s, f"result {label!r}") for v, (label, s) in zip(values, leaves)])

    def record_arg_sizes(self) -> None:
        """When a size variable names dimensions of two parameters, their dims as text (``relax_mlir.arg_sizes``):
        the runtime binds each size variable once, checking every parameter, so the size checks after
        legalization need not compare them again (``legalize/size_checks.py``)."""
        leaves = [s for p in self.fn.params for _, s in flatten_struct_info(p.struct_info, p.name_hint, self.name)]
        dims = [[str(d) for d in s.shape] if s.shape is not None else [] for s in leaves]
        symbols = [{v for d in s.shape if isinstance(d, SymDim) for v in d.free_vars()} if s.shape is not None
                   else set() for s in leaves]
        if not any(a & b for i, a in enumerate(symbols) for b in symbols[i + 1:]):
            return
        self.func_op.attributes[ARG_SIZES] = ir.ArrayAttr.get(
            [ir.ArrayAttr.get([ir.StringAttr.get(d) for d in ds]) for ds in dims])

    def expr(self, e: Expr) -> Flat:
        if isinstance(e, Var):
            if e in self.shape_values:
                raise ExportError(f"{self.where}: '{e.name_hint}' holds a {e.struct_info} value, which compiled code "
                                  "does not pass at run time (only tensors and tuples of tensors; an op given it "
                                  "reads its values where the op is made)")
            if e not in self.values:
                raise ExportError(f"{self.where}: variable '{e.name_hint}' has no value here")
            return self.values[e]
        if isinstance(e, Constant):
            return constant(e.data, e.struct_info, self.where)
        if isinstance(e, Tuple):
            return tuple(self.expr(f) for f in e.fields)
        if isinstance(e, TupleGetItem):
            value = self.expr(e.tuple_value)
            if not isinstance(value, tuple):
                raise ExportError(f"{self.where}: TupleGetItem of a value that is not a tuple")
            return value[e.index]
        if isinstance(e, SeqExpr):
            for block in e.blocks:
                for b in block.bindings:
                    self.binding(b)
            return self.expr(e.body)
        if isinstance(e, Call) and isinstance(e.op, Op):
            if id(e) not in self.nested:
                self.nested[id(e)] = (e, self.op_call(e))
            return self.nested[id(e)][1]
        if isinstance(e, Call) and isinstance(e.op, GlobalVar):
            return self.func_call(e)
        if isinstance(e, If):
            return self.branch(e)
        if isinstance(e, Call) and not isinstance(e.op, (Op, Expr)):  # R.call_packed: a host function
            raise ExportError(f"{self.where}: {e.op.name} calls a host (Python) function, which compiled code "
                              "cannot do; relax_mlir.interpret runs such modules")
        if isinstance(e, Call):
            raise ExportError(f"{self.where}: a call of {e.op} (a function passed in as a value) is not supported "
                              "by the MLIR backend; only ops and module functions are called there")
        raise ExportError(f"{self.where}: {type(e).__name__} is not supported by the MLIR backend "
                          "(only tensors, tuples, op calls and calls of module functions are)")

    def branch(self, e: If) -> Flat:
        """``R.If`` as ``scf.if`` on the condition's one element, its results tensors of the If's struct info (the
        branches' least upper bound: a size the branches do not share is dynamic), each branch's bindings exported
        into its region and its value ``scf.yield``ed. The condition must be a 0-d bool tensor: compiled code
        carries no ``R.Prim`` value."""
        where = self.where
        cond = self.expr(e.cond)
        if not isinstance(cond, ir.Value) or cond.type != ir.RankedTensorType.get([], ir.IntegerType.get_signless(1)):
            raise ExportError(f"{where}: the condition of an R.If must be a 0-d bool tensor in compiled code, got "
                              f"{e.cond.struct_info}")
        leaves = flatten_struct_info(e.struct_info, "R.If", where)
        types = [tensor_type(s, f"{where}: R.If") for _, s in leaves]
        choose = scf.IfOp(tensor.extract(cond, []), types, has_else=True)
        for block, side in ((choose.then_block, e.true_branch), (choose.else_block, e.false_branch)):
            with ir.InsertionPoint(block):
                values = flat_values(self.scoped(side, where))
                scf.YieldOp([coerce(v, t, where) for v, t in zip(values, types)])
        self.where = where
        value, _ = nest(list(choose.results), e.struct_info)
        return value

    def scoped(self, branch: Expr, where: str) -> Flat:
        """``branch`` exported at the current insertion point (a region of an ``scf.if``), leaving nothing it made
        visible after it: the sizes it materializes (``tensor.dim`` inside the region, which would not dominate a
        later use), the size variables its match_casts bind and the nested calls it exports."""
        saved = dict(self.sizes.sources), dict(self.sizes.values), dict(self.nested)
        try:
            self.where = where
            return self.expr(branch)
        finally:
            self.sizes.sources, self.sizes.values, self.nested = saved

    def binding(self, b) -> None:
        self.where = f"{self.name}: binding '{b.var.name_hint}'"
        if isinstance(b, VarBinding) and isinstance(b.value, (ShapeExpr, PrimValue)):
            # ``s = R.shape([2, n])``: an op given ``s`` took its values where it was made (``R.reshape(x, s)``);
            # nothing carries a shape at run time, so only a later read of ``s`` itself is refused (``expr``)
            self.shape_values.add(b.var)
            self.where = self.name
            return
        if isinstance(b, MatchCast):
            value = self.cast(self.expr(b.value), b.struct_info)
        elif isinstance(b, VarBinding):
            value = self.narrowed(self.expr(b.value), b.var.struct_info, self.proven(b.value))
        else:
            raise ExportError(f"{self.where}: unknown binding type {type(b).__name__}")
        self.values[b.var] = value
        self.sizes.bind(value, b.var.struct_info)
        self.where = self.name

    def cast(self, value: Flat, sinfo: StructInfo) -> Flat:
        if isinstance(sinfo, TupleStructInfo) and isinstance(value, tuple):
            return tuple(self.cast(v, f) for v, f in zip(value, sinfo.fields))
        if isinstance(sinfo, TensorStructInfo) and isinstance(value, ir.Value):
            return self.checked(value, sinfo, f"match_cast to {sinfo}")
        raise ExportError(f"{self.where}: match_cast to {sinfo} is not supported by the MLIR backend")

    def proven(self, e: Expr) -> Optional[StructInfo]:
        """What ``e``'s value is known to be: its struct info, for a call of a module function the callee's
        result struct info (which the callee checks) over the arguments' sizes."""
        if isinstance(e, Call) and isinstance(e.op, GlobalVar) and e.op.name_hint in self.owner.mod:
            callee = self.owner.mod[e.op.name_hint].struct_info
            try:
                env = call_size_bindings(callee, [a.struct_info for a in e.args], e.op.name_hint)
            except (ValueError, TypeError):
                return None
            # a size of the callee the arguments' struct info does not give is not one of the caller's
            return substitute(_unsized(callee.ret, set(env)), env)
        return e.struct_info

    def narrowed(self, value: Flat, sinfo: Optional[StructInfo], proven: Optional[StructInfo],
                 path: str = "") -> Flat:
        """A binding's value as its variable's struct info ``sinfo`` where that is narrower than what the value is
        known to be (``proven``): ``y: R.Tensor((2, 3), "float32") = R.add(x, x)`` with ``x`` of any 2-d shape. The
        sizes ``proven`` does not give are checked at run time as a match_cast's are (the interpreter checks the
        binding too), so no op after it reads or writes with sizes the value does not have."""
        if isinstance(sinfo, TupleStructInfo) and isinstance(value, tuple):
            fields = proven.fields if isinstance(proven, TupleStructInfo) else ()
            if len(fields) != len(sinfo.fields):
                fields = (None,) * len(sinfo.fields)
            return tuple(self.narrowed(v, s, p, f"{path}[{i}]")
                         for i, (v, s, p) in enumerate(zip(value, sinfo.fields, fields)))
        if not isinstance(sinfo, TensorStructInfo) or not isinstance(value, ir.Value) or sinfo.shape is None:
            return value
        known = proven.shape if isinstance(proven, TensorStructInfo) and proven.dtype == sinfo.dtype else None
        if known is not None and len(known) != len(sinfo.shape):
            known = None
        if known is not None and tuple(known) == tuple(sinfo.shape):
            return value
        where, self.where = self.where, self.where + path  # a tuple's field as the interpreter names it: 't'[0]
        try:
            return self.checked(value, sinfo, f"declared {sinfo}", known)
        finally:
            self.where = where

    def checked(self, value: ir.Value, sinfo: TensorStructInfo, what: str,
                proven: Optional[Sequence[Union[int, SymDim, None]]] = None,
                sizes: Optional[_Sizes] = None) -> ir.Value:
        """``value`` as ``sinfo``'s type, its sizes checked at run time against those of ``sinfo`` known here
        (static, or over size variables already bound; a size it binds is not checked, nor one equal to
        ``proven``'s, the value's shape as far as known). On a mismatch a runtime check reports it (``ValueError``
        after the call, naming ``what``, the dimension and both sizes, a symbolic one with the value it has:
        ``expected n = 3``) and a fresh tensor of the expected sizes stands in, so nothing later reads or writes
        outside a buffer; with ``checks=False`` only the stand-in remains. A value whose type has another static
        size than ``sinfo`` always fails its check. ``sizes``: the size variables ``sinfo`` is over (a callee's, for
        an argument), by default the function's."""
        sizes = sizes if sizes is not None else self.sizes
        target = tensor_type(sinfo, self.where)
        given = ir.RankedTensorType(value.type)
        if sinfo.shape is None or given.rank != len(sinfo.shape):
            return coerce(value, target, self.where)
        idx = ir.IndexType.get()
        expected: list[Optional[ir.Value]] = []
        mismatch: Optional[ir.Value] = None
        conflict = False  # a static size other than sinfo's: the cast to its type would not verify
        for axis, d in enumerate(sinfo.shape):
            fixed = None if given.is_dynamic_dim(axis) else given.shape[axis]
            if (fixed == d or (proven is not None and proven[axis] == d)
                    or any(v not in sizes.sources for v in sym_free_vars(d))):
                expected.append(None)  # the same static size, known, or a size this binding defines
                continue
            conflict = conflict or (fixed is not None and isinstance(d, int))
            want = sizes.dim(d, self.where)
            got = tensor.dim(value, arith.constant(idx, axis))
            bad = arith.cmpi(arith.CmpIPredicate.ne, got, want)
            # a size over size variables is shown with the value it has in this call: "expected n = 3"
            shown = f"{d}" if isinstance(d, int) else f"{d} = {{extent}}"
            report_if(self.func_op, bad, arith.index_cast(ir.IntegerType.get_signless(64), got),
                      arith.constant(idx, axis),
                      f"{SHAPE_CHECK_PREFIX}{self.where}: {what}: dimension {{position}} is {{value}}, "
                      f"expected {shown}", extent=want)
            mismatch = bad if mismatch is None else arith.ori(mismatch, bad)
            expected.append(want)
        if mismatch is None:
            return coerce(value, target, self.where)

        def stand_in() -> ir.Value:
            sizes = [(expected[a] if expected[a] is not None else tensor.dim(value, arith.constant(idx, a)))
                     if target.is_dynamic_dim(a) else target.shape[a] for a in range(target.rank)]
            return tensor.EmptyOp(sizes, target.element_type).result

        if conflict:
            return stand_in()
        choose = scf.IfOp(mismatch, [target], has_else=True)
        with ir.InsertionPoint(choose.then_block):
            scf.YieldOp([stand_in()])
        with ir.InsertionPoint(choose.else_block):
            scf.YieldOp([coerce(value, target, self.where)])
        return choose.results[0]

    def op_call(self, call: Call) -> Flat:
        rec = call.op
        decompose = rec.decompose or rec.export_rewrite
        if decompose is not None and rec.name not in self.owner.overrides:
            rewritten = decompose(call)
            if rewritten is not None:
                return self.expr(rewritten)
        name = dialect_op_name(rec)
        if name not in self.owner.known_ops:
            raise ExportError(f"{self.where}: {rec.name} is not supported by the MLIR backend yet "
                              "(it has no lowering and no decomposition)")
        operands: list[ir.Value] = []
        for i, arg in enumerate(call.args):
            value = self.expr(arg)
            if rec.tuple_input and i == 0:
                group = flat_values(value)
                common = join_type([v.type for v in group], f"{self.where}: {rec.name}")
                operands += [coerce(v, common, self.where) for v in group]
            elif isinstance(value, ir.Value):
                operands.append(value)
            else:
                raise ExportError(f"{self.where}: {rec.name} argument {rec.inputs[i]!r} is a tuple, expected a tensor")
        sinfo = call.struct_info
        fields = list(sinfo.fields) if isinstance(sinfo, TupleStructInfo) else [sinfo]
        if not all(isinstance(f, TensorStructInfo) for f in fields):
            raise ExportError(f"{self.where}: {rec.name} has result struct info {sinfo}")
        types = [tensor_type(f, self.where) for f in fields]
        own_types = types
        if isinstance(sinfo, TupleStructInfo) and result_arity(rec) == VARIADIC:
            types = [join_type(types, f"{self.where}: {rec.name}")] * len(types)
        attrs, attr_dims = {}, []
        for key, default in rec.attrs.items():
            value = call.attrs.get(key, default)
            if value is REQUIRED:
                raise ExportError(f"{self.where}: {rec.name} is missing its attribute {key!r}")
            if key == "shape":  # the result's shape; the dynamic dims become operands
                value = self.result_shape(fields[0], rec)
            elif key in rec.size_attrs and value is not None:  # symbolic entries become operands too
                attr_dims += [d for d in value if isinstance(d, SymDim)]
                value = tuple(SYMBOLIC_ENTRY if isinstance(d, SymDim) else d for d in value)
            try:
                attrs[key] = encode_attr(key, value)
            except ValueError as exc:
                raise ExportError(f"{self.where}: {rec.name}: {exc}") from None
        if has_dims_operands(rec):
            shape_dims = [d for d in fields[0].shape if not isinstance(d, int)] if "shape" in rec.attrs else []
            operands += [self.sizes.dim(d, self.where) for d in shape_dims + attr_dims]
        for key in unsigned_attrs(rec, [a.struct_info for a in call.args], fields, self.where):
            attrs[key] = ir.UnitAttr.get()
        # The binding names the op (a NameLoc): runtime checks quote it in their messages.
        op = ir.Operation.create(name, results=types, operands=operands, attributes=attrs,
                                 loc=ir.Location.name(self.where))
        tupled = isinstance(sinfo, TupleStructInfo)
        results = []
        for i, (r, t) in enumerate(zip(op.results, own_types)):
            with ir.Location.name(f"{self.where}[{i}]" if tupled else self.where):  # (a cast's size check quotes it)
                results.append(coerce(r, t, self.where))
        return tuple(results) if tupled else results[0]

    def result_shape(self, sinfo: TensorStructInfo, rec: Op) -> tuple[int, ...]:
        if sinfo.shape is None:
            raise ExportError(f"{self.where}: {rec.name} has a result of unknown shape ({sinfo})")
        return tuple(d if isinstance(d, int) else -1 for d in sinfo.shape)

    def func_call(self, call: Call) -> Flat:
        callee_name = call.op.name_hint
        callee = self.owner.func_ops.get(callee_name)
        if callee is None:
            raise ExportError(f"{self.where}: calls {callee_name!r}, which is not in the exported module")
        ftype = ir.FunctionType(callee.type)
        values = [self.expr(a) for a in call.args]
        count = sum(len(flat_values(a)) for a in values)
        if count != len(ftype.inputs):
            raise ExportError(f"{self.where}: {callee_name} takes {len(ftype.inputs)} tensors, got {count}")
        args = [v for a in self.call_arguments(callee_name, call, values) for v in flat_values(a)]
        args = [coerce(v, t, f"{self.where}: argument of {callee_name}") for v, t in zip(args, ftype.inputs)]
        op = func.CallOp(list(ftype.results), ir.FlatSymbolRefAttr.get(callee_name), args)
        value, _ = nest(list(op.results), self.owner.mod[callee_name].ret_struct_info)
        return value

    def call_arguments(self, name: str, call: Call, values: list[Flat]) -> list[Flat]:
        """The arguments of a call of module function ``name``, checked against its parameters. The runtime checks
        the arguments of a call from Python, not those of a call inside compiled code, and the callee's code
        relies on its parameters' sizes: those the arguments' struct info does not prove (``R.Tensor(ndim=2)``
        passed for ``R.Tensor((2, 3))``, two sizes passed for one size variable ``n``) are checked here as a
        match_cast's are (the interpreter checks every call's arguments)."""
        fn = self.owner.mod[name]
        try:  # the callee's size variables as the arguments' struct info gives them
            env = call_size_bindings(fn.struct_info, [a.struct_info for a in call.args], name)
        except (ValueError, TypeError):
            env = {}
        sizes = _Sizes()  # the callee's size variables, bound from the arguments as the callee binds them
        for v, p in zip(values, fn.params):
            sizes.bind(v, p.struct_info)

        def check(value: Flat, sinfo: Optional[StructInfo], arg: Optional[StructInfo], what: str) -> Flat:
            if isinstance(sinfo, TupleStructInfo) and isinstance(value, tuple):
                fields = arg.fields if isinstance(arg, TupleStructInfo) and len(arg.fields) == len(sinfo.fields) \
                    else (None,) * len(sinfo.fields)
                return tuple(check(v, s, a, f"{what}[{i}]")
                             for i, (v, s, a) in enumerate(zip(value, sinfo.fields, fields)))
            if not isinstance(sinfo, TensorStructInfo) or not isinstance(value, ir.Value) or sinfo.shape is None:
                return value
            known = arg.shape if isinstance(arg, TensorStructInfo) and arg.shape is not None \
                and len(arg.shape) == len(sinfo.shape) else None

            def given(axis: int, d: Union[int, SymDim]) -> bool:
                if isinstance(d, SymDim) and d.is_var() and sizes.sources.get(d.name) == (value, axis):
                    return True  # the dimension the callee takes the size from
                return known is not None and sym_free_vars(d) <= env.keys() and \
                    sym_substitute(d, lambda v: env[v]) == known[axis]

            proven = [d if given(axis, d) else None for axis, d in enumerate(sinfo.shape)]
            if all(d is not None for d in proven):
                return value
            return self.checked(value, sinfo, what, proven, sizes)

        return [check(v, p.struct_info, a.struct_info, f"argument {i} ('{p.name_hint}') of {name}")
                for i, (v, p, a) in enumerate(zip(values, fn.params, call.args))]


# --- a module ------------------------------------------------------------------------------------------------
def unsupported_ops(mod: IRModule, names: Iterable[str], overrides: Mapping[str, Any],
                    host: bool = False) -> list[str]:
    """``"relax.x (used by lv in f)"`` for every call of an op with no lowering and no decomposition; with ``host``,
    of an impure one only (``R.print``: an effect on the host, which compiled code refuses as ``R.call_packed``)."""
    found: list[str] = []
    for name in names:
        for block in mod[name].blocks:
            for b in block.bindings:
                def check(e, b=b, name=name):
                    if isinstance(e, Call) and isinstance(e.op, Op):
                        rec = e.op
                        if not rec.compilable and rec.name not in overrides and rec.pure != host:
                            found.append(f"{rec.name} (used by {b.var.name_hint} in {name})")
                post_order_visit(b.value, check)
    return found


class Exporter:
    """Exports functions of a module into a fresh MLIR context with the relax dialect loaded."""

    def __init__(self, mod: IRModule, function: Optional[str] = None, overrides: Optional[Mapping[str, Any]] = None,
                 context: Optional[ir.Context] = None, checks: bool = True):
        if not isinstance(mod, IRModule):
            raise TypeError(f"to_mlir: expected an IRModule, got {type(mod).__name__}")
        self.mod = mod
        self.overrides = dict(overrides or {})
        self.names = reachable(mod, function)
        self.context = context or ir.Context()
        # a custom lowering of a composite needs its op in the dialect
        self.extra = [get_op(n) for n in self.overrides if get_op(n).decompose]
        self.known_ops = load_relax_dialect(self.context, self.extra)
        self.func_ops: dict[str, func.FuncOp] = {}
        self.checks = checks

    def run(self) -> ir.Module:
        foreign = [n for n in self.names if not n.isascii()]
        if foreign:
            raise ExportError(f"function {foreign[0]!r}: MLIR's symbol names are ASCII; rename the function")
        cycle = call_cycle(self.mod, self.names)
        if cycle:
            raise ExportError(recursion_message(cycle))
        host = unsupported_ops(self.mod, self.names, self.overrides, host=True)
        if host:
            raise ExportError(f"{host[0]} runs on the host (Python), which compiled code cannot do; "
                              "relax_mlir.interpret runs such modules (remove the call to compile)")
        missing = unsupported_ops(self.mod, self.names, self.overrides)
        if missing:
            raise ExportError("not supported by the MLIR backend yet (no lowering or decomposition): "
                              + "; ".join(missing))
        with self.context, ir.Location.unknown():
            module = ir.Module.create()
            if not self.checks:  # the size checks of match_cast and results report nothing (report_if)
                module.operation.attributes[CHECKS_OFF_ATTR] = ir.UnitAttr.get()
            with ir.InsertionPoint(module.body):
                for name in self.names:
                    self.func_ops[name] = func.FuncOp(name, self.function_type(name))
            for name in self.names:
                _FunctionExporter(self, name, self.mod[name], self.func_ops[name]).run()
            module.operation.verify()
        return module

    def function_type(self, name: str) -> ir.FunctionType:
        fn = self.mod[name]
        params = [t for p in fn.params for _, t in flatten_struct_info(p.struct_info, p.name_hint, name)]
        results = [t for _, t in flatten_struct_info(fn.ret_struct_info, "result", name)]
        return ir.FunctionType.get([tensor_type(t, f"{name}: parameter") for t in params],
                                   [tensor_type(t, f"{name}: result") for t in results])


def export(mod: IRModule, function: Optional[str] = None, overrides: Optional[Mapping[str, Any]] = None,
           context: Optional[ir.Context] = None, checks: bool = True) -> ir.Module:
    """The relax-dialect MLIR module of ``mod`` (all functions, or ``function`` and its callees); ``checks=False``
    as ``relax_mlir.compile``'s."""
    return Exporter(mod, function, overrides, context, checks).run()


def export_module(mod: IRModule, function: Optional[str] = None,
                  overrides: Optional[Mapping[str, Any]] = None) -> str:
    """:func:`export`, as text."""
    return str(export(mod, function, overrides))
