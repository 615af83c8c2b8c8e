// RUN: aicc-opt %s -p fold-conv-bn --split-input-file | filecheck %s

// Conv with a bias, then batch norm as the ONNX importer emits it (x * s + t): one conv with
// weights W * s and one add of b * s + t.
// CHECK-LABEL: func.func @conv_bias_bn
// CHECK-SAME:    (%[[X:.*]]: tensor<1x2x5x5xf32>)
// CHECK-NEXT:    %[[W:.*]] = aicc.constant dense<{{\[\[\[\[}}2.000000e+00, 4.000000e+00], [6.000000e+00, 8.000000e+00]], {{\[\[}}2.000000e+00, 2.000000e+00], [2.000000e+00, 2.000000e+00]]], {{\[\[\[}}2.500000e-01, 2.500000e-01], [2.500000e-01, 2.500000e-01]], {{\[\[}}1.000000e+00, 0.000000e+00], [0.000000e+00, 1.000000e+00]]], {{\[\[\[}}-1.000000e+00, 1.000000e+00], [1.000000e+00, -1.000000e+00]], {{\[\[}}-0.000000e+00, -1.000000e+00], [-1.000000e+00, -0.000000e+00]]]]> : tensor<3x2x2x2xf32>
// CHECK-NEXT:    %[[C:.*]] = aicc.conv2d %[[X]], %[[W]] {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64}
// CHECK-NEXT:    %[[B:.*]] = aicc.constant dense<{{\[\[\[}}2.250000e+00]], {{\[\[}}1.500000e+00]], {{\[\[}}-2.250000e+00]]]> : tensor<3x1x1xf32>
// CHECK-NEXT:    %[[Y:.*]] = aicc.add %[[C]], %[[B]] : tensor<1x3x4x4xf32>, tensor<3x1x1xf32> -> tensor<1x3x4x4xf32>
// CHECK-NEXT:    func.return %[[Y]]
func.func @conv_bias_bn(%x: tensor<1x2x5x5xf32>) -> tensor<1x3x4x4xf32> {
  %w = aicc.constant dense<[[[[1.0, 2.0], [3.0, 4.0]], [[1.0, 1.0], [1.0, 1.0]]], [[[0.5, 0.5], [0.5, 0.5]], [[2.0, 0.0], [0.0, 2.0]]], [[[1.0, -1.0], [-1.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]]]> : tensor<3x2x2x2xf32>
  %b = aicc.constant dense<[[[1.0]], [[2.0]], [[3.0]]]> : tensor<3x1x1xf32>
  %s = aicc.constant dense<[[[2.0]], [[0.5]], [[-1.0]]]> : tensor<3x1x1xf32>
  %t = aicc.constant dense<[[[0.25]], [[0.5]], [[0.75]]]> : tensor<3x1x1xf32>
  %0 = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x2x5x5xf32>, tensor<3x2x2x2xf32> -> tensor<1x3x4x4xf32>
  %1 = aicc.add %0, %b : tensor<1x3x4x4xf32>, tensor<3x1x1xf32> -> tensor<1x3x4x4xf32>
  %2 = aicc.mul %1, %s : tensor<1x3x4x4xf32>, tensor<3x1x1xf32> -> tensor<1x3x4x4xf32>
  %3 = aicc.add %2, %t : tensor<1x3x4x4xf32>, tensor<3x1x1xf32> -> tensor<1x3x4x4xf32>
  func.return %3 : tensor<1x3x4x4xf32>
}

// -----
// The general case: a conv without bias scaled (constant first, 1xCx1x1), divided by a
// scalar, minus a per-channel constant. Grouped (depthwise) convs fold alike.
// CHECK-LABEL: func.func @mul_div_sub
// CHECK-SAME:    (%[[X:.*]]: tensor<1x2x3x3xf32>)
// CHECK-NEXT:    %[[W:.*]] = aicc.constant dense<{{\[\[\[\[}}1.500000e+00]]], {{\[\[\[}}-5.000000e-01]]]]> : tensor<2x1x1x1xf32>
// CHECK-NEXT:    %[[C:.*]] = aicc.conv2d %[[X]], %[[W]] {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 2 : i64}
// CHECK-NEXT:    %[[B:.*]] = aicc.constant dense<{{\[\[\[}}-1.000000e+00]], {{\[\[}}-2.000000e+00]]]> : tensor<2x1x1xf32>
// CHECK-NEXT:    %[[Y:.*]] = aicc.add %[[C]], %[[B]]
// CHECK-NEXT:    func.return %[[Y]]
func.func @mul_div_sub(%x: tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32> {
  %w = aicc.constant dense<[[[[1.0]]], [[[1.0]]]]> : tensor<2x1x1x1xf32>
  %s = aicc.constant dense<[[[[3.0]], [[-1.0]]]]> : tensor<1x2x1x1xf32>
  %d = aicc.constant dense<2.0> : tensor<f32>
  %t = aicc.constant dense<[[[1.0]], [[2.0]]]> : tensor<2x1x1xf32>
  %0 = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 2 : i64} : tensor<1x2x3x3xf32>, tensor<2x1x1x1xf32> -> tensor<1x2x3x3xf32>
  %1 = aicc.mul %s, %0 : tensor<1x2x1x1xf32>, tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %2 = aicc.div %1, %d : tensor<1x2x3x3xf32>, tensor<f32> -> tensor<1x2x3x3xf32>
  %3 = aicc.sub %2, %t : tensor<1x2x3x3xf32>, tensor<2x1x1xf32> -> tensor<1x2x3x3xf32>
  func.return %3 : tensor<1x2x3x3xf32>
}

// -----
// Not folded: the conv has a second use (it would see the scaled weights), the weights are
// not constant, the constant varies along a spatial dim, or the constant is divided by the conv.
// CHECK-LABEL: func.func @not_folded
// CHECK:         %[[W:.*]] = aicc.constant dense<2.000000e+00> : tensor<1x1x1x1xf32>
// CHECK:         aicc.conv2d %{{.*}}, %[[W]]
// CHECK-NEXT:    aicc.mul
// CHECK-NEXT:    aicc.conv2d
// CHECK-NEXT:    aicc.mul
// CHECK-NEXT:    aicc.conv2d %{{.*}}, %[[W]]
// CHECK-NEXT:    aicc.mul
// CHECK-NEXT:    aicc.conv2d %{{.*}}, %[[W]]
// CHECK-NEXT:    aicc.div
func.func @not_folded(%x: tensor<1x1x2x2xf32>, %v: tensor<1x1x1x1xf32>) -> (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) {
  %w = aicc.constant dense<2.0> : tensor<1x1x1x1xf32>
  %s = aicc.constant dense<3.0> : tensor<f32>
  %sp = aicc.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %0 = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x1x2x2xf32>, tensor<1x1x1x1xf32> -> tensor<1x1x2x2xf32>
  %1 = aicc.mul %0, %s : tensor<1x1x2x2xf32>, tensor<f32> -> tensor<1x1x2x2xf32>
  %2 = aicc.conv2d %x, %v {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x1x2x2xf32>, tensor<1x1x1x1xf32> -> tensor<1x1x2x2xf32>
  %3 = aicc.mul %2, %s : tensor<1x1x2x2xf32>, tensor<f32> -> tensor<1x1x2x2xf32>
  %4 = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x1x2x2xf32>, tensor<1x1x1x1xf32> -> tensor<1x1x2x2xf32>
  %5 = aicc.mul %4, %sp : tensor<1x1x2x2xf32>, tensor<2xf32> -> tensor<1x1x2x2xf32>
  %6 = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x1x2x2xf32>, tensor<1x1x1x1xf32> -> tensor<1x1x2x2xf32>
  %7 = aicc.div %s, %6 : tensor<f32>, tensor<1x1x2x2xf32> -> tensor<1x1x2x2xf32>
  func.return %0, %1, %3, %5, %7 : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>
}
