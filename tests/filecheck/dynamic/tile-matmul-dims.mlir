// RUN: aicc-opt %s -p 'tile-matmul{vector_bits=256}' | filecheck %s

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
