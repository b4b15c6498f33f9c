# RUN: %python %s | filecheck %s
# BindParams bakes named parameters into constants (the others stay), UpdateParamStructInfo makes the batch
# symbolic and re-infers every binding, RemovePurityChecking marks the pure function and leaves the impure one.
import numpy as np

from relax_mlir import TensorStructInfo, transform
from relax_mlir.script import from_source

mod = from_source("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((8, 2), "float32"), b: R.Tensor((2,), "float32")):
        y = R.add(x, b)
        z = R.sum(y, axis=[0])
        return z

    @R.function(pure=False)
    def log(x: R.Tensor((8, 2), "float32")):
        s = R.call_packed("print", x)
        return x
""")
print(transform.BindParams("main", {"b": np.array([1.0, 2.0], "float32")})(mod).script())
# CHECK-LABEL: def main(x: R.Tensor((8, 2), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
# CHECK-NEXT:    y: R.Tensor((8, 2), dtype="float32") = R.add(x, R.const([1.0, 2.0], "float32"))

batch = lambda v: TensorStructInfo(("n", 2), "float32") if v.name_hint == "x" else None  # noqa: E731
print(transform.UpdateParamStructInfo(batch)(mod).script())
# CHECK-LABEL: def main(
# CHECK-NEXT:    x: R.Tensor(("n", 2), dtype="float32"),
# CHECK-NEXT:    b: R.Tensor((2,), dtype="float32"),
# CHECK:         y: R.Tensor(("n", 2), dtype="float32") = R.add(x, b)
# CHECK-NEXT:    z: R.Tensor((2,), dtype="float32") = R.sum(y, axis=(0,))
# CHECK-LABEL: def log(x: R.Tensor(("n", 2), dtype="float32")) -> R.Tensor(("n", 2), dtype="float32"):

print(transform.RemovePurityChecking()(mod).script())
# CHECK-LABEL: def main(
# CHECK:         R.func_attr({"relax.force_pure": True})
# CHECK-LABEL: @R.function(pure=False)
# CHECK-NEXT:  def log(
# CHECK-NOT:     relax.force_pure
# CHECK:         R.call_packed("print", x)
