"""Helpers for tests of relax-mlir and of code built on it."""

from __future__ import annotations

from typing import Sequence, Union

import numpy as np

from ..ir import Function, IRModule
from ..ir.structural_equal import assert_structural_equal
from ..ir.well_formed import check_well_formed


def roundtrip(mod: Union[IRModule, Function]) -> Union[IRModule, Function]:
    """Print ``mod``, parse the text back, and check the result is structurally equal and well formed.

    Returns the parsed copy. Every module a test builds goes through this, so the printer and the parser
    are exercised on everything the project can produce.
    """
    from ..script import from_source

    check_well_formed(mod)
    text = mod.script()
    again = from_source(text)
    assert_structural_equal(again, mod)
    check_well_formed(again)
    assert again.script() == text, "printing the parsed module gave different text"
    return again


def finite_difference_gradients(mod: IRModule, func_name: str, args: Sequence, indices: Sequence[int],
                                target_index: int = 0, eps: float = 1e-6) -> list:
    """Central differences of ``func_name``'s scalar target (its return value, or field ``target_index``)
    with respect to the arguments at ``indices`` (float64 arrays, or tuples of them), using the interpreter."""
    from ..interpreter import interpret

    args = [tuple(np.array(a, dtype=np.float64) for a in x) if isinstance(x, tuple)
            else np.array(x) for x in args]

    def target() -> float:
        out = interpret(mod, func_name, *args)
        return float(out[target_index] if isinstance(out, tuple) else out)

    def diff(arr: np.ndarray) -> np.ndarray:
        grad = np.zeros(arr.shape)
        flat, gflat = arr.reshape(-1), grad.reshape(-1)
        for i in range(flat.size):
            old = flat[i]
            flat[i] = old + eps
            up = target()
            flat[i] = old - eps
            down = target()
            flat[i] = old
            gflat[i] = (up - down) / (2 * eps)
        return grad

    return [tuple(diff(a) for a in args[i]) if isinstance(args[i], tuple) else diff(args[i]) for i in indices]
