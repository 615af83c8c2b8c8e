// RUN: aicc-opt %s | aicc-opt | filecheck %s
// aicc_fused.attention and aicc_fused.gather print as ins(...) outs(...) {attributes} -> result,
// on tensors and memrefs.

// CHECK-LABEL: func.func @tensors
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<2x7x3xf32>
// CHECK-NEXT:    %[[O:.*]] = aicc_fused.attention ins(%q, %k, %v, %m : tensor<2x7x4xf32>, tensor<2x9x4xf32>, tensor<9x2x3xf32>, tensor<7x9xf32>) outs(%[[E]] : tensor<2x7x3xf32>) {scale = 5.000000e-01 : f64, mask = "add", v_perm = array<i64: 1, 0, 2>} -> tensor<2x7x3xf32>
// CHECK-NEXT:    func.return %[[O]]
func.func @tensors(%q: tensor<2x7x4xf32>, %k: tensor<2x9x4xf32>, %v: tensor<9x2x3xf32>, %m: tensor<7x9xf32>) -> tensor<2x7x3xf32> {
  %e = tensor.empty() : tensor<2x7x3xf32>
  %o = aicc_fused.attention ins(%q, %k, %v, %m : tensor<2x7x4xf32>, tensor<2x9x4xf32>, tensor<9x2x3xf32>, tensor<7x9xf32>) outs(%e : tensor<2x7x3xf32>) {scale = 5.000000e-01 : f64, mask = "add", v_perm = array<i64: 1, 0, 2>} -> tensor<2x7x3xf32>
  func.return %o : tensor<2x7x3xf32>
}

// CHECK-LABEL: func.func @memrefs
// CHECK-NEXT:    aicc_fused.attention ins(%q, %k, %v : memref<1x7x4xf32>, memref<3x7x4xf32>, memref<3x7x4xf32>) outs(%o : memref<3x7x4xf32>) {scale = 1.000000e+00 : f64, causal}
// CHECK-NEXT:    func.return
func.func @memrefs(%q: memref<1x7x4xf32>, %k: memref<3x7x4xf32>, %v: memref<3x7x4xf32>, %o: memref<3x7x4xf32>) {
  aicc_fused.attention ins(%q, %k, %v : memref<1x7x4xf32>, memref<3x7x4xf32>, memref<3x7x4xf32>) outs(%o : memref<3x7x4xf32>) {scale = 1.000000e+00 : f64, causal}
  func.return
}

// CHECK-LABEL: func.func @gather
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<2x3x8xf32>
// CHECK-NEXT:    %[[G:.*]] = aicc_fused.gather ins(%t, %ids : tensor<100x8xf32>, tensor<2x3xi64>) outs(%[[E]] : tensor<2x3x8xf32>) {axis = 0 : i64} -> tensor<2x3x8xf32>
// CHECK-NEXT:    aicc_fused.gather ins(%m, %i : memref<4x100xf32>, memref<5xi32>) outs(%o : memref<4x5xf32>) {axis = 1 : i64}
// CHECK-NEXT:    func.return %[[G]]
func.func @gather(%t: tensor<100x8xf32>, %ids: tensor<2x3xi64>, %m: memref<4x100xf32>, %i: memref<5xi32>, %o: memref<4x5xf32>) -> tensor<2x3x8xf32> {
  %e = tensor.empty() : tensor<2x3x8xf32>
  %g = aicc_fused.gather ins(%t, %ids : tensor<100x8xf32>, tensor<2x3xi64>) outs(%e : tensor<2x3x8xf32>) {axis = 0 : i64} -> tensor<2x3x8xf32>
  aicc_fused.gather ins(%m, %i : memref<4x100xf32>, memref<5xi32>) outs(%o : memref<4x5xf32>) {axis = 1 : i64}
  func.return %g : tensor<2x3x8xf32>
}
