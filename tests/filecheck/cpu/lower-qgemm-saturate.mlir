// RUN: aicc-opt %s -p tensor-to-linalg,bufferize,lower-qgemm | filecheck %s --check-prefix=EXACT
// RUN: aicc-opt %s -p "tensor-to-linalg,bufferize,lower-qgemm{saturate=true}" | filecheck %s
// RUN: aicc-opt %s -p "tensor-to-linalg,bufferize,lower-qgemm{saturate=true},linalg-to-loops" -t llvm | filecheck %s --check-prefix=LLVM
// RUN: aicc-opt %s -p "tensor-to-linalg,bufferize,lower-qgemm{vnni=512 saturate=true}" | filecheck %s --check-prefix=VNNI

// An 8-bit weight (127 and -128 side by side: 255 * 127 + 255 * 127 is beyond int16) on a CPU
// without VNNI. By default it keeps the exact kernel: pairs of k widened to i16 for vpmaddwd
// (`_packed`, no colsum).
// EXACT-LABEL: func.func @qgemm_8bit
// EXACT:         %[[P:.*]] = memref.get_global @{{.*}}_packed : memref<1x14x16xi8>
// EXACT:         aicc_cpu.qgemm %{{.*}}[%{{.*}}], %[[P]], %{{.*}}[%{{.*}}] rows %{{.*}} {n = 2 : i64, k = 27 : i64, zp = 9 : i64} : memref<3x27xi8>, memref<1x14x16xi8>, memref<3x2xi32>
//
// With `saturate` (compiler.compile's int8_saturation) it takes the quad layout and the
// vpmaddubsw kernel of a 7-bit weight: u8 x s8 pair sums saturated to int16, as ONNX Runtime's
// AVX2 kernel computes them, then vpmaddwd by ones and (zp + 128) * colsum = 137 * colsum off.
// CHECK-LABEL: func.func @qgemm_8bit
// CHECK-NOT:     _packed
// CHECK-DAG:     %[[S:.*]] = memref.get_global @[[G:.*]]_colsum : memref<8xi32>
// CHECK-DAG:     %[[P:.*]] = memref.get_global @[[G]]_u7 : memref<1x7x32xi8>
// CHECK:         aicc_cpu.qgemm %{{.*}}[%{{.*}}], %[[P]], %{{.*}}[%{{.*}}] rows %{{.*}} colsum %[[S]] : memref<8xi32> {n = 2 : i64, k = 27 : i64, zp = 9 : i64, vnni = 256 : i64, pmaddubsw} : memref<3x27xi8>, memref<1x7x32xi8>, memref<3x2xi32>
// LLVM: define internal void @"aicc.qgemm.2.27.9.v256.u7.p"(
// LLVM: %[[PAIRS:.*]] = call <16 x i16> @"llvm.x86.avx2.pmadd.ub.sw"(<32 x i8> %{{.*}}, <32 x i8> %{{.*}})
// LLVM-NEXT: call <8 x i32> @"llvm.x86.avx2.pmadd.wd"(<16 x i16> %[[PAIRS]], <16 x i16> <i16 1, i16 1,
// LLVM: mul <8 x i32> <i32 137,
//
// With VNNI `saturate` changes nothing: vpdpbusd sums quads into i32, exactly.
// VNNI-LABEL: func.func @qgemm_8bit
// VNNI:         aicc_cpu.qgemm {{.*}} {n = 2 : i64, k = 27 : i64, zp = 9 : i64, vnni = 512 : i64} : memref<3x27xi8>, memref<1x7x64xi8>, memref<3x2xi32>
func.func @qgemm_8bit(%a: tensor<3x27xi8>) -> tensor<3x2xi32> {
  %w = aicc.constant dense<[[127, 127, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25], [-128, -128, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]]> : tensor<2x27xi8>
  %y = aicc.matmul_integer %a, %w {lhs_zero_point = 9 : i64, transpose_rhs} : tensor<3x27xi8>, tensor<2x27xi8> -> tensor<3x2xi32>
  func.return %y : tensor<3x2xi32>
}
