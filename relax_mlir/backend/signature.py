"""What a compiled function accepts and returns: ``TensorSpec`` and ``FunctionSignature``.

A dimension is an ``int`` (static), or a ``str``: in a parameter, a symbol name (``"n"``) bound from the
argument's shape, or an expression of symbols checked against it; in a result, an expression of the
parameters' symbols (``"n"``, ``"2*n + 1"``, ``"n // 2"``, ``"max(n, m)"``) that gives the size of the output
the runtime allocates. Example::

    FunctionSignature("main",
                      params=(TensorSpec(("n", 784), "float32", "x"), TensorSpec((784, 128), "float32", "w")),
                      results=(TensorSpec(("n", 128), "float32", "y"),))

``signature_from_func`` derives one from a ``func.func`` on tensors; a dynamic (``?``) parameter dimension
gets its own symbol (``x_0`` for axis 0 of ``x``), and a dynamic result dimension cannot be derived: the
caller must give the signature.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import os
import re
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from ..ir.dtype import BFLOAT16, to_numpy
from ..ir.struct_info import StructInfo, TensorStructInfo, TupleStructInfo

if TYPE_CHECKING:  # MLIR is imported where used: the call path runs without it
    from mlir import ir

Dim = int | str

#: MLIR element type -> the NumPy dtype derived for it. Booleans (i1) are stored one per byte, like NumPy's.
ELEMENT_DTYPES: dict[str, np.dtype] = {
    "f16": np.dtype(np.float16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "i1": np.dtype(np.bool_),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "index": np.dtype(np.int64),
}
if BFLOAT16 is not None:
    ELEMENT_DTYPES["bf16"] = BFLOAT16

#: Other NumPy dtypes with the same storage as an MLIR element type (signless integers hold unsigned too).
_ALSO_ACCEPTED: dict[str, tuple[np.dtype, ...]] = {
    "i8": (np.dtype(np.uint8),),
    "i16": (np.dtype(np.uint16),),
    "i32": (np.dtype(np.uint32),),
    "i64": (np.dtype(np.uint64),),
    "index": (np.dtype(np.uint64),),
}

_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*\Z")
_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
_CALLS = {"min": min, "max": max}


def to_dtype(dtype: Any) -> np.dtype:
    """A NumPy dtype from a name or dtype-like (``"float32"``, ``"bfloat16"``, ``np.int8``, ``bool``)."""
    return to_numpy(dtype) if isinstance(dtype, str) and dtype == "bfloat16" else np.dtype(dtype)


def is_symbol(dim: Dim) -> bool:
    """Whether a dimension is a plain symbol name (as opposed to an int or an expression)."""
    return isinstance(dim, str) and bool(_IDENT.match(dim)) and dim not in _CALLS


class ShapeExpr:
    """A dimension expression over symbols, parsed once with ``ast`` (ints, symbols, + - * // %, min, max)."""

    def __init__(self, text: str) -> None:
        self.text = text
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as err:
            raise ValueError(f"shape expression {text!r}: {err.msg}") from None
        self.symbols: frozenset[str] = frozenset()
        names: set[str] = set()
        for node in ast.walk(tree):
            self._check(node, names)
        self.symbols = frozenset(names)
        self._tree = tree
        self._code = compile(tree, f"<shape {text}>", "eval")

    def _check(self, node: ast.AST, names: set[str]) -> None:
        ok = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.USub, ast.Load, *_BINOPS)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return
        if isinstance(node, ast.Name):
            if node.id not in _CALLS:
                names.add(node.id)
            return
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALLS:
            return
        if not isinstance(node, ok):
            raise ValueError(f"shape expression {self.text!r}: {type(node).__name__} is not allowed "
                             "(use ints, symbols, + - * // %, min, max)")

    def __call__(self, env: Mapping[str, int]) -> int:
        return int(eval(self._code, {"__builtins__": {}, **_CALLS}, dict(env)))  # noqa: S307 - checked AST

    def source(self, prefix: str) -> str:
        """The expression as Python source with every symbol ``s`` renamed ``prefix + s`` (for generated code)."""

        class Rename(ast.NodeTransformer):
            def visit_Name(self, node: ast.Name) -> ast.Name:
                return node if node.id in _CALLS else ast.Name(prefix + node.id, ast.Load())

        return "(" + ast.unparse(Rename().visit(ast.parse(ast.unparse(self._tree), mode="eval"))) + ")"

    def __repr__(self) -> str:
        return f"ShapeExpr({self.text!r})"


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """One tensor parameter or result: its shape (``int`` / symbol / expression per axis), dtype and name."""

    shape: tuple[Dim, ...]
    dtype: Any
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(self.shape))
        object.__setattr__(self, "dtype", to_dtype(self.dtype))
        for d in self.shape:
            if isinstance(d, bool) or not isinstance(d, (int, str)) or (isinstance(d, int) and d < 0):
                raise ValueError(f"TensorSpec {self.name!r}: dimension {d!r} must be an int >= 0 or a str")
            if isinstance(d, str) and not is_symbol(d):
                ShapeExpr(d)  # fail early on a malformed expression

    def symbols(self) -> frozenset[str]:
        """Every symbol this spec's dimensions mention."""
        out: set[str] = set()
        for d in self.shape:
            if isinstance(d, str):
                out |= {d} if is_symbol(d) else ShapeExpr(d).symbols
        return frozenset(out)

    def describe(self) -> str:
        """``(n, 784) float32``: the shape and dtype as messages and reprs show them."""
        return f"({', '.join(map(str, self.shape))}{',' if len(self.shape) == 1 else ''}) {self.dtype.name}"


@dataclasses.dataclass(frozen=True)
class FunctionSignature:
    """The parameters and results of one compiled function, in order. Results become out-parameters."""

    name: str
    params: tuple[TensorSpec, ...]
    results: tuple[TensorSpec, ...]
    #: The function's own tensors (bindings) that may be larger than a parameter or a result, with sizes the
    #: parameters bind: checked against the memory there is before a call (``scratch_bytes``), a refusal before
    #: any work; compiled code also checks each of its allocations (``alloc_checks.py``: a ``MemoryError`` after).
    scratch: tuple[TensorSpec, ...] = ()

    def __post_init__(self) -> None:
        params = tuple(p if p.name else dataclasses.replace(p, name=f"arg{i}") for i, p in enumerate(self.params))
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "results", tuple(self.results))
        object.__setattr__(self, "scratch", tuple(self.scratch))
        bound = {d for p in params for d in p.shape if is_symbol(d)}
        for where, specs in (("parameter", params), ("result", self.results), ("tensor", self.scratch)):
            for i, spec in enumerate(specs):
                free = spec.symbols() - bound
                if free:
                    raise ValueError(f"{self.name}: {where} {spec.name or i!r} (#{i}) uses symbols "
                                     f"{sorted(free)} that no parameter dimension binds")

    @property
    def is_static(self) -> bool:
        """True when every dimension of every parameter and result is an int."""
        return all(isinstance(d, int) for s in self.params + self.results for d in s.shape)


def _require_tensor(t: ir.Type, where: str) -> None:
    from mlir import ir  # lazily: runtime.load_module reads signatures without MLIR

    if not isinstance(t, ir.RankedTensorType):
        raise ValueError(f"{where}: type {t} is not a ranked tensor; only tensors cross the boundary "
                         "(use a 0-d tensor for a scalar)")


def dtype_of_element(t: ir.Type, where: str) -> np.dtype:
    """The NumPy dtype for an MLIR element type, or a ValueError naming ``where``."""
    name = str(t)
    if name not in ELEMENT_DTYPES:
        raise ValueError(f"{where}: element type {name} has no NumPy dtype here "
                         f"(supported: {', '.join(ELEMENT_DTYPES)})")
    return ELEMENT_DTYPES[name]


def check_spec_against_type(spec: TensorSpec, t: ir.Type, where: str) -> None:
    """Raise ValueError if ``spec`` cannot describe values of the MLIR tensor type ``t``."""
    from mlir import ir  # lazily: runtime.load_module reads signatures without MLIR

    _require_tensor(t, where)
    if len(spec.shape) != t.rank:
        raise ValueError(f"{where}: signature gives rank {len(spec.shape)}, the function has {t}")
    for axis, (d, ir_d) in enumerate(zip(spec.shape, t.shape)):
        if not ir.ShapedType.is_dynamic_size(ir_d) and d != ir_d:
            raise ValueError(f"{where}: signature gives dimension {axis} = {d!r}, the function has {t}")
    elem = str(t.element_type)
    natural = dtype_of_element(t.element_type, where)
    if spec.dtype != natural and spec.dtype not in _ALSO_ACCEPTED.get(elem, ()):
        raise ValueError(f"{where}: signature gives dtype {spec.dtype.name}, the function has {t}")


def signature_from_func(func_op: ir.Operation, given: FunctionSignature | None = None) -> FunctionSignature:
    """The signature of a ``func.func`` on tensors, or ``given`` after checking it against the function type."""
    from mlir import ir  # lazily: runtime.load_module reads signatures without MLIR

    name = ir.StringAttr(func_op.attributes["sym_name"]).value
    ftype = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
    if given is not None:
        for kind, specs, types in (("parameter", given.params, ftype.inputs), ("result", given.results, ftype.results)):
            if len(specs) != len(types):
                raise ValueError(f"{name}: signature has {len(specs)} {kind}s, the function has {len(types)}")
            for i, (spec, t) in enumerate(zip(specs, types)):
                check_spec_against_type(spec, t, f"{name}: {kind} {spec.name!r} (#{i})")
        return given
    params = []
    for i, t in enumerate(ftype.inputs):
        pname = f"arg{i}"
        _require_tensor(t, f"{name}: parameter {pname!r} (#{i})")
        shape = tuple(f"{pname}_{ax}" if ir.ShapedType.is_dynamic_size(d) else d for ax, d in enumerate(t.shape))
        params.append(TensorSpec(shape, dtype_of_element(t.element_type, f"{name}: parameter {pname!r}"), pname))
    results = []
    for i, t in enumerate(ftype.results):
        where = f"{name}: result #{i}"
        _require_tensor(t, where)
        if not t.has_static_shape:
            raise ValueError(f"{where} has the dynamic type {t}: pass a FunctionSignature giving its shape "
                             "in terms of the parameters' symbols")
        results.append(TensorSpec(tuple(t.shape), dtype_of_element(t.element_type, where), f"result{i}"))
    return FunctionSignature(name, tuple(params), tuple(results))


def shape_evaluator(dims: tuple[Dim, ...]) -> Callable[[Mapping[str, int]], tuple[int, ...]]:
    """A function from bound symbols to a concrete shape, for a result (or a parameter to check)."""
    parts: list[Callable[[Mapping[str, int]], int]] = []
    for d in dims:
        if isinstance(d, int):
            parts.append(lambda env, d=d: d)
        elif is_symbol(d):
            parts.append(lambda env, d=d: env[d])
        else:
            parts.append(ShapeExpr(d))
    return lambda env: tuple(p(env) for p in parts)


def scratch_bytes(specs: Sequence[TensorSpec]) -> Callable[[Mapping[str, int]], tuple[int, str]]:
    """A function from bound symbols to the largest byte size among ``specs`` and that tensor's name."""
    sized = [(shape_evaluator(spec.shape), spec.dtype.itemsize, spec.name) for spec in specs]

    def largest(env: Mapping[str, int]) -> tuple[int, str]:
        best, name = 0, ""
        for shape_of, itemsize, label in sized:
            n = itemsize
            for d in shape_of(env):
                n *= max(d, 0)
            if n > best:
                best, name = n, label
        return best, name

    return largest


@functools.lru_cache(maxsize=1)
def memory_limit() -> int:
    """The most one allocation can get here: physical memory and swap (Linux refuses a larger one), or the
    address-space limit (``ulimit -v``) if smaller."""
    limit = 1 << 62
    try:
        limit = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("SwapTotal:"):
                    limit += int(line.split()[1]) * 1024
    except (OSError, ValueError, AttributeError):
        pass
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            limit = min(limit, soft)
    except (ImportError, OSError, ValueError):
        pass
    return limit


# --- what crosses a function boundary ------------------------------------------------------------------------
class ExportError(ValueError):
    """A Relax construct the MLIR export does not support; says what and where."""


def flatten_struct_info(sinfo: StructInfo, name: str, where: str) -> list[tuple[str, TensorStructInfo]]:
    """The tensors of a (possibly nested tuple) struct info, depth-first, named ``x``, ``x[0]``, ``x[1][0]``."""
    if isinstance(sinfo, TensorStructInfo):
        return [(name, sinfo)]
    if isinstance(sinfo, TupleStructInfo):
        out = []
        for i, f in enumerate(sinfo.fields):
            out += flatten_struct_info(f, f"{name}[{i}]", where)
        return out
    raise ExportError(f"{where}: {name} has struct info {sinfo}; only tensors and tuples of tensors cross "
                      "function boundaries in the MLIR backend")
