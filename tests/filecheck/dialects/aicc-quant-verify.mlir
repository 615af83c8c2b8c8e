// RUN: aicc-opt %s --split-input-file --verify-diagnostics | filecheck %s
// Each verifier error of the quantization ops names the op and what is wrong.

func.func @scales(%x: tensor<4x8xf32>) -> tensor<4x8xi8> {
  %q = aicc.quantize %x {scale = array<f64: 0.05, 0.1>, zero_point = array<i64: 0, 0>, axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xi8>
  func.return %q : tensor<4x8xi8>
}
// CHECK: aicc.quantize: 8 scale(s) and zero point(s) expected for axis 1 of (4, 8), got 2 and 2

// -----
func.func @zero_point(%x: tensor<4xf32>) -> tensor<4xi8> {
  %q = aicc.quantize %x {scale = array<f64: 0.05>, zero_point = array<i64: 200>, axis = -1 : i64} : tensor<4xf32> -> tensor<4xi8>
  func.return %q : tensor<4xi8>
}
// CHECK: aicc.quantize: zero points must be within [-128, 127], got [200]

// -----
func.func @scale_sign(%q: tensor<4xi8>) -> tensor<4xf32> {
  %d = aicc.dequantize %q {scale = array<f64: -1.0>, zero_point = array<i64: 0>, axis = -1 : i64} : tensor<4xi8> -> tensor<4xf32>
  func.return %d : tensor<4xf32>
}
// CHECK: aicc.dequantize: scales must be positive and finite, got [-1.0]

// -----
func.func @dequant_float(%x: tensor<4xf32>) -> tensor<4xf32> {
  %d = aicc.dequantize %x {scale = array<f64: 1.0>, zero_point = array<i64: 0>, axis = -1 : i64} : tensor<4xf32> -> tensor<4xf32>
  func.return %d : tensor<4xf32>
}
// CHECK: aicc.dequantize: expected a tensor of i8, got tensor<4xf32>

// -----
func.func @mm(%a: tensor<4x8xi8>, %b: tensor<9x2xi8>) -> tensor<4x2xi32> {
  %y = aicc.matmul_integer %a, %b {lhs_zero_point = 0 : i64} : tensor<4x8xi8>, tensor<9x2xi8> -> tensor<4x2xi32>
  func.return %y : tensor<4x2xi32>
}
// CHECK: aicc.matmul_integer: contraction dimensions differ: (4, 8) @ (9, 2) (8 != 9)

// -----
func.func @mm_float(%a: tensor<4x8xf32>, %b: tensor<8x2xi8>) -> tensor<4x2xi32> {
  %y = aicc.matmul_integer %a, %b {lhs_zero_point = 0 : i64} : tensor<4x8xf32>, tensor<8x2xi8> -> tensor<4x2xi32>
  func.return %y : tensor<4x2xi32>
}
// CHECK: aicc.matmul_integer: expected i8 operands, got tensor<4x8xf32>

// -----
func.func @params_int(%x: tensor<4x8xi8>) -> tensor<2xf32> {
  %p = aicc.dynamic_quant_params %x : tensor<4x8xi8> -> tensor<2xf32>
  func.return %p : tensor<2xf32>
}
// CHECK: aicc.dynamic_quant_params: expected a tensor of f32, got tensor<4x8xi8>

// -----
func.func @params_result(%x: tensor<4x8xf32>) -> tensor<3xf32> {
  %p = aicc.dynamic_quant_params %x : tensor<4x8xf32> -> tensor<3xf32>
  func.return %p : tensor<3xf32>
}
// CHECK: aicc.dynamic_quant_params: result type tensor<3xf32> does not match the inferred tensor<2xf32>

// -----
func.func @dyn_lhs(%x: tensor<4x8xi8>, %w: tensor<3x8xi8>, %p: tensor<2xf32>) -> tensor<4x3xi32> {
  %a = aicc.dynamic_matmul_integer %x, %w, %p : tensor<4x8xi8>, tensor<3x8xi8>, tensor<2xf32> -> tensor<4x3xi32>
  func.return %a : tensor<4x3xi32>
}
// CHECK: aicc.dynamic_matmul_integer: expected an f32 lhs and an i8 rhs, got tensor<4x8xi8> and tensor<3x8xi8>

// -----
func.func @dyn_params(%x: tensor<4x8xf32>, %w: tensor<3x8xi8>, %p: tensor<3xf32>) -> tensor<4x3xi32> {
  %a = aicc.dynamic_matmul_integer %x, %w, %p : tensor<4x8xf32>, tensor<3x8xi8>, tensor<3xf32> -> tensor<4x3xi32>
  func.return %a : tensor<4x3xi32>
}
// CHECK: aicc.dynamic_matmul_integer: params must be a tensor<2xf32>, got tensor<3xf32>

// -----
func.func @dyn_k(%x: tensor<4x8xf32>, %w: tensor<3x7xi8>, %p: tensor<2xf32>) -> tensor<4x3xi32> {
  %a = aicc.dynamic_matmul_integer %x, %w, %p : tensor<4x8xf32>, tensor<3x7xi8>, tensor<2xf32> -> tensor<4x3xi32>
  func.return %a : tensor<4x3xi32>
}
// CHECK: aicc.dynamic_matmul_integer: contraction dimensions differ
