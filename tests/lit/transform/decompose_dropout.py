# RUN: %python %s | filecheck %s
# Dropout in training draws a mask from the key parameter MutateOpsForTraining adds (rng_key; a second dropout
# gets a derived key, rng_key + 0x9E3779B97F4A7C15 as an int64); in inference it is the identity.
from relax_mlir import transform
from relax_mlir.script import ir as I, relax as R
from relax_mlir.testing import roundtrip


@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 4), "float32")):
        with R.dataflow():
            d1 = R.nn.dropout(x, rate=0.5)
            h = d1[0]
            d2 = R.nn.dropout(h, rate=0.2)
            y = d2[0]
            R.output(y)
        return y


print("TEST: mutate")
print(roundtrip(transform.MutateOpsForTraining()(Module))["main"].script("main"))
print("TEST: training")
print(roundtrip(transform.DecomposeOpsForTraining()(Module))["main"].script("main"))
print("TEST: inference")
print(roundtrip(transform.DecomposeOpsForInference()(Module))["main"].script("main"))

# CHECK-LABEL: TEST: mutate
# CHECK: def main(
# CHECK-NEXT: x: R.Tensor((2, 4), dtype="float32"),
# CHECK-NEXT: rng_key: R.Tensor((), dtype="int64"),
# CHECK-NEXT: ) -> R.Tensor((2, 4), dtype="float32"):
# CHECK-NEXT: with R.dataflow():
# CHECK-NEXT: d1: R.Tuple(R.Tensor((2, 4), dtype="float32"), R.Tensor((2, 4), dtype="float32")) = R.nn.dropout(x, rng_key)
# CHECK-NEXT: h: R.Tensor((2, 4), dtype="float32") = d1[0]
# CHECK-NEXT: lv: R.Tensor((), dtype="int64") = R.add(rng_key, R.const(-7046029254386353131, "int64"))
# CHECK-NEXT: d2: R.Tuple(R.Tensor((2, 4), dtype="float32"), R.Tensor((2, 4), dtype="float32")) = R.nn.dropout(h, lv, rate=0.2)
# CHECK-NEXT: y: R.Tensor((2, 4), dtype="float32") = d2[0]
# CHECK-NEXT: R.output(y)
# CHECK-NEXT: return y

# CHECK-LABEL: TEST: training
# CHECK: def main(
# CHECK-NEXT: x: R.Tensor((2, 4), dtype="float32"),
# CHECK-NEXT: rng_key: R.Tensor((), dtype="int64"),
# CHECK-NEXT: ) -> R.Tensor((2, 4), dtype="float32"):
# CHECK-NEXT: with R.dataflow():
# CHECK-NEXT: lv: R.Tensor((2, 4), dtype="float32") = R.random.uniform(rng_key, (2, 4))
# CHECK-NEXT: lv_1: R.Tensor((2, 4), dtype="bool") = R.greater_equal(lv, R.const(0.5, "float32"))
# CHECK-NEXT: lv_2: R.Tensor((2, 4), dtype="float32") = R.where(lv_1, R.const(2.0, "float32"), R.const(0.0, "float32"))
# CHECK-NEXT: lv_3: R.Tensor((2, 4), dtype="float32") = R.multiply(x, lv_2)
# CHECK-NEXT: d1: R.Tuple(R.Tensor((2, 4), dtype="float32"), R.Tensor((2, 4), dtype="float32")) = (lv_3, lv_2)
# CHECK-NEXT: h: R.Tensor((2, 4), dtype="float32") = d1[0]
# CHECK-NEXT: lv_4: R.Tensor((), dtype="int64") = R.add(rng_key, R.const(-7046029254386353131, "int64"))
# CHECK-NEXT: lv_5: R.Tensor((2, 4), dtype="float32") = R.random.uniform(lv_4, (2, 4))
# CHECK-NEXT: lv_6: R.Tensor((2, 4), dtype="bool") = R.greater_equal(lv_5, R.const(0.2, "float32"))
# CHECK-NEXT: lv_7: R.Tensor((2, 4), dtype="float32") = R.where(lv_6, R.const(1.25, "float32"), R.const(0.0, "float32"))
# CHECK-NEXT: lv_8: R.Tensor((2, 4), dtype="float32") = R.multiply(h, lv_7)
# CHECK-NEXT: d2: R.Tuple(R.Tensor((2, 4), dtype="float32"), R.Tensor((2, 4), dtype="float32")) = (lv_8, lv_7)
# CHECK-NEXT: y: R.Tensor((2, 4), dtype="float32") = d2[0]
# CHECK-NEXT: R.output(y)
# CHECK-NEXT: return y

# CHECK-LABEL: TEST: inference
# CHECK: def main(x: R.Tensor((2, 4), dtype="float32")) -> R.Tensor((2, 4), dtype="float32"):
# CHECK-NEXT: with R.dataflow():
# CHECK-NEXT: lv: R.Tensor((2, 4), dtype="float32") = R.ones_like(x)
# CHECK-NEXT: d1: R.Tuple(R.Tensor((2, 4), dtype="float32"), R.Tensor((2, 4), dtype="float32")) = (x, lv)
# CHECK-NEXT: h: R.Tensor((2, 4), dtype="float32") = d1[0]
# CHECK-NEXT: lv_1: R.Tensor((2, 4), dtype="float32") = R.ones_like(h)
# CHECK-NEXT: d2: R.Tuple(R.Tensor((2, 4), dtype="float32"), R.Tensor((2, 4), dtype="float32")) = (h, lv_1)
# CHECK-NEXT: y: R.Tensor((2, 4), dtype="float32") = d2[0]
# CHECK-NEXT: R.output(y)
# CHECK-NEXT: return y
