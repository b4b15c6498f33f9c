# RUN: %python %s | filecheck %s
# Loss functions as printed: one dataflow block, params predictions/targets[/weights], global_symbol = the loss name.
from relax_mlir.ir import IRModule, TensorStructInfo
from relax_mlir.testing import roundtrip
from relax_mlir.training import CategoricalCrossEntropyLoss, CrossEntropyLoss, MSELoss

T = TensorStructInfo


def show(test, func):
    print(f"TEST: {test}")
    roundtrip(IRModule({func.attrs["global_symbol"]: func}))
    print(func.script())


show("cross_entropy_class_indices", CrossEntropyLoss("sum")(T((64, 10), "float32"), T((64,), "int64")))
show("cross_entropy_weighted_ignore", CrossEntropyLoss("mean", ignore_index=3)(
    T((64, 10), "float32"), T((64,), "int64"), T((10,), "float32")))
show("cross_entropy_one_hot", CrossEntropyLoss("sum")(T((64, 10), "float32"), T((64, 10), "int64")))
show("categorical_cross_entropy", CategoricalCrossEntropyLoss()(T((64, 10), "float32"), T((64, 10), "int64")))
show("mse", MSELoss("sum")(T((8, 2), "float32"), T((8, 2), "float32")))

# CHECK-LABEL: TEST: cross_entropy_class_indices
# CHECK: def cross_entropy_loss(
# CHECK-NEXT: predictions: R.Tensor((64, 10), dtype="float32"),
# CHECK-NEXT: targets: R.Tensor((64,), dtype="int64"),
# CHECK-NEXT: ) -> R.Tensor((), dtype="float32"):
# CHECK-NEXT: R.func_attr({"global_symbol": "cross_entropy_loss"})
# CHECK-NEXT: with R.dataflow():
# CHECK-NEXT: log_probs: R.Tensor((64, 10), dtype="float32") = R.nn.log_softmax(predictions)
# CHECK-NEXT: loss: R.Tensor((), dtype="float32") = R.nn.nll_loss(log_probs, targets, reduction="sum")
# CHECK-NEXT: R.output(loss)
# CHECK-NEXT: return loss

# CHECK-LABEL: TEST: cross_entropy_weighted_ignore
# CHECK: weights: R.Tensor((10,), dtype="float32"),
# CHECK: loss: R.Tensor((), dtype="float32") = R.nn.nll_loss(log_probs, targets, weights, ignore_index=3)

# One-hot (or probability) targets of the predictions' shape: -sum(targets * log_softmax, axis=-1), summed over N.
# CHECK-LABEL: TEST: cross_entropy_one_hot
# CHECK: targets: R.Tensor((64, 10), dtype="int64"),
# CHECK: log_probs: R.Tensor((64, 10), dtype="float32") = R.nn.log_softmax(predictions)
# CHECK-NEXT: lv: R.Tensor((64, 10), dtype="float32") = R.astype(targets, "float32")
# CHECK-NEXT: lv1: R.Tensor((64, 10), dtype="float32") = R.multiply(lv, log_probs)
# CHECK-NEXT: lv2: R.Tensor((64,), dtype="float32") = R.sum(lv1, axis=(-1,))
# CHECK-NEXT: lv3: R.Tensor((64,), dtype="float32") = R.negative(lv2)
# CHECK-NEXT: loss: R.Tensor((), dtype="float32") = R.sum(lv3)
# CHECK-NEXT: R.output(loss)

# ignore_index < 0: the product form, "mean" over all N*C elements.
# CHECK-LABEL: TEST: categorical_cross_entropy
# CHECK: def categorical_cross_entropy_loss(
# CHECK: R.func_attr({"global_symbol": "categorical_cross_entropy_loss"})
# CHECK: log_probs: R.Tensor((64, 10), dtype="float32") = R.nn.log_softmax(predictions)
# CHECK-NEXT: lv: R.Tensor((64, 10), dtype="float32") = R.negative(log_probs)
# CHECK-NEXT: lv1: R.Tensor((64, 10), dtype="float32") = R.astype(targets, "float32")
# CHECK-NEXT: lv2: R.Tensor((64, 10), dtype="float32") = R.multiply(lv, lv1)
# CHECK-NEXT: loss: R.Tensor((), dtype="float32") = R.mean(lv2)

# CHECK-LABEL: TEST: mse
# CHECK: diff: R.Tensor((8, 2), dtype="float32") = R.subtract(predictions, targets)
# CHECK-NEXT: lv: R.Tensor((8, 2), dtype="float32") = R.multiply(diff, diff)
# CHECK-NEXT: loss: R.Tensor((), dtype="float32") = R.sum(lv)
