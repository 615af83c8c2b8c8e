// RUN: aicc-opt %s -p quantize-matmul --split-input-file | filecheck %s
// RUN: aicc-opt %s -p quantize-matmul,fold-constants,tensor-to-linalg,fuse-elementwise,canonicalize,cse --split-input-file | filecheck %s --check-prefix=LINALG

// A matmul of a per-tensor activation and a per-column weight, both dequantized: an integer
// matmul of the int8 values (the weight transposed to (N, K), K contiguous), then one scale
// per column (sa * s_n) and the bias, in float.
// CHECK-LABEL: func.func @linear
// CHECK:         %[[Q:.*]] = aicc.quantize %{{.*}} {scale = array<f64: 5.000000e-02>, zero_point = array<i64: -3>, axis = -1 : i64}
// CHECK:         %[[T:.*]] = aicc.transpose %{{.*}} {permutation = array<i64: 1, 0>} : tensor<8x3xi8> -> tensor<3x8xi8>
// CHECK-NEXT:    %[[I:.*]] = aicc.matmul_integer %[[Q]], %[[T]] {lhs_zero_point = -3 : i64, transpose_rhs, aicc.quantized = "matmul"} : tensor<4x8xi8>, tensor<3x8xi8> -> tensor<4x3xi32>
// CHECK-NEXT:    %[[F:.*]] = aicc.cast %[[I]] : tensor<4x3xi32> -> tensor<4x3xf32>
// CHECK-NEXT:    %[[S:.*]] = aicc.constant dense<[5.000000e-03, 1.000000e-02, 1.500000e-02]> : tensor<3xf32>
// CHECK-NEXT:    %[[Y:.*]] = aicc.mul %[[F]], %[[S]]
// CHECK-NEXT:    %[[Z:.*]] = aicc.add %[[Y]], %{{.*}}
// CHECK-NEXT:    func.return %[[Z]]
// In linalg: the quantize loop, the i32 dot products (reduction innermost, sext of both
// operands) and one fused epilogue loop (sitofp, scale, bias).
// LINALG-LABEL: func.func @linear
// LINALG:         math.roundeven
// LINALG:         arith.fptosi %{{.*}} : f32 to i8
// LINALG:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
// LINALG:           arith.extsi %{{.*}} : i8 to i32
// LINALG:           arith.muli
// LINALG:           arith.addi
// LINALG:         linalg.generic
// LINALG:           arith.sitofp %{{.*}} : i32 to f32
// LINALG-NEXT:      arith.mulf
// LINALG-NEXT:      arith.addf
func.func @linear(%x: tensor<4x8xf32>, %b: tensor<3xf32>) -> tensor<4x3xf32> {
  %q = aicc.quantize %x {scale = array<f64: 0.05>, zero_point = array<i64: -3>, axis = -1 : i64} : tensor<4x8xf32> -> tensor<4x8xi8>
  %a = aicc.dequantize %q {scale = array<f64: 0.05>, zero_point = array<i64: -3>, axis = -1 : i64} : tensor<4x8xi8> -> tensor<4x8xf32>
  %qw = aicc.constant dense<[[1, -2, 3], [4, 5, -6], [7, 8, 9], [-10, 11, 12], [13, -14, 15], [16, 17, -18], [19, 20, 21], [-22, 23, 127]]> : tensor<8x3xi8>
  %w = aicc.dequantize %qw {scale = array<f64: 0.1, 0.2, 0.3>, zero_point = array<i64: 0, 0, 0>, axis = 1 : i64} : tensor<8x3xi8> -> tensor<8x3xf32>
  %y = aicc.matmul %a, %w : tensor<4x8xf32>, tensor<8x3xf32> -> tensor<4x3xf32>
  %z = aicc.add %y, %b : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  func.return %z : tensor<4x3xf32>
}

// -----
// Weights with a zero point, or an activation quantized per channel, stay in float.
// CHECK-LABEL: func.func @unchanged
// CHECK-NOT:     aicc.matmul_integer
// CHECK:         aicc.matmul
func.func @unchanged(%q: tensor<2x4xi8>, %qw: tensor<4x3xi8>) -> tensor<2x3xf32> {
  %a = aicc.dequantize %q {scale = array<f64: 0.1, 0.2>, zero_point = array<i64: 0, 0>, axis = 0 : i64} : tensor<2x4xi8> -> tensor<2x4xf32>
  %w = aicc.dequantize %qw {scale = array<f64: 0.5>, zero_point = array<i64: 3>, axis = -1 : i64} : tensor<4x3xi8> -> tensor<4x3xf32>
  %y = aicc.matmul %a, %w : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}

// -----
// An ONNX Gemm's transB: the dequantized (N, K) weight, transposed. The int8 weight is
// already (N, K): no transpose is left.
// CHECK-LABEL: func.func @gemm_trans_b
// CHECK-NOT:     aicc.transpose
// CHECK:         aicc.matmul_integer %{{.*}}, %{{.*}} {lhs_zero_point = 11 : i64, transpose_rhs, aicc.quantized = "matmul"} : tensor<2x4xi8>, tensor<3x4xi8> -> tensor<2x3xi32>
// CHECK-NOT:     aicc.transpose
func.func @gemm_trans_b(%q: tensor<2x4xi8>, %qw: tensor<3x4xi8>) -> tensor<2x3xf32> {
  %a = aicc.dequantize %q {scale = array<f64: 0.1>, zero_point = array<i64: 11>, axis = -1 : i64} : tensor<2x4xi8> -> tensor<2x4xf32>
  %w = aicc.dequantize %qw {scale = array<f64: 0.5, 0.25, 0.125>, zero_point = array<i64: 0, 0, 0>, axis = 0 : i64} : tensor<3x4xi8> -> tensor<3x4xf32>
  %t = aicc.transpose %w {permutation = array<i64: 1, 0>} : tensor<3x4xf32> -> tensor<4x3xf32>
  %y = aicc.matmul %a, %t : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}

// -----
// The next layer's quantize after a constant bias and a relu (np.maximum(h, 0.0)) becomes the
// requantization that the GEMM kernel stores (RequantizeInTheGemm): the bias in int32 units of
// m = sa * s_n (rint([0.01, -0.02, 0.03] / [0.005, 0.01, 0.015]) = [2, -2, 2]), then the rescale
// m / s (s = 0.1, in float32), relu, and a quantize of scale 1 with the next layer's zero point.
// CHECK-LABEL: func.func @requantize
// CHECK:         %[[I:.*]] = aicc.matmul_integer
// CHECK-NEXT:    %[[B:.*]] = aicc.constant dense<[2, -2, 2]> : tensor<3xi32>
// CHECK-NEXT:    %[[A:.*]] = aicc.add %[[I]], %[[B]] : tensor<4x3xi32>, tensor<3xi32> -> tensor<4x3xi32>
// CHECK-NEXT:    %[[F:.*]] = aicc.cast %[[A]] : tensor<4x3xi32> -> tensor<4x3xf32>
// CHECK-NEXT:    %[[S:.*]] = aicc.constant dense<[0.049999997, 0.099999994, 0.149999991]> : tensor<3xf32>
// CHECK-NEXT:    %[[M:.*]] = aicc.mul %[[F]], %[[S]]
// CHECK-NEXT:    %[[R:.*]] = aicc.relu %[[M]]
// CHECK-NEXT:    %[[Q:.*]] = aicc.quantize %[[R]] {scale = array<f64: 1.000000e+00>, zero_point = array<i64: -128>, axis = -1 : i64} : tensor<4x3xf32> -> tensor<4x3xi8>
// CHECK-NEXT:    func.return %[[Q]]
// CHECK-NOT:     aicc.maximum
func.func @requantize(%x: tensor<4x8xf32>) -> tensor<4x3xi8> {
  %q = aicc.quantize %x {scale = array<f64: 0.05>, zero_point = array<i64: -3>, axis = -1 : i64} : tensor<4x8xf32> -> tensor<4x8xi8>
  %a = aicc.dequantize %q {scale = array<f64: 0.05>, zero_point = array<i64: -3>, axis = -1 : i64} : tensor<4x8xi8> -> tensor<4x8xf32>
  %qw = aicc.constant dense<[[1, -2, 3], [4, 5, -6], [7, 8, 9], [-10, 11, 12], [13, -14, 15], [16, 17, -18], [19, 20, 21], [-22, 23, 127]]> : tensor<8x3xi8>
  %w = aicc.dequantize %qw {scale = array<f64: 0.1, 0.2, 0.3>, zero_point = array<i64: 0, 0, 0>, axis = 1 : i64} : tensor<8x3xi8> -> tensor<8x3xf32>
  %y = aicc.matmul %a, %w : tensor<4x8xf32>, tensor<8x3xf32> -> tensor<4x3xf32>
  %b = aicc.constant dense<[0.01, -0.02, 0.03]> : tensor<3xf32>
  %z = aicc.add %y, %b : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  %zero = aicc.constant dense<0.0> : tensor<f32>
  %r = aicc.maximum %z, %zero : tensor<4x3xf32>, tensor<f32> -> tensor<4x3xf32>
  %n = aicc.quantize %r {scale = array<f64: 0.1>, zero_point = array<i64: -128>, axis = -1 : i64} : tensor<4x3xf32> -> tensor<4x3xi8>
  func.return %n : tensor<4x3xi8>
}
