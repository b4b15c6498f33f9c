"""SetupTrainer checks well-formedness twice, its input on entry and its result at the end, not after each of its
internal passes (issue 9: the seven whole-module checks cost as much as the passes on a warm ``relax-mlir train``),
while every check a user can observe stays: an ill-formed input or result is named, a caller's PassContext
(disabled checks, instruments) still governs, and a pass the user runs afterwards still checks its result."""

from __future__ import annotations

import sys
from dataclasses import replace

import pytest

from relax_mlir.ir import IRModule, TensorStructInfo, Var, WellFormedError
from relax_mlir.models import mlp
from relax_mlir.training import SetupTrainer
from relax_mlir.training.loss import CrossEntropyLoss
from relax_mlir.training.optimizer import SGD
from relax_mlir.transform.pass_infra import PassContext, PassInstrument

B, SIZES = 8, (6, 5, 3)



def _ill_formed():
    """The MLP backbone module with its binding 'lv1' (``R.add(lv, b0)``) reading a variable nothing defines."""
    mod = mlp(B, SIZES)
    func = mod["backbone"]
    block = func.body.blocks[0]
    bindings = list(block.bindings)
    i = next(k for k, b in enumerate(bindings) if b.var.name_hint == "lv1")
    value = bindings[i].value
    ghost = Var("ghost", value.args[0].struct_info)
    bindings[i] = replace(bindings[i], value=replace(value, args=(ghost, *value.args[1:])))
    body = replace(func.body, blocks=(replace(block, bindings=tuple(bindings)), *func.body.blocks[1:]))
    return IRModule({"backbone": replace(func, body=body)}, dict(mod.attrs))


def _setup():
    return SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.05),
                        [TensorStructInfo((B, SIZES[-1]), "float32"), TensorStructInfo((B,), "int64")])


@pytest.fixture
def checks(monkeypatch):
    """Every well-formedness check run, as (where, the names of the module's functions)."""
    wf = sys.modules["relax_mlir.ir.well_formed"]  # (the package's name well_formed is the function)
    seen, original = [], wf.check_well_formed

    def counting(obj, check_struct_info=True, where=""):
        seen.append((where, tuple(obj) if hasattr(obj, "items") else ()))
        return original(obj, check_struct_info, where)

    monkeypatch.setattr(wf, "check_well_formed", counting)
    return seen


def test_input_and_result_are_checked_once_each(checks):
    mod = _setup()(mlp(B, SIZES))
    assert [where for where, _ in checks] == ["given to SetupTrainer", "made by SetupTrainer"]
    assert checks[0][1] == ("backbone",)
    assert set(checks[1][1]) == set(mod) == {"backbone", "predict", "loss", "loss_adjoint", "optimizer",
                                             "update_params"}
    assert PassContext.current().check_well_formed  # the caller's context is back as it was


def test_an_ill_formed_input_is_named_as_the_input():
    with pytest.raises(WellFormedError, match=r"module given to SetupTrainer is not well formed \(1 problem\):\n"
                                              r"  - backbone, binding 'lv1': var 'ghost' is not defined"):
        _setup()(_ill_formed())


def test_an_ill_formed_result_is_caught_at_the_end(monkeypatch):
    bad = _ill_formed()["backbone"]
    derive = SetupTrainer._derive

    def broken(self, *args):
        out = derive(self, *args)
        out["predict"] = bad
        return out

    monkeypatch.setattr(SetupTrainer, "_derive", broken)
    with pytest.raises(WellFormedError, match=r"module made by SetupTrainer is not well formed \(1 problem\):\n"
                                              r"  - predict, binding 'lv1': var 'ghost' is not defined"):
        _setup()(mlp(B, SIZES))


def test_a_callers_context_still_governs(checks):
    class Seen(PassInstrument):
        def __init__(self):
            self.entered, self.passes = 0, []

        def enter_pass_ctx(self):
            self.entered += 1

        def run_after_pass(self, mod, info):
            self.passes.append(info.name)

    seen = Seen()
    with PassContext(instruments=[seen], check_well_formed=False):
        _setup()(mlp(B, SIZES))
        assert PassContext.current().instruments == [seen] and not PassContext.current().check_well_formed
    assert checks == []  # checks off: none, as before
    assert seen.entered == 1  # the internal passes' context is pushed, not entered again
    for name in ("DecomposeOpsForInference", "DecomposeOpsForTraining", "Gradient", "CanonicalizeBindings",
                 "DeadCodeElimination"):
        assert name in seen.passes, name


def test_a_pass_the_user_runs_afterwards_still_checks_its_result(monkeypatch):
    from relax_mlir.transform import DeadCodeElimination

    mod = _setup()(mlp(B, SIZES))
    bad = _ill_formed()
    with pytest.raises(WellFormedError, match="module after DeadCodeElimination is not well formed"):
        DeadCodeElimination()(bad)
    assert "update_params" in mod


def test_the_context_is_restored_when_a_pass_fails(monkeypatch):
    import relax_mlir.training.utils as utils

    def failing(*args, **kwargs):
        raise RuntimeError("append_loss failed")

    monkeypatch.setattr(utils, "append_loss", failing)
    depth = len(PassContext._stack)
    with pytest.raises(RuntimeError, match="append_loss failed"):
        _setup()(mlp(B, SIZES))
    assert len(PassContext._stack) == depth and PassContext.current().check_well_formed


# The op registry makes ~2,350 struct infos at import (its samples); TensorStructInfo's checks take the common case
# (a tuple of ints, a dtype name, a known rank) first. What they refuse and convert is unchanged:
@pytest.mark.parametrize("args, error", [
    (((2, True), "float32"), "dimension must be an int or size variable, got bool"),
    (((2, -1), "float32"), "dimension must be non-negative, got -1"),
    (((2 ** 63,), "float32"), "does not fit in int64"),
    (((2,), "float31"), "unknown dtype 'float31'"),
    ((None, "float32", 65), "ndim must be an int from 0 to 64"),
    ((None, "float32", True), "ndim must be an int from 0 to 64"),
    (((2, 3), "float32", 3), "ndim 3 disagrees with shape"),
])
def test_struct_info_checks_are_unchanged(args, error):
    with pytest.raises((TypeError, ValueError), match=error):
        TensorStructInfo(*args)


def test_struct_info_conversions_are_unchanged():
    import numpy as np

    from relax_mlir.ir import ShapeExpr

    s = TensorStructInfo((np.int64(2), "n", 2 ** 63 - 1), np.float32, np.int64(3))
    assert s.shape[0] == 2 and type(s.shape[0]) is int and str(s.shape[1]) == "n" and s.dtype == "float32"
    assert s.ndim == 3 and type(s.ndim) is int
    assert TensorStructInfo([4, 5]).shape == (4, 5) and TensorStructInfo(ShapeExpr((4, 5))).shape == (4, 5)
    assert TensorStructInfo(None, "int8", 2).ndim == 2 and TensorStructInfo(None, "int8").ndim == -1
