// RUN: aicc-opt %s -p bufferize --split-input-file | filecheck %s

// Results become out-parameters: the final generic writes straight into %[[OUT]]; the
// temporary is allocated, then freed after its last use; the constant becomes a global.
// CHECK:       "memref.global"() <{sym_name = "__constant_0", type = memref<8xf32>, initial_value = dense<2.000000e+00> : tensor<8xf32>, sym_visibility = "private", constant}>
// CHECK-LABEL: func.func @two_steps
// CHECK-SAME:    (%[[X:.*]]: memref<4x8xf32>, %[[OUT:.*]]: memref<4x8xf32>) {
// CHECK-NEXT:    %[[C:.*]] = memref.get_global @__constant_0 : memref<8xf32>
// CHECK-NEXT:    %[[T:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x8xf32>
// CHECK-NEXT:    linalg.generic {{.*}} ins(%[[X]], %[[C]] : memref<4x8xf32>, memref<8xf32>) outs(%[[T]] : memref<4x8xf32>)
// CHECK:         linalg.generic {{.*}} ins(%[[T]] : memref<4x8xf32>) outs(%[[OUT]] : memref<4x8xf32>)
// CHECK:         memref.dealloc %[[T]] : memref<4x8xf32>
// CHECK-NEXT:    func.return
func.func @two_steps(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c = arith.constant dense<2.0> : tensor<8xf32>
  %e0 = tensor.empty() : tensor<4x8xf32>
  %0 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x, %c : tensor<4x8xf32>, tensor<8xf32>) outs(%e0 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%0 : tensor<4x8xf32>) outs(%e1 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = math.exp %a : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  func.return %1 : tensor<4x8xf32>
}

// -----
// A view of a temporary that is returned: the temporary becomes the inverse view of the
// out-parameter (flattened, expanded to its shape; made at the top of the function), so the
// matmul writes the caller's buffer and nothing is copied. Returning an input copies it into its out-parameter.
// CHECK-LABEL: func.func @views_and_copies
// CHECK-SAME:    (%[[A:.*]]: memref<2x3xf32>, %[[B:.*]]: memref<3x2xf32>, %[[O0:.*]]: memref<4xf32>, %[[O1:.*]]: memref<2x3xf32>)
// CHECK-NOT:     memref.alloc
// CHECK:         %[[M:.*]] = memref.expand_shape %[[O0]] {{\[\[}}0 : i64, 1 : i64]] output_shape [2, 2] : memref<4xf32> into memref<2x2xf32>
// CHECK:         linalg.fill ins(%{{.*}} : f32) outs(%[[M]] : memref<2x2xf32>)
// CHECK-NEXT:    linalg.matmul ins(%[[A]], %[[B]] : memref<2x3xf32>, memref<3x2xf32>) outs(%[[M]] : memref<2x2xf32>)
// CHECK-NEXT:    "memref.copy"(%[[A]], %[[O1]])
// CHECK-NEXT:    func.return
func.func @views_and_copies(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>) -> (tensor<4xf32>, tensor<2x3xf32>) {
  %e = tensor.empty() : tensor<2x2xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2x2xf32>) -> tensor<2x2xf32>
  %m = linalg.matmul ins(%a, %b : tensor<2x3xf32>, tensor<3x2xf32>) outs(%f : tensor<2x2xf32>) -> tensor<2x2xf32>
  %r = tensor.collapse_shape %m [[0, 1]] : tensor<2x2xf32> into tensor<4xf32>
  func.return %r, %a : tensor<4xf32>, tensor<2x3xf32>
}

// -----
// One temporary returned twice, as a view and as itself: the first out-parameter takes the
// temporary's place, the second is a copy of it (through the view of the first).
// CHECK-LABEL: func.func @one_buffer_twice
// CHECK-SAME:    (%[[A:.*]]: memref<2x3xf32>, %[[B:.*]]: memref<3x2xf32>, %[[O0:.*]]: memref<4xf32>, %[[O1:.*]]: memref<2x2xf32>)
// CHECK-NOT:     memref.alloc
// CHECK:         %[[M:.*]] = memref.expand_shape %[[O0]] {{\[\[}}0 : i64, 1 : i64]] output_shape [2, 2] : memref<4xf32> into memref<2x2xf32>
// CHECK:         linalg.matmul ins(%[[A]], %[[B]] : memref<2x3xf32>, memref<3x2xf32>) outs(%[[M]] : memref<2x2xf32>)
// CHECK-NEXT:    "memref.copy"(%[[M]], %[[O1]])
// CHECK-NEXT:    func.return
func.func @one_buffer_twice(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>) -> (tensor<4xf32>, tensor<2x2xf32>) {
  %e = tensor.empty() : tensor<2x2xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2x2xf32>) -> tensor<2x2xf32>
  %m = linalg.matmul ins(%a, %b : tensor<2x3xf32>, tensor<3x2xf32>) outs(%f : tensor<2x2xf32>) -> tensor<2x2xf32>
  %r = tensor.collapse_shape %m [[0, 1]] : tensor<2x2xf32> into tensor<4xf32>
  func.return %r, %m : tensor<4xf32>, tensor<2x2xf32>
}
