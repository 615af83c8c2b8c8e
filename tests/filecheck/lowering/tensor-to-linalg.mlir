// RUN: aicc-opt %s -p tensor-to-linalg --split-input-file | filecheck %s

// Broadcasting lives in the indexing maps: %b (8) is read at d1, the scalar at ().
// CHECK-LABEL: func.func @add_broadcast
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%[[X]], %[[B]] : tensor<4x8xf32>, tensor<8xf32>) outs(%[[E]] : tensor<4x8xf32>)
// CHECK:           arith.addf
// CHECK-NOT:     aicc.
func.func @add_broadcast(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = aicc.add %x, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----
// A size-1 dim that broadcasts reads index 0.
// CHECK-LABEL: func.func @size_one_dims
// CHECK:         affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (0, d1)>
func.func @size_one_dims(%a: tensor<4x1xf32>, %b: tensor<1x5xf32>) -> tensor<4x5xf32> {
  %0 = aicc.mul %a, %b : tensor<4x1xf32>, tensor<1x5xf32> -> tensor<4x5xf32>
  func.return %0 : tensor<4x5xf32>
}

// -----
// CHECK-LABEL: func.func @matmul_2d
// CHECK:         %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:         %[[F:.*]] = linalg.fill ins(%[[Z]] : f32) outs(%{{.*}} : tensor<3x5xf32>) -> tensor<3x5xf32>
// CHECK:         linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<3x4xf32>, tensor<4x5xf32>) outs(%[[F]] : tensor<3x5xf32>)
func.func @matmul_2d(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) -> tensor<3x5xf32> {
  %0 = aicc.matmul %a, %b : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
  func.return %0 : tensor<3x5xf32>
}

// -----
// A batch of rows times a 2-D rhs (a linear layer on sequences): one 2-D matmul over the
// (2*3, 4) rows, between free reshapes, so that the rhs is packed once for all of them.
// CHECK-LABEL: func.func @matmul_batched
// CHECK:         %[[ROWS:.*]] = tensor.expand_shape %{{.*}} {{\[\[}}0 : i64, 1 : i64]] output_shape [6, 4] : tensor<24xf32> into tensor<6x4xf32>
// CHECK:         %[[MM:.*]] = linalg.matmul ins(%[[ROWS]], %{{.*}} : tensor<6x4xf32>, tensor<4x5xf32>) outs(%{{.*}} : tensor<6x5xf32>)
// CHECK:         tensor.collapse_shape %[[MM]]
// CHECK:         tensor.expand_shape %{{.*}} output_shape [2, 3, 5] : tensor<30xf32> into tensor<2x3x5xf32>
func.func @matmul_batched(%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>) -> tensor<2x3x5xf32> {
  %0 = aicc.matmul %a, %b : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  func.return %0 : tensor<2x3x5xf32>
}

// -----
// Transposed operands are read through swapped maps: A^T at (k, m), B^T at (n, k); nothing
// is transposed in memory. A bias initializes the accumulator in place of the zero fill.
// CHECK-LABEL: func.func @matmul_transposed
// CHECK-SAME:    (%[[A:.*]]: tensor<4x3xf32>, %[[B:.*]]: tensor<5x4xf32>, %[[C:.*]]: tensor<3x1xf32>)
// CHECK:         %[[I:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%[[C]] : tensor<3x1xf32>)
// CHECK-NOT:     linalg.fill
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[A]], %[[B]] : tensor<4x3xf32>, tensor<5x4xf32>) outs(%[[I]] : tensor<3x5xf32>)
// CHECK:           arith.mulf
// CHECK:           arith.addf
func.func @matmul_transposed(%a: tensor<4x3xf32>, %b: tensor<5x4xf32>, %c: tensor<3x1xf32>) -> tensor<3x5xf32> {
  %0 = aicc.matmul %a, %b bias %c {transpose_lhs, transpose_rhs} : tensor<4x3xf32>, tensor<5x4xf32>, tensor<3x1xf32> -> tensor<3x5xf32>
  func.return %0 : tensor<3x5xf32>
}

// -----
// A max reduction starts from -inf; keepdims reads the output at index 0.
// CHECK-LABEL: func.func @reduce_max_keepdims
// CHECK:         arith.constant 0xff800000 : f32
// CHECK:         linalg.fill
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>], iterator_types = ["parallel", "reduction"]}
// CHECK:           arith.maximumf
func.func @reduce_max_keepdims(%x: tensor<4x8xf32>) -> tensor<4x1xf32> {
  %0 = aicc.reduce_max %x {axes = array<i64: 1>, keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  func.return %0 : tensor<4x1xf32>
}

// -----
// mean = sum * (1/N): a reduction, then an elementwise scale by 1/(2*8).
// CHECK-LABEL: func.func @reduce_mean
// CHECK:         iterator_types = ["reduction", "parallel", "reduction"]
// CHECK:         arith.constant dense<6.250000e-02> : tensor<f32>
// CHECK:         arith.mulf
func.func @reduce_mean(%x: tensor<2x3x8xf32>) -> tensor<3xf32> {
  %0 = aicc.reduce_mean %x {axes = array<i64: 0, 2>, keepdims = false} : tensor<2x3x8xf32> -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}

// -----
// A reduction over trailing axes (a global average pool's H and W) reduces one axis of their
// product instead, contiguous in memory: the loop nest then has one long inner reduction
// loop. The reshapes are views once bufferized.
// CHECK-LABEL: func.func @global_mean
// CHECK:         %[[R:.*]] = tensor.expand_shape %{{.*}} output_shape [2, 3, 35] : tensor<210xf32> into tensor<2x3x35xf32>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, 0)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[R]] : tensor<2x3x35xf32>)
// CHECK:           arith.addf
// CHECK:         tensor.expand_shape %{{.*}} output_shape [2, 3, 1, 1] : tensor<6xf32> into tensor<2x3x1x1xf32>
// CHECK:         arith.constant dense<0.0285714287> : tensor<f32>
// CHECK:         arith.mulf
func.func @global_mean(%x: tensor<2x3x5x7xf32>) -> tensor<2x3x1x1xf32> {
  %0 = aicc.reduce_mean %x {axes = array<i64: 2, 3>, keepdims = true} : tensor<2x3x5x7xf32> -> tensor<2x3x1x1xf32>
  func.return %0 : tensor<2x3x1x1xf32>
}

// -----
// softmax decomposes into max, sub, exp, sum, div along its axis. Its exp is marked afn: the
// argument x - max is never above 0, so only results below 2^-126 may change (to 0); and
// aicc.nonpositive_arg (no upper clamp). Its max is nnan nsz: a NaN of the row reaches every
// output through the sum, so the max needn't carry it (one vmaxps a vector).
// CHECK-LABEL: func.func @softmax
// CHECK:         arith.maximumf %{{.*}}, %{{.*}} fastmath<nnan,nsz>
// CHECK:         arith.subf
// CHECK:         math.exp %{{.*}} fastmath<afn> {aicc.nonpositive_arg}
// CHECK:         arith.addf
// CHECK:         arith.divf
// CHECK-NOT:     aicc.
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = aicc.softmax %x {axis = 1 : i64} : tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----
// CHECK-LABEL: func.func @transpose
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1, d2, d0)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>]
func.func @transpose(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %0 = aicc.transpose %x {permutation = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  func.return %0 : tensor<4x2x3xf32>
}

// -----
// A reshape is a collapse to 1-D and an expand: views, no copy.
// CHECK-LABEL: func.func @reshape
// CHECK:         %[[C:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0 : i64, 1 : i64]] : tensor<4x6xf32> into tensor<24xf32>
// CHECK:         tensor.expand_shape %[[C]] {{\[\[}}0 : i64, 1 : i64, 2 : i64]] output_shape [2, 3, 4] : tensor<24xf32> into tensor<2x3x4xf32>
func.func @reshape(%x: tensor<4x6xf32>) -> tensor<2x3x4xf32> {
  %0 = aicc.reshape %x : tensor<4x6xf32> -> tensor<2x3x4xf32>
  func.return %0 : tensor<2x3x4xf32>
}

// -----
// Comparisons follow NumPy on NaN: ordered, except != (unordered).
// CHECK-LABEL: func.func @compare_select
// CHECK:         arith.cmpf ogt
// CHECK:         tensor<4xi1>
// CHECK:         arith.cmpf une
// CHECK:         arith.select
func.func @compare_select(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %m = aicc.compare "gt", %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xi1>
  %n = aicc.compare "ne", %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xi1>
  %s = aicc.select %m, %a, %b : tensor<4xi1>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %t = aicc.select %n, %s, %b : tensor<4xi1>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  func.return %t : tensor<4xf32>
}

// -----
// gelu (erf form), sigmoid and relu are scalar bodies of arith and math ops.
// CHECK-LABEL: func.func @activations
// CHECK:         math.erf
// CHECK:         math.exp
// CHECK:         arith.divf
// CHECK:         arith.maximumf
func.func @activations(%x: tensor<16xf32>) -> tensor<16xf32> {
  %0 = aicc.gelu %x : tensor<16xf32>
  %1 = aicc.sigmoid %0 : tensor<16xf32>
  %2 = aicc.relu %1 : tensor<16xf32>
  func.return %2 : tensor<16xf32>
}

// -----
// Rounding is math.floor / math.ceil / math.roundeven (half to even); sin is math.sin.
// CHECK-LABEL: func.func @rounding
// CHECK:         math.floor
// CHECK:         math.ceil
// CHECK:         math.roundeven
// CHECK:         math.sin
func.func @rounding(%x: tensor<7xf32>) -> tensor<7xf32> {
  %0 = aicc.floor %x : tensor<7xf32>
  %1 = aicc.ceil %0 : tensor<7xf32>
  %2 = aicc.round %1 : tensor<7xf32>
  %3 = aicc.sin %2 : tensor<7xf32>
  func.return %3 : tensor<7xf32>
}

// -----
// Integer tensors get integer arithmetic; division guards the divisors 0 and -1 (which trap).
// CHECK-LABEL: func.func @integer_arith
// CHECK:         arith.addi
// CHECK:         arith.muli
// CHECK:         arith.cmpi eq
// CHECK:         arith.divsi
// CHECK:         arith.maxsi
// CHECK:         arith.remsi
func.func @integer_arith(%a: tensor<5xi32>, %b: tensor<5xi32>) -> tensor<5xi32> {
  %0 = aicc.add %a, %b : tensor<5xi32>, tensor<5xi32> -> tensor<5xi32>
  %1 = aicc.mul %0, %b : tensor<5xi32>, tensor<5xi32> -> tensor<5xi32>
  %2 = aicc.div %1, %b : tensor<5xi32>, tensor<5xi32> -> tensor<5xi32>
  %3 = aicc.maximum %2, %a : tensor<5xi32>, tensor<5xi32> -> tensor<5xi32>
  %4 = aicc.mod %3, %b : tensor<5xi32>, tensor<5xi32> -> tensor<5xi32>
  func.return %4 : tensor<5xi32>
}

// -----
// Integer reductions start from the integer identity: the smallest i64 for max.
// CHECK-LABEL: func.func @integer_reduce_max
// CHECK:         arith.constant -9223372036854775808 : i64
// CHECK:         arith.maxsi
func.func @integer_reduce_max(%a: tensor<3x5xi64>) -> tensor<3xi64> {
  %0 = aicc.reduce_max %a {axes = array<i64: 1>, keepdims = false} : tensor<3x5xi64> -> tensor<3xi64>
  func.return %0 : tensor<3xi64>
}
