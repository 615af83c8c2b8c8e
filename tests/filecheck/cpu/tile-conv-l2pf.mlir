// RUN: aicc-opt %s -p 'tensor-to-linalg,choose-schedule{vector-bits=512 threads=1 conv-l2-prefetch=true conv-overrides="vw=8,owb=3"},bufferize,tile-conv,canonicalize,cse' | filecheck %s
// RUN: aicc-opt %s -p 'tensor-to-linalg,choose-schedule{vector-bits=512 threads=1 conv-l2-prefetch=true conv-overrides="vw=8,owb=3"}' | filecheck %s --check-prefix=SCHED
// RUN: aicc-opt %s -p 'tensor-to-linalg,choose-schedule{vector-bits=256 threads=1 l2-prefetch=true}' | filecheck %s --check-prefix=AVX2
// RUN: aicc-opt %s -p 'tensor-to-linalg,choose-schedule{vector-bits=256 threads=1 conv-l2-prefetch=true}' | filecheck %s --check-prefix=AVX2-AMD

// With conv-l2-prefetch (the machine's conv_l2_prefetch_rule: 512-bit vectors, or an AMD
// core), the packed conv's schedule records l2pf = 1 (l2-prefetch, the matmuls' rule, leaves
// the convs alone: AVX2 code for an Intel core lost with it), and tile-conv gives each kernel
// call an l2pf stream into the constant packed
// weight: its share of the next block of channel vectors' weights, fetched into L2 while it
// computes. 32 output channels in vectors of 8 (vw = 8 fixed): a block of ocv = 3 vectors (w_ocs = 576
// floats each), then one of the last vector. The next block starts nq * w_ocs on (1728 from
// the first, 2304 from the second: past the weight's end, which a prefetch never faults
// on). A block has 6 rows x 3 calls of owb = 3 columns; a call runs kh * kw * ic / 4 = 18
// unrolled channel steps, fetching l2pf_rate = 1 line (16 floats) each: a share of 288
// floats, row y's calls at y * 864, the call at column ow0 at ow0 / 3 * 288 past it.
// SCHED: aicc.conv_schedule = {vw = 8 : i64, owb = 3 : i64, ocv = 3 : i64, l2pf = 1 : i64}
// AVX2: aicc.conv_schedule = {vw = 8 : i64, owb = 3 : i64, ocv = 3 : i64}}
// AVX2-AMD: aicc.conv_schedule = {vw = 8 : i64, owb = 3 : i64, ocv = 3 : i64, l2pf = 1 : i64}}
// CHECK-LABEL: func.func @conv
// CHECK-DAG:     %[[C3:.*]] = arith.constant 3 : index
// CHECK-DAG:     %[[C864:.*]] = arith.constant 864 : index
// CHECK-DAG:     %[[C288:.*]] = arith.constant 288 : index
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[WP:.*]] = memref.get_global @__constant_0_packed8 : memref<2304xf32>
// CHECK:         "scf.parallel"
// CHECK-NEXT:    ^{{.*}}(%[[Y:.*]]: index):
// CHECK:           %[[C1728:.*]] = arith.constant 1728 : index
// CHECK:           scf.for %[[OW0:.*]] = %[[C0]] to %{{.*}} step %[[C3]] {
// CHECK:             %[[ROW:.*]] = arith.muli %[[Y]], %[[C864]] : index
// CHECK-NEXT:        %[[CALL:.*]] = arith.floordivsi %[[OW0]], %[[C3]] : index
// CHECK-NEXT:        %[[COL:.*]] = arith.muli %[[CALL]], %[[C288]] : index
// CHECK-NEXT:        %[[SHARE:.*]] = arith.addi %[[ROW]], %[[COL]] : index
// CHECK-NEXT:        %[[PF:.*]] = arith.addi %[[SHARE]], %[[C1728]] : index
// CHECK-NEXT:        aicc_cpu.conv_kernel %{{.*}}[%{{.*}}], %[[WP]][%[[C0]]], %{{.*}}[%{{.*}}] l2pf %[[WP]][%[[PF]]] : memref<2304xf32> {owb = 3 : i64, ocv = 3 : i64, {{.*}}, l2pf_rate = 1 : i64, start = 1 : i64}
// CHECK:         "scf.parallel"
// CHECK:           %[[FROM:.*]] = arith.constant 1728 : index
// CHECK:           %[[C2304:.*]] = arith.constant 2304 : index
// CHECK:             aicc_cpu.conv_kernel %{{.*}}[%{{.*}}], %[[WP]][%[[FROM]]], %{{.*}}[%{{.*}}] l2pf %[[WP]][%{{.*}}] : memref<2304xf32> {owb = 3 : i64, ocv = 1 : i64,
func.func @conv(%x: tensor<1x8x6x9xf32>) -> tensor<1x32x6x9xf32> {
  %w = aicc.constant dense<0.5> : tensor<32x8x3x3xf32>
  %p = aicc.pad %x {low = array<i64: 0, 0, 1, 1>, high = array<i64: 0, 0, 1, 1>, value = 0.0 : f32} : tensor<1x8x6x9xf32> -> tensor<1x8x8x11xf32>
  %c = aicc.conv2d %p, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64, aicc.conv_lowering = "packed"} : tensor<1x8x8x11xf32>, tensor<32x8x3x3xf32> -> tensor<1x32x6x9xf32>
  func.return %c : tensor<1x32x6x9xf32>
}
