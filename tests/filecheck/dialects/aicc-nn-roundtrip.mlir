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

// CHECK-LABEL: func.func @index_ops
func.func @index_ops(%x: tensor<4x8xf32>, %ids: tensor<4x2xi64>, %n: tensor<7xi32>) -> (tensor<4x2xf32>, tensor<4x1xi64>, tensor<8xi64>, tensor<4x8xf32>, tensor<7xi32>) {
  // CHECK: aicc.gather_elements %{{.*}}, %{{.*}} {axis = 1 : i64} : tensor<4x8xf32>, tensor<4x2xi64> -> tensor<4x2xf32>
  %e = aicc.gather_elements %x, %ids {axis = 1 : i64} : tensor<4x8xf32>, tensor<4x2xi64> -> tensor<4x2xf32>
  // CHECK: aicc.argmax %{{.*}} {axis = 1 : i64, keepdims = true, select_last_index = false} : tensor<4x8xf32> -> tensor<4x1xi64>
  %a = aicc.argmax %x {axis = 1 : i64, keepdims = true, select_last_index = false} : tensor<4x8xf32> -> tensor<4x1xi64>
  // CHECK: aicc.argmin %{{.*}} {axis = 0 : i64, keepdims = false, select_last_index = true} : tensor<4x8xf32> -> tensor<8xi64>
  %b = aicc.argmin %x {axis = 0 : i64, keepdims = false, select_last_index = true} : tensor<4x8xf32> -> tensor<8xi64>
  // CHECK: aicc.cumsum %{{.*}} {axis = 1 : i64, exclusive = false, reverse = true} : tensor<4x8xf32>
  %s = aicc.cumsum %x {axis = 1 : i64, exclusive = false, reverse = true} : tensor<4x8xf32>
  // CHECK: aicc.cumsum %{{.*}} {axis = 0 : i64, exclusive = true, reverse = false} : tensor<7xi32>
  %t = aicc.cumsum %n {axis = 0 : i64, exclusive = true, reverse = false} : tensor<7xi32>
  func.return %e, %a, %b, %s, %t : tensor<4x2xf32>, tensor<4x1xi64>, tensor<8xi64>, tensor<4x8xf32>, tensor<7xi32>
}

// CHECK-LABEL: func.func @resample
func.func @resample(%x: tensor<2x4xf32>, %n: tensor<3xi64>) -> (tensor<2x8xf32>, tensor<5xi64>) {
  // CHECK: aicc.resample %{{.*}} {axis = 1 : i64, indices = array<i64: 0, 0, 0, 1, 0, 1, 1, 2, 1, 2, 2, 3, 2, 3, 3, 3>, weights = array<f64: 1.000000e+00, 0.000000e+00, 7.500000e-01, 2.500000e-01, 2.500000e-01, 7.500000e-01, 7.500000e-01, 2.500000e-01, 2.500000e-01, 7.500000e-01, 7.500000e-01, 2.500000e-01, 2.500000e-01, 7.500000e-01, 1.000000e+00, 0.000000e+00>} : tensor<2x4xf32> -> tensor<2x8xf32>
  %r = aicc.resample %x {axis = 1 : i64, indices = array<i64: 0, 0, 0, 1, 0, 1, 1, 2, 1, 2, 2, 3, 2, 3, 3, 3>, weights = array<f64: 1.0, 0.0, 0.75, 0.25, 0.25, 0.75, 0.75, 0.25, 0.25, 0.75, 0.75, 0.25, 0.25, 0.75, 1.0, 0.0>} : tensor<2x4xf32> -> tensor<2x8xf32>
  // CHECK: aicc.resample %{{.*}} {axis = 0 : i64, indices = array<i64: 2, 1, 0, 1, 2>} : tensor<3xi64> -> tensor<5xi64>
  %p = aicc.resample %n {axis = 0 : i64, indices = array<i64: 2, 1, 0, 1, 2>} : tensor<3xi64> -> tensor<5xi64>
  func.return %r, %p : tensor<2x8xf32>, tensor<5xi64>
}

// CHECK-LABEL: func.func @conv_transpose
func.func @conv_transpose(%x: tensor<1x4x5x7xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x6x12x14xf32> {
  // CHECK: aicc.conv_transpose2d %{{.*}}, %{{.*}} {strides = array<i64: 2, 2>, dilations = array<i64: 2, 1>, groups = 2 : i64, pads = array<i64: 1, -2>} : tensor<1x4x5x7xf32>, tensor<4x3x3x3xf32> -> tensor<1x6x12x14xf32>
  %0 = aicc.conv_transpose2d %x, %w {strides = array<i64: 2, 2>, dilations = array<i64: 2, 1>, groups = 2 : i64, pads = array<i64: 1, -2>} : tensor<1x4x5x7xf32>, tensor<4x3x3x3xf32> -> tensor<1x6x12x14xf32>
  func.return %0 : tensor<1x6x12x14xf32>
}
