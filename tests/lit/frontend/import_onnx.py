# RUN: %python %s %t.onnx
# RUN: %relax-mlir import %t.onnx -o %t.relax --params %t.npz 2>&1 | filecheck %s --check-prefix=SUMMARY
# RUN: filecheck %s < %t.relax
# RUN: %relax-mlir print %t.relax | filecheck %s
# RUN: %python -c "import numpy; print(sorted(numpy.load('%t.npz')))" | filecheck %s --check-prefix=NPZ
# RUN: not %relax-mlir import %s 2>&1 | filecheck %s --check-prefix=SUFFIX
# RUN: echo garbage > %t.bad.onnx
# RUN: not %relax-mlir import %t.bad.onnx 2>&1 | filecheck %s --check-prefix=GARBAGE
"""`relax-mlir import`: an ONNX model (Conv -> BatchNormalization -> Relu -> Flatten -> Gemm, opset 17) printed
in the text format; the printed module parses back (`relax-mlir print`). The model is built here with onnx.helper."""

# SUMMARY: main takes 1 input(s), 5 parameter(s), 2 state(s); wrote {{.*}}.relax

# CHECK: I.module_attrs({"param_num": 5, "state_num": 2})
# CHECK: def main(
# CHECK-NEXT: x: R.Tensor((2, 1, 4, 4), dtype="float32"),
# CHECK-NEXT: conv_weight: R.Tensor((3, 1, 3, 3), dtype="float32"),
# CHECK-NEXT: bn_scale: R.Tensor((3,), dtype="float32"),
# CHECK-NEXT: bn_bias: R.Tensor((3,), dtype="float32"),
# CHECK-NEXT: fc_weight: R.Tensor((4, 48), dtype="float32"),
# CHECK-NEXT: fc_bias: R.Tensor((4,), dtype="float32"),
# CHECK-NEXT: bn_mean: R.Tensor((3,), dtype="float32"),
# CHECK-NEXT: bn_var: R.Tensor((3,), dtype="float32"),
# CHECK: R.nn.conv2d(x, conv_weight, padding=(1, 1, 1, 1)
# CHECK: R.nn.batch_norm({{.*}}, bn_scale, bn_bias, bn_mean, bn_var, {{.*}}momentum=0.1
# CHECK: R.nn.relu(
# CHECK: R.reshape({{.*}}, (2, 48))
# CHECK: R.permute_dims(fc_weight, axes=(1, 0))
# CHECK: R.matmul(
# CHECK: R.add({{.*}}, fc_bias)
# CHECK: return (

# NPZ: ['param/bn_bias', 'param/bn_scale', 'param/conv_weight', 'param/fc_bias', 'param/fc_weight', 'state/bn_mean', 'state/bn_var']

# SUFFIX: relax-mlir import: error: {{.*}}import_onnx.py: expected a .onnx model or a .pt2 exported program (torch.export.save)
# GARBAGE: relax-mlir import: error: from_onnx: {{.*}}.bad.onnx: not an ONNX model
# GARBAGE-NOT: Traceback

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)


def init(name, *shape):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


nodes = [helper.make_node("Conv", ["x", "conv.weight"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
         helper.make_node("BatchNormalization", ["c", "bn.scale", "bn.bias", "bn.mean", "bn.var"], ["b"],
                          momentum=0.9),
         helper.make_node("Relu", ["b"], ["r"]), helper.make_node("Flatten", ["r"], ["f"]),
         helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["y"], transB=1)]
var = numpy_helper.from_array(rng.uniform(0.5, 1.5, 3).astype(np.float32), "bn.var")
graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                          [init("conv.weight", 3, 1, 3, 3), init("bn.scale", 3), init("bn.bias", 3),
                           init("bn.mean", 3), var, init("fc.weight", 4, 48), init("fc.bias", 4)])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
