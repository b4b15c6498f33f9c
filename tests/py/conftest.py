"""Shared test helpers: random inputs for struct info, and the round-trip check every built module goes through."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import numpy as np
import pytest
from hypothesis import settings

# Property tests draw the same examples on every run (CI must not pass or fail by luck), and keep no example
# database in the checkout; HYPOTHESIS_PROFILE=explore draws fresh ones when hunting for bugs.
settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Compiled modules go to a cache of this session (subprocesses inherit it), not the user's ~/.cache.
_CACHE = tempfile.mkdtemp(prefix="relax-mlir-test-cache-")
os.environ["RELAX_MLIR_CACHE_DIR"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, True)

from relax_mlir.ir.dtype import to_numpy
from relax_mlir.ir.struct_info import TensorStructInfo, TupleStructInfo


def random_array(rng: np.random.Generator, sinfo: TensorStructInfo, low: float = -2.0, high: float = 2.0):
    """A random array for a static tensor struct info: floats in [low, high), ints in [ceil(low), floor(high)], bools."""
    shape = tuple(sinfo.shape)
    if sinfo.dtype == "bool":
        return rng.random(shape) < 0.5
    if sinfo.dtype.startswith(("int", "uint")):
        lo = max(int(np.ceil(low)), 0) if sinfo.dtype.startswith("uint") else int(np.ceil(low))
        return rng.integers(lo, int(np.floor(high)) + 1, size=shape).astype(sinfo.dtype)
    return rng.uniform(low, high, size=shape).astype(to_numpy(sinfo.dtype))


def random_inputs(rng, sinfos, low=-2.0, high=2.0):
    out = []
    for s in sinfos:
        if isinstance(s, TupleStructInfo):
            out.append(tuple(random_array(rng, f, low, high) for f in s.fields))
        else:
            out.append(random_array(rng, s, low, high))
    return out


@pytest.fixture
def rng():
    return np.random.default_rng(0)
