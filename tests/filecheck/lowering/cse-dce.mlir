// RUN: aicc-opt %s -p cse,dce --split-input-file | filecheck %s

// aicc ops are Pure: xDSL's CSE merges identical ones (same operands and attributes), and
// DCE drops those whose results are unused, constants included.
// CHECK-LABEL: func.func @merged_and_dropped
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x8xf32>)
// CHECK-NEXT:    %[[C:.*]] = aicc.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[E:.*]] = aicc.exp %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    %[[M:.*]] = aicc.matmul %[[E]], %[[W]] : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %[[S:.*]] = aicc.mul %[[M]], %[[C]]
// CHECK-NEXT:    %[[A:.*]] = aicc.add %[[S]], %[[S]]
// CHECK-NEXT:    %[[R:.*]] = aicc.reduce_sum %[[A]] {axes = array<i64: 1>, keepdims = true}
// CHECK-NEXT:    func.return %[[R]], %[[R]]
func.func @merged_and_dropped(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x1xf32>, tensor<4x1xf32>) {
  %c0 = aicc.constant dense<2.0> : tensor<f32>
  %c1 = aicc.constant dense<2.0> : tensor<f32>
  %dead_c = aicc.constant dense<5.0> : tensor<f32>
  %e0 = aicc.exp %x : tensor<4x8xf32>
  %e1 = aicc.exp %x : tensor<4x8xf32>
  %m0 = aicc.matmul %e0, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %m1 = aicc.matmul %e1, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %dead = aicc.softmax %m1 {axis = 1 : i64} : tensor<4x8xf32>
  %dead2 = aicc.mul %dead, %dead_c : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %s0 = aicc.mul %m0, %c0 : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %s1 = aicc.mul %m1, %c1 : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %a = aicc.add %s0, %s1 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %r0 = aicc.reduce_sum %a {axes = array<i64: 1>, keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %r1 = aicc.reduce_sum %a {axes = array<i64: 1>, keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  func.return %r0, %r1 : tensor<4x1xf32>, tensor<4x1xf32>
}

// -----
// Ops that differ in an attribute or an operand are not merged.
// CHECK-LABEL: func.func @kept_apart
// CHECK:         aicc.reduce_sum %{{.*}} {axes = array<i64: 0>
// CHECK-NEXT:    aicc.reduce_sum %{{.*}} {axes = array<i64: 1>
// CHECK-NEXT:    aicc.matmul %{{.*}}, %{{.*}} :
// CHECK-NEXT:    aicc.matmul %{{.*}}, %{{.*}} {transpose_rhs}
func.func @kept_apart(%x: tensor<4x4xf32>) -> (tensor<1x4xf32>, tensor<4x1xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %0 = aicc.reduce_sum %x {axes = array<i64: 0>, keepdims = true} : tensor<4x4xf32> -> tensor<1x4xf32>
  %1 = aicc.reduce_sum %x {axes = array<i64: 1>, keepdims = true} : tensor<4x4xf32> -> tensor<4x1xf32>
  %2 = aicc.matmul %x, %x : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %3 = aicc.matmul %x, %x {transpose_rhs} : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  func.return %0, %1, %2, %3 : tensor<1x4xf32>, tensor<4x1xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}
