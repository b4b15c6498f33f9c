"""The lowering pipeline's stages and knobs (``PipelineOptions``), apart from the pipeline itself so that a compile
served by the on-disk cache never imports MLIR (``build.py``)."""

from __future__ import annotations

import dataclasses

from .openmp import resolve_threads

#: The pipeline's stages, in order (``pipeline.py``).
STAGES: tuple[str, ...] = ("linalg", "fused", "scheduled", "bufferized", "llvm")


@dataclasses.dataclass(frozen=True)
class PipelineOptions:
    """Knobs of the lowering pipeline.

    opt_level: 0 naive loops; >= 1 (default 2) elementwise fusion + matmul tiling/vectorization schedules.
    print_after_all: print the IR to stderr after every MLIR pass and every transform script
        (``PassManager.enable_ir_printing``; the same banner as ``mlir-opt --mlir-print-ir-after-all``).
    timing: print MLIR's pass timing report to stderr after each stage (``PassManager.enable_timing``).
    fallback_on_schedule_failure: if a transform script fails, warn and lower that module naively instead
        of raising.
    num_threads: threads the schedules may split an op across (None: ``$RELAX_MLIR_NUM_THREADS`` or the
        cores of this process; resolved when the options are made, and 1 when no OpenMP runtime is found).
    checks: the runtime index checks (``take``, ``nll_loss``, ...: an out-of-range index raises ``IndexError``).
        With ``False`` an out-of-range index reads a clamped (in-range) element or nothing, silently: memory stays
        safe, the result is unspecified, and no error slot is read after a call.
    outline: move each top-level loop nest of a public function into a kernel function of its own before the
        lowering to LLVM (``outline.py``): LLVM compiles smaller functions faster, and on several cores at once.
    verify_each: verify the IR after every MLIR pass and check every transform script's handles (MLIR's
        ``--verify-each`` and the transform interpreter's expensive checks), to find which pass broke it. Off by
        default: the module is verified before each pass pipeline and transform script instead, which catches the
        same invalid IR one stage later (the per-pass checks were 5-10% of a cold build).
    """

    opt_level: int = 2
    print_after_all: bool = False
    timing: bool = False
    fallback_on_schedule_failure: bool = True
    num_threads: int | None = None
    checks: bool = True
    outline: bool = True
    verify_each: bool = False

    def __post_init__(self) -> None:
        if self.opt_level not in (0, 1, 2, 3):
            raise ValueError(f"PipelineOptions: opt_level must be 0, 1, 2 or 3, got {self.opt_level!r}")
        for name in ("checks", "timing", "print_after_all", "outline", "fallback_on_schedule_failure", "verify_each"):
            value = getattr(self, name, False)
            if not isinstance(value, bool):  # checks="no" would have been true
                raise TypeError(f"PipelineOptions: {name} must be True or False, got {value!r}")
        object.__setattr__(self, "num_threads", resolve_threads(self.num_threads))
