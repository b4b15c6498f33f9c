"""Graph patterns over several bindings (relax_mlir.dpl.PatternContext, rewrite_bindings, TVM's): matching with
shared sub-patterns and distinct bindings, used_by / only_used_by edges, the QKV rewrite checked against the
interpreter, and the errors a wrong rewriter gets."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relax_mlir as rm
from relax_mlir import op
from relax_mlir.dpl import PatternContext, is_op, is_var, rewrite_bindings, wildcard
from relax_mlir.ir import IRModule, check_well_formed
from relax_mlir.ir.expr import TupleGetItem
from relax_mlir.script import from_source

QKV = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 4), "float64"), y: R.Tensor((2, 4), "float64"), wq: R.Tensor((4, 3), "float64"),
             wk: R.Tensor((4, 3), "float64"), wv: R.Tensor((4, 3), "float64")):
        with R.dataflow():
            q = R.matmul(x, wq)
            other = R.matmul(y, wk)
            k = R.matmul(x, wk)
            v = R.matmul(x, wv)
            s = R.add(R.add(q, k), R.add(v, other))
            R.output(s)
        return s
"""


def _qkv_context():
    with PatternContext() as ctx:
        inp, wq, wk, wv = wildcard(), wildcard(), wildcard(), wildcard()
        q = is_op("relax.matmul")(inp, wq)
        k = is_op("relax.matmul")(inp, wk)
        v = is_op("relax.matmul")(inp, wv)
    return ctx, (inp, wq, wk, wv), (q, k, v)


def _names(matchings, patterns):
    return [matchings[p].name_hint for p in patterns]


def test_roots_share_sub_patterns_and_take_distinct_bindings():
    func = from_source(QKV)["main"]
    ctx, (inp, wq, wk, wv), roots = _qkv_context()
    assert ctx.roots() == list(roots)
    m = ctx.match_dfb(func.body.blocks[0])
    # `other` reads y, not the input the three share: never part of the match
    assert _names(m, roots) == ["q", "k", "v"]
    assert _names(m, (inp, wq, wk, wv)) == ["x", "wq", "wk", "wv"]


def test_no_match_when_a_root_has_no_binding_left():
    func = from_source(QKV.replace("v = R.matmul(x, wv)", "v = R.multiply(x, R.const(2.0, \"float64\"))")
                       .replace("wv: R.Tensor((4, 3)", "wv: R.Tensor((2, 4)").replace(
        "R.add(v, other)", "R.add(R.sum(v, axis=[1], keepdims=True), other)"))["main"]
    ctx, _, _ = _qkv_context()
    assert ctx.match_dfb(func.body.blocks[0]) is None


def _qkv_rewriter(pats, roots):
    inp, wq, wk, wv = pats

    def rewriter(m, bindings):
        assert all(bindings[m[r]].op.name == "relax.matmul" for r in roots)  # each root's variable, to its value
        parts = op.split(op.matmul(m[inp], op.concat([m[wq], m[wk], m[wv]], axis=1)), 3, axis=1)
        return {m[r]: TupleGetItem(parts, i) for i, r in enumerate(roots)}
    return rewriter


def test_rewrite_bindings_combines_the_three_products_and_keeps_the_values():
    mod = from_source(QKV)
    ctx, pats, roots = _qkv_context()
    new = rewrite_bindings(ctx, _qkv_rewriter(pats, roots), mod["main"])
    out = IRModule({"main": new})
    check_well_formed(out)
    calls = [b.value.op.name for b in new.body.blocks[0].bindings if hasattr(getattr(b.value, "op", None), "name")]
    assert calls.count("relax.matmul") == 2 and calls.count("relax.concat") == 1 and calls.count("relax.split") == 1
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((2, 4)), rng.standard_normal((2, 4))] + [rng.standard_normal((4, 3)) for _ in range(3)]
    np.testing.assert_allclose(rm.interpret(out, "main", *args), rm.interpret(mod, "main", *args), rtol=1e-12)
    # printed and parsed back, the same module
    assert from_source(out.script()).script() == out.script()


def test_used_by_and_only_used_by_edges():
    text = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32")):
        with R.dataflow():
            a = R.exp(x)
            b = R.negative(a)
            c = R.exp(b)
            d = R.negative(c)
            e = R.add(c, d)
            R.output(e)
        return e
"""
    block = from_source(text)["main"].body.blocks[0]
    with PatternContext() as ctx:
        producer = is_op("relax.exp")(wildcard())
        consumer = is_op("relax.negative")(wildcard())
        producer.only_used_by(consumer)
    m = ctx.match_dfb(block)
    assert (m[producer].name_hint, m[consumer].name_hint) == ("a", "b")  # c is also read by e
    with PatternContext() as ctx:
        producer = is_op("relax.exp")(wildcard())
        consumer = is_op("relax.add")(wildcard(), wildcard())
        producer ^ consumer
    m = ctx.match_dfb(block)
    assert (m[producer].name_hint, m[consumer].name_hint) == ("c", "e")
    with PatternContext() as ctx:
        x, user = is_var("x"), wildcard()
        x.used_by(user, 0)
    assert ctx.match_dfb(block)[user].name_hint == "a"
    with PatternContext() as ctx:
        producer = is_op("relax.exp")(wildcard())
        producer >> is_op("relax.add")(wildcard(), wildcard())
    assert ctx.match_dfb(block) is None  # c feeds e and d


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(["x", "y"]), min_size=2, max_size=6), st.integers(0, 2**31))
def test_pairs_of_products_of_one_input_are_merged_until_none_is_left(inputs, seed):
    """Random blocks of matmuls of x or y: every pair reading one input is merged, the values stay."""
    lines = "\n".join(f"            m{i} = R.matmul({src}, w{i})" for i, src in enumerate(inputs))
    total = " ".join(f"R.add(m{i}," for i in range(len(inputs) - 1)) + f" m{len(inputs) - 1}" + ")" * (len(inputs) - 1)
    params = ", ".join(f"w{i}: R.Tensor((4, 2), \"float64\")" for i in range(len(inputs)))
    text = f"""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 4), "float64"), y: R.Tensor((3, 4), "float64"), {params}):
        with R.dataflow():
{lines}
            s = {total}
            R.output(s)
        return s
"""
    mod = from_source(text)
    with PatternContext() as ctx:
        inp, wa, wb = wildcard(), wildcard(), wildcard()
        ma = is_op("relax.matmul")(inp, wa.has_shape((4, 2)))
        mb = is_op("relax.matmul")(inp, wb.has_shape((4, 2)))

    def rewriter(m, bindings):
        parts = op.split(op.matmul(m[inp], op.concat([m[wa], m[wb]], axis=1)), 2, axis=1)
        return {m[ma]: TupleGetItem(parts, 0), m[mb]: TupleGetItem(parts, 1)}

    new = rewrite_bindings(ctx, rewriter, mod["main"])
    out = IRModule({"main": new})
    check_well_formed(out)
    pairs = sum(inputs.count(s) // 2 for s in ("x", "y"))
    calls = [b.value.op.name for b in new.body.blocks[0].bindings if hasattr(getattr(b.value, "op", None), "name")]
    assert calls.count("relax.concat") == pairs
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal((3, 4)), rng.standard_normal((3, 4))] + [rng.standard_normal((4, 2)) for _ in inputs]
    np.testing.assert_allclose(rm.interpret(out, "main", *args), rm.interpret(mod, "main", *args), rtol=1e-12)


def test_a_wrong_rewriter_gets_a_clear_error():
    mod = from_source(QKV)
    ctx, (inp, *_), roots = _qkv_context()
    with pytest.raises(ValueError, match="'x', which is not a variable bound in the matched block"):
        rewrite_bindings(ctx, lambda m, b: {m[inp]: m[inp]}, mod["main"])
    with pytest.raises(ValueError, match=r"new value of 'q' has struct info"):
        rewrite_bindings(ctx, lambda m, b: {m[roots[0]]: op.sum(m[roots[0]])}, mod["main"])
    with pytest.raises(ValueError, match="still matching after"):
        rewrite_bindings(ctx, lambda m, b: {m[roots[0]]: op.matmul(m[inp], b[m[roots[0]]].args[1])}, mod["main"])
    with pytest.raises(ValueError, match="no active PatternContext"):
        wildcard().used_by(wildcard())
    with pytest.raises(ValueError, match="extends the enclosing context; there is none"):
        PatternContext(incremental=True)


def test_an_empty_answer_leaves_the_function():
    func = from_source(QKV)["main"]
    ctx, _, _ = _qkv_context()
    assert rewrite_bindings(ctx, lambda m, b: {}, func) is func
