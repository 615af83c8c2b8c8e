// RUN: aicc-opt %s -p bufferize | filecheck %s

// Bufferization turns the encodings into index arithmetic: the symbol is read once, as a
// memref.dim of the input that has it as a dim; each allocation takes its dynamic sizes from
// it; the signature's symbolic dims stay on the function as aicc.arg_dims (inputs, then the
// out-parameter), which the runtime reads to bind "batch" and to size the output.
// CHECK-LABEL: func.func @scale
// CHECK-SAME:    (%[[X:.*]]: memref<?x8xf32>, %[[OUT:.*]]: memref<?x8xf32>) attributes {aicc.arg_dims = ["batch", "batch"]}
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %batch = memref.dim %[[X]], %[[C0]] : memref<?x8xf32>
// CHECK-NEXT:    %[[T:.*]] = memref.alloc(%batch) {alignment = 64 : i64} : memref<?x8xf32>
// CHECK-NEXT:    linalg.generic {{.*}} ins(%[[X]] : memref<?x8xf32>) outs(%[[T]] : memref<?x8xf32>)
// CHECK:         linalg.generic {{.*}} ins(%[[T]] : memref<?x8xf32>) outs(%[[OUT]] : memref<?x8xf32>)
// CHECK:         memref.dealloc %[[T]] : memref<?x8xf32>
func.func @scale(%x: tensor<?x8xf32, "batch">) -> tensor<?x8xf32, "batch"> {
  %e0 = tensor.empty() : tensor<?x8xf32, "batch">
  %0 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<?x8xf32, "batch">) outs(%e0 : tensor<?x8xf32, "batch">) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<?x8xf32, "batch">
  %e1 = tensor.empty() : tensor<?x8xf32, "batch">
  %1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%0 : tensor<?x8xf32, "batch">) outs(%e1 : tensor<?x8xf32, "batch">) {
  ^bb0(%a: f32, %o: f32):
    %m = math.exp %a : f32
    linalg.yield %m : f32
  } -> tensor<?x8xf32, "batch">
  func.return %1 : tensor<?x8xf32, "batch">
}
