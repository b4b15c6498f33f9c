# RUN: %python %s | filecheck %s
# The tutorial's backbone parses as written (batch_size from Python) and prints back in the text format.
from relax_mlir.script import ir as I, relax as R

batch_size = 64


@I.ir_module
class MLP:
    I.module_attrs({"param_num": 6, "state_num": 0})

    @R.function
    def backbone(
        x: R.Tensor((batch_size, 784), "float32"),
        w0: R.Tensor((784, 128), "float32"),
        b0: R.Tensor((128,), "float32"),
        w1: R.Tensor((128, 128), "float32"),
        b1: R.Tensor((128,), "float32"),
        w2: R.Tensor((128, 10), "float32"),
        b2: R.Tensor((10,), "float32"),
    ) -> R.Tensor((batch_size, 10), "float32"):
        with R.dataflow():
            lv0 = R.matmul(x, w0)
            lv1 = R.add(lv0, b0)
            lv2 = R.nn.relu(lv1)
            lv3 = R.matmul(lv2, w1)
            lv4 = R.add(lv3, b1)
            lv5 = R.nn.relu(lv4)
            lv6 = R.matmul(lv5, w2)
            out = R.add(lv6, b2)
            R.output(out)
        return out


MLP.show()

# CHECK: @I.ir_module
# CHECK-NEXT: class Module:
# CHECK-NEXT: I.module_attrs({"param_num": 6, "state_num": 0})
# CHECK: @R.function
# CHECK-NEXT: def backbone(
# CHECK-NEXT: x: R.Tensor((64, 784), dtype="float32"),
# CHECK-NEXT: w0: R.Tensor((784, 128), dtype="float32"),
# CHECK: b2: R.Tensor((10,), dtype="float32"),
# CHECK-NEXT: ) -> R.Tensor((64, 10), dtype="float32"):
# CHECK-NEXT: with R.dataflow():
# CHECK-NEXT: lv0: R.Tensor((64, 128), dtype="float32") = R.matmul(x, w0)
# CHECK-NEXT: lv1: R.Tensor((64, 128), dtype="float32") = R.add(lv0, b0)
# CHECK-NEXT: lv2: R.Tensor((64, 128), dtype="float32") = R.nn.relu(lv1)
# CHECK: lv6: R.Tensor((64, 10), dtype="float32") = R.matmul(lv5, w2)
# CHECK-NEXT: out: R.Tensor((64, 10), dtype="float32") = R.add(lv6, b2)
# CHECK-NEXT: R.output(out)
# CHECK-NEXT: return out
