// RUN: aicc-opt %s -p 'tensor-to-linalg,choose-schedule{vector-bits=512 threads=1 conv-nhwc-flops=50}' | filecheck %s --check-prefix=SCHED
// RUN: aicc-opt %s -p 'tensor-to-linalg,choose-schedule{vector-bits=512 threads=1}' | filecheck %s --check-prefix=NONE
// RUN: aicc-opt %s -p 'tensor-to-linalg,choose-schedule{vector-bits=512 threads=1 conv-nhwc-flops=50},bufferize,tile-conv,canonicalize,cse' | filecheck %s

// A KxK conv with many FLOPs per element of its input (here 2 * 32 * 9 * 16 / 100 = 92,
// against conv-nhwc-flops = 50: the cpu target's nhwc_kxk_rule, 1000 on every core) gets
// `nhwc = 1`: its kernels read the input as [N][Hp][Wp][IC], a pixel's channels contiguous,
// instead of one float from each of IC planes. Without the option it keeps NCHW.
// SCHED: aicc.conv_schedule = {vw = 16 : i64, owb = 4 : i64, ocv = 2 : i64, nhwc = 1 : i64}
// NONE:  aicc.conv_schedule = {vw = 16 : i64, owb = 4 : i64, ocv = 2 : i64}}

// The input is a zero padding's copy that only the conv reads: tile-conv has the copy write
// the NHWC layout itself, into a zero-filled buffer, and the padded NCHW buffer goes. The
// kernels step a channel by 1 (x_cs), a tap column by a pixel (dw = 16 floats), an output
// column by two pixels (sw = 32, stride 2) and a tap row by a row of pixels (x_rs = 160);
// output row y starts at y * 2 * 160 = y * 320.
// CHECK-LABEL: func.func @strided
// CHECK-SAME:    (%[[X:.*]]: memref<1x16x8x8xf32>, %{{.*}}: memref<1x32x4x4xf32>)
// CHECK-DAG:     %[[C320:.*]] = arith.constant 320 : index
// CHECK-DAG:     %[[C4:.*]] = arith.constant 4 : index
// CHECK:         %[[XT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1600xf32>
// CHECK-NEXT:    %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    linalg.fill ins(%[[Z]] : f32) outs(%[[XT]] : memref<1600xf32>)
// CHECK-NEXT:    %[[XT4:.*]] = memref.expand_shape %[[XT]] {{.*}} output_shape [1, 10, 10, 16]
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, (d2 + 1), (d3 + 1), d1)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%[[X]] : memref<1x16x8x8xf32>) outs(%[[XT4]] : memref<1x10x10x16xf32>)
// CHECK:         "scf.parallel"
// CHECK-NEXT:    ^{{.*}}(%[[Y:.*]]: index):
// CHECK-NEXT:      %[[XO:.*]] = arith.muli %[[Y]], %[[C320]] : index
// CHECK-NEXT:      %{{.*}} = arith.muli %[[Y]], %[[C4]] : index
// CHECK-NEXT:      aicc_cpu.conv_kernel %[[XT]][%[[XO]]], {{.*}} {owb = 4 : i64, ocv = 2 : i64, ocn = 32 : i64, vw = 16 : i64, ic = 16 : i64, kh = 3 : i64, kw = 3 : i64, sw = 32 : i64, dh = 1 : i64, dw = 16 : i64, x_cs = 1 : i64, x_rs = 160 : i64, w_ocs = 2304 : i64, o_cs = 16 : i64, start = 1 : i64}
// CHECK:         memref.dealloc %[[XT]] : memref<1600xf32>
// CHECK-NOT:     memref<1x16x10x10xf32>
// CHECK:         func.return
func.func @strided(%x: tensor<1x16x8x8xf32>) -> tensor<1x32x4x4xf32> {
  %w = aicc.constant dense<0.5> : tensor<32x16x3x3xf32>
  %p = aicc.pad %x {low = array<i64: 0, 0, 1, 1>, high = array<i64: 0, 0, 1, 1>, value = 0.0 : f32} : tensor<1x16x8x8xf32> -> tensor<1x16x10x10xf32>
  %c = aicc.conv2d %p, %w {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, groups = 1 : i64, aicc.conv_lowering = "packed"} : tensor<1x16x10x10xf32>, tensor<32x16x3x3xf32> -> tensor<1x32x4x4xf32>
  func.return %c : tensor<1x32x4x4xf32>
}
