"""The hot path of a call: reading an ndarray's data pointer fast, and a Python function generated per
signature that checks and binds the arguments with every constant inlined.

Measured on the dev machine (2-core AMD EPYC, CPython 3.11): a generic loop over the parameters cost about
3 µs a call, the generated straight-line code about 1.4 µs, and the ctypes call itself 0.25 µs.
"""

from __future__ import annotations

import ctypes
from typing import Any, Sequence

import numpy as np

from .signature import FunctionSignature, ShapeExpr, is_symbol

# `arr.ctypes.data` and `arr.__array_interface__` cost about 1 µs each; the data pointer is the first field of
# NumPy's PyArrayObject right after the PyObject header, which reads in about 0.1 µs. Checked once at import
# (including on an offset view); any surprise falls back to the slow, official route.
DATA_OFFSET = object.__basicsize__
_read_i64 = ctypes.c_int64.from_address


def _slow_data_ptr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _probe_fast_pointer() -> bool:
    try:
        base = np.arange(16, dtype=np.float32)
        return all(_read_i64(id(a) + DATA_OFFSET).value == _slow_data_ptr(a) for a in (base, base[3:], base[::2]))
    except Exception:  # pragma: no cover - a non-CPython interpreter
        return False


FAST_POINTER = _probe_fast_pointer()


def data_ptr(a: np.ndarray) -> int:
    """The address of ``a``'s first element."""
    return _read_i64(id(a) + DATA_OFFSET).value if FAST_POINTER else _slow_data_ptr(a)


def any_overlap(ins: Sequence[np.ndarray], outs: Sequence[np.ndarray]) -> bool:
    """Whether any output shares bytes with an input or another output (the fast path's check; inlined
    pointer reads, as it runs on every call with ``out=``)."""
    spans = []
    for a in ins:
        n = a.nbytes
        if n:
            p = _read_i64(id(a) + DATA_OFFSET).value if FAST_POINTER else _slow_data_ptr(a)
            spans.append((p, p + n))
    for o in outs:
        n = o.nbytes
        if n:
            lo = _read_i64(id(o) + DATA_OFFSET).value if FAST_POINTER else _slow_data_ptr(o)
            hi = lo + n
            for p, q in spans:
                if lo < q and p < hi:
                    return True
            spans.append((lo, hi))
    return False


def fast_path_source(sig: FunctionSignature, bases: Sequence[int], checked: bool = False) -> str:
    """Python source of ``call(*args, out=None)`` specialized to ``sig``: the checks of the general path
    unrolled (class, dtype, shape, contiguity, alignment; for ``out=`` also writeability and overlap), symbols
    bound to locals ``s_<name>``, outputs allocated, descriptor fields written, one ctypes call. Any failed
    check returns ``general(args, out)``, which raises the full error. ``bases[i]`` is the index of memref
    ``i``'s first descriptor field (params, then results). ``checked``: the module has runtime checks, so the
    error slot ``err`` is read after the call and ``fail()`` raises what it holds."""
    bail = "return general(args, out)"
    lines = ["def call(*args, out=None):", f"    if len(args) != {len(sig.params)}: {bail}"]
    names = [f"a{i}" for i in range(len(sig.params))]
    if names:
        lines.append(f"    {', '.join(names)}, = args")
    dim_src: dict[str, str] = {}
    later: list[str] = []
    for i, p in enumerate(sig.params):
        a = f"a{i}"
        if all(isinstance(d, int) for d in p.shape):
            lines.append(f"    if {a}.__class__ is not nd or {a}.dtype != d{i} or {a}.shape != {tuple(p.shape)}: {bail}")
        else:
            lines.append(f"    if {a}.__class__ is not nd or {a}.dtype != d{i} or len({a}.shape) != {len(p.shape)}: {bail}")
            for axis, d in enumerate(p.shape):
                got = f"{a}.shape[{axis}]"
                if isinstance(d, int):
                    lines.append(f"    if {got} != {d}: {bail}")
                elif is_symbol(d) and d not in dim_src:
                    dim_src[d] = f"s_{d}"
                    lines.append(f"    s_{d} = {got}")
                elif is_symbol(d):
                    lines.append(f"    if {got} != s_{d}: {bail}")
                else:
                    later.append(f"    if {got} != {ShapeExpr(d).source('s_')}: {bail}")
        lines.append(f"    fl = {a}.flags")
        lines.append(f"    if not (fl.c_contiguous and fl.aligned): {bail}")
    lines += later
    outs = [f"o{i}" for i in range(len(sig.results))]
    shapes = []
    for i, r in enumerate(sig.results):
        dims = [dim_source(d) for d in r.shape]
        for d, src in zip(r.shape, dims):
            if isinstance(d, str) and not is_symbol(d):  # an expression may go negative; a shape cannot
                lines.append(f"    if {src} < 0: {bail}")
        shapes.append(f"({', '.join(dims)}{',' if len(dims) == 1 else ''})")
    lines.append("    if out is None:")
    lines += [f"        o{i} = empty({shape}, r{i})" for i, shape in enumerate(shapes)] or ["        pass"]
    lines.append("    else:")
    if len(outs) == 1:
        lines.append("        if out.__class__ is nd: out = (out,)")
        lines.append(f"        if len(out) != 1: {bail}")
    else:  # an array is one output, never a sequence of them (the general path says so)
        lines.append(f"        if isinstance(out, nd) or len(out) != {len(outs)}: {bail}")
    if outs:
        lines.append(f"        {', '.join(outs)}, = out")
    for i, shape in enumerate(shapes):
        lines.append(f"        if o{i}.__class__ is not nd or o{i}.dtype != r{i} or o{i}.shape != {shape}: {bail}")
        lines.append(f"        fl = o{i}.flags")
        lines.append(f"        if not (fl.c_contiguous and fl.aligned and fl.writeable): {bail}")
    lines.append(f"        if overlap(args, out): {bail}")
    lines.append("    with lock:")
    for arr, spec, base in zip(names + outs, sig.params + sig.results, bases):
        if FAST_POINTER:
            lines.append(f"        argv[{base}] = argv[{base + 1}] = id({arr}) + OFF")
        else:
            lines.append(f"        buf[{base}] = buf[{base + 1}] = dp({arr})")
        dims = [dim_source(d) for d in spec.shape]
        r = len(dims)
        for axis, d in enumerate(dims):
            stride = " * ".join(dims[axis + 1 :]) or "1"
            if not d.isdigit():
                lines.append(f"        buf[{base + 3 + axis}] = {d}")
            if not all(x.isdigit() for x in dims[axis + 1 :]):
                lines.append(f"        buf[{base + 3 + r + axis}] = {stride}")
    lines.append("        fn(argv)")
    if checked:
        lines.append("        if err[0]: fail()")
    ret = outs[0] if len(outs) == 1 else f"({', '.join(outs)},)" if outs else "None"
    lines.append(f"    return {ret}")
    return "\n".join(lines) + "\n"


def dim_source(d: Any) -> str:
    """Python source for one dimension inside the generated function."""
    if isinstance(d, int):
        return str(d)
    return f"s_{d}" if is_symbol(d) else ShapeExpr(d).source("s_")
