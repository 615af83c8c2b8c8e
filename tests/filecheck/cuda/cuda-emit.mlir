// RUN: aicc-opt %s -p map-to-gpu --split-input-file -t cuda | filecheck %s
// Mapped loop IR to CUDA C: what each kind of kernel looks like.

// Softmax in one kernel: a block per row, each thread keeping its elements of the row in
// registers; the input is read once and the output written once; max with NaN propagation.
// CHECK-LABEL: softmax_k0: row_reduce, grid 5, block 32
// CHECK:       extern "C" __global__ void __launch_bounds__(32) softmax_k0(const float* __restrict__ [[X:p[0-9]+]], float* __restrict__ [[Y:p[0-9]+]])
// CHECK:         float [[XR:row[0-9]+]][2];
// CHECK:         for (int e = 0; e < 2; ++e) {
// CHECK:           [[XR]][e] = [[X]][
// CHECK:           aicc_max(
// CHECK:         __shfl_xor_sync
// CHECK:         = [[XR]][e] - s{{[0-9]+}};
// CHECK-NEXT:    expf(
// CHECK:         __shfl_xor_sync
// CHECK:         [[Y]][{{.*}}] = v{{[0-9]+}};
// CHECK-NOT:     [[X]][
// CHECK:       }
func.func @softmax(%0: memref<5x37xf32>, %1: memref<5x37xf32>, %workspace: memref<832xi8>) attributes {aicc.workspace_bytes = 832 : i64} {
  %2 = arith.constant 0xff800000 : f32
  %3 = arith.constant 768 : index
  %4 = memref.view %workspace[%3][] : memref<832xi8> to memref<5x1xf32>
  %5 = arith.constant 0 : index
  %6 = arith.constant 1 : index
  %7 = arith.constant 5 : index
  "scf.parallel"(%5, %5, %7, %6, %6, %6) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%8: index, %9: index):
    memref.store %2, %4[%8, %9] : memref<5x1xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  %10 = arith.constant 37 : index
  "scf.parallel"(%5, %7, %6) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%11: index):
    %12 = memref.load %4[%11, %5] : memref<5x1xf32>
    %13 = scf.for %14 = %5 to %10 step %6 iter_args(%15 = %12) -> (f32) {
      %16 = memref.load %0[%11, %14] : memref<5x37xf32>
      %17 = arith.maximumf %15, %16 fastmath<reassoc> : f32
      scf.yield %17 : f32
    }
    memref.store %13, %4[%11, %5] : memref<5x1xf32>
    scf.reduce
  }) : (index, index, index) -> ()
  %18 = memref.view %workspace[%5][] : memref<832xi8> to memref<5x37xf32>
  "scf.parallel"(%5, %5, %7, %10, %6, %6) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%19: index, %20: index):
    %21 = memref.load %0[%19, %20] : memref<5x37xf32>
    %22 = memref.load %4[%19, %5] : memref<5x1xf32>
    %23 = arith.subf %21, %22 : f32
    %24 = math.exp %23 : f32
    memref.store %24, %18[%19, %20] : memref<5x37xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  %25 = arith.constant 0.000000e+00 : f32
  "scf.parallel"(%5, %5, %7, %6, %6, %6) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%26: index, %27: index):
    memref.store %25, %4[%26, %27] : memref<5x1xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  "scf.parallel"(%5, %7, %6) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%28: index):
    %29 = memref.load %4[%28, %5] : memref<5x1xf32>
    %30 = scf.for %31 = %5 to %10 step %6 iter_args(%32 = %29) -> (f32) {
      %33 = memref.load %18[%28, %31] : memref<5x37xf32>
      %34 = arith.addf %32, %33 fastmath<reassoc> : f32
      scf.yield %34 : f32
    }
    memref.store %30, %4[%28, %5] : memref<5x1xf32>
    scf.reduce
  }) : (index, index, index) -> ()
  "scf.parallel"(%5, %5, %7, %10, %6, %6) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%35: index, %36: index):
    %37 = memref.load %18[%35, %36] : memref<5x37xf32>
    %38 = memref.load %4[%35, %5] : memref<5x1xf32>
    %39 = arith.divf %37, %38 : f32
    memref.store %39, %1[%35, %36] : memref<5x37xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  func.return
}

// -----

// Matmul with its fill and bias+relu epilogue: double-buffered shared tiles, float4 loads of A
// (K = 20 is a multiple of 4), guarded scalar loads of B (N = 130 is not), the epilogue in the
// thread that finishes each element; the temporary C is never written to memory.
// CHECK-LABEL: matmul_bias_relu_k0: matmul, grid 3 x 2 x 1, block 16 x 16
// CHECK:         __shared__ __align__(16) float As[2][16][68];
// CHECK:         __shared__ __align__(16) float Bs[2][16][68];
// CHECK:         ra[0] = ({{.*}}) ? *reinterpret_cast<const float4*>(
// CHECK:         rb[0].w = ({{.*}} + 3 < 130 {{.*}}) ? p{{[0-9]+}}[{{.*}} + 3] : 0.0f;
// CHECK:         __syncthreads();
// CHECK:         for (int k0 = 0, cur = 0; k0 < 20; k0 += 16, cur ^= 1) {
// CHECK:           acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
// CHECK:           As[cur ^ 1][kk + 0][mn] = ra[0].x;
// CHECK:         if (r < 70 && c < 130) {
// CHECK-NEXT:      const float v = acc[i][j];
// CHECK:           aicc_max(
// CHECK-NEXT:      p{{[0-9]+}}[r * 130 + c] = v{{[0-9]+}};
// CHECK-NEXT:    }
"memref.global"() <{sym_name = "__constant_0", type = memref<f32>, initial_value = dense<0.000000e+00> : tensor<f32>, sym_visibility = "private", constant}> : () -> ()
func.func @matmul_bias_relu(%0: memref<70x20xf32>, %1: memref<20x130xf32>, %2: memref<130xf32>, %3: memref<70x130xf32>, %workspace: memref<36416xi8>) attributes {aicc.workspace_bytes = 36416 : i64} {
  %4 = arith.constant 0.000000e+00 : f32
  %5 = arith.constant 0 : index
  %6 = memref.view %workspace[%5][] : memref<36416xi8> to memref<70x130xf32>
  %7 = arith.constant 1 : index
  %8 = arith.constant 70 : index
  %9 = arith.constant 130 : index
  "scf.parallel"(%5, %5, %8, %9, %7, %7) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%10: index, %11: index):
    memref.store %4, %6[%10, %11] : memref<70x130xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  %12 = arith.constant 20 : index
  "scf.parallel"(%5, %8, %7) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%13: index):
    scf.for %14 = %5 to %12 step %7 {
      scf.for %15 = %5 to %9 step %7 {
        %16 = memref.load %0[%13, %14] : memref<70x20xf32>
        %17 = memref.load %1[%14, %15] : memref<20x130xf32>
        %18 = memref.load %6[%13, %15] : memref<70x130xf32>
        %19 = arith.mulf %16, %17 : f32
        %20 = arith.addf %19, %18 : f32
        memref.store %20, %6[%13, %15] : memref<70x130xf32>
      }
    }
    scf.reduce
  }) : (index, index, index) -> ()
  %21 = memref.get_global @__constant_0 : memref<f32>
  "scf.parallel"(%5, %5, %8, %9, %7, %7) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%22: index, %23: index):
    %24 = memref.load %6[%22, %23] : memref<70x130xf32>
    %25 = memref.load %2[%23] : memref<130xf32>
    %26 = memref.load %21[] : memref<f32>
    %27 = arith.addf %24, %25 : f32
    %28 = arith.maximumf %27, %26 : f32
    memref.store %28, %3[%22, %23] : memref<70x130xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  func.return
}

// -----

// Column mean: threadIdx.x over the 7 kept columns, threadIdx.y splitting the 300 rows 128
// ways, a tree over threadIdx.y in shared memory, then the scaling epilogue.
// CHECK-LABEL: column_mean_k0: col_reduce, grid 1, block 8 x 128
// CHECK:         __launch_bounds__(1024)
// CHECK:         __shared__ float part[128][8];
// CHECK:         for (int rl{{[0-9]+}} = threadIdx.y; rl{{[0-9]+}} < 300; rl{{[0-9]+}} += 128) {
// CHECK:         for (int s = 64; s > 0; s >>= 1) {
// CHECK:         if (threadIdx.y != 0 || j{{[0-9]+}} >= 7) return;
// CHECK:         p{{[0-9]+}}[j{{[0-9]+}}] = v{{[0-9]+}};
"memref.global"() <{sym_name = "__constant_0", type = memref<f32>, initial_value = dense<0.00333333341> : tensor<f32>, sym_visibility = "private", constant}> : () -> ()
func.func @column_mean(%0: memref<300x7xf32>, %1: memref<7xf32>, %workspace: memref<64xi8>) attributes {aicc.workspace_bytes = 64 : i64} {
  %2 = arith.constant 0.000000e+00 : f32
  %3 = arith.constant 0 : index
  %4 = memref.view %workspace[%3][] : memref<64xi8> to memref<7xf32>
  %5 = arith.constant 1 : index
  %6 = arith.constant 7 : index
  "scf.parallel"(%3, %6, %5) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%7: index):
    memref.store %2, %4[%7] : memref<7xf32>
    scf.reduce
  }) : (index, index, index) -> ()
  %8 = arith.constant 300 : index
  scf.for %9 = %3 to %8 step %5 {
    scf.for %10 = %3 to %6 step %5 {
      %11 = memref.load %0[%9, %10] : memref<300x7xf32>
      %12 = memref.load %4[%10] : memref<7xf32>
      %13 = arith.addf %12, %11 : f32
      memref.store %13, %4[%10] : memref<7xf32>
    }
  }
  %14 = memref.get_global @__constant_0 : memref<f32>
  "scf.parallel"(%3, %6, %5) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%15: index):
    %16 = memref.load %4[%15] : memref<7xf32>
    %17 = memref.load %14[] : memref<f32>
    %18 = arith.mulf %16, %17 : f32
    memref.store %18, %1[%15] : memref<7xf32>
    scf.reduce
  }) : (index, index, index) -> ()
  func.return
}

// -----
// A large elementwise band (2^20 points, last dim a multiple of 4): a quarter of the threads,
// each running 4 neighbouring points with one float4 load per input and one float4 store,
// when every pointer is 16-byte aligned; the same 4 points with scalar accesses otherwise.
// CHECK-LABEL: bias_relu_k0: elementwise, grid 1024, block 256
// CHECK:         if (tid >= 262144) return;
// CHECK-NEXT:    const int gid = tid * 4;
// CHECK:         const bool aligned = ((reinterpret_cast<unsigned long long>(p0) | reinterpret_cast<unsigned long long>(p1) | reinterpret_cast<unsigned long long>(p2)) & 15) == 0;
// CHECK-NEXT:    if (aligned) {
// CHECK-NEXT:      const float4 [[X:f[0-9]+]] = *reinterpret_cast<const float4*>(&p0[[[I:i[0-9]+]] * 1024 + [[J:i[0-9]+]]]);
// CHECK-NEXT:      const float4 [[B:f[0-9]+]] = *reinterpret_cast<const float4*>(&p1[[[J]]]);
// CHECK-NEXT:      const float [[S0:v[0-9]+]] = [[X]].x + [[B]].x;
// CHECK:           const float [[S3:v[0-9]+]] = [[X]].w + [[B]].w;
// CHECK-NEXT:      const float [[R3:v[0-9]+]] = fmaxf([[S3]], 0.0f);
// CHECK-NEXT:      *reinterpret_cast<float4*>(&p2[[[I]] * 1024 + [[J]]]) = make_float4({{.*}}, [[R3]]);
// CHECK-NEXT:    } else {
// CHECK-NEXT:      const float {{v[0-9]+}} = p0[[[I]] * 1024 + ([[J]] + 0)];
// CHECK:           p2[[[I]] * 1024 + ([[J]] + 3)] =
// CHECK-NEXT:    }
func.func @bias_relu(%x: memref<1024x1024xf32>, %b: memref<1024xf32>, %y: memref<1024x1024xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 1024 : index
  "scf.parallel"(%c0, %c0, %n, %n, %c1, %c1) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%i: index, %j: index):
    %v = memref.load %x[%i, %j] : memref<1024x1024xf32>
    %w = memref.load %b[%j] : memref<1024xf32>
    %s = arith.addf %v, %w : f32
    %r = arith.maxnumf %s, %zero : f32
    memref.store %r, %y[%i, %j] : memref<1024x1024xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  func.return
}
