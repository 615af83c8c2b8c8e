// RUN: aicc-opt %s -p forward-copies --split-input-file | filecheck %s
// RUN: aicc-opt %s -p 'forward-copies{permuted-min-bytes=100}' --split-input-file | filecheck %s --check-prefix=BIG

// Winograd F(4x4)'s output transform, cut down to two planes: one generic yields both planes
// into buffers of their own, each copied into its slice of the planes buffer, which one more
// copy interleaves into the output. The generic writes its planes into their slices itself
// (constant leading indices), and the two buffers and their copies are gone. The interleave
// reads in another order: kept, unless its buffer (256 bytes) passes permuted-min-bytes (100
// in the second run), when the generic writes the output's interleaved view itself too.
// CHECK-LABEL: func.func @planes
// CHECK-SAME:    (%[[M:.*]]: memref<2x4x4xf32>, %[[Y:.*]]: memref<2x4x4x2xf32>)
// CHECK-NEXT:    %[[P:.*]] = memref.alloc() : memref<2x2x4x4xf32>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (0, d0, d1, d2)>, affine_map<(d0, d1, d2) -> (1, d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[M]] : memref<2x4x4xf32>) outs(%[[P]], %[[P]] : memref<2x2x4x4xf32>, memref<2x2x4x4xf32>)
// CHECK:           arith.addf
// CHECK:           arith.subf
// CHECK-NOT:     memref.alloc
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d3, d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>]
// CHECK-SAME:      ins(%[[P]] : memref<2x2x4x4xf32>) outs(%[[Y]] : memref<2x4x4x2xf32>)
// CHECK-NEXT:    ^{{.*}}(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      linalg.yield %[[IN]] : f32
// CHECK:         memref.dealloc %[[P]]
// CHECK-NOT:     linalg.generic
// BIG-LABEL: func.func @planes
// BIG-SAME:    (%[[M:.*]]: memref<2x4x4xf32>, %[[Y:.*]]: memref<2x4x4x2xf32>)
// BIG-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2) -> (d0, d1, d2, 1)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[M]] : memref<2x4x4xf32>) outs(%[[Y]], %[[Y]] : memref<2x4x4x2xf32>, memref<2x4x4x2xf32>)
// BIG:           linalg.yield
// BIG-NEXT:    }
// BIG-NEXT:    func.return
func.func @planes(%m: memref<2x4x4xf32>, %y: memref<2x4x4x2xf32>) {
  %p0 = memref.alloc() : memref<2x4x4xf32>
  %p1 = memref.alloc() : memref<2x4x4xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%m : memref<2x4x4xf32>) outs(%p0, %p1 : memref<2x4x4xf32>, memref<2x4x4xf32>) {
  ^bb0(%a: f32, %o0: f32, %o1: f32):
    %s = arith.addf %a, %a : f32
    %d = arith.subf %a, %s : f32
    linalg.yield %s, %d : f32, f32
  }
  %p = memref.alloc() : memref<2x2x4x4xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (0, d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p0 : memref<2x4x4xf32>) outs(%p : memref<2x2x4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  memref.dealloc %p0 : memref<2x4x4xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (1, d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p1 : memref<2x4x4xf32>) outs(%p : memref<2x2x4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  memref.dealloc %p1 : memref<2x4x4xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d3, d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%p : memref<2x2x4x4xf32>) outs(%y : memref<2x4x4x2xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  memref.dealloc %p : memref<2x2x4x4xf32>
  func.return
}

// -----

// Not forwarded: the producer reads the copy's destination (it would read what it writes),
// and a buffer read by a second op besides the copy.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-4: linalg.generic
func.func @kept(%x: memref<8xf32>, %y: memref<8xf32>, %z: memref<8xf32>) {
  %t = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%y : memref<8xf32>) outs(%t : memref<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%t : memref<8xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  %u = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x : memref<8xf32>) outs(%u : memref<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %a : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%u : memref<8xf32>) outs(%z : memref<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  %c0 = arith.constant 0 : index
  %v = memref.load %u[%c0] : memref<8xf32>
  func.return
}

// -----

// A concat's second part (4 x 32, 512 bytes) copied into the right half of a 4 x 64 result
// (the left half filled): a slice at an offset keeps the producer's loops from merging into
// one, so it is forwarded on an out-of-order copy's terms. Kept by default; with
// permuted-min-bytes=100 the producer writes its half itself, through d1 + 32.
// CHECK-LABEL: func.func @concat
// CHECK-COUNT-2: linalg.generic
// BIG-LABEL: func.func @concat
// BIG-SAME:    (%[[X:.*]]: memref<4x32xf32>, %[[Y:.*]]: memref<4x64xf32>)
// BIG:         linalg.fill
// BIG-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, (d1 + 32))>]
// BIG-SAME:      outs(%[[Y]] : memref<4x64xf32>)
// BIG-NOT:     linalg.generic
// BIG:         func.return
func.func @concat(%x: memref<4x32xf32>, %y: memref<4x64xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<4x64xf32>)
  %b = memref.alloc() : memref<4x32xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<4x32xf32>) outs(%b : memref<4x32xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.mulf %v, %v : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, (d1 + 32))>], iterator_types = ["parallel", "parallel"]} ins(%b : memref<4x32xf32>) outs(%y : memref<4x64xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  }
  memref.dealloc %b : memref<4x32xf32>
  func.return
}
