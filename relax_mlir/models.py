"""Model builders used by the CLI and the examples, written with the ``BlockBuilder``."""

from __future__ import annotations

from typing import Optional, Sequence, Union

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


def deep_mlp(n_layers: int, width: int = 32, batch: int = 16, segments: Optional[int] = None,
             dtype: str = "float32") -> IRModule:
    """``f(x, w0, ..., w{N-1}) = sum(relu(...relu(x @ w0)... @ w{N-1}))``, a stack of N equal layers.

    ``segments=0`` builds it plainly; otherwise the layers are checkpointed with ``checkpoint_sequential``
    (``None``: about sqrt(N) segments). Used to show what gradient checkpointing saves.
    """
    from .training.remat import checkpoint_sequential

    x = Var("x", TensorStructInfo((batch, width), dtype))
    ws = [Var(f"w{i}", TensorStructInfo((width, width), dtype)) for i in range(n_layers)]

    def layer(w: Var):
        return lambda bb, h: bb.emit(op.nn.relu(op.matmul(h, w)))

    layers = [layer(w) for w in ws]
    bb = BlockBuilder()
    with bb.function("f", [x, *ws]):
        with bb.dataflow():
            if segments == 0:
                h = x
                for fn in layers:
                    h = fn(bb, h)
            else:
                h = checkpoint_sequential(bb, layers, x, segments)
            out = bb.emit_output(op.sum(h))
        bb.emit_func_output(out)
    return bb.get()


def cnn(batch: Union[int, str, Dim] = 64, image_shape: Sequence[int] = (1, 8, 8), channels: Sequence[int] = (8, 16),
        classes: int = 10, dtype: str = "float32") -> IRModule:
    """A small CNN: per stage conv2d 3x3 (padding 1) -> batch_norm -> relu -> max_pool2d 2x2, then a dense layer.

    ``backbone(x, params..., states...)`` returns ``(logits, new running means and variances...)``; the module
    has ``param_num`` (3 per stage + 2) and ``state_num`` (2 per stage) for ``SetupTrainer``.
    """
    c, h, w = image_shape
    x = Var("x", TensorStructInfo((batch, c, h, w), dtype))
    params, states = [], []
    for i, out_c in enumerate(channels):
        params += [Var(f"conv{i}_weight", TensorStructInfo((out_c, c, 3, 3), dtype)),
                   Var(f"bn{i}_gamma", TensorStructInfo((out_c,), dtype)),
                   Var(f"bn{i}_beta", TensorStructInfo((out_c,), dtype))]
        states += [Var(f"bn{i}_mean", TensorStructInfo((out_c,), dtype)),
                   Var(f"bn{i}_var", TensorStructInfo((out_c,), dtype))]
        if h % 2 or w % 2:
            raise ValueError(f"cnn: stage {i} pools a {h}x{w} map; image sides must halve evenly")
        c, h, w = out_c, h // 2, w // 2
    features = c * h * w
    params += [Var("dense_weight", TensorStructInfo((features, classes), dtype)),
               Var("dense_bias", TensorStructInfo((classes,), dtype))]
    bb = BlockBuilder()
    with bb.function("backbone", [x, *params, *states]):
        with bb.dataflow():
            t, new_states = x, []
            for i in range(len(channels)):
                weight, gamma, beta = params[3 * i:3 * i + 3]
                mean, var = states[2 * i:2 * i + 2]
                t = bb.emit(op.nn.conv2d(t, weight, padding=(1, 1, 1, 1)))
                bn = bb.emit(op.nn.batch_norm(t, gamma, beta, mean, var, axis=1))
                new_states += [bb.emit_output(bn[1], f"bn{i}_mean_new"), bb.emit_output(bn[2], f"bn{i}_var_new")]
                t = bb.emit(op.nn.relu(bn[0]))
                t = bb.emit(op.nn.max_pool2d(t, pool_size=(2, 2), strides=(2, 2)))
            flat = bb.emit(op.reshape(t, (batch, features)))
            logits = bb.emit_output(op.add(op.matmul(flat, params[-2]), params[-1]), "logits")
        bb.emit_func_output((logits, *new_states))  # a tuple of variables, as AppendLoss expects
    # Running variances start at 1 (running means at 0): the Trainer reads "state_init".
    return bb.get().with_attrs({"param_num": len(params), "state_num": len(states),
                                "state_init": {v.name_hint: 1.0 for v in states if v.name_hint.endswith("_var")}})
