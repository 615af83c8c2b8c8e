// RUN: aicc-opt %s -p fuse-rows | filecheck %s

// Softmax rows of a dynamic row count: the fused nest runs over rows read from the buffer's
// size operand (the allocation of n rows becomes a row buffer); each row's length (16) is
// static, so its loops are as in the static case.
// CHECK-LABEL: func.func @softmax
// CHECK:         %[[ROWS:.*]] = arith.muli %{{.*}}, %[[N:.*]] : index
// CHECK:         "scf.parallel"(%{{.*}}, %[[ROWS]], %{{.*}})
// CHECK:           memref.alloca() {alignment = 64 : i64} : memref<1xf32>
// CHECK:         }) {aicc.kernel = "rows"}
// CHECK-NOT:     linalg.generic
func.func @softmax(%x: memref<?x16xf32>, %out: memref<?x16xf32>) attributes {aicc.arg_dims = ["n", "n"]} {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?x16xf32>
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  %m = memref.alloc(%n) {alignment = 64 : i64} : memref<?x1xf32>
  linalg.fill ins(%ninf : f32) outs(%m : memref<?x1xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>], iterator_types = ["parallel", "reduction"]} ins(%x : memref<?x16xf32>) outs(%m : memref<?x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %o, %a : f32
    linalg.yield %r : f32
  }
  %s = memref.alloc(%n) {alignment = 64 : i64} : memref<?x1xf32>
  linalg.fill ins(%zero : f32) outs(%s : memref<?x1xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, 0)>], iterator_types = ["parallel", "reduction"]} ins(%x, %m : memref<?x16xf32>, memref<?x1xf32>) outs(%s : memref<?x1xf32>) {
  ^bb0(%a: f32, %mx: f32, %o: f32):
    %d = arith.subf %a, %mx : f32
    %e = math.exp %d : f32
    %r = arith.addf %o, %e : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x, %m, %s : memref<?x16xf32>, memref<?x1xf32>, memref<?x1xf32>) outs(%out : memref<?x16xf32>) {
  ^bb0(%a: f32, %mx: f32, %sm: f32, %o: f32):
    %d = arith.subf %a, %mx : f32
    %e = math.exp %d : f32
    %r = arith.divf %e, %sm : f32
    linalg.yield %r : f32
  }
  memref.dealloc %s : memref<?x1xf32>
  memref.dealloc %m : memref<?x1xf32>
  func.return
}
