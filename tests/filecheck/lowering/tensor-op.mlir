// RUN: aicc-opt %s -p tensor-to-linalg --split-input-file | filecheck %s
// aicc.tensor_op (compiler/lowering/tensor_op_to_linalg.py): one linalg.generic, the
// subscripts as affine maps, the body in arith / math, a reduction combining into a filled output.

// CHECK-LABEL: func.func @matmul
// CHECK:         %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<4x5xf32>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<3x5xf32>) outs(%[[Z]] : tensor<4x5xf32>)
// CHECK-NEXT:    ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[P:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[ACC]], %[[P]] : f32
// CHECK-NEXT:      linalg.yield %[[S]] : f32
func.func @matmul(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>) -> tensor<4x5xf32> {
  %0 = aicc.tensor_op "out[i, j] = sum[k](in0[i, k] * in1[k, j])"(%a, %b) {ranges = {i = 4 : i64, j = 5 : i64, k = 3 : i64}} : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  func.return %0 : tensor<4x5xf32>
}

// -----
// A 1-D convolution: the shifted access is the map (d0, d1) -> (d0 + d1).
// CHECK-LABEL: func.func @conv1d
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ((d0 + d1))>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
func.func @conv1d(%x: tensor<9xf32>, %w: tensor<3xf32>) -> tensor<7xf32> {
  %0 = aicc.tensor_op "out[i] = sum[k](in0[i + k] * in1[k])"(%x, %w) {ranges = {i = 7 : i64, k = 3 : i64}} : (tensor<9xf32>, tensor<3xf32>) -> tensor<7xf32>
  func.return %0 : tensor<7xf32>
}

// -----
// Strided max-pooling: `k` is never a subscript on its own, so an unused tensor.empty of its
// range is an extra input read plainly (linalg-to-loops takes each loop's range from one).
// CHECK-LABEL: func.func @maxpool
// CHECK:         %[[R:.*]] = tensor.empty() : tensor<2xf32>
// CHECK:         %[[C:.*]] = arith.constant 0xff800000 : f32
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, ((d1 * 2) + d2))>, affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.*}}, %[[R]] : tensor<2x7xf32>, tensor<2xf32>)
// CHECK-NEXT:    ^bb0(%[[X:.*]]: f32, %{{.*}}: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT:      arith.maximumf %[[ACC]], %[[X]] : f32
func.func @maxpool(%x: tensor<2x7xf32>) -> tensor<2x3xf32> {
  %0 = aicc.tensor_op "out[c, i] = max[k](in0[c, 2 * i + k])"(%x) {ranges = {c = 2 : i64, i = 3 : i64, k = 2 : i64}} : (tensor<2x7xf32>) -> tensor<2x3xf32>
  func.return %0 : tensor<2x3xf32>
}

// -----
// Elementwise with a 0-d operand (the map to ()) and a where: cmpf + select.
// CHECK-LABEL: func.func @scalar_where
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
// CHECK:           arith.cmpf ogt
// CHECK:           arith.mulf
// CHECK:           arith.select
func.func @scalar_where(%x: tensor<7xf32>, %s: tensor<f32>) -> tensor<7xf32> {
  %0 = aicc.tensor_op "out[i] = where(in0[i] > 0.0, in0[i] * in1, 0.0)"(%x, %s) {ranges = {i = 7 : i64}} : (tensor<7xf32>, tensor<f32>) -> tensor<7xf32>
  func.return %0 : tensor<7xf32>
}

// -----
// The scatter form: zeros, then every (i, k) adds at i + k; `k` is a reduction (serial) loop.
// CHECK-LABEL: func.func @scatter
// CHECK:         %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<9xf32>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> ((d0 + d1))>], iterator_types = ["reduction", "reduction"]}
// CHECK-SAME:      outs(%[[Z]] : tensor<9xf32>)
// CHECK:           arith.mulf
// CHECK:           arith.addf
func.func @scatter(%g: tensor<7xf32>, %w: tensor<3xf32>) -> tensor<9xf32> {
  %0 = aicc.tensor_op "out[i + k] += in0[i] * in1[k]"(%g, %w) {ranges = {i = 7 : i64, k = 3 : i64}} : (tensor<7xf32>, tensor<3xf32>) -> tensor<9xf32>
  func.return %0 : tensor<9xf32>
}

// -----
// The max of a plain read of an int8 tensor (an int8 max pool): signed integer compares,
// the output filled with -128.
// CHECK-LABEL: func.func @int8_max
// CHECK:         %[[LO:.*]] = arith.constant -128 : i8
// CHECK:         linalg.fill ins(%[[LO]] : i8)
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-NEXT:    ^bb0(%[[X:.*]]: i8, %{{.*}}: i8, %[[ACC:.*]]: i8):
// CHECK-NEXT:      %[[M:.*]] = arith.maxsi %[[ACC]], %[[X]] : i8
// CHECK-NEXT:      linalg.yield %[[M]] : i8
func.func @int8_max(%x: tensor<3x8xi8>) -> tensor<3x4xi8> {
  %y = aicc.tensor_op "out[c, p] = max[i](in0[c, 2 * p + i])"(%x) {ranges = {c = 3 : i64, p = 4 : i64, i = 2 : i64}} : (tensor<3x8xi8>) -> tensor<3x4xi8>
  func.return %y : tensor<3x4xi8>
}
