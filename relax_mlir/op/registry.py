"""The op registry: one :class:`Op` record per op, holding everything about it.

A record has the op's name, its tensor inputs and attributes with defaults, struct-info inference, the NumPy
reference, the gradient rule and the MLIR lowering (by reference: ``op/`` never imports MLIR). Records are frozen:
what a record says does not depend on what was imported before. Calling a record builds a ``Call``:
``relax_mlir.op.add(a, b)``. Nothing outside the record matches on the op's name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from ..ir import sym
from ..ir.attrs import REQUIRED, freeze_attr  # noqa: F401  (REQUIRED re-exported: op records name it)
from ..ir.expr import Call, Expr, Tuple
from ..ir.struct_info import StructInfo, TensorStructInfo, TupleStructInfo
from ..ir.sym import Dim, SymDim

NOT_DIFFERENTIABLE = "not differentiable"  # gradient slot value for ops with integer/boolean outputs
# Gradient slot value for ops that only appear inside gradients (``relax.grad.*_backward``): differentiating
# them again (a second-order gradient) is not supported, and the Gradient pass says so.
SECOND_ORDER_UNSUPPORTED = "second-order gradient not supported"


class InferError(ValueError):
    """Raised by inference helpers; the op record prefixes its name to the message."""


def fail(message: str):
    raise InferError(message)


@dataclass
class Sample:
    """An example call for the registry tests.

    * ``args``: the inputs' struct info (a list for a tuple input); ``attrs``: the attributes given.
    * ``low``/``high``: the range of the random inputs.
    * ``make(rng, sinfos, attrs) -> arrays``: makes the inputs instead, from a NumPy ``rng``, the inputs'
      concrete struct info and the call's completed attributes with size variables bound (``take``'s indices
      must be valid for its ``axis``).
    * ``sizes``: bindings for size variables that only the attributes mention (``zeros(("n", 4))`` has
      no inputs to bind ``n``), added to those the test picks for the inputs' size variables.
    """

    args: Sequence[Any]
    attrs: dict = field(default_factory=dict)
    low: float = -2.0
    high: float = 2.0
    make: Optional[Callable[[Any, list, dict], list]] = None
    sizes: dict = field(default_factory=dict)


@dataclass
class BadSample:
    """A call the op must refuse, with a regular expression its error message matches."""

    args: Sequence[Any]
    attrs: dict
    error: str


@dataclass(frozen=True, eq=False)
class Elementwise:
    """The lowering of an elementwise op, given by its scalar function (``op/`` never imports MLIR).

    ``scalar(b, *xs, **attrs)`` computes one element from the inputs' elements with the scalar builder ``b`` the
    backend passes (``relax_mlir.backend.legalize.elementwise.ScalarBuilder``: ``b.add``, ``b.exp``,
    ``b.cmp("lt", x, y)``, ``b.select``, ... each dispatching on the element type; plain numbers become constants
    of the other operand's type), with the call's attributes as keywords. ``widen`` computes half floats (f16,
    bf16) in f32 and rounds once at the end, as the NumPy references (computing in float64) do.
    Example: ``Elementwise(lambda b, x: b.max(x, 0))`` is ReLU for any numeric dtype."""

    scalar: Callable[..., Any]
    widen: bool = True


@dataclass(frozen=True, eq=False)
class Op:
    """One op: name, tensor inputs, attributes, inference, reference and the later-filled slots.

    * ``inputs``: names of the tensor arguments; the last ``num_optional`` may be left out.
      With ``tuple_input`` the (single) first input is a tuple of tensors (``concat``).
    * ``attrs``: attribute names in positional order with their defaults (``REQUIRED`` if none).
    * ``canonicalize(attrs) -> attrs``: rewrites the attributes into the one form the call stores (conv2d's
      ``padding=1`` becomes ``(1, 1, 1, 1)``, a shape's ``"n"`` a size variable), so equal calls compare
      equal and inference, gradient and lowering see one spelling. It must be idempotent.
    * ``size_attrs``: attributes whose entries may be sizes, symbolic ones included (``strided_slice``'s ``begin``
      and ``end``); the export passes those entries as ``index`` operands of the dialect op (as a ``shape``
      attribute's dynamic dims), and the lowering reads them back as values.
    * ``check_attrs(attrs)``: validates the canonical attributes. Both raise via :func:`fail` (or
      ``ValueError``); the record prefixes its name.
    * ``infer(args_sinfo, attrs) -> StructInfo``: raises via :func:`fail` with a message that says what was
      expected; the record prefixes its name.
    * ``reference(*arrays, **attrs)``: NumPy semantics, returning arrays of exactly the inferred dtype. Its
      attributes hold no size variables: callers bind them first with :func:`substitute_attrs`.
      ``check_sizes(result_sinfo, attrs, sizes) -> message | None``: what the lowering checks at run time that the
      bound attributes alone do not tell the reference (``arange``'s length between sizes is not clamped at 0):
      the interpreter asks it before ``reference``, with the call's inferred struct info and the sizes' values.
    * ``gradient(orig, call, grad) -> list``: the vector-Jacobian product. ``orig`` is the variable bound to the
      call's result and ``grad`` its adjoint (same struct info; a ``Tuple`` expression for a tuple result).
      It returns one entry per argument of the call: an expression with that argument's struct info (built
      with op constructors; nested calls are fine, the Gradient pass binds them), a ``Tuple`` of such for a
      tuple argument, or ``None`` where no gradient flows. ``NOT_DIFFERENTIABLE`` marks ops whose result
      carries no gradient (integer or boolean outputs); ``None`` means no rule is written yet.
    * ``no_grad_inputs``: names of inputs gradients never flow into (``where``'s condition, ``take``'s
      indices); integer and boolean inputs never receive gradients either.
    * ``lowering``: how the MLIR backend lowers the op: ``"family:function"`` names a function
      ``(lc, op) -> values`` in ``relax_mlir.backend.legalize.<family>`` (resolved when first used), or an
      :class:`Elementwise` for elementwise ops. ``decompose(call) -> Expr``: for composites, rewritten into other ops
      before export (they have no dialect op). ``export_rewrite(call) -> Expr | None``: a rewrite the export applies
      to some calls of a lowered op (``concat(t, axis=None)``), ``None`` to export the call as it is.
    * ``unsigned``: how the MLIR backend computes the op on unsigned integer tensors (``backend/unsigned.py``):
      ``"agnostic"`` (its lowering does the same on the bits whatever the sign: ``add``, layout ops),
      ``"aware"`` (its lowering reads the unsigned attributes the export sets: comparisons, division, ``max``), or
      ``None``: the export refuses unsigned tensors with a clear error. ``index_inputs``: inputs read as indices,
      which must be signed even where the op's data may be unsigned (``take``'s ``indices``).
    """

    name: str
    inputs: tuple[str, ...]
    infer: Callable[[list, dict], StructInfo]
    reference: Callable[..., Any]
    attrs: dict = field(default_factory=dict)
    num_optional: int = 0
    tuple_input: bool = False
    canonicalize: Optional[Callable[[dict], dict]] = None
    check_attrs: Optional[Callable[[dict], None]] = None
    size_attrs: tuple[str, ...] = ()
    gradient: Any = None
    no_grad_inputs: tuple[str, ...] = ()
    lowering: Any = None
    decompose: Any = None
    export_rewrite: Optional[Callable[[Any], Any]] = None
    check_sizes: Optional[Callable[[StructInfo, dict, dict], Optional[str]]] = None
    pure: bool = True
    unsigned: Optional[str] = None
    index_inputs: tuple[str, ...] = ()
    samples: list = field(default_factory=list)
    bad_samples: list = field(default_factory=list)
    doc: str = ""

    @property
    def compilable(self) -> bool:
        """Whether the MLIR backend compiles the op by default: it has a lowering or a decomposition."""
        return self.lowering is not None or self.decompose is not None

    @property
    def short_name(self) -> str:
        """The name without the ``relax.`` prefix: ``nn.relu``; the text format writes ``R.nn.relu``."""
        return self.name[len("relax."):] if self.name.startswith("relax.") else self.name

    def arity_problem(self, count: int) -> str:
        """Why ``count`` positional arguments are too many for this op (empty when they are not)."""
        names = (*self.inputs, *self.attrs)
        if count <= len(names):
            return ""
        return f"{self.name}: too many arguments: got {count}, takes at most {len(names)} ({', '.join(names)})"

    def bind_arguments(self, args: Sequence[Any], kwargs: dict) -> tuple[list, dict]:
        """Split positional/keyword arguments into tensor arguments and a full attribute dict."""
        args = list(args)
        n_in = len(self.inputs)
        tensors, rest = args[:n_in], args[n_in:]
        # Optional tensor inputs may also be given by keyword, or be None.
        for i, name in enumerate(self.inputs):
            if name in kwargs:
                if i < len(tensors):
                    raise TypeError(f"{self.name}: input {name!r} given twice")
                while len(tensors) < i:
                    tensors.append(None)
                tensors.append(kwargs.pop(name))
        while tensors and tensors[-1] is None:
            tensors.pop()
        required = n_in - self.num_optional
        if len(tensors) < required or any(t is None for t in tensors):
            got = len([t for t in tensors if t is not None])
            raise TypeError(f"{self.name}: expected {required} tensor argument(s) "
                            f"({', '.join(self.inputs[:required])}), got {got}")
        names = list(self.attrs)
        problem = self.arity_problem(len(args))
        if problem:
            raise TypeError(problem)
        attrs = dict(zip(names, rest))
        for key, value in kwargs.items():
            if key in attrs:
                raise TypeError(f"{self.name}: attribute {key!r} given twice")
            attrs[key] = value
        return tensors, self.complete_attrs(attrs)

    def complete_attrs(self, attrs: dict) -> dict:
        """Check attribute names, fill in defaults, and validate the values."""
        for key in attrs:
            if key not in self.attrs:
                raise TypeError(f"{self.name}: unknown attribute {key!r}; expected one of "
                                f"{', '.join(self.attrs) or 'no attributes'}")
        attrs = dict(attrs)
        for key, default in self.attrs.items():
            if key not in attrs:
                if default is REQUIRED:
                    raise TypeError(f"{self.name}: missing required attribute {key!r}")
                attrs[key] = default
        return self.normalize_attrs(attrs)

    def normalize_attrs(self, attrs: dict) -> dict:
        """Freeze the values (lists become tuples, NumPy scalars Python ones), canonicalize, then validate."""
        attrs = {k: freeze_attr(v) for k, v in attrs.items()}
        try:
            if self.canonicalize is not None:
                attrs = self.canonicalize(attrs)
            if self.check_attrs is not None:
                self.check_attrs(attrs)
        except ValueError as exc:  # InferError included
            raise ValueError(f"{self.name}: {exc}") from None
        return attrs

    def infer_struct_info(self, args: Sequence[Expr], attrs: dict) -> Optional[StructInfo]:
        """Infer the call's struct info from its arguments', or ``None`` if some argument's is unknown."""
        sinfos = [a.struct_info for a in args]
        if any(s is None for s in sinfos):
            return None
        for i, s in enumerate(sinfos):
            want_tuple = self.tuple_input and i == 0
            if want_tuple and not (isinstance(s, TupleStructInfo)
                                   and all(isinstance(f, TensorStructInfo) for f in s.fields)):
                raise TypeError(f"{self.name}: argument {self.inputs[i]!r} must be a tuple of tensors, got {s}")
            if not want_tuple and not isinstance(s, TensorStructInfo):
                raise TypeError(f"{self.name}: argument {self.inputs[i]!r} must be a tensor, got {s}")
        args_sinfo = [list(s.fields) if self.tuple_input and i == 0 else s for i, s in enumerate(sinfos)]
        try:
            return self.infer(args_sinfo, attrs)
        except InferError as exc:
            raise ValueError(f"{self.name}: {exc}") from None

    def __call__(self, *args, **kwargs) -> Call:
        tensors, attrs = self.bind_arguments(args, kwargs)
        # In an elementwise op of several operands, a Python number takes the dtype of the (first non-bool) tensor
        # beside it, op.add(x_int64, 1) and op.where(c, x, 0), as ``x + 1`` does; elsewhere it is R.const's.
        partner = None
        if isinstance(self.lowering, Elementwise) and len(self.inputs) > 1:
            partner = next((t for t in tensors if isinstance(t, Expr) and isinstance(t.struct_info, TensorStructInfo)
                            and t.struct_info.dtype and t.struct_info.dtype != "bool"), None)
        exprs = []
        for i, t in enumerate(tensors):
            if self.tuple_input and i == 0 and isinstance(t, (list, tuple)):
                t = Tuple([_as_expr(x, self.name) for x in t])
            exprs.append(_as_expr(t, self.name, partner))
        return Call(self, exprs, attrs, self.infer_struct_info(exprs, attrs))

    def __repr__(self) -> str:
        return f"Op({self.name})"


def _as_expr(value, op_name: str, partner: Optional[Expr] = None) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, (np.ndarray, np.generic, float, int, bool)):
        from ..ir.expr import const, lift_scalar

        return const(value) if partner is None else lift_scalar(value, partner)
    raise TypeError(f"{op_name}: expected a Relax expression, got {type(value).__name__}")


def substitute_attrs(attrs: dict, env: Mapping[str, Dim]) -> dict:
    """``attrs`` with the size variables bound in ``env`` replaced, inside tuples and dicts too.

    A dim whose variables are all bound to ints becomes an int (``sym.evaluate``); a partly bound one keeps
    its free variables. References run on the result: ``reshape(x, ("n", 4))`` with ``n = 3`` gets ``(3, 4)``.
    """
    return {k: _substitute_value(v, env) for k, v in attrs.items()}


def _substitute_value(value, env: Mapping[str, Dim]):
    if isinstance(value, SymDim):
        return _substitute_dim(value, env)
    if isinstance(value, tuple):
        return tuple(_substitute_value(v, env) for v in value)
    if isinstance(value, dict):
        return {k: _substitute_value(v, env) for k, v in value.items()}
    return value


def _substitute_dim(d: SymDim, env: Mapping[str, Dim]) -> Dim:
    if d.free_vars() <= env.keys() and all(isinstance(env[v], int) for v in d.free_vars()):
        return sym.evaluate(d, env)
    return sym.substitute(d, lambda v: env.get(v, sym.SizeVar(v)))


_REGISTRY: dict[str, Op] = {}


def register(op: Op) -> Op:
    """Add an op record to the registry (its name must be new) and return it."""
    if op.name in _REGISTRY:
        raise ValueError(f"op {op.name} is registered twice")
    if op.unsigned not in (None, "agnostic", "aware"):
        raise ValueError(f"op {op.name}: unsigned must be None, 'agnostic' or 'aware', got {op.unsigned!r}")
    unknown = [name for name in op.index_inputs if name not in op.inputs]
    if unknown:
        raise ValueError(f"op {op.name}: index_inputs {unknown} are not among its inputs {list(op.inputs)}")
    _REGISTRY[op.name] = op
    return op


def get_op(name: str) -> Op:
    """The record of ``name`` (``"relax.add"`` or ``"add"``)."""
    key = name if name.startswith("relax.") else "relax." + name
    if key not in _REGISTRY:
        raise KeyError(f"no op named {name!r} is registered")
    return _REGISTRY[key]


def list_ops() -> list[Op]:
    """All registered op records, in registration order."""
    return list(_REGISTRY.values())
