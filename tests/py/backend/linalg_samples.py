"""Hand-written linalg-on-tensors modules (the shape of what the relax -> linalg lowering emits)."""

MATMUL_TEMPLATE = """
func.func @main(%x: tensor<{m}x{k}xf32>, %w: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{m}x{n}xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %y = linalg.matmul ins(%x, %w : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>)
                     outs(%acc : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  return %y : tensor<{m}x{n}xf32>
}}
"""
MATMUL = MATMUL_TEMPLATE.format(m=64, k=784, n=128)

# Uneven tiles (100 = 12*8+4, 70 = 2*32+6), N < 32, M < 8, a transposed operand (X^T @ G, the weight
# gradient of a dense layer), and a batch_matmul in f64.
MATMUL_SHAPES = """
func.func @uneven(%a: tensor<100x50xf32>, %b: tensor<50x70xf32>) -> tensor<100x70xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<100x70xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<100x70xf32>) -> tensor<100x70xf32>
  %r = linalg.matmul ins(%a, %b : tensor<100x50xf32>, tensor<50x70xf32>) outs(%f : tensor<100x70xf32>) -> tensor<100x70xf32>
  return %r : tensor<100x70xf32>
}
func.func @small(%a: tensor<3x5xf32>, %b: tensor<5x10xf32>) -> tensor<3x10xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x10xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<3x10xf32>) -> tensor<3x10xf32>
  %r = linalg.matmul ins(%a, %b : tensor<3x5xf32>, tensor<5x10xf32>) outs(%f : tensor<3x10xf32>) -> tensor<3x10xf32>
  return %r : tensor<3x10xf32>
}
func.func @xt_g(%x: tensor<64x784xf32>, %g: tensor<64x128xf32>) -> tensor<784x128xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<784x128xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<784x128xf32>) -> tensor<784x128xf32>
  %r = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>,
                                      affine_map<(m, n, k) -> (m, n)>]
       ins(%x, %g : tensor<64x784xf32>, tensor<64x128xf32>) outs(%f : tensor<784x128xf32>) -> tensor<784x128xf32>
  return %r : tensor<784x128xf32>
}
func.func @batched(%a: tensor<3x20x16xf64>, %b: tensor<3x16x40xf64>) -> tensor<3x20x40xf64> {
  %z = arith.constant 0.0 : f64
  %e = tensor.empty() : tensor<3x20x40xf64>
  %f = linalg.fill ins(%z : f64) outs(%e : tensor<3x20x40xf64>) -> tensor<3x20x40xf64>
  %r = linalg.batch_matmul ins(%a, %b : tensor<3x20x16xf64>, tensor<3x16x40xf64>) outs(%f : tensor<3x20x40xf64>) -> tensor<3x20x40xf64>
  return %r : tensor<3x20x40xf64>
}
"""

BIAS_RELU = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @main(%x: tensor<64x128xf32>, %b: tensor<128xf32>) -> tensor<64x128xf32> {
  %e = tensor.empty() : tensor<64x128xf32>
  %a = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
       ins(%x, %b : tensor<64x128xf32>, tensor<128xf32>) outs(%e : tensor<64x128xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %s = arith.addf %i, %j : f32
    linalg.yield %s : f32
  } -> tensor<64x128xf32>
  %z = arith.constant 0.0 : f32
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
       ins(%a : tensor<64x128xf32>) outs(%e : tensor<64x128xf32>) {
  ^bb0(%i: f32, %o: f32):
    %s = arith.maximumf %i, %z : f32
    linalg.yield %s : f32
  } -> tensor<64x128xf32>
  return %r : tensor<64x128xf32>
}
"""

# Row softmax: a max-reduction, exp, a sum-reduction, a division (two reductions, broadcasts back).
SOFTMAX = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d0)>
func.func @main(%x: tensor<64x10xf32>) -> tensor<64x10xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<64xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<64xf32>) -> tensor<64xf32>
  %m = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["parallel", "reduction"]}
       ins(%x : tensor<64x10xf32>) outs(%m0 : tensor<64xf32>) {
  ^bb0(%i: f32, %acc: f32):
    %r = arith.maximumf %i, %acc : f32
    linalg.yield %r : f32
  } -> tensor<64xf32>
  %e2 = tensor.empty() : tensor<64x10xf32>
  %ex = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
       ins(%x, %m : tensor<64x10xf32>, tensor<64xf32>) outs(%e2 : tensor<64x10xf32>) {
  ^bb0(%i: f32, %mx: f32, %o: f32):
    %d = arith.subf %i, %mx : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<64x10xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<64xf32>) -> tensor<64xf32>
  %s = linalg.reduce ins(%ex : tensor<64x10xf32>) outs(%s0 : tensor<64xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  %y = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
       ins(%ex, %s : tensor<64x10xf32>, tensor<64xf32>) outs(%e2 : tensor<64x10xf32>) {
  ^bb0(%i: f32, %t: f32, %o: f32):
    %r = arith.divf %i, %t : f32
    linalg.yield %r : f32
  } -> tensor<64x10xf32>
  return %y : tensor<64x10xf32>
}
"""

# Two results, one of them 0-d (mean squared error and the residual), and a 0-d parameter (a scale).
TWO_RESULTS = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#all = affine_map<(d0, d1) -> ()>
func.func @main(%p: tensor<8x16xf32>, %t: tensor<8x16xf32>, %scale: tensor<f32>) -> (tensor<8x16xf32>, tensor<f32>) {
  %e = tensor.empty() : tensor<8x16xf32>
  %d = linalg.sub ins(%p, %t : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<f32>
  %s0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %s = linalg.generic {indexing_maps = [#id, #all, #all], iterator_types = ["reduction", "reduction"]}
       ins(%d, %scale : tensor<8x16xf32>, tensor<f32>) outs(%s0 : tensor<f32>) {
  ^bb0(%i: f32, %k: f32, %acc: f32):
    %sq = arith.mulf %i, %i : f32
    %w = arith.mulf %sq, %k : f32
    %r = arith.addf %w, %acc : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %d, %s : tensor<8x16xf32>, tensor<f32>
}
"""

# Dynamic batch: y = x * w (broadcast row), and the total as a 0-d result.
DYNAMIC = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @main(%x: tensor<?x4xf32>, %w: tensor<4xf32>) -> (tensor<?x4xf32>, tensor<f32>) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%n) : tensor<?x4xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
       ins(%x, %w : tensor<?x4xf32>, tensor<4xf32>) outs(%e : tensor<?x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<?x4xf32>
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<f32>
  %s0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %s = linalg.reduce ins(%y : tensor<?x4xf32>) outs(%s0 : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  return %y, %s : tensor<?x4xf32>, tensor<f32>
}
"""

# A dense layer on a dynamic batch (the matmul schedule peels the remainder rows).
DYNAMIC_MATMUL = """
func.func @main(%x: tensor<?x128xf32>, %w: tensor<128x10xf32>) -> tensor<?x10xf32> {
  %z = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x128xf32>
  %e = tensor.empty(%n) : tensor<?x10xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x10xf32>) -> tensor<?x10xf32>
  %r = linalg.matmul ins(%x, %w : tensor<?x128xf32>, tensor<128x10xf32>) outs(%f : tensor<?x10xf32>) -> tensor<?x10xf32>
  return %r : tensor<?x10xf32>
}
"""

# A result whose size is an expression of the symbols: [a; b] with a: n, b: m -> n + m.
CONCAT = """
func.func @main(%a: tensor<?xf32>, %b: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?xf32>
  %m = tensor.dim %b, %c0 : tensor<?xf32>
  %t = arith.addi %n, %m : index
  %e = tensor.empty(%t) : tensor<?xf32>
  %r0 = tensor.insert_slice %a into %e[0] [%n] [1] : tensor<?xf32> into tensor<?xf32>
  %r1 = tensor.insert_slice %b into %r0[%n] [%m] [1] : tensor<?xf32> into tensor<?xf32>
  return %r1 : tensor<?xf32>
}
"""

# One function per dtype family: booleans (i1, one byte each), f16/bf16, small and wide integers.
DTYPES = """
#id = affine_map<(d0) -> (d0)>
func.func @less_xor(%x: tensor<8xf32>, %y: tensor<8xf32>, %m: tensor<8xi1>) -> (tensor<8xi1>, tensor<8xi1>) {
  %e = tensor.empty() : tensor<8xi1>
  %lt = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
        ins(%x, %y : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xi1>) {
  ^bb0(%a: f32, %b: f32, %o: i1):
    %c = arith.cmpf olt, %a, %b : f32
    linalg.yield %c : i1
  } -> tensor<8xi1>
  %x2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
        ins(%lt, %m : tensor<8xi1>, tensor<8xi1>) outs(%e : tensor<8xi1>) {
  ^bb0(%a: i1, %b: i1, %o: i1):
    %c = arith.xori %a, %b : i1
    linalg.yield %c : i1
  } -> tensor<8xi1>
  return %lt, %x2 : tensor<8xi1>, tensor<8xi1>
}
func.func @half(%x: tensor<5xf16>, %y: tensor<5xbf16>) -> (tensor<5xf16>, tensor<5xbf16>) {
  %e = tensor.empty() : tensor<5xf16>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%x : tensor<5xf16>) outs(%e : tensor<5xf16>) {
  ^bb0(%a: f16, %o: f16):
    %c = arith.mulf %a, %a : f16
    %d = math.exp %c : f16
    linalg.yield %d : f16
  } -> tensor<5xf16>
  %e2 = tensor.empty() : tensor<5xbf16>
  %r2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%y : tensor<5xbf16>) outs(%e2 : tensor<5xbf16>) {
  ^bb0(%a: bf16, %o: bf16):
    %c = arith.addf %a, %a : bf16
    %d = math.tanh %c : bf16
    linalg.yield %d : bf16
  } -> tensor<5xbf16>
  return %r, %r2 : tensor<5xf16>, tensor<5xbf16>
}
func.func @ints(%a: tensor<6xi8>, %b: tensor<6xi16>, %c: tensor<6xi32>, %d: tensor<6xi64>)
    -> (tensor<6xi8>, tensor<6xi16>, tensor<6xi32>, tensor<6xi64>) {
  %e8 = tensor.empty() : tensor<6xi8>
  %r8 = linalg.add ins(%a, %a : tensor<6xi8>, tensor<6xi8>) outs(%e8 : tensor<6xi8>) -> tensor<6xi8>
  %e16 = tensor.empty() : tensor<6xi16>
  %r16 = linalg.mul ins(%b, %b : tensor<6xi16>, tensor<6xi16>) outs(%e16 : tensor<6xi16>) -> tensor<6xi16>
  %e32 = tensor.empty() : tensor<6xi32>
  %r32 = linalg.sub ins(%c, %c : tensor<6xi32>, tensor<6xi32>) outs(%e32 : tensor<6xi32>) -> tensor<6xi32>
  %e64 = tensor.empty() : tensor<6xi64>
  %r64 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%d : tensor<6xi64>) outs(%e64 : tensor<6xi64>) {
  ^bb0(%v: i64, %o: i64):
    %three = arith.constant 3 : i64
    %q = arith.floordivsi %v, %three : i64
    linalg.yield %q : i64
  } -> tensor<6xi64>
  return %r8, %r16, %r32, %r64 : tensor<6xi8>, tensor<6xi16>, tensor<6xi32>, tensor<6xi64>
}
func.func @bytes(%a: tensor<6xi8>) -> tensor<6xi8> {
  %e = tensor.empty() : tensor<6xi8>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%a : tensor<6xi8>) outs(%e : tensor<6xi8>) {
  ^bb0(%v: i8, %o: i8):
    %two = arith.constant 2 : i8
    %q = arith.divui %v, %two : i8
    linalg.yield %q : i8
  } -> tensor<6xi8>
  return %r : tensor<6xi8>
}
func.func @double(%x: tensor<3xf64>) -> tensor<3xf64> {
  %e = tensor.empty() : tensor<3xf64>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%x : tensor<3xf64>) outs(%e : tensor<3xf64>) {
  ^bb0(%v: f64, %o: f64):
    %s = math.sqrt %v : f64
    linalg.yield %s : f64
  } -> tensor<3xf64>
  return %r : tensor<3xf64>
}
func.func @mask_const(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>) {
  %m = arith.constant dense<[true, false, true, true]> : tensor<4xi1>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
       ins(%x, %m : tensor<4xf32>, tensor<4xi1>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: i1, %o: f32):
    %c = arith.select %b, %a, %z : f32
    linalg.yield %c : f32
  } -> tensor<4xf32>
  return %r, %m : tensor<4xf32>, tensor<4xi1>
}
"""

# Writes its input's buffer in place unless the runtime marks arguments read-only.
IN_PLACE = """
#id = affine_map<(d0) -> (d0)>
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel"]} outs(%x : tensor<4xf32>) {
  ^bb0(%o: f32):
    %c = arith.addf %o, %o : f32
    linalg.yield %c : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""

# 1 MiB fresh result per call (for the leak test).
ONE_MEGABYTE = """
func.func @main(%x: tensor<256x1024xf32>) -> tensor<256x1024xf32> {
  %e = tensor.empty() : tensor<256x1024xf32>
  %r = linalg.add ins(%x, %x : tensor<256x1024xf32>, tensor<256x1024xf32>) outs(%e : tensor<256x1024xf32>) -> tensor<256x1024xf32>
  return %r : tensor<256x1024xf32>
}
"""
