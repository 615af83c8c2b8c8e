// RUN: env AICC_TARGET_CPU=skylake-avx512 aicc-opt %s -t llvm | filecheck %s --check-prefixes=CHECK,AVX512
// RUN: env AICC_TARGET_CPU=x86-64-v3 aicc-opt %s -t llvm | filecheck %s --check-prefixes=CHECK,AVX2
// Loop IR to LLVM IR: bare noalias pointers, inbounds GEPs on linearized static indices, and
// math.exp as inline polynomial code (no libm call), so LLVM can vectorize the loop. exp scales
// by 2**n with llvm.ldexp where the target CPU has it as a vector instruction (AVX-512's
// vscalefps), elsewhere with two multiplies by 2**(n/2) built in the exponent field (the
// exponent bias folded into the subtraction that reads n from the sum's bits: n + 254). n is
// rounded by adding 1.5 * 2**23 and read from the sum's bits: no fptosi, and no NaN select (a
// NaN runs through the arithmetic and comes out NaN).

// CHECK-LABEL: define void @"scale"(ptr captures(none) noalias %{{.*}}, ptr captures(none) noalias %{{.*}})
// CHECK:         %[[ROW:.*]] = mul nsw i64 %{{.*}}, 129
// CHECK:         %[[LIN:.*]] = add nsw i64 %[[ROW]], %{{.*}}
// CHECK:         getelementptr inbounds float, ptr %{{.*}}, i64 %[[LIN]]
// CHECK-NOT:     fptosi
// CHECK:         %[[T:.*]] = call float @"llvm.fmuladd.f32"(float %{{.*}}, float 0x3ff7154760000000, float 0x4168000000000000)
// CHECK:         fsub float %[[T]], 0x4168000000000000
// CHECK:         %[[TB:.*]] = bitcast float %[[T]] to i32
// AVX512:        %[[N:.*]] = sub i32 %[[TB]], 1262485504
// AVX512:        call float @"llvm.ldexp.f32.i32"(float %{{.*}}, i32 %[[N]])
// AVX2-NOT:      @"llvm.ldexp
// AVX2:          %[[E:.*]] = sub i32 %[[TB]], 1262485250
// AVX2:          %[[E1:.*]] = ashr i32 %[[E]], 1
// AVX2:          shl i32 %[[E1]], 23
// AVX2:          %[[E2:.*]] = sub i32 %[[E]], %[[E1]]
// AVX2:          shl i32 %[[E2]], 23
// AVX2:          fmul float
// AVX2:          fmul float
// CHECK-NOT:     fcmp uno
// CHECK:         store float
// CHECK:         icmp slt i64 %{{.*}}, 129
// CHECK:         icmp slt i64 %{{.*}}, 4
// CHECK-NOT:   @expf

// An exp marked afn (softmax's, attention's) scales by 2**n in one factor on every target,
// AVX-512 too: its bits (n + 127) << 23 are t's bits shifted by 23 (the magic's bits vanish
// modulo 2^32) plus those of 1.0 (1065353216), one multiply. The lower clamp is -88, so that
// n >= -127, whose factor is +0.0 (results below 2^-126 are zero): a masked score's exp is
// never a denormal, which vscalefps would make of the clamp at -104.
// CHECK-LABEL: define void @"scale_afn"
// CHECK:         fcmp ogt float %{{.*}}, 0x4056400000000000
// CHECK:         fcmp olt float %{{.*}}, 0xc056000000000000
// CHECK:         %[[T:.*]] = call float @"llvm.fmuladd.f32"(float %{{.*}}, float 0x3ff7154760000000, float 0x4168000000000000)
// CHECK-NOT:     @"llvm.ldexp
// CHECK:         %[[TB:.*]] = bitcast float %[[T]] to i32
// CHECK:         %[[S:.*]] = shl i32 %[[TB]], 23
// CHECK:         %[[E:.*]] = add i32 %[[S]], 1065353216
// CHECK:         %[[F:.*]] = bitcast i32 %[[E]] to float
// CHECK:         fmul float %{{.*}}, %[[F]]
// CHECK-NOT:     ashr
// CHECK:         store float

// An exp marked aicc.nonpositive_arg (softmax's x - max, attention's s - max: never above 0)
// has no upper clamp (89, against 2^n's overflow): only the lower one, then the same code.
// CHECK-LABEL: define void @"scale_nonpositive"
// CHECK-NOT:     0x4056400000000000
// CHECK:         fcmp olt float %{{.*}}, 0xc056000000000000
// CHECK:         call float @"llvm.fmuladd.f32"(float %{{.*}}, float 0x3ff7154760000000, float 0x4168000000000000)
// CHECK-NOT:     0x4056400000000000
// CHECK:         store float

func.func @scale(%x: memref<4x129xf32>, %o: memref<4x129xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c129 = arith.constant 129 : index
  %two = arith.constant 2.0 : f32
  "scf.parallel"(%c0, %c0, %c4, %c129, %c1, %c1) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%i: index, %j: index):
    %v = memref.load %x[%i, %j] : memref<4x129xf32>
    %e = math.exp %v : f32
    %m = arith.mulf %e, %two : f32
    memref.store %m, %o[%i, %j] : memref<4x129xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  func.return
}

func.func @scale_afn(%x: memref<4x129xf32>, %o: memref<4x129xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c129 = arith.constant 129 : index
  "scf.parallel"(%c0, %c0, %c4, %c129, %c1, %c1) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%i: index, %j: index):
    %v = memref.load %x[%i, %j] : memref<4x129xf32>
    %e = math.exp %v fastmath<afn> : f32
    memref.store %e, %o[%i, %j] : memref<4x129xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  func.return
}

func.func @scale_nonpositive(%x: memref<4x129xf32>, %o: memref<4x129xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c129 = arith.constant 129 : index
  "scf.parallel"(%c0, %c0, %c4, %c129, %c1, %c1) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%i: index, %j: index):
    %v = memref.load %x[%i, %j] : memref<4x129xf32>
    %e = math.exp %v fastmath<afn> {aicc.nonpositive_arg} : f32
    memref.store %e, %o[%i, %j] : memref<4x129xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  func.return
}
