// RUN: aicc-opt %s -p tensor-to-linalg,bufferize,lower-qgemm | filecheck %s
// RUN: aicc-opt %s -p tensor-to-linalg,bufferize,lower-qgemm,linalg-to-loops -t llvm | filecheck %s --check-prefix=LLVM

// An int8 matmul with an (N, K) rhs: its zero-filled i32 generic becomes blocks of 8 rows in
// parallel, each an aicc_cpu.qgemm (the fill goes: the kernel stores every element of C).
// CHECK-LABEL: func.func @qgemm
// CHECK-SAME:    (%[[A:.*]]: memref<20x40xi8>, %[[W:.*]]: memref<6x40xi8>, %[[C:.*]]: memref<20x6xi32>)
// CHECK-NOT:     linalg
// CHECK:         "scf.parallel"
// CHECK:           %[[R0:.*]] = arith.muli %{{.*}}, %[[EIGHT:.*]] : index
// CHECK:           %[[M:.*]] = arith.minsi %{{.*}}, %[[EIGHT]] : index
// CHECK:           aicc_cpu.qgemm %[[A]][%{{.*}}], %[[W]], %[[C]][%{{.*}}] rows %[[M]] {n = 6 : i64, k = 40 : i64, zp = -3 : i64} : memref<20x40xi8>, memref<6x40xi8>, memref<20x6xi32>
// CHECK-NOT:     linalg
// The kernel: 16-wide i16 dot products with vpmaddwd, a 2 x 4 tile of them per k chunk.
// LLVM: define internal void @"aicc.qgemm.6.40.-3"(ptr captures(none) noalias
// LLVM-COUNT-8: call <8 x i32> @"llvm.x86.avx2.pmadd.wd"
// LLVM: call i32 @"llvm.vector.reduce.add.v8i32"
func.func @qgemm(%a: tensor<20x40xi8>, %w: tensor<6x40xi8>) -> tensor<20x6xi32> {
  %y = aicc.matmul_integer %a, %w {lhs_zero_point = -3 : i64, transpose_rhs} : tensor<20x40xi8>, tensor<6x40xi8> -> tensor<20x6xi32>
  func.return %y : tensor<20x6xi32>
}

// Dynamic quantization: the float A and its run-time [scale, zero point]. The same row blocks,
// each kernel call given the two scalars, which it uses to quantize A's rows as it converts
// them (k = 37: two 16-wide chunks and a tail of 5, quantized too).
// CHECK-LABEL: func.func @dqgemm
// CHECK-SAME:    (%[[A:.*]]: memref<9x37xf32>, %[[W:.*]]: memref<6x37xi8>, %[[P:.*]]: memref<2xf32>, %[[C:.*]]: memref<9x6xi32>)
// CHECK-NOT:     linalg
// CHECK:         "scf.parallel"
// CHECK:           %[[S:.*]] = memref.load %[[P]][%{{.*}}] : memref<2xf32>
// CHECK:           %[[Z:.*]] = memref.load %[[P]][%{{.*}}] : memref<2xf32>
// CHECK:           aicc_cpu.qgemm %[[A]][%{{.*}}], %[[W]], %[[C]][%{{.*}}] rows %{{.*}} quantize %[[S]], %[[Z]] {n = 6 : i64, k = 37 : i64, zp = 0 : i64} : memref<9x37xf32>, memref<6x37xi8>, memref<9x6xi32>
// CHECK-NOT:     linalg
// LLVM: define internal void @"aicc.dqgemm.6.37"(ptr captures(none) noalias %{{.*}}, ptr captures(none) noalias %{{.*}}, ptr captures(none) noalias %{{.*}}, i64 %{{.*}}, float %{{.*}}, float %{{.*}})
// LLVM: fdiv <16 x float>
// LLVM: call <16 x float> @"llvm.roundeven.v16f32"
// LLVM: fptosi <16 x float> %{{.*}} to <16 x i16>
// LLVM: call float @"llvm.roundeven.f32"
// LLVM: call <8 x i32> @"llvm.x86.avx2.pmadd.wd"
func.func @dqgemm(%a: tensor<9x37xf32>, %w: tensor<6x37xi8>, %p: tensor<2xf32>) -> tensor<9x6xi32> {
  %y = aicc.dynamic_matmul_integer %a, %w, %p : tensor<9x37xf32>, tensor<6x37xi8>, tensor<2xf32> -> tensor<9x6xi32>
  func.return %y : tensor<9x6xi32>
}

// A constant weight within [-64, 64] (7 bits), on a CPU without VNNI: packed by quads of k
// (ceil(33 / 4) = 9, zeros beyond k) for a group of 8 columns, with its row sums padded to 8
// (the colsum). The kernel multiplies A + 128 (uint8) by it with vpmaddubsw, whose i16 pair
// sums cannot saturate, then vpmaddwd by ones, and subtracts (zp + 128) * colsum = 133 * colsum.
// CHECK-LABEL: func.func @qgemm_7bit
// CHECK-NOT:     memref<3x33xi8>
// CHECK-DAG:     %[[S:.*]] = memref.get_global @[[G:.*]]_colsum : memref<8xi32>
// CHECK-DAG:     %[[P:.*]] = memref.get_global @[[G]]_u7 : memref<1x9x32xi8>
// CHECK:         aicc_cpu.qgemm %{{.*}}[%{{.*}}], %[[P]], %{{.*}}[%{{.*}}] rows %{{.*}} colsum %[[S]] : memref<8xi32> {n = 3 : i64, k = 33 : i64, zp = 5 : i64, vnni = 256 : i64, pmaddubsw} : memref<5x33xi8>, memref<1x9x32xi8>, memref<5x3xi32>
// LLVM: define internal void @"aicc.qgemm.3.33.5.v256.u7.p"(ptr captures(none) noalias %{{.*}}, ptr captures(none) noalias %{{.*}}, ptr captures(none) noalias %{{.*}}, i64 %{{.*}}, ptr %{{.*}})
// LLVM: xor <16 x i8> %{{.*}}, <i8 -128,
// LLVM: store i8 0, ptr
// LLVM: %[[PAIRS:.*]] = call <16 x i16> @"llvm.x86.avx2.pmadd.ub.sw"(<32 x i8> %{{.*}}, <32 x i8> %{{.*}})
// LLVM-NEXT: call <8 x i32> @"llvm.x86.avx2.pmadd.wd"(<16 x i16> %[[PAIRS]], <16 x i16> <i16 1, i16 1,
// LLVM: mul <8 x i32> <i32 133,
// LLVM: call void @"llvm.masked.store.v8i32.p0"
func.func @qgemm_7bit(%a: tensor<5x33xi8>) -> tensor<5x3xi32> {
  %w = aicc.constant dense<[[-64, 64, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], [-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1]]> : tensor<3x33xi8>
  %y = aicc.matmul_integer %a, %w {lhs_zero_point = 5 : i64, transpose_rhs} : tensor<5x33xi8>, tensor<3x33xi8> -> tensor<5x3xi32>
  func.return %y : tensor<5x3xi32>
}

// A constant 8-bit weight (k = 27, as a 3x3 conv over 3 channels) is packed for the broadcast
// kernel: pairs of k (14, the last one padded with a zero) for a group of 8 columns (2
// real ones, the rest zeros). The i8 original goes. Each pair of an A row is broadcast
// (an i32 splat) and multiplied by the group's 8 columns; the 2 real columns are stored
// with a mask.
// CHECK-LABEL: func.func @qgemm_packed
// CHECK-NOT:     memref<2x27xi8>
// CHECK:         %[[P:.*]] = memref.get_global @{{.*}}_packed : memref<1x14x16xi8>
// CHECK:         aicc_cpu.qgemm %{{.*}}[%{{.*}}], %[[P]], %{{.*}}[%{{.*}}] rows %{{.*}} {n = 2 : i64, k = 27 : i64, zp = 9 : i64} : memref<3x27xi8>, memref<1x14x16xi8>, memref<3x2xi32>
// LLVM: define internal void @"aicc.qgemm.2.27.9.p"(
// LLVM: store i16 0, ptr
// LLVM: shufflevector <8 x i32> %{{.*}}, <8 x i32> <i32 undef, {{.*}}>, <8 x i32> <i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0, i32 0>
// LLVM: call <8 x i32> @"llvm.x86.avx2.pmadd.wd"
// LLVM: br i1 %{{.*}}, label %{{.*}}, label %{{.*}}, !llvm.loop ![[LOOP:[0-9]+]]
// LLVM: call void @"llvm.masked.store.v8i32.p0"
// LLVM: ![[OFF:[0-9]+]] = !{ !"llvm.loop.unroll.disable" }
// LLVM: ![[LOOP]] = !{ ![[LOOP]], ![[OFF]] }
func.func @qgemm_packed(%a: tensor<3x27xi8>) -> tensor<3x2xi32> {
  %w = aicc.constant dense<[[-128, 127, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]]> : tensor<2x27xi8>
  %y = aicc.matmul_integer %a, %w {lhs_zero_point = 9 : i64, transpose_rhs} : tensor<3x27xi8>, tensor<2x27xi8> -> tensor<3x2xi32>
  func.return %y : tensor<3x2xi32>
}
