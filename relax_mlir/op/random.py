"""Counter-based random numbers: ``relax.random.uniform(key, shape, dtype="float32")``.

The values are a pure function of ``key`` (an ``int64`` 0-d tensor) and each element's row-major flat index ``i``,
in 64-bit wrapping integer arithmetic, so compiled code (a ``linalg.generic`` with ``linalg.index``) and this
NumPy reference agree bit for bit, on any tiling or thread count:

    mix64(z) = z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31
    bits(key, i) = mix64(mix64(key) + (i + 1) * 0x9E3779B97F4A7C15)      (all mod 2**64, >> logical)
    value(key, i) = (bits(key, i) >> (64 - p)) * 2**-p                   (p = 24 for float32)

``mix64`` is the SplitMix64 finaliser (Steele, Lea & Flood 2014; Vigna's ``splitmix64.c``), so ``bits(key, i)``
is the ``i``-th output of SplitMix64 seeded with ``mix64(key)``; hashing the key first means keys that differ by
a little (``key + 1``, ``key + site``) give unrelated streams. ``p`` is the dtype's significand width (float16 11,
bfloat16 8, float32 24, float64 53): the top ``p`` bits scaled by ``2**-p`` are exactly representable, so every
value is one of the ``2**p`` evenly spaced points of ``[0, 1)`` with equal probability. No 128-bit products, no
floating-point arithmetic before the final exact scaling.

``fold_in(key, data)`` derives a new key from a key and an integer (``bits(key, data)`` as an ``int64``): the
trainer passes ``fold_in(seed, step)`` as a function's ``rng_key`` each step (see ``MutateOpsForTraining``).
"""

from __future__ import annotations

import numpy as np

from ..ir.dtype import check_dtype, is_float, to_numpy
from ..ir.struct_info import TensorStructInfo
from .common import fmt, shape_attr
from .registry import NOT_DIFFERENTIABLE, REQUIRED, BadSample, Op, Sample, fail, register

_T = TensorStructInfo

GAMMA = 0x9E3779B97F4A7C15  # the golden-ratio increment of SplitMix64
MIX1, MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
SIGNIFICAND_BITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


def to_int64(value: int) -> int:
    """``value`` mod 2**64 as a signed int64 (how a uint64 constant is written in an int64 tensor)."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def mix64(z: np.ndarray) -> np.ndarray:
    """The SplitMix64 finaliser on a ``uint64`` array (NumPy array arithmetic wraps mod 2**64 silently)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(MIX1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(MIX2)
    return z ^ (z >> np.uint64(31))


def random_bits(key, indices: np.ndarray) -> np.ndarray:
    """``bits(key, i)`` for every ``i`` of ``indices`` (a ``uint64`` array)."""
    k = np.asarray(key, dtype=np.int64).reshape(1).view(np.uint64)
    return mix64(mix64(k) + (indices + np.uint64(1)) * np.uint64(GAMMA))


def fold_in(key, data: int) -> np.ndarray:
    """A new key (an ``int64`` 0-d array) from ``key`` and ``data``: ``bits(key, data)``. The trainer's key for
    step ``s`` is ``fold_in(seed, s)``."""
    bits = random_bits(key, np.array([to_int64(data)], dtype=np.int64).view(np.uint64))
    return bits.view(np.int64).reshape(())


def uniform_values(key, shape, dtype: str) -> np.ndarray:
    """The reference of ``relax.random.uniform``: ``value(key, i)`` over ``shape`` in ``dtype``."""
    p = SIGNIFICAND_BITS[dtype]
    n = int(np.prod(shape, dtype=np.int64))
    top = random_bits(key, np.arange(n, dtype=np.uint64)) >> np.uint64(64 - p)
    # Both steps are exact: top < 2**p converts without rounding, and 2**-p is a power of two.
    return (top.astype(np.float64) * 2.0 ** -p).astype(to_numpy(dtype)).reshape(tuple(shape))


def _canon(attrs: dict) -> dict:
    return dict(attrs, shape=shape_attr(attrs["shape"]), dtype=check_dtype(attrs["dtype"], "dtype"))


def _check(attrs: dict) -> None:
    if not is_float(attrs["dtype"]):
        fail(f"dtype must be a float dtype ({', '.join(SIGNIFICAND_BITS)}), got {attrs['dtype']}")


def require_key(s: TensorStructInfo, what: str = "key") -> None:
    """A random key is an ``int64`` 0-d tensor."""
    if s.dtype != "int64" or s.ndim not in (0, -1):
        fail(f"{what} must be an int64 0-d tensor, got {s.dtype} of shape {fmt(s.shape)}")


def _infer(args, attrs):
    require_key(args[0])
    return _T(attrs["shape"], attrs["dtype"])


def _keys(rng, sinfos, attrs):
    return [np.array(rng.integers(-2 ** 63, 2 ** 63 - 1), dtype=np.int64)]


_KEY = _T((), "int64")
uniform = register(Op(
    name="relax.random.uniform", lowering="random:uniform",
    inputs=("key",), attrs={"shape": REQUIRED, "dtype": "float32"}, infer=_infer,
    canonicalize=_canon, check_attrs=_check, gradient=NOT_DIFFERENTIABLE,
    reference=lambda key, *, shape, dtype: uniform_values(key, shape, dtype),
    samples=[Sample([_KEY], {"shape": (4, 5)}, make=_keys),
             Sample([_KEY], {"shape": ("n", 3), "dtype": "float64"}, sizes={"n": 3}),
             Sample([_KEY], {"shape": (), "dtype": "float16"}, make=_keys),
             Sample([_KEY], {"shape": (2, 3, 4), "dtype": "bfloat16"}, make=_keys),
             Sample([_KEY], {"shape": (0, 3)})],
    bad_samples=[BadSample([_T((), "float32")], {"shape": (2,)}, r"key must be an int64 0-d tensor, got float32"),
                 BadSample([_T((2,), "int64")], {"shape": (2,)}, r"key must be an int64 0-d tensor, got int64 of "
                                                                  r"shape \(2,\)"),
                 BadSample([_T((), "int32")], {"shape": (2,)}, r"key must be an int64 0-d tensor"),
                 BadSample([_KEY], {"shape": (2,), "dtype": "int32"}, r"dtype must be a float dtype"),
                 BadSample([_KEY], {"shape": (2, -1)}, r"negative dimension -1"),
                 BadSample([_KEY], {}, r"missing required attribute 'shape'")],
    doc="Uniform random numbers in ``[0, 1)`` of ``shape`` and float ``dtype``, a pure function of ``key`` (an "
        "int64 0-d tensor) and each element's flat index: ``(bits(key, i) >> (64 - p)) * 2**-p`` with "
        "``bits(key, i) = mix64(mix64(key) + (i + 1) * 0x9E3779B97F4A7C15)`` (SplitMix64) and ``p`` the dtype's "
        "significand bits (24 for float32); see the module docstring. Same key, same values, in the interpreter "
        "and in compiled code. Not differentiable: the values do not depend differentiably on the key."))
