"""The printer: writes modules and functions in the TVMScript-style text format that the parser reads.

    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor(("n", 784), dtype="float32")) -> R.Tensor(("n", 10), dtype="float32"):
            with R.dataflow():
                lv: R.Tensor(("n", 10), dtype="float32") = R.matmul(x, R.const(...))
                R.output(lv)
            return lv

Symbolic dims are written as strings (``"n"``, ``"n * 784"``); attributes equal to their defaults are left out;
variable names are made unique per function (``x``, ``x_1``) so the text parses back to an equal module. Python
reads identifiers in NFKC form (``𝑥`` is ``x``), so variable names are written in that form and made unique in it;
a function's name is the module's key, which the printer cannot rename: one NFKC would change is refused
(``check_global_name``).
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import keyword
import math
import re
import unicodedata
from typing import Any, Optional

import numpy as np

from .dtype import from_numpy
from .expr import (PRIVATE_ATTR, BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr, ExternFunc,
                   Function, GlobalVar, If, MatchCast, PrimValue, SeqExpr, ShapeExpr, StringImm, Tuple, TupleGetItem,
                   Var, VarBinding)
from .struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
                          TensorStructInfo, TupleStructInfo)
from .attrs import REQUIRED
from .index_map import IndexMapText
from .sym import SymDim

HEADER = "# from relax_mlir.script import ir as I, relax as R"
_RESERVED = {"R", "I", "T", "cls", "np"}
_INDENT = "    "
_WIDTH = 110


_SURROGATE = re.compile("[\ud800-\udfff]")


def quote(s: str) -> str:
    """A double-quoted Python string literal. A lone surrogate (a string decoded with ``errors="surrogateescape"``)
    is written as its ``\\udcff`` escape: raw, it would make the text unencodable (not text the parser can read)."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(s, ensure_ascii=False))


def check_global_name(name: str) -> str:
    """``name`` as the text writes a function (``def name``, ``cls.name``), or a ValueError if Python would read it
    as another name: identifiers are read in NFKC form (``ﬁ`` is ``fi``), and a function's name is the module's key,
    which the printer cannot rename."""
    normal = unicodedata.normalize("NFKC", name)
    if normal != name:
        raise ValueError(f"function name {name!r} cannot be written: Python reads the identifier as {normal!r} "
                         "(NFKC normalisation); name the function in NFKC form")
    return name


def format_dim(d) -> str:
    return quote(str(d)) if isinstance(d, SymDim) else str(d)


def format_dims(dims) -> str:
    inner = ", ".join(format_dim(d) for d in dims)
    return f"({inner},)" if len(dims) == 1 else f"({inner})"


def format_struct_info(s: Optional[StructInfo]) -> str:
    """``R.Tensor((n, 4), dtype="float32")`` and friends."""
    if s is None or isinstance(s, ObjectStructInfo):
        return "R.Object"
    if isinstance(s, TensorStructInfo):
        if s.shape is None:
            return f'R.Tensor(dtype="{s.dtype}"' + (f", ndim={s.ndim})" if s.ndim != -1 else ")")
        return f'R.Tensor({format_dims(s.shape)}, dtype="{s.dtype}")'
    if isinstance(s, TupleStructInfo):
        return "R.Tuple(" + ", ".join(format_struct_info(f) for f in s.fields) + ")"
    if isinstance(s, ShapeStructInfo):
        if s.values is None:
            return "R.Shape(" + (f"ndim={s.ndim})" if s.ndim != -1 else ")")
        return "R.Shape([" + ", ".join(format_dim(d) for d in s.values) + "])"
    if isinstance(s, PrimStructInfo):
        if s.value is None:
            return f'R.Prim("{s.dtype}")'
        return f'R.Prim(value={format_literal(s.value)}, dtype="{s.dtype}")'
    if isinstance(s, FuncStructInfo):
        params = ", ".join(format_struct_info(p) for p in s.params)
        return f"R.Callable(({params}{',' if len(s.params) == 1 else ''}), {format_struct_info(s.ret)})"
    raise TypeError(f"printer: unknown struct info {type(s).__name__}")


def _format_float(v: float) -> str:
    if math.isnan(v):
        return 'float("nan")'
    if math.isinf(v):
        return 'float("inf")' if v > 0 else 'float("-inf")'
    return repr(float(v))


def format_literal(v: Any) -> str:
    """Attribute values: numbers (exactly), strings, None, tuples, dicts, dims, arrays, index maps."""
    if isinstance(v, IndexMapText):  # (a str: first)
        return f"T.index_map({v})"
    if isinstance(v, str):
        return quote(v)
    if v is None:
        return "None"
    if isinstance(v, (bool, np.bool_)):  # (a NumPy bool, np.True_, is no Python bool)
        return repr(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return _format_float(float(v))
    if isinstance(v, SymDim):
        return quote(str(v))
    if isinstance(v, (tuple, list)):  # a list as a tuple: the parser reads both as tuples, as ops store them
        inner = ", ".join(format_literal(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{format_literal(k)}: {format_literal(x)}" for k, x in v.items()) + "}"
    if isinstance(v, np.ndarray):
        return _format_array(v)
    if isinstance(v, StructInfo):
        return format_struct_info(v)
    raise TypeError(f"printer: cannot write attribute value of type {type(v).__name__}")


#: While set (``format_module(..., digest_arrays_from=N)``), arrays of N elements or more are written as a digest
#: of their bytes instead of their values: a text that identifies the module (a cache key) without the cost of
#: writing every value (Adam's initial moments of a 1024-wide MLP, 4.2M floats, took 20 s), not one to parse.
_DIGEST_FROM: contextvars.ContextVar[Optional[int]] = contextvars.ContextVar("digest_arrays_from", default=None)


def _format_array(a: np.ndarray) -> str:
    dtype = from_numpy(a.dtype)
    digest_from = _DIGEST_FROM.get()
    if digest_from is not None and a.size >= digest_from:
        # The bytes of the values in native order: a big-endian array's bytes are other values' natively, and the
        # dtype is written by name only (">f4" is "float32"), so raw bytes would give two different constants one key.
        data = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("="))
        digest = hashlib.sha256(data.view(np.uint8).reshape(-1) if data.size else b"").hexdigest()
        return f'R.const_digest("{digest}", {tuple(a.shape)}, "{dtype}")'
    if dtype in ("float16", "float32", "float64"):
        # The shortest decimal that reads back to the same value *in this dtype*: 0.01, not 0.009999999776...
        body = _nested(a, _short_float)
    elif dtype == "bfloat16":
        # ml_dtypes scalars are not NumPy floats: go through float64, which holds every bfloat16 exactly.
        body = _nested(np.asarray(a, dtype=np.float64), lambda x: _format_float(float(x)))
    elif dtype == "bool":
        body = _nested(a, lambda x: repr(bool(x)))
    else:
        body = _nested(a, lambda x: str(int(x)))
    if 0 in a.shape[:-1]:  # nested lists say no size after a 0 ([] for (0, 3)): the shape is written out
        return f'R.const({body}, "{dtype}", shape={tuple(a.shape)})'
    return f'R.const({body}, "{dtype}")'


def _short_float(x) -> str:
    """The shortest text of ``x`` that parses (through a Python float, as the parser reads it) back to ``x``
    in its own dtype; the float64 repr when double rounding would get in the way."""
    if not np.isfinite(x):
        return _format_float(float(x))
    wide = abs(float(x))
    text = np.format_float_positional(x, unique=True, trim="0") if wide == 0 or 1e-4 <= wide < 1e16 \
        else np.format_float_scientific(x, unique=True, trim="0")
    return text if type(x)(float(text)) == x else _format_float(float(x))


def _nested(a: np.ndarray, fmt) -> str:
    if a.ndim == 0:
        return fmt(a[()])
    if a.size > 1 and a.dtype.kind in "biuf" and a.dtype.itemsize in _BITS and _all_same_bits(a):
        # one value everywhere (an optimizer's zero state): written once and repeated, not formatted per element
        text = fmt(a.reshape(-1)[0])
        for n in reversed(a.shape):
            text = "[" + ", ".join([text] * n) + "]"
        return text
    return "[" + ", ".join(_nested(x, fmt) for x in a) + "]"


_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _all_same_bits(a: np.ndarray) -> bool:
    """Every element has the first one's bytes (so -0.0 and 0.0, or two NaNs with different payloads, differ)."""
    raw = np.ascontiguousarray(a).reshape(-1).view(_BITS[a.dtype.itemsize])
    return bool((raw == raw[0]).all())


class _Namer:
    """Gives every variable of a function a unique, parseable name: one Python reads back as itself, so in NFKC form
    (Python reads ``𝑥`` as ``x``: written as it is, a variable ``𝑥`` beside a parameter ``x`` would become it)."""

    def __init__(self):
        self.names: dict[int, str] = {}
        self.used: set[str] = set()

    def define(self, var: Var) -> str:
        base = unicodedata.normalize("NFKC", var.name_hint)
        if not base.isidentifier() or keyword.iskeyword(base):
            base = "v"
        if base in _RESERVED:
            base += "_"
        name, i = base, 0
        while name in self.used:
            i += 1
            name = f"{base}_{i}"
        self.used.add(name)
        self.names[id(var)] = name
        return name

    def get(self, var: Var) -> str:
        if id(var) not in self.names:
            # A free variable (ill-formed, or an expression printed on its own): show its hint.
            return var.name_hint
        return self.names[id(var)]


class _Printer:
    def __init__(self):
        self.namer = _Namer()

    def expr(self, e: Expr) -> str:
        if isinstance(e, Var):
            return self.namer.get(e)
        if isinstance(e, GlobalVar):
            return f"cls.{check_global_name(e.name_hint)}"
        if isinstance(e, Constant):
            return _format_array(e.data)
        if isinstance(e, ShapeExpr):
            return "R.shape([" + ", ".join(format_dim(d) for d in e.values) + "])"
        if isinstance(e, PrimValue):
            dtype = "" if e.dtype == "int64" else f', "{e.dtype}"'
            return f"R.prim_value({format_literal(e.value)}{dtype})"
        if isinstance(e, StringImm):
            return f"R.str({quote(e.value)})"
        if isinstance(e, Tuple):
            inner = ", ".join(self.expr(f) for f in e.fields)
            return f"({inner},)" if len(e.fields) == 1 else f"({inner})"
        if isinstance(e, TupleGetItem):
            return f"{self.expr(e.tuple_value)}[{e.index}]"
        if isinstance(e, Call):
            return self.call(e)
        if isinstance(e, Function):
            raise TypeError("printer: a function is printed as a binding (a local @R.function), not inside an "
                            "expression")
        if isinstance(e, If):
            raise TypeError("printer: an R.If is printed as a binding (an `if` statement), not inside an expression")
        raise TypeError(f"printer: unknown expression type {type(e).__name__}")

    def call(self, c: Call) -> str:
        args = [self.expr(a) for a in c.args]
        if isinstance(c.op, GlobalVar):
            return f"cls.{check_global_name(c.op.name_hint)}({', '.join(args)})"
        if isinstance(c.op, Var):  # a local function
            return f"{self.expr(c.op)}({', '.join(args)})"
        if isinstance(c.op, ExternFunc):
            ret = "" if isinstance(c.op.ret, ObjectStructInfo) else f", sinfo_args={format_struct_info(c.op.ret)}"
            return f"R.call_packed({', '.join([quote(c.op.global_symbol), *args])}{ret})"
        op = c.op
        positional = True  # required attributes that lead the list are written by position, as TVM does
        for key, default in op.attrs.items():
            value = c.attrs.get(key, default)
            positional = positional and default is REQUIRED
            if positional:
                args.append(format_literal(value))
            elif not _same(value, default):
                args.append(f"{key}={format_literal(value)}")
        return f"R.{op.short_name}({', '.join(args)})"

    def binding(self, b, lines: list[str], indent: str) -> None:
        if isinstance(b, VarBinding) and isinstance(b.value, Function):  # a local function: a nested def
            lines += self.function(b.value, self.namer.define(b.var), indent)
            return
        if isinstance(b, VarBinding) and isinstance(b.value, If):
            # (named before the branches, as TVM's printer does: a branch's own variable of the same hint is renamed)
            target = f"{self.namer.define(b.var)}: {format_struct_info(b.var.struct_info)}"
            self.if_statement(b.value, target, lines, indent)
            return
        value = self.expr(b.value)
        if isinstance(b, MatchCast):
            name = self.namer.define(b.var)
            lines.append(f"{indent}{name} = R.match_cast({value}, {format_struct_info(b.struct_info)})")
            return
        name = self.namer.define(b.var)
        lines.append(f"{indent}{name}: {format_struct_info(b.var.struct_info)} = {value}")

    def if_statement(self, e: If, target: Optional[str], lines: list[str], indent: str) -> None:
        """``if cond:`` and ``else:``, each branch's bindings followed by ``target = result`` (TVM's form: the
        parser binds the If to that name), or by the bare result for an If printed on its own."""
        lines.append(f"{indent}if {self.expr(e.cond)}:")
        for i, branch in enumerate((e.true_branch, e.false_branch)):
            if i:
                lines.append(f"{indent}else:")
            inner = indent + _INDENT
            body = branch
            if isinstance(branch, SeqExpr):
                for block in branch.blocks:
                    self.block(block, lines, inner)
                body = branch.body
            result = self.expr(body)
            lines.append(f"{inner}{target} = {result}" if target else f"{inner}{result}")

    def block(self, block: BindingBlock, lines: list[str], indent: str) -> None:
        if isinstance(block, DataflowBlock):
            lines.append(f"{indent}with R.dataflow():")
            inner = indent + _INDENT
            for b in block.bindings:
                self.binding(b, lines, inner)
            outputs = [self.namer.get(b.var) for b in block.bindings if not isinstance(b.var, DataflowVar)]
            lines.append(f"{inner}R.output({', '.join(outputs)})")
        else:
            for b in block.bindings:
                self.binding(b, lines, indent)

    def function(self, f: Function, name: str, indent: str, decorate: bool = True) -> list[str]:
        params = []
        for p in f.params:
            params.append(f"{self.namer.define(p)}: {format_struct_info(p.struct_info)}")
        lines = []
        if decorate:
            options = [o for o, on in (("pure=False", not f.is_pure), ("private=True", f.is_private)) if on]
            lines.append(f"{indent}@R.function" + (f"({', '.join(options)})" if options else ""))
        ret = format_struct_info(f.ret_struct_info)
        inner = indent + _INDENT
        one_line = f"{indent}def {name}({', '.join(params)}) -> {ret}:"
        if len(one_line) <= _WIDTH:
            lines.append(one_line)
        else:  # one parameter a line, as black would write it
            lines.append(f"{indent}def {name}(")
            lines += [f"{inner}{p}," for p in params]
            lines.append(f"{indent}) -> {ret}:")
        attrs = {k: v for k, v in f.attrs.items() if k != PRIVATE_ATTR}  # written as the decorator's option
        if attrs:
            lines.append(f"{inner}R.func_attr({format_literal(attrs)})")
        body = f.body
        if isinstance(body, SeqExpr):
            for block in body.blocks:
                self.block(block, lines, inner)
            body = body.body
        lines.append(f"{inner}return {self.expr(body)}")
        return lines


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b or (a is None and b is None)


def format_function(f: Function, name: str = "main") -> str:
    """A function on its own: ``@R.function`` followed by its definition."""
    return "\n".join([HEADER, ""] + _Printer().function(f, check_global_name(name), ""))


def format_module(mod, name: str = "Module", digest_arrays_from: Optional[int] = None) -> str:
    """A module as an ``@I.ir_module`` class; with ``digest_arrays_from``, arrays of that many elements or more
    (constants and attribute values) as digests of their bytes (``_DIGEST_FROM``: a key, not parseable)."""
    token = _DIGEST_FROM.set(digest_arrays_from)
    try:
        return _format_module(mod, name)
    finally:
        _DIGEST_FROM.reset(token)


def _format_module(mod, name: str) -> str:
    lines = [HEADER, "", "@I.ir_module", f"class {name}:"]
    if mod.attrs:
        lines.append(f"{_INDENT}I.module_attrs({format_literal(dict(mod.attrs))})")
    for fname, func in mod.items():
        if len(lines) > 4:
            lines.append("")
        lines += _Printer().function(func, check_global_name(fname), _INDENT)
    if len(lines) == 4:
        lines.append(f"{_INDENT}pass")
    return "\n".join(lines) + "\n"


def format_expr(e: Expr) -> str:
    """One expression (free variables by their name hints)."""
    if isinstance(e, Function):
        return format_function(e)
    if isinstance(e, SeqExpr):
        p, lines = _Printer(), []
        for block in e.blocks:
            p.block(block, lines, "")
        return "\n".join(lines + [p.expr(e.body)])
    if isinstance(e, If):
        lines = []
        _Printer().if_statement(e, None, lines, "")
        return "\n".join(lines)
    return _Printer().expr(e)

