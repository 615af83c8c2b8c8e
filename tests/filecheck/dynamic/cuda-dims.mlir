// RUN: aicc-opt %s -p map-to-gpu | filecheck %s --check-prefix=GPU
// RUN: aicc-opt %s -p map-to-gpu -t cuda | filecheck %s --check-prefix=CUDA
// The cuda target with a dynamic batch (the MLP x @ w + b, relu, softmax of the loops stage).
// map-to-gpu: the sizes stay host-side index arithmetic (memref.dim, arith.muli) between the
// kernels, and each grid that depends on the batch is an expression of it (grid -1 and its
// grid_dynamic entry), evaluated by the host at each launch.
// GPU-LABEL: func.func @mlp
// GPU:         %[[B:.*]] = memref.dim %x, %{{.*}} : memref<?x64xf32>
// GPU:         gpu_map.kernel "mlp_k0" "matmul" attributes {grid = array<i64: 1, -1, 1>, {{.*}}grid_dynamic = ["ceildiv(d_batch, 64)"]}
// GPU:         gpu_map.kernel "mlp_k1" "row_reduce" attributes {grid = array<i64: -1>, {{.*}}grid_dynamic = ["d_batch"]}
// GPU-NOT:     gpu_map.kernel
//
// CUDA C: the kernels take the batch after their buffers and use it in their bounds, guards and
// strides; the row length (48) stays a constant, so softmax still keeps its row in registers.
// CUDA:        mlp_k0: matmul, grid 1 x ceildiv(d_batch, 64) x 1, block 16 x 16
// CUDA:        mlp_k0(const float* __restrict__ p0, {{.*}}, const int d_batch)
// CUDA:        < d_batch &&
// CUDA:        if (r < d_batch && c < 48) {
// CUDA:        mlp_k1: row_reduce, grid d_batch, block 32
// CUDA-NEXT:   from:
// CUDA-NEXT:   mlp_k1(const float* __restrict__ p0, float* __restrict__ p1) {
// CUDA:        float row{{[0-9]+}}[2];
builtin.module {
  func.func @mlp(%x: memref<?x64xf32>, %w: memref<64x48xf32>, %b: memref<48xf32>, %0: memref<?x48xf32>, %workspace: memref<?xi8>) attributes {aicc.arg_dims = ["batch", "", "", "batch"], aicc.workspace_dynamic = "batch*448", aicc.workspace_bytes = 0 : i64} {
    %1 = arith.constant 0 : index
    %batch = memref.dim %x, %1 : memref<?x64xf32>
    %2 = arith.constant 0.000000e+00 : f32
    %3 = memref.view %workspace[%1][%batch] {aicc.arena_slot = array<i64: 0, 0, 192>} : memref<?xi8> to memref<?x48xf32>
    %4 = arith.constant 1 : index
    %5 = memref.dim %3, %1 : memref<?x48xf32>
    %6 = arith.constant 48 : index
    "scf.parallel"(%1, %1, %5, %6, %4, %4) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
    ^bb0(%7: index, %8: index):
      memref.store %2, %3[%7, %8] : memref<?x48xf32>
      scf.reduce
    }) : (index, index, index, index, index, index) -> ()
    %9 = arith.constant 64 : index
    "scf.parallel"(%1, %batch, %4) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
    ^bb0(%10: index):
      scf.for %11 = %1 to %9 step %4 {
        scf.for %12 = %1 to %6 step %4 {
          %13 = memref.load %x[%10, %11] : memref<?x64xf32>
          %14 = memref.load %w[%11, %12] : memref<64x48xf32>
          %15 = memref.load %3[%10, %12] : memref<?x48xf32>
          %16 = arith.mulf %13, %14 : f32
          %17 = arith.addf %16, %15 : f32
          memref.store %17, %3[%10, %12] : memref<?x48xf32>
        }
      }
      scf.reduce
    }) : (index, index, index) -> ()
    %18 = arith.constant 192 : index
    %19 = arith.muli %batch, %18 : index
    %20 = memref.view %workspace[%19][%batch] {aicc.arena_slot = array<i64: 0, 192, 384>} : memref<?xi8> to memref<?x48xf32>
    "scf.parallel"(%1, %1, %5, %6, %4, %4) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
    ^bb0(%21: index, %22: index):
      %23 = memref.load %3[%21, %22] : memref<?x48xf32>
      %24 = memref.load %b[%22] : memref<48xf32>
      %25 = arith.addf %23, %24 : f32
      %26 = arith.maximumf %25, %2 : f32
      memref.store %26, %20[%21, %22] : memref<?x48xf32>
      scf.reduce
    }) : (index, index, index, index, index, index) -> ()
    %27 = arith.constant 0xff800000 : f32
    %28 = arith.constant 384 : index
    %29 = arith.muli %batch, %28 : index
    %30 = memref.view %workspace[%29][%batch] {aicc.arena_slot = array<i64: 0, 384, 448>} : memref<?xi8> to memref<?x1xf32>
    %31 = memref.dim %30, %1 : memref<?x1xf32>
    "scf.parallel"(%1, %1, %31, %4, %4, %4) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
    ^bb0(%32: index, %33: index):
      memref.store %27, %30[%32, %33] : memref<?x1xf32>
      scf.reduce
    }) : (index, index, index, index, index, index) -> ()
    %34 = memref.dim %20, %1 : memref<?x48xf32>
    "scf.parallel"(%1, %34, %4) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
    ^bb0(%35: index):
      %36 = memref.load %30[%35, %1] : memref<?x1xf32>
      %37 = scf.for %38 = %1 to %6 step %4 iter_args(%39 = %36) -> (f32) {
        %40 = memref.load %20[%35, %38] : memref<?x48xf32>
        %41 = arith.maximumf %39, %40 fastmath<reassoc> : f32
        scf.yield %41 : f32
      }
      memref.store %37, %30[%35, %1] : memref<?x1xf32>
      scf.reduce
    }) : (index, index, index) -> ()
    "scf.parallel"(%1, %1, %34, %6, %4, %4) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
    ^bb0(%42: index, %43: index):
      %44 = memref.load %20[%42, %43] : memref<?x48xf32>
      %45 = memref.load %30[%42, %1] : memref<?x1xf32>
      %46 = arith.subf %44, %45 : f32
      %47 = math.exp %46 : f32
      memref.store %47, %3[%42, %43] : memref<?x48xf32>
      scf.reduce
    }) : (index, index, index, index, index, index) -> ()
    %48 = memref.view %workspace[%19][%batch] {aicc.arena_slot = array<i64: 0, 192, 256>} : memref<?xi8> to memref<?x1xf32>
    %49 = memref.dim %48, %1 : memref<?x1xf32>
    "scf.parallel"(%1, %1, %49, %4, %4, %4) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
    ^bb0(%50: index, %51: index):
      memref.store %2, %48[%50, %51] : memref<?x1xf32>
      scf.reduce
    }) : (index, index, index, index, index, index) -> ()
    "scf.parallel"(%1, %5, %4) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
    ^bb0(%52: index):
      %53 = memref.load %48[%52, %1] : memref<?x1xf32>
      %54 = scf.for %55 = %1 to %6 step %4 iter_args(%56 = %53) -> (f32) {
        %57 = memref.load %3[%52, %55] : memref<?x48xf32>
        %58 = arith.addf %56, %57 fastmath<reassoc> : f32
        scf.yield %58 : f32
      }
      memref.store %54, %48[%52, %1] : memref<?x1xf32>
      scf.reduce
    }) : (index, index, index) -> ()
    "scf.parallel"(%1, %1, %5, %6, %4, %4) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
    ^bb0(%59: index, %60: index):
      %61 = memref.load %3[%59, %60] : memref<?x48xf32>
      %62 = memref.load %48[%59, %1] : memref<?x1xf32>
      %63 = arith.divf %61, %62 : f32
      memref.store %63, %0[%59, %60] : memref<?x48xf32>
      scf.reduce
    }) : (index, index, index, index, index, index) -> ()
    func.return
  }
}
