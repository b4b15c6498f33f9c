"""Relax passes (TVM's ``relax.transform``), one per file, and the pass infrastructure.

Each pass registers itself in ``PASSES`` (name -> class) when its class is defined; importing this package
imports every pass file, so ``list_passes()`` sees them all. A test checks each has a before/after example.
"""

from .append_loss import AppendLoss, AppendLossError
from .canonicalize_bindings import CanonicalizeBindings
from .dead_code_elimination import DeadCodeElimination
from .decompose_ops import DecomposeOps, DecomposeOpsForInference, DecomposeOpsForTraining
from .gradient import Gradient, GradientError
from .inline_functions import InlineFunctions
from .legalize_ops import LegalizeOps
from .mutate_ops_for_training import MutateOpsForInference, MutateOpsForTraining
from .pass_infra import (PASSES, DataflowBlockPass, FunctionPass, Pass, PassContext, PassInfo, PassInstrument,
                         PassTimingInstrument, PrintAfterAll, PrintBeforeAll, Sequential, function_pass, module_pass)


def list_passes() -> list[type]:
    """Every registered Relax pass class, by name."""
    return [PASSES[name] for name in sorted(PASSES)]
