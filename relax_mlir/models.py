"""Model builders used by the CLI and the examples, written with the ``BlockBuilder``."""

from __future__ import annotations

from typing import Sequence, Union

from . import op
from .ir import BlockBuilder, IRModule, TensorStructInfo, Var
from .ir.sym import Dim


def mlp(batch: Union[int, str, Dim] = 64, sizes: Sequence[int] = (64, 128, 128, 10),
        dtype: str = "float32") -> IRModule:
    """The tutorial's MLP: ``backbone(x, w0, b0, w1, b1, ...)``, ReLU between layers, logits out.

    ``sizes`` lists the layer widths from input to output; ``batch`` may be symbolic (``"n"``). The module
    has the attributes ``param_num`` (two per layer) and ``state_num`` (0) that ``SetupTrainer`` reads.
    """
    if len(sizes) < 2:
        raise ValueError(f"mlp: sizes needs an input and an output width, got {tuple(sizes)}")
    x = Var("x", TensorStructInfo((batch, sizes[0]), dtype))
    params = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        params += [Var(f"w{i}", TensorStructInfo((fan_in, fan_out), dtype)),
                   Var(f"b{i}", TensorStructInfo((fan_out,), dtype))]
    bb = BlockBuilder()
    with bb.function("backbone", [x, *params]):
        with bb.dataflow():
            h = x
            layers = len(sizes) - 1
            for i in range(layers):
                h = bb.emit(op.matmul(h, params[2 * i]))
                h = bb.emit(op.add(h, params[2 * i + 1]))
                if i < layers - 1:
                    h = bb.emit(op.nn.relu(h))
            out = bb.emit_output(h, "out")
        bb.emit_func_output(out)
    return bb.get().with_attrs({"param_num": len(params), "state_num": 0})
