// RUN: aicc-opt %s -t llvm | filecheck %s
// aicc_cpu.conv_kernel becomes a call of one internal, noinline function per configuration:
// owb x ocv <vw x float> accumulators carried through the kh, kw and input-channel loops (the
// channel loop unrolled 4 times, the 5th channel after it), each step loading ocv vectors of
// packed weights and broadcasting owb input values, then the tile transposed into the NCHW
// output's rows: for each of the ocn = 13 channels, one <owb x float> row added into O.

// CHECK-LABEL: define void @"conv"
// CHECK:         call void @"aicc.conv_kernel.owb3.ocv2.ocn13.vw8.ic5.kh3.kw2.sw2.dh1.dw1.x_cs99.x_rs11.w_ocs240.o_cs20"(ptr %{{.*}}, ptr %{{.*}}, ptr %{{.*}})

// CHECK-LABEL: define internal void @"aicc.conv_kernel.owb3.ocv2.ocn13.vw8.ic5.kh3.kw2.sw2.dh1.dw1.x_cs99.x_rs11.w_ocs240.o_cs20"(ptr captures(none) noalias %{{.*}}, ptr captures(none) noalias %{{.*}}, ptr captures(none) noalias %{{.*}}) {{.*}}alignstack(64) noinline
// A 64-byte aligned frame (alignstack(64)): the accumulators the kernel spills get slots of
// their own cache lines, wherever the caller's stack lies.
// The kh loop carries the 3 x 2 accumulators; after it (its exit block is printed first) the
// tile goes out: one <3 x float> row per output channel, o_cs = 20 floats apart, the last of
// the 13 at 12 * 20 = 240.
// CHECK:       loop:
// CHECK-COUNT-6: phi  <8 x float> [zeroinitializer, %"start"]
// CHECK:       loop.exit:
// CHECK:         extractelement <8 x float> %{{.*}}, i32 0
// CHECK:         insertelement <3 x float> undef
// CHECK:         load <3 x float>
// CHECK:         fadd <3 x float>
// CHECK:         store <3 x float>
// CHECK:         getelementptr inbounds float, ptr %{{.*}}, i64 20
// CHECK:         getelementptr inbounds float, ptr %{{.*}}, i64 240
// CHECK-NOT:     getelementptr inbounds float, ptr %{{.*}}, i64 260
// CHECK:         ret void
// Then the kw loop and the channel loop. One input channel: two weight vectors (the second
// w_ocs = 240 floats on), three broadcasts of inputs sw = 2 apart, six FMAs.
// CHECK:       loop.1:
// CHECK:       loop.exit.1:
// CHECK:       loop.2:
// CHECK:         %[[W0:.*]] = load <8 x float>, ptr %{{.*}}, align 4
// CHECK:         add nsw i64 %{{.*}}, 240
// CHECK:         %[[W1:.*]] = load <8 x float>, ptr %{{.*}}, align 4
// CHECK:         load float, ptr %{{.*}}, align 4
// CHECK:         %[[S0:.*]] = shufflevector <8 x float> %{{.*}}, <8 x float> undef, <8 x i32> zeroinitializer
// CHECK:         call <8 x float> @"llvm.fma.v8f32"(<8 x float> %[[S0]], <8 x float> %[[W0]], <8 x float> %{{.*}})
// CHECK:         call <8 x float> @"llvm.fma.v8f32"(<8 x float> %[[S0]], <8 x float> %[[W1]], <8 x float> %{{.*}})
// CHECK:         add nsw i64 %{{.*}}, 2
// CHECK:         load float
// CHECK-COUNT-4: call <8 x float> @"llvm.fma.v8f32"
// The 4-times unrolled channel loop holds 4 x 6 FMAs, then the 5th channel follows it.
// CHECK-COUNT-18: call <8 x float> @"llvm.fma.v8f32"
// CHECK:       loop.exit.2:
// CHECK-COUNT-6: call <8 x float> @"llvm.fma.v8f32"
// CHECK-NOT:     call <8 x float> @"llvm.fma.v8f32"
// CHECK:         add nsw i64 %"iv.1", 1

// start = 2: the tile starts from the bias, added to the accumulators before the transpose
// (one <8 x float> load of the 8 channels' bias, one fadd per accumulator); then each output
// row is stored without reading the output.
// CHECK-LABEL: define internal void @"aicc.conv_kernel.owb4.ocv1.ocn8.vw8.ic1.kh1.kw1.sw1.dh1.dw1.x_cs16.x_rs4.w_ocs8.o_cs16.start2"(ptr {{.*}}, ptr {{.*}}, ptr {{.*}}, ptr {{.*}})
// CHECK:       loop.exit:
// CHECK:         %[[B:.*]] = load <8 x float>, ptr %{{.*}}, align 4
// CHECK-COUNT-4: fadd <8 x float> %{{.*}}, %[[B]]
// CHECK:         insertelement <4 x float>
// CHECK-NOT:     load <4 x float>
// CHECK:         store <4 x float> %{{.*}}, ptr %{{.*}}, align 4

// 13 channels in two vectors of 8: the second vector's bias is a masked load of its 5
// channels (the bias has no 14th element), zeros past them; relu applies to the 2 x 2
// accumulators, before the transpose, since no residual comes between.
// CHECK-LABEL: define internal void @"aicc.conv_kernel.owb2.ocv2.ocn13.vw8.ic1.kh1.kw1.sw1.dh1.dw1.x_cs16.x_rs4.w_ocs8.o_cs4.start2.relu"
// CHECK:       loop.exit:
// CHECK:         load <8 x float>, ptr %{{.*}}, align 4
// CHECK:         call <8 x float> @"llvm.masked.load.v8f32.p0"(ptr %{{.*}}, i32 4, <8 x i1> <i1 true, i1 true, i1 true, i1 true, i1 true, i1 false, i1 false, i1 false>, <8 x float> zeroinitializer)
// CHECK-COUNT-4: call <8 x float> @"llvm.maximum.v8f32"
// CHECK-NOT:     llvm.maximum
// CHECK:         store <2 x float>
// CHECK:         ret void

// pf = 4: each weight stream is prefetched 4 input channels (4 * vw = 32 floats) ahead, once
// per 64-byte line: with vw = 8 (32-byte vectors), at every other channel of the unrolled
// loop, 2 prefetches (read, locality 3: into L1) for its 4 channels of 4 FMAs each.
// CHECK-LABEL: define internal void @"aicc.conv_kernel.owb4.ocv1.ocn8.vw8.ic4.kh1.kw1.sw1.dh1.dw1.x_cs16.x_rs4.w_ocs8.o_cs16.pf4.start1"
// CHECK:       loop.2:
// CHECK:         add nsw i64 %{{.*}}, 32
// CHECK-NEXT:    %[[PF:.*]] = getelementptr float, ptr %{{.*}}, i64 %{{.*}}
// CHECK-NEXT:    call void @"llvm.prefetch.p0"(ptr %[[PF]], i32 0, i32 3, i32 1)
// CHECK-COUNT-8: call <8 x float> @"llvm.fma.v8f32"
// CHECK:         call void @"llvm.prefetch.p0"
// CHECK-COUNT-8: call <8 x float> @"llvm.fma.v8f32"
// CHECK-NOT:     llvm.prefetch

// With l2pf, one more pointer after the residual's (the residual, which may be the output,
// is not noalias; the l2pf stream is), and each unrolled step of the channel loop (4
// channels) fetches l2pf_rate = 5 lines of it into L2 (locality 2): line (tap * ic / 4 +
// c / 4) * 5 + j, lines 0 and 4 with the first channel, 1, 2 and 3 with the others.
// CHECK-LABEL: define internal void @"aicc.conv_kernel.owb4.ocv1.ocn8.vw8.ic8.kh1.kw1.sw1.dh1.dw1.x_cs16.x_rs4.w_ocs8.o_cs16.l2pf5.start1.res"
// CHECK-SAME:    (ptr captures(none) noalias %{{.*}}, ptr captures(none) noalias %{{.*}}, ptr captures(none) %{{.*}}, ptr captures(none) %{{.*}}, ptr captures(none) noalias %[[L2:[^)]*]])
// CHECK:       loop.2:
// CHECK-COUNT-4: call <8 x float> @"llvm.fma.v8f32"
// CHECK:         %[[IT:.*]] = sdiv i64 %"iv.2", 4
// CHECK-NEXT:    %[[STEP:.*]] = add nsw i64 %{{.*}}, %[[IT]]
// CHECK-NEXT:    %[[LINE:.*]] = mul nsw i64 %[[STEP]], 80
// CHECK-NEXT:    %[[OFF:.*]] = add nsw i64 %[[LINE]], 0
// CHECK-NEXT:    %[[P:.*]] = getelementptr float, ptr %[[L2]], i64 %[[OFF]]
// CHECK-NEXT:    call void @"llvm.prefetch.p0"(ptr %[[P]], i32 0, i32 2, i32 1)
// CHECK:         add nsw i64 %{{.*}}, 64
// CHECK-NEXT:    getelementptr float, ptr %[[L2]]
// CHECK-NEXT:    call void @"llvm.prefetch.p0"(ptr %{{.*}}, i32 0, i32 2, i32 1)
// CHECK-COUNT-4: call <8 x float> @"llvm.fma.v8f32"
// CHECK:         add nsw i64 %{{.*}}, 16
// CHECK-NEXT:    getelementptr float, ptr %[[L2]]
// CHECK-NEXT:    call void @"llvm.prefetch.p0"(ptr %{{.*}}, i32 0, i32 2, i32 1)

func.func @conv(%x: memref<1x5x9x11xf32>, %w: memref<480xf32>, %o: memref<1x13x4x5xf32>) {
  %c0 = arith.constant 0 : index
  %xf = memref.collapse_shape %x [[0, 1, 2, 3]] : memref<1x5x9x11xf32> into memref<495xf32>
  %of = memref.collapse_shape %o [[0, 1, 2, 3]] : memref<1x13x4x5xf32> into memref<260xf32>
  aicc_cpu.conv_kernel %xf[%c0], %w[%c0], %of[%c0] {owb = 3 : i64, ocv = 2 : i64, ocn = 13 : i64, vw = 8 : i64, ic = 5 : i64, kh = 3 : i64, kw = 2 : i64, sw = 2 : i64, dh = 1 : i64, dw = 1 : i64, x_cs = 99 : i64, x_rs = 11 : i64, w_ocs = 240 : i64, o_cs = 20 : i64} : memref<495xf32>, memref<480xf32>, memref<260xf32>
  func.return
}

func.func @conv_bias(%x: memref<16xf32>, %w: memref<8xf32>, %o: memref<128xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  aicc_cpu.conv_kernel %x[%c0], %w[%c0], %o[%c0] bias %b[%c0] : memref<8xf32> {owb = 4 : i64, ocv = 1 : i64, ocn = 8 : i64, vw = 8 : i64, ic = 1 : i64, kh = 1 : i64, kw = 1 : i64, sw = 1 : i64, dh = 1 : i64, dw = 1 : i64, x_cs = 16 : i64, x_rs = 4 : i64, w_ocs = 8 : i64, o_cs = 16 : i64, start = 2 : i64} : memref<16xf32>, memref<8xf32>, memref<128xf32>
  func.return
}

func.func @conv_bias_edge(%x: memref<16xf32>, %w: memref<16xf32>, %o: memref<80xf32>, %b: memref<13xf32>) {
  %c0 = arith.constant 0 : index
  aicc_cpu.conv_kernel %x[%c0], %w[%c0], %o[%c0] bias %b[%c0] : memref<13xf32> {owb = 2 : i64, ocv = 2 : i64, ocn = 13 : i64, vw = 8 : i64, ic = 1 : i64, kh = 1 : i64, kw = 1 : i64, sw = 1 : i64, dh = 1 : i64, dw = 1 : i64, x_cs = 16 : i64, x_rs = 4 : i64, w_ocs = 8 : i64, o_cs = 4 : i64, start = 2 : i64, relu} : memref<16xf32>, memref<16xf32>, memref<80xf32>
  func.return
}

func.func @conv_pf(%x: memref<64xf32>, %w: memref<32xf32>, %o: memref<128xf32>) {
  %c0 = arith.constant 0 : index
  aicc_cpu.conv_kernel %x[%c0], %w[%c0], %o[%c0] {owb = 4 : i64, ocv = 1 : i64, ocn = 8 : i64, vw = 8 : i64, ic = 4 : i64, kh = 1 : i64, kw = 1 : i64, sw = 1 : i64, dh = 1 : i64, dw = 1 : i64, x_cs = 16 : i64, x_rs = 4 : i64, w_ocs = 8 : i64, o_cs = 16 : i64, start = 1 : i64, pf = 4 : i64} : memref<64xf32>, memref<32xf32>, memref<128xf32>
  func.return
}

func.func @conv_l2pf(%x: memref<128xf32>, %w: memref<64xf32>, %o: memref<128xf32>, %r: memref<128xf32>, %wn: memref<4096xf32>) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  aicc_cpu.conv_kernel %x[%c0], %w[%c0], %o[%c0] res %r[%c0] : memref<128xf32> l2pf %wn[%c64] : memref<4096xf32> {owb = 4 : i64, ocv = 1 : i64, ocn = 8 : i64, vw = 8 : i64, ic = 8 : i64, kh = 1 : i64, kw = 1 : i64, sw = 1 : i64, dh = 1 : i64, dw = 1 : i64, x_cs = 16 : i64, x_rs = 4 : i64, w_ocs = 8 : i64, o_cs = 16 : i64, start = 1 : i64, l2pf_rate = 5 : i64} : memref<128xf32>, memref<64xf32>, memref<128xf32>
  func.return
}
