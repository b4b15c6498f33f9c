# RUN: %python %s | filecheck %s
# AppendLoss on TVM's documented example: the prediction becomes a dataflow variable, the loss's targets follow
# the backbone's parameters, and the loss is the only output.
from relax_mlir.ir import TensorStructInfo
from relax_mlir.script import ir as I, relax as R
from relax_mlir.testing import roundtrip
from relax_mlir.training import MSELoss
from relax_mlir.transform import AppendLoss


@I.ir_module
class Module:
    @R.function
    def predict(x: R.Tensor((2, 4), dtype="float32"), y: R.Tensor((2, 4), dtype="float32")) -> R.Tensor((2, 4), dtype="float32"):
        with R.dataflow():
            out: R.Tensor((2, 4), dtype="float32") = R.add(x, y)
            R.output(out)
        return out


print("TEST: append_mse")
loss = MSELoss("sum")(TensorStructInfo((2, 4), "float32"), TensorStructInfo((2, 4), "float32"))
after = roundtrip(AppendLoss("predict", loss)(Module))
print(after.script())
# CHECK-LABEL: TEST: append_mse
# CHECK: def predict(
# CHECK: R.output(out)
# CHECK: def predict_loss(
# CHECK-NEXT: x: R.Tensor((2, 4), dtype="float32"),
# CHECK-NEXT: y: R.Tensor((2, 4), dtype="float32"),
# CHECK-NEXT: targets: R.Tensor((2, 4), dtype="float32"),
# CHECK-NEXT: ) -> R.Tensor((), dtype="float32"):
# CHECK-NEXT: R.func_attr({"global_symbol": "predict_loss"})
# CHECK-NEXT: with R.dataflow():
# CHECK-NEXT: out: R.Tensor((2, 4), dtype="float32") = R.add(x, y)
# CHECK-NEXT: diff: R.Tensor((2, 4), dtype="float32") = R.subtract(out, targets)
# CHECK-NEXT: lv: R.Tensor((2, 4), dtype="float32") = R.multiply(diff, diff)
# CHECK-NEXT: loss: R.Tensor((), dtype="float32") = R.sum(lv)
# CHECK-NEXT: R.output(loss)
# CHECK-NEXT: return loss
