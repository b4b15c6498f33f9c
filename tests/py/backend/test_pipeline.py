"""The named lowering stages: what each one's text shows, the options, and the errors."""

from __future__ import annotations

import re

import numpy as np
import pytest
from mlir import ir

import relax_mlir
from relax_mlir import op as rop
from relax_mlir.ir import BlockBuilder, TensorStructInfo, Var, const

from relax_mlir.backend.bool_storage import widen_bool_memrefs
from relax_mlir.backend.pipeline import STAGES, PipelineOptions, lower, lower_stages
from relax_mlir.backend.host import HostCPU
from relax_mlir.backend.schedule import plan_matmul

from . import linalg_samples as S


def test_stages_in_order():
    texts = lower_stages(S.MATMUL)
    assert list(texts) == list(STAGES) == ["linalg", "fused", "scheduled", "bufferized", "llvm"]
    assert "linalg.matmul" in texts["linalg"] and "vector.contract" not in texts["linalg"]
    # scheduled: an 8x32 accumulator carried through the K loop in registers
    assert "vector.contract" in texts["scheduled"]
    assert re.search(r"scf.for .* iter_args\(.*\) -> \(tensor<8x32xf32>, vector<8x32xf32>\)", texts["scheduled"])
    # bufferized: the result became an out-parameter, nothing is returned or allocated
    assert "func.func @main(%arg0: memref<64x784xf32>, %arg1: memref<784x128xf32>, %arg2: memref<64x128xf32>)" \
        in texts["bufferized"]
    assert "memref.alloc" not in texts["bufferized"] and "tensor<" not in texts["bufferized"]
    assert "llvm.func @main" in texts["llvm"] and "vector.outerproduct" not in texts["llvm"]
    assert "llvm.intr.fmuladd" in texts["llvm"] or "llvm.intr.fma" in texts["llvm"]


def test_opt_level_zero_is_naive_loops():
    text = lower(S.MATMUL, "bufferized", PipelineOptions(opt_level=0))
    assert "linalg.matmul" in text and "vector" not in text
    fused = lower(S.BIAS_RELU, "fused", PipelineOptions(opt_level=0))
    assert fused.count("linalg.generic") == 2
    fused = lower(S.BIAS_RELU, "fused", PipelineOptions(opt_level=1))
    assert fused.count("linalg.generic") == 1  # add and relu are one loop nest
    assert "vector.contract" in lower(S.MATMUL, "scheduled", PipelineOptions(opt_level=1))


def test_dynamic_result_is_written_in_place():
    # hoist-dynamic-allocs: the caller's out-parameter is the buffer, no alloc + copy
    text = lower(S.DYNAMIC, "bufferized")
    assert "memref.alloc" not in text and "memref.copy" not in text


def test_matmul_plans():
    plans = []
    avx512 = HostCPU(vector_bits=512, vector_registers=32, l1d_bytes=48 * 1024, l2_bytes=2048 * 1024, cores=2)

    def visit(op):
        if op.name in ("linalg.matmul", "linalg.batch_matmul"):
            plans.append(plan_matmul(op, host=avx512))
        return ir.WalkResult.ADVANCE

    with ir.Context(), ir.Location.unknown():
        mod = ir.Module.parse(S.MATMUL_SHAPES + S.DYNAMIC_MATMUL.replace("@main", "@dyn"))
        mod.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    tiles = [(p.tile_sizes, p.peel) for p in plans]
    assert tiles == [
        ((8, 32, 1), (1, 0)),  # 100x70: both loops uneven, peeled (N first)
        ((3, 16, 1), ()),  # smaller than a tile: all rows, the 10 columns padded to one 16-lane register
        ((8, 32, 1), ()),  # 784x128 even
        ((1, 8, 16, 1), (2, 1)),  # f64: 16 columns fill two 512-bit registers
        ((8, 8, 1), (1, 0)),  # dynamic batch: peeled, remainder rows left scalar; 8 + 2 columns
    ]


def test_print_after_all_and_timing(capfd):
    lower(S.MATMUL, "llvm", PipelineOptions(print_after_all=True, timing=True))
    err = capfd.readouterr().err
    for banner in ["IR Dump After LinalgElementwiseOpFusionPass (linalg-fuse-elementwise-ops)",
                   "IR Dump After transform schedule: tile and peel matmuls",
                   "IR Dump After transform schedule: vectorize matmul tiles",
                   "IR Dump After OneShotBufferizePass (one-shot-bufferize)",
                   "IR Dump After ReconcileUnrealizedCastsPass (reconcile-unrealized-casts)",
                   "Execution time report", "transform schedules for 1 op(s)"]:
        assert banner in err


def test_bool_memrefs_become_bytes():
    with ir.Context(), ir.Location.unknown():
        mod = ir.Module.parse("""
          func.func @f(%m: memref<8xi1>, %i: index, %v: i1) -> i1 {
            memref.store %v, %m[%i] : memref<8xi1>
            %r = memref.load %m[%i] : memref<8xi1>
            return %r : i1
          }""")
        assert widen_bool_memrefs(mod) == 1
        out = str(mod)
    assert "memref<8xi8>" in out and "arith.extui" in out and "arith.trunci" in out


@pytest.mark.parametrize("values", [np.arange(128) % 3 == 0, np.arange(1000) % 7 < 3, np.ones(300, bool),
                                    np.zeros(300, bool), np.array([True, False, True]), np.array(True),
                                    np.tril(np.ones((16, 16), bool))], ids=lambda v: f"{v.shape}-{v.sum()}")
def test_bool_constants_of_any_size_compile_and_keep_their_values(values):
    """Large constants print as packed hex (a bit per bool): the byte copy is rebuilt from the values."""
    bb = BlockBuilder()
    x = Var("x", TensorStructInfo(values.shape, "bool"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(rop.logical_xor(x, const(values)))
        bb.emit_func_output(y)
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(bb.get()))
    xs = np.random.default_rng(0).random(values.shape) < 0.3
    np.testing.assert_array_equal(vm["main"](xs), xs ^ values)


def test_bad_stage_and_options():
    with pytest.raises(ValueError, match="unknown pipeline stage 'tiled'; stages are linalg, fused, scheduled"):
        lower(S.MATMUL, "tiled")
    with pytest.raises(ValueError, match="cannot lower from stage 'llvm' back to 'linalg'"):
        lower(S.MATMUL, "linalg", from_stage="llvm")
    with pytest.raises(ValueError, match="opt_level must be 0, 1, 2 or 3, got 7"):
        PipelineOptions(opt_level=7)


def test_lower_does_not_modify_a_module_it_is_given():
    with ir.Context(), ir.Location.unknown():
        mod = ir.Module.parse(S.MATMUL)
        before = str(mod)
        assert "llvm.func" in lower(mod, "llvm")
        assert str(mod) == before


@pytest.mark.parametrize("defaults", [True, False], ids=["defaults", "update not fused"])
def test_results_are_written_in_the_callers_buffers_without_copies(monkeypatch, defaults):
    """The tutorial MLP's training step: equal zero fills CSE merged get one fill per accumulation
    (``fill_per_use``); without recompute.py's copies of the bias additions and the updates fused into their
    gradients' tiles (``epilogue.py``), the updated weight, computed 1-D by a coalesced loop into a buffer the step
    also used for a temporary and returned as a 2-D view of it, gets an allocation of its own shape
    (``returned_views_to_allocs``), which buffer-results-to-out-params replaces by the caller's array. Either way
    the bufferized step copies no whole buffer (before these, a memref.copy per shared fill and one into the
    out-parameter), and its numbers are the interpreter's (float32, 2 steps)."""
    import numpy as np

    import relax_mlir.backend.pipeline as pipeline
    import relax_mlir.backend.schedule as schedule
    from relax_mlir.backend.build import clear_cache, to_mlir
    from relax_mlir.ir import TensorStructInfo
    from relax_mlir.models import mlp
    from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer, Trainer

    counts = {}
    if not defaults:
        monkeypatch.setenv("RELAX_MLIR_CACHE", "0")
        monkeypatch.setattr(pipeline, "recompute_cheap_producers", lambda m: 0)
        monkeypatch.setattr(schedule, "mark_epilogues", lambda m, threads=1: 0)
    for name in ("fill_per_use", "returned_views_to_allocs"):
        real = getattr(pipeline, name)
        monkeypatch.setattr(pipeline, name, lambda m, real=real, name=name: counts.setdefault(name, real(m)))
    clear_cache()
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.01, weight_decay=0.01),
                         [TensorStructInfo((64, 10), "float32"), TensorStructInfo((64,), "int64")])
    trainers = [Trainer(mlp(64, (64, 128, 128, 10)), 6, setup).build(target) for target in ("cpu", "numpy")]
    text = str(to_mlir(trainers[0]._used_functions(), "bufferized", options=PipelineOptions(num_threads=2)))
    # (most of its matmuls start from the fill's value and need no fill: accumulators.zero_accumulators)
    assert counts["fill_per_use"] >= 1 and counts["returned_views_to_allocs"] >= (0 if defaults else 1), counts
    whole = [line for line in text.splitlines() if "memref.copy" in line and "strided" not in line]
    assert not whole, whole[:3]
    rng = np.random.default_rng(0)
    for t in trainers:
        t.xavier_uniform_init_params(seed=2)
    for _ in range(2):
        x, y = rng.normal(size=(64, 64)).astype(np.float32), rng.integers(0, 10, 64)
        losses = [float(t.update_params(x, y)) for t in trainers]
        assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    for got, want in zip(trainers[0].params, trainers[1].params):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)  # float32 sums of 64 products, 2 steps


def test_invalid_ir_from_a_python_rewrite_is_caught_before_any_pass_reads_it():
    """MLIR verifies after every pass only with verify_each; the module is verified before each pipeline, so a
    Python rewrite that broke the IR is an MLIRError naming the op, not a pass running on invalid IR."""
    from relax_mlir.backend.pipeline import run_passes

    with ir.Context(), ir.Location.unknown():
        mod = ir.Module.parse("""
          func.func @f(%a: f32, %b: i32) -> f32 {
            %s = arith.addf %a, %a : f32
            return %s : f32
          }""")
        ret = list(list(mod.body.operations)[0].regions[0].blocks[0].operations)[-1]
        ret.operands[0] = list(mod.body.operations)[0].regions[0].blocks[0].arguments[1]  # returns the i32
        for options in (PipelineOptions(), PipelineOptions(verify_each=True)):
            with pytest.raises(ir.MLIRError, match="func.return|type of return operand"):
                run_passes(mod, "builtin.module(canonicalize)", options)


def test_verify_each_turns_on_the_transform_interpreters_expensive_checks(monkeypatch):
    from mlir.dialects.transform import interpreter

    seen = []
    real = interpreter.apply_named_sequence

    def spy(payload, entry, module, options=None):
        seen.append(options.expensive_checks)
        return real(payload, entry, module, options)

    monkeypatch.setattr(interpreter, "apply_named_sequence", spy)
    lower(S.MATMUL, "scheduled")
    off = list(seen)
    seen.clear()
    lower(S.MATMUL, "scheduled", PipelineOptions(verify_each=True))
    assert off and not any(off)  # by default: off, the payload verified before each script instead
    assert seen and all(seen)
    with pytest.raises(TypeError, match="verify_each must be True or False"):
        PipelineOptions(verify_each="yes")


def test_a_failed_schedule_lowers_the_module_as_it_was_before_the_schedules(monkeypatch):
    import relax_mlir.backend.pipeline as pipeline

    def half_done(module, threads=1, print_ir=False):
        for op in module.body.operations:
            op.operation.attributes["half_scheduled"] = ir.UnitAttr.get()
        raise RuntimeError("a schedule failed half-way")

    monkeypatch.setattr(pipeline, "schedule_module", half_done)
    with pytest.warns(RuntimeWarning, match="lowering with naive loops instead: a schedule failed half-way"):
        texts = lower_stages(S.MATMUL)
    assert "half_scheduled" not in texts["scheduled"] and "linalg.matmul" in texts["scheduled"]
    assert "llvm.func @main" in texts["llvm"]
    monkeypatch.setattr(pipeline, "schedule_module", half_done)
    with pytest.raises(RuntimeError, match="half-way"):
        lower(S.MATMUL, "scheduled", PipelineOptions(fallback_on_schedule_failure=False))
