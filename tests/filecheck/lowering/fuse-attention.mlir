// RUN: aicc-opt %s -p fuse-attention,dce --split-input-file | filecheck %s

// examples/attention.py after the graph passes: q @ k^T (the transpose is a matmul flag),
// times a constant, aicc.softmax, @ v.
// CHECK-LABEL: func.func @single_head
// CHECK-SAME:    (%[[Q:.*]]: tensor<128x64xf32>, %[[K:.*]]: tensor<128x64xf32>, %[[V:.*]]: tensor<128x64xf32>)
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<128x64xf32>
// CHECK-NEXT:    %[[O:.*]] = aicc_fused.attention ins(%[[Q]], %[[K]], %[[V]] : tensor<128x64xf32>, tensor<128x64xf32>, tensor<128x64xf32>) outs(%[[E]] : tensor<128x64xf32>) {scale = 1.250000e-01 : f64} -> tensor<128x64xf32>
// CHECK-NEXT:    func.return %[[O]] : tensor<128x64xf32>
func.func @single_head(%0: tensor<128x64xf32>, %1: tensor<128x64xf32>, %2: tensor<128x64xf32>) -> tensor<128x64xf32> {
  %3 = aicc.matmul %0, %1 {transpose_rhs} : tensor<128x64xf32>, tensor<128x64xf32> -> tensor<128x128xf32>
  %4 = aicc.constant dense<1.250000e-01> : tensor<f32>
  %5 = aicc.mul %3, %4 : tensor<128x128xf32>, tensor<f32> -> tensor<128x128xf32>
  %6 = aicc.softmax %5 {axis = 1 : i64} : tensor<128x128xf32>
  %7 = aicc.matmul %6, %2 : tensor<128x128xf32>, tensor<128x64xf32> -> tensor<128x64xf32>
  func.return %7 : tensor<128x64xf32>
}

// -----
// Multi-head attention written out in NumPy: heads split by reshape + transpose, the scores
// divided by sqrt(E), a constant tril mask, softmax spelled out, heads merged by a transpose.
// The division becomes a scale of 1/sqrt(8), and the four transposes become permutations:
// q, k, v and the result stay in their (4, 2, 8) = (L, H, E) layout. The mask fills with
// -1e9, not -inf, so it stays a mask ("keep"); with -inf it would become `causal` (-inf does
// not survive xDSL's parser, so tests/test_fusion.py checks that case on traced programs).
// CHECK-LABEL: func.func @masked_heads
// CHECK-SAME:    (%[[X0:.*]]: tensor<4x16xf32>, %[[X1:.*]]: tensor<4x16xf32>, %[[X2:.*]]: tensor<4x16xf32>)
// CHECK-DAG:     %[[Q:.*]] = aicc.reshape %[[X0]] : tensor<4x16xf32> -> tensor<4x2x8xf32>
// CHECK-DAG:     %[[K:.*]] = aicc.reshape %[[X1]] : tensor<4x16xf32> -> tensor<4x2x8xf32>
// CHECK-DAG:     %[[V:.*]] = aicc.reshape %[[X2]] : tensor<4x16xf32> -> tensor<4x2x8xf32>
// CHECK-DAG:     %[[M:.*]] = aicc.constant dense<{{.*}}> : tensor<4x4xi1>
// CHECK:         %[[O:.*]] = aicc_fused.attention ins(%[[Q]], %[[K]], %[[V]], %[[M]] : tensor<4x2x8xf32>, tensor<4x2x8xf32>, tensor<4x2x8xf32>, tensor<4x4xi1>) outs(%{{.*}} : tensor<4x2x8xf32>) {scale = 0.3535533{{[0-9]*}} : f64, mask = "keep", fill = -1.000000e+09 : f64, q_perm = array<i64: 1, 0, 2>, k_perm = array<i64: 1, 0, 2>, v_perm = array<i64: 1, 0, 2>, out_perm = array<i64: 1, 0, 2>} -> tensor<4x2x8xf32>
// CHECK-NEXT:    %[[R:.*]] = aicc.reshape %[[O]] : tensor<4x2x8xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    func.return %[[R]]
// CHECK-NOT:     aicc.transpose
// CHECK-NOT:     aicc.select
func.func @masked_heads(%0: tensor<4x16xf32>, %1: tensor<4x16xf32>, %2: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %3 = aicc.reshape %0 : tensor<4x16xf32> -> tensor<4x2x8xf32>
  %4 = aicc.transpose %3 {permutation = array<i64: 1, 0, 2>} : tensor<4x2x8xf32> -> tensor<2x4x8xf32>
  %5 = aicc.reshape %1 : tensor<4x16xf32> -> tensor<4x2x8xf32>
  %6 = aicc.reshape %2 : tensor<4x16xf32> -> tensor<4x2x8xf32>
  %7 = aicc.transpose %6 {permutation = array<i64: 1, 0, 2>} : tensor<4x2x8xf32> -> tensor<2x4x8xf32>
  %8 = aicc.transpose %5 {permutation = array<i64: 1, 2, 0>} : tensor<4x2x8xf32> -> tensor<2x8x4xf32>
  %9 = aicc.matmul %4, %8 : tensor<2x4x8xf32>, tensor<2x8x4xf32> -> tensor<2x4x4xf32>
  %10 = aicc.constant dense<2.82842708> : tensor<f32>
  %11 = aicc.div %9, %10 : tensor<2x4x4xf32>, tensor<f32> -> tensor<2x4x4xf32>
  %12 = aicc.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %13 = aicc.constant dense<-1.000000e+09> : tensor<f32>
  %14 = aicc.select %12, %11, %13 : tensor<4x4xi1>, tensor<2x4x4xf32>, tensor<f32> -> tensor<2x4x4xf32>
  %15 = aicc.reduce_max %14 {axes = array<i64: 2>, keepdims = true} : tensor<2x4x4xf32> -> tensor<2x4x1xf32>
  %16 = aicc.sub %14, %15 : tensor<2x4x4xf32>, tensor<2x4x1xf32> -> tensor<2x4x4xf32>
  %17 = aicc.exp %16 : tensor<2x4x4xf32>
  %18 = aicc.reduce_sum %17 {axes = array<i64: 2>, keepdims = true} : tensor<2x4x4xf32> -> tensor<2x4x1xf32>
  %19 = aicc.div %17, %18 : tensor<2x4x4xf32>, tensor<2x4x1xf32> -> tensor<2x4x4xf32>
  %20 = aicc.matmul %19, %7 : tensor<2x4x4xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %21 = aicc.transpose %20 {permutation = array<i64: 1, 0, 2>} : tensor<2x4x8xf32> -> tensor<4x2x8xf32>
  %22 = aicc.reshape %21 : tensor<4x2x8xf32> -> tensor<4x16xf32>
  func.return %22 : tensor<4x16xf32>
}

// -----
// A mask computed at run time, added to the scores (torch's float attn_mask): an operand.
// A boolean mask that is not the causal one, with a finite fill, stays a mask too (next case).
// CHECK-LABEL: func.func @additive_mask
// CHECK:         aicc_fused.attention ins(%{{.*}}, %{{.*}}, %{{.*}}, %[[M:.*]] : tensor<2x3x8xf32>, tensor<2x5x8xf32>, tensor<2x5x4xf32>, tensor<3x5xf32>) outs(%{{.*}} : tensor<2x3x4xf32>) {scale = 5.000000e-01 : f64, mask = "add"} -> tensor<2x3x4xf32>
func.func @additive_mask(%q: tensor<2x3x8xf32>, %k: tensor<2x5x8xf32>, %v: tensor<2x5x4xf32>, %m: tensor<3x5xf32>) -> tensor<2x3x4xf32> {
  %s = aicc.matmul %q, %k {transpose_rhs} : tensor<2x3x8xf32>, tensor<2x5x8xf32> -> tensor<2x3x5xf32>
  %c = aicc.constant dense<5.000000e-01> : tensor<f32>
  %sc = aicc.mul %c, %s : tensor<f32>, tensor<2x3x5xf32> -> tensor<2x3x5xf32>
  %t = aicc.add %sc, %m : tensor<2x3x5xf32>, tensor<3x5xf32> -> tensor<2x3x5xf32>
  %p = aicc.softmax %t {axis = 2 : i64} : tensor<2x3x5xf32>
  %o = aicc.matmul %p, %v : tensor<2x3x5xf32>, tensor<2x5x4xf32> -> tensor<2x3x4xf32>
  func.return %o : tensor<2x3x4xf32>
}

// -----
// CHECK-LABEL: func.func @bool_mask
// CHECK:         aicc_fused.attention ins({{.*}}, %[[M:.*]] : {{.*}}, tensor<3x5xi1>) {{.*}} {scale = 1.000000e+00 : f64, mask = "drop", fill = -1.000000e+09 : f64}
func.func @bool_mask(%q: tensor<3x8xf32>, %k: tensor<5x8xf32>, %v: tensor<5x4xf32>, %m: tensor<3x5xi1>) -> tensor<3x4xf32> {
  %s = aicc.matmul %q, %k {transpose_rhs} : tensor<3x8xf32>, tensor<5x8xf32> -> tensor<3x5xf32>
  %f = aicc.constant dense<-1.000000e+09> : tensor<f32>
  %t = aicc.select %m, %f, %s : tensor<3x5xi1>, tensor<f32>, tensor<3x5xf32> -> tensor<3x5xf32>
  %p = aicc.softmax %t {axis = 1 : i64} : tensor<3x5xf32>
  %o = aicc.matmul %p, %v : tensor<3x5xf32>, tensor<5x4xf32> -> tensor<3x4xf32>
  func.return %o : tensor<3x4xf32>
}

// -----
// The probabilities are returned as well: fusing would recompute them, so nothing fuses.
// CHECK-LABEL: func.func @probabilities_used
// CHECK-NOT:     aicc_fused.attention
// CHECK:         aicc.softmax
func.func @probabilities_used(%q: tensor<3x8xf32>, %k: tensor<5x8xf32>, %v: tensor<5x4xf32>) -> (tensor<3x4xf32>, tensor<3x5xf32>) {
  %s = aicc.matmul %q, %k {transpose_rhs} : tensor<3x8xf32>, tensor<5x8xf32> -> tensor<3x5xf32>
  %p = aicc.softmax %s {axis = 1 : i64} : tensor<3x5xf32>
  %o = aicc.matmul %p, %v : tensor<3x5xf32>, tensor<5x4xf32> -> tensor<3x4xf32>
  func.return %o, %p : tensor<3x4xf32>, tensor<3x5xf32>
}

// -----
// Softmax over the first axis is not attention's: nothing fuses.
// CHECK-LABEL: func.func @softmax_axis0
// CHECK-NOT:     aicc_fused.attention
func.func @softmax_axis0(%q: tensor<3x8xf32>, %k: tensor<3x8xf32>, %v: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %s = aicc.matmul %q, %k {transpose_rhs} : tensor<3x8xf32>, tensor<3x8xf32> -> tensor<3x3xf32>
  %p = aicc.softmax %s {axis = 0 : i64} : tensor<3x3xf32>
  %o = aicc.matmul %p, %v : tensor<3x3xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  func.return %o : tensor<3x4xf32>
}

// -----
// torch.onnx.export's scaled_dot_product_attention: q and k^T each scaled by sqrt(scale)
// (0.5^2 = 0.25), the additive mask taken into the scores matmul by fuse-linear-bias, and
// the softmax guarded by Where(IsNaN(p), 0, p). Every row of the constant mask keeps a key,
// so p is NaN only where the scores are: the guard goes with the rest, and the transposes
// become permutations.
// CHECK-LABEL: func.func @onnx_sdpa
// CHECK-SAME:    (%[[Q:.*]]: tensor<1x4x2x8xf32>, %[[K:.*]]: tensor<1x4x2x8xf32>, %[[V:.*]]: tensor<1x2x4x8xf32>)
// CHECK:         %[[M:.*]] = aicc.constant dense<{{.*}}> : tensor<1x1x4x4xf32>
// CHECK:         aicc_fused.attention ins(%[[Q]], %[[K]], %[[V]], %[[M]] : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x4xf32>) outs(%{{.*}} : tensor<1x2x4x8xf32>) {scale = 2.500000e-01 : f64, mask = "add", q_perm = array<i64: 0, 2, 1, 3>, k_perm = array<i64: 0, 2, 1, 3>} -> tensor<1x2x4x8xf32>
// CHECK-NOT:     aicc.select
// CHECK-NOT:     aicc.compare
// CHECK-NOT:     aicc.mul
func.func @onnx_sdpa(%q: tensor<1x4x2x8xf32>, %k: tensor<1x4x2x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %qt = aicc.transpose %q {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
  %kt = aicc.transpose %k {permutation = array<i64: 0, 2, 3, 1>} : tensor<1x4x2x8xf32> -> tensor<1x2x8x4xf32>
  %c = aicc.constant dense<5.000000e-01> : tensor<f32>
  %qs = aicc.mul %qt, %c : tensor<1x2x4x8xf32>, tensor<f32> -> tensor<1x2x4x8xf32>
  %ks = aicc.mul %kt, %c : tensor<1x2x8x4xf32>, tensor<f32> -> tensor<1x2x8x4xf32>
  %m = aicc.constant dense<[[[[0.0, -1.0e9, -1.0e9, -1.0e9], [0.0, 0.0, -1.0e9, -1.0e9], [0.0, 0.0, 0.0, -1.0e9], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %s = aicc.matmul %qs, %ks bias %m : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>, tensor<1x1x4x4xf32> -> tensor<1x2x4x4xf32>
  %p = aicc.softmax %s {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %nan = aicc.compare "ne", %p, %p : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xi1>
  %z = aicc.constant dense<0.000000e+00> : tensor<f32>
  %g = aicc.select %nan, %z, %p : tensor<1x2x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %o = aicc.matmul %g, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  func.return %o : tensor<1x2x4x8xf32>
}

// -----
// The same guard with a mask known only at run time: a row the mask drops whole is NaN in
// the fused op and 0 behind the guard, so nothing is fused.
// CHECK-LABEL: func.func @nan_guard_runtime_mask
// CHECK-NOT:     aicc_fused.attention
// CHECK:         aicc.softmax
// CHECK:         aicc.compare "ne"
// CHECK:         aicc.select
func.func @nan_guard_runtime_mask(%q: tensor<2x3x8xf32>, %k: tensor<2x8x5xf32>, %v: tensor<2x5x4xf32>, %m: tensor<3x5xf32>) -> tensor<2x3x4xf32> {
  %c = aicc.constant dense<5.000000e-01> : tensor<f32>
  %qs = aicc.mul %q, %c : tensor<2x3x8xf32>, tensor<f32> -> tensor<2x3x8xf32>
  %ks = aicc.mul %k, %c : tensor<2x8x5xf32>, tensor<f32> -> tensor<2x8x5xf32>
  %s = aicc.matmul %qs, %ks : tensor<2x3x8xf32>, tensor<2x8x5xf32> -> tensor<2x3x5xf32>
  %t = aicc.add %s, %m : tensor<2x3x5xf32>, tensor<3x5xf32> -> tensor<2x3x5xf32>
  %p = aicc.softmax %t {axis = 2 : i64} : tensor<2x3x5xf32>
  %nan = aicc.compare "ne", %p, %p : tensor<2x3x5xf32>, tensor<2x3x5xf32> -> tensor<2x3x5xi1>
  %z = aicc.constant dense<0.000000e+00> : tensor<f32>
  %g = aicc.select %nan, %z, %p : tensor<2x3x5xi1>, tensor<f32>, tensor<2x3x5xf32> -> tensor<2x3x5xf32>
  %o = aicc.matmul %g, %v : tensor<2x3x5xf32>, tensor<2x5x4xf32> -> tensor<2x3x4xf32>
  func.return %o : tensor<2x3x4xf32>
}
