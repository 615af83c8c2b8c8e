// RUN: aicc-opt %s -t llvm | filecheck %s
// aicc_cpu.microkernel becomes a call of one internal, noinline function per kernel
// configuration: an mr x nr register tile of <vw x float> accumulators updated with the
// llvm.fma intrinsic at full vector width (vw = 16: AVX-512, vw = 8: AVX2), A broadcast one
// element at a time, B loaded vw lanes at a time; masked stores for edge tiles.

// CHECK-LABEL: define void @"tile16"
// CHECK:         call void @"aicc.microkernel.float.4x32.v16.64.1.32.32.2.0.0.16"(ptr %{{.*}}, ptr %{{.*}}, ptr %{{.*}}, i64 %{{.*}}, i64 %{{.*}}, i64 %{{.*}}, i1 false)

// CHECK-LABEL: define internal void @"aicc.microkernel.float.4x32.v16.64.1.32.32.2.0.0.16"(ptr captures(none) noalias %{{.*}}, ptr captures(none) noalias %{{.*}}, ptr captures(none) noalias %{{.*}}, i64 %{{.*}}, i64 %{{.*}}, i64 %{{.*}}, i1 %{{.*}}) {{.*}}noinline
// The C tile is prefetched for writing before the k loop.
// CHECK:         call void @"llvm.prefetch.p0"(ptr %{{.*}}, i32 1, i32 2, i32 1)
// The k loop, unrolled twice: 4 x 2 accumulators carried in registers.
// CHECK:       loop:
// CHECK-COUNT-8: phi  <16 x float> [zeroinitializer, %"start"]
// CHECK:         %[[B0:.*]] = load <16 x float>, ptr %{{.*}}, align 4
// CHECK:         %[[B1:.*]] = load <16 x float>, ptr %{{.*}}, align 4
// B for a later step is prefetched (pf = 16).
// CHECK:         call void @"llvm.prefetch.p0"(ptr %{{.*}}, i32 0, i32 3, i32 1)
// CHECK:         %[[A0:.*]] = load float, ptr %{{.*}}, align 4
// CHECK:         %[[INS:.*]] = insertelement <16 x float> undef, float %[[A0]], i32 0
// CHECK:         %[[SPLAT:.*]] = shufflevector <16 x float> %[[INS]], <16 x float> undef, <16 x i32> zeroinitializer
// CHECK:         call <16 x float> @"llvm.fma.v16f32"(<16 x float> %[[SPLAT]], <16 x float> %[[B0]], <16 x float> %{{.*}})
// CHECK:         call <16 x float> @"llvm.fma.v16f32"(<16 x float> %[[SPLAT]], <16 x float> %[[B1]], <16 x float> %{{.*}})
// A full tile updates C with plain vector loads and stores ...
// CHECK:       mk.cfull:
// CHECK:         load <16 x float>
// CHECK:         fadd <16 x float>
// CHECK:         store <16 x float>
// ... an edge tile with masked ones, lanes < n.
// CHECK:       mk.cedge:
// CHECK:         icmp slt <16 x i64> <i64 0, i64 1, i64 2
// CHECK:         call void @"llvm.masked.store.v16f32.p0"(<16 x float> %{{.*}}, ptr %{{.*}}, i32 4, <16 x i1> %{{.*}})
func.func @tile16(%a: memref<4x64xf32>, %b: memref<64x32xf32>, %c: memref<4x32xf32>, %kc: index, %m: index, %n: index) {
  %c0 = arith.constant 0 : index
  %acc = arith.constant false
  aicc_cpu.microkernel %a[%c0], %b[%c0], %c[%c0] k %kc rows %m cols %n accumulate %acc {mr = 4 : i64, nr = 32 : i64, vw = 16 : i64, a_rs = 64 : i64, a_ks = 1 : i64, b_ks = 32 : i64, ldc = 32 : i64, ku = 2 : i64, b_pf = 16 : i64} : memref<4x64xf32>, memref<64x32xf32>, memref<4x32xf32>
  func.return
}

// With vw = 8 (AVX2 width) the same tile is 4 x 4 vectors of <8 x float>.
// CHECK-LABEL: define internal void @"aicc.microkernel.float.4x32.v8.64.1.32.32.1.0.0.0"
// CHECK:       loop:
// CHECK-COUNT-16: phi  <8 x float> [zeroinitializer, %"start"]
// CHECK:         call <8 x float> @"llvm.fma.v8f32"(<8 x float>
func.func @tile8(%a: memref<4x64xf32>, %b: memref<64x32xf32>, %c: memref<4x32xf32>, %kc: index, %m: index, %n: index) {
  %c0 = arith.constant 0 : index
  %acc = arith.constant true
  aicc_cpu.microkernel %a[%c0], %b[%c0], %c[%c0] k %kc rows %m cols %n accumulate %acc {mr = 4 : i64, nr = 32 : i64, vw = 8 : i64, a_rs = 64 : i64, a_ks = 1 : i64, b_ks = 32 : i64, ldc = 32 : i64, ku = 1 : i64} : memref<4x64xf32>, memref<64x32xf32>, memref<4x32xf32>
  func.return
}

// With an init operand (a bias, init_rs = 0) the first K block starts each row of the tile
// from the bias instead of C: the source pointer is selected on `accumulate`.
// CHECK-LABEL: define internal void @"aicc.microkernel.float.2x16.v16.8.1.16.16.1.0.0.0.init0"
// CHECK-SAME:    (ptr captures(none) noalias %{{.*}}, ptr captures(none) noalias %{{.*}}, ptr captures(none) noalias %{{.*}}, i64 %{{.*}}, i64 %{{.*}}, i64 %{{.*}}, i1 %[[ACC:[^,]*]], ptr captures(none) noalias %[[INIT:[^)]*]])
// CHECK:       mk.cfull:
// CHECK:         %[[C0:.*]] = getelementptr inbounds float, ptr %{{.*}}, i64 0
// CHECK:         %[[I0:.*]] = getelementptr inbounds float, ptr %[[INIT]], i64 0
// CHECK:         %[[SRC:.*]] = select i1 %[[ACC]], ptr %[[C0]], ptr %[[I0]]
// CHECK:         %[[OLD:.*]] = load <16 x float>, ptr %[[SRC]]
// CHECK:         %[[NEW:.*]] = fadd <16 x float> %[[OLD]], %{{.*}}
// CHECK:         store <16 x float> %[[NEW]], ptr %[[C0]]
func.func @with_bias(%a: memref<2x8xf32>, %b: memref<8x16xf32>, %c: memref<2x16xf32>, %bias: memref<16xf32>, %kc: index, %m: index, %n: index, %acc: i1) {
  %c0 = arith.constant 0 : index
  aicc_cpu.microkernel %a[%c0], %b[%c0], %c[%c0] k %kc rows %m cols %n accumulate %acc init %bias[%c0] : memref<16xf32> {mr = 2 : i64, nr = 16 : i64, vw = 16 : i64, a_rs = 8 : i64, a_ks = 1 : i64, b_ks = 16 : i64, ldc = 16 : i64, ku = 1 : i64, init_rs = 0 : i64} : memref<2x8xf32>, memref<8x16xf32>, memref<2x16xf32>
  func.return
}

// With one init value per row (init_cs = 0: a conv's per-channel bias, C being
// (OC, OH*OW)), the first K block starts row r from init[r * init_rs] splat to every lane.
// CHECK-LABEL: define internal void @"aicc.microkernel.float.2x16.v16.8.1.16.16.1.0.0.0.init1.rowinit"
// CHECK-SAME:    i1 %[[ACC:[^,]*]], ptr captures(none) noalias %[[INIT:[^)]*]])
// CHECK:       mk.cfull:
// CHECK:         %[[C0:.*]] = getelementptr inbounds float, ptr %{{.*}}, i64 0
// CHECK:         %[[OLD:.*]] = load <16 x float>, ptr %[[C0]]
// CHECK:         %[[X:.*]] = load float, ptr %{{.*}}
// CHECK:         %[[INS:.*]] = insertelement <16 x float> undef, float %[[X]], i32 0
// CHECK:         %[[SPLAT:.*]] = shufflevector <16 x float> %[[INS]], <16 x float> undef, <16 x i32> zeroinitializer
// CHECK:         %[[START:.*]] = select i1 %[[ACC]], <16 x float> %[[OLD]], <16 x float> %[[SPLAT]]
// CHECK:         %[[NEW:.*]] = fadd <16 x float> %[[START]], %{{.*}}
// CHECK:         store <16 x float> %[[NEW]], ptr %[[C0]]
func.func @with_row_bias(%a: memref<2x8xf32>, %b: memref<8x16xf32>, %c: memref<2x16xf32>, %bias: memref<2xf32>, %kc: index, %m: index, %n: index, %acc: i1) {
  %c0 = arith.constant 0 : index
  aicc_cpu.microkernel %a[%c0], %b[%c0], %c[%c0] k %kc rows %m cols %n accumulate %acc init %bias[%c0] : memref<2xf32> {mr = 2 : i64, nr = 16 : i64, vw = 16 : i64, a_rs = 8 : i64, a_ks = 1 : i64, b_ks = 16 : i64, ldc = 16 : i64, ku = 1 : i64, init_rs = 1 : i64, init_cs = 0 : i64} : memref<2x8xf32>, memref<8x16xf32>, memref<2x16xf32>
  func.return
}

// An epilogue region (ReLU6 here: max(x, 0), then min(., 6)): applied to each updated vector of
// C, in registers, right before its store; its constants splat. The kernel's name carries a
// digest of the region, so kernels with other epilogues get functions of their own.
// CHECK-LABEL: define internal void @"aicc.microkernel.float.2x16.v16.8.1.16.16.1.0.0.0.epi{{[0-9a-f]+}}"
// CHECK:       mk.cfull:
// CHECK:         %[[OLD:.*]] = load <16 x float>
// CHECK:         %[[SUM:.*]] = fadd <16 x float> %[[OLD]], %{{.*}}
// CHECK:         %[[NEW:.*]] = select i1 %{{.*}}, <16 x float> %[[SUM]], <16 x float> %{{.*}}
// CHECK-NEXT:    %[[LO:.*]] = call <16 x float> @"llvm.maximum.v16f32"(<16 x float> %[[NEW]], <16 x float> <float {{ *}}0x0,
// CHECK-NEXT:    %[[HI:.*]] = call <16 x float> @"llvm.minimum.v16f32"(<16 x float> %[[LO]], <16 x float> <float 0x4018000000000000,
// CHECK-NEXT:    store <16 x float> %[[HI]]
// CHECK:       mk.cedge:
// CHECK:         call <16 x float> @"llvm.minimum.v16f32"
// CHECK-NEXT:    call void @"llvm.masked.store.v16f32.p0"
func.func @with_epilogue(%a: memref<2x8xf32>, %b: memref<8x16xf32>, %c: memref<2x16xf32>, %kc: index, %m: index, %n: index, %acc: i1) {
  %c0 = arith.constant 0 : index
  aicc_cpu.microkernel %a[%c0], %b[%c0], %c[%c0] k %kc rows %m cols %n accumulate %acc epilogue {
  ^bb0(%x: f32):
    %zero = arith.constant 0.0 : f32
    %six = arith.constant 6.0 : f32
    %lo = arith.maximumf %x, %zero : f32
    %hi = arith.minimumf %lo, %six : f32
    aicc_cpu.yield %hi : f32
  } {mr = 2 : i64, nr = 16 : i64, vw = 16 : i64, a_rs = 8 : i64, a_ks = 1 : i64, b_ks = 16 : i64, ldc = 16 : i64, ku = 1 : i64} : memref<2x8xf32>, memref<8x16xf32>, memref<2x16xf32>
  func.return
}

// With l2pf, the kernel function takes one more pointer (the call passes &w[64]), and each
// unrolled iteration of the k loop (ku = 2 steps) fetches l2pf_rate = 3 lines of it into L2
// (locality 2: prefetcht1): lines 0 and 2 after the first step, line 1 after the second, at
// (k / ku) * 3 lines on.
// CHECK-LABEL: define internal void @"aicc.microkernel.float.4x16.v16.64.1.16.16.2.0.0.0.l2pf3"
// CHECK-SAME:    i1 %{{[^,]*}}, ptr captures(none) noalias %[[PF:[^)]*]])
// CHECK:       loop:
// CHECK:         %[[IT:.*]] = sdiv i64 %[[K:.*]], 2
// CHECK-NEXT:    %[[LINE:.*]] = mul nsw i64 %[[IT]], 48
// CHECK-NEXT:    %[[OFF0:.*]] = add nsw i64 %[[LINE]], 0
// CHECK-NEXT:    %[[P0:.*]] = getelementptr float, ptr %[[PF]], i64 %[[OFF0]]
// CHECK-NEXT:    call void @"llvm.prefetch.p0"(ptr %[[P0]], i32 0, i32 2, i32 1)
// CHECK:         add nsw i64 %{{.*}}, 32
// CHECK:         call void @"llvm.prefetch.p0"(ptr %{{.*}}, i32 0, i32 2, i32 1)
// CHECK:         call <16 x float> @"llvm.fma.v16f32"
// CHECK:         add nsw i64 %{{.*}}, 16
// CHECK:         call void @"llvm.prefetch.p0"(ptr %{{.*}}, i32 0, i32 2, i32 1)
// CHECK:         %{{.*}} = add nsw i64 %"iv", 2
func.func @with_l2pf(%a: memref<4x64xf32>, %b: memref<64x16xf32>, %c: memref<4x16xf32>, %w: memref<4096xf32>, %kc: index, %m: index, %n: index) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %acc = arith.constant false
  aicc_cpu.microkernel %a[%c0], %b[%c0], %c[%c0] k %kc rows %m cols %n accumulate %acc l2pf %w[%c64] : memref<4096xf32> {mr = 4 : i64, nr = 16 : i64, vw = 16 : i64, a_rs = 64 : i64, a_ks = 1 : i64, b_ks = 16 : i64, ldc = 16 : i64, ku = 2 : i64, l2pf_rate = 3 : i64} : memref<4x64xf32>, memref<64x16xf32>, memref<4x16xf32>
  func.return
}
