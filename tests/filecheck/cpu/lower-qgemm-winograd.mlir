// RUN: aicc-opt %s -p tensor-to-linalg,fuse-elementwise,bufferize,lower-qgemm --split-input-file | filecheck %s
// RUN: aicc-opt %s -p "tensor-to-linalg,fuse-elementwise,bufferize,lower-qgemm{winograd=false}" --split-input-file | filecheck %s --check-prefix=DIRECT
// RUN: aicc-opt %s -p "tensor-to-linalg,fuse-elementwise,bufferize,lower-qgemm{vnni=256}" --split-input-file | filecheck %s --check-prefix=DIRECT
// RUN: aicc-opt %s -p tensor-to-linalg,fuse-elementwise,bufferize,lower-qgemm,linalg-to-loops -t llvm --split-input-file | filecheck %s --check-prefix=LLVM

// An int8 3x3 stride-1 conv (quantize-matmul's im2col of a padded 16-channel NHWC input, then
// matmul_integer) with a requantizing epilogue, on a CPU without VNNI: lower-qgemm gives it
// the integer Winograd kernel, F(2x2, 3x3). B becomes the transformed weight as i16
// (16 positions x 3 groups of 8 output channels x 8 pairs of input channels x 16), the tasks
// take 2x2 output tiles (2 x 4 x 4 = 32 of them, 24 to a task: 2 tasks), and the epilogue
// is the kernel's, as for the direct kernel. With winograd=false, or VNNI, the direct kernel
// reads the same window.
// CHECK-LABEL: func.func @conv3x3
// CHECK-SAME:    (%[[X:.*]]: memref<2x10x10x16xi8>, %[[OUT:.*]]: memref<2x8x8x20xi8>)
// CHECK-NOT:     linalg.generic
// CHECK:         %[[U:.*]] = memref.get_global @{{.*}}_winograd : memref<16x3x8x16xi16>
// CHECK:         "scf.parallel"(%{{.*}}, %[[TASKS:.*]], %{{.*}})
// CHECK:           %[[T0:.*]] = arith.muli %{{.*}}, %[[TB:.*]] : index
// CHECK:           %[[LEFT:.*]] = arith.subi %[[TILES:.*]], %[[T0]] : index
// CHECK:           %[[M:.*]] = arith.minsi %[[LEFT]], %[[TB]] : index
// CHECK:           aicc_cpu.qgemm %[[X]][%[[T0]]], %[[U]], %{{.*}}[%{{.*}}] rows %[[M]] col_scale %{{.*}} : memref<20xf32> col_bias %{{.*}} : memref<20xi32> {n = 20 : i64, k = 144 : i64, zp = -128 : i64, out_zp = 5 : i64, relu = true, window = array<i64: 8, 8, 3, 3, 1, 1, 1, 1>, winograd = 24 : i64} : memref<2x10x10x16xi8>, memref<16x3x8x16xi16>, memref<128x20xi8>
// CHECK-NOT:     linalg.generic
// DIRECT-LABEL: func.func @conv3x3
// DIRECT-NOT:     winograd
// DIRECT:         aicc_cpu.qgemm {{.*}}window = array<i64: 8, 8, 3, 3, 1, 1, 1, 1>
// DIRECT-NOT:     winograd
// The kernel: the input transform 16 channels at a time (16 loads of 16 bytes, widened, minus
// the zero point), the GEMMs' broadcast vpmaddwd, the output transform's shift by 2, the
// requantization and a masked store of the 4 real channels of the last group of 8.
// LLVM: define internal void @"aicc.qgemm.20.144.-128.p.s.b.q5.r.w8x8x3x3x1x1x1x1x10x10.wino24"(
// LLVM: alloca [6144 x i16], align 32
// LLVM: alloca [6144 x i32], align 32
// LLVM: sext <16 x i8> %{{.*}} to <16 x i16>
// LLVM: sub <16 x i16> %{{.*}}, <i16 -128,
// LLVM: call <8 x i32> @"llvm.x86.avx2.pmadd.wd"(<16 x i16>
// LLVM: ashr <8 x i32> %{{.*}}, <i32 2,
// LLVM: call <8 x float> @"llvm.roundeven.v8f32"
// LLVM: call void @"llvm.masked.store.v8i8.p0"(<8 x i8>
func.func @conv3x3(%x: tensor<2x10x10x16xi8>) -> tensor<2x8x8x20xi8> {
  %cols = aicc.tensor_op "out[n, p, q, i, j, c] = in0[n, p + i, q + j, c]"(%x) {ranges = {n = 2 : i64, p = 8 : i64, q = 8 : i64, i = 3 : i64, j = 3 : i64, c = 16 : i64}} : (tensor<2x10x10x16xi8>) -> tensor<2x8x8x3x3x16xi8>
  %a = aicc.reshape %cols : tensor<2x8x8x3x3x16xi8> -> tensor<128x144xi8>
  %w = aicc.constant dense<-100> : tensor<20x144xi8>
  %acc = aicc.matmul_integer %a, %w {lhs_zero_point = -128 : i64, transpose_rhs} : tensor<128x144xi8>, tensor<20x144xi8> -> tensor<128x20xi32>
  %bias = aicc.constant dense<7> : tensor<20xi32>
  %b = aicc.add %acc, %bias : tensor<128x20xi32>, tensor<20xi32> -> tensor<128x20xi32>
  %f = aicc.cast %b : tensor<128x20xi32> -> tensor<128x20xf32>
  %s = aicc.constant dense<0.01> : tensor<20xf32>
  %y = aicc.mul %f, %s : tensor<128x20xf32>, tensor<20xf32> -> tensor<128x20xf32>
  %r = aicc.relu %y : tensor<128x20xf32>
  %q = aicc.quantize %r {scale = array<f64: 1.0>, zero_point = array<i64: 5>, axis = -1 : i64} : tensor<128x20xf32> -> tensor<128x20xi8>
  %out = aicc.reshape %q : tensor<128x20xi8> -> tensor<2x8x8x20xi8>
  func.return %out : tensor<2x8x8x20xi8>
}

// -----
// An odd output width (7): 4 tiles a row, the last a half; the kernel reads the input's last
// column for the fourth one of that tile's window, and skips the stores of its second
// output column.
// CHECK-LABEL: func.func @odd_width
// CHECK:         aicc_cpu.qgemm {{.*}}window = array<i64: 2, 7, 3, 3, 1, 1, 1, 1>, winograd = 24 : i64}
// LLVM: define internal void @"aicc.qgemm.4.144.0.p.w2x7x3x3x1x1x1x1x4x9.wino24"(
// LLVM: icmp slt i64 %{{.*}}, 8
// LLVM: select i1 %{{.*}}, i64 %{{.*}}, i64 8
// LLVM: icmp eq i64 %{{.*}}, 3
func.func @odd_width(%x: tensor<1x4x9x16xi8>) -> tensor<14x4xi32> {
  %cols = aicc.tensor_op "out[n, p, q, i, j, c] = in0[n, p + i, q + j, c]"(%x) {ranges = {n = 1 : i64, p = 2 : i64, q = 7 : i64, i = 3 : i64, j = 3 : i64, c = 16 : i64}} : (tensor<1x4x9x16xi8>) -> tensor<1x2x7x3x3x16xi8>
  %a = aicc.reshape %cols : tensor<1x2x7x3x3x16xi8> -> tensor<14x144xi8>
  %w = aicc.constant dense<3> : tensor<4x144xi8>
  %y = aicc.matmul_integer %a, %w {lhs_zero_point = 0 : i64, transpose_rhs} : tensor<14x144xi8>, tensor<4x144xi8> -> tensor<14x4xi32>
  func.return %y : tensor<14x4xi32>
}
