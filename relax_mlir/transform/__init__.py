"""Relax passes (TVM's ``relax.transform``), one per file, and the pass infrastructure."""

from .canonicalize_bindings import CanonicalizeBindings
from .dead_code_elimination import DeadCodeElimination
from .gradient import Gradient, GradientError
from .pass_infra import (DataflowBlockPass, FunctionPass, Pass, PassContext, PassInfo, PassInstrument,
                         PassTimingInstrument, PrintAfterAll, PrintBeforeAll, Sequential, function_pass, module_pass)
from .legalize_ops import LegalizeOps
from .append_loss import AppendLoss, AppendLossError
from .mutate_ops_for_training import MutateOpsForInference, MutateOpsForTraining
from .decompose_ops import DecomposeOps, DecomposeOpsForInference, DecomposeOpsForTraining
