// RUN: aicc-opt %s -p tensor-to-linalg,bufferize,lower-qgemm --split-input-file | filecheck %s
// RUN: aicc-opt %s -p tensor-to-linalg,bufferize,lower-qgemm,linalg-to-loops -t llvm --split-input-file | filecheck %s --check-prefix=LLVM

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

// -----
// A 3-channel input under a 7x7 window, stride 2, no dilation (a ResNet stem): each window
// row's 7 taps lie side by side in NHWC, one span of 21 bytes, which the kernel reads through.
// CHECK-LABEL: func.func @qgemm_window_rgb_stem
// CHECK-NOT:     linalg.generic
// CHECK:         aicc_cpu.qgemm %{{.*}} {n = 4 : i64, k = 147 : i64, zp = 0 : i64, window = array<i64: 3, 2, 7, 7, 2, 2, 1, 1>}
// LLVM: define internal void @"aicc.qgemm.4.147.0.p.w3x2x7x7x2x2x1x1x11x9"
func.func @qgemm_window_rgb_stem(%x: tensor<1x11x9x3xi8>) -> tensor<6x4xi32> {
  %cols = aicc.tensor_op "out[n, p, q, i, j, c] = in0[n, 2 * p + i, 2 * q + j, c]"(%x) {ranges = {n = 1 : i64, p = 3 : i64, q = 2 : i64, i = 7 : i64, j = 7 : i64, c = 3 : i64}} : (tensor<1x11x9x3xi8>) -> tensor<1x3x2x7x7x3xi8>
  %a = aicc.reshape %cols : tensor<1x3x2x7x7x3xi8> -> tensor<6x147xi8>
  %w = aicc.constant dense<-100> : tensor<4x147xi8>
  %y = aicc.matmul_integer %a, %w {lhs_zero_point = 0 : i64, transpose_rhs} : tensor<6x147xi8>, tensor<4x147xi8> -> tensor<6x4xi32>
  func.return %y : tensor<6x4xi32>
}

// -----
// Under a 3x3 window, 3 channels make 9-byte spans: the im2col copy stays.
// CHECK-LABEL: func.func @qgemm_rgb_3x3_keeps_im2col
// CHECK:         linalg.generic
// CHECK:         aicc_cpu.qgemm
// CHECK-NOT:     window
func.func @qgemm_rgb_3x3_keeps_im2col(%x: tensor<1x6x6x3xi8>) -> tensor<16x4xi32> {
  %cols = aicc.tensor_op "out[n, p, q, i, j, c] = in0[n, p + i, q + j, c]"(%x) {ranges = {n = 1 : i64, p = 4 : i64, q = 4 : i64, i = 3 : i64, j = 3 : i64, c = 3 : i64}} : (tensor<1x6x6x3xi8>) -> tensor<1x4x4x3x3x3xi8>
  %a = aicc.reshape %cols : tensor<1x4x4x3x3x3xi8> -> tensor<16x27xi8>
  %w = aicc.constant dense<-100> : tensor<4x27xi8>
  %y = aicc.matmul_integer %a, %w {lhs_zero_point = 0 : i64, transpose_rhs} : tensor<16x27xi8>, tensor<4x27xi8> -> tensor<16x4xi32>
  func.return %y : tensor<16x4xi32>
}
