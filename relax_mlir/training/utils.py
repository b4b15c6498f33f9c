"""Training utilities (TVM's ``relax.training.utils``): :func:`append_loss`.

    loss = CrossEntropyLoss(reduction="sum")(out_sinfo, label_sinfo)
    mod["loss"] = append_loss(mod["backbone"], loss)        # (x, w0, b0, ..., targets) -> loss

The pass form is :class:`relax_mlir.transform.AppendLoss` (TVM 0.27 only has that one); both share one
implementation, :func:`relax_mlir.transform.append_loss.append_loss_function`.
"""

from __future__ import annotations

from typing import Optional

from ..ir.expr import Function
from ..transform.append_loss import AppendLossError, append_loss_function

__all__ = ["append_loss", "AppendLossError"]


def append_loss(orig_func: Function, loss_func: Function, num_backbone_outputs: int = 1,
                new_func_name: Optional[str] = None) -> Function:
    """``orig_func`` (the backbone) followed by ``loss_func``, as one function with one dataflow block.

    The first ``num_backbone_outputs`` return values of the backbone are passed to the loss's first parameters
    (their struct info must be equal). The result's parameters are the backbone's, then the loss's remaining ones
    (the targets): ``(inputs..., params..., states..., targets...)``. It returns the loss, or
    ``(loss, other_outputs...)`` when the backbone returns more (the updated states), as TVM does.

    The result's ``global_symbol`` is ``new_func_name``, else the backbone's ``global_symbol + "_loss"``, else it
    has none (a backbone built here without one). ``AppendLossError`` (a ``ValueError``) names what does not fit:
    a loss that does not return a 0-d tensor Var from one dataflow block, a backbone returning something other
    than Vars, too few outputs or parameters, or mismatched struct info.

    Example (an MSE loss on a one-layer backbone)::

        def backbone(x: R.Tensor((2, 4)), w: R.Tensor((4, 3))):      def mse_loss(predictions, targets):
            out = R.matmul(x, w)                                          diff = R.subtract(predictions, targets)
            return out                                                    ...; return loss

        append_loss(backbone, mse_loss) ==
        def backbone_loss(x, w, targets):
            out = R.matmul(x, w); diff = R.subtract(out, targets); ...; return loss
    """
    name = new_func_name
    if name is None and "global_symbol" in getattr(orig_func, "attrs", {}):
        name = f"{orig_func.attrs['global_symbol']}_loss"
    return append_loss_function(orig_func, loss_func, num_backbone_outputs, name)
