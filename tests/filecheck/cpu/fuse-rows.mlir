// RUN: aicc-opt %s -p fuse-rows --split-input-file | filecheck %s

// Softmax after bufferize: fill, max, exp, fill, sum, divide. One scf.parallel over the 4 rows;
// the row max and sum shrink to one-element stack buffers; exp(x - max), which only the divide
// reads last and at the element it writes, lives in the output row, divided in place. The
// fills move to the top; exp and sum share one loop (the sum takes the exp's value, no reload)
// with the accumulator in iter_args; the divide is the last pass. Nothing is allocated any more.
// The row's max and sum are loaded once, before the loops that read them; the divide by the
// sum is a multiply by its reciprocal, computed once per row. A max takes nsz: which zero a
// max of -0.0 and +0.0 gives is left open, as by NumPy and PyTorch; the flags it has are kept
// (a softmax's max comes with nnan: a NaN of the row reaches every output through the sum).
// CHECK-LABEL: func.func @softmax
// CHECK-SAME:    (%[[X:.*]]: memref<4x8xf32>, %[[OUT:.*]]: memref<4x8xf32>)
// CHECK-NOT:     memref.alloc()
// CHECK:         "scf.parallel"
// CHECK-NEXT:    ^bb0(%[[R:.*]]: index):
// CHECK-DAG:       %[[M:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1xf32>
// CHECK-DAG:       %[[S:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1xf32>
// CHECK-NOT:       memref.alloca
// CHECK:           memref.store %{{.*}}, %[[S]]
// CHECK-NEXT:      memref.store %{{.*}}, %[[M]]
// CHECK-NEXT:      %[[M0:.*]] = memref.load %[[M]]
// CHECK-NEXT:      %[[MAX:.*]] = scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[A:.*]] = %[[M0]]) -> (f32) {
// CHECK-NEXT:        %[[XV:.*]] = memref.load %[[X]][%[[R]], %[[J]]] : memref<4x8xf32>
// CHECK-NEXT:        %[[MX:.*]] = arith.maximumf %[[A]], %[[XV]] fastmath<reassoc,nnan,nsz> : f32
// CHECK-NEXT:        scf.yield %[[MX]] : f32
// CHECK-NEXT:      }
// CHECK-NEXT:      memref.store %[[MAX]], %[[M]]
// CHECK:           %[[MV:.*]] = memref.load %[[M]]
// CHECK-NEXT:      %[[SUM:.*]] = scf.for %[[J2:.*]] = {{.*}} iter_args(%[[B:.*]] = %{{.*}}) -> (f32) {
// CHECK-NEXT:        %[[XV2:.*]] = memref.load %[[X]][%[[R]], %[[J2]]]
// CHECK-NEXT:        %[[D:.*]] = arith.subf %[[XV2]], %[[MV]] : f32
// CHECK-NEXT:        %[[EX:.*]] = math.exp %[[D]]
// CHECK-NEXT:        memref.store %[[EX]], %[[OUT]][%[[R]], %[[J2]]] : memref<4x8xf32>
// CHECK-NEXT:        %[[AD:.*]] = arith.addf %[[B]], %[[EX]] fastmath<reassoc> : f32
// CHECK-NEXT:        scf.yield %[[AD]] : f32
// CHECK-NEXT:      }
// CHECK-NEXT:      memref.store %[[SUM]], %[[S]]
// CHECK-NEXT:      %[[SV:.*]] = memref.load %[[S]]
// CHECK-NEXT:      %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      %[[INV:.*]] = arith.divf %[[ONE]], %[[SV]] : f32
// CHECK-NEXT:      scf.for %[[J3:.*]] =
// CHECK-NEXT:        %[[EV:.*]] = memref.load %[[OUT]][%[[R]], %[[J3]]] : memref<4x8xf32>
// CHECK-NEXT:        %[[Y:.*]] = arith.mulf %[[EV]], %[[INV]] : f32
// CHECK-NEXT:        memref.store %[[Y]], %[[OUT]][%[[R]], %[[J3]]] : memref<4x8xf32>
// CHECK:           scf.reduce
// CHECK-NEXT:    }) {aicc.kernel = "rows"}
// CHECK-NOT:     linalg.
// CHECK-NOT:     memref.dealloc
// CHECK:         func.return
func.func @softmax(%0: memref<4x8xf32>, %1: memref<4x8xf32>) {
  %2 = arith.constant 0xff800000 : f32
  %3 = memref.alloc() {alignment = 64 : i64} : memref<4x1xf32>
  linalg.fill ins(%2 : f32) outs(%3 : memref<4x1xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>], iterator_types = ["parallel", "reduction"]} ins(%0 : memref<4x8xf32>) outs(%3 : memref<4x1xf32>) {
  ^bb0(%4: f32, %5: f32):
    %6 = arith.maximumf %5, %4 fastmath<nnan,nsz> : f32
    linalg.yield %6 : f32
  }
  %7 = memref.alloc() {alignment = 64 : i64} : memref<4x8xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%0, %3 : memref<4x8xf32>, memref<4x1xf32>) outs(%7 : memref<4x8xf32>) {
  ^bb0(%8: f32, %9: f32, %10: f32):
    %11 = arith.subf %8, %9 : f32
    %12 = math.exp %11 : f32
    linalg.yield %12 : f32
  }
  memref.dealloc %3 : memref<4x1xf32>
  %13 = arith.constant 0.000000e+00 : f32
  %14 = memref.alloc() {alignment = 64 : i64} : memref<4x1xf32>
  linalg.fill ins(%13 : f32) outs(%14 : memref<4x1xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>], iterator_types = ["parallel", "reduction"]} ins(%7 : memref<4x8xf32>) outs(%14 : memref<4x1xf32>) {
  ^bb0(%15: f32, %16: f32):
    %17 = arith.addf %16, %15 : f32
    linalg.yield %17 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%7, %14 : memref<4x8xf32>, memref<4x1xf32>) outs(%1 : memref<4x8xf32>) {
  ^bb0(%18: f32, %19: f32, %20: f32):
    %21 = arith.divf %18, %19 : f32
    linalg.yield %21 : f32
  }
  memref.dealloc %14 : memref<4x1xf32>
  memref.dealloc %7 : memref<4x8xf32>
  func.return
}

// -----
// RMS norm over (1, 3, 8) rows: the unit batch dim is no loop; the 3 rows are the parallel
// iterations. x*x is only summed, so it needs no row buffer at all; the sum of squares shares
// one loop with the square; the weight w is read broadcast. Row-local reads of the reduced
// value go through the (1x3x1) buffer shrunk to one element; the division by the row's RMS is
// a multiplication by its reciprocal, computed before the loop.
// CHECK-LABEL: func.func @rmsnorm
// CHECK:         %[[THREE:.*]] = arith.constant 3 : index
// CHECK:         "scf.parallel"(%{{.*}}, %[[THREE]], %{{.*}})
// CHECK-NOT:       memref<8xf32>
// CHECK:           %[[SQ:.*]] = scf.for {{.*}} iter_args
// CHECK:             arith.mulf
// CHECK-NOT:         memref.store
// CHECK:             arith.addf {{.*}} fastmath<reassoc>
// CHECK:           math.sqrt
// CHECK:           %[[INV:.*]] = arith.divf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:      scf.for
// CHECK:             memref.load %{{.*}}[%{{.*}}] : memref<8xf32>
// CHECK-NOT:         arith.divf
// CHECK:             arith.mulf %{{.*}}, %[[INV]]
// CHECK:             memref.store {{.*}} : memref<1x3x8xf32>
// CHECK:         }) {aicc.kernel = "rows"}
// CHECK-NOT:     linalg.
func.func @rmsnorm(%x: memref<1x3x8xf32>, %w: memref<8xf32>, %out: memref<1x3x8xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %eps = arith.constant 1.000000e-06 : f32
  %sq = memref.alloc() {alignment = 64 : i64} : memref<1x3x8xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x : memref<1x3x8xf32>) outs(%sq : memref<1x3x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  }
  %acc = memref.alloc() {alignment = 64 : i64} : memref<1x3x1xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<1x3x1xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, 0)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%sq : memref<1x3x8xf32>) outs(%acc : memref<1x3x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  }
  memref.dealloc %sq : memref<1x3x8xf32>
  %rms = memref.alloc() {alignment = 64 : i64} : memref<1x3x1xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%acc : memref<1x3x1xf32>) outs(%rms : memref<1x3x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %c = arith.constant 1.250000e-01 : f32
    %mean = arith.mulf %a, %c : f32
    %e = arith.addf %mean, %eps : f32
    %r = math.sqrt %e : f32
    linalg.yield %r : f32
  }
  memref.dealloc %acc : memref<1x3x1xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, 0)>, affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %rms, %w : memref<1x3x8xf32>, memref<1x3x1xf32>, memref<8xf32>) outs(%out : memref<1x3x8xf32>) {
  ^bb0(%a: f32, %r: f32, %g: f32, %o: f32):
    %d = arith.divf %a, %r : f32
    %y = arith.mulf %d, %g : f32
    linalg.yield %y : f32
  }
  memref.dealloc %rms : memref<1x3x1xf32>
  func.return
}

// -----
// A column sum (reduction over the leading dim) has no rows to share: nothing fuses.
// CHECK-LABEL: func.func @column_sum
// CHECK:         linalg.fill
// CHECK:         linalg.generic
// CHECK-NOT:     scf.parallel
func.func @column_sum(%x: memref<4x8xf32>, %out: memref<1x8xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  linalg.fill ins(%zero : f32) outs(%out : memref<1x8xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0, d1)>], iterator_types = ["reduction", "parallel"]} ins(%x : memref<4x8xf32>) outs(%out : memref<1x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  }
  func.return
}

// -----
// The second op reads the row sums transposed (another row's value): it stays out, and the
// sums keep their full buffer. The fill and the sum still fuse.
// CHECK-LABEL: func.func @other_row
// CHECK:         %[[T:.*]] = memref.alloc() {{.*}} : memref<4x1xf32>
// CHECK:         "scf.parallel"
// CHECK:           memref.store %{{.*}}, %[[T]]
// CHECK:         }) {aicc.kernel = "rows"}
// CHECK-NEXT:    linalg.generic {{.*}} ins(%[[T]] : memref<4x1xf32>)
func.func @other_row(%x: memref<4x8xf32>, %out: memref<1x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %t = memref.alloc() {alignment = 64 : i64} : memref<4x1xf32>
  linalg.fill ins(%zero : f32) outs(%t : memref<4x1xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>], iterator_types = ["parallel", "reduction"]} ins(%x : memref<4x8xf32>) outs(%t : memref<4x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%t : memref<4x1xf32>) outs(%out : memref<1x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  memref.dealloc %t : memref<4x1xf32>
  func.return
}

// -----
// A matmul is a contraction (k is read by both inputs): it ends the group before it, and the
// elementwise op after it does not reduce, so nothing is rewritten.
// CHECK-LABEL: func.func @matmul_relu
// CHECK-NOT:     scf.parallel
// CHECK:         linalg.matmul
// CHECK:         linalg.generic
func.func @matmul_relu(%a: memref<4x8xf32>, %b: memref<8x4xf32>, %out: memref<4x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %t = memref.alloc() {alignment = 64 : i64} : memref<4x4xf32>
  linalg.fill ins(%zero : f32) outs(%t : memref<4x4xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x4xf32>) outs(%t : memref<4x4xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%t : memref<4x4xf32>) outs(%out : memref<4x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.maximumf %x, %zero : f32
    linalg.yield %r : f32
  }
  memref.dealloc %t : memref<4x4xf32>
  func.return
}
