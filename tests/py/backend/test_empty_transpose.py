"""A transpose of dynamic shape with no elements costs nothing (``schedule/transpose.py: skip_empty_transposes``).

Its loops follow the result's dims: a ``(0, m)`` input transposed to ``(m, 0)`` ran the outer loop ``m`` times over an
empty inner one, 21 s for ``m = 2**34`` (a static shape folds away; NumPy returns at once). The transposes of
results with two dynamic dims or more are now skipped when empty; one with a single dynamic dim (a batch ``n``
beside a static width) is left as it was, for the schedules that read it."""

from __future__ import annotations

import time

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir.script import from_source

HUGE = 2**34


def _module(shape: str, expr: str) -> str:
    return f"""
@I.ir_module
class Module:
    @R.function
    def f(x: R.Tensor(({shape}), "float32")):
        with R.dataflow():
            a = {expr}
            R.output(a)
        return a
"""


CASES = {  # expression, NumPy's
    "transpose": ("R.permute_dims(x)", lambda x: x.T),
    "3-d": ('R.permute_dims(R.reshape(x, R.shape(["n", 1, "m"])), axes=[2, 0, 1])',
            lambda x: x.reshape(x.shape[0], 1, x.shape[1]).transpose(2, 0, 1)),
    "x x^T": ("R.matmul(x, R.permute_dims(x))", lambda x: x @ x.T),
}


@pytest.mark.parametrize("name", list(CASES))
def test_an_empty_transpose_of_symbolic_dims_returns_at_once(name):
    expr, reference = CASES[name]
    f = rm.VirtualMachine(rm.compile(from_source(_module('"n", "m"', expr)), num_threads=1))["f"]
    x = np.zeros((0, HUGE), np.float32)
    start = time.perf_counter()
    got = f(x)
    assert time.perf_counter() - start < 3.0  # 21 s for the transpose before (m loops over nothing)
    assert got.shape == reference(x).shape
    for shape in [(3, 5), (1, 7), (4, 1), (0, 3), (2, 0)]:  # values where there are elements
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        np.testing.assert_allclose(f(x), reference(x), rtol=1e-6)


def test_only_transposes_of_two_dynamic_dims_are_guarded_once():
    """The guard appears once for a transpose of ``(n, m)`` (the schedule of transposes runs twice), and not for one
    of ``(n, 784)``: its empty result loops 784 times at most."""
    two = rm.to_mlir(from_source(_module('"n", "m"', "R.permute_dims(x)")), "scheduled")
    assert two.count("scf.if") == 1 and two.count("linalg.transpose") == 1
    one = rm.to_mlir(from_source(_module('"n", 784', "R.permute_dims(x)")), "scheduled")
    assert "scf.if" not in one and "linalg.transpose" in one
