"""epilogue.py: an elementwise op that is the only reader of a matmul's result runs in the matmul's register tiles."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relax_mlir.backend import host as host_module
from relax_mlir.backend.pipeline import PipelineOptions, lower
from relax_mlir.backend.runtime import compile_module

# A weight's gradient ``g = x^T d`` (K = the batch, ``k``) and an SGD-like update of ``w`` reading it, with a
# per-column vector ``c`` (a broadcast row), a 0-d learning rate ``lr`` and constants: the update's body is what
# the tiles must compute. ``{extra}`` is put between the matmul and the update.
_UPDATE = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
#scalar = affine_map<(d0, d1) -> ()>
func.func @main(%x: tensor<{k}x{m}xf32>, %d: tensor<{k}x{n}xf32>, %w: tensor<{m}x{n}xf32>, %c: tensor<{n}xf32>,
                %lr: tensor<f32>) -> (tensor<{m}x{n}xf32>{extra_type}) {{
  %zero = arith.constant 0.0 : f32
  %wd = arith.constant 0.25 : f32
  %e = tensor.empty() : tensor<{m}x{n}xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %et = tensor.empty() : tensor<{m}x{k}xf32>
  %xt = linalg.transpose ins(%x : tensor<{k}x{m}xf32>) outs(%et : tensor<{m}x{k}xf32>) permutation = [1, 0]
  %g = linalg.matmul ins(%xt, %d : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) outs(%acc : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  {extra}
  %new = linalg.generic {{indexing_maps = [#id, #id, #col, #scalar, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%w, %g, {col}, %lr : tensor<{m}x{n}xf32>, tensor<{m}x{n}xf32>, tensor<{n}xf32>, tensor<f32>)
      outs(%e : tensor<{m}x{n}xf32>) {{
  ^bb0(%wi: f32, %gi: f32, %ci: f32, %l: f32, %o: f32):
    %decay = arith.mulf %wi, %wd : f32
    %sum = arith.addf %decay, %gi : f32
    %scaled = arith.mulf %sum, %ci : f32
    %step = arith.mulf %scaled, %l : f32
    %next = arith.subf %wi, %step : f32
    linalg.yield %next : f32
  }} -> tensor<{m}x{n}xf32>
  return %new{extra_result} : tensor<{m}x{n}xf32>{extra_type}
}}
"""

# ``%s``, the column sums of the product: computed after it from it, so the update's tiles cannot read it (and
# returned too).
_LATE = """%es = tensor.empty() : tensor<{n}xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%es : tensor<{n}xf32>) -> tensor<{n}xf32>
  %s = linalg.generic {{indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}}
      ins(%g : tensor<{m}x{n}xf32>) outs(%sz : tensor<{n}xf32>) {{
  ^bb0(%gi: f32, %o: f32):
    %t = arith.addf %gi, %o : f32
    linalg.yield %t : f32
  }} -> tensor<{n}xf32>"""


def _module(m: int, n: int, late: bool = False, k: int = 64) -> str:
    if late:
        return _UPDATE.format(m=m, n=n, k=k, extra=_LATE.format(m=m, n=n), col="%s", extra_type=f", tensor<{n}xf32>",
                              extra_result=", %s")
    return _UPDATE.format(m=m, n=n, k=k, extra="", col="%c", extra_type="", extra_result="")


def _check_values(text: str, m: int, n: int, threads: int, late: bool = False, k: int = 64) -> None:
    rng = np.random.default_rng(m + n)
    x, d = rng.standard_normal((k, m)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    w, c = rng.standard_normal((m, n)).astype(np.float32), rng.uniform(0.5, 1.5, n).astype(np.float32)
    lr = np.array(0.125, np.float32)
    got = compile_module(text, options=PipelineOptions(num_threads=threads))["main"](x, d, w, c, lr)
    got = got[0] if late else got
    g = x.astype(np.float64).T @ d
    col = g.sum(axis=0) if late else c
    want = w - (0.25 * w + g) * col * 0.125
    scale = np.abs(col).max() if late else 1.0  # (the column sums' own float32 error, times g)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * k * scale)  # float32 sums of k products


@pytest.mark.parametrize("m, n, threads", [(96, 128, 1), (512, 1024, 2), (512, 1024, 1)])
def test_update_runs_in_the_gradient_tiles(pinned_host, m, n, threads):
    """The update is gone as a generic: its body runs on each 8x32 tile (vector mulf/addf/subf) after the K loop,
    reading the tile's block of ``w``, the row of ``c`` (broadcast) and ``lr`` (a scalar); with a large product
    too (split across threads, packed blocks). The values are NumPy's (float64)."""
    text = _module(m, n)
    scheduled = lower(text, "scheduled", PipelineOptions(num_threads=threads))
    assert "linalg.generic" not in scheduled and "relax_mlir.epilogue" not in scheduled, scheduled
    assert re.search(r"arith.subf %\S+, %\S+ : vector<8x32xf32>", scheduled), scheduled
    assert re.search(r"vector.transfer_read %\S+\[%\S+\], %\S+ \{in_bounds = \[true\]\} : tensor<\d+xf32>, "
                     r"vector<32xf32>", scheduled), scheduled  # c's row for the tile
    assert "tensor.extract" in scheduled  # lr
    if threads == 2:
        assert "scf.forall" in scheduled and "alloc_tensor() copy" in scheduled, scheduled
    _check_values(text, m, n, threads)


def _last_block_branch(scheduled: str, k_block: str, result: str) -> bool:
    """Whether a tile branches on the K block loop's induction variable ``k_block`` being the last block (768): the
    comparison (hoisted out of the tile loops or not) and an ``scf.if`` on it yielding ``result``."""
    test = re.search(rf"(%\S+) = arith.cmpi eq, {k_block}, %c768 : index", scheduled)
    return bool(test) and re.search(rf"= scf.if {test.group(1)} -> \({re.escape(result)}\) \{{", scheduled) is not None


def test_k_blocked_products_apply_the_update_in_their_last_block(pinned_host):
    """K = 1024 in blocks of 256 (1 MiB L2): a tile's sum is complete only in the last block, so the update's body
    runs there (an ``scf.if`` on the K block loop's induction variable being 768) and the earlier blocks write the
    partial sums as before; no generic is left. Values as NumPy's."""
    text = _module(256, 1024, k=1024)
    scheduled = lower(text, "scheduled", PipelineOptions(num_threads=2))
    assert "linalg.generic" not in scheduled and "relax_mlir.epilogue" not in scheduled, scheduled
    k_loop = re.search(r"scf.for (%\S+) = %c0 to %c1024 step %c256", scheduled)
    assert k_loop, scheduled  # the K blocks
    assert _last_block_branch(scheduled, k_loop.group(1), "vector<8x32xf32>"), scheduled
    _check_values(text, 256, 1024, 2, k=1024)


def test_an_input_computed_after_the_product_leaves_the_update_a_generic(pinned_host):
    """The update reads the product's column sums, computed after it from it: the tiles cannot read them, so the
    update is left a generic, split across threads like any other (``scf.forall`` around it), untagged; values as
    NumPy's."""
    text = _module(512, 1024, late=True)
    scheduled = lower(text, "scheduled", PipelineOptions(num_threads=2))
    assert "relax_mlir.epilogue" not in scheduled
    update = [g for g in scheduled.split("linalg.generic")[1:] if "arith.subf" in g.split("linalg.yield")[0]]
    assert len(update) == 1, scheduled
    assert scheduled.count("scf.forall") >= 2, scheduled  # the product's and the update's
    _check_values(text, 512, 1024, 2, late=True)


def _wide_trainers(opt):
    from relax_mlir.ir import TensorStructInfo
    from relax_mlir.models import mlp
    from relax_mlir.training import CrossEntropyLoss, SetupTrainer, Trainer

    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), opt,
                         [TensorStructInfo((256, 10), "float32"), TensorStructInfo((256,), "int64")])
    trainers = [Trainer(mlp(256, (1024, 1024, 1024, 10)), 6, setup).build(t) for t in ("cpu", "numpy")]
    for t in trainers:
        t.xavier_uniform_init_params(seed=3)
    return trainers


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_wide_mlp_step_equals_the_interpreter():
    """The wide MLP's training step (1024 wide, batch 256, SGD with weight decay), where the updates of both large
    weights run in their gradients' packed tiles split across threads, ReLU's gradients in the K blocks of
    ``g w^T`` and the 10-class products split across threads: two steps give the NumPy interpreter's loss and
    parameters (float32 sums of up to 1024 products: 1e-5 relative)."""
    from relax_mlir.training import SGD

    trainers = _wide_trainers(SGD(0.01, weight_decay=0.01))
    rng = np.random.default_rng(1)
    for _ in range(2):
        x, y = rng.normal(size=(256, 1024)).astype(np.float32), rng.integers(0, 10, 256)
        losses = [float(t.update_params(x, y)) for t in trainers]
        assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    for got, want in zip(trainers[0].params, trainers[1].params):
        _close(got, want)


def test_wide_mlp_adam_step_equals_the_interpreter_and_the_update_rule():
    """With Adam each parameter's update is one loop with its moments (``multi_use.py``). The first step's moments,
    linear in the gradient, equal the interpreter's (1e-5 relative); after each of two steps the parameters are checked against Adam's rule applied
    in float64 to the compiled step's own moments and previous parameters, because the interpreter's parameters
    are no oracle here: where a gradient is near 0, m / sqrt(v) is about its sign, so the last bits by which two
    summation orders differ move such an element by up to lr."""
    from relax_mlir.training import Adam

    lr, (b1, b2), eps = 0.001, (0.9, 0.999), 1e-8
    compiled, reference = _wide_trainers(Adam(lr, (b1, b2), eps))
    rng = np.random.default_rng(1)
    for step in range(1, 3):
        before = [p.astype(np.float64) for p in compiled.params]
        x, y = rng.normal(size=(256, 1024)).astype(np.float32), rng.integers(0, 10, 256)
        losses = [float(t.update_params(x, y)) for t in (compiled, reference)]
        assert losses[0] == pytest.approx(losses[1], rel=1e-5)
        n = len(compiled.params)
        state, ref_state = compiled.optim_state, reference.optim_state
        if step == 1:  # (after it the parameters differ by the amounts above, and so do the next gradients)
            for got, want in zip(state[3:], ref_state[3:]):  # m_0..m_{n-1}, v_0..v_{n-1}
                _close(got, want)
        for p, w0, m, v in zip(compiled.params, before, state[3:3 + n], state[3 + n:]):
            m_hat, v_hat = m.astype(np.float64) / (1 - b1 ** step), v.astype(np.float64) / (1 - b2 ** step)
            np.testing.assert_allclose(p, w0 - lr * m_hat / (np.sqrt(v_hat) + eps), rtol=1e-5, atol=1e-7)


_COLUMN = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @main(%a: tensor<64x96x{t}>, %b: tensor<96x128x{t}>, %v: tensor<64x{t}>) -> tensor<64x128x{t}> {{
  %z = arith.constant 0.0 : {t}
  %e = tensor.empty() : tensor<64x128x{t}>
  %f = linalg.fill ins(%z : {t}) outs(%e : tensor<64x128x{t}>) -> tensor<64x128x{t}>
  %p = linalg.matmul ins(%a, %b : tensor<64x96x{t}>, tensor<96x128x{t}>) outs(%f : tensor<64x128x{t}>) -> tensor<64x128x{t}>
  %r = linalg.generic {{indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%p, %v : tensor<64x128x{t}>, tensor<64x{t}>) outs(%e : tensor<64x128x{t}>) {{
  ^bb0(%x: {t}, %y: {t}, %o: {t}):
    %s = arith.subf %x, %y : {t}
    linalg.yield %s : {t}
  }} -> tensor<64x128x{t}>
  return %r : tensor<64x128x{t}>
}}
"""


@pytest.mark.parametrize("t, dtype", [("f32", np.float32), ("f64", np.float64)])
def test_a_column_broadcast_is_read_once_per_row_of_the_tile(pinned_host, t, dtype):
    """``p - v[:, None]``: the tile reads its rows' values of ``v`` (a vector of MR) and spreads each along its row
    (broadcast, then transpose), in float32 (8x32 tiles) and float64 (8x16); values as NumPy's. The host is pinned:
    with 256- or 128-bit vectors (other hosts) the tiles are smaller (6x16 floats with AVX2), 64 rows end in a partial
    tile and the subtraction stays a generic of its own."""
    text = _COLUMN.format(t=t)
    scheduled = lower(text, "scheduled", PipelineOptions(num_threads=1))
    assert "linalg.generic" not in scheduled and "vector.transpose" in scheduled, scheduled
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((64, 96)).astype(dtype), rng.standard_normal((96, 128)).astype(dtype)
    v = rng.standard_normal(64).astype(dtype)
    got = compile_module(text, options=PipelineOptions(num_threads=1))["main"](a, b, v)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b - v[:, None], rtol=1e-5, atol=1e-5 * 96)


_OPS = {"arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply,
        "arith.maximumf": np.maximum, "arith.minimumf": np.minimum}
_KINDS = {"block": ("#id", "{m}x{n}"), "row": ("#col", "{n}"), "column": ("#row", "{m}"), "scalar": ("#scalar", "")}


def _random_epilogue(m, n, k, kinds, steps, results=1, product=False):
    """A matmul of m x k by k x n and one elementwise generic reading it and ``kinds`` other inputs, whose body
    applies ``steps`` ((op, i, j): op on values i and j of those so far: the inputs, then the results) and yields
    the last value (and, with ``results`` 2, the one before it); the function returns those (and, with
    ``product``, the product too: a second reader)."""
    params = [f"%a: tensor<{m}x{k}xf32>", f"%b: tensor<{k}x{n}xf32>"]
    ins, maps, types = ["%p"], ["#id"], [f"tensor<{m}x{n}xf32>"]
    for i, kind in enumerate(kinds):
        amap, shape = _KINDS[kind]
        shape = shape.format(m=m, n=n)
        t = f"tensor<{shape}xf32>" if shape else "tensor<f32>"
        params.append(f"%in{i}: {t}")
        ins.append(f"%in{i}")
        maps.append(amap)
        types.append(t)
    args = [f"%v{i}: f32" for i in range(len(ins))] + [f"%o{i}: f32" for i in range(results)]
    body = []
    for s, (op, i, j) in enumerate(steps):
        body.append(f"    %v{len(ins) + s} = {op} %v{i}, %v{j} : f32")
    last = len(ins) + len(steps) - 1
    tensor = f"tensor<{m}x{n}xf32>"
    yielded = ", ".join(f"%v{last - i}" for i in range(results))
    returned = [f"%r#{i}" for i in range(results)] + (["%p"] if product else [])
    return f"""
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
#row = affine_map<(d0, d1) -> (d0)>
#scalar = affine_map<(d0, d1) -> ()>
func.func @main({', '.join(params)}) -> ({', '.join([tensor] * len(returned))}) {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : {tensor}
  %f = linalg.fill ins(%z : f32) outs(%e : {tensor}) -> {tensor}
  %p = linalg.matmul ins(%a, %b : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) outs(%f : {tensor}) -> {tensor}
  %r:{results} = linalg.generic {{indexing_maps = [{', '.join(maps + ['#id'] * results)}], iterator_types = ["parallel", "parallel"]}}
      ins({', '.join(ins)} : {', '.join(types)}) outs({', '.join(['%e'] * results)} : {', '.join([tensor] * results)}) {{
  ^bb0({', '.join(args)}):
{chr(10).join(body)}
    linalg.yield {yielded} : {', '.join(['f32'] * results)}
  }} -> ({', '.join([tensor] * results)})
  return {', '.join(returned)} : {', '.join([tensor] * len(returned))}
}}
"""


@st.composite
def _epilogue_cases(draw):
    m = draw(st.sampled_from([8, 16, 24, 40, 64, 100]))
    n = draw(st.sampled_from([16, 32, 48, 64, 96, 128]))
    k = draw(st.sampled_from([8, 32, 64, 96]))
    kinds = draw(st.lists(st.sampled_from(sorted(_KINDS)), max_size=3))
    steps = []
    for s in range(draw(st.integers(1, 4))):
        values = 1 + len(kinds) + s
        steps.append((draw(st.sampled_from(sorted(_OPS))), draw(st.integers(0, values - 1)),
                      draw(st.integers(0, values - 1))))
    return (m, n, k, kinds, steps, draw(st.sampled_from([1, 2])), draw(st.booleans()), draw(st.sampled_from([1, 2])),
            draw(st.booleans()))


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(_epilogue_cases())
def test_random_epilogues_equal_numpy(case):
    """Random products (uneven sizes: peeled tiles, which keep the consumer apart; with caches pinned tiny, K in
    blocks) with a random elementwise consumer (blocks, rows, columns and scalars as other inputs; adds,
    subtractions, products, maxima, minima of any values so far; one result or two; the product returned as well
    or not), on one or two threads: the compiled results are NumPy's, whether the consumer was fused or not."""
    m, n, k, kinds, steps, threads, tiny_caches, results, product = case
    text = _random_epilogue(m, n, k, kinds, steps, results, product)
    rng = np.random.default_rng(m * n + k)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    shapes = {"block": (m, n), "row": (n,), "column": (m,), "scalar": ()}
    others = [rng.standard_normal(shapes[kind]).astype(np.float32) for kind in kinds]
    pinned = {"RELAX_MLIR_L1D_BYTES": "4K", "RELAX_MLIR_L2_BYTES": "16K"} if tiny_caches else {}
    saved = {var: os.environ.get(var) for var in pinned}
    os.environ.update(pinned)  # K in blocks of 32 wherever 32 divides it
    host_module.host_cpu.cache_clear()
    try:
        got = compile_module(text, options=PipelineOptions(num_threads=threads))["main"](a, b, *others)
    finally:
        for var, value in saved.items():
            if value is None:
                del os.environ[var]
            else:
                os.environ[var] = value
        host_module.host_cpu.cache_clear()
    values = [a.astype(np.float64) @ b]
    values += [o[:, None] if kind == "column" else o for o, kind in zip(others, kinds)]
    for op, i, j in steps:
        values.append(_OPS[op](values[i], values[j]))
    wants = [values[-1 - i] for i in range(results)] + ([values[0]] if product else [])
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(wants)
    for g, want in zip(got, wants):  # float32 sums of k products, then the ops
        np.testing.assert_allclose(g, np.broadcast_to(want, (m, n)), rtol=1e-4, atol=1e-4 * k)


# A dense layer's product read twice: by its bias and ReLU, and later by ReLU's gradient (which also reads ``d``).
_SHARED = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @main(%x: tensor<{m}x{k}xf32>, %w: tensor<{k}x{n}xf32>, %b: tensor<{n}xf32>, %d: tensor<{m}x{n}xf32>)
    -> (tensor<{m}x{n}xf32>, tensor<{m}x{n}xf32>) {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{m}x{n}xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %z = linalg.matmul ins(%x, %w : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) outs(%f : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %h = linalg.generic {{indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%z, %b : tensor<{m}x{n}xf32>, tensor<{n}xf32>) outs(%e : tensor<{m}x{n}xf32>) {{
  ^bb0(%zi: f32, %bi: f32, %o: f32):
    %s = arith.addf %zi, %bi : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  }} -> tensor<{m}x{n}xf32>
  %g = linalg.generic {{indexing_maps = [#id, #col, #id, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%z, %b, %d : tensor<{m}x{n}xf32>, tensor<{n}xf32>, tensor<{m}x{n}xf32>) outs(%e : tensor<{m}x{n}xf32>) {{
  ^bb0(%zi: f32, %bi: f32, %di: f32, %o: f32):
    %s = arith.addf %zi, %bi : f32
    %neg = arith.cmpf olt, %s, %zero : f32
    %r = arith.select %neg, %zero, %di : f32
    linalg.yield %r : f32
  }} -> tensor<{m}x{n}xf32>
  return %h, %g : tensor<{m}x{n}xf32>, tensor<{m}x{n}xf32>
}}
"""


@pytest.mark.parametrize("m, k, n, threads", [(64, 96, 128, 1), (512, 64, 1024, 2), (256, 1024, 1024, 2)])
def test_a_product_read_twice_runs_its_first_reader_in_the_tiles(pinned_host, m, k, n, threads):
    """The bias and ReLU run in the product's tiles, which write both the product (ReLU's gradient reads it later)
    and the activation: the nest carries two tensors and one generic (the gradient) is left. With K in blocks
    (K = 1024 in blocks of 256), the tiles write their partial sums in every block and the activation in the last
    one only, under an ``scf.if`` on the K block loop being at 768 that yields the activation's block (a tensor).
    Values as NumPy's."""
    text = _SHARED.format(m=m, k=k, n=n)
    scheduled = lower(text, "scheduled", PipelineOptions(num_threads=threads))
    assert "relax_mlir.epilogue" not in scheduled
    pair = f"(tensor<{m}x{n}xf32>, tensor<{m}x{n}xf32>)"
    assert scheduled.count("linalg.generic") == 1 and f"-> {pair}" in scheduled, scheduled
    if k == 1024:
        k_loop = re.search(r"scf.for (%\S+) = %c0 to %c1024 step %c256", scheduled)
        assert k_loop, scheduled
        assert _last_block_branch(scheduled, k_loop.group(1), "tensor<8x32xf32>"), scheduled
    rng = np.random.default_rng(m + k)
    x, w = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    b, d = rng.standard_normal(n).astype(np.float32), rng.standard_normal((m, n)).astype(np.float32)
    h, g = compile_module(text, options=PipelineOptions(num_threads=threads))["main"](x, w, b, d)
    z = x.astype(np.float64) @ w + b
    np.testing.assert_allclose(h, np.maximum(z, 0), rtol=1e-5, atol=1e-5 * k)  # float32 sums of k products
    decided = np.abs(z) > 1e-3 * np.sqrt(k)  # (where z is about 0 the float32 sum may take the other side)
    np.testing.assert_array_equal(g[decided], np.where(z < 0, 0, d)[decided])


def test_an_input_computed_after_the_product_from_arguments_is_moved_before_it(pinned_host):
    """``exp(c)`` is computed after the product (and returned too) but from an argument only: it is moved before the
    product's nest, whose tiles then read it (Adam's bias corrections come after the gradients in the same way); no
    generic reads the product. Values as NumPy's."""
    text = _UPDATE.format(m=96, n=128, k=64, extra=_EXP.format(n=128), col="%s", extra_type=", tensor<128xf32>",
                          extra_result=", %s")
    scheduled = lower(text, "scheduled", PipelineOptions(num_threads=1))
    assert scheduled.count("linalg.generic") == 1, scheduled  # exp's (math_approx.py's polynomial by now)
    assert scheduled.index("linalg.generic") < scheduled.index("vector.contract"), scheduled  # moved before the nest
    rng = np.random.default_rng(5)
    x, d = rng.standard_normal((64, 96)).astype(np.float32), rng.standard_normal((64, 128)).astype(np.float32)
    w, c = rng.standard_normal((96, 128)).astype(np.float32), rng.uniform(0.5, 1.5, 128).astype(np.float32)
    got, s = compile_module(text, options=PipelineOptions(num_threads=1))["main"](x, d, w, c, np.float32(0.125))
    np.testing.assert_allclose(s, np.exp(c.astype(np.float64)), rtol=1e-6)
    want = w - (0.25 * w + x.astype(np.float64).T @ d) * np.exp(c.astype(np.float64)) * 0.125
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * 64)


_EXP = """%es = tensor.empty() : tensor<{n}xf32>
  %s = linalg.generic {{indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}}
      ins(%c : tensor<{n}xf32>) outs(%es : tensor<{n}xf32>) {{
  ^bb0(%ci: f32, %o: f32):
    %ex = math.exp %ci : f32
    linalg.yield %ex : f32
  }} -> tensor<{n}xf32>"""


# An Adam-like update: the product and three more blocks read (m, v, w), three results.
_THREE = """
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%a: tensor<64x32xf32>, %b: tensor<32x128xf32>, %m: tensor<64x128xf32>, %v: tensor<64x128xf32>,
                %w: tensor<64x128xf32>) -> (tensor<64x128xf32>, tensor<64x128xf32>, tensor<64x128xf32>) {
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %e = tensor.empty() : tensor<64x128xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x128xf32>) -> tensor<64x128xf32>
  %g = linalg.matmul ins(%a, %b : tensor<64x32xf32>, tensor<32x128xf32>) outs(%f : tensor<64x128xf32>) -> tensor<64x128xf32>
  %r:3 = linalg.generic {indexing_maps = [#id, #id, #id, #id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g, %m, %v, %w : tensor<64x128xf32>, tensor<64x128xf32>, tensor<64x128xf32>, tensor<64x128xf32>)
      outs(%e, %e, %e : tensor<64x128xf32>, tensor<64x128xf32>, tensor<64x128xf32>) {
  ^bb0(%gi: f32, %mi: f32, %vi: f32, %wi: f32, %o0: f32, %o1: f32, %o2: f32):
    %m2 = arith.addf %mi, %gi : f32
    %g2 = arith.mulf %gi, %gi : f32
    %v2 = arith.addf %vi, %g2 : f32
    %q = arith.mulf %m2, %half : f32
    %w2 = arith.subf %wi, %q : f32
    linalg.yield %m2, %v2, %w2 : f32, f32, f32
  } -> (tensor<64x128xf32>, tensor<64x128xf32>, tensor<64x128xf32>)
  return %r#0, %r#1, %r#2 : tensor<64x128xf32>, tensor<64x128xf32>, tensor<64x128xf32>
}
"""


@pytest.mark.parametrize("limit", [2, 3])
def test_a_reader_of_more_blocks_than_the_limit_keeps_its_loop(pinned_host, monkeypatch, limit):
    """Three blocks besides the product (Adam's moments and weight): above ``MAX_BLOCK_INPUTS`` (2) the update
    keeps its own loop; with the limit raised to 3 it runs in the tiles, a row at a time (its four tiles read and
    three written would not fit the registers) and writing three tensors. Values as NumPy's both ways."""
    from relax_mlir.backend.schedule import epilogue

    monkeypatch.setattr(epilogue, "MAX_BLOCK_INPUTS", limit)
    scheduled = lower(_THREE, "scheduled", PipelineOptions(num_threads=1))
    if limit == 2:
        assert scheduled.count("linalg.generic") == 1, scheduled
    else:
        assert "linalg.generic" not in scheduled, scheduled
        assert "-> (tensor<64x128xf32>, tensor<64x128xf32>, tensor<64x128xf32>)" in scheduled, scheduled
        assert len(re.findall(r"arith.subf %\S+, %\S+ : vector<32xf32>", scheduled)) == 8, scheduled  # by rows
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((32, 128)).astype(np.float32)
    m, v, w = (rng.standard_normal((64, 128)).astype(np.float32) for _ in range(3))
    m2, v2, w2 = compile_module(_THREE, options=PipelineOptions(num_threads=1))["main"](a, b, m, v, w)
    g = a.astype(np.float64) @ b
    np.testing.assert_allclose(m2, m + g, rtol=1e-5, atol=1e-5 * 32)
    np.testing.assert_allclose(v2, v + g * g, rtol=1e-5, atol=1e-4 * 32)
    np.testing.assert_allclose(w2, w - 0.5 * (m + g), rtol=1e-5, atol=1e-5 * 32)
