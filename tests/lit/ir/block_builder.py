# RUN: %python %s | filecheck %s
# Modules built with the BlockBuilder print in the text format: names as TVM gives them (lv, lv1, gv),
# nested calls bound first, symbolic dims as strings, dataflow outputs listed in R.output.
from relax_mlir import BlockBuilder, TensorStructInfo, Var, op
from relax_mlir.ir import Call, const


def test(name):
    print(f"TEST: {name}")


test("mlp_layer")
x = Var("x", TensorStructInfo(("n", 784), "float32"))
w = Var("w", TensorStructInfo((784, 128), "float32"))
b = Var("b", TensorStructInfo((128,), "float32"))
bb = BlockBuilder()
with bb.function("layer", [x, w, b]):
    with bb.dataflow():
        lv = bb.emit(op.add(op.matmul(x, w), b))
        gv = bb.emit_output(op.nn.relu(lv))
    bb.emit_func_output(gv)
print(bb.get().script())
# CHECK-LABEL: TEST: mlp_layer
# CHECK: def layer(
# CHECK-NEXT: x: R.Tensor(("n", 784), dtype="float32"),
# CHECK-NEXT: w: R.Tensor((784, 128), dtype="float32"),
# CHECK-NEXT: b: R.Tensor((128,), dtype="float32"),
# CHECK-NEXT: ) -> R.Tensor(("n", 128), dtype="float32"):
# CHECK-NEXT: with R.dataflow():
# CHECK-NEXT: lv: R.Tensor(("n", 128), dtype="float32") = R.matmul(x, w)
# CHECK-NEXT: lv1: R.Tensor(("n", 128), dtype="float32") = R.add(lv, b)
# CHECK-NEXT: gv: R.Tensor(("n", 128), dtype="float32") = R.nn.relu(lv1)
# CHECK-NEXT: R.output(gv)
# CHECK-NEXT: return gv

test("reduction_and_tuple")
y = Var("y", TensorStructInfo((4, "m"), "float32"))
bb = BlockBuilder()
with bb.function("stats", [y]):
    with bb.dataflow():
        s = bb.emit(op.sum(y, axis=1, keepdims=True))
        mx = bb.emit(op.max(y, axis=[0]))
        gv = bb.emit_output((s, mx))
    bb.emit_func_output(gv)
with bb.function("flat", [y]):
    r = bb.emit(op.reshape(y, (-1,)))
    c = bb.emit(Call(bb.get_global_var("stats"), [y]))
    bb.emit_func_output((r, c))
print(bb.get().script())
# CHECK-LABEL: TEST: reduction_and_tuple
# CHECK: def stats(
# CHECK-NEXT: y: R.Tensor((4, "m"), dtype="float32"),
# CHECK-NEXT: ) -> R.Tuple(R.Tensor((4, 1), dtype="float32"), R.Tensor(("m",), dtype="float32")):
# CHECK: lv: R.Tensor((4, 1), dtype="float32") = R.sum(y, axis=(1,), keepdims=True)
# CHECK-NEXT: lv1: R.Tensor(("m",), dtype="float32") = R.max(y, axis=(0,))
# CHECK-NEXT: gv: R.Tuple(R.Tensor((4, 1), dtype="float32"), R.Tensor(("m",), dtype="float32")) = (lv, lv1)
# CHECK: def flat(
# CHECK: ) -> R.Tuple(R.Tensor(("4 * m",), dtype="float32"), R.Tuple(
# CHECK-NEXT: gv: R.Tensor(("4 * m",), dtype="float32") = R.reshape(y, (-1,))
# CHECK-NEXT: gv1: R.Tuple(R.Tensor((4, 1), dtype="float32"), R.Tensor(("m",), dtype="float32")) = cls.stats(y)
# CHECK-NEXT: return (gv, gv1)
