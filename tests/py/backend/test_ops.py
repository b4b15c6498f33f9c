"""Every lowered op of the registry, on every one of its samples: compiled == interpreted.

A sample with size variables is compiled with dynamic dimensions (``?``) when the runtime can bind them from the
parameters and allocate the result; otherwise (a parameter sized ``2 * h``, a result of unknown shape) with the
sizes bound. Tolerances per dtype are in ``op_cases.py``. Ops without a lowering are skipped, and listed by
``test_unlowered_ops_are_known``.
"""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import op as relax_op
from relax_mlir.interpreter import interpret

from .op_cases import assert_close, compilable, make_case

import relax_mlir.backend.legalize  # noqa: F401  (attaches the lowerings)

OPS = relax_op.list_ops()


def _cases():
    for op in OPS:
        for i, sample in enumerate(op.samples):
            yield pytest.param(op, sample, id=f"{op.name}-{i}")


@pytest.mark.parametrize("op,sample", list(_cases()))
def test_compiled_matches_interpreter(op, sample):
    if op.legalize is None and op.decompose is None:
        pytest.skip(f"{op.name} has no lowering yet")
    case = make_case(op, sample)
    mod = case.mod_symbolic if compilable(case.mod_symbolic) else case.mod_static
    want = interpret(mod, "main", *case.arrays)
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod))
    got = vm["main"](*case.arrays)
    assert_close(got, want, op.name)
