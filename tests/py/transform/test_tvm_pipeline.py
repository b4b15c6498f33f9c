"""A TVM-style pipeline of this package's passes on real training modules (issue 12).

A TVM user copies a pipeline such as ``Sequential([ToNonDataflow(), FoldConstant(), ...])``. Here twelve of the
ported passes run, in one ``Sequential``, on what ``SetupTrainer`` makes of the tutorial's MLP and of the CNN;
then ``LegalizeOps`` and the compiler. The oracle is the same module trained without the pipeline: every pass is
semantics-preserving, so the losses and parameters after a few SGD steps must agree (to float32 rounding: the
two modules compile to differently ordered code, e.g. after common-subexpression elimination).
"""

from __future__ import annotations

import numpy as np
import pytest

from relax_mlir import transform
from relax_mlir.ir.structural_equal import structural_equal
from relax_mlir.ir.well_formed import check_well_formed
from relax_mlir.ir.struct_info import TensorStructInfo
from relax_mlir.models import cnn, mlp
from relax_mlir.testing import roundtrip
from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer, Trainer

BATCH = 16


def tvm_pipeline() -> transform.Sequential:
    return transform.Sequential([
        transform.Normalize(),
        transform.NormalizeGlobalVar(),
        transform.ToNonDataflow(),
        transform.RemovePurityChecking(),
        transform.CanonicalizeBindings(),
        transform.FoldConstant(),
        transform.EliminateCommonSubexpr(),
        transform.InlinePrivateFunctions(),
        transform.RemoveUnusedOutputs(),
        transform.RemoveUnusedParameters(),
        transform.DeadCodeElimination(),
        transform.TopologicalSort(order="depth-first", direction="from-inputs"),
        transform.ConvertToDataflow(min_size=1),
        transform.AttachGlobalSymbol(),
        transform.LegalizeOps(),
    ], name="tvm_style")


def _training_module(kind: str):
    if kind == "mlp":
        backbone, x_shape = mlp(BATCH, (64, 32, 32, 10)), (BATCH, 64)
    else:
        backbone, x_shape = cnn(BATCH, (1, 8, 8), (4, 8), 10), (BATCH, 1, 8, 8)
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.01, weight_decay=0.01),
                         [TensorStructInfo((BATCH, 10), "float32"), TensorStructInfo((BATCH,), "int64")])
    return setup(backbone), x_shape


def _train(mod, x_shape, steps: int = 3):
    trainer = Trainer(mod).build()
    trainer.xavier_uniform_init_params(seed=7)
    rng = np.random.default_rng(3)
    losses = []
    for _ in range(steps):
        x = rng.standard_normal(x_shape).astype("float32")
        y = rng.integers(0, 10, BATCH).astype("int64")
        losses.append(float(trainer.update_params(x, y).numpy()))
    return losses, [p.numpy() for p in trainer.export_params().values()]


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_pipeline_of_tvm_passes_trains_the_same(kind):
    mod, x_shape = _training_module(kind)
    pipeline = tvm_pipeline()
    assert len(pipeline.passes) >= 10
    piped = pipeline(mod)
    check_well_formed(piped, where="after the pipeline")
    roundtrip(piped)
    assert not structural_equal(piped, mod)  # the passes did rewrite it (global symbols, blocks, order)
    assert set(piped) >= {"update_params", "predict", "loss"}
    assert dict(piped.attrs) == dict(mod.attrs)  # what Trainer reads: input/param/state counts
    assert all("global_symbol" in piped[name].attrs for name in ("update_params", "predict"))
    base_losses, base_params = _train(mod, x_shape)
    losses, params = _train(piped, x_shape)
    # float32 sums in another order: a relative 1e-5 of a summed loss of ~40
    np.testing.assert_allclose(losses, base_losses, rtol=1e-5)
    for got, want in zip(params, base_params):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    assert base_losses[-1] != base_losses[0]  # the steps did train
