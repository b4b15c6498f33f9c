"""The ``relax`` MLIR dialect, generated from the op registry and defined in IRDL.

One dialect op per registry op that reaches MLIR as itself: every record but the composites, which are decomposed
into other ops before export (:func:`dialect_records`).

The text of ``relax_mlir/dialects/relax.irdl.mlir`` and ``relax_mlir/dialects/README.md`` is what
:func:`irdl_text` and :func:`relax_mlir.backend.dialect_gen.readme_text` return; a test checks the committed files
equal it, and ``python -m relax_mlir.backend.dialect_gen --write`` regenerates them (generation lives apart so that
loading the dialect never imports the export, which imports this module). At run time the dialect is loaded into each
MLIR context from the same text (:func:`load_relax_dialect`): the shipped file when its stamp (a hash of the sources
the dialect is generated from, :func:`registry_fingerprint`) and its op names match the registry, else generated
(every op's samples inferred: 40-60 ms of a new process's first compile) and kept in the on-disk cache.

Conventions (also written at the top of the README):

* **Names.** IRDL accepts only ``[a-z0-9_]`` in an op name, so the dots after ``relax.`` become underscores:
  ``relax.add`` is ``relax.add``, ``relax.nn.relu`` is ``relax.nn_relu``, ``relax.grad.no_grad`` is
  ``relax.grad_no_grad``. :func:`dialect_op_name` is the one place this mapping lives (it is injective:
  a test checks it).
* **Operands** are builtin ranked tensors, one per Relax input; a tuple input (``concat``) is a variadic
  group; an optional input (``nll_loss``'s ``weights``) is an optional one. An op with a ``shape``
  attribute also takes one ``index`` operand per dynamic dimension of its result (``dims``, in order), as
  ``tensor.empty`` does.
* **Results**: one tensor; a tuple of fixed length k is k results; a tuple whose length varies (``split``) is a
  variadic group. IRDL binds a variadic group's constraint to one type, so the export casts its members to their
  common type (``tensor.cast``; static dims only where all agree) and back.
* **Attributes**: every Relax attribute is present. ``None`` is ``unit``; a bool is ``true``/``false``; an
  int is ``i64``; a float ``f64``; a dtype (``dtype``, ``*_dtype``) a type (``f32``, ``i1``); a tuple of
  ints ``array<i64: ...>``; other strings strings. ``shape`` holds the *result's* shape with ``-1`` for
  each dynamic dimension (reshape's ``-1`` is resolved at export). An attribute whose values have one kind
  is checked by its kind; one of several kinds (or ``None``) only for presence (MLIR 22's IRDL loader
  aborts on ``irdl.any_of`` of ``irdl.base`` constraints).
"""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from mlir import ir
from mlir.dialects import irdl

from ..ir.dtype import DTYPES
from ..ir.struct_info import TupleStructInfo
from ..op.registry import REQUIRED, Op, list_ops

DIALECT = "relax"
#: The generated files, shipped inside the package (the loader reads the IRDL text instead of generating it).
DIALECT_DIR = Path(__file__).resolve().parents[1] / "dialects"
IRDL_PATH = DIALECT_DIR / "relax.irdl.mlir"
README_PATH = DIALECT_DIR / "README.md"

_TENSOR = '"!builtin.tensor"'
_KIND_BASE = {"none": "#builtin.unit", "bool": "#builtin.integer", "int": "#builtin.integer",
              "float": "#builtin.float", "str": "#builtin.string", "type": "#builtin.type",
              "array": "#builtin.dense_array"}


# --- names -----------------------------------------------------------------------------------------------
def dialect_op_name(op: Op) -> str:
    """The dialect op of a registry op: ``relax.nn.relu`` -> ``relax.nn_relu``."""
    return f"{DIALECT}.{op.short_name.replace('.', '_')}"


def dialect_records(extra: Iterable[Op] = ()) -> list[Op]:
    """Registry ops that reach MLIR as themselves, in registry order: every record without a decomposition (a
    composite is decomposed before export, so it needs no dialect op), plus ``extra`` (composites a custom legalize
    map lowers as themselves)."""
    extra = set(extra)
    return [op for op in list_ops() if op.decompose is None or op in extra]


def dialect_ops(extra: Iterable[Op] = ()) -> dict[str, Op]:
    """Dialect op name -> registry record, for every lowered op."""
    return {dialect_op_name(op): op for op in dialect_records(extra)}


# --- dtypes ------------------------------------------------------------------------------------------------
_FLOATS = {"float16": ir.F16Type, "bfloat16": ir.BF16Type, "float32": ir.F32Type, "float64": ir.F64Type}
_INTS = {"bool": 1, "int8": 8, "int16": 16, "int32": 32, "int64": 64}
_UINTS = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}


def element_type(dtype: str) -> ir.Type:
    """The MLIR element type of a Relax dtype (in the current context). MLIR's integers are signless: an unsigned
    dtype is the integer of its width, and what is unsigned about it is carried by the ops that read it
    (``unsigned.py``)."""
    if dtype in _FLOATS:
        return _FLOATS[dtype].get()
    if dtype in _INTS:
        return ir.IntegerType.get_signless(_INTS[dtype])
    if dtype in _UINTS:
        return ir.IntegerType.get_signless(_UINTS[dtype])
    raise ValueError(f"dtype {dtype} is not supported by the MLIR backend yet "
                     f"(supported: {', '.join(list(_FLOATS) + list(_INTS) + list(_UINTS))})")


def dtype_of(t: ir.Type) -> str:
    """The Relax dtype of an MLIR element type (``i1`` is ``bool``)."""
    for name, cls in _FLOATS.items():
        if isinstance(t, cls):
            return name
    if isinstance(t, ir.IntegerType):
        for name, width in _INTS.items():
            if t.width == width:
                return name
    raise ValueError(f"MLIR type {t} has no Relax dtype")


# --- attributes --------------------------------------------------------------------------------------------
def _is_dtype_attr(name: str) -> bool:
    return name == "dtype" or name.endswith("_dtype")


def attr_kind(name: str, value: Any) -> str:
    """The kind of a canonical Relax attribute value, as exported: none, bool, int, float, str, type, array."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "type" if _is_dtype_attr(name) and value in DTYPES else "str"
    if isinstance(value, tuple):
        return "array"
    raise ValueError(f"attribute {name!r} = {value!r} has no MLIR encoding")


def encode_attr(name: str, value: Any) -> ir.Attribute:
    """A canonical Relax attribute value as an MLIR attribute (see the module docstring)."""
    kind = attr_kind(name, value)
    if kind == "none":
        return ir.UnitAttr.get()
    if kind == "bool":
        return ir.BoolAttr.get(value)
    if kind == "int":
        if -2 ** 63 <= value < 2 ** 63:
            return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
        if -2 ** 127 <= value < 2 ** 127:  # a uint64 bound or fill beyond int64: kept whole, as an i128
            return ir.Attribute.parse(f"{value} : i128")
        raise ValueError(f"attribute {name!r} = {value}: an integer beyond 128 bits has no MLIR encoding here")
    if kind == "float":
        return ir.FloatAttr.get_f64(value)
    if kind == "type":
        return ir.TypeAttr.get(element_type(value))
    if kind == "str":
        return ir.StringAttr.get(value)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ValueError(f"attribute {name!r} = {value!r}: only tuples of ints have an MLIR encoding "
                         "(size variables are allowed only in 'shape' and an op's size_attrs)")
    return ir.DenseI64ArrayAttr.get(list(value))


def decode_attr(attr: ir.Attribute) -> Any:
    """The Relax value of an exported attribute (the inverse of :func:`encode_attr`)."""
    if isinstance(attr, ir.UnitAttr):
        return None
    if isinstance(attr, ir.BoolAttr):
        return bool(attr.value)
    if isinstance(attr, ir.IntegerAttr):
        if ir.IntegerType(attr.type).width > 64:  # (the binding reads 64 bits at most)
            return int(str(attr).split(":")[0])
        return int(attr.value)
    if isinstance(attr, ir.FloatAttr):
        return float(attr.value)
    if isinstance(attr, ir.TypeAttr):
        return dtype_of(attr.value)
    if isinstance(attr, ir.StringAttr):
        return attr.value
    if isinstance(attr, ir.DenseI64ArrayAttr):
        return tuple(int(v) for v in attr)
    raise ValueError(f"attribute {attr} is not one relax-mlir exports")


def has_dims_operands(op: Op) -> bool:
    """Whether the dialect op takes ``index`` operands: the dynamic dims of its result (a ``shape`` attribute),
    then the symbolic entries of its ``size_attrs``, in order (each stored as :data:`SYMBOLIC_ENTRY`)."""
    return "shape" in op.attrs or bool(op.size_attrs)


#: What a symbolic entry of a size attribute is stored as; its value is the matching ``index`` operand.
SYMBOLIC_ENTRY = -2 ** 63


# --- what the registry says about an op ----------------------------------------------------------------------
def _canonical_samples(op: Op) -> list[tuple[list, dict]]:
    from ..ir.expr import Var

    out = []
    for i, sample in enumerate(op.samples):
        sinfos = [TupleStructInfo(a) if isinstance(a, (list, tuple)) else a for a in sample.args]
        args = [Var(f"a{j}", s) for j, s in enumerate(sinfos)]
        call = op(*args, **sample.attrs)
        out.append((sinfos, dict(call.attrs), call.struct_info))
    return out


VARIADIC = -1


@functools.lru_cache(maxsize=None)
def _op_facts(op: Op) -> tuple[int, dict[str, frozenset[str]]]:
    """(result arity, attribute name -> kinds seen) from the op's default attributes and samples. The arity is 0
    for one tensor, k for a tuple of k tensors, ``VARIADIC`` for tuples whose length varies (``split``)."""
    samples = _canonical_samples(op)
    lengths = {len(s.fields) if isinstance(s, TupleStructInfo) else 0 for _, _, s in samples}
    arity = lengths.pop() if len(lengths) == 1 else VARIADIC
    kinds: dict[str, set[str]] = {name: set() for name in op.attrs}
    for name, default in op.attrs.items():
        if default is not REQUIRED:
            kinds[name].add("array" if name == "shape" else attr_kind(name, default))
    for _, attrs, _ in samples:
        for name, value in attrs.items():
            kinds[name].add("array" if name == "shape" else attr_kind(name, value))
    return arity, {k: frozenset(v) for k, v in kinds.items()}


def result_arity(op: Op) -> int:
    """0: one tensor result; k > 0: a tuple of k (k named results); ``VARIADIC``: a tuple of varying length."""
    return _op_facts(op)[0]


def attr_constraint(kinds: frozenset[str]) -> Optional[str]:
    """The IRDL base of an attribute, or None when it may hold several kinds (then ``irdl.any``)."""
    bases = {_KIND_BASE[k] for k in kinds}
    return bases.pop() if len(bases) == 1 else None


# --- IRDL ----------------------------------------------------------------------------------------------------
_HEADER = """\
// The relax dialect: one op per lowered Relax op, on builtin tensors.
// GENERATED from the op registry by relax_mlir.backend.dialect_gen: do not edit. Regenerate with
//   python -m relax_mlir.backend.dialect_gen --write
// relax.nn.relu is `relax.nn_relu` (IRDL op names allow only [a-z0-9_]); see relax_mlir/dialects/README.md.
"""


def _first_line(doc: str) -> str:
    text = " ".join(doc.split())
    return text.split(". ")[0].rstrip(".") + "." if text else ""


def irdl_operation(op: Op) -> list[str]:
    """The ``irdl.operation`` of one op, as lines."""
    arity, kinds = _op_facts(op)
    lines = [f"  // {op.name}: {_first_line(op.doc)}", f"  irdl.operation @{dialect_op_name(op).split('.', 1)[1]} {{"]
    operands = []
    for i, name in enumerate(op.inputs):
        lines.append(f"    %in_{name} = irdl.base {_TENSOR}")
        variadic = "variadic " if op.tuple_input and i == 0 else ""
        optional = "optional " if i >= len(op.inputs) - op.num_optional else ""
        operands.append(f"{name}: {variadic or optional}%in_{name}")
    if has_dims_operands(op):
        lines.append("    %index = irdl.is index")
        operands.append("dims: variadic %index")
    if sum(1 for o in operands if "variadic" in o or "optional" in o) > 1:
        raise ValueError(f"{op.name}: more than one variadic/optional operand group needs operandSegmentSizes, "
                         "which the exporter does not write")
    outs = [f"out{i}" for i in range(arity)] if arity > 0 else ["out"]
    lines += [f"    %{o} = irdl.base {_TENSOR}" for o in outs]
    attrs = []
    for name in op.attrs:
        base = attr_constraint(kinds[name])
        lines.append(f"    %attr_{name} = " + (f'irdl.base "{base}"' if base else "irdl.any"))
        attrs.append(f'"{name}" = %attr_{name}')
    lines.append(f"    irdl.operands({', '.join(operands)})")
    if arity == VARIADIC:
        lines.append("    irdl.results(results: variadic %out)")
    else:
        lines.append(f"    irdl.results({', '.join(f'result{o[3:]}: %{o}' for o in outs)})")
    if attrs:
        lines.append(f"    irdl.attributes {{{', '.join(attrs)}}}")
    lines.append("  }")
    return lines


@functools.lru_cache(maxsize=1)
def registry_fingerprint() -> str:
    """A hash of the sources the dialect is generated from: the op records (``relax_mlir/op``) and this module."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted((package / "op").rglob("*.py")) + [Path(__file__).resolve()]:
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


_STAMP = "// registry sha256 "


def irdl_text(extra: Iterable[Op] = ()) -> str:
    """The IRDL definition of the relax dialect (``relax_mlir/dialects/relax.irdl.mlir`` when ``extra`` is empty),
    stamped with :func:`registry_fingerprint`."""
    lines = [_HEADER.rstrip("\n"), _STAMP + registry_fingerprint(), f"irdl.dialect @{DIALECT} {{"]
    for i, op in enumerate(dialect_records(extra)):
        if i:
            lines.append("")
        lines += irdl_operation(op)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _shipped_irdl(ops: tuple[Op, ...]) -> Optional[str]:
    """The shipped IRDL file's text if it was generated from these sources and defines exactly ``ops``, else None."""
    try:
        text = IRDL_PATH.read_text(encoding="utf-8")
    except OSError:
        return None
    stamp = next((line for line in text.splitlines() if line.startswith(_STAMP)), None)
    if stamp != _STAMP + registry_fingerprint():
        return None
    defined = {f"{DIALECT}.{name}" for name in re.findall(r"^  irdl\.operation @(\w+) \{", text, re.MULTILINE)}
    return text if defined == {dialect_op_name(op) for op in ops} else None


@functools.lru_cache(maxsize=8)
def _irdl_cached(ops: tuple[Op, ...]) -> str:
    """The IRDL text of ``ops``; the registry's own dialect (no extra ops) is the shipped file when it is current,
    else comes from the on-disk cache when that is on: generating it (every op's samples inferred) costs 40-60 ms of
    each new process's first compile."""
    if set(ops) != set(dialect_records()):
        return irdl_text(ops)
    shipped = _shipped_irdl(ops)
    if shipped is not None:
        return shipped
    from . import disk_cache

    if not disk_cache.enabled():
        return irdl_text(ops)
    import glob
    import os

    from .library import write_atomically

    path = os.path.join(disk_cache.cache_dir(), f"relax-irdl-{disk_cache.compiler_fingerprint()[:32]}.irdl")
    try:
        with open(path, encoding="utf-8") as f:
            text, _, tail = f.read().rpartition("// sha256 ")
        if tail.strip() == hashlib.sha256(text.encode("utf-8")).hexdigest():
            return text
    except OSError:
        pass
    text = irdl_text(ops)
    try:
        os.makedirs(disk_cache.cache_dir(), exist_ok=True)
        for old in glob.glob(os.path.join(disk_cache.cache_dir(), "relax-irdl-*.irdl")):
            if old != path:
                os.remove(old)  # another version's: one dialect file at a time
        write_atomically(path, f"{text}// sha256 {hashlib.sha256(text.encode('utf-8')).hexdigest()}\n".encode("utf-8"))
    except OSError:
        pass  # a cache that cannot be written costs the generation next time, nothing else
    return text


def load_relax_dialect(context: ir.Context, extra: Sequence[Op] = ()) -> frozenset[str]:
    """Register the relax dialect in ``context``; returns the names of its ops.

    Creating an op of a dialect the context does not know aborts the process (an LLVM fatal error, not an
    exception), so callers check names against the returned set first."""
    ops = tuple(dialect_records(extra))
    # The definition module is dropped once loaded: IRDL builds each op's verifier from its own copies of the
    # constraints (attributes uniqued in the context), nothing points back into the module. Keeping it (it was
    # kept in a WeakKeyDictionary keyed by the context, whose value held the context) kept every context alive:
    # 2.5 MB per compile, found by benchmarks/memory_soak.py.
    with context:
        try:
            definition = ir.Module.parse(_irdl_cached(ops))
        except ir.MLIRError:  # a damaged cached file: generated again, never trusted
            _irdl_cached.cache_clear()
            definition = ir.Module.parse(irdl_text(ops))
        irdl.load_dialects(definition)
    return frozenset(dialect_op_name(op) for op in ops)
