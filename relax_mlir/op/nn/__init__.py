"""Neural-network ops (``relax.nn.*``): ``relax_mlir.op.nn.relu(x)``, as TVM Relax's ``relax.op.nn``.

Semantics and attribute names follow TVM Relax. One module per concern:

* :mod:`.activation`: relu, silu, gelu, gelu_tanh, leakyrelu, softplus, prelu, softmax, log_softmax;
* :mod:`.loss`: cross_entropy_with_logits, nll_loss;
* :mod:`.conv`: conv2d, max_pool2d, avg_pool2d (NCHW); :mod:`.conv_transpose`: conv2d_transpose;
* :mod:`.norm`: batch_norm, layer_norm, dropout; :mod:`.group_norm`: group_norm, rms_norm;
* :mod:`.attention`: attention; :mod:`.spatial`: pad, conv1d, adaptive_avg_pool2d, pixel_shuffle.

The backward ops their gradients use (``relax.grad.nll_loss_backward``, ...) are in ``relax_mlir.op.grad``.
"""

from .activation import gelu, gelu_tanh, leakyrelu, log_softmax, prelu, relu, silu, softmax, softplus
from .loss import cross_entropy_with_logits, nll_loss
from .conv import avg_pool2d, conv2d, max_pool2d
from .conv_transpose import conv2d_transpose
from .norm import batch_norm, dropout, layer_norm
from .group_norm import group_norm, rms_norm
from .attention import attention
from .spatial import adaptive_avg_pool2d, conv1d, pad, pixel_shuffle

__all__ = ["relu", "silu", "gelu", "gelu_tanh", "leakyrelu", "softmax", "log_softmax", "cross_entropy_with_logits",
           "nll_loss", "conv2d", "conv2d_transpose", "max_pool2d", "avg_pool2d", "batch_norm", "layer_norm", "dropout",
           "group_norm", "rms_norm", "attention", "softplus", "prelu",
           "pad", "conv1d", "adaptive_avg_pool2d", "pixel_shuffle"]
