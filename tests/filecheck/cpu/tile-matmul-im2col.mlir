// RUN: aicc-opt %s -p 'tile-matmul{threads=2},canonicalize,cse' --split-input-file | filecheck %s

// A conv's matmul whose schedule runs each image's tiles on one thread (parallel = "b"):
// the im2col copy that writes B moves into the tile loop and writes one image at a time,
// into the thread's own K x N buffer (2 threads: 2 x 18 x 16), right before that image's
// tiles read it from cache. The zero padding it read goes too: each window row is split
// into the columns that fall in the padding (the fill value is stored) and those read
// straight from the unpadded input; a row entirely in the padding stores only zeros. The
// padded buffer, its fill and its copy are gone, and so is the whole batch's im2col matrix.
// CHECK-LABEL: func.func @conv
// CHECK-SAME:      (%[[X:.*]]: memref<2x2x4x4xf32>, %[[W:.*]]: memref<4x18xf32>, %[[O:.*]]: memref<2x4x16xf32>)
// CHECK-NOT:     linalg.fill
// CHECK-NOT:     linalg.generic
// CHECK:         %[[SLOTS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<576xf32>
// CHECK:         %[[COL:.*]] = memref.expand_shape %[[SLOTS]] {{.*}} into memref<2x1x2x3x3x16xf32>
// CHECK:         %[[SRC:.*]] = memref.expand_shape {{.*}} into memref<2x1x2x4x4xf32>
// CHECK:         "scf.parallel"
// CHECK-NEXT:    ^{{.*}}(%[[T:.*]]: index):
// CHECK:           scf.for %[[N:.*]] = %{{.*}} to %{{.*}} step
// CHECK:             arith.cmpi sge
// CHECK:             arith.cmpi slt
// CHECK:             arith.select
// CHECK:             scf.for
// CHECK:               memref.store %{{.*}}, %[[COL]][%[[T]],
// CHECK:             scf.for
// CHECK:               memref.load %[[SRC]][%[[N]],
// CHECK:               memref.store %{{.*}}, %[[COL]][%[[T]],
// CHECK:             scf.for
// CHECK:               memref.store %{{.*}}, %[[COL]][%[[T]],
// CHECK:           aicc_cpu.microkernel %{{.*}}, %[[SLOTS]][%{{.*}}], %{{.*}} k
// CHECK:         memref.dealloc %[[SLOTS]]
// CHECK-NOT:     memref.dealloc
// CHECK:         func.return
func.func @conv(%x: memref<2x2x4x4xf32>, %w: memref<4x18xf32>, %o: memref<2x4x16xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %p = memref.alloc() {alignment = 64 : i64} : memref<2x2x6x6xf32>
  linalg.fill ins(%zero : f32) outs(%p : memref<2x2x6x6xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, (d2 + 1), (d3 + 1))>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x : memref<2x2x4x4xf32>) outs(%p : memref<2x2x6x6xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  }
  %pf = memref.collapse_shape %p [[0, 1, 2, 3]] : memref<2x2x6x6xf32> into memref<144xf32>
  %pv = memref.expand_shape %pf [[0, 1, 2, 3, 4]] output_shape [2, 1, 2, 6, 6] : memref<144xf32> into memref<2x1x2x6x6xf32>
  %col = memref.alloc() {alignment = 64 : i64} : memref<2x1x2x3x3x4x4xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, (d5 + d3), (d6 + d4))>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3, d4, d5, d6)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%pv : memref<2x1x2x6x6xf32>) outs(%col : memref<2x1x2x3x3x4x4xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  }
  memref.dealloc %p : memref<2x2x6x6xf32>
  %cf = memref.collapse_shape %col [[0, 1, 2, 3, 4, 5, 6]] : memref<2x1x2x3x3x4x4xf32> into memref<576xf32>
  %bm = memref.expand_shape %cf [[0, 1, 2]] output_shape [2, 18, 16] : memref<576xf32> into memref<2x18x16xf32>
  linalg.fill ins(%zero : f32) outs(%o : memref<2x4x16xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%w, %bm : memref<4x18xf32>, memref<2x18x16xf32>) outs(%o : memref<2x4x16xf32>) attrs = {aicc.conv_lowering = "im2col", aicc.schedule = {mr = 4 : i64, nr = 16 : i64, vw = 16 : i64, kc = 18 : i64, mc = 4 : i64, nc = 16 : i64, ku = 4 : i64, pack_a = false, pack_b = false, parallel = "b", order = "mn", pf = 0 : i64}} {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  }
  memref.dealloc %col : memref<2x1x2x3x3x4x4xf32>
  func.return
}

// -----
// B's rows in the thread's buffer are 16 floats longer than N when N rows would fall on the
// same L1 sets (N = 1024 f32: 4 KiB apart), and the kernel reads B with that stride.
// CHECK-LABEL: func.func @aliasing_rows
// CHECK:         %[[SLOTS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4160xf32>
// CHECK:         memref.expand_shape %[[SLOTS]] {{.*}} into memref<2x1x2x1040xf32>
// CHECK:         aicc_cpu.microkernel {{.*}}b_ks = 1040 : i64
func.func @aliasing_rows(%x: memref<2x2x32x32xf32>, %w: memref<4x2xf32>, %o: memref<2x4x1024xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %xf = memref.collapse_shape %x [[0, 1, 2, 3]] : memref<2x2x32x32xf32> into memref<4096xf32>
  %xv = memref.expand_shape %xf [[0, 1, 2, 3, 4]] output_shape [2, 1, 2, 32, 32] : memref<4096xf32> into memref<2x1x2x32x32xf32>
  %col = memref.alloc() {alignment = 64 : i64} : memref<2x1x2x1x1x32x32xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, (d5 + d3), (d6 + d4))>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3, d4, d5, d6)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%xv : memref<2x1x2x32x32xf32>) outs(%col : memref<2x1x2x1x1x32x32xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  }
  %cf = memref.collapse_shape %col [[0, 1, 2, 3, 4, 5, 6]] : memref<2x1x2x1x1x32x32xf32> into memref<4096xf32>
  %bm = memref.expand_shape %cf [[0, 1, 2]] output_shape [2, 2, 1024] : memref<4096xf32> into memref<2x2x1024xf32>
  linalg.fill ins(%zero : f32) outs(%o : memref<2x4x1024xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%w, %bm : memref<4x2xf32>, memref<2x2x1024xf32>) outs(%o : memref<2x4x1024xf32>) attrs = {aicc.conv_lowering = "im2col", aicc.schedule = {mr = 4 : i64, nr = 32 : i64, vw = 16 : i64, kc = 2 : i64, mc = 4 : i64, nc = 1024 : i64, ku = 4 : i64, pack_a = false, pack_b = false, parallel = "b", order = "mn", pf = 0 : i64}} {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  }
  memref.dealloc %col : memref<2x1x2x1x1x32x32xf32>
  func.return
}
