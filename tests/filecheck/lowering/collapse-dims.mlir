// RUN: aicc-opt %s -p collapse-dims --split-input-file | filecheck %s

// sigmoid(x * b) + x with b broadcast per channel: the unit batch dim drops, the two spatial
// dims merge into one of 784 (every operand holds them as one run, or neither does); the
// channel dim stays apart, as b indexes it alone. b's unit dims fold into its channel dim.
// CHECK-LABEL: func.func @broadcast
// CHECK-SAME:    (%[[X:.*]]: memref<1x96x28x28xf32>, %[[B:.*]]: memref<96x1x1xf32>, %[[Y:.*]]: memref<1x96x28x28xf32>)
// CHECK-NEXT:    %[[XC:.*]] = memref.collapse_shape %[[X]] {{\[}}[0 : i64, 1 : i64], [2 : i64, 3 : i64]] : memref<1x96x28x28xf32> into memref<96x784xf32>
// CHECK-NEXT:    %[[BC:.*]] = memref.collapse_shape %[[B]] {{\[}}[0 : i64, 1 : i64, 2 : i64]] : memref<96x1x1xf32> into memref<96xf32>
// CHECK-NEXT:    %[[YC:.*]] = memref.collapse_shape %[[Y]] {{\[}}[0 : i64, 1 : i64], [2 : i64, 3 : i64]] : memref<1x96x28x28xf32> into memref<96x784xf32>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%[[XC]], %[[BC]] : memref<96x784xf32>, memref<96xf32>) outs(%[[YC]] : memref<96x784xf32>)
// CHECK:           math.exp
// CHECK:           linalg.yield
func.func @broadcast(%x: memref<1x96x28x28xf32>, %b: memref<96x1x1xf32>, %y: memref<1x96x28x28xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x, %b : memref<1x96x28x28xf32>, memref<96x1x1xf32>) outs(%y : memref<1x96x28x28xf32>) {
  ^bb0(%a: f32, %s: f32, %o: f32):
    %m = arith.mulf %a, %s : f32
    %n = arith.negf %m : f32
    %e = math.exp %n : f32
    %one = arith.constant 1.000000e+00 : f32
    %d = arith.addf %e, %one : f32
    %r = arith.divf %one, %d : f32
    %z = arith.addf %r, %a : f32
    linalg.yield %z : f32
  }
  func.return
}

// -----

// An elementwise op on one contiguous tensor: one loop over all of it. A scalar operand
// (rank 0) stays as it is, indexed by no dim.
// CHECK-LABEL: func.func @flat
// CHECK:         memref.collapse_shape %{{.*}} {{\[}}[0 : i64, 1 : i64, 2 : i64]] : memref<8x197x3xf32> into memref<4728xf32>
// CHECK:         memref.collapse_shape %{{.*}} {{\[}}[0 : i64, 1 : i64, 2 : i64]] : memref<8x197x3xf32> into memref<4728xf32>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
// CHECK-SAME:      memref<4728xf32>, memref<f32>
func.func @flat(%x: memref<8x197x3xf32>, %s: memref<f32>, %y: memref<8x197x3xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> ()>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %s : memref<8x197x3xf32>, memref<f32>) outs(%y : memref<8x197x3xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %t = math.tanh %a : f32
    %z = arith.mulf %t, %b : f32
    linalg.yield %z : f32
  }
  func.return
}

// -----

// What keeps its dims: a transpose (dims out of order), a reduction, a body that reads its
// indices, a strided view. A dynamic dim merges like any other (the last op): its collapsed
// size is dynamic.
// CHECK-LABEL: func.func @kept
// CHECK-NOT:     memref.collapse_shape
// CHECK:         affine_map<(d0, d1) -> (d1, d0)>
// CHECK:         iterator_types = ["parallel", "reduction"]
// CHECK:         linalg.index
// CHECK:         memref<4x8xf32, strided<[16, 1]>>
// CHECK:         memref.collapse_shape %{{.*}} {{\[}}[0 : i64, 1 : i64]] : memref<?x8xf32> into memref<?xf32>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%{{.*}} : memref<?xf32>) outs(%{{.*}} : memref<?xf32>)
func.func @kept(%x: memref<4x8xf32>, %y: memref<8x4xf32>, %r: memref<4xf32>, %v: memref<4x8xf32, strided<[16, 1]>>, %w: memref<4x8xf32>, %d: memref<?x8xf32>, %e: memref<?x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1, d0)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<4x8xf32>) outs(%y : memref<8x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : memref<4x8xf32>) outs(%r : memref<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<4x8xf32>) outs(%w : memref<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 1 : index
    %c = arith.index_cast %i : index to i64
    %f = arith.sitofp %c : i64 to f32
    %s = arith.addf %a, %f : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%v : memref<4x8xf32, strided<[16, 1]>>) outs(%w : memref<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%d : memref<?x8xf32>) outs(%e : memref<?x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = math.tanh %a : f32
    linalg.yield %t : f32
  }
  func.return
}

// -----

// A generic writing a slice of a larger buffer at a constant index (forward-copies' planes):
// the constant position stays a dim of its own and keeps its index, the three loop dims
// merge into one of 32 in both operands.
// CHECK-LABEL: func.func @slice
// CHECK-SAME:    (%[[X:.*]]: memref<2x4x4xf32>, %[[P:.*]]: memref<2x2x4x4xf32>)
// CHECK-NEXT:    %[[XC:.*]] = memref.collapse_shape %[[X]] {{\[}}[0 : i64, 1 : i64, 2 : i64]] : memref<2x4x4xf32> into memref<32xf32>
// CHECK-NEXT:    %[[PC:.*]] = memref.collapse_shape %[[P]] {{\[}}[0 : i64], [1 : i64, 2 : i64, 3 : i64]] : memref<2x2x4x4xf32> into memref<2x32xf32>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (1, d0)>], iterator_types = ["parallel"]} ins(%[[XC]] : memref<32xf32>) outs(%[[PC]] : memref<2x32xf32>)
func.func @slice(%x: memref<2x4x4xf32>, %p: memref<2x2x4x4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (1, d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x : memref<2x4x4xf32>) outs(%p : memref<2x2x4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  }
  func.return
}
