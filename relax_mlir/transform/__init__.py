"""Relax passes (TVM's ``relax.transform``), one per file, and the pass infrastructure.

Each pass registers itself in ``PASSES`` (name -> class) when its class is defined. A pass's file is imported when
one of its names is first used (``transform.Gradient``, ``from relax_mlir.transform import FuseOps``): a warm
``relax-mlir train`` needs a few of the ~45 files, and importing them all was a fifth of ``import relax_mlir``.
Whatever lists the passes imports every file first, so it sees them all: ``PASSES`` (read as a whole, or asked a
name it lacks), ``list_passes()``, ``parse_pipeline``, ``dir(transform)``, ``from relax_mlir.transform import *``;
``vars(transform)`` holds every name once one of those (or ``import_all_passes()``) has run. A test checks each
pass has a before/after example.
"""

import importlib as _importlib

from .pass_infra import (PASSES, DataflowBlockPass, FunctionPass, Pass, PassContext, PassInfo, PassInstrument,
                         PassTimingInstrument, PrintAfterAll, PrintBeforeAll, Sequential, dataflowblock_pass,
                         function_pass, module_pass)

#: The names this package serves from each pass file (a test checks every registered pass is one of them).
_FILES = {
    "append_loss": ("AppendLoss", "AppendLossError"),
    "attach_global_symbol": ("AttachGlobalSymbol",),
    "bundle_model_params": ("BundleModelParams",),
    "canonicalize_bindings": ("CanonicalizeBindings",),
    "dead_code_elimination": ("DeadCodeElimination",),
    "decompose_ops": ("DecomposeOps", "DecomposeOpsForInference", "DecomposeOpsForTraining"),
    "gradient": ("Gradient", "GradientError"),
    "inline_functions": ("InlineFunctions",),
    "inline_private_functions": ("InlinePrivateFunctions",),
    "legalize_ops": ("LegalizeOps",),
    "mutate_ops_for_training": ("MutateOpsForInference", "MutateOpsForTraining"),
    "pipeline_text": ("PipelineError", "parse_pipeline"),
    "bind_params": ("BindParams",),
    "combine_parallel_matmul": ("CombineParallelMatmul",),
    "bind_symbolic_vars": ("BindSymbolicVars",),
    "convert_layout": ("ConvertLayout",),
    "convert_to_dataflow": ("ConvertToDataflow",),
    "eliminate_common_subexpr": ("EliminateCommonSubexpr",),
    "expand_tuple_arguments": ("ExpandTupleArguments",),
    "fast_math_transform": ("FastMathTransform",),
    "fold_batchnorm_to_conv2d": ("FoldBatchnormToConv2D",),
    "fold_constant": ("FoldConstant",),
    "fuse_ops": ("FuseOps",),
    "fuse_ops_by_pattern": ("FuseOpsByPattern", "FusionPattern", "PatternCheckContext"),
    "fuse_transpose_matmul": ("FuseTransposeMatmul",),
    "adjust_matmul_order": ("AdjustMatmulOrder",),
    "expand_matmul_of_sum": ("ExpandMatmulOfSum",),
    "lambda_lift": ("LambdaLift", "LambdaLiftError"),
    "lazy_get_input": ("LazyGetInput",),
    "lazy_set_output": ("LazySetOutput",),
    "lazy_transform_params": ("LazyTransformParams",),
    "lift_transform_params": ("LiftTransformParams",),
    "merge_composite_functions": ("MergeCompositeFunctions",),
    "normalize": ("Normalize",),
    "normalize_global_var": ("NormalizeGlobalVar",),
    "remove_purity_checking": ("RemovePurityChecking",),
    "remove_unused_outputs": ("RemoveUnusedOutputs",),
    "remove_redundant_reshape": ("RemoveRedundantReshape",),
    "remove_unused_parameters": ("RemoveUnusedParameters",),
    "reorder_permute_dims_after_concat": ("ReorderPermuteDimsAfterConcat",),
    "reorder_take_after_matmul": ("ReorderTakeAfterMatmul",),
    "to_mixed_precision": ("ToMixedPrecision",),
    "to_non_dataflow": ("ToNonDataflow",),
    "topological_sort": ("TopologicalSort",),
    "update_param_struct_info": ("UpdateParamStructInfo",),
}
_LAZY = {name: module for module, names in _FILES.items() for name in names}
_all_imported = False


def import_all_passes() -> None:
    """Import every file of this package, so that ``PASSES`` holds every pass, and bind each name the files serve
    here (``vars(transform)`` then holds them all, as when this package imported every file itself)."""
    global _all_imported
    if _all_imported:
        return
    import pkgutil

    for info in pkgutil.iter_modules(__path__):  # every file, not only _FILES: a pass missing there is still listed
        _importlib.import_module(f"{__name__}.{info.name}")
    for name in _LAZY:
        __getattr__(name)
    _all_imported = True


def __getattr__(name: str):
    """A name of a pass file imports that file (once: the value is then bound here). Another name (a file of this
    package as an attribute, ``transform.fuse_ops``; ``__all__``, which ``import *`` reads) imports every file."""
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(_importlib.import_module(f"{__name__}.{module}"), name)
    elif name == "__all__":  # every public name, as ``import *`` took before this package had a ``__all__``
        import_all_passes()
        value = sorted(key for key in globals() if not key.startswith("_"))
    elif name.startswith("__"):  # (probed by tools: imports nothing)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    else:
        import_all_passes()  # (binds every file of the package as an attribute)
        value = globals().get(name, PASSES.loaded(name))
        if value is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    import_all_passes()
    return sorted(globals())


def list_passes() -> list[type]:
    """Every registered Relax pass class, by name."""
    import_all_passes()
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
    from .canonicalize_bindings import CanonicalizeBindings
    from .dead_code_elimination import DeadCodeElimination
    from .legalize_ops import LegalizeOps

    return Sequential([CanonicalizeBindings(), DeadCodeElimination(), LegalizeOps()], name=f"{name}_pipeline")
