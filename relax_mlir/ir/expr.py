"""Relax expressions, bindings and functions: small immutable dataclasses, compared by identity.

Structural comparison is :func:`relax_mlir.ir.structural_equal`; ``==`` on nodes is identity, as variables
are identities (two ``Var("x")`` are different variables).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np

from .dtype import check_dtype, from_numpy, is_floating, to_numpy
from .struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
                          TensorStructInfo, TupleStructInfo, check_prim_float, defined_size_vars,
                          erase_to_well_defined, free_vars, make_shape, struct_info_lca)
from .sym import Dim


@dataclass(frozen=True)
class Span:
    """Where a node came from in the text it was parsed from (1-based line and column)."""

    line: int
    column: int
    source: str = "<string>"

    def __str__(self) -> str:
        return f"{self.source}:{self.line}:{self.column}"


def _span():
    return field(default=None, compare=False, repr=False, kw_only=True)


class Expr:
    """Base class of Relax expressions. Arithmetic operators build op calls (``a + b`` is ``relax.add``)."""

    struct_info: Optional[StructInfo]

    def _op(self, name: str, *args):
        from .. import op as _op_mod  # the op package imports the IR, not the other way round

        fn = _op_mod
        for part in name.split("."):
            fn = getattr(fn, part)
        return fn(*args)

    def __add__(self, other): return self._op("add", self, lift_scalar(other, self))
    def __radd__(self, other): return self._op("add", lift_scalar(other, self), self)
    def __sub__(self, other): return self._op("subtract", self, lift_scalar(other, self))
    def __rsub__(self, other): return self._op("subtract", lift_scalar(other, self), self)
    def __mul__(self, other): return self._op("multiply", self, lift_scalar(other, self))
    def __rmul__(self, other): return self._op("multiply", lift_scalar(other, self), self)
    def __truediv__(self, other): return self._op("divide", self, lift_scalar(other, self))
    def __rtruediv__(self, other): return self._op("divide", lift_scalar(other, self), self)
    def __neg__(self): return self._op("negative", self)
    def __matmul__(self, other): return self._op("matmul", self, other)

    def __getitem__(self, index: int) -> "TupleGetItem":
        if not isinstance(index, int):
            raise TypeError(f"indexing an Expr builds a TupleGetItem and needs an int, got {index!r}")
        return TupleGetItem(self, index)

    def __iter__(self):
        # Without this, __getitem__ would make every Expr an endless sequence to Python.
        sinfo = self.struct_info
        if not isinstance(sinfo, TupleStructInfo):
            raise TypeError(f"{type(self).__name__} is not a tuple (struct info {sinfo}): cannot iterate over it")
        return iter([TupleGetItem(self, i) for i in range(len(sinfo.fields))])

    def astype(self, dtype: str):
        from .. import op as _op_mod

        return _op_mod.astype(self, dtype)

    def __str__(self) -> str:
        from .printer import format_expr

        return format_expr(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self})"


def lift_scalar(value, partner: Expr) -> Expr:
    """``value`` as the operand beside ``partner`` in an elementwise op (``x + 1``, ``op.add(x, 1)``): an ``Expr``
    as it is; a Python number a constant of the tensor ``partner``'s dtype, as in the text format's ``x + 1`` (so
    ``x * 2`` keeps a float16 ``x`` float16 rather than promoting it; refused when the number does not fit:
    ``x * 1.5`` on an int tensor). NumPy values and bools, and a number beside a non-tensor, are as :func:`const`
    makes them without a dtype (an int is int32, a float float32). The operator overloads of :class:`Expr` and the
    op constructors (``op.registry``) share this rule."""
    if isinstance(value, Expr):
        return value
    sinfo = partner.struct_info
    if isinstance(value, (int, float)) and not isinstance(value, (bool, np.generic)) and \
            isinstance(sinfo, TensorStructInfo) and sinfo.dtype:
        return const(value, sinfo.dtype)
    if isinstance(value, (int, float, bool, np.ndarray, np.generic)):
        return const(value)
    raise TypeError(f"cannot use {type(value).__name__} as a Relax expression")




# ---------------------------------------------------------------------------------------------------------
# leaves

@dataclass(frozen=True, eq=False, repr=False)
class Var(Expr):
    """A variable: a function parameter or the result of a binding."""

    name_hint: str
    struct_info: Optional[StructInfo] = None
    span: Optional[Span] = _span()

    def __post_init__(self):
        if not isinstance(self.name_hint, str):
            raise TypeError(f"Var: name must be a str, got {type(self.name_hint).__name__}")
        if self.struct_info is not None and not isinstance(self.struct_info, StructInfo):
            raise TypeError(f"Var {self.name_hint!r}: struct_info must be StructInfo, "
                            f"got {type(self.struct_info).__name__}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name_hint!r}, {self.struct_info})"


@dataclass(frozen=True, eq=False, repr=False)
class DataflowVar(Var):
    """A variable bound inside a dataflow block; it may not be used outside that block."""


@dataclass(frozen=True, eq=False, repr=False)
class GlobalVar(Expr):
    """The name of a function of an ``IRModule``; calls between functions go through it."""

    name_hint: str
    struct_info: Optional[StructInfo] = None
    span: Optional[Span] = _span()

    def __repr__(self) -> str:
        return f"GlobalVar({self.name_hint!r})"


@dataclass(frozen=True, eq=False, repr=False)
class Constant(Expr):
    """A constant tensor, holding a NumPy array (read-only)."""

    data: np.ndarray
    struct_info: Optional[StructInfo] = None
    span: Optional[Span] = _span()

    def __post_init__(self):
        data = np.asarray(self.data)
        if not data.flags.c_contiguous or data.flags.writeable:
            data = np.array(data, copy=True, order="C")
            data.flags.writeable = False
        object.__setattr__(self, "data", data)
        if self.struct_info is None:
            object.__setattr__(self, "struct_info", TensorStructInfo(data.shape, from_numpy(data.dtype)))


def _refuse_changed_values(value, arr: np.ndarray, dtype: str) -> None:
    """Refuse a conversion to ``dtype`` that changed a value other than by rounding a float: a finite float that
    overflowed to inf, a float with a fraction or outside the range of an integer dtype (NaN and inf included), an
    integer outside it (which would wrap), a number other than 0 or 1 made bool."""
    src = np.asarray(value)
    if (src.dtype.kind not in "biu" and not is_floating(src.dtype)) or src.size == 0 or src.dtype == arr.dtype:
        return
    kind = "f" if is_floating(arr.dtype) else arr.dtype.kind  # bfloat16 (ml_dtypes, kind "V") is a float too
    with np.errstate(all="ignore"):
        if kind == "f":
            bad = np.isfinite(src) & ~np.isfinite(arr.astype(np.float64)) if is_floating(src.dtype) else \
                ~np.isfinite(arr.astype(np.float64))
        elif kind == "b":
            bad = (src != 0) & (src != 1)
        elif is_floating(src.dtype):
            info = np.iinfo(arr.dtype)
            bad = ~np.isfinite(src) | (src != np.trunc(src)) | (src < info.min) | (src > info.max)
        else:  # integer to integer (NumPy compares across signedness exactly)
            info = np.iinfo(arr.dtype)
            bad = (src < info.min) | (src > info.max) if src.dtype.kind != "b" else np.zeros(src.shape, bool)
    if np.any(bad):
        shown = src[bad].flat[0].item() if bad.shape == src.shape else src.flat[0].item() if src.ndim == 0 else None
        what = repr(shown) if shown is not None else "a value"
        raise ValueError(f"R.const: {what} is not representable in {dtype} (the conversion would change it)")


def const(value, dtype: Optional[str] = None) -> Constant:
    """``R.const``: a constant tensor from a scalar, a (nested) list or an array. Without ``dtype``, TVM's
    ``relax.const`` rule: a Python int is int32, a float float32, a bool bool; a NumPy value keeps its dtype, except
    int64 (int32) and float64 (float32), NumPy's defaults for Python numbers. A value the narrowed dtype cannot hold
    is refused (TVM wraps ``R.const(2**40)`` to 0), saying which dtype to give."""
    if dtype is None:
        if isinstance(value, int) and not isinstance(value, bool):
            _check_default_int(value)
        arr = np.asarray(value)
        narrowed = _NARROWED.get(arr.dtype.name)
        return Constant(arr if narrowed is None else _narrow(arr, narrowed))
    target = to_numpy(check_dtype(dtype, "R.const"))
    try:
        with np.errstate(all="ignore"):
            arr = np.asarray(value, dtype=target)
    except (OverflowError, ValueError) as exc:  # NumPy's refusal of an out-of-range Python int, or of NaN to int
        raise ValueError(f"R.const: {value!r} is not representable in {dtype} ({exc})") from None
    _refuse_changed_values(value, arr, dtype)
    return Constant(arr)


#: The dtype ``R.const`` without one narrows NumPy's default dtypes to (by name: a big-endian array too), as TVM's
#: ``relax.const`` does; every other dtype is kept.
_NARROWED = {"int64": "int32", "float64": "float32"}


def _check_default_int(value: int) -> None:
    """Refuse a Python int that int32, an integer constant's dtype when none is given, cannot hold."""
    if -2**31 <= value < 2**31:
        return
    wider = "int64" if -2**63 <= value < 2**63 else "uint64" if 0 <= value < 2**64 else None
    if wider is None:
        raise ValueError(f"R.const: the integer {value} does not fit int64 or any other integer dtype; expected "
                         "-2**63 <= value < 2**64 (or give a float)")
    raise ValueError(f"R.const: the integer {value} does not fit int32, the dtype of an integer constant without "
                     f"one (as in TVM); expected -2**31 <= value < 2**31, or give dtype='{wider}'")


def _narrow(arr: np.ndarray, dtype: str) -> np.ndarray:
    """``arr`` (int64 or float64) as ``dtype`` (int32 or float32), refusing a change other than a float's rounding:
    an integer outside int32 (it would wrap), a finite float beyond float32 (it would become inf)."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = arr.astype(to_numpy(dtype))
    bad = np.isinf(out) & np.isfinite(arr) if arr.dtype.kind == "f" else out != arr
    if not bad.any():
        return out
    shown = arr[bad].flat[0].item()
    if arr.dtype.kind == "f":
        raise ValueError(f"R.const: {shown!r} overflows float32 (largest {np.finfo(np.float32).max:.4g}); expected a "
                         "float32 value, or give dtype='float64'")
    raise ValueError(f"R.const: the integer {shown} does not fit int32, the dtype of an integer constant without "
                     "one (as in TVM); expected -2**31 <= value < 2**31, or give dtype='int64'")


@dataclass(frozen=True, eq=False, repr=False)
class ShapeExpr(Expr):
    """A shape value: ``R.shape([n, 4])``. As in TVM, it may hold reshape's placeholder ``-1`` ("infer this dim":
    ``op.reshape(x, ShapeExpr([-1]))``, as ``R.reshape(x, R.shape([-1]))`` reads); such a value is no shape, so its
    struct info gives only its length."""

    values: tuple[Dim, ...]
    struct_info: Optional[StructInfo] = None
    span: Optional[Span] = _span()

    def __post_init__(self):
        given = self.values
        placeholders = [i for i, d in enumerate(given) if isinstance(d, (int, np.integer)) and not isinstance(d, bool)
                        and d == -1] if isinstance(given, (list, tuple, np.ndarray)) else []
        if placeholders:  # (the other dims are checked as any shape's)
            checked = make_shape([0 if i in placeholders else d for i, d in enumerate(given)], "ShapeExpr")
            values = tuple(-1 if i in placeholders else d for i, d in enumerate(checked))
            object.__setattr__(self, "values", values)
            object.__setattr__(self, "struct_info", ShapeStructInfo(ndim=len(values)))
            return
        object.__setattr__(self, "values", make_shape(given, "ShapeExpr"))
        object.__setattr__(self, "struct_info", ShapeStructInfo(self.values))


@dataclass(frozen=True, eq=False, repr=False)
class PrimValue(Expr):
    """A scalar that is not a tensor: ``R.prim_value(3)``."""

    value: Union[int, float, Dim]
    dtype: str = "int64"
    struct_info: Optional[StructInfo] = None
    span: Optional[Span] = _span()

    def __post_init__(self):
        check_dtype(self.dtype, "PrimValue")
        if self.value is None:
            raise ValueError("PrimValue: a value is needed (a number, or a size variable for an integer dtype)")
        check_prim_float(self.dtype, self.value, "PrimValue")
        object.__setattr__(self, "struct_info", PrimStructInfo(self.dtype, self.value))


@dataclass(frozen=True, eq=False, repr=False)
class StringImm(Expr):
    """A string literal argument."""

    value: str
    struct_info: Optional[StructInfo] = field(default_factory=ObjectStructInfo)
    span: Optional[Span] = _span()


# ---------------------------------------------------------------------------------------------------------
# compound expressions

@dataclass(frozen=True)
class ExternFunc:
    """The callee of ``R.call_packed("name", *args, sinfo_args=...)`` (TVM's ``ExternFunc``): a function of the
    host, found by name when the call runs (``relax_mlir.register_func``), returning ``ret`` (``R.Object`` unless
    the call says). Like an op it is not an expression; a call of it is impure. Only the reference interpreter
    runs such calls: compiled code cannot call back into Python."""

    global_symbol: str
    ret: StructInfo = field(default_factory=ObjectStructInfo)

    @property
    def name(self) -> str:
        return f"call_packed({self.global_symbol!r})"

    def infer_struct_info(self, args, attrs) -> StructInfo:
        return self.ret


@dataclass(frozen=True, eq=False, repr=False)
class Call(Expr):
    """A call of an op (``op`` is an :class:`relax_mlir.op.Op`) or of a module function (a ``GlobalVar``).

    ``attrs`` holds the op's non-tensor arguments (``axis``, ``keepdims``, ...); treat it as read-only.
    """

    op: Any
    args: tuple[Expr, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    struct_info: Optional[StructInfo] = None
    span: Optional[Span] = _span()

    def __post_init__(self):
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "attrs", dict(self.attrs))
        for i, a in enumerate(self.args):
            if not isinstance(a, Expr):
                raise TypeError(f"Call of {getattr(self.op, 'name', self.op)}: argument {i} must be an Expr, "
                                f"got {type(a).__name__}")


@dataclass(frozen=True, eq=False, repr=False)
class Tuple(Expr):
    """A tuple of expressions: ``(a, b)`` in the text format."""

    fields: tuple[Expr, ...]
    struct_info: Optional[StructInfo] = None
    span: Optional[Span] = _span()

    def __post_init__(self):
        object.__setattr__(self, "fields", tuple(self.fields))
        if self.struct_info is None and all(f.struct_info is not None for f in self.fields):
            object.__setattr__(self, "struct_info", TupleStructInfo(f.struct_info for f in self.fields))


@dataclass(frozen=True, eq=False, repr=False)
class TupleGetItem(Expr):
    """The ``index``-th field of a tuple: ``t[0]`` in the text format."""

    tuple_value: Expr
    index: int
    struct_info: Optional[StructInfo] = None
    span: Optional[Span] = _span()

    def __post_init__(self):
        if isinstance(self.index, np.integer):
            object.__setattr__(self, "index", int(self.index))
        if not isinstance(self.index, int) or isinstance(self.index, bool):  # (t[True] printed, as TVM refuses)
            raise TypeError(f"TupleGetItem: the index must be an int, got {self.index!r}")
        sinfo = self.tuple_value.struct_info
        if self.struct_info is None and sinfo is not None:
            if not isinstance(sinfo, TupleStructInfo):
                raise TypeError(f"TupleGetItem: {self.tuple_value} is not a tuple (its struct info is {sinfo})")
            if not -len(sinfo.fields) <= self.index < len(sinfo.fields):
                raise IndexError(f"TupleGetItem: index {self.index} out of range for a tuple of "
                                 f"{len(sinfo.fields)} fields")
            object.__setattr__(self, "struct_info", sinfo.fields[self.index])
        if self.index < 0 and sinfo is not None:
            object.__setattr__(self, "index", self.index + len(sinfo.fields))


# ---------------------------------------------------------------------------------------------------------
# bindings and blocks

@dataclass(frozen=True, eq=False, repr=False)
class Binding:
    """Base of the two binding kinds."""

    var: Var


@dataclass(frozen=True, eq=False, repr=False)
class VarBinding(Binding):
    """``var = value``."""

    value: Expr
    span: Optional[Span] = _span()


@dataclass(frozen=True, eq=False, repr=False)
class MatchCast(Binding):
    """``var = R.match_cast(value, struct_info)``: a checked refinement of ``value``'s struct info.

    Size variables in ``struct_info`` that are not yet defined get bound to the value's dims.
    """

    value: Expr
    struct_info: StructInfo
    span: Optional[Span] = _span()


@dataclass(frozen=True, eq=False, repr=False)
class BindingBlock:
    """A sequence of bindings, possibly with side effects."""

    bindings: tuple[Binding, ...]

    def __post_init__(self):
        object.__setattr__(self, "bindings", tuple(self.bindings))


@dataclass(frozen=True, eq=False, repr=False)
class DataflowBlock(BindingBlock):
    """A side-effect-free block (``with R.dataflow():``); its ``DataflowVar``s do not escape it."""


@dataclass(frozen=True, eq=False, repr=False)
class SeqExpr(Expr):
    """Blocks of bindings followed by a result expression: a function's body."""

    blocks: tuple[BindingBlock, ...]
    body: Expr
    struct_info: Optional[StructInfo] = None
    span: Optional[Span] = _span()

    def __post_init__(self):
        object.__setattr__(self, "blocks", _merge_plain_blocks(self.blocks))
        if self.struct_info is None:
            object.__setattr__(self, "struct_info", self.body.struct_info)


def _merge_plain_blocks(blocks) -> tuple:
    """Adjacent plain binding blocks are one block (the text format cannot tell them apart), and empty
    blocks are nothing: a normal form every constructor of a SeqExpr gets for free."""
    out: list = []
    for block in blocks:
        if not block.bindings:
            continue
        if out and type(block) is BindingBlock and type(out[-1]) is BindingBlock:
            out[-1] = BindingBlock(out[-1].bindings + block.bindings)
        else:
            out.append(block)
    return tuple(out)


@dataclass(frozen=True, eq=False, repr=False)
class If(Expr):
    """``R.If``: the value of ``true_branch`` when ``cond`` (a 0-d bool tensor) holds, else of ``false_branch``; only
    the chosen branch runs. The branches are ``SeqExpr``s whose bindings are their own (not visible after the If); a
    branch given as another expression is made one (``If(c, x, y)``), as TVM's normaliser does. The struct info is
    the least upper bound of the branches' (``struct_info_lca``), each first erased of the sizes its own
    ``R.match_cast``s define, which mean nothing outside it. The text format writes an If bound to ``y`` as TVM's::

        if cond:
            ...
            y = value_if_true
        else:
            ...
            y = value_if_false
    """

    cond: Expr
    true_branch: Expr
    false_branch: Expr
    struct_info: Optional[StructInfo] = None
    span: Optional[Span] = _span()

    def __post_init__(self):
        for what in ("cond", "true_branch", "false_branch"):
            if not isinstance(getattr(self, what), Expr):
                raise TypeError(f"If: {what} must be an Expr, got {type(getattr(self, what)).__name__}")
            if what != "cond" and not isinstance(getattr(self, what), SeqExpr):
                object.__setattr__(self, what, SeqExpr([], getattr(self, what)))
        if self.struct_info is None:
            sides = [branch_struct_info(b) for b in (self.true_branch, self.false_branch)]
            if all(s is not None for s in sides):
                object.__setattr__(self, "struct_info", struct_info_lca(*sides))


def if_condition_problem(cond: Expr) -> Optional[str]:
    """Why ``cond`` cannot be an If's condition, or None. A 0-d bool tensor (``R.Tensor((), "bool")``, TVM's
    spelling) or an ``R.Prim("bool")`` can; a value whose struct info leaves that open (``R.Object``, a bool tensor of
    unknown rank) is checked when it runs. Integer conditions (which TVM's VM reads as ``!= 0``) are refused: say
    ``R.not_equal(c, 0)``."""
    sinfo = cond.struct_info
    if sinfo is None or isinstance(sinfo, ObjectStructInfo):
        return None
    if isinstance(sinfo, TensorStructInfo) and sinfo.dtype == "bool" and sinfo.ndim in (0, -1):
        return None
    if isinstance(sinfo, PrimStructInfo) and sinfo.dtype == "bool":
        return None
    from .printer import format_struct_info  # local: the printer imports this module

    return (f'the condition of an R.If must be a 0-d bool tensor (R.Tensor((), "bool")) or an R.Prim("bool"), got '
            f"{format_struct_info(sinfo)}")


def branch_struct_info(branch: "SeqExpr", sinfo: Optional[StructInfo] = None) -> Optional[StructInfo]:
    """A branch's result struct info (``sinfo``, by default the branch's own) as seen after the If: the sizes the
    branch's own match_casts define erased."""
    sinfo = branch.struct_info if sinfo is None else sinfo
    if sinfo is None:
        return None
    local = set().union(*(defined_size_vars(b.struct_info) for b in _bindings_within(branch)
                          if isinstance(b, MatchCast)))
    return erase_to_well_defined(sinfo, free_vars(sinfo) - local) if local else sinfo


def _bindings_within(seq: "SeqExpr"):
    """Every binding of ``seq``, those of the branches of Ifs in it included."""
    for block in seq.blocks:
        for b in block.bindings:
            yield b
            if isinstance(b.value, If):
                yield from _bindings_within(b.value.true_branch)
                yield from _bindings_within(b.value.false_branch)


#: The attribute that marks a function ``@R.function(private=True)``: internal to its module (no
#: ``global_symbol``), whether or not another function calls it. The printer writes it as the decorator's option.
PRIVATE_ATTR = "relax_mlir.private"


@dataclass(frozen=True, eq=False, repr=False)
class Function(Expr):
    """A Relax function: parameters, a body (a ``SeqExpr``), its return struct info and attributes."""

    params: tuple[Var, ...]
    body: Expr
    ret_struct_info: Optional[StructInfo] = None
    attrs: Mapping[str, Any] = field(default_factory=dict)
    is_pure: bool = True
    struct_info: Optional[StructInfo] = None
    span: Optional[Span] = _span()
    #: The name it was defined with (``@R.function def f``), which a standalone function prints with; not part of
    #: the function (structural equality ignores it; a module names its functions by their GlobalVars).
    name_hint: str = ""

    def __post_init__(self):
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "attrs", dict(self.attrs))
        for p in self.params:
            if not isinstance(p, Var) or isinstance(p, DataflowVar):
                raise TypeError(f"Function: parameters must be Vars, got {p!r}")
        if self.ret_struct_info is None:
            # As TVM's Function: the body's result erased to the sizes the parameters define (a size only the
            # body's R.match_cast defines is no size of the caller's), as the parser and the BlockBuilder infer it.
            from .block_builder import function_result_struct_info  # local: block_builder imports this module

            ret = function_result_struct_info(self.params, self.body)
            object.__setattr__(self, "ret_struct_info", ret or ObjectStructInfo())
        object.__setattr__(self, "struct_info",
                           FuncStructInfo([p.struct_info or ObjectStructInfo() for p in self.params],
                                          self.ret_struct_info))

    def with_attr(self, key: str, value) -> "Function":
        """A copy of the function with one more (or a changed) attribute."""
        return self.with_attrs({key: value})

    def with_attrs(self, attrs: Mapping[str, Any]) -> "Function":
        return Function(self.params, self.body, self.ret_struct_info, {**self.attrs, **attrs}, self.is_pure,
                        span=self.span, name_hint=self.name_hint)

    def without_attr(self, key: str) -> "Function":
        attrs = {k: v for k, v in self.attrs.items() if k != key}
        return Function(self.params, self.body, self.ret_struct_info, attrs, self.is_pure, span=self.span,
                        name_hint=self.name_hint)

    @property
    def blocks(self) -> Sequence[BindingBlock]:
        return self.body.blocks if isinstance(self.body, SeqExpr) else ()

    @property
    def is_private(self) -> bool:
        """Declared ``@R.function(private=True)`` (see ``PRIVATE_ATTR``)."""
        return bool(self.attrs.get(PRIVATE_ATTR))

    def script(self, name: Optional[str] = None, *, show_meta: bool = False) -> str:
        """The function in the text format (``show_meta``, TVM's option, changes nothing: constants are printed
        in full)."""
        from .module import _check_flag
        from .printer import format_function

        _check_flag("script", "show_meta", show_meta)
        if name is not None and not _is_name(name):
            raise ValueError(f"Function.script: {name!r} is not a Python identifier (the text format writes it as "
                             "the function's def name)")
        # a global_symbol that is no identifier ("my func") stays in R.func_attr; the def takes the next name
        name = name or next((n for n in (self.attrs.get("global_symbol"), self.name_hint) if _is_name(n)), "main")
        return format_function(self, name)

    def show(self, *, black_format: bool = False, show_meta: bool = False) -> None:
        """Print :meth:`script` (TVM's ``black_format`` is accepted; the layout already is black's)."""
        from .module import _check_flag

        _check_flag("show", "black_format", black_format)
        print(self.script(show_meta=show_meta))

    def __str__(self) -> str:
        return self.script()


def _is_name(name: object) -> bool:
    """Whether ``name`` can be a function's name in the text format (a Python identifier, not a keyword)."""
    import keyword

    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)
