"""The schedules: tile plans derived from the host, parallel tiles, the OpenMP runtime, and their numerics."""

from __future__ import annotations

import dataclasses
import re
import warnings

import numpy as np
import pytest
from mlir import ir

from relax_mlir.backend import openmp
from relax_mlir.backend.pipeline import PipelineOptions
from relax_mlir.backend.runtime import compile_module
from relax_mlir.backend import host as host_module
from relax_mlir.backend.schedule import plan_matmul
from relax_mlir.backend.host import HostCPU
from relax_mlir.backend.schedule.matmul import PARALLEL_MIN_FLOPS, cache_tiles, register_tile

from .linalg_samples import MATMUL_TEMPLATE as MATMUL

AVX512 = HostCPU(vector_bits=512, vector_registers=32, l1d_bytes=32 * 1024, l2_bytes=1024 * 1024, cores=2)
AVX2 = HostCPU(vector_bits=256, vector_registers=16, l1d_bytes=48 * 1024, l2_bytes=2048 * 1024, cores=4)


def _plan(m: int, k: int, n: int, threads: int, host: HostCPU):
    with ir.Context(), ir.Location.unknown():
        mod = ir.Module.parse(MATMUL.format(m=m, k=k, n=n))
        found = []
        mod.operation.walk(lambda op: (found.append(plan_matmul(op, threads, host))
                                       if op.name == "linalg.matmul" else None) or ir.WalkResult.ADVANCE,
                           ir.WalkOrder.PRE_ORDER)
        return found[0]


def test_register_tile_follows_the_vector_registers():
    assert register_tile(AVX512, 32) == (8, 32)  # two 16-lane zmm per row, 16 accumulators of 32 registers
    assert register_tile(AVX512, 64) == (8, 16)
    assert register_tile(AVX2, 32) == (6, 16)  # two 8-lane ymm per row, 12 accumulators of 16 registers


def test_cache_tiles_from_the_host():
    # B = 1024x1024 floats (4 MiB) does not fit in half of a 1 MiB L2: KC x NR (256 x 32 floats) fills the
    # 32 KiB L1d, NC = 1 MiB / (4 x 256 x 4 B) = 256 columns, MC = 8 x MR.
    assert cache_tiles((256, 1024, 1024), 8, 32, 4, AVX512) == (64, 256, 256)
    assert cache_tiles((64, 128, 784), 8, 32, 4, AVX512) is None  # B (400 KiB) fits: no cache loops
    assert cache_tiles((256, 1000, 1024), 8, 32, 4, AVX512) is None  # no multiple of 32 up to 256 divides 1000


def test_plans_of_large_and_small_matmuls():
    big = _plan(256, 1024, 1024, 2, AVX512)
    assert big.tile_sizes == (8, 32, 1) and big.peel == ()
    assert big.cache == (64, 256, 256)
    assert big.parallel == (0, 512, 0)  # N is the larger side: one half per thread
    assert _plan(256, 1024, 1024, 1, AVX512).parallel is None
    small = _plan(64, 784, 128, 2, AVX512)  # 12.8 MFLOP: below the threshold
    assert 2 * 64 * 784 * 128 < PARALLEL_MIN_FLOPS and small.parallel is None and small.cache is None
    # the K loop of a large matmul's register tile does four K steps an iteration; a small one's, one
    assert big.unroll_k == 4 and _plan(256, 1024, 1024, 1, AVX512).unroll_k == 4 and small.unroll_k == 1
    uneven = _plan(100, 512, 70, 2, AVX512)
    assert uneven.peel == (1, 0) and uneven.parallel is None and uneven.cache is None
    # large matmuls pack their cache blocks of A and B; small ones are not cache-tiled at all
    assert big.pack and not small.pack and not uneven.pack
    avx2 = _plan(1024, 256, 1024, 4, AVX2)
    assert avx2.tile_sizes == (6, 16, 1) and avx2.peel == (0,)  # 1024 rows by 6: a peeled remainder
    # B (1 MiB) fits in half of L2, but the packed blocks need cache tiles: M is split in whole 32-row blocks
    # (KC = K = 256; NC = 2 MiB / (4 x 256 x 4 B) = 512)
    assert avx2.pack and avx2.cache == (32, 512, 256) and avx2.parallel == (256, 0, 0)
    with pytest.MonkeyPatch.context() as mp:  # packing off: B fits, no cache tiles; 256-row chunks of M would not
        # be whole 6-row tiles, so N is split
        mp.setattr("relax_mlir.backend.schedule.matmul.PACK_MIN_FLOPS", 2 ** 62)
        unpacked = _plan(1024, 256, 1024, 4, AVX2)
    assert not unpacked.pack and unpacked.cache is None and unpacked.parallel == (0, 256, 0)
    # KC: 48 KiB / (16 x 4 B) = 768 -> 512 (a power of two); NC = 2 MiB / (4 x 512 x 4 B) = 256; MC: no
    # multiple of 6 up to 48 divides 1024, so the largest divisor up to 48, 32.
    assert _plan(1024, 2048, 1024, 2, AVX2).cache == (32, 256, 512)


@pytest.mark.parametrize("m, k, n", [(256, 512, 384), (256, 1024, 1024), (104, 300, 70)])
@pytest.mark.parametrize("threads", [1, 2])
def test_scheduled_matmuls_match_numpy(m, k, n, threads):
    mod = compile_module(MATMUL.format(m=m, k=k, n=n), options=PipelineOptions(num_threads=threads))
    rng = np.random.default_rng(m + k + n)
    x = rng.standard_normal((m, k), dtype=np.float32)
    w = rng.standard_normal((k, n), dtype=np.float32)
    want = x.astype(np.float64) @ w.astype(np.float64)
    # float32 sums of k products in another order: the error grows like sqrt(k) ulps of the largest partial sums
    np.testing.assert_allclose(mod.main(x, w), want, rtol=1e-4, atol=1e-4 * np.sqrt(k))


def test_parallel_code_calls_openmp_only_when_large():
    text = str(compile_module(MATMUL.format(m=256, k=1024, n=1024),
                              options=PipelineOptions(num_threads=2)).llvm_text)
    assert "omp.parallel" in text
    small = compile_module(MATMUL.format(m=64, k=784, n=128), options=PipelineOptions(num_threads=2)).llvm_text
    assert "omp.parallel" not in small


def test_num_threads_resolution(monkeypatch):
    monkeypatch.setenv("RELAX_MLIR_NUM_THREADS", "3")
    assert openmp.default_threads() == 3
    assert PipelineOptions(num_threads=1).num_threads == 1
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("RELAX_MLIR_NUM_THREADS", bad)
        with pytest.raises(ValueError, match="RELAX_MLIR_NUM_THREADS must be a positive integer"):
            openmp.default_threads()
    monkeypatch.delenv("RELAX_MLIR_NUM_THREADS")
    assert openmp.default_threads() == host_module.host_cpu().cores
    with pytest.raises(ValueError, match="num_threads must be a positive integer, got 0"):
        PipelineOptions(num_threads=0)
    with pytest.raises(ValueError, match="num_threads must be at most 65536, got 4294967297"):
        PipelineOptions(num_threads=2 ** 32 + 1)  # (MLIR's option is 32 bits: it wrapped, then failed obscurely)


def test_no_openmp_runtime_means_one_thread_and_one_warning(monkeypatch):
    monkeypatch.setattr(openmp, "openmp_library", lambda: None)
    monkeypatch.setattr(openmp, "_warned", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert openmp.resolve_threads(4) == 1
        assert openmp.resolve_threads(4) == 1
    assert len(caught) == 1 and "no OpenMP runtime found" in str(caught[0].message)


def test_the_installed_openmp_runtime_is_found():
    path = openmp.openmp_library()
    assert path is not None, "the intel-openmp wheel (a dependency on Linux x86-64) should provide libiomp5.so"


def test_host_facts(monkeypatch):
    assert host_module._size("32K") == 32 * 1024 and host_module._size("1024K") == 1 << 20
    assert host_module._size("2M") == 2 << 20 and host_module._size("512") == 512
    host = host_module.host_cpu()
    assert host.vector_bits in (128, 256, 512) and host.l1d_bytes > 0 and host.l2_bytes > host.l1d_bytes
    monkeypatch.setenv("RELAX_MLIR_VECTOR_BITS", "256")
    host_module.host_cpu.cache_clear()
    try:
        assert host_module.host_cpu().vector_bits == 256
        monkeypatch.setenv("RELAX_MLIR_VECTOR_BITS", "300")
        host_module.host_cpu.cache_clear()
        with pytest.raises(ValueError, match="RELAX_MLIR_VECTOR_BITS must be 128, 256 or 512"):
            host_module.host_cpu()
    finally:
        monkeypatch.delenv("RELAX_MLIR_VECTOR_BITS")
        host_module.host_cpu.cache_clear()


def test_cache_size_overrides(monkeypatch):
    """RELAX_MLIR_L1D_BYTES / RELAX_MLIR_L2_BYTES replace the host's cache sizes (lit tests pin a schedule's IR to
    one machine with them); anything but a positive size is an error naming the variable."""
    monkeypatch.setenv("RELAX_MLIR_L1D_BYTES", "48K")
    monkeypatch.setenv("RELAX_MLIR_L2_BYTES", "3145728")
    host_module.host_cpu.cache_clear()
    try:
        host = host_module.host_cpu()
        assert (host.l1d_bytes, host.l2_bytes) == (48 * 1024, 3 * 1024 * 1024)
        for bad in ("0", "lots"):
            monkeypatch.setenv("RELAX_MLIR_L2_BYTES", bad)
            host_module.host_cpu.cache_clear()
            with pytest.raises(ValueError, match="RELAX_MLIR_L2_BYTES must be a positive size"):
                host_module.host_cpu()
    finally:
        monkeypatch.delenv("RELAX_MLIR_L1D_BYTES")
        monkeypatch.delenv("RELAX_MLIR_L2_BYTES")
        host_module.host_cpu.cache_clear()


TRANSPOSE = """
func.func @main(%x: tensor<{m}x{n}xf32>) -> tensor<{n}x{m}xf32> {{
  %e = tensor.empty() : tensor<{n}x{m}xf32>
  %y = linalg.transpose ins(%x : tensor<{m}x{n}xf32>) outs(%e : tensor<{n}x{m}xf32>) permutation = [1, 0]
  return %y : tensor<{n}x{m}xf32>
}}
"""

BIAS_RELU = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @main(%x: tensor<{m}x{n}xf32>, %b: tensor<{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %e = tensor.empty() : tensor<{m}x{n}xf32>
  %z = arith.constant 0.0 : f32
  %r = linalg.generic {{indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}}
       ins(%x, %b : tensor<{m}x{n}xf32>, tensor<{n}xf32>) outs(%e : tensor<{m}x{n}xf32>) {{
  ^bb0(%i: f32, %j: f32, %o: f32):
    %s = arith.addf %i, %j : f32
    %r = arith.maximumf %s, %z : f32
    linalg.yield %r : f32
  }} -> tensor<{m}x{n}xf32>
  return %r : tensor<{m}x{n}xf32>
}}
"""


CHANNEL_SUM = """
#in = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#out = affine_map<(d0, d1, d2) -> (d1)>
func.func @main(%x: tensor<{n}x{c}x{p}xf32>) -> tensor<{c}xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{c}xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<{c}xf32>) -> tensor<{c}xf32>
  %r = linalg.generic {{indexing_maps = [#in, #out], iterator_types = ["{outer}", "parallel", "{inner}"]}}
       ins(%x : tensor<{n}x{c}x{p}xf32>) outs(%f : tensor<{c}xf32>) {{
  ^bb0(%i: f32, %o: f32):
    %s = arith.addf %i, %o : f32
    linalg.yield %s : f32
  }} -> tensor<{c}xf32>
  return %r : tensor<{c}xf32>
}}
"""


def _first_plan(text: str, name: str, planner):
    with ir.Context(), ir.Location.unknown():
        mod = ir.Module.parse(text)
        found = []
        mod.operation.walk(lambda op: (found.append(planner(op)) if op.name == name else None)
                           or ir.WalkResult.ADVANCE, ir.WalkOrder.PRE_ORDER)
        return found[0]


def test_transpose_plans():
    from relax_mlir.backend.schedule import plan_transpose

    big = _first_plan(TRANSPOSE.format(m=1024, n=1024), "linalg.transpose", lambda op: plan_transpose(op, 2, AVX512))
    # rows of 256 bits (8 floats) though a register holds 16; one half of the rows per thread
    assert big.tiles == (8, 8) and big.parallel == (512, 0)
    small = _first_plan(TRANSPOSE.format(m=64, n=32), "linalg.transpose", lambda op: plan_transpose(op, 2, AVX2))
    assert small.tiles == (8, 8) and small.parallel is None
    sse = dataclasses.replace(AVX2, vector_bits=128)  # at most a register's lanes
    assert _first_plan(TRANSPOSE.format(m=64, n=32), "linalg.transpose", lambda op: plan_transpose(op, 1, sse)).tiles == (4, 4)
    assert _first_plan(TRANSPOSE.format(m=100, n=32), "linalg.transpose",
                       lambda op: plan_transpose(op, 2, AVX512)) is None  # 100 rows: no whole 8x8 tiles


def test_elementwise_plans():
    from relax_mlir.backend.schedule import PARALLEL_MIN_POINTS, plan_parallel_generic

    assert 256 * 1024 >= PARALLEL_MIN_POINTS
    assert _first_plan(BIAS_RELU.format(m=256, n=1024), "linalg.generic",
                       lambda op: plan_parallel_generic(op, 2)) == [2, 0]
    assert _first_plan(BIAS_RELU.format(m=64, n=128), "linalg.generic",
                       lambda op: plan_parallel_generic(op, 2)) is None  # small: one thread
    assert _first_plan(BIAS_RELU.format(m=256, n=1024), "linalg.generic",
                       lambda op: plan_parallel_generic(op, 1)) is None
    # a batch-norm statistic (sum over images and pixels per channel): split by image, partials per thread
    stat = CHANNEL_SUM.format(n=64, c=16, p=196, outer="reduction", inner="reduction")
    assert _first_plan(stat, "linalg.generic", lambda op: plan_parallel_generic(op, 2)) == [-2, 0, 0]
    # innermost loop parallel (its partials would be stored every iteration): split along the parallel loop
    inner = CHANNEL_SUM.format(n=64, c=16, p=196, outer="reduction", inner="parallel").replace("-> (d1)", "-> (d1, d2)")
    inner = inner.replace("tensor<16xf32>", "tensor<16x196xf32>")
    assert _first_plan(inner, "linalg.generic", lambda op: plan_parallel_generic(op, 2)) == [0, 2, 0]


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_batch_split_reductions_match_numpy(threads):
    """A sum over images and pixels per channel split by image across threads (partials combined after) equals
    NumPy's float64 sum within float32 reassociation (a sum of 6272 values of magnitude ~1: rtol 1e-5)."""
    options = PipelineOptions(num_threads=threads)
    text = CHANNEL_SUM.format(n=64, c=16, p=196, outer="reduction", inner="reduction")
    x = np.random.default_rng(threads).standard_normal((64, 16, 196), dtype=np.float32)
    got = compile_module(text, options=options).main(x)
    # The float32 partials round at a few ulps of the sum of |x| (~5000 per channel), not of the ~80 the signed
    # values sum to: 0.34-0.38 of the way to rtol 1e-5 + atol 1e-4 at each vector width. A floor of 4 of those ulps.
    terms = np.abs(x.astype(np.float64)).sum(axis=(0, 2)).max()
    np.testing.assert_allclose(got, x.astype(np.float64).sum(axis=(0, 2)), rtol=1e-5,
                               atol=max(1e-4, 4 * float(np.finfo(np.float32).eps) * terms))


@pytest.mark.parametrize("m, n", [(1024, 512), (48, 32), (100, 30)])
@pytest.mark.parametrize("threads", [1, 2])
def test_scheduled_transposes_and_generics_match_numpy(m, n, threads):
    options = PipelineOptions(num_threads=threads)
    x = np.random.default_rng(m * n).standard_normal((m, n), dtype=np.float32)
    np.testing.assert_array_equal(compile_module(TRANSPOSE.format(m=m, n=n), options=options).main(x), x.T)
    b = np.arange(n, dtype=np.float32) - n / 2
    got = compile_module(BIAS_RELU.format(m=m, n=n), options=options).main(x, b)
    np.testing.assert_array_equal(got, np.maximum(x + b, 0))


@pytest.mark.parametrize("threads", [1, 2])
def test_im2col_convolutions_and_reassociated_sums_match_the_interpreter(threads):
    import relax_mlir
    from relax_mlir.script import ir as I, relax as R  # noqa: E741

    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((16, 3, 13, 11), "float32"), w: R.Tensor((5, 3, 3, 3), "float32")) -> R.Tensor((), "float32"):
            with R.dataflow():
                y = R.nn.conv2d(x, w, strides=(2, 1), padding=(1, 0, 2, 1))
                s = R.sum(y)
                R.output(s)
            return s

    text = relax_mlir.to_mlir(Module, "scheduled", options=PipelineOptions(num_threads=threads))
    assert "fastmath<reassoc>" in text and "linalg.conv_2d_nchw_fchw" not in text  # im2col took it
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 3, 13, 11), dtype=np.float32)
    w = rng.standard_normal((5, 3, 3, 3), dtype=np.float32)
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(Module, num_threads=threads))
    want = relax_mlir.interpret(Module, "main", x, w)
    # a sum of 16x5x7x12 float32 values in another order: a few ulps of the sum of magnitudes
    np.testing.assert_allclose(vm["main"](x, w), want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("threads", [1, 2])
def test_max_pool_gradient_of_tiling_windows_matches_the_interpreter(threads):
    """Windows that tile the input exactly take the one-pass lowering; ties go to the window's first maximum."""
    import relax_mlir
    from relax_mlir.script import ir as I, relax as R  # noqa: E741

    @I.ir_module
    class Module:
        @R.function
        def main(g: R.Tensor((4, 3, 6, 4), "float32"), x: R.Tensor((4, 3, 12, 12), "float32")) -> R.Tensor((4, 3, 12, 12), "float32"):
            y = R.grad.max_pool2d_backward(g, x, pool_size=(2, 3), strides=(2, 3))
            return y

    rng = np.random.default_rng(2)
    g = rng.standard_normal((4, 3, 6, 4), dtype=np.float32)
    x = rng.integers(0, 3, (4, 3, 12, 12)).astype(np.float32)  # few values: many ties inside a window
    assert "tensor<4x3x6x2x4x3xf32>" in relax_mlir.to_mlir(Module, "linalg")  # the [n, c, oh, i, ow, j] form
    got = relax_mlir.VirtualMachine(relax_mlir.compile(Module, num_threads=threads))["main"](g, x)
    np.testing.assert_array_equal(got, relax_mlir.interpret(Module, "main", g, x))
    assert np.count_nonzero(got) == g.size  # exactly one element of each window gets its gradient


def _pool_module(n: int, c: int, h: int, w: int, kernel: tuple[int, int]):
    """max_pool2d and its gradient on windows that tile an (n, c, h, w) input."""
    from relax_mlir.ir import BlockBuilder, TensorStructInfo, Var
    from relax_mlir.op import grad, nn

    oh, ow = h // kernel[0], w // kernel[1]
    x = Var("x", TensorStructInfo((n, c, h, w), "float32"))
    g = Var("g", TensorStructInfo((n, c, oh, ow), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x, g]):
        with bb.dataflow():
            y = bb.emit_output(nn.max_pool2d(x, pool_size=kernel, strides=kernel))
            dx = bb.emit_output(grad.max_pool2d_backward(g, x, pool_size=kernel, strides=kernel))
        bb.emit_func_output([y, dx])
    return bb.get()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape, kernel", [((2, 3, 4, 74), (2, 2)), ((1, 2, 9, 6), (3, 2)), ((2, 1, 4, 9), (2, 3))])
def test_max_pool_vector_loops_match_the_interpreter_with_ties_and_nans(threads, shape, kernel):
    """Tiling max pooling and its gradient become vector loops (rows longer than one vector register: 37
    windows are 16 + 16 + 5 lanes with AVX-512); values, ties (to the window's first maximum) and NaNs (a NaN
    is the maximum; the first NaN gets the gradient) as the NumPy reference."""
    import relax_mlir

    mod = _pool_module(*shape, kernel)
    text = relax_mlir.to_mlir(mod, "scheduled", options=PipelineOptions(num_threads=threads))
    assert "vector.shuffle" in text and "relax_mlir.pool" not in text
    rng = np.random.default_rng(3)
    x = rng.integers(0, 3, shape).astype(np.float32)  # few values: many ties inside a window
    x.flat[rng.choice(x.size, x.size // 9, replace=False)] = np.nan
    g = rng.standard_normal((shape[0], shape[1], shape[2] // kernel[0], shape[3] // kernel[1]), dtype=np.float32)
    got = relax_mlir.VirtualMachine(relax_mlir.compile(mod, num_threads=threads))["main"](x, g)
    want = relax_mlir.interpret(mod, "main", x, g)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert np.isnan(got[0]).any() and np.count_nonzero(got[1]) == g.size


@pytest.mark.parametrize("threads", [2, 3])
def test_max_pool_rows_split_across_threads_match_the_interpreter(monkeypatch, threads):
    """Large poolings split their rows of windows into one block per thread (scf.forall over scf.for); 9 rows
    give blocks of 5 + 4 (two threads) and 3 + 3 + 3 (three); values and gradients as the NumPy reference."""
    import relax_mlir
    from relax_mlir.backend.schedule import elementwise

    mod = _pool_module(1, 3, 6, 8, (2, 2))
    monkeypatch.setattr(elementwise, "PARALLEL_MIN_POINTS", 1)  # these rows are far below the real threshold
    text = relax_mlir.to_mlir(mod, "scheduled", options=PipelineOptions(num_threads=threads))
    assert text.count("scf.forall") >= 2 and "vector.shuffle" in text
    rng = np.random.default_rng(4)
    x = rng.integers(0, 4, (1, 3, 6, 8)).astype(np.float32)
    g = rng.standard_normal((1, 3, 3, 4), dtype=np.float32)
    got = relax_mlir.VirtualMachine(relax_mlir.compile(mod, num_threads=threads))["main"](x, g)
    want = relax_mlir.interpret(mod, "main", x, g)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    monkeypatch.setattr(elementwise, "PARALLEL_MIN_POINTS", 2 ** 18)
    assert "scf.forall" not in relax_mlir.to_mlir(mod, "scheduled", options=PipelineOptions(num_threads=threads))


def test_max_pool_of_tiling_windows_with_a_symbolic_batch_matches_the_interpreter():
    """A symbolic batch keeps the one-pass window generic (the vector loop needs static sizes): it compiles and
    its values, for two batch sizes, are the NumPy reference's."""
    import relax_mlir
    from relax_mlir.ir import SizeVar

    mod = _pool_module(SizeVar("n"), 3, 4, 6, (2, 2))
    assert "relax_mlir.pool" in relax_mlir.to_mlir(mod, "linalg")  # the tiling lowering was taken
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod))
    rng = np.random.default_rng(4)
    for n in (1, 5):
        x = rng.integers(0, 3, (n, 3, 4, 6)).astype(np.float32)
        g = rng.standard_normal((n, 3, 2, 3), dtype=np.float32)
        got, want = vm["main"](x, g), relax_mlir.interpret(mod, "main", x, g)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def _conv_module(x_shape, w_shape, padding, transpose_w=False):
    """conv2d(x, w) (w given as its (1, 0, 2, 3) transpose when ``transpose_w``: the weight gradient's form)."""
    from relax_mlir import op
    from relax_mlir.ir import BlockBuilder, TensorStructInfo, Var

    w_given = (w_shape[1], w_shape[0], *w_shape[2:]) if transpose_w else w_shape
    x = Var("x", TensorStructInfo(x_shape, "float32"))
    w = Var("w", TensorStructInfo(w_given, "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            kernel = op.permute_dims(w, [1, 0, 2, 3]) if transpose_w else w
            y = bb.emit_output(op.nn.conv2d(x, kernel, padding=padding))
        bb.emit_func_output(y)
    return bb.get()


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("x_shape, w_shape, padding, transpose_w, path", [
    ((3, 5, 9, 11), (12, 5, 3, 3), 1, False, "shifted"),  # 12 filters: blocks of 6; 99 rows: tiles past the end
    ((2, 3, 7, 6), (7, 3, 2, 3), 0, False, "shifted"),  # 7 filters (one block of 7), a 2x3 kernel
    ((2, 2, 12, 14), (3, 2, 5, 5), 2, False, "shifted"),  # 3 filters, 5x5: a loop over the kernel's rows
    ((4, 6, 12, 12), (6, 6, 3, 11), 0, True, "wide"),  # kernel rows of 11: one masked vector (or 8 + 3 lanes)
    ((2, 3, 9, 20), (5, 3, 4, 17), 1, False, "wide"),  # rows of 17: 16 + 1 (AVX-512) or 8 + 8 + 1 lanes
    ((1, 2, 5, 21), (3, 2, 3, 16), 0, False, "wide"),  # 1 x 3 x 6 outputs: 18 positions, column tiles of 3
])
def test_direct_convolutions_match_the_interpreter(threads, x_shape, w_shape, padding, transpose_w, path):
    """Stride-1 convolutions run as direct vector code (conv.py): over shifted rows (small kernels) or along
    the kernel's rows (kernels at least half a vector register wide, read through a transpose that keeps the
    innermost dimension). Shapes whose tiles do not divide evenly; values as the NumPy reference within the
    reassociated sums' rounding (float32 sums of up to ~300 products of normal values: rtol 1e-4)."""
    import relax_mlir

    mod = _conv_module(x_shape, w_shape, padding, transpose_w)
    scheduled = relax_mlir.to_mlir(mod, "scheduled", options=PipelineOptions(num_threads=threads))
    assert "linalg.conv" not in scheduled and "vector.fma" in scheduled
    assert ("vector.reduction <add>" in scheduled) == (path == "wide")
    if path == "shifted" and w_shape[0] == 3:  # the kernel's rows looped, one row unrolled: KW columns x 3 filters
        assert scheduled.count("vector.fma") == w_shape[3] * 3 * 2  # (one block) x 2 vectors of the register tile
    rng = np.random.default_rng(7)
    x = rng.standard_normal(x_shape, dtype=np.float32)
    w = rng.standard_normal(mod["main"].params[1].struct_info.shape, dtype=np.float32)
    got = relax_mlir.VirtualMachine(relax_mlir.compile(mod, num_threads=threads))["main"](x, w)
    np.testing.assert_allclose(got, relax_mlir.interpret(mod, "main", x, w), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("x_shape, w_shape, padding, transpose_w", [
    ((2, 3, 9, 11), (4, 3, 3, 3), 1, False), ((2, 5, 12, 12), (2, 5, 10, 10), 0, True)])
def test_direct_convolutions_keep_nans_and_infinities_where_the_reference_has_them(x_shape, w_shape, padding,
                                                                                   transpose_w):
    """The columns the shifted rows compute past each output row (cropped) and the masked lanes of a wide
    kernel's last vector (0 x 0) never reach a kept output: a NaN or an infinity in the input shows exactly
    where the NumPy reference has one."""
    import relax_mlir

    mod = _conv_module(x_shape, w_shape, padding, transpose_w)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(x_shape, dtype=np.float32)
    x.flat[rng.choice(x.size, 3, replace=False)] = [np.nan, np.inf, -np.inf]
    w = rng.standard_normal(mod["main"].params[1].struct_info.shape, dtype=np.float32)
    want = relax_mlir.interpret(mod, "main", x, w)
    got = relax_mlir.VirtualMachine(relax_mlir.compile(mod, num_threads=2))["main"](x, w)
    assert np.isnan(want).any() and np.isfinite(want).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=1e-4)


def test_large_pads_are_copied_by_a_generic_the_threads_share(monkeypatch):
    """A large constant pad becomes a fill generic and a copy generic, both split across threads (pad.py), the
    copy reading through a transpose that keeps the innermost dimension; one thread keeps the pad. Values as
    NumPy's."""
    import relax_mlir
    from relax_mlir import op
    from relax_mlir.ir import BlockBuilder, TensorStructInfo, Var

    x = Var("x", TensorStructInfo((6, 40, 70), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            t = op.permute_dims(x, [1, 0, 2])
            y = bb.emit_output(op.nn.pad(t, [0, 0, 1, 2, 3, 1], pad_value=1.5))
        bb.emit_func_output(y)
    mod = bb.get()
    from relax_mlir.backend.schedule import elementwise

    monkeypatch.setattr(elementwise, "PARALLEL_MIN_POINTS", 2 ** 12)  # 40x9x74 is below the real threshold
    two = relax_mlir.to_mlir(mod, "scheduled", options=PipelineOptions(num_threads=2))
    assert "tensor.pad" not in two and "linalg.transpose" not in two and "linalg.fill" not in two
    assert two.count("scf.forall (") == 2, two  # the fill's and the copy's
    assert "tensor.pad" in relax_mlir.to_mlir(mod, "scheduled", options=PipelineOptions(num_threads=1))
    data = np.random.default_rng(8).standard_normal((6, 40, 70), dtype=np.float32)
    got = relax_mlir.VirtualMachine(relax_mlir.compile(mod, num_threads=2))["main"](data)
    want = np.pad(data.transpose(1, 0, 2), [(0, 0), (1, 2), (3, 1)], constant_values=1.5)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("threads", [1, 2])
def test_stride_one_convolutions_take_shifted_rows_and_match_the_interpreter(threads):
    """A stride-1 convolution narrow enough becomes direct vector code over shifted rows (output rows as wide as
    the padded input, rounded up to whole register tiles; vector.fma of broadcast weights, no im2col copy, no
    floordiv); its padding and crop are copied by loops, not by the runtime's element-at-a-time memrefCopy. A
    kernel as wide as the image (a weight gradient's) is computed directly along its rows, reduced at the end
    (vector.reduction). Values as the NumPy reference."""
    import relax_mlir
    from relax_mlir.script import ir as I, relax as R  # noqa: E741

    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((4, 3, 9, 20), "float32"), w: R.Tensor((5, 3, 3, 4), "float32"),
                 v: R.Tensor((2, 3, 9, 20), "float32")):
            with R.dataflow():
                y = R.nn.conv2d(x, w, padding=(1, 2, 0, 1))
                k = R.nn.conv2d(x, v, padding=(1, 1, 1, 1))
                out = (y, k)
                R.output(out)
            return out

    scheduled = relax_mlir.to_mlir(Module, "scheduled", options=PipelineOptions(num_threads=threads))
    assert "tensor<4x3x11x23xf32>" in scheduled  # x padded, one more row for the last shifted copy
    assert "tensor<4x5x184xf32>" in scheduled  # the wide output: 8 rows of 23 columns, 20 of them kept
    assert "vector.fma" in scheduled and "floordiv" not in scheduled and "linalg.conv" not in scheduled
    assert "vector.reduction <add>" in scheduled  # the second convolution, along its 20-wide kernel rows
    assert "memrefCopy" not in relax_mlir.to_mlir(Module, "llvm", options=PipelineOptions(num_threads=threads))
    rng = np.random.default_rng(4)
    args = [rng.standard_normal(s, dtype=np.float32) for s in ((4, 3, 9, 20), (5, 3, 3, 4), (2, 3, 9, 20))]
    got = relax_mlir.VirtualMachine(relax_mlir.compile(Module, num_threads=threads))["main"](*args)
    want = relax_mlir.interpret(Module, "main", *args)
    for g, w_ in zip(got, want):
        np.testing.assert_allclose(g, w_, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_packed_matmul_of_a_transposed_b_transposes_its_blocks(threads):
    """g w^T (large enough to be packed): no transpose of all of w is written; the packing transposes each block
    of w it needs. Values as float64 NumPy within float32 sums of 1024 products."""
    import relax_mlir
    from relax_mlir import op
    from relax_mlir.ir import BlockBuilder, TensorStructInfo, Var

    g = Var("g", TensorStructInfo((256, 1024), "float32"))
    w = Var("w", TensorStructInfo((512, 1024), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [g, w]):
        with bb.dataflow():
            y = bb.emit_output(op.matmul(g, op.permute_dims(w, [1, 0])))
        bb.emit_func_output(y)
    mod = bb.get()
    text = relax_mlir.to_mlir(mod, "scheduled", options=PipelineOptions(num_threads=threads))
    assert "linalg.transpose" not in text and "tensor<1024x512xf32>" not in text
    assert "permutation_map" in text  # 8x8 blocks of w read transposed into the packed buffer
    rng = np.random.default_rng(threads)
    gv = rng.standard_normal((256, 1024), dtype=np.float32)
    wv = rng.standard_normal((512, 1024), dtype=np.float32)
    got = relax_mlir.VirtualMachine(relax_mlir.compile(mod, num_threads=threads))["main"](gv, wv)
    np.testing.assert_allclose(got, gv.astype(np.float64) @ wv.T.astype(np.float64), rtol=1e-4,
                               atol=1e-4 * np.sqrt(1024))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("m, k, n", [(128, 64, 256), (1024, 256, 1024), (10, 64, 10)])
def test_a_transposed_left_operand_is_read_through_the_map(threads, m, k, n):
    """x^T g (a dense layer's weight gradient) reads x through (m, n, k) -> (k, m): no transpose is left in the
    scheduled IR, and the values are NumPy's (float32 sums of k products in another order: a few ulps of the
    sum of magnitudes)."""
    import relax_mlir
    from relax_mlir.script import from_source

    mod = from_source(f"""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(({k}, {m}), "float32"), g: R.Tensor(({k}, {n}), "float32")):
        with R.dataflow():
            dw = R.matmul(R.permute_dims(x), g)
            R.output(dw)
        return dw
""")
    text = relax_mlir.to_mlir(mod, "scheduled", options=PipelineOptions(num_threads=threads))
    assert "linalg.transpose" not in text and "affine_map<(d0, d1, d2) -> (d2, d0)>" in text
    rng = np.random.default_rng(5)
    x, g = rng.standard_normal((k, m), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    got = relax_mlir.VirtualMachine(relax_mlir.compile(mod, num_threads=threads))["main"](x, g)
    np.testing.assert_allclose(got, x.T.astype(np.float64) @ g, rtol=1e-5, atol=1e-5 * (np.abs(x).T @ np.abs(g)).max())


def _one_op_module(**functions: tuple[str, str]) -> str:
    """TVMScript of a module whose functions each return one expression: ``name=(parameters, expression)``."""
    parts = ["@I.ir_module", "class Module:"]
    for name, (params, expr) in functions.items():
        parts += ["    @R.function", f"    def {name}({params}):", "        with R.dataflow():",
                  f"            y = {expr}", "            R.output(y)", "        return y", ""]
    return "\n".join(parts)


_INVARIANTS = _one_op_module(
    normalize=('x: R.Tensor((6, 5, 4, 4), "float32"), v: R.Tensor((1, 5, 1, 1), "float32")', "R.divide(x, R.sqrt(v))"),
    divide=('x: R.Tensor((6, 5), "float32"), d: R.Tensor((6, 1), "float32")', "R.divide(x, d)"),
    log_softmax=('x: R.Tensor((8, 10), "float32")', "R.nn.log_softmax(x, axis=1)"))


def test_invariant_work_is_hoisted_and_the_values_are_numpys():
    """schedule/invariants.py: a division by a broadcast square root becomes a multiply by a reciprocal computed
    once per channel; its special values are the quotient's exactly (a zero, an infinite and a NaN variance, a
    denormal one, a zero and an infinite numerator), its finite values within 2 ulp of NumPy's float32 quotient
    (two roundings instead of one). A division by a broadcast that is not a square root stays a division, bit
    for bit NumPy's (a denormal divisor: x * (1 / d) would overflow). Log-softmax's log runs once per row."""
    import relax_mlir
    from relax_mlir.script import from_source

    mod = from_source(_INVARIANTS)
    text = relax_mlir.to_mlir(mod, "scheduled")
    normalize = text[text.index("@normalize"):text.index("@divide")]
    big = normalize[normalize.index("tensor<6x5x16xf32>, tensor<1x5x1xf32>"):]  # the per-channel 1s collapsed
    big = big[:big.index("linalg.yield")]
    assert "arith.mulf" in big and "arith.divf" not in big and "math.sqrt" not in big, big
    assert normalize.count("arith.divf") == 1  # the reciprocal, once per channel
    divide = text[text.index("@divide"):text.index("@log_softmax")]
    assert "arith.divf" in divide and "arith.mulf" not in divide
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 5, 4, 4)).astype(np.float32)
    x[0, :, 0, 0], x[1, :, 0, 0] = 0.0, np.inf
    v = np.array([0.0, np.inf, np.nan, 1e-45, 2.5], np.float32).reshape(1, 5, 1, 1)
    with np.errstate(all="ignore"):
        want = x / np.sqrt(v)
        got = vm["normalize"](x, v)
    special = ~np.isfinite(want) | (want == 0)
    np.testing.assert_array_equal(got[special], want[special])
    np.testing.assert_array_max_ulp(got[~special], want[~special], maxulp=2)
    d = np.array([1e-40, 3.0, -2.0, np.inf, 0.0, 1e-38], np.float32).reshape(6, 1)
    xs = np.full((6, 5), 1e-40, np.float32)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(vm["divide"](xs, d), xs / d)
    softmax = text[text.index("@log_softmax"):]
    logs = [line for line in softmax.splitlines() if "ins(" in line and "tensor<8xf32>) outs(" in line
            and "tensor<8x10xf32>" not in line]
    assert logs, "the log of the row sums is not a generic over the 8 rows"
    z = rng.standard_normal((8, 10)).astype(np.float32)
    shifted = z.astype(np.float64) - z.max(1, keepdims=True)
    np.testing.assert_allclose(vm["log_softmax"](z), shifted - np.log(np.exp(shifted).sum(1, keepdims=True)),
                               rtol=1e-6, atol=1e-6)


_FILLED_MATMULS = """
func.func @main(%x: tensor<64x96xf32>, %w: tensor<96x128xf32>, %v: tensor<96x128xf32>, %u: tensor<70x96xf32>,
                %z: tensor<96x100xf32>) -> (tensor<64x128xf32>, tensor<64x128xf32>, tensor<64x128xf32>,
                                             tensor<70x100xf32>) {
  %c = arith.constant 0.5 : f32
  %e = tensor.empty() : tensor<64x128xf32>
  %acc = linalg.fill ins(%c : f32) outs(%e : tensor<64x128xf32>) -> tensor<64x128xf32>
  %p = linalg.matmul ins(%x, %w : tensor<64x96xf32>, tensor<96x128xf32>) outs(%acc : tensor<64x128xf32>) -> tensor<64x128xf32>
  %q = linalg.matmul ins(%x, %v : tensor<64x96xf32>, tensor<96x128xf32>) outs(%acc : tensor<64x128xf32>) -> tensor<64x128xf32>
  %e2 = tensor.empty() : tensor<64x128xf32>
  %r = linalg.add ins(%acc, %p : tensor<64x128xf32>, tensor<64x128xf32>) outs(%e2 : tensor<64x128xf32>) -> tensor<64x128xf32>
  %e3 = tensor.empty() : tensor<70x100xf32>
  %acc3 = linalg.fill ins(%c : f32) outs(%e3 : tensor<70x100xf32>) -> tensor<70x100xf32>
  %s = linalg.matmul ins(%u, %z : tensor<70x96xf32>, tensor<96x100xf32>) outs(%acc3 : tensor<70x100xf32>) -> tensor<70x100xf32>
  return %p, %q, %r, %s : tensor<64x128xf32>, tensor<64x128xf32>, tensor<64x128xf32>, tensor<70x100xf32>
}
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_register_tiles_start_from_the_fill_value(pinned_host, threads):
    """accumulators.zero_accumulators: tiles start from the fill's value (a broadcast, here 0.5) instead of reading
    the filled tensor; the fill stays for what else reads it (``r = acc + p``) and for the 70x100 product, whose
    last 6 rows are a nest of their own (peeled) that reads it, while its first 64 rows start from the broadcast
    (8x32 and 8x4 tiles). Values: NumPy's in float64 (float32 sums of 96 products: 1e-5 relative)."""
    from relax_mlir.backend.pipeline import lower
    from relax_mlir.backend.schedule import accumulators

    scheduled = lower(_FILLED_MATMULS, "scheduled", PipelineOptions(num_threads=threads))
    # p, q and s's first 64 rows start from the broadcast 0.5; the fills stay, read by r and by s's last rows
    assert len(re.findall(r"vector.broadcast %\S+ : f32 to vector<8x32xf32>", scheduled)) == 3, scheduled
    assert len(re.findall(r"vector.broadcast %\S+ : f32 to vector<8x4xf32>", scheduled)) == 1, scheduled
    assert scheduled.count("linalg.fill") == 2, scheduled
    f = compile_module(_FILLED_MATMULS, options=PipelineOptions(num_threads=threads))["main"]
    rng = np.random.default_rng(11)
    x, w, v = (rng.standard_normal(s).astype(np.float32) for s in ((64, 96), (96, 128), (96, 128)))
    u, z = rng.standard_normal((70, 96)).astype(np.float32), rng.standard_normal((96, 100)).astype(np.float32)
    p, q, r, s = f(x, w, v, u, z)
    x64 = x.astype(np.float64)
    for got, want in ((p, x64 @ w + 0.5), (q, x64 @ v + 0.5), (r, x64 @ w + 1.0), (s, u.astype(np.float64) @ z + 0.5)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * 96)
    with ir.Context():
        assert accumulators.zero_accumulators(ir.Module.parse("module {}")) == 0


_K_BLOCKED = """
func.func @main(%x: tensor<128x512xf32>, %w: tensor<512x256xf32>) -> tensor<128x256xf32> {
  %c = arith.constant 0.5 : f32
  %e = tensor.empty() : tensor<128x256xf32>
  %acc = linalg.fill ins(%c : f32) outs(%e : tensor<128x256xf32>) -> tensor<128x256xf32>
  %p = linalg.matmul ins(%x, %w : tensor<128x512xf32>, tensor<512x256xf32>) outs(%acc : tensor<128x256xf32>) -> tensor<128x256xf32>
  return %p : tensor<128x256xf32>
}
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_k_blocked_tiles_start_from_the_fill_value_in_their_first_block(monkeypatch, threads):
    """A matmul whose K is cache-tiled (L2 pinned to 64 KiB, L1d to 16 KiB: K = 512 in blocks of 128, packed,
    and split across threads with two): each tile starts from the fill's value in the first K block only (an
    ``scf.if`` on the K loop's induction variable), reads back what the earlier blocks wrote in the others, and
    the fill is gone (the tiles write every element in the first block). Values: NumPy's in float64."""
    from relax_mlir.backend.pipeline import lower

    monkeypatch.setenv("RELAX_MLIR_L2_BYTES", "64K")
    monkeypatch.setenv("RELAX_MLIR_L1D_BYTES", "16K")
    monkeypatch.setenv("RELAX_MLIR_VECTOR_BITS", "512")
    host_module.host_cpu.cache_clear()
    try:
        scheduled = lower(_K_BLOCKED, "scheduled", PipelineOptions(num_threads=threads))
        f = compile_module(_K_BLOCKED, options=PipelineOptions(num_threads=threads))["main"]
    finally:
        for var in ("RELAX_MLIR_L2_BYTES", "RELAX_MLIR_L1D_BYTES", "RELAX_MLIR_VECTOR_BITS"):
            monkeypatch.delenv(var)
        host_module.host_cpu.cache_clear()
    assert "linalg.fill" not in scheduled, scheduled
    assert re.search(r"scf.for %(\S+) = %c0 to %c512 step %c128 iter_args", scheduled), scheduled  # the K blocks
    assert re.search(r"arith.cmpi eq, %\S+, %c0 : index\n\s*%\S+ = scf.if %\S+ -> \(vector<8x32xf32>\) \{\n"
                     r"\s*scf.yield %\S+ : vector<8x32xf32>\n\s*\} else \{\n\s*%\S+ = vector.transfer_read",
                     scheduled), scheduled
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((128, 512)).astype(np.float32), rng.standard_normal((512, 256)).astype(np.float32)
    np.testing.assert_allclose(f(x, w), x.astype(np.float64) @ w + 0.5, rtol=1e-5, atol=1e-5 * 512)


def test_short_rows_are_vectorized_one_row_at_a_time(monkeypatch):
    """elementwise.vectorize_short_rows: softmax over 10 classes (64x10, the MLPs' last layer) and over 3 runs as
    row vectors (vector<10xf32>, vector<3xf32>: shorter than the 16 lanes of the pinned 512-bit host) instead of
    scalar loops; the values are NumPy's, NaN and inf rows included (a NaN logit gives a NaN row, an inf one a
    NaN softmax)."""
    import relax_mlir
    from relax_mlir.backend.build import clear_cache
    from relax_mlir.script import from_source

    monkeypatch.setenv("RELAX_MLIR_VECTOR_BITS", "512")
    monkeypatch.setenv("RELAX_MLIR_CACHE", "0")
    host_module.host_cpu.cache_clear()
    clear_cache()
    try:
        _check_short_rows(relax_mlir, from_source)
    finally:
        monkeypatch.delenv("RELAX_MLIR_VECTOR_BITS")
        host_module.host_cpu.cache_clear()
        clear_cache()


def _check_short_rows(relax_mlir, from_source):
    mod = from_source(_one_op_module(ten=('x: R.Tensor((64, 10), "float32")', "R.nn.softmax(x, axis=1)"),
                                     three=('x: R.Tensor((5, 3), "float32")', "R.nn.log_softmax(x, axis=1)")))
    text = relax_mlir.to_mlir(mod, "scheduled")
    assert "vector<10xf32>" in text and "vector<3xf32>" in text, text
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod))
    rng = np.random.default_rng(2)
    x = (3 * rng.standard_normal((64, 10))).astype(np.float32)
    x[5, 3], x[9, :] = np.nan, np.inf
    with np.errstate(invalid="ignore"):
        e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
        want = e / e.sum(1, keepdims=True)
        got = vm["ten"](x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(want)], want[~np.isnan(want)], rtol=2e-6, atol=1e-7)
    z = rng.standard_normal((5, 3)).astype(np.float32)
    shifted = z.astype(np.float64) - z.max(1, keepdims=True)
    np.testing.assert_allclose(vm["three"](z), shifted - np.log(np.exp(shifted).sum(1, keepdims=True)),
                               rtol=1e-6, atol=1e-6)


def test_narrow_matmuls_pad_n_to_whole_vectors():
    # N = 10 on AVX-512: one 16-lane vector (the last six lanes zero) instead of an 8-lane tile and a peeled 2
    plan = _plan(64, 128, 10, 1, AVX512)
    assert plan.pad_n == 16 and plan.tile_sizes == (8, 16, 1) and plan.peel == ()
    assert _plan(64, 128, 28, 1, AVX512).pad_n == 32  # two vectors instead of 16 + 8 + 4
    assert _plan(64, 128, 3, 1, AVX512).pad_n == 16 and _plan(64, 128, 6, 1, AVX2).pad_n == 8
    # no fewer vectors padded (24 = 16 + 8, 8, 16), wide ones (tiled by 32 with a peeled remainder): left alone
    for n in (24, 16, 8, 70):
        assert _plan(64, 128, n, 1, AVX512).pad_n == 0, n


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("m, k, n, dtype", [(64, 128, 10, "float32"), (100, 50, 3, "float32"),
                                            (37, 64, 28, "float32"), (64, 32, 6, "float64")])
def test_narrow_matmuls_read_past_the_row_and_match_numpy(pinned_host, threads, m, k, n, dtype):
    """B's rows are read whole vectors wide under a mask (no zero-padded copy of B is made), the padded columns of
    the result are dropped (the bias added after it, as a dense layer does, reads the real ones in place). Values are NumPy's (sums of k products
    in another order: a few ulps of the sum of magnitudes)."""
    import relax_mlir
    from relax_mlir.script import from_source

    mod = from_source(f"""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(({m}, {k}), "{dtype}"), w: R.Tensor(({k}, {n}), "{dtype}"),
             b: R.Tensor(({n},), "{dtype}")):
        with R.dataflow():
            y = R.add(R.matmul(x, w), b)
            R.output(y)
        return y
""")
    text = relax_mlir.to_mlir(mod, "scheduled", options=PipelineOptions(num_threads=threads))
    assert re.search(rf"vector.transfer_read %\w+\[.*in_bounds = \[true, false\]\}} : tensor<{k}x{n}xf(32|64)>", text)
    assert "tensor.pad" not in text and "linalg.copy" not in text  # nor the copy of the real columns
    f = relax_mlir.VirtualMachine(relax_mlir.compile(mod, num_threads=threads))["main"]
    rng = np.random.default_rng(n)
    x = rng.standard_normal((m, k)).astype(dtype)
    w, b = rng.standard_normal((k, n)).astype(dtype), rng.standard_normal(n).astype(dtype)
    got = f(x, w, b)
    assert got.shape == (m, n) and got.dtype == np.dtype(dtype)
    want = x.astype(np.float64) @ w.astype(np.float64) + b
    scale = np.abs(x).astype(np.float64) @ np.abs(w).astype(np.float64) + np.abs(b)
    np.testing.assert_allclose(got, want, rtol=0, atol=float(np.finfo(dtype).eps) * 8 * scale.max())


def test_every_narrow_width_matches_numpy():
    """N = 1..33 (padded or not, by padded_width), 9 rows (a peeled one), through one module per width; the values
    against NumPy's in float64 (sums of 5 products: a few ulps)."""
    import relax_mlir
    from relax_mlir.script import from_source

    widths = range(1, 34)
    mod = from_source(_one_op_module(**{
        f"n{n}": (f'x: R.Tensor((9, 5), "float32"), w: R.Tensor((5, {n}), "float32")', "R.matmul(x, w)")
        for n in widths}))
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod, num_threads=1))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((9, 5), dtype=np.float32)
    for n in widths:
        w = rng.standard_normal((5, n), dtype=np.float32)
        got = vm[f"n{n}"](x, w)
        want = x.astype(np.float64) @ w
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * (np.abs(x) @ np.abs(w)).max(), err_msg=f"N = {n}")


_PADDED_READS = """
func.func @f(%t: tensor<4x10xf32>, %i: index) -> (vector<16xf32>, vector<10xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %cols = tensor.pad %t low[0, 0] high[0, 6] {
  ^bb0(%a: index, %b: index):
    tensor.yield %zero : f32
  } : tensor<4x10xf32> to tensor<4x16xf32>
  %rows = tensor.pad %t low[0, 0] high[2, 0] {
  ^bb0(%a: index, %b: index):
    tensor.yield %zero : f32
  } : tensor<4x10xf32> to tensor<6x10xf32>
  %r = vector.transfer_read %cols[%i, %c0], %zero {in_bounds = [true]} : tensor<4x16xf32>, vector<16xf32>
  %s = vector.transfer_read %rows[%i, %c0], %zero {in_bounds = [true]} : tensor<6x10xf32>, vector<10xf32>
  return %r, %s : vector<16xf32>, vector<10xf32>
}
"""


def test_reads_through_pads_only_along_their_vector_dimensions():
    """A read of a row of a column-padded tensor reads the tensor itself, the row's tail out of bounds (zero); a
    read whose row index may point into padded rows (an indexed dimension, which must be in bounds) keeps its pad."""
    from relax_mlir.backend.schedule.matmul import _read_through_pads

    with ir.Context(), ir.Location.unknown():
        mod = ir.Module.parse(_PADDED_READS)
        assert _read_through_pads(mod) == 1
        text = str(mod)
    # (all dimensions out of bounds: printed without in_bounds)
    assert "vector.transfer_read %arg0[%arg1, %c0], %cst : tensor<4x10xf32>, vector<16xf32>" in text
    assert "high[0, 6]" not in text  # the column pad, read by nothing now, is gone
    assert "vector.transfer_read %padded[%arg1, %c0]" in text and "high[2, 0]" in text
