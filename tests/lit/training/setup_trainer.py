# RUN: %python %s > %t.txt
# RUN: filecheck %s < %t.txt
# RUN: filecheck %s --check-prefix=MLIR < %t.txt
# SetupTrainer on a one-layer MLP (SGD with weight decay, summed cross-entropy): the printed loss_adjoint, the
# fused update_params (the gradient and the optimizer inlined into one function), and its MLIR.
from relax_mlir import TensorStructInfo, to_mlir
from relax_mlir.models import mlp
from relax_mlir.testing import roundtrip
from relax_mlir.training import SetupTrainer
from relax_mlir.training.loss import CrossEntropyLoss
from relax_mlir.training.optimizer import SGD

setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.01, weight_decay=0.02),
                     [TensorStructInfo((4, 2), "float32"), TensorStructInfo((4,), "int64")])
mod = roundtrip(setup(mlp(4, (3, 2))))
print(mod["loss_adjoint"].script("loss_adjoint"))
# CHECK-LABEL: def loss_adjoint(
# CHECK: log_probs: R.Tensor((4, 2), dtype="float32") = R.nn.log_softmax(lv1)
# CHECK-NEXT: loss: R.Tensor((), dtype="float32") = R.nn.nll_loss(log_probs, targets, reduction="sum")
# CHECK-NEXT: loss_adjoint: R.Tensor((), dtype="float32") = R.ones((), "float32")
# CHECK-NEXT: log_probs_adjoint: R.Tensor((4, 2), dtype="float32") = R.grad.nll_loss_backward(loss_adjoint, log_probs, targets, reduction="sum")
# The bias gradient sums the broadcast back; the weight gradient is x^T @ g.
# CHECK: b0_adjoint: R.Tensor((2,), dtype="float32") = R.collapse_sum_to({{.*}}, (2,))
# CHECK: w0_adjoint: R.Tensor((3, 2), dtype="float32") = R.matmul(
# CHECK: return (loss, (w0_adjoint, b0_adjoint))

print(mod["update_params"].script("update_params"))
# CHECK-LABEL: def update_params(
# CHECK: targets: R.Tensor((4,), dtype="int64"),
# CHECK-NEXT: optim_state_0: R.Tensor((), dtype="int64"),
# CHECK-NOT: cls.
# CHECK: num_steps_new: R.Tensor((), dtype="int64") = R.add(optim_state_0, R.const(1, "int64"))
# CHECK: = R.multiply(R.const(0.02, "float32"), w0)
# CHECK-NEXT: w0_grad_new: R.Tensor((3, 2), dtype="float32") = R.add({{.*}}, w0_adjoint)
# CHECK-NEXT: {{.*}} = R.multiply(R.const(0.01, "float32"), w0_grad_new)
# CHECK-NEXT: w0_new: R.Tensor((3, 2), dtype="float32") = R.subtract(w0, {{.*}})
# CHECK: return gv

print(to_mlir(mod, "relax", function="update_params"))
# MLIR-LABEL: func.func @update_params(
# MLIR-SAME: tensor<4x3xf32>, {{.*}}tensor<4xi64>, %arg4: tensor<i64>) -> (tensor<f32>, tensor<3x2xf32>, tensor<2xf32>, tensor<i64>)
# MLIR: "relax.matmul"
# MLIR: "relax.nn_log_softmax"
# MLIR: "relax.grad_nll_loss_backward"
# MLIR: "relax.collapse_sum_to"
# MLIR-NOT: func.call
# MLIR: return

print(to_mlir(mod, "linalg", function="update_params"))
# MLIR-LABEL: func.func @update_params(
# MLIR: linalg.matmul
# MLIR: math.exp
# MLIR-NOT: relax.
# MLIR: return
