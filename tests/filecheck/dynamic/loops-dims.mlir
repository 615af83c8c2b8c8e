// RUN: aicc-opt %s -p linalg-to-loops | filecheck %s

// A loop over a dynamic dim takes its bound from a memref.dim of an operand; a dim that some
// operand has static (48) stays a constant.
// CHECK-LABEL: func.func @rows
// CHECK:         %[[N:.*]] = memref.dim %{{.*}}, %{{.*}} : memref<?x48xf32>
// CHECK:         "scf.parallel"(%{{.*}}, %[[N]], %{{.*}})
// CHECK:           scf.for %{{.*}} = %{{.*}} to %[[C48:.*]] step
func.func @rows(%x: memref<?x48xf32>, %out: memref<?x1xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>], iterator_types = ["parallel", "reduction"]} ins(%x : memref<?x48xf32>) outs(%out : memref<?x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  }
  func.return
}
