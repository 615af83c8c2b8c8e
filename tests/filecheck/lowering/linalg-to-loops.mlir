// RUN: aicc-opt %s -p linalg-to-loops --split-input-file | filecheck %s
// RUN: aicc-opt %s -p 'linalg-to-loops{transpose-tile=64}' --split-input-file | filecheck %s --check-prefix=TILE

// Elementwise with a broadcast operand: one 2-D scf.parallel, loads at the mapped indices.
// CHECK-LABEL: func.func @elementwise
// CHECK:         "scf.parallel"
// CHECK-NEXT:    ^bb0(%[[I:.*]]: index, %[[J:.*]]: index):
// CHECK-NEXT:      %[[A:.*]] = memref.load %{{.*}}[%[[I]], %[[J]]] : memref<4x8xf32>
// CHECK-NEXT:      %[[B:.*]] = memref.load %{{.*}}[%[[J]]] : memref<8xf32>
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[A]], %[[B]] : f32
// CHECK-NEXT:      memref.store %[[S]], %{{.*}}[%[[I]], %[[J]]] : memref<4x8xf32>
// CHECK-NEXT:      scf.reduce
func.func @elementwise(%x: memref<4x8xf32>, %b: memref<8xf32>, %o: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x, %b : memref<4x8xf32>, memref<8xf32>) outs(%o : memref<4x8xf32>) {
  ^bb0(%a: f32, %c: f32, %out: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  }
  func.return
}

// -----
// Matmul: i parallel outermost, then k, then j innermost (contiguous in B and C).
// CHECK-LABEL: func.func @matmul
// CHECK-DAG:     %[[C3:.*]] = arith.constant 3 : index
// CHECK-DAG:     %[[C5:.*]] = arith.constant 5 : index
// CHECK-DAG:     %[[C4:.*]] = arith.constant 4 : index
// CHECK:         "scf.parallel"(%{{.*}}, %[[C3]], %{{.*}})
// CHECK-NEXT:    ^bb0(%[[I:.*]]: index):
// CHECK-NEXT:      scf.for %[[K:.*]] = %{{.*}} to %[[C4]] step %{{.*}} {
// CHECK-NEXT:        scf.for %[[J:.*]] = %{{.*}} to %[[C5]] step %{{.*}} {
// CHECK-NEXT:          memref.load %{{.*}}[%[[I]], %[[K]]] : memref<3x4xf32>
// CHECK-NEXT:          memref.load %{{.*}}[%[[K]], %[[J]]] : memref<4x5xf32>
// CHECK-NEXT:          memref.load %{{.*}}[%[[I]], %[[J]]] : memref<3x5xf32>
// CHECK-NEXT:          arith.mulf
// CHECK-NEXT:          arith.addf
// CHECK-NEXT:          memref.store %{{.*}}, %{{.*}}[%[[I]], %[[J]]] : memref<3x5xf32>
func.func @matmul(%a: memref<3x4xf32>, %b: memref<4x5xf32>, %c: memref<3x5xf32>) {
  linalg.matmul ins(%a, %b : memref<3x4xf32>, memref<4x5xf32>) outs(%c : memref<3x5xf32>)
  func.return
}

// -----
// Row sum: the reduction is innermost and accumulates in a register (iter_args), its add
// marked reassociable so LLVM may vectorize it; one load before and one store after.
// CHECK-LABEL: func.func @row_sum
// CHECK:         "scf.parallel"
// CHECK-NEXT:    ^bb0(%[[I:.*]]: index):
// CHECK-NEXT:      %[[INIT:.*]] = memref.load %{{.*}}[%[[I]]] : memref<4xf32>
// CHECK-NEXT:      %[[R:.*]] = scf.for %[[K:.*]] = {{.*}} iter_args(%[[ACC:.*]] = %[[INIT]]) -> (f32) {
// CHECK-NEXT:        %[[V:.*]] = memref.load %{{.*}}[%[[I]], %[[K]]] : memref<4x129xf32>
// CHECK-NEXT:        %[[S:.*]] = arith.addf %[[ACC]], %[[V]] fastmath<reassoc> : f32
// CHECK-NEXT:        scf.yield %[[S]] : f32
// CHECK-NEXT:      }
// CHECK-NEXT:      memref.store %[[R]], %{{.*}}[%[[I]]] : memref<4xf32>
func.func @row_sum(%x: memref<4x129xf32>, %o: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : memref<4x129xf32>) outs(%o : memref<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  func.return
}

// -----
// Column sum: the parallel dim j is contiguous, so it goes innermost, under the reduction.
// CHECK-LABEL: func.func @column_sum
// CHECK:         scf.for %[[R:.*]] =
// CHECK-NEXT:      scf.for %[[J:.*]] =
// CHECK-NEXT:        memref.load %{{.*}}[%[[R]], %[[J]]] : memref<100x64xf32>
func.func @column_sum(%x: memref<100x64xf32>, %o: memref<64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%x : memref<100x64xf32>) outs(%o : memref<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  func.return
}

// -----
// A transpose: the output is contiguous along d1, the input along d0. By default one band,
// d1 innermost, reads a new line of the input on every step. With transpose-tile (the CPU
// pipeline uses 64) the two dims are tiled: blocks on threads, 64 x 64 steps inside (the
// last block cut to the edge), so both operands stay in cache.
// CHECK-LABEL: func.func @transpose
// CHECK:         "scf.parallel"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
// CHECK-NEXT:    ^bb0(%[[I:.*]]: index, %[[J:.*]]: index):
// CHECK-NEXT:      %[[V:.*]] = memref.load %{{.*}}[%[[J]], %[[I]]] : memref<200x100xf32>
// CHECK-NEXT:      memref.store %[[V]], %{{.*}}[%[[I]], %[[J]]] : memref<100x200xf32>
// TILE-LABEL:  func.func @transpose
// TILE-DAG:      %[[C64:.*]] = arith.constant 64 : index
// TILE-DAG:      %[[C100:.*]] = arith.constant 100 : index
// TILE-DAG:      %[[C200:.*]] = arith.constant 200 : index
// TILE-DAG:      %[[C2:.*]] = arith.constant 2 : index
// TILE-DAG:      %[[C4:.*]] = arith.constant 4 : index
// TILE:          "scf.parallel"(%{{.*}}, %{{.*}}, %[[C2]], %[[C4]], %{{.*}}, %{{.*}})
// TILE-NEXT:     ^bb0(%[[BI:.*]]: index, %[[BJ:.*]]: index):
// TILE-NEXT:       %[[I0:.*]] = arith.muli %[[BI]], %[[C64]] : index
// TILE-NEXT:       %[[I1:.*]] = arith.addi %[[I0]], %[[C64]] : index
// TILE-NEXT:       %[[IE:.*]] = arith.minsi %[[I1]], %[[C100]] : index
// TILE-NEXT:       scf.for %[[I:.*]] = %[[I0]] to %[[IE]] step %{{.*}} {
// TILE-NEXT:         %[[J0:.*]] = arith.muli %[[BJ]], %[[C64]] : index
// TILE-NEXT:         %[[J1:.*]] = arith.addi %[[J0]], %[[C64]] : index
// TILE-NEXT:         %[[JE:.*]] = arith.minsi %[[J1]], %[[C200]] : index
// TILE-NEXT:         scf.for %[[J:.*]] = %[[J0]] to %[[JE]] step %{{.*}} {
// TILE-NEXT:           %[[V:.*]] = memref.load %{{.*}}[%[[J]], %[[I]]] : memref<200x100xf32>
// TILE-NEXT:           memref.store %[[V]], %{{.*}}[%[[I]], %[[J]]] : memref<100x200xf32>
func.func @transpose(%x: memref<200x100xf32>, %o: memref<100x200xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<200x100xf32>) outs(%o : memref<100x200xf32>) {
  ^bb0(%a: f32, %out: f32):
    linalg.yield %a : f32
  }
  func.return
}

// -----
// aicc_fused.gather on axis 1: one scf.parallel over the result (i, j, k); the index is loaded,
// wrapped when negative (+ 40), checked against [0, 40), clamped, and the data read there;
// an index out of range gives 0.
// CHECK-LABEL: func.func @gather
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[SIZE:.*]] = arith.constant 40 : index
// CHECK:         "scf.parallel"
// CHECK-NEXT:    ^{{.*}}(%[[I:.*]]: index, %[[J:.*]]: index, %[[K:.*]]: index):
// CHECK-NEXT:      %[[RAW:.*]] = memref.load %{{.*}}[%[[J]]] : memref<5xi64>
// CHECK-NEXT:      %[[IDX:.*]] = arith.index_cast %[[RAW]] : i64 to index
// CHECK-NEXT:      %[[NEG:.*]] = arith.cmpi slt, %[[IDX]], %[[ZERO]] : index
// CHECK-NEXT:      %[[UP:.*]] = arith.addi %[[IDX]], %[[SIZE]] : index
// CHECK-NEXT:      %[[W:.*]] = arith.select %[[NEG]], %[[UP]], %[[IDX]] : index
// CHECK-NEXT:      %[[GE:.*]] = arith.cmpi sge, %[[W]], %[[ZERO]] : index
// CHECK-NEXT:      %[[LT:.*]] = arith.cmpi slt, %[[W]], %[[SIZE]] : index
// CHECK-NEXT:      %[[OK:.*]] = arith.andi %[[GE]], %[[LT]] : i1
// CHECK-NEXT:      %[[SAFE:.*]] = arith.select %[[OK]], %[[W]], %[[ZERO]] : index
// CHECK-NEXT:      %[[V:.*]] = memref.load %{{.*}}[%[[I]], %[[SAFE]], %[[K]]] : memref<3x40x7xf32>
// CHECK-NEXT:      %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[R:.*]] = arith.select %[[OK]], %[[V]], %[[Z]] : f32
// CHECK-NEXT:      memref.store %[[R]], %{{.*}}[%[[I]], %[[J]], %[[K]]] : memref<3x5x7xf32>
// CHECK-NOT:     aicc_fused.gather
func.func @gather(%t: memref<3x40x7xf32>, %ids: memref<5xi64>, %out: memref<3x5x7xf32>) {
  aicc_fused.gather ins(%t, %ids : memref<3x40x7xf32>, memref<5xi64>) outs(%out : memref<3x5x7xf32>) {axis = 1 : i64}
  func.return
}

// -----
// aicc_fused.gather_elements on axis 0: the index read at the result's own (i, j), the data at
// (index, j); the same wrap and range check as gather.
// CHECK-LABEL: func.func @gather_elements
// CHECK:         "scf.parallel"
// CHECK-NEXT:    ^{{.*}}(%[[I:.*]]: index, %[[J:.*]]: index):
// CHECK-NEXT:      %{{.*}} = memref.load %{{.*}}[%[[I]], %[[J]]] : memref<3x4xi32>
// CHECK:           arith.andi
// CHECK-NEXT:      %[[SAFE:.*]] = arith.select %{{.*}}, %{{.*}}, %{{.*}} : index
// CHECK-NEXT:      %{{.*}} = memref.load %{{.*}}[%[[SAFE]], %[[J]]] : memref<50x6xf32>
// CHECK:           memref.store %{{.*}}, %{{.*}}[%[[I]], %[[J]]] : memref<3x4xf32>
func.func @gather_elements(%t: memref<50x6xf32>, %ids: memref<3x4xi32>, %out: memref<3x4xf32>) {
  aicc_fused.gather_elements ins(%t, %ids : memref<50x6xf32>, memref<3x4xi32>) outs(%out : memref<3x4xf32>) {axis = 0 : i64}
  func.return
}
