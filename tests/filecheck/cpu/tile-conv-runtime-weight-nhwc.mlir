// RUN: aicc-opt %s -p 'tensor-to-linalg{conv-packed=true},choose-schedule{vector-bits=256 threads=1}' | filecheck %s --check-prefix=SCHED
// RUN: aicc-opt %s -p 'tensor-to-linalg{conv-packed=true},choose-schedule{vector-bits=256 threads=1},bufferize,tile-conv,canonicalize,cse' | filecheck %s
// Two things tile-conv (compiler/targets/cpu/tile_conv.py) does before a packed conv's kernels.
//
// @runtime_weight: a weight known only at run time (here an argument; in a CNN, a 1x1 conv's
// weight times a squeeze-and-excitation gate, fold-conv-input-scale) takes the packed kernel
// too. A loop nest packs it before the conv into a temporary laid out as a constant weight's
// global is, [OC/vw][KH][KW][IC][vw]: 16 channels = 2 vectors of 8, 2*3*3*4*8 = 576 floats,
// lane l of vector q being channel q*8 + l (index q*288 + r*96 + s*32 + c*8 + l). The
// temporary goes after the conv's loop.
//
// @pointwise_7x7: a 1x1 conv on a 7x7 image (the image one row of 49 columns) gets
// `nhwc = 1` in its schedule: its input is copied as [N][H][W][stride] by a linalg.generic
// (column p, channel c at p*48 + c; linalg-to-loops makes loops of it) and the kernels read
// the copy, a column's channels contiguous (x_cs = 1) and columns 48 floats apart (sw = 48):
// IC = 32 floats are two 64-byte lines, an even count, so one line more (nhwc_stride), that
// a call's columns fall in different sets of L1.

// SCHED-LABEL: func.func @runtime_weight
// SCHED:         attrs = {aicc.conv_lowering = "packed", aicc.conv_schedule = {vw = 8 : i64, owb = 3 : i64, ocv = 2 : i64}}
// SCHED-LABEL: func.func @pointwise_7x7
// SCHED:         attrs = {aicc.conv_lowering = "packed", aicc.conv_schedule = {vw = 8 : i64, owb = 6 : i64, ocv = 2 : i64, nhwc = 1 : i64}}

// CHECK-LABEL: func.func @runtime_weight
// CHECK-SAME:    (%{{.*}}: memref<1x4x6x5xf32>, %[[W:.*]]: memref<16x4x3x3xf32>, %{{.*}}: memref<1x16x4x3xf32>)
// CHECK:         %[[W5:.*]] = memref.expand_shape {{.*}} output_shape [1, 16, 4, 3, 3]
// CHECK-DAG:     %[[C8:.*]] = arith.constant 8 : index
// CHECK-DAG:     %[[C288:.*]] = arith.constant 288 : index
// CHECK-DAG:     %[[C96:.*]] = arith.constant 96 : index
// CHECK-DAG:     %[[C32:.*]] = arith.constant 32 : index
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK:         %[[WP:.*]] = memref.alloc() {alignment = 64 : i64} : memref<576xf32>
// CHECK:         scf.for %[[Q:.*]] = %[[C0]] to %{{.*}} step
// CHECK-NEXT:      scf.for %[[R:.*]] = %[[C0]] to
// CHECK-NEXT:        scf.for %[[S:.*]] = %[[C0]] to
// CHECK-NEXT:          scf.for %[[C:.*]] = %[[C0]] to
// CHECK-NEXT:            scf.for %[[L:.*]] = %[[C0]] to %[[C8]] step
// CHECK-NEXT:              %[[QV:.*]] = arith.muli %[[Q]], %[[C8]] : index
// CHECK-NEXT:              %[[OC:.*]] = arith.addi %[[QV]], %[[L]] : index
// CHECK-NEXT:              %[[V:.*]] = memref.load %[[W5]][%[[C0]], %[[OC]], %[[C]], %[[R]], %[[S]]]
// CHECK-NEXT:              %{{.*}} = arith.muli %[[Q]], %[[C288]]
// CHECK-NEXT:              %{{.*}} = arith.muli %[[R]], %[[C96]]
// CHECK-NEXT:              %{{.*}} = arith.addi
// CHECK-NEXT:              %{{.*}} = arith.muli %[[S]], %[[C32]]
// CHECK-NEXT:              %{{.*}} = arith.addi
// CHECK-NEXT:              %{{.*}} = arith.muli %[[C]], %[[C8]]
// CHECK-NEXT:              %{{.*}} = arith.addi
// CHECK-NEXT:              %[[AT:.*]] = arith.addi %{{.*}}, %[[L]]
// CHECK-NEXT:              memref.store %[[V]], %[[WP]][%[[AT]]] : memref<576xf32>
// CHECK:         "scf.parallel"
// CHECK:           aicc_cpu.conv_kernel %{{.*}}, %[[WP]][%[[C0]]], %{{.*}} {owb = 3 : i64, ocv = 2 : i64, ocn = 16 : i64, vw = 8 : i64, ic = 4 : i64, kh = 3 : i64, kw = 3 : i64, sw = 1 : i64, dh = 1 : i64, dw = 1 : i64, x_cs = 30 : i64, x_rs = 5 : i64, w_ocs = 288 : i64, o_cs = 12 : i64, start = 1 : i64}
// CHECK:         memref.dealloc %[[WP]] : memref<576xf32>
// CHECK-NOT:     linalg.generic
// CHECK:         func.return

// CHECK-LABEL: func.func @pointwise_7x7
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[WP:.*]] = memref.get_global @__constant_0_packed8 : memref<512xf32>
// CHECK:         %[[XT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2352xf32>
// CHECK:         %[[X4:.*]] = memref.expand_shape {{.*}} output_shape [1, 32, 1, 49]
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (((((d0 * 2352) + (d2 * 2352)) + (d3 * 48)) + d1))>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%[[X4]] : memref<1x32x1x49xf32>) outs(%[[XT]] : memref<2352xf32>)
// CHECK:         "scf.parallel"
// CHECK:           aicc_cpu.conv_kernel %[[XT]][%{{.*}}], %[[WP]][%[[C0]]], %{{.*}} {owb = 6 : i64, ocv = 2 : i64, ocn = 16 : i64, vw = 8 : i64, ic = 32 : i64, kh = 1 : i64, kw = 1 : i64, sw = 48 : i64, dh = 1 : i64, dw = 1 : i64, x_cs = 1 : i64, x_rs = 1 : i64, w_ocs = 256 : i64, o_cs = 49 : i64, start = 1 : i64}
// CHECK:           aicc_cpu.conv_kernel %[[XT]][%{{.*}}], %[[WP]][%[[C0]]], %{{.*}} {owb = 1 : i64, ocv = 2 : i64, {{.*}} sw = 48 : i64, {{.*}} x_cs = 1 : i64
// CHECK:         memref.dealloc %[[XT]] : memref<2352xf32>
// CHECK:         func.return

builtin.module {
  func.func @runtime_weight(%x: tensor<1x4x6x5xf32>, %w: tensor<16x4x3x3xf32>) -> tensor<1x16x4x3xf32> {
    %y = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x4x6x5xf32>, tensor<16x4x3x3xf32> -> tensor<1x16x4x3xf32>
    func.return %y : tensor<1x16x4x3xf32>
  }
  func.func @pointwise_7x7(%x: tensor<1x32x7x7xf32>) -> tensor<1x16x7x7xf32> {
    %w = arith.constant dense<0.5> : tensor<16x32x1x1xf32>
    %y = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x32x7x7xf32>, tensor<16x32x1x1xf32> -> tensor<1x16x7x7xf32>
    func.return %y : tensor<1x16x7x7xf32>
  }
}
