// RUN: aicc-opt %s -p fill-border --split-input-file | filecheck %s

// A padding: the fill of the padded buffer (1x3x6x8), then a copy (with a ReLU) of the source
// into its interior at offsets (1, 2), rows 1-4 and columns 2-6. The fill becomes loops that
// store the pad value on the border alone: a parallel loop over the unpadded dims (n, c), the
// first row and the last one (5) whole, and in the interior rows the columns before 2 and
// from 7 on. The copy stays as it is.
// CHECK-LABEL: func.func @pad
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2 : index
// CHECK-DAG:     %[[C3:.*]] = arith.constant 3 : index
// CHECK-DAG:     %[[C5:.*]] = arith.constant 5 : index
// CHECK-DAG:     %[[C6:.*]] = arith.constant 6 : index
// CHECK-DAG:     %[[C7:.*]] = arith.constant 7 : index
// CHECK-DAG:     %[[C8:.*]] = arith.constant 8 : index
// CHECK-NOT:     linalg.fill
// CHECK:         "scf.parallel"(%[[C0]], %[[C0]], %[[C1]], %[[C3]], %[[C1]], %[[C1]])
// CHECK-NEXT:    ^bb0(%[[N:.*]]: index, %[[C:.*]]: index):
// CHECK-NEXT:      scf.for %[[H0:.*]] = %[[C0]] to %[[C1]] step %[[C1]] {
// CHECK-NEXT:        scf.for %[[W0:.*]] = %[[C0]] to %[[C8]] step %[[C1]] {
// CHECK-NEXT:          memref.store %{{.*}}, %{{.*}}[%[[N]], %[[C]], %[[H0]], %[[W0]]]
// CHECK:           scf.for %[[H1:.*]] = %[[C5]] to %[[C6]] step %[[C1]] {
// CHECK-NEXT:        scf.for %[[W1:.*]] = %[[C0]] to %[[C8]] step %[[C1]] {
// CHECK-NEXT:          memref.store %{{.*}}, %{{.*}}[%[[N]], %[[C]], %[[H1]], %[[W1]]]
// CHECK:           scf.for %[[H2:.*]] = %[[C1]] to %[[C5]] step %[[C1]] {
// CHECK-NEXT:        scf.for %[[W2:.*]] = %[[C0]] to %[[C2]] step %[[C1]] {
// CHECK-NEXT:          memref.store %{{.*}}, %{{.*}}[%[[N]], %[[C]], %[[H2]], %[[W2]]]
// CHECK:             scf.for %[[W3:.*]] = %[[C7]] to %[[C8]] step %[[C1]] {
// CHECK-NEXT:          memref.store %{{.*}}, %{{.*}}[%[[N]], %[[C]], %[[H2]], %[[W3]]]
// CHECK-NOT:         scf.for
// CHECK:           scf.reduce
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : memref<1x3x6x8xf32>)
func.func @pad(%x: memref<1x3x4x5xf32>, %p: memref<1x3x6x8xf32>) {
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%p : memref<1x3x6x8xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 + 1, d3 + 2)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x : memref<1x3x4x5xf32>) outs(%p : memref<1x3x6x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %in, %z : f32
    linalg.yield %r : f32
  }
  func.return
}

// -----
// The copy overwrites the whole buffer: the fill goes.
// CHECK-LABEL: func.func @whole
// CHECK-NOT:     linalg.fill
// CHECK-NOT:     memref.store
// CHECK:         linalg.generic
func.func @whole(%x: memref<4x5xf32>, %p: memref<4x5xf32>) {
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%p : memref<4x5xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<4x5xf32>) outs(%p : memref<4x5xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  func.return
}

// -----
// The fill stays whole where the op after it reads the buffer (an accumulation into it),
// where an op between them writes a view of the buffer, and where the copy's interior is not
// at constant offsets (a strided write).
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: linalg.fill
// CHECK-NOT:     memref.store
func.func @kept(%x: memref<4x5xf32>, %p: memref<6x7xf32>, %q: memref<6x7xf32>, %r: memref<8x10xf32>) {
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%p : memref<6x7xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0 + 1, d1 + 1)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<4x5xf32>) outs(%p : memref<6x7xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  }
  linalg.fill ins(%z : f32) outs(%q : memref<6x7xf32>)
  %v = memref.collapse_shape %q [[0, 1]] : memref<6x7xf32> into memref<42xf32>
  %one = arith.constant 1.0 : f32
  %i = arith.constant 0 : index
  memref.store %one, %v[%i] : memref<42xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0 + 1, d1 + 1)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<4x5xf32>) outs(%q : memref<6x7xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.fill ins(%z : f32) outs(%r : memref<8x10xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0 * 2, d1 * 2)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<4x5xf32>) outs(%r : memref<8x10xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  func.return
}
