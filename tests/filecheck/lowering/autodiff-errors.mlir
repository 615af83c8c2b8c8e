// RUN: not aicc-opt %s -p 'autodiff{wrt=0}' 2>&1 | filecheck %s
// RUN: not aicc-opt %s -p 'autodiff{wrt=2}' 2>&1 | filecheck %s --check-prefix=RANGE

// An op with no gradient rule on the path is an error naming it, in one line.
// CHECK: aicc-opt: error: autodiff: no gradient rule for aicc.conv_transpose2d
// RANGE: aicc-opt: error: autodiff: argument 2 out of range: the function has 2 arguments
func.func @no_rule(%x: tensor<1x2x3x3xf32>, %w: tensor<2x1x2x2xf32>) -> tensor<f32> {
  %0 = aicc.conv_transpose2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64, pads = array<i64: 0, 0>} : tensor<1x2x3x3xf32>, tensor<2x1x2x2xf32> -> tensor<1x1x4x4xf32>
  %1 = aicc.reduce_sum %0 {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : tensor<1x1x4x4xf32> -> tensor<f32>
  func.return %1 : tensor<f32>
}
