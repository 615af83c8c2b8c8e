// RUN: aicc-opt %s | aicc-opt | filecheck %s
// The quantization ops print and parse back unchanged.

// CHECK-LABEL: func.func @quant
// CHECK:         %[[Q:.*]] = aicc.quantize %{{.*}} {scale = array<f64: 5.000000e-02>, zero_point = array<i64: -3>, axis = -1 : i64} : tensor<4x8xf32> -> tensor<4x8xi8>
// CHECK:         aicc.dequantize %{{.*}} {scale = array<f64: 1.000000e-01, 2.000000e-01>, zero_point = array<i64: 0, 1>, axis = 0 : i64} : tensor<2x8xi8> -> tensor<2x8xf32>
// CHECK:         aicc.matmul_integer %[[Q]], %{{.*}} {lhs_zero_point = -3 : i64, transpose_rhs} : tensor<4x8xi8>, tensor<2x8xi8> -> tensor<4x2xi32>
func.func @quant(%x: tensor<4x8xf32>, %w: tensor<2x8xi8>) -> (tensor<2x8xf32>, tensor<4x2xi32>) {
  %q = aicc.quantize %x {scale = array<f64: 0.05>, zero_point = array<i64: -3>, axis = -1 : i64} : tensor<4x8xf32> -> tensor<4x8xi8>
  %d = aicc.dequantize %w {scale = array<f64: 0.1, 0.2>, zero_point = array<i64: 0, 1>, axis = 0 : i64} : tensor<2x8xi8> -> tensor<2x8xf32>
  %a = aicc.matmul_integer %q, %w {lhs_zero_point = -3 : i64, transpose_rhs} : tensor<4x8xi8>, tensor<2x8xi8> -> tensor<4x2xi32>
  func.return %d, %a : tensor<2x8xf32>, tensor<4x2xi32>
}

// CHECK-LABEL: func.func @dynamic
// CHECK:         %[[P:.*]] = aicc.dynamic_quant_params %{{.*}} : tensor<2x4x8xf32> -> tensor<2xf32>
// CHECK:         aicc.dynamic_matmul_integer %{{.*}}, %{{.*}}, %[[P]] : tensor<2x4x8xf32>, tensor<3x8xi8>, tensor<2xf32> -> tensor<2x4x3xi32>
func.func @dynamic(%x: tensor<2x4x8xf32>, %w: tensor<3x8xi8>) -> tensor<2x4x3xi32> {
  %p = aicc.dynamic_quant_params %x : tensor<2x4x8xf32> -> tensor<2xf32>
  %a = aicc.dynamic_matmul_integer %x, %w, %p : tensor<2x4x8xf32>, tensor<3x8xi8>, tensor<2xf32> -> tensor<2x4x3xi32>
  func.return %a : tensor<2x4x3xi32>
}
