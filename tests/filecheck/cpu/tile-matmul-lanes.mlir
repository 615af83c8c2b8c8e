// RUN: aicc-opt %s -p tile-matmul,canonicalize,cse | filecheck %s
// RUN: aicc-opt %s -p tile-matmul -t llvm | filecheck %s --check-prefix=LLVM

// A packed A (a constant: a conv's weight, in k-major slivers of mr = 6 rows) and N = 17:
// one 16-wide panel, then the last column past whole vectors of 8, which a vector-wide
// kernel would compute with one lane of 8 in use. An m_lanes kernel takes it (nr = 1): the
// sliver's 6 rows in the lanes of one vector loaded from A, B's element broadcast, one FMA
// per k step instead of 6. (lanes_max_cols: mr / 2 = 3 columns at most.)
// CHECK-LABEL: func.func @lanes
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG:     %[[C16:.*]] = arith.constant 16 : index
// CHECK-DAG:     %[[W:.*]] = memref.get_global @wa_slivers6 : memref<480xf32>
// CHECK:         scf.for
// CHECK:           aicc_cpu.microkernel %[[W]][%[[AOFF:.*]]], %[[X:.*]][%{{.*}}], %[[C:.*]][%[[COFF:.*]]] k %{{.*}} rows %[[M:.*]] cols %[[C16]] accumulate %{{.*}} {mr = 6 : i64, nr = 16 : i64, vw = 8 : i64, a_rs = 1 : i64, a_ks = 6 : i64, b_ks = 17 : i64, ldc = 17 : i64, ku = 4 : i64, b_masked = true}
// CHECK-NEXT:      %[[COFF2:.*]] = arith.addi %[[COFF]], %[[C16]] : index
// CHECK-NEXT:      aicc_cpu.microkernel %[[W]][%[[AOFF]]], %[[X]][%[[C16]]], %[[C]][%[[COFF2]]] k %{{.*}} rows %[[M]] cols %[[C1]] accumulate %{{.*}} {mr = 6 : i64, nr = 1 : i64, vw = 8 : i64, a_rs = 1 : i64, a_ks = 6 : i64, b_ks = 17 : i64, ldc = 17 : i64, ku = 4 : i64, m_lanes = true}
// CHECK-NOT:     aicc_cpu.microkernel

// The m_lanes kernel: chains = 8 (LANES_MIN_CHAINS over 1 column x 1 vector) k steps an
// iteration, each into its own accumulator; A's 6 rows a masked load of 8 lanes, B's
// element splat; the chains summed, then C's 6 rows stored one value each.
// LLVM-LABEL: define internal void @"aicc.microkernel.float.6x1.v8.1.6.17.17.4.0.0.0.lanes"
// LLVM:       loop:
// LLVM-COUNT-8: phi  <8 x float> [zeroinitializer, %"start"]
// LLVM:         %[[A:.*]] = call <8 x float> @"llvm.masked.load.v8f32.p0"(ptr %{{.*}}, i32 4, <8 x i1> <i1 true, i1 true, i1 true, i1 true, i1 true, i1 true, i1 false, i1 false>, <8 x float> zeroinitializer)
// LLVM:         %[[B:.*]] = load float, ptr %{{.*}}, align 4
// LLVM:         %[[BI:.*]] = insertelement <8 x float> undef, float %[[B]], i32 0
// LLVM-NEXT:    %[[BV:.*]] = shufflevector <8 x float> %[[BI]], <8 x float> undef, <8 x i32> zeroinitializer
// LLVM-NEXT:    call <8 x float> @"llvm.fma.v8f32"(<8 x float> %[[A]], <8 x float> %[[BV]], <8 x float> %{{.*}})
// LLVM-COUNT-7: fadd <8 x float>
// LLVM:       mk.row5.col0:
// LLVM:         extractelement <8 x float> %{{.*}}, i32 5
// LLVM:         store float
"memref.global"() <{sym_name = "wa", type = memref<12x40xf32>, initial_value = dense<1.0> : tensor<12x40xf32>, sym_visibility = "private", constant}> : () -> ()
func.func @lanes(%x: memref<40x17xf32>, %c: memref<12x17xf32>) {
  %w = memref.get_global @wa : memref<12x40xf32>
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%c : memref<12x17xf32>)
  linalg.matmul {aicc.schedule = {mr = 6 : i64, nr = 16 : i64, vw = 8 : i64, kc = 40 : i64, mc = 12 : i64, nc = 32 : i64, ku = 4 : i64, pack_a = true, pack_b = false, parallel = "", order = "mn", pf = 0 : i64}} ins(%w, %x : memref<12x40xf32>, memref<40x17xf32>) outs(%c : memref<12x17xf32>)
  func.return
}
