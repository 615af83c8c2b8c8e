// RUN: aicc-opt %s --split-input-file --verify-diagnostics | filecheck %s
// aicc_fused.attention checks that q, k, v, the mask and the result compose.

func.func @head_dims(%q: tensor<7x4xf32>, %k: tensor<9x5xf32>, %v: tensor<9x3xf32>) -> tensor<7x3xf32> {
  %e = tensor.empty() : tensor<7x3xf32>
  %o = aicc_fused.attention ins(%q, %k, %v : tensor<7x4xf32>, tensor<9x5xf32>, tensor<9x3xf32>) outs(%e : tensor<7x3xf32>) {scale = 1.0 : f64} -> tensor<7x3xf32>
  func.return %o : tensor<7x3xf32>
}
// CHECK: aicc_fused.attention: shapes q [7, 4], k [9, 5], v [9, 3], out [7, 3] do not compose

// -----
func.func @batch(%q: tensor<2x7x4xf32>, %k: tensor<3x9x4xf32>, %v: tensor<3x9x3xf32>) -> tensor<3x7x3xf32> {
  %e = tensor.empty() : tensor<3x7x3xf32>
  %o = aicc_fused.attention ins(%q, %k, %v : tensor<2x7x4xf32>, tensor<3x9x4xf32>, tensor<3x9x3xf32>) outs(%e : tensor<3x7x3xf32>) {scale = 1.0 : f64} -> tensor<3x7x3xf32>
  func.return %o : tensor<3x7x3xf32>
}
// CHECK: aicc_fused.attention: batch dims of q [2, 7, 4], k [3, 9, 4], v [3, 9, 3] and the mask do not broadcast to the result [3, 7, 3]

// -----
func.func @mask_kind(%q: tensor<7x4xf32>, %k: tensor<9x4xf32>, %v: tensor<9x3xf32>, %m: tensor<7x9xf32>) -> tensor<7x3xf32> {
  %e = tensor.empty() : tensor<7x3xf32>
  %o = aicc_fused.attention ins(%q, %k, %v, %m : tensor<7x4xf32>, tensor<9x4xf32>, tensor<9x3xf32>, tensor<7x9xf32>) outs(%e : tensor<7x3xf32>) {scale = 1.0 : f64} -> tensor<7x3xf32>
  func.return %o : tensor<7x3xf32>
}
// CHECK: aicc_fused.attention: a mask operand and a mask kind go together

// -----
func.func @perm(%q: tensor<7x4xf32>, %k: tensor<9x4xf32>, %v: tensor<9x3xf32>) -> tensor<7x3xf32> {
  %e = tensor.empty() : tensor<7x3xf32>
  %o = aicc_fused.attention ins(%q, %k, %v : tensor<7x4xf32>, tensor<9x4xf32>, tensor<9x3xf32>) outs(%e : tensor<7x3xf32>) {scale = 1.0 : f64, q_perm = array<i64: 0, 0>} -> tensor<7x3xf32>
  func.return %o : tensor<7x3xf32>
}
// CHECK: aicc_fused.attention: q_perm is not a permutation

// -----
func.func @gather_shape(%t: tensor<100x8xf32>, %ids: tensor<3xi64>) -> tensor<3x9xf32> {
  %e = tensor.empty() : tensor<3x9xf32>
  %g = aicc_fused.gather ins(%t, %ids : tensor<100x8xf32>, tensor<3xi64>) outs(%e : tensor<3x9xf32>) {axis = 0 : i64} -> tensor<3x9xf32>
  func.return %g : tensor<3x9xf32>
}
// CHECK: aicc_fused.gather: data [100, 8] gathered on axis 0 by indices [3] is not the result [3, 9]

// -----
func.func @gather_float_indices(%t: tensor<100x8xf32>, %ids: tensor<3xf32>) -> tensor<3x8xf32> {
  %e = tensor.empty() : tensor<3x8xf32>
  %g = aicc_fused.gather ins(%t, %ids : tensor<100x8xf32>, tensor<3xf32>) outs(%e : tensor<3x8xf32>) {axis = 0 : i64} -> tensor<3x8xf32>
  func.return %g : tensor<3x8xf32>
}
// CHECK: aicc_fused.gather: indices must be integers, got tensor<3xf32>

// -----
func.func @gather_elements_shape(%t: tensor<100x8xf32>, %ids: tensor<3x9xi64>) -> tensor<3x9xf32> {
  %e = tensor.empty() : tensor<3x9xf32>
  %g = aicc_fused.gather_elements ins(%t, %ids : tensor<100x8xf32>, tensor<3x9xi64>) outs(%e : tensor<3x9xf32>) {axis = 0 : i64} -> tensor<3x9xf32>
  func.return %g : tensor<3x9xf32>
}
// CHECK: aicc_fused.gather_elements: data [100, 8] gathered on axis 0 by indices [3, 9] is not the result [3, 9]
