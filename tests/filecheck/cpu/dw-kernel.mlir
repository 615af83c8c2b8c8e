// RUN: aicc-opt %s -t llvm | filecheck %s
// aicc_cpu.dw_kernel: one channel's 10 output columns in two <8 x float> vectors, straight-line
// code over the 3 x 3 window, each vector's taps alternating between two accumulators (four
// independent FMA chains in all). Stride 2: each tap row of each vector of columns
// is loaded once, as three vectors (the call reads columns 0..20: the first vector's third
// load is masked to 16..20), split into even and odd elements (taps 0 and 1), and tap 2 is the
// even elements moved by one lane, the first even element of the third vector after them.
// Then the channel's bias (start = 2), relu, and the stores: a full vector, then a masked one
// of 2 lanes.
// CHECK-LABEL: define void @"dw"
// CHECK:         call void @"aicc.dw_kernel.cols10.owb2.vw8.kh3.kw3.sw2.dh1.dw1.x_rs22.start2.relu"(ptr %{{.*}}, ptr %{{.*}}, ptr %{{.*}}, ptr %{{.*}})
// CHECK-LABEL: define internal void @"aicc.dw_kernel.cols10.owb2.vw8.kh3.kw3.sw2.dh1.dw1.x_rs22.start2.relu"
// CHECK:         %[[LO:.*]] = load <8 x float>, ptr %{{.*}}, align 4
// CHECK:         getelementptr inbounds float, ptr %{{.*}}, i64 8
// CHECK-NEXT:    %[[HI:.*]] = load <8 x float>, ptr %{{.*}}, align 4
// CHECK:         getelementptr inbounds float, ptr %{{.*}}, i64 16
// CHECK-NEXT:    %[[C:.*]] = call <8 x float> @"llvm.masked.load.v8f32.p0"(ptr %{{.*}}, i32 4, <8 x i1> <i1 1, i1 1, i1 1, i1 1, i1 1, i1 0, i1 0, i1 0>, <8 x float> zeroinitializer)
// CHECK-NEXT:    %[[EVEN:.*]] = shufflevector <8 x float> %[[LO]], <8 x float> %[[HI]], <8 x i32> <i32 0, i32 2, i32 4, i32 6, i32 8, i32 10, i32 12, i32 14>
// CHECK-NEXT:    %[[ODD:.*]] = shufflevector <8 x float> %[[LO]], <8 x float> %[[HI]], <8 x i32> <i32 1, i32 3, i32 5, i32 7, i32 9, i32 11, i32 13, i32 15>
// CHECK-NEXT:    %[[CE:.*]] = shufflevector <8 x float> %[[C]], <8 x float> %[[C]], <8 x i32> <i32 0, i32 2, i32 4, i32 6, i32 0, i32 0, i32 0, i32 0>
// CHECK-NEXT:    shufflevector <8 x float> %[[C]], <8 x float> %[[C]], <8 x i32> <i32 1, i32 3, i32 5, i32 7, i32 0, i32 0, i32 0, i32 0>
// CHECK-NEXT:    %[[TAP2:.*]] = shufflevector <8 x float> %[[EVEN]], <8 x float> %[[CE]], <8 x i32> <i32 1, i32 2, i32 3, i32 4, i32 5, i32 6, i32 7, i32 8>
// CHECK:         %[[WS:.*]] = shufflevector <8 x float> %{{.*}}, <8 x float> undef, <8 x i32> zeroinitializer
// CHECK-NEXT:    %[[A0:.*]] = call <8 x float> @"llvm.fma.v8f32"(<8 x float> %[[EVEN]], <8 x float> %[[WS]], <8 x float> zeroinitializer)
// CHECK:         call <8 x float> @"llvm.fma.v8f32"(<8 x float> %[[ODD]], <8 x float> %{{.*}}, <8 x float> zeroinitializer)
// CHECK:         call <8 x float> @"llvm.fma.v8f32"(<8 x float> %[[TAP2]], <8 x float> %{{.*}}, <8 x float> %[[A0]])
// The last tap row: r = 2 (2 rows of 22 on), loaded once; its last weight, W[8].
// CHECK:         getelementptr inbounds float, ptr %{{.*}}, i64 44
// CHECK-NEXT:    load <8 x float>
// CHECK:         getelementptr inbounds float, ptr %{{.*}}, i64 8
// CHECK-NEXT:    load float
// Each vector's two accumulators are added, then the bias.
// CHECK:         %[[SUM0:.*]] = fadd <8 x float> %{{.*}}, %{{.*}}
// CHECK-NEXT:    fadd <8 x float> %{{.*}}, %{{.*}}
// CHECK:         %[[B:.*]] = load float, ptr %{{.*}}, align 4
// CHECK:         fadd <8 x float> %{{.*}}, %[[SUM0]]
// CHECK:         call <8 x float> @"llvm.maximum.v8f32"
// CHECK:         store <8 x float>
// CHECK:         call void @"llvm.masked.store.v8f32.p0"(<8 x float> %{{.*}}, ptr %{{.*}}, i32 4, <8 x i1> <i1 1, i1 1, i1 0, i1 0, i1 0, i1 0, i1 0, i1 0>)
// CHECK-NEXT:    ret void
func.func @dw(%x: memref<594xf32>, %w: memref<27xf32>, %o: memref<120xf32>, %b: memref<3xf32>) {
  %c0 = arith.constant 0 : index
  aicc_cpu.dw_kernel %x[%c0], %w[%c0], %o[%c0] bias %b[%c0] : memref<3xf32> {cols = 10 : i64, owb = 2 : i64, vw = 8 : i64, kh = 3 : i64, kw = 3 : i64, sw = 2 : i64, dh = 1 : i64, dw = 1 : i64, x_rs = 22 : i64, start = 2 : i64, relu} : memref<594xf32>, memref<27xf32>, memref<120xf32>
  func.return
}

// Padding read through: x_c0 = -1 (lane 0's first tap is the column left of the input), x_w = 9
// columns, tap rows 1..2 only (row 0 is padding: no loads, no FMAs). Tap s = 0 masks lane 0
// out (column -1) and keeps lanes 1..7; the second vector (one lane: column 7 + s) loads its
// lane for s = 0 and 1 only (s = 2 reads column 9: zeros, no load).
// CHECK-LABEL: define internal void @"aicc.dw_kernel.cols9.owb2.vw8.kh3.kw3.sw1.dh1.dw1.x_rs9.w9.cm1.r1-3.start1"
// CHECK-NOT:     getelementptr inbounds float, ptr %".1"
// CHECK:         getelementptr float, ptr %".1", i64 9
// CHECK-NEXT:    call <8 x float> @"llvm.masked.load.v8f32.p0"(ptr %{{.*}}, i32 4, <8 x i1> <i1 0, i1 1, i1 1, i1 1, i1 1, i1 1, i1 1, i1 1>, <8 x float> zeroinitializer)
// CHECK:         getelementptr float, ptr %".1", i64 17
// CHECK-NEXT:    call <8 x float> @"llvm.masked.load.v8f32.p0"(ptr %{{.*}}, i32 4, <8 x i1> <i1 1, i1 0, i1 0, i1 0, i1 0, i1 0, i1 0, i1 0>, <8 x float> zeroinitializer)
// CHECK:         getelementptr float, ptr %".1", i64 10
// CHECK-NEXT:    load <8 x float>
// CHECK:         ret void
func.func @dw_through(%x: memref<108xf32>, %w: memref<18xf32>, %o: memref<108xf32>) {
  %c0 = arith.constant 0 : index
  aicc_cpu.dw_kernel %x[%c0], %w[%c0], %o[%c0] {cols = 9 : i64, owb = 2 : i64, vw = 8 : i64, kh = 3 : i64, kw = 3 : i64, sw = 1 : i64, dh = 1 : i64, dw = 1 : i64, x_rs = 9 : i64, x_w = 9 : i64, x_c0 = -1 : i64, r_lo = 1 : i64, r_hi = 3 : i64, start = 1 : i64} : memref<108xf32>, memref<18xf32>, memref<108xf32>
  func.return
}

// An epilogue region (SiLU, v * 1 / (1 + exp(-v)), as tile-conv clones it) is applied to each
// vector of outputs once its accumulators and the bias are added, on <8 x float>: its constants
// splat, exp inlined as vector code, then the stores. The kernel function's name carries a digest of the region.
// CHECK-LABEL: define internal void @"aicc.dw_kernel.cols10.owb2.vw8.kh3.kw3.sw2.dh1.dw1.x_rs22.start2.epi{{[0-9a-f]+}}"
// CHECK:         fadd <8 x float>
// CHECK-NEXT:    fadd <8 x float>
// CHECK-NEXT:    load float
// CHECK-NEXT:    insertelement
// CHECK-NEXT:    shufflevector
// CHECK-NEXT:    %[[B:.*]] = fadd <8 x float> %{{.*}}, %{{.*}}
// CHECK-NEXT:    %[[N:.*]] = fneg <8 x float> %[[B]]
// CHECK:         %[[E:.*]] = fadd <8 x float> %{{.*}}, <float 0x3ff0000000000000, float 0x3ff0000000000000, float 0x3ff0000000000000, float 0x3ff0000000000000, float 0x3ff0000000000000, float 0x3ff0000000000000, float 0x3ff0000000000000, float 0x3ff0000000000000>
// CHECK-NEXT:    %[[S:.*]] = fdiv <8 x float> <float 0x3ff0000000000000, {{.*}}>, %[[E]]
// CHECK-NEXT:    %[[R:.*]] = fmul <8 x float> %[[B]], %[[S]]
// CHECK-NEXT:    getelementptr
// CHECK-NEXT:    store <8 x float> %[[R]]
// CHECK:         call void @"llvm.masked.store.v8f32.p0"
// CHECK-NEXT:    ret void
func.func @dw_silu(%x: memref<594xf32>, %w: memref<27xf32>, %o: memref<120xf32>, %b: memref<3xf32>) {
  %c0 = arith.constant 0 : index
  aicc_cpu.dw_kernel %x[%c0], %w[%c0], %o[%c0] bias %b[%c0] : memref<3xf32> epilogue {
  ^bb0(%v: f32):
    %n = arith.negf %v : f32
    %e = math.exp %n : f32
    %one = arith.constant 1.000000e+00 : f32
    %d = arith.addf %e, %one : f32
    %s = arith.divf %one, %d : f32
    %r = arith.mulf %v, %s : f32
    aicc_cpu.yield %r : f32
  } {cols = 10 : i64, owb = 2 : i64, vw = 8 : i64, kh = 3 : i64, kw = 3 : i64, sw = 2 : i64, dh = 1 : i64, dw = 1 : i64, x_rs = 22 : i64, start = 2 : i64} : memref<594xf32>, memref<27xf32>, memref<120xf32>
  func.return
}

// One vector of 7 columns (start = 1: stored as it is): its 9 taps go round four accumulators
// (taps 0, 4, 8 / 1, 5 / 2, 6 / 3, 7), added pairwise at the end, so no FMA waits on the one
// before it.
// CHECK-LABEL: define internal void @"aicc.dw_kernel.cols7.owb1.vw8.kh3.kw3.sw1.dh1.dw1.x_rs9.start1"
// CHECK:         %[[C0:.*]] = call <8 x float> @"llvm.fma.v8f32"(<8 x float> %{{.*}}, <8 x float> %{{.*}}, <8 x float> zeroinitializer)
// CHECK:         %[[C1:.*]] = call <8 x float> @"llvm.fma.v8f32"(<8 x float> %{{.*}}, <8 x float> %{{.*}}, <8 x float> zeroinitializer)
// CHECK:         %[[C2:.*]] = call <8 x float> @"llvm.fma.v8f32"(<8 x float> %{{.*}}, <8 x float> %{{.*}}, <8 x float> zeroinitializer)
// CHECK:         %[[C3:.*]] = call <8 x float> @"llvm.fma.v8f32"(<8 x float> %{{.*}}, <8 x float> %{{.*}}, <8 x float> zeroinitializer)
// CHECK:         %[[D0:.*]] = call <8 x float> @"llvm.fma.v8f32"(<8 x float> %{{.*}}, <8 x float> %{{.*}}, <8 x float> %[[C0]])
// CHECK:         %[[D1:.*]] = call <8 x float> @"llvm.fma.v8f32"(<8 x float> %{{.*}}, <8 x float> %{{.*}}, <8 x float> %[[C1]])
// CHECK:         %[[D2:.*]] = call <8 x float> @"llvm.fma.v8f32"(<8 x float> %{{.*}}, <8 x float> %{{.*}}, <8 x float> %[[C2]])
// CHECK:         %[[D3:.*]] = call <8 x float> @"llvm.fma.v8f32"(<8 x float> %{{.*}}, <8 x float> %{{.*}}, <8 x float> %[[C3]])
// CHECK:         %[[E0:.*]] = call <8 x float> @"llvm.fma.v8f32"(<8 x float> %{{.*}}, <8 x float> %{{.*}}, <8 x float> %[[D0]])
// CHECK-NOT:     llvm.fma
// CHECK:         %[[S01:.*]] = fadd <8 x float> %[[E0]], %[[D1]]
// CHECK-NEXT:    %[[S23:.*]] = fadd <8 x float> %[[D2]], %[[D3]]
// CHECK-NEXT:    %[[S:.*]] = fadd <8 x float> %[[S01]], %[[S23]]
// CHECK:         call void @"llvm.masked.store.v8f32.p0"(<8 x float> %[[S]],
func.func @dw_chains(%x: memref<81xf32>, %w: memref<9xf32>, %o: memref<49xf32>) {
  %c0 = arith.constant 0 : index
  aicc_cpu.dw_kernel %x[%c0], %w[%c0], %o[%c0] {cols = 7 : i64, owb = 1 : i64, vw = 8 : i64, kh = 3 : i64, kw = 3 : i64, sw = 1 : i64, dh = 1 : i64, dw = 1 : i64, x_rs = 9 : i64, start = 1 : i64} : memref<81xf32>, memref<9xf32>, memref<49xf32>
  func.return
}
