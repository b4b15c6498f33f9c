# RUN: %python %s | filecheck %s
# DecomposeOpsForTraining / DecomposeOpsForInference on batch_norm: the training form normalises with the batch
# mean and biased variance (eps before the sqrt) and returns (1 - momentum) * moving + momentum * batch; the
# inference form normalises with the moving statistics and returns them unchanged.
from relax_mlir import transform
from relax_mlir.script import ir as I, relax as R
from relax_mlir.testing import roundtrip


@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 3, 2, 2), "float32"), gamma: R.Tensor((3,), "float32"),
             beta: R.Tensor((3,), "float32"), moving_mean: R.Tensor((3,), "float32"),
             moving_var: R.Tensor((3,), "float32")):
        with R.dataflow():
            bn = R.nn.batch_norm(x, gamma, beta, moving_mean, moving_var, axis=1, momentum=0.1)
            R.output(bn)
        return bn


print("TEST: training")
print(roundtrip(transform.DecomposeOpsForTraining()(Module))["main"].script("main"))
print("TEST: inference")
print(roundtrip(transform.DecomposeOpsForInference()(Module))["main"].script("main"))

# CHECK-LABEL: TEST: training
# CHECK: def main(
# CHECK-NEXT: x: R.Tensor((4, 3, 2, 2), dtype="float32"),
# CHECK-NEXT: gamma: R.Tensor((3,), dtype="float32"),
# CHECK-NEXT: beta: R.Tensor((3,), dtype="float32"),
# CHECK-NEXT: moving_mean: R.Tensor((3,), dtype="float32"),
# CHECK-NEXT: moving_var: R.Tensor((3,), dtype="float32"),
# CHECK-NEXT: ) -> R.Tuple(R.Tensor((4, 3, 2, 2), dtype="float32"), R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32")):
# CHECK-NEXT: with R.dataflow():
# CHECK-NEXT: lv: R.Tensor((3,), dtype="float32") = R.mean(x, axis=(0, 2, 3))
# CHECK-NEXT: lv_1: R.Tensor((1, 3, 1, 1), dtype="float32") = R.expand_dims(lv, (0, 2, 3))
# CHECK-NEXT: lv_2: R.Tensor((4, 3, 2, 2), dtype="float32") = R.subtract(x, lv_1)
# CHECK-NEXT: lv_3: R.Tensor((3,), dtype="float32") = R.variance(x, axis=(0, 2, 3))
# CHECK-NEXT: lv_4: R.Tensor((1, 3, 1, 1), dtype="float32") = R.expand_dims(lv_3, (0, 2, 3))
# CHECK-NEXT: lv_5: R.Tensor((1, 3, 1, 1), dtype="float32") = R.add(lv_4, R.const(1.0e-05, "float32"))
# CHECK-NEXT: lv_6: R.Tensor((1, 3, 1, 1), dtype="float32") = R.sqrt(lv_5)
# CHECK-NEXT: lv_7: R.Tensor((4, 3, 2, 2), dtype="float32") = R.divide(lv_2, lv_6)
# CHECK-NEXT: lv_8: R.Tensor((1, 3, 1, 1), dtype="float32") = R.expand_dims(gamma, (0, 2, 3))
# CHECK-NEXT: lv_9: R.Tensor((4, 3, 2, 2), dtype="float32") = R.multiply(lv_7, lv_8)
# CHECK-NEXT: lv_10: R.Tensor((1, 3, 1, 1), dtype="float32") = R.expand_dims(beta, (0, 2, 3))
# CHECK-NEXT: lv_11: R.Tensor((4, 3, 2, 2), dtype="float32") = R.add(lv_9, lv_10)
# CHECK-NEXT: lv_12: R.Tensor((3,), dtype="float32") = R.multiply(R.const(0.9, "float32"), moving_mean)
# CHECK-NEXT: lv_13: R.Tensor((3,), dtype="float32") = R.multiply(R.const(0.1, "float32"), lv)
# CHECK-NEXT: lv_14: R.Tensor((3,), dtype="float32") = R.add(lv_12, lv_13)
# CHECK-NEXT: lv_15: R.Tensor((3,), dtype="float32") = R.multiply(R.const(0.9, "float32"), moving_var)
# CHECK-NEXT: lv_16: R.Tensor((3,), dtype="float32") = R.multiply(R.const(0.1, "float32"), lv_3)
# CHECK-NEXT: lv_17: R.Tensor((3,), dtype="float32") = R.add(lv_15, lv_16)
# CHECK-NEXT: bn: R.Tuple(R.Tensor((4, 3, 2, 2), dtype="float32"), R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32")) = (lv_11, lv_14, lv_17)
# CHECK-NEXT: R.output(bn)
# CHECK-NEXT: return bn

# CHECK-LABEL: TEST: inference
# CHECK: def main(
# CHECK-NEXT: x: R.Tensor((4, 3, 2, 2), dtype="float32"),
# CHECK-NEXT: gamma: R.Tensor((3,), dtype="float32"),
# CHECK-NEXT: beta: R.Tensor((3,), dtype="float32"),
# CHECK-NEXT: moving_mean: R.Tensor((3,), dtype="float32"),
# CHECK-NEXT: moving_var: R.Tensor((3,), dtype="float32"),
# CHECK-NEXT: ) -> R.Tuple(R.Tensor((4, 3, 2, 2), dtype="float32"), R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32")):
# CHECK-NEXT: with R.dataflow():
# CHECK-NEXT: lv: R.Tensor((1, 3, 1, 1), dtype="float32") = R.expand_dims(moving_mean, (0, 2, 3))
# CHECK-NEXT: lv_1: R.Tensor((4, 3, 2, 2), dtype="float32") = R.subtract(x, lv)
# CHECK-NEXT: lv_2: R.Tensor((1, 3, 1, 1), dtype="float32") = R.expand_dims(moving_var, (0, 2, 3))
# CHECK-NEXT: lv_3: R.Tensor((1, 3, 1, 1), dtype="float32") = R.add(lv_2, R.const(1.0e-05, "float32"))
# CHECK-NEXT: lv_4: R.Tensor((1, 3, 1, 1), dtype="float32") = R.sqrt(lv_3)
# CHECK-NEXT: lv_5: R.Tensor((4, 3, 2, 2), dtype="float32") = R.divide(lv_1, lv_4)
# CHECK-NEXT: lv_6: R.Tensor((1, 3, 1, 1), dtype="float32") = R.expand_dims(gamma, (0, 2, 3))
# CHECK-NEXT: lv_7: R.Tensor((4, 3, 2, 2), dtype="float32") = R.multiply(lv_5, lv_6)
# CHECK-NEXT: lv_8: R.Tensor((1, 3, 1, 1), dtype="float32") = R.expand_dims(beta, (0, 2, 3))
# CHECK-NEXT: lv_9: R.Tensor((4, 3, 2, 2), dtype="float32") = R.add(lv_7, lv_8)
# CHECK-NEXT: bn: R.Tuple(R.Tensor((4, 3, 2, 2), dtype="float32"), R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32")) = (lv_9, moving_mean, moving_var)
# CHECK-NEXT: R.output(bn)
# CHECK-NEXT: return bn
