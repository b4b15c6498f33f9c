"""``R``: the Relax namespace of the text format (``from relax_mlir.script import relax as R``).

In Python source, ``@R.function`` parses the decorated function into a ``relax_mlir.ir.Function`` (inside an
``@I.ir_module`` class it only marks it; the class decorator parses the whole class). ``R.Tensor(...)`` and
friends are struct info; ``R.matmul``, ``R.nn.relu``, ... are the op constructors, so they also build calls
directly, as ``relax_mlir.op`` does.
"""

from __future__ import annotations

import builtins
import typing
from typing import Optional, Sequence

from .. import op as _op
from ..ir.expr import PrimValue, ShapeExpr, StringImm, Tuple as _TupleExpr, const
from ..ir.struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
                              TensorStructInfo, TupleStructInfo)
from . import _vdevice
from ._source import caller_env, in_class_body, source_of

nn = _op.nn
grad = _op.grad
image = _op.image
Object = ObjectStructInfo()
Any = Object  # TVM's newer spelling of R.Object (typing's Any is typing.Any here)


#: ``R.Tensor``'s dtype when none is given (TVM's "any dtype" has no counterpart here; see the parser's).
_DEFAULT_DTYPE = "float32"
_UNSET: typing.Any = object()  # (an explicit dtype=None is refused, as the parser refuses it, not read as the default)


def Tensor(shape: Optional[Sequence] = None, dtype: str = _UNSET, vdevice: Optional[str] = None,
           ndim: int = -1) -> TensorStructInfo:
    """``R.Tensor((n, 784), "float32")``: tensor struct info; dims are ints or size-variable names. A string first
    and no dtype is the dtype, as TVM reads it: ``R.Tensor("float32", ndim=4)`` is a float32 tensor of any shape of
    rank 4. ``vdevice`` (TVM's third argument) may only name the host CPU, ``"llvm"``, the one device here: it is
    checked, not kept."""
    if isinstance(shape, builtins.str) and dtype is _UNSET:  # (str and tuple are R.str and R.tuple here)
        shape, dtype = None, shape
    if isinstance(shape, builtins.str):
        raise TypeError(f"R.Tensor: shape must be a tuple or list of dimensions, got the string {shape!r} (a dtype "
                        f"first is read as one only when no dtype= follows: R.Tensor({shape!r}, ndim=2))")
    if vdevice is not None:
        _vdevice.reference(vdevice, "R.Tensor")
    return TensorStructInfo(shape, _DEFAULT_DTYPE if dtype is _UNSET else dtype, ndim)


def Tuple(*fields: StructInfo) -> TupleStructInfo:  # noqa: N802 - TVMScript spelling
    """``R.Tuple(R.Tensor(...), ...)`` or, as TVM also takes them, ``R.Tuple([R.Tensor(...), ...])``: tuple struct
    info. A bare ``R.Tensor``/``R.Shape``/``R.Object`` field is that struct info of any shape, as in annotations."""
    if len(fields) == 1 and isinstance(fields[0], (list, builtins.tuple)):
        fields = fields[0]
    out = []
    for i, f in enumerate(fields):
        f = f() if f is Tensor or f is Shape else f
        if not isinstance(f, StructInfo):
            raise TypeError(f"R.Tuple: field {i} must be struct info (R.Tensor(...), R.Tuple(...), R.Shape(...), "
                            f"R.Prim(...), R.Object), got {type(f).__name__} {f!r:.60}; the fields are given as "
                            "arguments, R.Tuple(a, b), or as one list, R.Tuple([a, b])")
        out.append(f)
    return TupleStructInfo(out)


def Shape(values: Optional[Sequence] = None, ndim: int = -1) -> ShapeStructInfo:  # noqa: N802
    return ShapeStructInfo(values, ndim)


def Prim(dtype: str = "int64", value: typing.Any = None) -> PrimStructInfo:  # noqa: N802
    return PrimStructInfo(dtype, value)


def Callable(params: Sequence[StructInfo], ret: StructInfo) -> FuncStructInfo:  # noqa: N802
    return FuncStructInfo(params, ret)


def function(fn=None, *, pure: bool = True, private: bool = False, check_well_formed: bool = True):
    """Decorator: parse a Python function written in the text format into a Relax ``Function``. The options are
    read from the decorator's text by the parser (``check_well_formed=False``: the result is not checked, TVM's
    option)."""
    # Frames between ``in_class_body``/``caller_env`` and the decorated code: ``wrap`` only when used as
    # ``@R.function(...)`` (Python calls ``wrap`` from the class body), ``wrap`` and ``function`` when bare.
    depth = 2 if fn is None else 3

    def wrap(f):
        if in_class_body(depth=depth):
            f.__relax_function__ = True  # parsed with its @I.ir_module class
            return f
        from .parser import Parser

        text, filename, offset, margin = source_of(f)
        env = {**f.__globals__, **caller_env(depth=depth)}
        return Parser(text, filename, offset, env, evaluate=True, col_offset=margin).parse()
    return wrap(fn) if fn is not None else wrap


def dataflow():
    """``with R.dataflow():`` opens a dataflow block (meaningful only inside parsed source)."""
    raise RuntimeError("R.dataflow() is only meaningful inside an @R.function, which is parsed, not run")


def output(*vars) -> None:
    raise RuntimeError("R.output(...) is only meaningful inside an @R.function, which is parsed, not run")


def func_attr(attrs: dict) -> None:
    raise RuntimeError("R.func_attr(...) is only meaningful inside an @R.function, which is parsed, not run")


def shape(values: Sequence) -> ShapeExpr:
    return ShapeExpr(values)


def prim_value(value, dtype: str = "int64") -> PrimValue:
    return PrimValue(value, dtype)


def str(value) -> StringImm:  # noqa: A001 - TVMScript spelling
    return StringImm(value)


def tuple(*fields) -> _TupleExpr:  # noqa: A001 - TVMScript spelling
    return _TupleExpr(list(fields))


def match_cast(value, struct_info):
    raise RuntimeError("R.match_cast is only meaningful inside an @R.function; with a BlockBuilder use "
                       "bb.match_cast(value, struct_info)")


def __getattr__(name: str):
    # Every top-level op by its short name: R.matmul, R.add, R.sum, ...
    try:
        return getattr(_op, name)
    except AttributeError:
        raise AttributeError(f"R.{name}: no such op or script construct") from None


__all__ = ["Tensor", "Tuple", "Shape", "Prim", "Object", "Any", "Callable", "function", "dataflow", "output",
           "func_attr", "const", "shape", "prim_value", "str", "tuple", "match_cast", "nn", "grad", "image"]
