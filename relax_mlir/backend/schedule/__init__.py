"""Schedules: how the ``scheduled`` stage makes each op family fast, one file per family.

* ``matmul.py``: register, cache and parallel tiles for ``linalg.matmul``/``batch_matmul``, vectorized to
  ``vector.contract``; a transposed left operand
  (``x^T g``) read through its map instead of copied (``fold_transposed_lhs``);
* ``accumulators.py``: matmul register tiles that start from their fill's value (in the first K block, when K is
  cache-tiled) instead of reading a zeroed buffer, and no fill where the tiles cover the result;
* ``conv.py``: NCHW convolutions as direct vector code (shifted rows; wide kernels along their rows), strided ones as
  im2col plus a contraction the matmul schedule tiles;
* ``pad.py``: large constant pads as a fill plus a copy generic that the elementwise schedule splits across threads;
* ``pooling.py``: max pooling whose windows tile the input, and its gradient, as vector loops over rows;
* ``coalesce.py``: adjacent loops every operand reads contiguously merged into one (short rows vectorize);
* ``epilogue.py``: an elementwise op reading a matmul's result (the optimizer's update of a weight reading its
  gradient, ReLU's gradient reading the layer's input gradient, a layer's bias and ReLU) computed in the matmul's
  register tiles (in the last K block when K is cache-tiled), which write each of its results (and the product
  only where something else reads it too);
* ``invariants.py``: costly work fusion copied into every point of a broadcast (``log`` of a row sum, a division by
  a channel's deviation) computed once per point of the broadcast input instead;
* ``elementwise.py``: large ``linalg.generic`` ops (elementwise, reductions) split across threads;
* ``math_approx.py``: float32 ``exp``/``log``/``tanh``/``erf`` as polynomials (rational functions) LLVM vectorizes
  (instead of libm calls);
* ``reduction.py``: float sums marked reassociable, so that LLVM vectorizes them; large float32 sums computed in
  blocks that keep their rounding error small;
* ``transpose.py``: square register tiles for transposes that move the innermost dimension;
* ``..host``: the host facts (vector width, caches, cores) every tile size is derived from (``backend/host.py``, apart
  so that reading them does not import MLIR);
* ``common.py``: finding ops, writing and applying transform-dialect scripts.

Each schedule is a transform-dialect script written per module from the ops it finds (their static shapes
decide the tiles) and applied with ``mlir.dialects.transform.interpreter``. ``schedule_module`` runs them all; a
failure is raised as :class:`ScheduleFailed`, which names the family (the fallback's warning says which failed).
"""

from __future__ import annotations

from typing import Any, Callable

from mlir import ir

from ..host import HostCPU, host_cpu
from .matmul import (MATMUL_LIKE, PARALLEL_MIN_FLOPS, MatmulPlan, defer_packed_transposes, fold_transposed_lhs,
                     plan_matmul, schedule_matmuls)
from .coalesce import coalesce_loops
from .conv import schedule_convs
from .epilogue import fuse_epilogues, mark_epilogues, unmark_epilogues
from .elementwise import PARALLEL_MIN_POINTS, plan_parallel_generic, schedule_elementwise, vectorize_short_rows
from .invariants import hoist_invariants
from .math_approx import approximate_math
from .pad import parallel_pads
from .pooling import vectorize_pools
from .reduction import reassociate_reductions
from .transpose import TransposePlan, plan_transpose, schedule_transposes, undefer_transposes

__all__ = ["approximate_math", "coalesce_loops", "hoist_invariants", "parallel_pads", "vectorize_pools", "schedule_convs", "reassociate_reductions", "HostCPU", "host_cpu", "MATMUL_LIKE", "PARALLEL_MIN_FLOPS", "MatmulPlan", "plan_matmul",
           "schedule_matmuls", "schedule_module", "fold_transposed_lhs", "TransposePlan", "plan_transpose", "schedule_transposes",
           "PARALLEL_MIN_POINTS", "plan_parallel_generic", "schedule_elementwise", "ScheduleFailed"]


class ScheduleFailed(RuntimeError):
    """A family's schedule failed (its transform script, or a rewrite before it): the message is the failure's own,
    ``kind`` the family (``"short-row vectorization"``), so that a warning never blames one family for another's
    failure."""

    def __init__(self, kind: str, error: Exception):
        super().__init__(str(error))
        self.kind = kind


def _run(kind: str, step: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``step(*args, **kwargs)``, its failure raised as :class:`ScheduleFailed` of ``kind``."""
    try:
        return step(*args, **kwargs)
    except (ir.MLIRError, RuntimeError, ValueError) as err:
        raise ScheduleFailed(kind, err) from err


def schedule_module(module: ir.Module, threads: int = 1, print_ir: bool = False) -> int:
    """Apply every family's schedule to ``module`` (on tensors) in place; returns how many ops were scheduled.
    Raises :class:`ScheduleFailed`, naming the family, if one fails."""
    # first: the hoisted log/exp are then approximated, and split like any elementwise op
    _run("invariant hoisting", hoist_invariants, module)
    _run("math approximation", approximate_math, module)
    # before the elementwise split: the tagged generics become vector loops
    _run("pooling", vectorize_pools, module, threads=threads)
    # im2col contractions are scheduled as matmuls below
    _run("convolution", schedule_convs, module, print_ir=print_ir, threads=threads)
    _run("pad", parallel_pads, module, threads=threads)  # the convolutions' padded inputs copied by all threads
    _run("matmul", fold_transposed_lhs, module)  # x^T g read through a map instead of a transposed copy
    # a weight's update, to run in its gradient's tiles: left alone below
    _run("matmul epilogue", mark_epilogues, module, threads=threads)
    _run("loop coalescing", coalesce_loops, module)  # before the elementwise split: it cuts the outermost (merged) loop
    count = _run("elementwise", schedule_elementwise, module, threads=threads, print_ir=print_ir)
    count += _run("short-row vectorization", vectorize_short_rows, module, host_cpu().lanes(32), print_ir=print_ir)
    # g w^T: w's blocks transposed by the packing instead
    _run("matmul", defer_packed_transposes, module, threads=threads)
    count += _run("transpose", schedule_transposes, module, threads=threads, print_ir=print_ir)
    _run("reduction", reassociate_reductions, module)
    count += _run("matmul", schedule_matmuls, module, print_ir=print_ir, threads=threads)
    fused, left = _run("matmul epilogue", fuse_epilogues, module)
    if left:  # not fusable after all: split across threads like any elementwise op
        _run("elementwise", schedule_elementwise, module, threads=threads, print_ir=print_ir, epilogues=True)
        _run("matmul epilogue", unmark_epilogues, module)
    count += fused
    _run("transpose", undefer_transposes, module)
    # the packing transposes
    return count + _run("transpose", schedule_transposes, module, threads=threads, print_ir=print_ir)
