"""Generated from the registry: differentiating through any op marked NOT_DIFFERENTIABLE is refused with the
documented error, which names the op and the binding that uses it."""

from __future__ import annotations

import pytest

from relax_mlir import op as relax_op
from relax_mlir import transform
from relax_mlir.ir import BlockBuilder, TensorStructInfo, TupleStructInfo, Var
from relax_mlir.ir.dtype import is_float
from relax_mlir.op.registry import NOT_DIFFERENTIABLE
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
def test_differentiating_through_the_op_is_refused(o):
    sample, sinfos = _float_sample(o)
    # Every argument derives from the float parameter p (cast to the argument's dtype), so a gradient with
    # respect to p would have to pass through the op.
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
            loss = bb.emit_output(relax_op.sum(out))
        bb.emit_func_output(loss)
    with pytest.raises(GradientError, match=rf"Gradient\(f\): cannot differentiate: {o.name} is not "
                                            rf"differentiable \(used by culprit\)"):
        transform.Gradient("f")(bb.get())
