// RUN: not %mlir-opt --irdl-file=%relax-dialect --split-input-file %s 2>&1 | filecheck %s
// The IRDL definition rejects malformed relax ops: the diagnostics name the op and what is wrong.

func.func @operand_not_a_tensor(%x: memref<4xf32>) {
  // CHECK: error: expected base type 'builtin.tensor' but got 'builtin.memref'
  %0 = "relax.exp"(%x) : (memref<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @wrong_arity(%x: tensor<4xf32>) {
  // CHECK: error: op expects exactly 2 operands, but got 1
  %0 = "relax.add"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @missing_attribute(%x: tensor<4xf32>) {
  // CHECK: error: 'relax.sum' op attribute "keepdims" is expected but not provided
  %0 = "relax.sum"(%x) {axis} : (tensor<4xf32>) -> tensor<f32>
  return
}

// -----

func.func @attribute_of_the_wrong_kind(%x: tensor<4xf32>) {
  // CHECK: error: expected base attribute 'builtin.float' but got 'builtin.string'
  %0 = "relax.nn_leakyrelu"(%x) {alpha = "big"} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @unknown_op(%x: tensor<4xf32>) {
  // relax.nn.relu is spelled relax.nn_relu in the dialect (IRDL names allow no dots).
  // CHECK: error: custom op 'relax.nn.relu' is unknown
  %0 = relax.nn.relu %x : tensor<4xf32>
  return
}
