"""Relax passes (TVM's ``relax.transform``), one per file, and the pass infrastructure.

``list_passes()`` returns every pass class; a test checks each is documented and named as in TVM.
"""

from .append_loss import AppendLoss, AppendLossError
from .canonicalize_bindings import CanonicalizeBindings
from .dead_code_elimination import DeadCodeElimination
from .decompose_ops import DecomposeOps, DecomposeOpsForInference, DecomposeOpsForTraining
from .gradient import Gradient, GradientError
from .inline_functions import InlineFunctions
from .legalize_ops import LegalizeOps
from .mutate_ops_for_training import MutateOpsForInference, MutateOpsForTraining
from .pass_infra import (DataflowBlockPass, FunctionPass, Pass, PassContext, PassInfo, PassInstrument,
                         PassTimingInstrument, PrintAfterAll, PrintBeforeAll, Sequential, function_pass, module_pass)

_PASSES = (AppendLoss, CanonicalizeBindings, DeadCodeElimination, DecomposeOps, DecomposeOpsForInference,
           DecomposeOpsForTraining, Gradient, InlineFunctions, LegalizeOps, MutateOpsForInference,
           MutateOpsForTraining)


def list_passes() -> list[type]:
    """Every Relax pass class of this package."""
    return list(_PASSES)
