"""Every differentiable op's gradient rule agrees with central finite differences (float64), on its samples.

Tolerance: rtol 1e-5, atol 1e-6 in float64 with eps 1e-6 — the central-difference truncation error is about
eps**2 * f''' and the rounding error about 1e-16 / eps = 1e-10, both far inside it. Inputs are drawn from each
sample's domain with a fixed seed; kinks (relu at 0, ties of max) are hit with probability ~0.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from relax_mlir import op as relax_op
from relax_mlir.ir.struct_info import StructInfo, TupleStructInfo, free_vars, substitute
from relax_mlir.testing.gradcheck import as_float64, check_rule
from relax_mlir.op.registry import NOT_DIFFERENTIABLE, SECOND_ORDER_UNSUPPORTED, substitute_attrs

from ..conftest import random_inputs
from .test_registry import SIZES

OPS = relax_op.list_ops()


def _sinfo(arg) -> StructInfo:
    return TupleStructInfo(arg) if isinstance(arg, (list, tuple)) else arg


def _cases():
    for op in OPS:
        if op.gradient in (None, NOT_DIFFERENTIABLE, SECOND_ORDER_UNSUPPORTED):
            continue
        for i, sample in enumerate(op.samples):
            yield pytest.param(op, sample, id=f"{op.name}-{i}")


def _to64(a):
    if isinstance(a, tuple):
        return tuple(_to64(x) for x in a)
    return a.astype(np.float64) if a.dtype.kind == "f" or str(a.dtype) == "bfloat16" else a


@pytest.mark.parametrize("op,sample", list(_cases()))
def test_gradient_matches_finite_differences(op, sample):
    rng = np.random.default_rng(zlib.crc32(op.name.encode()))
    sinfos = [_sinfo(a) for a in sample.args]
    env = {name: SIZES[name] for s in sinfos for name in free_vars(s)} | sample.sizes
    concrete = [substitute(s, env) for s in sinfos]
    attrs = substitute_attrs(op.complete_attrs(sample.attrs), env)
    arrays = (sample.make(rng, concrete, attrs) if sample.make
              else random_inputs(rng, concrete, sample.low, sample.high))
    wide = [as_float64(s) for s in concrete]
    for key in ("dtype", "out_dtype"):  # the check runs in float64 throughout
        if attrs.get(key) in ("float16", "bfloat16", "float32"):
            attrs = {**attrs, key: "float64"}
    check_rule(op, wide, attrs, [_to64(a) for a in arrays], rng)


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
def test_every_op_decides_its_gradient(op):
    assert op.gradient is not None, f"{op.name} has no gradient rule and is not marked NOT_DIFFERENTIABLE"
    if op.gradient is SECOND_ORDER_UNSUPPORTED:
        assert op.name.startswith("relax.grad.") and op.name.endswith("_backward"), \
            f"{op.name}: only the backward ops of gradients may leave their own gradient out"
