"""A function that calls itself, directly or through others, never returns (no control flow in Relax here): the
interpreter and the compiler refuse it with the chain of calls, where the compiled call crashed the process
(its native stack overflowed)."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir.backend.signature import ExportError
from relax_mlir.interpreter import InterpreterError
from relax_mlir.script import from_source
from relax_mlir.transform.utils import call_cycle

_FUNCTION = '''
    @R.function
    def {name}(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        y = {body}
        return y
'''


def _module(calls: dict[str, str]):
    text = "@I.ir_module\nclass Module:\n" + "".join(_FUNCTION.format(name=n, body=b) for n, b in calls.items())
    return from_source(text)


@pytest.mark.parametrize("calls, chain", [
    ({"f": "cls.f(x)"}, "f -> f"),
    ({"f": "cls.g(x)", "g": "R.add(cls.h(x), x)", "h": "cls.f(x)"}, "f -> g -> h -> f"),
])
def test_recursion_is_refused_with_its_chain_of_calls(calls, chain):
    mod = _module(calls)
    x = np.ones(2, "float32")
    with pytest.raises(InterpreterError, match=f"{chain}: a function that calls itself"):
        relax_mlir.interpret(mod, "f", x)
    with pytest.raises(ExportError, match=f"{chain}: a function that calls itself"):
        relax_mlir.compile(mod)


def test_a_long_chain_of_calls_without_a_cycle_is_fine():
    names = [f"f{i}" for i in range(3000)]
    calls = {n: f"cls.{names[i + 1]}(x)" for i, n in enumerate(names[:-1])}
    calls[names[-1]] = "R.add(x, x)"
    mod = _module(calls)
    assert call_cycle(mod, ["f0"]) is None  # depth first without Python recursion
    calls[names[-1]] = "cls.f1500(x)"
    assert call_cycle(_module(calls), ["f0"]) == names[1500:] + ["f1500"]
