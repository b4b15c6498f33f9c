"""Neural-network ops (``relax.nn.*``): ``relax_mlir.op.nn.relu(x)``, as TVM Relax's ``relax.op.nn``.

Semantics and attribute names follow TVM Relax. One module per concern:

* :mod:`.activation`: relu, silu, gelu, gelu_tanh, leakyrelu, softplus, prelu, softmax, log_softmax;
* :mod:`.loss`: cross_entropy_with_logits, nll_loss;
* :mod:`.conv`: conv2d, max_pool2d, avg_pool2d (NCHW); :mod:`.conv_transpose`: conv2d_transpose;
* :mod:`.norm`: batch_norm, layer_norm, dropout; :mod:`.group_norm`: group_norm, rms_norm;
* :mod:`.attention`: attention; :mod:`.spatial`: pad, conv1d, adaptive_avg_pool2d, pixel_shuffle;
* :mod:`.conv3d`: conv3d, conv1d_transpose, conv3d_transpose; :mod:`.pool3d`: max_pool3d, avg_pool3d, adaptive_avg_pool3d (composites
  over the 2-D ops); relu6 (in :mod:`.activation`), batch_flatten (a reshape, in ``op/grid.py``).

The backward ops their gradients use (``relax.grad.nll_loss_backward``, ...) are in ``relax_mlir.op.grad``.
"""

from .activation import gelu, gelu_tanh, leakyrelu, log_softmax, prelu, relu, relu6, silu, softmax, softplus
from ..grid import batch_flatten
from .loss import cross_entropy_with_logits, nll_loss
from .conv import avg_pool2d, conv2d, max_pool2d
from .conv_transpose import conv2d_transpose
from .norm import batch_norm, dropout, layer_norm
from .group_norm import group_norm, rms_norm
from .attention import attention
from .spatial import adaptive_avg_pool2d, conv1d, pad, pixel_shuffle
from .conv3d import conv1d_transpose, conv3d, conv3d_transpose
from .pool3d import adaptive_avg_pool3d, avg_pool3d, max_pool3d

__all__ = ["relu", "silu", "gelu", "gelu_tanh", "leakyrelu", "softmax", "log_softmax", "cross_entropy_with_logits",
           "nll_loss", "conv2d", "conv2d_transpose", "max_pool2d", "avg_pool2d", "batch_norm", "layer_norm", "dropout",
           "group_norm", "rms_norm", "attention", "softplus", "prelu", "pad", "conv1d", "adaptive_avg_pool2d",
           "pixel_shuffle", "relu6", "batch_flatten", "conv3d", "conv1d_transpose", "conv3d_transpose", "max_pool3d",
           "avg_pool3d", "adaptive_avg_pool3d"]
