// RUN: aicc-opt %s -p tensor-to-linalg,fuse-elementwise,bufferize,lower-qgemm | filecheck %s
// RUN: aicc-opt %s -p tensor-to-linalg,fuse-elementwise,bufferize,lower-qgemm,linalg-to-loops -t llvm | filecheck %s --check-prefix=LLVM

// A QDQ conv's requantization (quantize-matmul's ONNX Runtime epilogue): int32 bias, the
// per-channel float32 scale, relu and a quantize of scale 1 with zero point -128. The packed
// kernel does all of it as it stores the tile (`col_scale`, `col_bias`, `out_zp`, `relu`),
// writing the i8 result: neither the int32 C nor a float32 tensor is left, nor the epilogue.
// CHECK-LABEL: func.func @requantized
// CHECK-SAME:    (%[[A:.*]]: memref<9x27xi8>, %[[OUT:.*]]: memref<9x3xi8>)
// CHECK-NOT:     memref<9x3xi32>
// CHECK-NOT:     memref<9x3xf32>
// CHECK:         aicc_cpu.qgemm %[[A]][%{{.*}}], %{{.*}}, %[[OUT]][%{{.*}}] rows %{{.*}} col_scale %{{.*}} : memref<3xf32> col_bias %{{.*}} : memref<3xi32> {n = 3 : i64, k = 27 : i64, zp = 9 : i64, out_zp = -128 : i64, relu = true} : memref<9x27xi8>, memref<1x14x16xi8>, memref<9x3xi8>
// CHECK-NOT:     linalg.generic
// CHECK-NOT:     memref.get_global
// CHECK:         func.return
// The 3 real columns of the group of 8: masked loads of the scales and biases, the
// requantization in 8 lanes, a masked store of 8 bytes. The clamped floats convert straight
// to i8: an i32 conversion and a trunc let LLVM fold the trunc into an AVX-512 masked store
// (vpmovdb), which it miscompiles where the mask keeps one lane (it stores 4 bytes).
// LLVM: define internal void @"aicc.qgemm.3.27.9.p.s.b.q-128.r"(
// LLVM: call <8 x i32> @"llvm.masked.load.v8i32.p0"
// LLVM: add <8 x i32>
// LLVM: sitofp <8 x i32> %{{.*}} to <8 x float>
// LLVM: fmul <8 x float>
// LLVM: call <8 x float> @"llvm.roundeven.v8f32"
// LLVM-NOT: trunc
// LLVM: fptosi <8 x float> %{{.*}} to <8 x i8>
// LLVM-NOT: trunc
// LLVM: call void @"llvm.masked.store.v8i8.p0"(<8 x i8>
func.func @requantized(%a: tensor<9x27xi8>) -> tensor<9x3xi8> {
  %w = aicc.constant dense<[[-128, 127, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], [-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1]]> : tensor<3x27xi8>
  %b = aicc.constant dense<[7, -300, 2]> : tensor<3xi32>
  %s = aicc.constant dense<[0.5, 0.25, 2.0]> : tensor<3xf32>
  %y = aicc.matmul_integer %a, %w {lhs_zero_point = 9 : i64, transpose_rhs} : tensor<9x27xi8>, tensor<3x27xi8> -> tensor<9x3xi32>
  %yb = aicc.add %y, %b : tensor<9x3xi32>, tensor<3xi32> -> tensor<9x3xi32>
  %f = aicc.cast %yb : tensor<9x3xi32> -> tensor<9x3xf32>
  %z = aicc.mul %f, %s : tensor<9x3xf32>, tensor<3xf32> -> tensor<9x3xf32>
  %r = aicc.relu %z : tensor<9x3xf32>
  %q = aicc.quantize %r {scale = array<f64: 1.0>, zero_point = array<i64: -128>, axis = -1 : i64} : tensor<9x3xf32> -> tensor<9x3xi8>
  func.return %q : tensor<9x3xi8>
}

// A quantize of another scale (here 0.5) is not the kernel's requantization: the int32 C and
// the fused epilogue loop stay.
// CHECK-LABEL: func.func @other_scale
// CHECK:         aicc_cpu.qgemm %{{.*}}[%{{.*}}], %{{.*}}, %{{.*}}[%{{.*}}] rows %{{.*}} {n = 3 : i64, k = 27 : i64, zp = 9 : i64} : memref<9x27xi8>, memref<1x14x16xi8>, memref<9x3xi32>
// CHECK:         linalg.generic
// CHECK:           arith.divf
// CHECK:           math.roundeven
func.func @other_scale(%a: tensor<9x27xi8>) -> tensor<9x3xi8> {
  %w = aicc.constant dense<[[-128, 127, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], [-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1]]> : tensor<3x27xi8>
  %s = aicc.constant dense<[0.5, 0.25, 2.0]> : tensor<3xf32>
  %y = aicc.matmul_integer %a, %w {lhs_zero_point = 9 : i64, transpose_rhs} : tensor<9x27xi8>, tensor<3x27xi8> -> tensor<9x3xi32>
  %f = aicc.cast %y : tensor<9x3xi32> -> tensor<9x3xf32>
  %z = aicc.mul %f, %s : tensor<9x3xf32>, tensor<3xf32> -> tensor<9x3xf32>
  %q = aicc.quantize %z {scale = array<f64: 0.5>, zero_point = array<i64: 3>, axis = -1 : i64} : tensor<9x3xf32> -> tensor<9x3xi8>
  func.return %q : tensor<9x3xi8>
}
