"""Symbolic sizes of which one is 0 at run time: compiled code loops over nothing and allocates nothing for it.

An elementwise op over an ``(m, n)`` input with ``n = 0`` ran its outer loop ``m`` times over an empty inner one
(1.2 s at ``m = 2**31``; a static 0 folds away), as did ``zeros_like`` (a fill). A generic with two dynamic loop
extents or more, or a fill of two dynamic sizes, now runs only when none of them is 0
(``schedule/elementwise.py: skip_empty_generics``), a coalesced one too, as transposes do
(``test_empty_transpose.py``). Softmax and log_softmax over an empty axis allocated their row statistics, sized by
the other axes (``m = 2**34``: 64 GiB, a MemoryError, for an input and a result of 0 bytes): they now compute under
a branch on the axis' size, or not at all over a static empty axis (``legalize/nn.py: _softmax``). Values against
the interpreter, where there are elements too."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir.script import from_source

ROOT = Path(__file__).resolve().parents[3]

CASES = {  # name: (shape of x, expression)
    "exp": ('"m", "n"', "R.exp(x)"),
    "coalesced": ('"m", 3, "n"', "R.multiply(R.exp(x), x)"),  # (m, 3) merged into one loop, beside n
    "column_sums": ('"m", "n"', "R.sum(x, axis=[0])"),  # loops (m, n): m reduced, around an empty n
    "zeros_like": ('"m", "n"', "R.zeros_like(x)"),  # a fill
    "softmax": ('"m", "n"', "R.nn.softmax(x, axis=-1)"),
    "log_softmax": ('"m", "n"', "R.nn.log_softmax(x, axis=1)"),
    "softmax_3d": ('"m", 3, "n"', "R.nn.softmax(x, axis=2)"),
    "softmax_axis_0": ('"m", "n"', "R.nn.softmax(x, axis=0)"),  # statistics of n (0) values: loops only
    "softmax_times_x": ('"m", "n"', "R.multiply(R.nn.softmax(x, axis=-1), x)"),  # the multiply joins the branch
    "softmax_static_0": ('"m", 0', "R.nn.softmax(x)"),  # nothing to compute: the empty result at once
}


def _function(name: str, shape: str, expr: str, dtype: str = "float32") -> str:
    return f"""
    @R.function
    def {name}(x: R.Tensor(({shape}), "{dtype}")):
        with R.dataflow():
            a = {expr}
            R.output(a)
        return a
"""


SOURCE = "@I.ir_module\nclass Module:" + "".join(_function(n, s, e) for n, (s, e) in CASES.items())


@pytest.fixture(scope="module")
def compiled():
    mod = from_source(SOURCE)
    return mod, rm.VirtualMachine(rm.compile(mod, num_threads=1))


def _shapes(name: str) -> list[tuple[int, ...]]:
    if CASES[name][0].endswith(" 0"):
        return [(3, 0), (0, 0)]
    if CASES[name][0].count(",") == 2:
        return [(2, 3, 4), (2, 3, 0), (0, 3, 2), (1, 3, 1)]
    return [(3, 5), (4, 0), (0, 4), (1, 1), (2, 1)]


@pytest.mark.parametrize("name", list(CASES))
def test_values_with_and_without_elements_match_the_interpreter(compiled, name):
    mod, vm = compiled
    for shape in _shapes(name):
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        got, want = vm[name](x), rm.interpret(mod, name, x)
        assert got.shape == want.shape, (name, shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


#: the child's address space: a buffer sized by 2**40 rows (4 TiB of float32) cannot be allocated in it
CHILD_ADDRESS_SPACE = 8 * 2**30
HUGE = 2**40


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_ADDRESS_SPACE, CHILD_ADDRESS_SPACE))


def test_an_empty_axis_beside_a_huge_one_costs_nothing():
    """Every function on ``2**40`` rows of no columns (``2**38 x 3`` for the 3-d ones), in a child of 8 GiB of
    address space: a loop of ``2**40`` iterations over nothing would outlast the timeout (minutes), softmax's
    statistics of ``2**40`` rows would be a MemoryError. Each returns its (empty) result of the right shape."""
    code = textwrap.dedent(f"""
        import numpy as np, relax_mlir as rm
        from relax_mlir.script import from_source
        vm = rm.VirtualMachine(rm.compile(from_source({SOURCE!r}), num_threads=1))
        for name in {list(CASES)!r}:
            shape = ({HUGE}, 0) if name not in ("coalesced", "softmax_3d") else ({HUGE // 4}, 3, 0)
            print(name, vm[name](np.zeros(shape, np.float32)).shape, flush=True)
    """)
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, cwd=ROOT,
                              preexec_fn=_limit_address_space,
                              env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"no result in {err.timeout} s (a loop over nothing?); returned before: {err.stdout!r}")
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stdout}{proc.stderr[-3000:]}"
    want = {name: (HUGE // 4, 3, 0) if name in ("coalesced", "softmax_3d") else (HUGE, 0) for name in CASES}
    want["column_sums"] = (0,)
    assert proc.stdout.splitlines() == [f"{name} {shape}" for name, shape in want.items()]


def _scheduled(shape: str, expr: str) -> str:
    return rm.to_mlir(from_source("@I.ir_module\nclass Module:" + _function("f", shape, expr)), "scheduled")


def test_only_generics_of_two_dynamic_extents_are_guarded_once():
    """One ``scf.if`` around the generic of ``(m, n)``; none for ``(m, 784)``, whose empty case loops 784 times
    at most, nor for a static shape."""
    two = _scheduled('"m", "n"', "R.exp(x)")
    assert two.count("scf.if") == 1 and two.count("linalg.generic") == 1
    assert two.index("scf.if") < two.index("linalg.generic")
    for shape in ('"m", 784', "16, 784"):
        text = _scheduled(shape, "R.exp(x)")
        assert "scf.if" not in text and text.count("linalg.generic") == 1


@pytest.mark.parametrize("dtype, rtol", [("float16", 2e-3), ("float64", 1e-12)])
def test_softmax_of_symbolic_sizes_in_other_dtypes(dtype, rtol):
    """The branch's result tensor is of the result's dtype, the statistics of the compute type (float32 for
    float16)."""
    mod = from_source("@I.ir_module\nclass Module:" + _function("f", '"m", "n"', "R.nn.softmax(x)", dtype)
                      + _function("g", '"m", "n"', "R.nn.log_softmax(x, axis=0)", dtype))
    vm = rm.VirtualMachine(rm.compile(mod, num_threads=1))
    for shape in [(3, 5), (4, 0), (0, 4)]:
        x = np.random.default_rng(2).standard_normal(shape).astype(dtype)
        for name in ("f", "g"):
            got, want = vm[name](x), rm.interpret(mod, name, x)
            assert got.dtype == want.dtype == np.dtype(dtype) and got.shape == want.shape == shape
            np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


def test_an_elementwise_consumer_of_a_softmax_branch_is_fused_into_it():
    """Softmax over ``(m, n)``, then a multiply: the multiply is moved into the branch and fused with softmax's last
    loop (4 generics: max, ``x - max``, the sum of exps, the normalised product), as without the branch; the
    result's size checks read the branch's sizes and fold away (one ``scf.if``: the branch)."""
    text = rm.to_mlir(from_source("@I.ir_module\nclass Module:" + _function("f", *CASES["softmax_times_x"])), "fused")
    assert text.count("scf.if") == 1 and text.count("linalg.generic") == 4
    assert text.index("scf.if") < text.index("arith.mulf")


TWO_SUMS = """
@I.ir_module
class Module:
    @R.function
    def f(x: R.Tensor(("m", "n"), "float32")):
        with R.dataflow():
            a = R.sum(x, axis=[1])
            b = R.sum(R.exp(x), axis=[1])
            R.output(a, b)
        return (a, b)
"""


def test_two_guarded_sums_of_one_input_are_written_in_place():
    """Two row sums of one ``(m, n)`` input start from one fill of zeros (CSE): each guarded sum gets a fill of its
    own first, so that the guards, merged into one ``scf.if`` or not, never yield one buffer twice (four copies of
    the sums, and copies into the results, before). Values against the interpreter."""
    mod = from_source(TWO_SUMS)
    assert "memref.copy" not in rm.to_mlir(mod, "bufferized")
    f = rm.VirtualMachine(rm.compile(mod, num_threads=1))["f"]
    for shape in [(3, 5), (4, 0), (0, 4)]:
        x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
        for got, want in zip(f(x), rm.interpret(mod, "f", x)):
            assert got.shape == want.shape == shape[:1]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
