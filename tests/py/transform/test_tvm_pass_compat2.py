"""CanonicalizeBindings and ConvertToDataflow on the cases of TVM's own pass tests
(``tests/python/relax/test_transform_canonicalize_bindings.py``, ``test_transform_convert_dataflow.py``) where
relax-mlir used to do less than TVM: an output aliasing a dataflow variable takes its binding, constants reach their
uses, unused outputs become dataflow variables, inconsistent ``match_cast``s are refused; a pure binding next to a
dataflow block joins it, and local functions are converted too. Each case is a Before and an Expected module written
here from TVM's case, and the interpreter runs Before and the result on the same inputs against a NumPy oracle."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import transform
from relax_mlir.ir import DataflowVar, assert_structural_equal
from relax_mlir.script import from_source
from relax_mlir.testing import roundtrip

T3 = 'R.Tensor((3,), "float32")'
X = np.array([1.0, -2.0, 0.5], "float32")
Y = np.array([3.0, 4.0, -1.5], "float32")


def _module(params: str, body: str, ret: str = ""):
    lines = "\n".join("        " + line for line in body.strip().splitlines())
    return from_source(f"@I.ir_module\nclass Module:\n    @R.function\n    def main({params}){ret}:\n{lines}\n")


def _flat(v):
    return [a for x in v for a in _flat(x)] if isinstance(v, (tuple, list)) else [np.asarray(v)]


def _check(the_pass, before, expected, args, want):
    """``the_pass`` turns ``before`` into ``expected``; both compute ``want`` (the NumPy oracle) on ``args``."""
    after = the_pass(before)
    assert_structural_equal(after, expected)
    roundtrip(after)
    for mod in (before, after):
        for got, w in zip(_flat(relax_mlir.interpret(mod, "main", *args)), _flat(want), strict=True):
            np.testing.assert_allclose(got, w, rtol=1e-6)
    return after


# --- CanonicalizeBindings ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("alias", ["n = m", f"n = R.match_cast(m, {T3})"])
def test_output_takes_the_binding_of_the_dataflow_variable_it_aliases(alias):
    # TVM test_dataflow_block / test_basic_folding_example / test_fold_match_cast: `y = ...; z = y; ...; n = m` left
    # `y = ...; n = y`; now n is bound where y was
    before = _module(f"x: {T3}", f"""
with R.dataflow():
    y = R.add(x, x)
    z = y
    m = z
    {alias}
    R.output(n)
return n""")
    expected = _module(f"x: {T3}", """
with R.dataflow():
    n = R.add(x, x)
    R.output(n)
return n""")
    _check(transform.CanonicalizeBindings(), before, expected, [X], 2 * X)


def test_outputs_aliasing_dataflow_variables_and_an_unused_output():
    # TVM test_multiple_outputs / test_single_output_multiple_nondataflow: each output takes its dataflow variable's
    # binding; an output nothing after the block uses becomes a dataflow variable
    body = """
with R.dataflow():
    a = R.add(x, y)
    b = R.multiply(x, y)
    c = R.subtract(x, y)
    l = a
    m = b
    n = c
    R.output(l, m, n)
return {ret}"""
    expected_body = """
with R.dataflow():
    l = R.add(x, y)
    m = R.multiply(x, y)
    n = R.subtract(x, y)
    R.output({outs})
return {ret}"""
    params = f"x: {T3}, y: {T3}"
    _check(transform.CanonicalizeBindings(), _module(params, body.format(ret="(l, m, n)")),
           _module(params, expected_body.format(outs="l, m, n", ret="(l, m, n)")), [X, Y], (X + Y, X * Y, X - Y))
    after = _check(transform.CanonicalizeBindings(), _module(params, body.format(ret="n")),
                   _module(params, expected_body.format(outs="n", ret="n")), [X, Y], X - Y)
    assert [isinstance(b.var, DataflowVar) for b in after["main"].body.blocks[0].bindings] == [True, True, False]


def test_a_second_output_alias_names_the_first():
    # TVM test_canonicalize_multiple_trivial_binding_to_dataflow_var: `y = lv; z = lv` -> lv becomes y, z is y
    before = _module(f"x: {T3}", """
with R.dataflow():
    lv = R.exp(x)
    y = lv
    z = lv
    R.output(y, z)
return (y, z)""")
    expected = _module(f"x: {T3}", """
with R.dataflow():
    y = R.exp(x)
    R.output(y)
return (y, y)""")
    _check(transform.CanonicalizeBindings(), before, expected, [X], (np.exp(X), np.exp(X)))


def test_a_constant_reaches_the_return_value():
    # TVM test_fold_const_to_output: the binding stays (DeadCodeElimination's to remove), its use gets the constant
    before = _module("", """
with R.dataflow():
    n = R.const(1, "int32")
    R.output(n)
return n""", ret=' -> R.Tensor((), "int32")')
    expected = _module("", """
with R.dataflow():
    n = R.const(1, "int32")
    R.output(n)
return R.const(1, "int32")""", ret=' -> R.Tensor((), "int32")')
    _check(transform.CanonicalizeBindings(), before, expected, [], np.int32(1))


def test_a_constant_field_of_a_tuple_reaches_its_uses():
    # TVM test_unwrap_tuple_of_constant: `x = tup[0]` stays as it is, and R.add gets the constants
    before = _module("", """
tup = (R.const(2, "int64"), R.const(5, "int64"))
x = tup[0]
y = tup[1]
z = R.add(x, y)
return z""")
    expected = _module("", """
tup = (R.const(2, "int64"), R.const(5, "int64"))
x = tup[0]
y = tup[1]
z = R.add(R.const(2, "int64"), R.const(5, "int64"))
return z""")
    _check(transform.CanonicalizeBindings(), before, expected, [], np.int64(7))


MATCH_CASTS = """
N1 = T.int64()
M = T.int64()
N2 = T.int64()
lhs_A = R.match_cast(A, R.Tensor([N1, M], "float32"))
lhs_B = R.match_cast(B, R.Tensor([N2, M], "float32"))
rhs = R.match_cast(state, R.Tensor([M], "float32"))
lhs = R.concat((lhs_A, lhs_B), axis=0)
out = R.matmul(lhs, rhs)
return out"""


def test_inconsistent_match_casts_are_refused():
    # TVM test_inconsistent_match_cast_raises_error: A says M = 4, B says M = 5; the cast of B could only fail
    params = 'state: R.Tensor([4], "float32"), A: R.Tensor([2, 4], "float32"), B: R.Tensor([3, 5], "float32")'
    with pytest.raises(ValueError, match=r"CanonicalizeBindings: main: MatchCast statements must be consistent: "
                                         r"binding 'lhs_A' implies size variable M = 4, but the later binding "
                                         r"'lhs_B' implies M = 5"):
        transform.CanonicalizeBindings()(_module(params, MATCH_CASTS))


def test_consistent_match_casts_are_kept():
    params = 'state: R.Tensor([4], "float32"), A: R.Tensor([2, 4], "float32"), B: R.Tensor([3, 4], "float32")'
    before = _module(params, MATCH_CASTS)
    after = transform.CanonicalizeBindings()(before)
    assert_structural_equal(after, before)
    state, a, b = (np.arange(n, dtype="float32").reshape(s) for n, s in ((4, (4,)), (8, (2, 4)), (12, (3, 4))))
    np.testing.assert_allclose(relax_mlir.interpret(after, "main", state, a, b), np.concatenate([a, b]) @ state)


# --- ConvertToDataflow ---------------------------------------------------------------------------------------------
def test_a_pure_binding_after_a_dataflow_block_joins_it():
    # TVM test_merge_with_preceding_dataflow_block: one binding (< min_size) after a block joins it; w, no longer
    # used after the block, becomes a dataflow variable
    before = _module(f"x: {T3}, y: {T3}", """
with R.dataflow():
    z = R.add(x, y)
    w = R.multiply(z, y)
    R.output(w)
v = R.add(w, x)
return v""")
    expected = _module(f"x: {T3}, y: {T3}", """
with R.dataflow():
    z = R.add(x, y)
    w = R.multiply(z, y)
    v = R.add(w, x)
    R.output(v)
return v""")
    _check(transform.ConvertToDataflow(), before, expected, [X, Y], (X + Y) * Y + X)


def test_a_pure_binding_before_a_dataflow_block_joins_it():
    # TVM test_merge_with_next_dataflow_block
    before = _module(f"x: {T3}, y: {T3}", """
z = R.add(x, y)
with R.dataflow():
    w = R.multiply(z, y)
    v = R.add(w, x)
    R.output(v)
return v""")
    expected = _module(f"x: {T3}, y: {T3}", """
with R.dataflow():
    z = R.add(x, y)
    w = R.multiply(z, y)
    v = R.add(w, x)
    R.output(v)
return v""")
    _check(transform.ConvertToDataflow(), before, expected, [X, Y], (X + Y) * Y + X)


def test_a_pure_local_function_and_its_call_are_converted():
    # TVM test_pure_inner_function: the local function's definition and call are pure bindings, and its own body
    # gets a dataflow block too
    inner = f"""
@R.function
def inner(a: {T3}, b: {T3}) -> {T3}:
{{inner_body}}"""
    inner_plain = """
    z = R.add(a, b)
    w = R.multiply(a, z)
    v = R.add(b, w)
    return v"""
    inner_dataflow = """
    with R.dataflow():
        z = R.add(a, b)
        w = R.multiply(a, z)
        v = R.add(b, w)
        R.output(v)
    return v"""
    rest = """
z = R.add(x, y)
w = R.multiply(z, z)
v = R.divide(w, z)
q = inner(w, v)
return q"""
    before = _module(f"x: {T3}, y: {T3}", inner.format(inner_body=inner_plain.strip("\n")) + rest)
    indented = "\n".join("    " + line for line in (inner.format(inner_body=inner_dataflow.strip("\n"))
                                                       + rest.replace("return q", "R.output(q)")).splitlines())
    expected = _module(f"x: {T3}, y: {T3}", "with R.dataflow():" + indented + "\nreturn q")
    w = (X + Y) * (X + Y)
    v = w / (X + Y)
    _check(transform.ConvertToDataflow(), before, expected, [X, Y], v + w * (w + v))
