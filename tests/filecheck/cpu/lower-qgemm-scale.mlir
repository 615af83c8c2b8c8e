// RUN: aicc-opt %s -p tensor-to-linalg,fuse-elementwise,bufferize,lower-qgemm | filecheck %s
// RUN: aicc-opt %s -p tensor-to-linalg,fuse-elementwise,bufferize,lower-qgemm,linalg-to-loops -t llvm | filecheck %s --check-prefix=LLVM

// An int8 matmul of a packed (constant) B whose result only goes through float(C) * s[j] (an
// int8 conv's per-channel scale): the packed kernel applies the scale as it stores the tile
// into the epilogue's float output (`col_scale`), and the int32 C and the epilogue go. The
// scale's get_global and the output's buffer move before the kernel.
// CHECK-LABEL: func.func @scaled
// CHECK-SAME:    (%[[A:.*]]: memref<9x27xi8>, %[[OUT:.*]]: memref<9x3xf32>)
// CHECK:         %[[S:.*]] = memref.get_global @{{.*}} : memref<3xf32>
// CHECK-NOT:     xi32>
// CHECK:         aicc_cpu.qgemm %[[A]][%{{.*}}], %{{.*}}, %[[OUT]][%{{.*}}] rows %{{.*}} col_scale %[[S]] : memref<3xf32> {n = 3 : i64, k = 27 : i64, zp = 9 : i64} : memref<9x27xi8>, memref<1x14x16xi8>, memref<9x3xf32>
// CHECK-NOT:     linalg
// CHECK:         func.return
// The 3 real columns of the group of 8: a masked load of the scales, a masked store of C.
// LLVM: define internal void @"aicc.qgemm.3.27.9.p.s"(
// LLVM: call <8 x float> @"llvm.masked.load.v8f32.p0"
// LLVM: sitofp <8 x i32> %{{.*}} to <8 x float>
// LLVM: fmul <8 x float>
// LLVM: call void @"llvm.masked.store.v8f32.p0"(<8 x float>
func.func @scaled(%a: tensor<9x27xi8>) -> tensor<9x3xf32> {
  %w = aicc.constant dense<[[-128, 127, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], [-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1]]> : tensor<3x27xi8>
  %s = aicc.constant dense<[0.5, 0.25, 2.0]> : tensor<3xf32>
  %y = aicc.matmul_integer %a, %w {lhs_zero_point = 9 : i64, transpose_rhs} : tensor<9x27xi8>, tensor<3x27xi8> -> tensor<9x3xi32>
  %f = aicc.cast %y : tensor<9x3xi32> -> tensor<9x3xf32>
  %z = aicc.mul %f, %s : tensor<9x3xf32>, tensor<3xf32> -> tensor<9x3xf32>
  func.return %z : tensor<9x3xf32>
}

// Anything more after the scale (here a bias) keeps the int32 C and the fused epilogue.
// CHECK-LABEL: func.func @biased
// CHECK:         aicc_cpu.qgemm %{{.*}}[%{{.*}}], %{{.*}}, %{{.*}}[%{{.*}}] rows %{{.*}} {n = 3 : i64, k = 27 : i64, zp = 9 : i64} : memref<9x27xi8>, memref<1x14x16xi8>, memref<9x3xi32>
// CHECK:         linalg.generic
func.func @biased(%a: tensor<9x27xi8>) -> tensor<9x3xf32> {
  %w = aicc.constant dense<[[-128, 127, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], [-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1]]> : tensor<3x27xi8>
  %s = aicc.constant dense<[0.5, 0.25, 2.0]> : tensor<3xf32>
  %y = aicc.matmul_integer %a, %w {lhs_zero_point = 9 : i64, transpose_rhs} : tensor<9x27xi8>, tensor<3x27xi8> -> tensor<9x3xi32>
  %f = aicc.cast %y : tensor<9x3xi32> -> tensor<9x3xf32>
  %z = aicc.mul %f, %s : tensor<9x3xf32>, tensor<3xf32> -> tensor<9x3xf32>
  %b = aicc.add %z, %s : tensor<9x3xf32>, tensor<3xf32> -> tensor<9x3xf32>
  func.return %b : tensor<9x3xf32>
}
