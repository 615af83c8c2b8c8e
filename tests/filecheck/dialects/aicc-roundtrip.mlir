// RUN: aicc-opt %s | aicc-opt | filecheck %s
// Every aicc op prints in its custom form and parses back to the same text.

// CHECK-LABEL: func.func @all_ops
func.func @all_ops(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x1xf32> {
  // CHECK: %{{.*}} = aicc.constant dense<1.500000e+00> : tensor<f32>
  %c = aicc.constant dense<1.5> : tensor<f32>
  // CHECK: aicc.add %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %0 = aicc.add %x, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  // CHECK: aicc.sub {{.*}} : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %1 = aicc.sub %0, %c : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  // CHECK: aicc.mul
  %2 = aicc.mul %1, %1 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  // CHECK: aicc.div
  %3 = aicc.div %2, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  // CHECK: aicc.maximum
  %4 = aicc.maximum %3, %c : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  // CHECK: aicc.minimum
  %5 = aicc.minimum %4, %c : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  // CHECK: aicc.pow
  %6 = aicc.pow %5, %c : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  // CHECK: aicc.neg %{{.*}} : tensor<4x8xf32>
  %7 = aicc.neg %6 : tensor<4x8xf32>
  // CHECK: aicc.abs
  %8 = aicc.abs %7 : tensor<4x8xf32>
  // CHECK: aicc.exp
  %9 = aicc.exp %8 : tensor<4x8xf32>
  // CHECK: aicc.log
  %10 = aicc.log %9 : tensor<4x8xf32>
  // CHECK: aicc.tanh
  %11 = aicc.tanh %10 : tensor<4x8xf32>
  // CHECK: aicc.sqrt
  %12 = aicc.sqrt %11 : tensor<4x8xf32>
  // CHECK: aicc.rsqrt
  %13 = aicc.rsqrt %12 : tensor<4x8xf32>
  // CHECK: aicc.relu
  %14 = aicc.relu %13 : tensor<4x8xf32>
  // CHECK: aicc.sigmoid
  %15 = aicc.sigmoid %14 : tensor<4x8xf32>
  // CHECK: aicc.gelu %{{.*}} : tensor<4x8xf32>
  %16 = aicc.gelu %15 : tensor<4x8xf32>
  // CHECK: aicc.gelu %{{.*}} {approximate = "tanh"} : tensor<4x8xf32>
  %17 = aicc.gelu %16 {approximate = "tanh"} : tensor<4x8xf32>
  // CHECK: aicc.erf
  %18 = aicc.erf %17 : tensor<4x8xf32>
  // CHECK: aicc.compare "gt", {{.*}} : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xi1>
  %m = aicc.compare "gt", %18, %c : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xi1>
  // CHECK: aicc.select {{.*}} : tensor<4x8xi1>, tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %s = aicc.select %m, %18, %c : tensor<4x8xi1>, tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  // CHECK: aicc.cast {{.*}} : tensor<4x8xi1> -> tensor<4x8xf32>
  %mf = aicc.cast %m : tensor<4x8xi1> -> tensor<4x8xf32>
  // CHECK: aicc.transpose {{.*}} {permutation = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %t = aicc.transpose %s {permutation = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  // CHECK: aicc.matmul {{.*}} : tensor<4x8xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
  %mm = aicc.matmul %mf, %t : tensor<4x8xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
  // CHECK: aicc.matmul %{{.*}}, %{{.*}} bias %{{.*}} {transpose_lhs, transpose_rhs} : tensor<8x4xf32>, tensor<4x8xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %gemm = aicc.matmul %t, %mf bias %mm {transpose_lhs, transpose_rhs} : tensor<8x4xf32>, tensor<4x8xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  // CHECK: aicc.reshape {{.*}} : tensor<4x4xf32> -> tensor<2x8xf32>
  %r = aicc.reshape %mm : tensor<4x4xf32> -> tensor<2x8xf32>
  // CHECK: aicc.broadcast_to {{.*}} : tensor<2x8xf32> -> tensor<3x2x8xf32>
  %bb = aicc.broadcast_to %r : tensor<2x8xf32> -> tensor<3x2x8xf32>
  // CHECK: aicc.softmax {{.*}} {axis = 2 : i64} : tensor<3x2x8xf32>
  %sm = aicc.softmax %bb {axis = 2 : i64} : tensor<3x2x8xf32>
  // CHECK: aicc.reduce_mean {{.*}} {axes = array<i64: 0, 2>, keepdims = false} : tensor<3x2x8xf32> -> tensor<2xf32>
  %rm = aicc.reduce_mean %sm {axes = array<i64: 0, 2>, keepdims = false} : tensor<3x2x8xf32> -> tensor<2xf32>
  // CHECK: aicc.reduce_max
  %rx = aicc.reduce_max %s {axes = array<i64: 0>, keepdims = true} : tensor<4x8xf32> -> tensor<1x8xf32>
  // CHECK: aicc.reduce_min
  %rn = aicc.reduce_min %rx {axes = array<i64: 1>, keepdims = false} : tensor<1x8xf32> -> tensor<1xf32>
  // CHECK: aicc.reduce_sum {{.*}} {axes = array<i64: 1>, keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %sum = aicc.reduce_sum %s {axes = array<i64: 1>, keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  func.return %sum : tensor<4x1xf32>
}

// Rounding and trigonometry on floats; integer arithmetic, mod / fmod and reductions on i32 / i64.
// CHECK-LABEL: func.func @math_and_integer_ops
func.func @math_and_integer_ops(%x: tensor<4x8xf32>, %i: tensor<4x8xi64>, %j: tensor<8xi64>) -> tensor<4xi64> {
  // CHECK: aicc.floor %{{.*}} : tensor<4x8xf32>
  %0 = aicc.floor %x : tensor<4x8xf32>
  // CHECK: aicc.ceil
  %1 = aicc.ceil %0 : tensor<4x8xf32>
  // CHECK: aicc.round
  %2 = aicc.round %1 : tensor<4x8xf32>
  // CHECK: aicc.sin
  %3 = aicc.sin %2 : tensor<4x8xf32>
  // CHECK: aicc.cos
  %4 = aicc.cos %3 : tensor<4x8xf32>
  // CHECK: aicc.tan
  %5 = aicc.tan %4 : tensor<4x8xf32>
  // CHECK: aicc.asin
  %6 = aicc.asin %5 : tensor<4x8xf32>
  // CHECK: aicc.acos
  %7 = aicc.acos %6 : tensor<4x8xf32>
  // CHECK: aicc.atan
  %8 = aicc.atan %7 : tensor<4x8xf32>
  // CHECK: aicc.sinh
  %9 = aicc.sinh %8 : tensor<4x8xf32>
  // CHECK: aicc.cosh
  %10 = aicc.cosh %9 : tensor<4x8xf32>
  // CHECK: aicc.mod %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %11 = aicc.mod %10, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  // CHECK: aicc.fmod %{{.*}}, %{{.*}} : tensor<4x8xi64>, tensor<8xi64> -> tensor<4x8xi64>
  %12 = aicc.fmod %i, %j : tensor<4x8xi64>, tensor<8xi64> -> tensor<4x8xi64>
  // CHECK: aicc.div %{{.*}}, %{{.*}} : tensor<4x8xi64>, tensor<8xi64> -> tensor<4x8xi64>
  %13 = aicc.div %12, %j : tensor<4x8xi64>, tensor<8xi64> -> tensor<4x8xi64>
  // CHECK: aicc.neg %{{.*}} : tensor<4x8xi64>
  %14 = aicc.neg %13 : tensor<4x8xi64>
  // CHECK: aicc.reduce_prod %{{.*}} {axes = array<i64: 1>, keepdims = false} : tensor<4x8xi64> -> tensor<4xi64>
  %15 = aicc.reduce_prod %14 {axes = array<i64: 1>, keepdims = false} : tensor<4x8xi64> -> tensor<4xi64>
  func.return %15 : tensor<4xi64>
}
