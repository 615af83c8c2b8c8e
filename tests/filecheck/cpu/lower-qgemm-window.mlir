// RUN: aicc-opt %s -p tensor-to-linalg,bufferize,lower-qgemm | filecheck %s
// RUN: aicc-opt %s -p tensor-to-linalg,bufferize,lower-qgemm,linalg-to-loops -t llvm | filecheck %s --check-prefix=LLVM

// An int8 conv's im2col (a 3x3 window, stride 2 over H, dilation 2 over W, of a 16-channel
// NHWC input) read by nothing but the matmul: the kernel gathers each row from the input
// itself (`window`, a_off the row index), and the im2col copy and its buffer go.
// CHECK-LABEL: func.func @qgemm_window
// CHECK-SAME:    (%[[X:.*]]: memref<2x9x8x16xi8>
// CHECK-NOT:     linalg.generic
// CHECK:         "scf.parallel"
// CHECK:           %[[R0:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// CHECK:           aicc_cpu.qgemm %[[X]][%[[R0]]], %{{.*}}, %{{.*}}[%{{.*}}] rows %{{.*}} {n = 5 : i64, k = 144 : i64, zp = 3 : i64, window = array<i64: 4, 4, 3, 3, 2, 1, 1, 2>} : memref<2x9x8x16xi8>, memref<1x72x16xi8>, memref<32x5xi32>
// CHECK-NOT:     linalg.generic
// LLVM: define internal void @"aicc.qgemm.5.144.3.p.w4x4x3x3x2x1x1x2x9x8"(ptr captures(none) noalias %{{.*}}, ptr captures(none) noalias %{{.*}}, ptr captures(none) noalias %{{.*}}, i64 %{{.*}}, i64 %{{.*}})
// LLVM: udiv i64 %{{.*}}, 16
// LLVM: sext <16 x i8>
func.func @qgemm_window(%x: tensor<2x9x8x16xi8>) -> tensor<32x5xi32> {
  %cols = aicc.tensor_op "out[n, p, q, i, j, c] = in0[n, 2 * p + i, q + 2 * j, c]"(%x) {ranges = {n = 2 : i64, p = 4 : i64, q = 4 : i64, i = 3 : i64, j = 3 : i64, c = 16 : i64}} : (tensor<2x9x8x16xi8>) -> tensor<2x4x4x3x3x16xi8>
  %a = aicc.reshape %cols : tensor<2x4x4x3x3x16xi8> -> tensor<32x144xi8>
  %w = aicc.constant dense<-100> : tensor<5x144xi8>
  %y = aicc.matmul_integer %a, %w {lhs_zero_point = 3 : i64, transpose_rhs} : tensor<32x144xi8>, tensor<5x144xi8> -> tensor<32x5xi32>
  func.return %y : tensor<32x5xi32>
}
