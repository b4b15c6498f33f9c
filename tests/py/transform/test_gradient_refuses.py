"""Ops marked NOT_DIFFERENTIABLE. Generated from the registry: their results are integers or booleans (or
floats made from integer inputs only), which carry no gradient, so a path through them adds nothing to the
gradient (as in PyTorch and JAX: ``(x > 0).float() * x`` trains) and the other paths still count. A float result
of such an op on a differentiable path is refused with the documented error, which names the op and the binding
that uses it."""

from __future__ import annotations

import numpy as np
import pytest

from relax_mlir import op as relax_op
from relax_mlir import interpret, transform
from relax_mlir.ir import BlockBuilder, TensorStructInfo, TupleStructInfo, Var
from relax_mlir.ir.dtype import is_float
from relax_mlir.op.registry import NOT_DIFFERENTIABLE, Op, Sample
from relax_mlir.transform import GradientError

NON_DIFFERENTIABLE = [o for o in relax_op.list_ops() if o.gradient is NOT_DIFFERENTIABLE]


def _float_sample(o):
    """The op's first sample whose every tensor argument can be computed from one float parameter."""
    for sample in o.samples:
        sinfos = [TupleStructInfo(a) if isinstance(a, (list, tuple)) else a for a in sample.args]
        if all(isinstance(s, TensorStructInfo) and s.shape is not None for s in sinfos):
            return sample, sinfos
    pytest.fail(f"{o.name}: no sample with plain tensor arguments")


@pytest.mark.parametrize("o", NON_DIFFERENTIABLE, ids=lambda o: o.name)
def test_a_path_through_the_op_adds_nothing_to_the_gradient(o):
    sample, sinfos = _float_sample(o)
    # Every argument derives from the float parameter p (cast to the argument's dtype); the loss is the op's
    # result (as float64) plus p * p, whose gradient 2 p is all p gets.
    p = Var("p", TensorStructInfo((), "float64"))
    bb = BlockBuilder()
    with bb.function("f", [p]):
        with bb.dataflow():
            args = []
            for s in sinfos:
                value = relax_op.broadcast_to(p, s.shape)
                args.append(bb.emit(value if s.dtype == "float64" else relax_op.astype(value, s.dtype)))
            out = bb.emit(o(*args, **sample.attrs), "culprit")
            if not is_float(out.struct_info.dtype) or out.struct_info.dtype != "float64":
                out = bb.emit(relax_op.astype(out, "float64"))
            loss = bb.emit_output(relax_op.add(relax_op.sum(out), relax_op.multiply(p, p)))
        bb.emit_func_output(loss)
    after = transform.Gradient("f")(bb.get())
    _, (grad,) = interpret(after, "f_adjoint", np.float64(0.75))
    assert float(grad) == 1.5


def test_differentiating_through_the_op_is_refused():
    # A float result marked as carrying no gradient, computed from the float parameter: on the path, refused.
    culprit_op = Op(name="relax.test_no_gradient", inputs=("x",), infer=lambda args, attrs: args[0],
                    reference=lambda x: x, gradient=NOT_DIFFERENTIABLE, samples=[Sample([])], doc="test op")
    p = Var("p", TensorStructInfo((3,), "float64"))
    bb = BlockBuilder()
    with bb.function("f", [p]):
        with bb.dataflow():
            out = bb.emit(culprit_op(p), "culprit")
            loss = bb.emit_output(relax_op.sum(out))
        bb.emit_func_output(loss)
    with pytest.raises(GradientError, match=r"Gradient\(f\): cannot differentiate: relax.test_no_gradient is not "
                                            r"differentiable \(used by culprit\)"):
        transform.Gradient("f")(bb.get())
