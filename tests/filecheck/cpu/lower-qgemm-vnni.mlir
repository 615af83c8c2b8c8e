// RUN: aicc-opt %s -p tensor-to-linalg,fuse-elementwise,bufferize,lower-qgemm | filecheck %s --check-prefix=AVX2
// RUN: aicc-opt %s -p "tensor-to-linalg,fuse-elementwise,bufferize,lower-qgemm{vnni=512}" | filecheck %s
// RUN: aicc-opt %s -p "tensor-to-linalg,fuse-elementwise,bufferize,lower-qgemm{vnni=512},linalg-to-loops" -t llvm | filecheck %s --check-prefix=LLVM
// RUN: aicc-opt %s -p "tensor-to-linalg,fuse-elementwise,bufferize,lower-qgemm{vnni=256 vnni_portable=true},linalg-to-loops" -t llvm | filecheck %s --check-prefix=PORT

// Without VNNI (the pass's default, x86-64-v3) a constant B is packed by pairs of k for vpmaddwd.
// AVX2-LABEL: func.func @vnni
// AVX2:         memref.get_global @{{.*}}_packed : memref<3x17x16xi8>
// AVX2-NOT:     vnni

// With VNNI of 512 bits (16 lanes) the constant (N = 17, K = 33) weight is packed by quads of
// k for groups of 16 columns, 2 x ceil(33 / 4) x 64 bytes, and its row sums padded to 32 are
// the colsum: the kernel computes (A + 128) * B with vpdpbusd and subtracts (zp + 128) * colsum.
// CHECK-LABEL: func.func @vnni
// CHECK-DAG:     %[[S:.*]] = memref.get_global @[[G:.*]]_colsum : memref<32xi32>
// CHECK-DAG:     %[[P:.*]] = memref.get_global @[[G]]_vnni : memref<2x9x64xi8>
// CHECK:         aicc_cpu.qgemm %{{.*}}[%{{.*}}], %[[P]], %{{.*}}[%{{.*}}] rows %{{.*}} colsum %[[S]] : memref<32xi32> {n = 17 : i64, k = 33 : i64, zp = -3 : i64, vnni = 512 : i64} : memref<7x33xi8>, memref<2x9x64xi8>, memref<7x17xi32>
// CHECK-NOT:     linalg
// LLVM: define internal void @"aicc.qgemm.17.33.-3.v512.p"(
// LLVM: xor <16 x i8> %{{.*}}, <i8 -128,
// LLVM: call <16 x i32> @"llvm.x86.avx512.vpdpbusd.512"(<16 x i32> %{{.*}}, <16 x i32> %{{.*}}, <16 x i32> %{{.*}})
// LLVM: mul <16 x i32> <i32 125,
// LLVM: sub <16 x i32>
// LLVM: call void @"llvm.masked.store.v16i32.p0"
// Portable (a CPU without VNNI, for tests): bytes widened to i32, multiplied, quads summed.
// PORT: define internal void @"aicc.qgemm.17.33.-3.v256.e.p"(
// PORT-NOT: vpdpbusd
// PORT: zext <32 x i8> %{{.*}} to <32 x i32>
// PORT: sext <32 x i8> %{{.*}} to <32 x i32>
// PORT: mul <32 x i32>
// PORT: shufflevector <32 x i32> %{{.*}}, <32 x i32> <{{.*}}>, <8 x i32> <i32 0, i32 4, i32 8, i32 12, i32 16, i32 20, i32 24, i32 28>
// PORT: shufflevector <32 x i32> %{{.*}}, <32 x i32> <{{.*}}>, <8 x i32> <i32 3, i32 7, i32 11,
func.func @vnni(%a: tensor<7x33xi8>) -> tensor<7x17xi32> {
  %w = aicc.constant dense<-100> : tensor<17x33xi8>
  %y = aicc.matmul_integer %a, %w {lhs_zero_point = -3 : i64, transpose_rhs} : tensor<7x33xi8>, tensor<17x33xi8> -> tensor<7x17xi32>
  func.return %y : tensor<7x17xi32>
}

// A conv's per-channel scale epilogue is applied as the VNNI kernel stores (col_scale, after the colsum).
// CHECK-LABEL: func.func @scaled
// CHECK:         aicc_cpu.qgemm %{{.*}}[%{{.*}}], %{{.*}}, %{{.*}}[%{{.*}}] rows %{{.*}} colsum %{{.*}} : memref<16xi32> col_scale %{{.*}} : memref<3xf32> {n = 3 : i64, k = 27 : i64, zp = 9 : i64, vnni = 512 : i64} : memref<9x27xi8>, memref<1x7x64xi8>, memref<9x3xf32>
// LLVM: define internal void @"aicc.qgemm.3.27.9.v512.p.s"(ptr captures(none) noalias %{{.*}}, ptr captures(none) noalias %{{.*}}, ptr captures(none) noalias %{{.*}}, i64 %{{.*}}, ptr %{{.*}}, ptr %{{.*}})
// LLVM: call <16 x i32> @"llvm.x86.avx512.vpdpbusd.512"
// LLVM: call <16 x float> @"llvm.masked.load.v16f32.p0"
// LLVM: sitofp <16 x i32> %{{.*}} to <16 x float>
// LLVM: call void @"llvm.masked.store.v16f32.p0"(<16 x float>
func.func @scaled(%a: tensor<9x27xi8>) -> tensor<9x3xf32> {
  %w = aicc.constant dense<-128> : tensor<3x27xi8>
  %s = aicc.constant dense<[0.5, 0.25, 2.0]> : tensor<3xf32>
  %y = aicc.matmul_integer %a, %w {lhs_zero_point = 9 : i64, transpose_rhs} : tensor<9x27xi8>, tensor<3x27xi8> -> tensor<9x3xi32>
  %f = aicc.cast %y : tensor<9x3xi32> -> tensor<9x3xf32>
  %z = aicc.mul %f, %s : tensor<9x3xf32>, tensor<3xf32> -> tensor<9x3xf32>
  func.return %z : tensor<9x3xf32>
}
