"""The hot path of a call: per-parameter plans made once per signature, and the data pointer through the buffer
protocol.

A compiled function's common call passes NumPy arrays that need nothing: the exact dtype, the shape (or sizes
consistent with the other parameters'), C-contiguous, aligned, writable. For each parameter a small closure (its
*writer*), made once, accepts such an array and writes its descriptor fields (the data pointer; for a symbolic
shape also the sizes and strides); anything else makes it answer False and the call takes the general route
(``CompiledFunction._call_general``), which applies the argument policy (``arguments.py``) and raises the full
error. The two routes write the same descriptors through the same functions; no source is generated or
``exec``uted.

The data pointer: ``ctypes.c_char.from_buffer(a)`` exports ``a``'s buffer through the buffer protocol (the
documented interface; it refuses a non-contiguous or read-only buffer) and ``ctypes.addressof`` reads its
address: about 0.2 µs, against 1 µs for ``a.ctypes.data`` or ``a.__array_interface__``, which remain the route
for read-only and empty arrays. Measured by ``benchmarks/call_overhead.py``.

With static shapes (the training steps' case), the native module ``relax_mlir._callpath`` (``_callpath.c``, built
at install against NumPy's headers) does the same checks for every argument in one call, reading each array's
dtype, flags, shape and data pointer with NumPy's C API accessors: a few nanoseconds an argument (0.05 µs through
the C buffer protocol, as it did before; 0.5 in Python); preallocated results (``out=``: one array, a tuple
or a list; the ``Trainer`` reuses its buffers so) are checked in the same call, overlaps included. Without it (no
C compiler at install) the Python checks run; tests run both.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .signature import FunctionSignature, TensorSpec, is_symbol, shape_evaluator

try:  # the native argument checks (relax_mlir/_callpath.c), built at install when a C compiler is there
    from .. import _callpath as _native
except ImportError:  # pragma: no cover - the Python checks below do the same, slower
    _native = None

_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof
_ND = np.ndarray

#: ``writer(array, sizes) -> accepted``: checks one argument and writes its descriptor fields.
Writer = Callable[[Any, dict], bool]


def data_address(a: np.ndarray) -> int:
    """The address of ``a``'s first element: through the buffer protocol, or ``__array_interface__`` for the
    arrays that cannot export a writable buffer (read-only, empty, not C-contiguous)."""
    try:
        return _addressof(_from_buffer(a))
    except (TypeError, ValueError):
        return a.__array_interface__["data"][0]


def c_strides(shape: Sequence[int]) -> list[int]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return strides[::-1]


def write_layout(buf: Any, base: int, shape: Sequence[int]) -> None:
    """Offset 0, the sizes and the C strides of the descriptor at ``buf[base]``."""
    r = len(shape)
    buf[base + 2] = 0
    for i, (d, s) in enumerate(zip(shape, c_strides(shape))):
        buf[base + 3 + i] = d
        buf[base + 3 + r + i] = s


def _writer(spec: TensorSpec, base: int, buf: Any) -> Writer:
    """The writer of one parameter (see the module docstring)."""
    dtype, rank, mask = spec.dtype, len(spec.shape), spec.dtype.alignment - 1
    if all(isinstance(d, int) for d in spec.shape):
        shape = tuple(spec.shape)

        def write_static(a: Any, sizes: dict) -> bool:
            if a.__class__ is not _ND or a.shape != shape or (a.dtype is not dtype and a.dtype != dtype):
                return False
            try:
                p = _addressof(_from_buffer(a))
            except (TypeError, ValueError):  # read-only, empty or not C-contiguous: the general route
                return False
            if p & mask:
                return False
            buf[base + 1] = p  # the aligned pointer (argv reads the allocated one from the same slot)
            return True

        return write_static
    fixed = [(axis, d) for axis, d in enumerate(spec.shape) if isinstance(d, int)]
    symbols = [(axis, d) for axis, d in enumerate(spec.shape) if is_symbol(d)]

    def write_dynamic(a: Any, sizes: dict) -> bool:
        if a.__class__ is not _ND or (a.dtype is not dtype and a.dtype != dtype):
            return False
        shape = a.shape
        if len(shape) != rank:
            return False
        for axis, d in fixed:
            if shape[axis] != d:
                return False
        for axis, name in symbols:
            if sizes.setdefault(name, shape[axis]) != shape[axis]:
                return False
        try:
            p = _addressof(_from_buffer(a))
        except (TypeError, ValueError):
            return False
        if p & mask:
            return False
        buf[base + 1] = p  # the aligned pointer (argv reads the allocated one from the same slot)
        write_layout(buf, base, shape)
        return True

    return write_dynamic


def _scan_width(dtype: np.dtype) -> Optional[int]:
    """Bytes per element the native finiteness scan reads a result as: 0 for integers and booleans (always
    finite), 2/4/8 for native float16/32/64, None for what it does not read (complex, long double, byte-swapped)."""
    if dtype.kind in "iub":
        return 0
    if dtype.kind == "f" and dtype.isnative and dtype.char in "efd":
        return dtype.itemsize
    return None


class CallPlan:
    """What a call with arrays that need nothing does, made once per signature: check and write each
    parameter, allocate and write each result. ``run`` answers None when the general route must take over."""

    def __init__(self, signature: FunctionSignature, bases: Sequence[int], buf: Any):
        params, results = signature.params, signature.results
        self.n_params = len(params)
        # A parameter whose shape has an expression ("2 * n") is checked once every size is bound: the general
        # route does that, and such signatures are rare.
        # A bool parameter is checked by the general route: a bool array's bytes may be other than 0 and 1
        # (np.frombuffer of a 0/255 mask), which NumPy reads as True and compiled code would not.
        self.usable = all(isinstance(d, int) or is_symbol(d) for p in params for d in p.shape) and \
            not any(p.dtype.kind == "b" for p in params)
        self.writers = [_writer(p, b, buf) for p, b in zip(params, bases)]
        self.all_static = all(isinstance(d, int) for p in params for d in p.shape)
        self.static_params = [(p.dtype, tuple(p.shape) if self.all_static else None, b, p.dtype.alignment - 1)
                              for p, b in zip(params, bases)]
        # static shapes: the native module checks every argument and writes every pointer in one call
        static_results = all(isinstance(d, int) for r in results for d in r.shape)
        widths = [_scan_width(r.dtype) for r in results]
        result_specs = [(b, r.dtype, r.dtype.alignment - 1, tuple(r.shape), w or 0)
                        for r, b, w in zip(results, bases[len(params):], widths)] if static_results else []
        self.native = (_native.make_plan(_ND, [(base, dtype, mask, shape) for dtype, shape, base, mask
                                               in self.static_params], result_specs)
                       if _native and self.all_static else None)
        self.native_outs = self.native is not None and static_results  # out= checked natively too
        # ... and scanned for NaN and infinity right after the call (call_into), when every float is one it reads
        self.native_scan = self.native_outs and all(w is not None for w in widths)
        self.buf_address = ctypes.addressof(buf)
        self.static = signature.is_static
        self.param_bases = list(bases[:len(params)])
        self.result_bases = list(bases[len(params):])
        self.result_dtypes = [r.dtype for r in results]
        self.result_shapes: list[Optional[tuple]] = [
            tuple(r.shape) if all(isinstance(d, int) for d in r.shape) else None for r in results]
        self.result_evaluators = [shape_evaluator(r.shape) for r in results]
        self.buf = buf

    def run(self, args: Sequence[Any], out: Any = None) -> Optional[list[np.ndarray]]:
        """Write every descriptor for ``args`` (and ``out=``, if given) and return the results, or None
        (nothing to trust in the descriptor buffer then: the general route rewrites all of it). Called with the
        function's lock held."""
        buf, sizes = self.buf, {}
        if self.native is not None:
            args = args if args.__class__ is tuple else tuple(args)
            kind = out.__class__
            if self.native_outs and (kind is tuple or kind is _ND or kind is list):  # outs checked in the same call
                outs = out if kind is tuple else (out,) if kind is _ND else tuple(out)
                return list(outs) if _native.write_args(self.native, args, self.buf_address, outs) else None
            if not _native.write_args(self.native, args, self.buf_address):
                return None
        elif self.all_static:  # the common case, inlined: a writer call per argument costs more than its checks
            for a, (dtype, shape, base, mask) in zip(args, self.static_params):
                if a.__class__ is not _ND or a.shape != shape or (a.dtype is not dtype and a.dtype != dtype):
                    return None
                try:
                    p = _addressof(_from_buffer(a))
                except (TypeError, ValueError):  # read-only, empty or not C-contiguous: the general route
                    return None
                if p & mask:
                    return None
                buf[base + 1] = p  # the aligned pointer (argv reads the allocated one from the same slot)
        else:
            for write, a in zip(self.writers, args):
                if not write(a, sizes):
                    return None
        if out is not None:
            return self._take_outs(args, out, sizes)
        outs = []
        for base, dtype, shape, evaluate in zip(self.result_bases, self.result_dtypes, self.result_shapes,
                                                self.result_evaluators):
            if shape is None:
                shape = evaluate(sizes)
                if any(d < 0 for d in shape):
                    return None  # the general route says which result and why
                write_layout(buf, base, shape)
            o = np.empty(shape, dtype)
            buf[base + 1] = data_address(o)
            outs.append(o)
        return outs

    def _take_outs(self, args: Sequence[Any], out: Any, sizes: dict) -> Optional[list[np.ndarray]]:
        """``out=`` arrays that are exact (class, dtype, shape, C-contiguous, aligned, writeable) and share no
        memory with the inputs or each other, their descriptors written; else None."""
        outs = [out] if out.__class__ is _ND else out
        if not isinstance(outs, (list, tuple)) or len(outs) != len(self.result_bases):
            return None  # (the general route says what is wrong)
        buf = self.buf
        spans = [(buf[b + 1], buf[b + 1] + a.nbytes) for a, b in zip(args, self.param_bases) if a.nbytes]
        for o, base, dtype, static, evaluate in zip(outs, self.result_bases, self.result_dtypes,
                                                    self.result_shapes, self.result_evaluators):
            shape = static if static is not None else tuple(evaluate(sizes))
            if o.__class__ is not _ND or o.dtype != dtype or o.shape != shape:
                return None
            try:
                p = _addressof(_from_buffer(o))  # refuses read-only and non-contiguous arrays
            except (TypeError, ValueError):
                return None
            if p & (dtype.alignment - 1):
                return None
            end = p + o.nbytes
            if any(p < hi and lo < end for lo, hi in spans):
                return None
            spans.append((p, end))
            buf[base + 1] = p
            if static is None:
                write_layout(buf, base, shape)
        return list(outs)
