// RUN: aicc-opt %s -p 'autodiff{wrt=0,1}' --split-input-file | filecheck %s

// The forward ops stay; the backward ops follow them in reverse order, and the function
// returns the value, then one gradient per argument in wrt. tanh's rule reuses the forward
// result (1 - y^2); the matmul's gradients are matmuls with transpose flags.
// CHECK-LABEL: func.func @loss
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x3xf32>) -> (tensor<f32>, tensor<4x8xf32>, tensor<8x3xf32>)
// CHECK-NEXT:    %[[MM:.*]] = aicc.matmul %[[X]], %[[W]]
// CHECK-NEXT:    %[[T:.*]] = aicc.tanh %[[MM]]
// CHECK-NEXT:    %[[S:.*]] = aicc.reduce_sum %[[T]]
// CHECK-NEXT:    %[[ONE:.*]] = aicc.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[R:.*]] = aicc.reshape %[[ONE]] : tensor<f32> -> tensor<1x1xf32>
// CHECK-NEXT:    %[[G:.*]] = aicc.broadcast_to %[[R]] : tensor<1x1xf32> -> tensor<4x3xf32>
// CHECK-NEXT:    %[[ONE2:.*]] = aicc.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[SQ:.*]] = aicc.mul %[[T]], %[[T]]
// CHECK-NEXT:    %[[D:.*]] = aicc.sub %[[ONE2]], %[[SQ]]
// CHECK-NEXT:    %[[GT:.*]] = aicc.mul %[[G]], %[[D]]
// CHECK-NEXT:    %[[DX:.*]] = aicc.matmul %[[GT]], %[[W]] {transpose_rhs} : tensor<4x3xf32>, tensor<8x3xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %[[DW:.*]] = aicc.matmul %[[X]], %[[GT]] {transpose_lhs} : tensor<4x8xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
// CHECK-NEXT:    func.return %[[S]], %[[DX]], %[[DW]] : tensor<f32>, tensor<4x8xf32>, tensor<8x3xf32>
func.func @loss(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>) -> tensor<f32> {
  %0 = aicc.matmul %x, %w : tensor<4x8xf32>, tensor<8x3xf32> -> tensor<4x3xf32>
  %1 = aicc.tanh %0 : tensor<4x3xf32>
  %2 = aicc.reduce_sum %1 {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x3xf32> -> tensor<f32>
  func.return %2 : tensor<f32>
}

// -----
// A broadcast operand's gradient is summed over the broadcast dims and reshaped back; the
// condition of a select gets none, and an argument used twice sums its two contributions.
// CHECK-LABEL: func.func @bcast
// CHECK-SAME:    (%[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<3xf32>) -> (tensor<f32>, tensor<2x3xf32>, tensor<3xf32>)
// CHECK:         %[[SEL:.*]] = aicc.select
// CHECK:         %[[SUM:.*]] = aicc.reduce_sum %{{.*}} {axes = array<i64: 0>, keepdims = true} : tensor<2x3xf32> -> tensor<1x3xf32>
// CHECK-NEXT:    %[[DB:.*]] = aicc.reshape %[[SUM]] : tensor<1x3xf32> -> tensor<3xf32>
// CHECK:         %[[DA:.*]] = aicc.add
// CHECK-NEXT:    func.return %{{.*}}, %[[DA]], %[[DB]] : tensor<f32>, tensor<2x3xf32>, tensor<3xf32>
func.func @bcast(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<f32> {
  %0 = aicc.add %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %z = aicc.constant dense<0.0> : tensor<f32>
  %c = aicc.compare "gt", %a, %z : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
  %1 = aicc.select %c, %0, %a : tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %2 = aicc.reduce_sum %1 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  func.return %2 : tensor<f32>
}
