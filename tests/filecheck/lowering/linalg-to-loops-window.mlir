// RUN: aicc-opt %s -p linalg-to-loops | filecheck %s
// RUN: aicc-opt %s -p 'linalg-to-loops{window-inner=true}' | filecheck %s --check-prefix=WIN

// A 3x3 max pooling window (c, oh, ow | kh, kw): by default the reductions go outside the
// contiguous ow loop, each window point loading and storing the whole output row; with
// window-inner (the CPU pipeline) the window goes inside ow (ow joins the parallel band), its
// two loops carrying the running max in a register: one load of the start, one store of the
// result per output.
// CHECK-LABEL: func.func @pool
// CHECK:         "scf.parallel"
// CHECK-NEXT:    ^{{.*}}(%[[C:.*]]: index, %[[Y:.*]]: index):
// CHECK-NEXT:      scf.for %[[KH:.*]] = {{.*}} {
// CHECK-NEXT:        scf.for %[[KW:.*]] = {{.*}} {
// CHECK-NEXT:          scf.for %[[X:.*]] = {{.*}} {
// CHECK:                 memref.store %{{.*}}, %{{.*}}[%[[C]], %[[Y]], %[[X]]] : memref<4x6x6xf32>
// WIN-LABEL:   func.func @pool
// WIN:           "scf.parallel"
// WIN-NEXT:      ^{{.*}}(%[[C:.*]]: index, %[[Y:.*]]: index, %[[X:.*]]: index):
// WIN-NEXT:        %[[START:.*]] = memref.load %{{.*}}[%[[C]], %[[Y]], %[[X]]] : memref<4x6x6xf32>
// WIN-NEXT:        %[[R:.*]] = scf.for %[[KH:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[A:.*]] = %[[START]]) -> (f32) {
// WIN-NEXT:          %[[RW:.*]] = scf.for %[[KW:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[B:.*]] = %[[A]]) -> (f32) {
// WIN:                 %[[V:.*]] = memref.load %{{.*}}[%[[C]], %{{.*}}, %{{.*}}] : memref<4x8x8xf32>
// WIN-NEXT:            %[[M:.*]] = arith.maximumf %[[B]], %[[V]] fastmath<reassoc,nsz> : f32
// WIN-NEXT:            scf.yield %[[M]] : f32
// WIN-NEXT:          }
// WIN-NEXT:          scf.yield %[[RW]] : f32
// WIN-NEXT:        }
// WIN-NEXT:        memref.store %[[R]], %{{.*}}[%[[C]], %[[Y]], %[[X]]] : memref<4x6x6xf32>
func.func @pool(%x: memref<4x8x8xf32>, %win: memref<3x3xf32>, %o: memref<4x6x6xf32>) {
  linalg.generic {indexing_maps = [affine_map<(c, y, x, i, j) -> (c, y + i, x + j)>, affine_map<(c, y, x, i, j) -> (i, j)>, affine_map<(c, y, x, i, j) -> (c, y, x)>], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%x, %win : memref<4x8x8xf32>, memref<3x3xf32>) outs(%o : memref<4x6x6xf32>) {
  ^bb0(%a: f32, %w: f32, %b: f32):
    %m = arith.maximumf %b, %a : f32
    linalg.yield %m : f32
  }
  func.return
}

// A window of more than WINDOW_TRIPS (64) points keeps the default order.
// WIN-LABEL:   func.func @big_window
// WIN:           "scf.parallel"
// WIN-NEXT:      ^{{.*}}:
// WIN-NEXT:        scf.for
// WIN-NEXT:          scf.for
// WIN-NEXT:            scf.for
// WIN-NOT:               iter_args
func.func @big_window(%x: memref<4x16x16xf32>, %win: memref<9x9xf32>, %o: memref<4x8x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(c, y, x, i, j) -> (c, y + i, x + j)>, affine_map<(c, y, x, i, j) -> (i, j)>, affine_map<(c, y, x, i, j) -> (c, y, x)>], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%x, %win : memref<4x16x16xf32>, memref<9x9xf32>) outs(%o : memref<4x8x8xf32>) {
  ^bb0(%a: f32, %w: f32, %b: f32):
    %m = arith.maximumf %b, %a : f32
    linalg.yield %m : f32
  }
  func.return
}
