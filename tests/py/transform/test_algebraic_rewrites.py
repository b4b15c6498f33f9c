"""The algebraic rewrites (AdjustMatmulOrder, ExpandMatmulOfSum, RemoveRedundantReshape,
ReorderPermuteDimsAfterConcat, ReorderTakeAfterMatmul): each fires where it should, leaves alone what it must, and
keeps the values the interpreter computes (random shapes drawn by hypothesis; float64 data, so reassociated matmuls
agree to 1e-12 relative)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relax_mlir
from relax_mlir import transform
from relax_mlir.script import from_source
from relax_mlir.testing import roundtrip

SETTINGS = settings(max_examples=40, deadline=None)
RUNS = {"programs": 0}


def _ops(mod) -> list[str]:
    return [b.value.op.name for block in mod["main"].body.blocks for b in block.bindings
            if hasattr(b.value, "op") and hasattr(b.value.op, "name")]


def _check(before_text: str, the_pass, args, fires: bool):
    before = from_source(before_text)
    after = the_pass(before)
    roundtrip(after)
    want = relax_mlir.interpret(before, "main", *args)
    got = relax_mlir.interpret(after, "main", *args)
    pairs = zip(got, want) if isinstance(want, tuple) else [(got, want)]
    for g, w in pairs:
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12, atol=1e-12)
    changed = _ops(after) != _ops(before) or after.script() != before.script()
    assert changed == fires, f"{the_pass.info.name} {'did not fire' if fires else 'fired'}:\n{after.script()}"
    RUNS["programs"] += 1
    return after


def _rand(rng, *shape):
    return rng.standard_normal(shape)


@SETTINGS
@given(st.integers(1, 9), st.integers(1, 9), st.integers(1, 9), st.integers(1, 9), st.integers(0, 2**31))
def test_adjust_matmul_order_picks_the_cheaper_order(m, k, r, n, seed):
    rng = np.random.default_rng(seed)
    args = [_rand(rng, m, k), _rand(rng, k, r), _rand(rng, r, n)]
    sig = f'x: R.Tensor(({m}, {k}), "float64"), a: R.Tensor(({k}, {r}), "float64"), b: R.Tensor(({r}, {n}), "float64")'
    left, right = m * k * r + m * r * n, k * r * n + m * k * n
    right_first = f"""
@I.ir_module
class Module:
    @R.function
    def main({sig}):
        ab = R.matmul(a, b)
        y = R.matmul(x, ab)
        return y
"""
    left_first = right_first.replace("ab = R.matmul(a, b)\n        y = R.matmul(x, ab)",
                                     "xa = R.matmul(x, a)\n        y = R.matmul(xa, b)")
    _check(right_first, transform.AdjustMatmulOrder(), args, fires=left < right)
    _check(left_first, transform.AdjustMatmulOrder(), args, fires=right < left)


def test_adjust_matmul_order_leaves_symbolic_sizes_and_weight_products():
    sym = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 64), "float64"), a: R.Tensor((64, 2), "float64"), b: R.Tensor((2, 64), "float64")):
        ab = R.matmul(a, b)
        y = R.matmul(x, ab)
        return y
"""
    rng = np.random.default_rng(0)
    args = [_rand(rng, 3, 64), _rand(rng, 64, 2), _rand(rng, 2, 64)]
    _check(sym, transform.AdjustMatmulOrder(), args, fires=False)
    weights = sym.replace('("n", 64)', "(8, 64)").replace("        ab = R.matmul(a, b)",
                                                          '        R.func_attr({"num_input": 1})\n        ab = R.matmul(a, b)')
    _check(weights, transform.AdjustMatmulOrder(), [_rand(rng, 8, 64), args[1], args[2]], fires=False)


@SETTINGS
@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 6), st.booleans(), st.integers(0, 2**31))
def test_expand_matmul_of_sum(m, k, n, broadcast, seed):
    rng = np.random.default_rng(seed)
    b_shape = (n,) if broadcast else (k, n)
    text = f"""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(({m}, {k}), "float64"), a: R.Tensor(({k}, {n}), "float64"), b: R.Tensor({b_shape}, "float64")):
        s = R.add(a, b)
        y = R.matmul(x, s)
        return y
"""
    after = _check(text, transform.ExpandMatmulOfSum(), [_rand(rng, m, k), _rand(rng, k, n), _rand(rng, *b_shape)],
                   fires=not broadcast)
    if not broadcast:
        assert _ops(after).count("relax.matmul") == 2


def test_expand_matmul_of_sum_keeps_a_sum_of_weights():
    text = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 4), "float64"), a: R.Tensor((4, 3), "float64"), b: R.Tensor((4, 3), "float64")):
        R.func_attr({"num_input": 1})
        s = R.add(a, b)
        y = R.matmul(x, s)
        return y
"""
    rng = np.random.default_rng(1)
    _check(text, transform.ExpandMatmulOfSum(), [_rand(rng, 2, 4), _rand(rng, 4, 3), _rand(rng, 4, 3)], fires=False)


@SETTINGS
@given(st.lists(st.integers(1, 4), min_size=2, max_size=4), st.integers(0, 2**31), st.data())
def test_remove_redundant_reshape(shape, seed, data):
    total = int(np.prod(shape))
    flat = (total,)
    middle = data.draw(st.sampled_from([flat, tuple(shape), (1, total)]), "middle shape")
    last = data.draw(st.sampled_from([flat, middle, tuple(shape)]), "last shape")
    text = f"""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor({tuple(shape)}, "float64")):
        a = R.reshape(x, {middle})
        b = R.reshape(a, {last})
        return b
"""
    after = _check(text, transform.RemoveRedundantReshape(), [np.random.default_rng(seed).standard_normal(shape)],
                   fires=True)  # either a is the identity (dropped) or b folds onto x
    clean = transform.Sequential([transform.CanonicalizeBindings(), transform.DeadCodeElimination()])(after)
    assert _ops(clean).count("relax.reshape") == (0 if last == tuple(shape) else 1), clean.script()


def test_reorder_take_after_matmul_only_on_the_weights_columns():
    rng = np.random.default_rng(2)
    args = [_rand(rng, 3, 4), _rand(rng, 4, 6), np.array([5, 0, 2, 2], "int64")]
    text = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 4), "float64"), w: R.Tensor((4, 6), "float64"), idx: R.Tensor((4,), "int64")):
        wi = R.take(w, idx, axis=1)
        y = R.matmul(x, wi)
        return y
"""
    after = _check(text, transform.ReorderTakeAfterMatmul(), args, fires=True)
    assert _ops(after)[-1] == "relax.take"
    rows = text.replace("axis=1", "axis=0").replace("(4, 6)", "(6, 4)")
    _check(rows, transform.ReorderTakeAfterMatmul(), [args[0][:, :4], _rand(rng, 6, 4), np.array([5, 0, 2, 2])],
           fires=False)


@SETTINGS
@given(st.integers(0, 2), st.permutations([0, 1, 2]), st.booleans(), st.integers(0, 2**31))
def test_reorder_permute_dims_after_concat(axis, perm, same, seed):
    rng = np.random.default_rng(seed)
    base = [2, 3, 4]
    a_shape = list(base)
    b_src_shape = list(base)
    b_src_shape[perm[axis]] = 5  # b differs along the concatenated axis (after permuting)
    other = list(perm) if same else list(reversed(perm))
    b_perm = list(perm) if same else other
    if not same:
        # b's own permutation must still give a concatenable shape: keep it the same tensor shape after permuting
        b_src_shape = [0, 0, 0]
        want = [a_shape[p] for p in perm]
        want[axis] = 5
        for i, p in enumerate(b_perm):
            b_src_shape[p] = want[i]
    text = f"""
@I.ir_module
class Module:
    @R.function
    def main(a: R.Tensor({tuple(a_shape)}, "float64"), b: R.Tensor({tuple(b_src_shape)}, "float64")):
        pa = R.permute_dims(a, {list(perm)})
        pb = R.permute_dims(b, {b_perm})
        y = R.concat((pa, pb), axis={axis})
        return y
"""
    fires = same or list(perm) == b_perm
    after = _check(text, transform.ReorderPermuteDimsAfterConcat(),
                   [_rand(rng, *a_shape), _rand(rng, *b_src_shape)], fires=fires)
    if fires:
        assert _ops(after)[-1] == "relax.permute_dims"


def teardown_module(module):
    print(f"\nalgebraic rewrites: {RUNS['programs']} programs run")


@pytest.mark.parametrize("name", ["AdjustMatmulOrder", "ExpandMatmulOfSum", "RemoveRedundantReshape",
                                  "ReorderPermuteDimsAfterConcat", "ReorderTakeAfterMatmul", "FuseTransposeMatmul",
                                  "FastMathTransform"])
def test_registered_under_tvms_name(name):
    assert transform.PASSES[name] is getattr(transform, name)


@SETTINGS
@given(st.integers(1, 5), st.integers(1, 5), st.lists(st.integers(1, 6), min_size=1, max_size=4), st.booleans(),
       st.integers(0, 2**31))
def test_combine_parallel_matmul(m, k, widths, dataflow, seed):
    rng = np.random.default_rng(seed)
    params = ", ".join(f'w{i}: R.Tensor(({k}, {n}), "float64")' for i, n in enumerate(widths))
    lines = [f"y{i} = R.matmul(x, w{i})" for i in range(len(widths))]
    lines.append("z = R.matmul(x, w0)")  # a repeat: combined too
    lines.append(f"s = R.add(R.sum(z), R.sum(y{len(widths) - 1}))")
    if dataflow:
        body = "\n".join(f"            {line}" for line in lines) + "\n            R.output(s)\n        return s"
        body = "        with R.dataflow():\n" + body
    else:
        body = "\n".join(f"        {line}" for line in lines) + "\n        return s"
    text = f"""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(({m}, {k}), "float64"), {params}):
{body}
"""
    args = [_rand(rng, m, k)] + [_rand(rng, k, n) for n in widths]
    after = _check(text, transform.CombineParallelMatmul(), args, fires=True)
    assert _ops(after).count("relax.matmul") == 1 and "relax.split" in _ops(after)


def test_combine_parallel_matmul_leaves_what_it_cannot_merge():
    text = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 4), "float64"), u: R.Tensor((2, 4), "float64"), a: R.Tensor((4, 3), "float64"),
             b: R.Tensor((3, 5), "float64"), c: R.Tensor((4, 3), "float64")):
        ya = R.matmul(x, a)
        yu = R.matmul(u, c)
        late = R.add(c, c)
        yl = R.matmul(x, late)
        yb = R.matmul(ya, b)
        return (yb, yu, yl)
"""
    rng = np.random.default_rng(3)
    args = [_rand(rng, 2, 4), _rand(rng, 2, 4), _rand(rng, 4, 3), _rand(rng, 3, 5), _rand(rng, 4, 3)]
    # x @ a and x @ late share x, but `late` is computed after x @ a: not combined; the others share nothing
    _check(text, transform.CombineParallelMatmul(), args, fires=False)
    merged = text.replace("        late = R.add(c, c)\n", "").replace("R.matmul(x, late)", "R.matmul(x, c)")
    _check(merged, transform.CombineParallelMatmul(), args, fires=True)
    _check(merged, transform.CombineParallelMatmul(check=lambda x, weights: False), args, fires=False)


def _const(a: np.ndarray) -> str:
    return f'R.const({a.tolist()}, "float64")'


@SETTINGS
@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 3), st.booleans(), st.booleans(), st.integers(0, 2**31))
def test_fold_batchnorm_to_conv2d(cin, cout, kernel, training, weight_is_param, seed):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((cout, cin, kernel, kernel))
    gamma, beta, mean = rng.standard_normal(cout), rng.standard_normal(cout), rng.standard_normal(cout)
    var = rng.uniform(0.1, 2.0, cout)
    weight = "w" if weight_is_param else _const(w)
    text = f"""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, {cin}, 5, 5), "float64"), w: R.Tensor({w.shape}, "float64")):
        c = R.nn.conv2d(x, {weight}, padding=(1, 1, 1, 1))
        bn = R.nn.batch_norm(c, {_const(gamma)}, {_const(beta)}, {_const(mean)}, {_const(var)}, axis=1, epsilon=0.001, training={training})
        y = bn[0]
        return (y, bn[1])
"""
    after = _check(text, transform.FoldBatchnormToConv2D(), [rng.standard_normal((2, cin, 5, 5)), w],
                   fires=not training and not weight_is_param)
    if not training and not weight_is_param:
        clean = transform.DeadCodeElimination()(after)
        assert "relax.nn.batch_norm" in _ops(clean)  # bn[1] is still returned; y no longer reads it


@SETTINGS
@given(st.integers(2, 3), st.booleans(), st.booleans(), st.integers(1, 4), st.integers(0, 2**31))
def test_fuse_transpose_matmul(ndim, swap, shared, k, seed):
    """Fused exactly when the transpose swaps the last two axes and only the matmul reads it; the values do not
    change (the group computes the same ops)."""
    rng = np.random.default_rng(seed)
    batch = (3,) * (ndim - 2)
    if swap:
        axes = "" if ndim == 2 and seed % 2 else f", {list(range(ndim - 2)) + [ndim - 1, ndim - 2]}"
        w_shape = (*batch, 5, k)
    else:  # a 3-D permutation that moves the batch axis (2-D has only the swap and the identity)
        axes = f", {[0, 1] if ndim == 2 else [1, 0, 2]}"
        w_shape = (k, 5) if ndim == 2 else (k, 3, 5)
    out = "(wt, y)" if shared else "y"
    text = f"""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor({(*batch, 2, k)}, "float64"), w: R.Tensor({w_shape}, "float64")):
        wt = R.permute_dims(w{axes})
        y = R.matmul(x, wt)
        return {out}
"""
    args = [_rand(rng, *batch, 2, k), _rand(rng, *w_shape)]
    after = _check(text, transform.FuseTransposeMatmul(), args, fires=swap and not shared)
    fused = [name for name, _ in after.items() if name.startswith("fused_transpose_matmul_fuse")]
    assert len(fused) == (1 if swap and not shared else 0)
    if fused:
        assert after[fused[0]].attrs["Composite"] == "transpose_matmul_fuse"
        got = relax_mlir.VirtualMachine(relax_mlir.compile(after))["main"](*args)
        np.testing.assert_allclose(got, relax_mlir.interpret(from_source(text), "main", *args), rtol=1e-12)
