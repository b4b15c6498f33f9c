"""Relax passes (TVM's ``relax.transform``), one per file, and the pass infrastructure.

Each pass registers itself in ``PASSES`` (name -> class) when its class is defined; importing this package
imports every pass file, so ``list_passes()`` sees them all. A test checks each has a before/after example.
"""

from .append_loss import AppendLoss, AppendLossError
from .attach_global_symbol import AttachGlobalSymbol
from .bundle_model_params import BundleModelParams
from .canonicalize_bindings import CanonicalizeBindings
from .dead_code_elimination import DeadCodeElimination
from .decompose_ops import DecomposeOps, DecomposeOpsForInference, DecomposeOpsForTraining
from .gradient import Gradient, GradientError
from .inline_functions import InlineFunctions
from .inline_private_functions import InlinePrivateFunctions
from .legalize_ops import LegalizeOps
from .mutate_ops_for_training import MutateOpsForInference, MutateOpsForTraining
from .pipeline_text import PipelineError, parse_pipeline
from .bind_params import BindParams
from .combine_parallel_matmul import CombineParallelMatmul
from .bind_symbolic_vars import BindSymbolicVars
from .convert_layout import ConvertLayout
from .convert_to_dataflow import ConvertToDataflow
from .eliminate_common_subexpr import EliminateCommonSubexpr
from .expand_tuple_arguments import ExpandTupleArguments
from .fast_math_transform import FastMathTransform
from .fold_batchnorm_to_conv2d import FoldBatchnormToConv2D
from .fold_constant import FoldConstant
from .fuse_ops import FuseOps
from .fuse_ops_by_pattern import FuseOpsByPattern, FusionPattern, PatternCheckContext
from .fuse_transpose_matmul import FuseTransposeMatmul
from .adjust_matmul_order import AdjustMatmulOrder
from .expand_matmul_of_sum import ExpandMatmulOfSum
from .lambda_lift import LambdaLift, LambdaLiftError
from .lazy_get_input import LazyGetInput
from .lazy_set_output import LazySetOutput
from .lazy_transform_params import LazyTransformParams
from .lift_transform_params import LiftTransformParams
from .merge_composite_functions import MergeCompositeFunctions
from .normalize import Normalize
from .normalize_global_var import NormalizeGlobalVar
from .remove_purity_checking import RemovePurityChecking
from .remove_unused_outputs import RemoveUnusedOutputs
from .remove_redundant_reshape import RemoveRedundantReshape
from .remove_unused_parameters import RemoveUnusedParameters
from .reorder_permute_dims_after_concat import ReorderPermuteDimsAfterConcat
from .reorder_take_after_matmul import ReorderTakeAfterMatmul
from .to_mixed_precision import ToMixedPrecision
from .to_non_dataflow import ToNonDataflow
from .topological_sort import TopologicalSort
from .update_param_struct_info import UpdateParamStructInfo
from .pass_infra import (PASSES, DataflowBlockPass, FunctionPass, Pass, PassContext, PassInfo, PassInstrument,
                         PassTimingInstrument, PrintAfterAll, PrintBeforeAll, Sequential, dataflowblock_pass,
                         function_pass, module_pass)


def list_passes() -> list[type]:
    """Every registered Relax pass class, by name."""
    return [PASSES[name] for name in sorted(PASSES)]


#: The pipelines ``get_pipeline`` knows, by TVM's names: what runs on a module before ``relax_mlir.compile`` (the
#: lowering itself happens in MLIR; see the README's pipeline stages).
PIPELINES = ("default", "default_build", "zero")


def get_pipeline(name: str = "default") -> Sequential:
    """TVM's ``relax.get_pipeline(name)``: clean-ups and the lowerability check (``LegalizeOps``) that prepare a
    module for ``relax_mlir.compile``, as one ``Sequential``. TVM's ``"zero"`` and ``"default_build"`` name the
    same here (there is no TIR stage to tune)."""
    if name not in PIPELINES:
        raise ValueError(f"get_pipeline: unknown pipeline {name!r}; available: {', '.join(PIPELINES)}")
    return Sequential([CanonicalizeBindings(), DeadCodeElimination(), LegalizeOps()], name=f"{name}_pipeline")
