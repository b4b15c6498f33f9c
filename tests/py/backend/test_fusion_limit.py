"""``fusion_limit.py``: a chain of elementwise ops fuses into loops of at most ``MAX_FUSED`` ops (TVM's
``max_fuse_depth``), computing what the interpreter does; shorter groups are left alone."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import BlockBuilder, TensorStructInfo, Var, op
from relax_mlir.backend.fusion_limit import MAX_FUSED


def _chain(n: int, shape=(8,)):
    x = Var("x", TensorStructInfo(shape, "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            v = x
            for i in range(n):
                v = bb.emit(op.tanh(v) if i % 2 else op.add(v, relax_mlir.const(np.float32(0.1))))
            out = bb.emit_output(v)
        bb.emit_func_output(out)
    return bb.get()


@pytest.mark.parametrize("n, shape", [(3 * MAX_FUSED + 5, (8,)), (MAX_FUSED + 1, ("n", 3))])
def test_a_long_chain_is_cut_into_loops_of_at_most_max_fused_ops(n, shape):
    mod = _chain(n, shape)
    fused = relax_mlir.to_mlir(mod, "fused")
    assert fused.count("linalg.copy") == (n - 1) // MAX_FUSED  # one cut each MAX_FUSED ops
    assert fused.count("linalg.generic") == (n - 1) // MAX_FUSED + 1
    x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(-1, 3) if shape[0] == "n" else \
        np.linspace(-2, 2, 8, dtype=np.float32)
    got = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](x)
    np.testing.assert_allclose(got, relax_mlir.interpret(mod, "main", x), rtol=1e-5, atol=1e-6)


def test_a_chain_within_the_bound_fuses_whole():
    fused = relax_mlir.to_mlir(_chain(MAX_FUSED), "fused")
    assert "linalg.copy" not in fused and fused.count("linalg.generic") == 1
