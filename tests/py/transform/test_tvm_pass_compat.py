"""Passes on the cases of TVM's own pass tests (``tests/python/relax/test_transform_*.py``) where relax-mlir used to
do less than TVM or something else: AdjustMatmulOrder on vectors and batches, TopologicalSort's tie-breaking by
parameter and output order, EliminateCommonSubexpr inside local functions and across a dataflow block's outputs,
FoldConstant's skipping of large creation ops. Each case is a Before and an Expected module written here from
TVM's case, and the interpreter runs both Before and the result on the same inputs against a NumPy oracle."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import transform
from relax_mlir.ir import assert_structural_equal
from relax_mlir.script import from_source
from relax_mlir.testing import roundtrip

MODULE = """
@I.ir_module
class Module:
    @R.function
    def main({params}):
{body}
"""


def _module(params: str, body: str):
    lines = "\n".join("        " + line for line in body.strip().splitlines())
    return from_source(MODULE.format(params=params, body=lines))


def _flat(v):
    return [a for x in v for a in _flat(x)] if isinstance(v, (tuple, list)) else [np.asarray(v)]


def _same_values(before, after, args, want, func="main"):
    """Before and after compute ``want`` (the NumPy oracle) on ``args``."""
    for mod in (before, after):
        got = relax_mlir.interpret(mod, func, *args)
        for g, w in zip(_flat(got), _flat(want), strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def _check(the_pass, before, expected, args, want):
    after = the_pass(before)
    roundtrip(after)
    assert_structural_equal(after, expected)
    _same_values(before, after, args, want)
    return after


# --- AdjustMatmulOrder: TVM's TestLHS, TestRHS, TestDynamicWithBatchConcrete*, TestBatched* -----------------------

def _sig(**shapes) -> str:
    return ", ".join(f'{n}: R.Tensor({tuple(s)!r}, "float64")' for n, s in shapes.items())


AMO_CASES = {
    # a vector times a rank-2 pair: (x @ a) @ b costs 16*2 + 2*32 = 96, x @ (a @ b) 16*2*32 + 16*32 = 1536
    "vector_first": (dict(x=(16,), a=(16, 2), b=(2, 32)),
                     "ab = R.matmul(a, b)\ny = R.matmul(x, ab)\nreturn y",
                     "ab = R.matmul(a, b)\nxa = R.matmul(x, a)\ny = R.matmul(xa, b)\nreturn y",
                     lambda x, a, b: x @ a @ b),
    # the mirror: a @ (b @ x) for a vector x on the right
    "vector_last": (dict(x=(16,), a=(32, 2), b=(2, 16)),
                    "ab = R.matmul(a, b)\ny = R.matmul(ab, x)\nreturn y",
                    "ab = R.matmul(a, b)\nbx = R.matmul(b, x)\ny = R.matmul(a, bx)\nreturn y",
                    lambda x, a, b: a @ b @ x),
    # a batch of 4 rows times two weights: (x @ a) @ b = 4*16*16 + 4*16*32 = 3072 against a @ b once (16*16*32)
    # plus 4*16*32: 10240
    "batch_of_4": (dict(x=(4, 1, 16), a=(16, 16), b=(16, 32)),
                   "ab = R.matmul(a, b)\ny = R.matmul(x, ab)\nreturn y",
                   "ab = R.matmul(a, b)\nxa = R.matmul(x, a)\ny = R.matmul(xa, b)\nreturn y",
                   lambda x, a, b: x @ a @ b),
    # a batch of 64: a @ b once (8192) plus 64*16*32 = 40960 beats 64*16*16 + 64*16*32 = 49152; a cost that
    # multiplied both orders by the batch would have kept (x @ a) @ b
    "batch_of_64": (dict(x=(64, 1, 16), a=(16, 16), b=(16, 32)),
                    "xa = R.matmul(x, a)\ny = R.matmul(xa, b)\nreturn y",
                    "xa = R.matmul(x, a)\nab = R.matmul(a, b)\ny = R.matmul(x, ab)\nreturn y",
                    lambda x, a, b: x @ a @ b),
    # broadcast batches: (a @ b) @ c = 2*1*1*2 + 2*1*2*3 = 16, a @ (b @ c) = 2*1*2*3 + 2*1*1*3 = 18
    "broadcast_batch": (dict(a=(2, 1, 1), b=(2, 1, 2), c=(2, 2, 3)),
                        "bc = R.matmul(b, c)\ny = R.matmul(a, bc)\nreturn y",
                        "bc = R.matmul(b, c)\nab = R.matmul(a, b)\ny = R.matmul(ab, c)\nreturn y",
                        lambda a, b, c: a @ b @ c),
    # a shared batch (2, 3): 6*4*5*6 + 6*4*6*7 = 1728 against 6*5*6*7 + 6*4*5*7 = 2100
    "shared_batch": (dict(a=(2, 3, 4, 5), b=(2, 3, 5, 6), c=(2, 3, 6, 7)),
                     "bc = R.matmul(b, c)\ny = R.matmul(a, bc)\nreturn y",
                     "bc = R.matmul(b, c)\nab = R.matmul(a, b)\ny = R.matmul(ab, c)\nreturn y",
                     lambda a, b, c: a @ b @ c),
}


@pytest.mark.parametrize("case", sorted(AMO_CASES))
def test_adjust_matmul_order_reorders_vectors_and_batches(case):
    shapes, before, expected, oracle = AMO_CASES[case]
    rng = np.random.default_rng(len(case))
    args = [rng.standard_normal(s) for s in shapes.values()]
    _check(transform.AdjustMatmulOrder(), _module(_sig(**shapes), before), _module(_sig(**shapes), expected),
           args, oracle(*args))


def test_adjust_matmul_order_keeps_a_weight_product_before_a_vector():
    """TVM's TestPreserveCompileTimeMatmulOnLHS: ``(a @ b) @ x`` with weights ``a``, ``b`` (``num_input``) is
    computed once ahead of time, so the cheaper ``a @ (b @ x)`` is not taken."""
    sig = _sig(x=(16,), a=(32, 2), b=(2, 16))
    before = _module(sig, 'R.func_attr({"num_input": 1})\nab = R.matmul(a, b)\ny = R.matmul(ab, x)\nreturn y')
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s) for s in ((16,), (32, 2), (2, 16))]
    _check(transform.AdjustMatmulOrder(), before, before, args, args[1] @ args[2] @ args[0])


def test_adjust_matmul_order_leaves_a_vector_in_the_middle():
    """``x @ (v @ c)`` with a 1-D ``v``: ``v`` would be a column in ``x @ v`` but is a row in ``v @ c``, so the
    two orders are not the same product; the chain is left alone."""
    sig = _sig(x=(3, 4), v=(4,), c=(4, 5))
    before = _module(sig, "vc = R.matmul(v, c)\nxv = R.matmul(x, v)\nreturn (vc, xv)")
    assert_structural_equal(transform.AdjustMatmulOrder()(before), before)
    chain = _module(_sig(x=(1, 5), v=(5,), c=(5, 5)), "vc = R.matmul(v, c)\ny = R.matmul(x, vc)\nreturn y")
    assert_structural_equal(transform.AdjustMatmulOrder()(chain), chain)


# --- TopologicalSort: TVM's test_depth_first_from_input_with_multiple_inputs and from_output_tuple_* ------------

TOPO_PARAMS = 'a: R.Tensor((3,), "float64"), b1: R.Tensor((3,), "float64"), b2: R.Tensor((3,), "float64")'


def test_depth_first_from_inputs_follows_the_parameter_order():
    """``b1``'s chain goes first because ``b1`` comes before ``b2`` among the parameters, whatever order the chains
    were written in."""
    before = _module(TOPO_PARAMS, """
with R.dataflow():
    c2 = R.add(a, b2)
    c1 = R.add(a, b1)
    d2 = R.add(a, c2)
    d1 = R.add(a, c1)
    e = R.multiply(d1, d2)
    R.output(e)
return e""")
    expected = _module(TOPO_PARAMS, """
with R.dataflow():
    c1 = R.add(a, b1)
    d1 = R.add(a, c1)
    c2 = R.add(a, b2)
    d2 = R.add(a, c2)
    e = R.multiply(d1, d2)
    R.output(e)
return e""")
    a, b1, b2 = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 4.0]), np.array([2.0, 0.0, -3.0])
    _check(transform.TopologicalSort("depth-first", "from-inputs"), before, expected, [a, b1, b2],
           (a + (a + b1)) * (a + (a + b2)))


@pytest.mark.parametrize("bound", [True, False])
def test_depth_first_from_outputs_follows_the_order_outputs_are_used(bound):
    """The function returns ``(c1, c2)``: ``c1``'s operands go first, though ``c2``'s were written first."""
    tail = "gv = (c1, c2)\nreturn gv" if bound else "return (c1, c2)"
    before = _module('a: R.Tensor((3,), "float64")', """
with R.dataflow():
    b2 = R.add(a, R.const(2.0, "float64"))
    b1 = R.add(a, R.const(1.0, "float64"))
    c2 = R.multiply(a, b2)
    c1 = R.multiply(a, b1)
    R.output(c1, c2)
""" + tail)
    expected = _module('a: R.Tensor((3,), "float64")', """
with R.dataflow():
    b1 = R.add(a, R.const(1.0, "float64"))
    c1 = R.multiply(a, b1)
    b2 = R.add(a, R.const(2.0, "float64"))
    c2 = R.multiply(a, b2)
    R.output(c1, c2)
""" + tail)
    a = np.array([1.0, -2.0, 0.5])
    _check(transform.TopologicalSort("depth-first", "from-outputs"), before, expected, [a],
           (a * (a + 1), a * (a + 2)))


# --- EliminateCommonSubexpr: TVM's test_inner_function and test_no_replacement_across_dataflow_boundary ---------

def test_cse_inside_a_local_function_and_of_its_calls():
    """Inside the local function ``bar`` ``R.add(y, y)`` is shared; outside, the calls ``bar(x)`` of the pure
    local function are (TVM shares both; each function has its own table)."""
    sig = 'x: R.Tensor((), "int32")'
    before = _module(sig, """
with R.dataflow():
    @R.function
    def bar(y: R.Tensor((), "int32")) -> R.Tensor((), "int32"):
        with R.dataflow():
            p = R.add(y, y)
            q = R.add(y, y)
            r = R.multiply(p, q)
            R.output(r)
        return R.add(r, y)
    u = bar(x)
    v = bar(x)
    w = R.subtract(u, v)
    s = R.add(u, w)
    R.output(s)
return s""")
    expected = _module(sig, """
with R.dataflow():
    @R.function
    def bar(y: R.Tensor((), "int32")) -> R.Tensor((), "int32"):
        with R.dataflow():
            p = R.add(y, y)
            r = R.multiply(p, p)
            R.output(r)
        return R.add(r, y)
    u = bar(x)
    w = R.subtract(u, u)
    s = R.add(u, w)
    R.output(s)
return s""")
    x = np.array(3, np.int32)
    _check(transform.EliminateCommonSubexpr(), before, expected, [x], np.array(4 * 9 + 3, np.int32))


def test_cse_does_not_share_a_value_across_a_local_function_boundary():
    """``R.add(x, x)`` inside the local function is not the enclosing function's ``R.add(x, x)``: their tables are
    separate, as in TVM (the inner one may run under other bindings of what it captures)."""
    text = """
t = R.add(x, x)
@R.function
def f(z: R.Tensor((2,), "float64")) -> R.Tensor((2,), "float64"):
    k = R.add(x, x)
    return R.multiply(k, z)
out = f(t)
return out"""
    before = _module('x: R.Tensor((2,), "float64")', text)
    assert_structural_equal(transform.EliminateCommonSubexpr()(before), before)


def test_cse_calls_of_impure_functions_stay():
    """A call of a ``pure=False`` local function is not shared (it may do something besides its value)."""
    text = """
@R.function(pure=False)
def g(z: R.Tensor((2,), "float64")) -> R.Tensor((2,), "float64"):
    return R.add(z, z)
a = g(x)
b = g(x)
return (a, b)"""
    before = from_source(MODULE.replace("@R.function\n", "@R.function(pure=False)\n").format(
        params='x: R.Tensor((2,), "float64")', body="\n".join("        " + ln for ln in text.strip().splitlines())))
    assert_structural_equal(transform.EliminateCommonSubexpr()(before), before)


def test_cse_reads_the_dataflow_variable_inside_the_block_and_the_output_after_it():
    """``b`` repeats ``a`` but leaves the block: it stays as an alias of ``a``; inside the block its uses read
    ``a``, and after the block ``R.add(x, y)`` again is ``b`` (``a`` is out of scope there)."""
    sig = 'x: R.Tensor((2, 3), "float64"), y: R.Tensor((2, 3), "float64")'
    before = _module(sig, """
with R.dataflow():
    a = R.add(x, y)
    b = R.add(x, y)
    c = R.multiply(a, b)
    R.output(b, c)
d = R.add(x, y)
return (b, c, d)""")
    expected = _module(sig, """
with R.dataflow():
    a = R.add(x, y)
    b = a
    c = R.multiply(a, a)
    R.output(b, c)
return (b, c, b)""")
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    _check(transform.EliminateCommonSubexpr(), before, expected, [x, y], (x + y, (x + y) ** 2, x + y))


# --- FoldConstant: TVM's test_skip_folding_large_creation_op, test_fold_small/boundary_creation_op -------------

def test_fold_constant_skips_creation_ops_over_1024_elements():
    """``R.zeros((2048,))``, ``R.ones((32, 33))`` (1056), ``R.full`` and ``R.arange`` of more than 1024 elements
    stay calls; ``R.zeros((1024,))`` (the threshold itself) and an op on a tensor constant are folded, however
    large."""
    sig = 'x: R.Tensor((2048,), "float64")'
    body = """
z = R.zeros((2048,), "float64")
o = R.ones((32, 33), "float64")
f = R.full((2048,), R.const(1.5, "float64"), "float64")
r = R.arange(0, 2048, 1, "float64")
small = R.zeros((1024,), "float64")
big = R.tile(R.const([1.0, 2.0], "float64"), (1024,))
return (R.add(x, z), o, f, r, small, big)"""
    before = _module(sig, body)
    after = transform.FoldConstant()(before)
    roundtrip(after)
    values = {b.var.name_hint: b.value for block in after["main"].blocks for b in block.bindings}
    assert [n for n in ("z", "o", "f", "r", "small", "big") if type(values[n]).__name__ == "Constant"] == \
        ["small", "big"]
    x = np.linspace(-1.0, 1.0, 2048)
    _same_values(before, after, [x], (x, np.ones((32, 33)), np.full(2048, 1.5), np.arange(2048.0),
                                      np.zeros(1024), np.tile([1.0, 2.0], 1024)))
