// RUN: aicc-opt %s --split-input-file --verify-diagnostics | filecheck %s
// Each verifier error names the op and the shapes or types involved.

func.func @bad_broadcast(%x: tensor<3x4xf32>, %b: tensor<5xf32>) -> tensor<3x4xf32> {
  %0 = aicc.add %x, %b : tensor<3x4xf32>, tensor<5xf32> -> tensor<3x4xf32>
  func.return %0 : tensor<3x4xf32>
}
// CHECK: aicc.add: shapes (3, 4) and (5,) cannot be broadcast together

// -----
func.func @bad_result(%x: tensor<3x4xf32>, %b: tensor<4xf32>) -> tensor<4x4xf32> {
  %0 = aicc.mul %x, %b : tensor<3x4xf32>, tensor<4xf32> -> tensor<4x4xf32>
  func.return %0 : tensor<4x4xf32>
}
// CHECK: aicc.mul: result type tensor<4x4xf32> does not match the inferred tensor<3x4xf32>

// -----
func.func @bad_matmul(%a: tensor<3x4xf32>, %b: tensor<5x6xf32>) -> tensor<3x6xf32> {
  %0 = aicc.matmul %a, %b : tensor<3x4xf32>, tensor<5x6xf32> -> tensor<3x6xf32>
  func.return %0 : tensor<3x6xf32>
}
// CHECK: aicc.matmul: contraction dimensions differ: (3, 4) @ (5, 6) (4 != 5)

// -----
// The transpose flags swap an operand's last two dims before the shapes are checked.
func.func @bad_transposed_matmul(%a: tensor<3x4xf32>, %b: tensor<4x6xf32>) -> tensor<3x6xf32> {
  %0 = aicc.matmul %a, %b {transpose_rhs} : tensor<3x4xf32>, tensor<4x6xf32> -> tensor<3x6xf32>
  func.return %0 : tensor<3x6xf32>
}
// CHECK: aicc.matmul: contraction dimensions differ: (3, 4) @ (6, 4) (4 != 6)

// -----
func.func @bad_bias(%a: tensor<3x4xf32>, %b: tensor<4x6xf32>, %c: tensor<2x3x6xf32>) -> tensor<3x6xf32> {
  %0 = aicc.matmul %a, %b bias %c : tensor<3x4xf32>, tensor<4x6xf32>, tensor<2x3x6xf32> -> tensor<3x6xf32>
  func.return %0 : tensor<3x6xf32>
}
// CHECK: aicc.matmul: bias (2, 3, 6) does not broadcast to the result (3, 6)

// -----
func.func @bad_axes(%x: tensor<3x4xf32>) -> tensor<3xf32> {
  %0 = aicc.reduce_sum %x {axes = array<i64: 2>, keepdims = false} : tensor<3x4xf32> -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
// CHECK: aicc.reduce_sum: axes (2,) must be sorted, unique and within rank 2

// -----
func.func @bad_perm(%x: tensor<3x4xf32>) -> tensor<4x3xf32> {
  %0 = aicc.transpose %x {permutation = array<i64: 0, 0>} : tensor<3x4xf32> -> tensor<4x3xf32>
  func.return %0 : tensor<4x3xf32>
}
// CHECK: aicc.transpose: (0, 0) is not a permutation of the axes of (3, 4)

// -----
func.func @bad_reshape(%x: tensor<3x4xf32>) -> tensor<5x2xf32> {
  %0 = aicc.reshape %x : tensor<3x4xf32> -> tensor<5x2xf32>
  func.return %0 : tensor<5x2xf32>
}
// CHECK: aicc.reshape: cannot reshape (3, 4) (12 elements) into (5, 2)

// -----
func.func @bad_broadcast_to(%x: tensor<3x4xf32>) -> tensor<3x5xf32> {
  %0 = aicc.broadcast_to %x : tensor<3x4xf32> -> tensor<3x5xf32>
  func.return %0 : tensor<3x5xf32>
}
// CHECK: aicc.broadcast_to: shapes (3, 4) and (3, 5) cannot be broadcast together

// -----
func.func @bad_predicate(%x: tensor<3xf32>) -> tensor<3xi1> {
  %0 = aicc.compare "gtx", %x, %x : tensor<3xf32>, tensor<3xf32> -> tensor<3xi1>
  func.return %0 : tensor<3xi1>
}
// CHECK: aicc.compare: unknown predicate "gtx", expected one of gt, ge, lt, le, eq, ne

// -----
func.func @bad_select(%c: tensor<3xf32>, %x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = aicc.select %c, %x, %x : tensor<3xf32>, tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
// CHECK: aicc.select: condition must be a tensor of i1, got tensor<3xf32>

// -----
func.func @bad_float(%x: tensor<3xi64>) -> tensor<3xi64> {
  %0 = aicc.exp %x : tensor<3xi64>
  func.return %0 : tensor<3xi64>
}
// CHECK: aicc.exp: expected a floating-point tensor, got tensor<3xi64>

// -----
func.func @bad_bool_arithmetic(%x: tensor<3xi1>) -> tensor<3xi1> {
  %0 = aicc.add %x, %x : tensor<3xi1>, tensor<3xi1> -> tensor<3xi1>
  func.return %0 : tensor<3xi1>
}
// CHECK: aicc.add: expected a float or integer tensor, got tensor<3xi1>

// -----
func.func @bad_integer_mean(%x: tensor<3xi32>) -> tensor<i32> {
  %0 = aicc.reduce_mean %x {axes = array<i64: 0>, keepdims = false} : tensor<3xi32> -> tensor<i32>
  func.return %0 : tensor<i32>
}
// CHECK: aicc.reduce_mean: expected a floating-point tensor, got tensor<3xi32>

// -----
func.func @bad_gather_elements(%x: tensor<4x8xf32>, %ids: tensor<5x2xi64>) -> tensor<5x2xf32> {
  %0 = aicc.gather_elements %x, %ids {axis = 1 : i64} : tensor<4x8xf32>, tensor<5x2xi64> -> tensor<5x2xf32>
  func.return %0 : tensor<5x2xf32>
}
// CHECK: aicc.gather_elements: indices (5, 2) exceed data (4, 8) off axis 1

// -----
func.func @bad_argmax(%x: tensor<4x8xf32>) -> tensor<4xi32> {
  %0 = aicc.argmax %x {axis = 1 : i64, keepdims = false, select_last_index = false} : tensor<4x8xf32> -> tensor<4xi32>
  func.return %0 : tensor<4xi32>
}
// CHECK: aicc.argmax: result type tensor<4xi32> does not match the inferred tensor<4xi64>

// -----
func.func @bad_resample_index(%x: tensor<4xf32>) -> tensor<2xf32> {
  %0 = aicc.resample %x {axis = 0 : i64, indices = array<i64: 0, 4>} : tensor<4xf32> -> tensor<2xf32>
  func.return %0 : tensor<2xf32>
}
// CHECK: aicc.resample: an index is outside [0, 4)

// -----
func.func @bad_conv_transpose(%x: tensor<1x4x5x5xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x2x7x7xf32> {
  %0 = aicc.conv_transpose2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64, pads = array<i64: 0, 0>} : tensor<1x4x5x5xf32>, tensor<3x2x3x3xf32> -> tensor<1x2x7x7xf32>
  func.return %0 : tensor<1x2x7x7xf32>
}
// CHECK: aicc.conv_transpose2d: input channels 4, weight (3, 2, 3, 3) and groups 1 do not agree
