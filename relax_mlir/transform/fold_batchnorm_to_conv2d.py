"""``FoldBatchnormToConv2D``: an inference batch norm after a convolution with constant weights is folded into
the convolution, as TVM's pass of that name (after ``BindParams`` has made the weights constants):

    c = R.nn.conv2d(x, W)                      ->    gv = R.nn.conv2d(x, W * s)       s = gamma / sqrt(var + eps)
    bn = R.nn.batch_norm(c, gamma, beta, mean, var)   y = R.add(gv, b)            b = beta - mean * s
    y = bn[0]

``W * s`` scales each output channel's filter and ``b`` is one bias per channel (shaped ``(1, C, 1, 1)``), both
computed here with NumPy in the weights' dtype. Only when the batch norm normalizes the channel axis of an
``NCHW``/``OIHW`` convolution (``axis=1``), is not in training mode (which normalizes by the batch's own
statistics), and the weight and the four statistics are constants. The batch norm's other outputs (the running
statistics, unchanged in inference) stay available: only the use of its first output is rewritten;
``DeadCodeElimination`` removes the convolution and batch norm once nothing else reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import op
from ..dpl import is_const, is_op, is_tuple_get_item, wildcard
from ..ir.expr import Constant
from .rewrite_pass import CallRewritePass


@dataclass(frozen=True)
class FoldBatchnormToConv2D(CallRewritePass):
    """Fold an inference batch norm into the convolution before it (TVM's ``FoldBatchnormToConv2D``).

    Example, applied as ``FoldBatchnormToConv2D()``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((1, 1, 4, 4), "float32")):
                c = R.nn.conv2d(x, R.const([[[[2.0]]], [[[1.0]]]], "float32"))
                bn = R.nn.batch_norm(c, R.const([1.0, 3.0], "float32"), R.const([0.5, 0.0], "float32"), R.const([0.0, 1.0], "float32"), R.const([3.0, 8.0], "float32"), axis=1, epsilon=1.0)
                y = bn[0]
                return y

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((1, 1, 4, 4), dtype="float32")) -> R.Tensor((1, 2, 4, 4), dtype="float32"):
                c: R.Tensor((1, 2, 4, 4), dtype="float32") = R.nn.conv2d(x, R.const([[[[2.0]]], [[[1.0]]]], "float32"), out_layout="NCHW")
                bn: R.Tuple(R.Tensor((1, 2, 4, 4), dtype="float32"), R.Tensor((2,), dtype="float32"), R.Tensor((2,), dtype="float32")) = R.nn.batch_norm(c, R.const([1.0, 3.0], "float32"), R.const([0.5, 0.0], "float32"), R.const([0.0, 1.0], "float32"), R.const([3.0, 8.0], "float32"), epsilon=1.0)
                gv: R.Tensor((1, 2, 4, 4), dtype="float32") = R.nn.conv2d(x, R.const([[[[1.0]]], [[[1.0]]]], "float32"), out_layout="NCHW")
                y: R.Tensor((1, 2, 4, 4), dtype="float32") = R.add(gv, R.const([[[[0.5]], [[-1.0]]]], "float32"))
                return y
    """

    name = "FoldBatchnormToConv2D"

    def rules(self, func):
        data, weight = wildcard(), is_const()
        gamma, beta, mean, var = is_const(), is_const(), is_const(), is_const()
        conv = is_op("relax.nn.conv2d")(data, weight)
        norm = is_op("relax.nn.batch_norm")(conv, gamma, beta, mean, var)

        def rewrite(expr, m):
            c, bn = m[conv], m[norm]
            attrs = dict(bn.attrs)
            if attrs.get("training") or attrs.get("axis", 1) % 4 != 1 or c.attrs.get("data_layout") != "NCHW" \
                    or c.attrs.get("kernel_layout") != "OIHW" or c.attrs.get("out_layout") not in (None, "NCHW") \
                    or c.attrs.get("out_dtype") not in (None, "", "void"):
                return expr
            w = m[weight].data
            stats = [np.asarray(m[p].data) for p in (gamma, beta, mean, var)]
            if w.ndim != 4 or any(s.shape != (w.shape[0],) for s in stats):
                return expr
            g, b, mu, v = (s.astype(np.float64) for s in stats)
            scale = (g if attrs.get("scale", True) else 1.0) / np.sqrt(v + float(attrs.get("epsilon", 1e-5)))
            shift = (b if attrs.get("center", True) else 0.0) - mu * scale
            new_w = (w.astype(np.float64) * scale[:, None, None, None]).astype(w.dtype)
            bias = shift.astype(w.dtype).reshape(1, -1, 1, 1)
            conv_attrs = {k: v for k, v in c.attrs.items()}
            return op.add(op.nn.conv2d(m[data], Constant(new_w), **conv_attrs), Constant(bias))

        return [(is_tuple_get_item(norm, 0), rewrite)]
