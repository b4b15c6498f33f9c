"""What ``Trainer(nan_policy=...)`` does when a training step produces a NaN or an infinity.

A compiled step writes the new parameters, states and optimizer state into the Trainer's spare buffers and leaves
its inputs (the current ones) alone, so refusing a step costs nothing: the Trainer simply does not adopt the
outputs (the spare buffers stay spare), and the state is exactly what it was before the step (no copy is made per
step; ``Trainer.update_params``).

What is checked, after every step, is what the step returns: the loss, every new parameter, every new model state
(batch-norm running statistics) and every new optimizer-state array. A gradient is not returned by the step, but
every optimizer here writes each parameter as ``p - lr * u`` where ``u`` is built from the gradient (through the
moments for momentum and Adam), so a non-finite gradient entry makes that parameter (or its moment) non-finite: it
is caught, named as the parameter or optimizer state it reached. An update that overflows a finite gradient (a
learning rate too large) is caught the same way; so is Adam's second moment overflowing (``g * g`` past the
float32 range while ``g`` is finite), which would otherwise freeze that parameter silently (``m / sqrt(inf)`` is
0). Every floating optimizer array is checked, so a custom optimizer needs no declaration. The check is one native
scan of every array's bits: no allocation, one read of the state, just written and so in cache. A compiled step
with static shapes runs it in the native call that runs the step (``CompiledFunction.call_scanning``: the arrays
are looked up once for both); otherwise :class:`FiniteCheck` scans them after the call. Its cost is measured by
``benchmarks/nan_check_cost.py``; ``"ignore"`` skips it.

Policies: ``"raise"`` (the default) raises :class:`NonFiniteError`; ``"skip"`` warns (``RuntimeWarning``) and
counts the step in ``Trainer.skipped_steps`` without advancing ``Trainer.step``; ``"ignore"`` adopts the outputs
whatever they hold (the behaviour before the policy existed).
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from ..backend.callpath import _native  # relax_mlir/_callpath.c, or None when it was not built at install
from ..ir.dtype import is_floating, to_numpy
from .checkpoint_io import finite, first_non_finite

try:  # the scalar type by which the native scan knows bfloat16 arrays (their buffers have no format character)
    _BFLOAT16 = to_numpy("bfloat16").type
except ValueError:  # pragma: no cover - ml_dtypes is a declared dependency
    _BFLOAT16 = None

NAN_POLICIES = ("raise", "skip", "ignore")


class NonFiniteError(FloatingPointError):
    """A training step produced a NaN or an infinity; the Trainer's state is as it was before that step.

    Attributes: ``step`` (the Trainer's step count when the step ran, from 0), ``tensor`` (the first non-finite
    output: ``"loss"``, ``"parameter 'w0'"``, ``"state 'bn0_mean'"`` or ``"optimizer state 3"``), ``index``
    (the position of its first non-finite element) and ``batch_index`` (the first example of the batch whose
    inputs hold a NaN or an infinity, or None when the inputs are finite)."""

    def __init__(self, message: str, step: int, tensor: str, index: list[int], batch_index: Optional[int]):
        super().__init__(message)
        self.step, self.tensor, self.index, self.batch_index = step, tensor, index, batch_index


def check_policy(policy: str) -> str:
    if policy not in NAN_POLICIES:
        raise ValueError(f"Trainer: nan_policy={policy!r}; expected one of {', '.join(map(repr, NAN_POLICIES))}")
    return policy


class FiniteCheck:
    """Whether every floating array of a step's outputs is finite.

    With the native module (``relax_mlir._callpath``, built at install) one call scans every array's bits (a value
    is NaN or infinite exactly when its exponent bits are all ones; vectorized; with ``threads`` > 1, a scan of 4 MiB
    or more split across the OpenMP runtime's threads the compiled step runs on): about 12 µs for the
    784 MLP's 470 KB of parameters, where a BLAS dot product per array took 21 µs plus the wake-up of OpenBLAS's
    threads, which then competed with the compiled step's OpenMP threads for the two cores (the step itself ran
    ~30 µs slower). It reads float16, float32, float64 and bfloat16 (whose exponent is a float32's). Without it,
    or for a dtype the scan does not read: ``0 * x`` summed by a dot product with cached zeros (one read of each
    array, no allocation); a scalar is multiplied by 0.0 in Python."""

    def __init__(self, threads: int = 1) -> None:
        self._zeros: dict[tuple[np.dtype, int], np.ndarray] = {}
        self.threads = 1
        if threads > 1 and _native is not None:
            from ..backend.openmp import openmp_library

            library = openmp_library()
            if library is not None and _native.use_openmp(library):
                # scans of 4 MiB or more split across the compiled kernels' OpenMP threads (the wide MLP's 8 MB
                # of weights: 0.32 -> 0.16 ms in isolation, its step -1.8% A/B, 2-core Intel Xeon); smaller
                # ones run on the calling thread
                self.threads = threads

    def all_finite(self, arrays: Sequence[np.ndarray]) -> bool:
        if _native is not None:
            answer = _native.all_finite(arrays, self.threads, _BFLOAT16)
            if answer is not None:
                return answer
        total = 0.0
        with np.errstate(invalid="ignore"):  # 0 * inf is the NaN looked for, not a warning
            for a in arrays:
                if not is_floating(a.dtype):
                    continue
                if a.ndim == 0:
                    total += float(a) * 0.0
                else:
                    zeros = self._zeros.get((a.dtype, a.size))
                    if zeros is None:
                        zeros = self._zeros[a.dtype, a.size] = np.zeros(a.size, a.dtype)
                    total += float(np.dot(a.reshape(-1), zeros))
        return math.isfinite(total)


def non_finite_error(step: int, outputs: Sequence[tuple[str, np.ndarray]],
                     inputs: Sequence[tuple[str, np.ndarray]], cause: Optional[str] = None) -> NonFiniteError:
    """The error for a step whose outputs (name, array) hold a non-finite value; ``inputs`` are the batch's
    (name, array) pairs, searched for the first example with a NaN or an infinity (only now, off the fast path).
    ``cause`` says why when the inputs are finite and the caller knows (a mean over no targets), instead of the
    usual guess, a divergence."""
    tensor, array = next((n, a) for n, a in outputs if is_floating(a.dtype) and not finite(a).all())
    index = first_non_finite(array)
    value = array[tuple(index)] if index else array[()]
    batch_index = None
    culprit = cause or "the batch's inputs are finite (the step diverged: lower the learning rate?)"
    for name, x in inputs:
        if is_floating(x.dtype) and x.ndim and not finite(x).all():
            where = first_non_finite(x)
            batch_index = where[0]
            culprit = f"input {name!r} holds {x[tuple(where)]} at {where}: batch index {batch_index}"
            break
    position = f" at {index}" if index else ""
    message = (f"Trainer.update_params: step {step} produced a non-finite {tensor} ({value}{position}); "
               f"{culprit}; parameters, states and optimizer state are left as before the step")
    return NonFiniteError(message, step, tensor, index, batch_index)
