// RUN: aicc-opt %s --split-input-file -p 'tile-matmul{vector_bits=256 threads=2}' | filecheck %s

// A matmul with a dynamic M: the schedule is chosen for M = 256 without packing A (its size
// would depend on M); the M tiles loop to the run-time row count, read once with memref.dim,
// and the micro-kernel clamps the rows of the last sliver (a_clamp).
// CHECK-LABEL: func.func @rows
// CHECK:         %[[M:.*]] = memref.dim %{{.*}}, %{{.*}} : memref<?x48xf32>
// CHECK:         memref.collapse_shape %{{.*}} : memref<?x64xf32> into memref<?xf32>
// CHECK:         aicc_cpu.microkernel {{.*}} a_clamp = true
// CHECK-SAME:    : memref<?xf32>, memref<{{[0-9]+}}xf32>, memref<?xf32>
// CHECK-NOT:     linalg.matmul
func.func @rows(%a: memref<?x64xf32>, %b: memref<64x48xf32>, %c: memref<?x48xf32>) {
  linalg.matmul ins(%a, %b : memref<?x64xf32>, memref<64x48xf32>) outs(%c : memref<?x48xf32>)
  func.return
}

// -----

// A conv's batched matmul (weights broadcast over the images, its im2col matrix and C with a
// dynamic batch): tiled like the static one, the tile loop running over the run-time batch
// (memref.dim of C, read with nothing else between the bias copy and the matmul, so that the
// copy still folds into the micro-kernel's init); B is read in place (not packed: its size
// would depend on the batch).
// CHECK-LABEL: func.func @conv
// CHECK:         %[[N:.*]] = memref.dim %c, %{{.*}} : memref<?x16x1024xf32>
// CHECK-NOT:     linalg.generic
// CHECK:         "scf.parallel"(%{{.*}}, %[[N]], %{{.*}})
// CHECK:           aicc_cpu.microkernel {{.*}} init %{{.*}} : memref<16xf32>
// CHECK:         aicc.tiled = {op = "generic", flops = 884736 : i64, per_batch}
func.func @conv(%w: memref<16x27xf32>, %col: memref<?x27x1024xf32>, %bias: memref<16x1xf32>, %c: memref<?x16x1024xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1, 0)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%bias : memref<16x1xf32>) outs(%c : memref<?x16x1024xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%w, %col : memref<16x27xf32>, memref<?x27x1024xf32>) outs(%c : memref<?x16x1024xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }
  func.return
}
