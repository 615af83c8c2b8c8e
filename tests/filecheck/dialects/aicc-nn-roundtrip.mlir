// RUN: aicc-opt %s | aicc-opt | filecheck %s
// The NN ops of aicc_nn.py print in their custom form and parse back to the same text.

// CHECK-LABEL: func.func @nn_ops
func.func @nn_ops(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %t: tensor<10x4xf32>, %ids: tensor<3xi64>) -> tensor<3x4xf32> {
  // CHECK: aicc.pad %{{.*}} {low = array<i64: 0, 0, 1, 1>, high = array<i64: 0, 0, 1, 1>, value = 0.000000e+00 : f64} : tensor<1x3x8x8xf32> -> tensor<1x3x10x10xf32>
  %p = aicc.pad %x {low = array<i64: 0, 0, 1, 1>, high = array<i64: 0, 0, 1, 1>, value = 0.0 : f64} : tensor<1x3x8x8xf32> -> tensor<1x3x10x10xf32>
  // CHECK: aicc.conv2d %{{.*}}, %{{.*}} {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x10x10xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x8x8xf32>
  %c = aicc.conv2d %p, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x10x10xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x8x8xf32>
  // CHECK: aicc.pool2d %{{.*}} {kind = "max", kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>} : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  %m = aicc.pool2d %c {kind = "max", kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>} : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  // CHECK: aicc.concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x8x4x4xf32>
  %cat = aicc.concat %m, %m {axis = 1 : i64} : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x8x4x4xf32>
  // CHECK: aicc.slice %{{.*}} {starts = array<i64: 0, 7, 0, 3>, steps = array<i64: 1, -2, 1, -1>} : tensor<1x8x4x4xf32> -> tensor<1x4x4x4xf32>
  %s = aicc.slice %cat {starts = array<i64: 0, 7, 0, 3>, steps = array<i64: 1, -2, 1, -1>} : tensor<1x8x4x4xf32> -> tensor<1x4x4x4xf32>
  // CHECK: aicc.gather %{{.*}}, %{{.*}} {axis = 0 : i64} : tensor<10x4xf32>, tensor<3xi64> -> tensor<3x4xf32>
  %g = aicc.gather %t, %ids {axis = 0 : i64} : tensor<10x4xf32>, tensor<3xi64> -> tensor<3x4xf32>
  func.return %g : tensor<3x4xf32>
}
