"""Packed B blocks in NR-wide panels (``schedule/panels.py``): the layout in the scheduled IR, and values that are
bit for bit those of the row-major packing (the same products summed in the same order), and NumPy's."""

from __future__ import annotations

import re

import numpy as np
import pytest

import relax_mlir
from relax_mlir import op
from relax_mlir.backend.pipeline import PipelineOptions
from relax_mlir.backend.schedule import panels
from relax_mlir.ir import BlockBuilder, TensorStructInfo, Var


def _module(form: str, m: int, k: int, n: int):
    """``plain``: x (m, k) . w (k, n); ``xt_g``: x (k, m) read transposed . g (k, n); ``g_wt``: g (m, k) . w^T with
    w (n, k). Returns the module and the argument shapes."""
    shapes = {"plain": [(m, k), (k, n)], "xt_g": [(k, m), (k, n)], "g_wt": [(m, k), (n, k)]}[form]
    a, b = (Var(name, TensorStructInfo(s, "float32")) for name, s in zip("ab", shapes))
    body = {"plain": lambda: op.matmul(a, b), "xt_g": lambda: op.matmul(op.permute_dims(a, [1, 0]), b),
            "g_wt": lambda: op.matmul(a, op.permute_dims(b, [1, 0]))}[form]
    bb = BlockBuilder()
    with bb.function("main", [a, b]):
        with bb.dataflow():
            y = bb.emit_output(body())
        bb.emit_func_output(y)
    return bb.get(), shapes


def _reference(form: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return {"plain": lambda: a @ b, "xt_g": lambda: a.T @ b, "g_wt": lambda: a @ b.T}[form]()


@pytest.fixture
def fresh_builds(monkeypatch):
    """Every compile builds: the caches do not know the schedule's switch."""
    from relax_mlir.backend.build import clear_cache

    monkeypatch.setenv("RELAX_MLIR_CACHE", "0")
    clear_cache()
    yield
    clear_cache()


@pytest.mark.parametrize("form", ["plain", "xt_g", "g_wt"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("m, k, n", [(256, 512, 512), (100, 512, 256)])
def test_panels_give_the_row_major_packings_values_bit_for_bit(fresh_builds, pinned_host, monkeypatch, form, threads, m, k,
                                                                n):
    """With panels, the scheduled IR reads B from ``[N/32][K][32]`` buffers (no row-major copy of a B block is
    left); without, it does not. The results are identical to the bit, and NumPy's within float32 sums of k
    products. (100 rows: a peeled remainder of the register tile reads the panels too.)"""
    mod, shapes = _module(form, m, k, n)
    rng = np.random.default_rng(m + k + n)
    args = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
    results, texts = [], []
    for on in (True, False):
        monkeypatch.setattr(panels, "PANEL_B", on)
        texts.append(relax_mlir.to_mlir(mod, "scheduled", options=PipelineOptions(num_threads=threads)))
        vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod, num_threads=threads))
        results.append(vm["main"](*args))
    panel_types = set(re.findall(r"tensor<\d+x\d+x32xf32>", texts[0]))
    assert panel_types and "vector<1x32xf32>" in texts[0], texts[0]
    assert not re.search(r"tensor<\d+x\d+x32xf32>", texts[1]), texts[1]
    np.testing.assert_array_equal(results[0], results[1])
    want = _reference(form, *args)
    scale = _reference(form, *(np.abs(x) for x in args)).max()
    np.testing.assert_allclose(results[0], want, rtol=1e-5, atol=1e-6 * scale)


def test_small_matmuls_are_not_packed_at_all():
    """Below the packing threshold there is no packed block to lay out: no panels."""
    mod, _ = _module("plain", 64, 128, 128)
    text = relax_mlir.to_mlir(mod, "scheduled", options=PipelineOptions(num_threads=2))
    assert "vector.contract" in text and "alloc_tensor" not in text and "expand_shape" not in text
