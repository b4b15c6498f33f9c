# RUN: %python %s | filecheck %s
# The two examples of TVM's Gradient API reference give exactly the documented adjoint functions.
from relax_mlir import transform
from relax_mlir.script import ir as I, relax as R
from relax_mlir.testing import roundtrip


@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 3), dtype="float32"), y: R.Tensor((3, 3), dtype="float32")) -> R.Tensor((), dtype="float32"):
        with R.dataflow():
            lv1: R.Tensor((3, 3), dtype="float32") = R.add(x, y)
            lv2: R.Tensor((), dtype="float32") = R.sum(lv1, axis=None, keepdims=False)
            R.output(lv2)
        return lv2


print("TEST: single_output")
after = roundtrip(transform.Gradient("main")(Module))
print(after["main_adjoint"].script("main_adjoint"))
# CHECK-LABEL: TEST: single_output
# CHECK: def main_adjoint(
# CHECK-NEXT: x: R.Tensor((3, 3), dtype="float32"),
# CHECK-NEXT: y: R.Tensor((3, 3), dtype="float32"),
# CHECK-NEXT: ) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3, 3), dtype="float32"), R.Tensor((3, 3), dtype="float32"))):
# CHECK-NEXT: with R.dataflow():
# CHECK-NEXT: lv1: R.Tensor((3, 3), dtype="float32") = R.add(x, y)
# CHECK-NEXT: lv2: R.Tensor((), dtype="float32") = R.sum(lv1)
# CHECK-NEXT: lv2_adjoint: R.Tensor((), dtype="float32") = R.ones((), "float32")
# CHECK-NEXT: lv1_adjoint: R.Tensor((3, 3), dtype="float32") = R.broadcast_to(lv2_adjoint, (3, 3))
# CHECK-NEXT: x_adjoint: R.Tensor((3, 3), dtype="float32") = lv1_adjoint
# CHECK-NEXT: y_adjoint: R.Tensor((3, 3), dtype="float32") = lv1_adjoint
# CHECK-NEXT: R.output(lv2, x_adjoint, y_adjoint)
# CHECK-NEXT: return (lv2, (x_adjoint, y_adjoint))


@I.ir_module
class Module2:
    @R.function
    def main(x: R.Tensor((3, 3), dtype="float32"), y: R.Tensor((3, 3), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tensor((), dtype="float32")):
        with R.dataflow():
            lv1: R.Tensor((), dtype="float32") = R.sum(x, axis=None, keepdims=False)
            lv2: R.Tensor((), dtype="float32") = R.sum(y, axis=None, keepdims=False)
            R.output(lv1, lv2)
        return (lv1, lv2)


print("TEST: target_index")
after = roundtrip(transform.Gradient("main", target_index=1)(Module2))
print(after["main_adjoint"].script("main_adjoint"))
# CHECK-LABEL: TEST: target_index
# CHECK: ) -> R.Tuple(R.Tuple(R.Tensor((), dtype="float32"), R.Tensor((), dtype="float32")), R.Tuple(R.Tensor((3, 3), dtype="float32"), R.Tensor((3, 3), dtype="float32"))):
# CHECK-NEXT: with R.dataflow():
# CHECK-NEXT: lv1: R.Tensor((), dtype="float32") = R.sum(x)
# CHECK-NEXT: lv2: R.Tensor((), dtype="float32") = R.sum(y)
# CHECK-NEXT: lv2_adjoint: R.Tensor((), dtype="float32") = R.ones((), "float32")
# CHECK-NEXT: x_adjoint: R.Tensor((3, 3), dtype="float32") = R.zeros((3, 3), "float32")
# CHECK-NEXT: y_adjoint: R.Tensor((3, 3), dtype="float32") = R.broadcast_to(lv2_adjoint, (3, 3))
# CHECK-NEXT: R.output(lv1, lv2, x_adjoint, y_adjoint)
# CHECK-NEXT: return ((lv1, lv2), (x_adjoint, y_adjoint))
