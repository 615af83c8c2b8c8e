// RUN: aicc-opt %s -p fold-constants --split-input-file | filecheck %s
// RUN: aicc-opt %s -p 'fold-constants{growth-limit=16}' --split-input-file | filecheck %s --check-prefix=LIMIT

// A chain of ops on constants folds to one constant, evaluated by the reference interpreter;
// the op reading the input stays, and the dead constants go.
// CHECK-LABEL: func.func @chain
// CHECK-SAME:    (%[[X:.*]]: tensor<4x3xf32>)
// CHECK-NEXT:    %[[C:.*]] = aicc.constant dense<[2.000000e+00, 4.000000e+00, 6.000000e+00]> : tensor<3xf32>
// CHECK-NEXT:    %[[Y:.*]] = aicc.add %[[X]], %[[C]] : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
// CHECK-NEXT:    func.return %[[Y]]
func.func @chain(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %a = aicc.constant dense<[1.0, 4.0, 9.0]> : tensor<3xf32>
  %b = aicc.sqrt %a : tensor<3xf32>
  %two = aicc.constant dense<2.0> : tensor<f32>
  %c = aicc.mul %b, %two : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %y = aicc.add %x, %c : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  func.return %y : tensor<4x3xf32>
}

// -----
// Elementwise ops and broadcasts of splats stay splats, however large: one stored element.
// CHECK-LABEL: func.func @splats
// CHECK-NEXT:    %[[E:.*]] = aicc.constant dense<7.38905573> : tensor<1024x1024xf32>
// CHECK-NEXT:    func.return %[[E]]
func.func @splats() -> tensor<1024x1024xf32> {
  %two = aicc.constant dense<2.0> : tensor<f32>
  %big = aicc.broadcast_to %two : tensor<f32> -> tensor<1024x1024xf32>
  %e = aicc.exp %big : tensor<1024x1024xf32>
  func.return %e : tensor<1024x1024xf32>
}

// -----
// Data movement folds: a double transpose of a constant is the constant.
// CHECK-LABEL: func.func @transposes
// CHECK-NEXT:    aicc.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00], [5.000000e+00, 6.000000e+00]]> : tensor<3x2xf32>
// CHECK-NEXT:    func.return
func.func @transposes() -> tensor<3x2xf32> {
  %w = aicc.constant dense<[[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]> : tensor<2x3xf32>
  %t = aicc.transpose %w {permutation = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  func.return %t : tensor<3x2xf32>
}

// -----
// Compares, selects, reductions and matmuls fold too; a uniform result becomes a splat.
// CHECK-LABEL: func.func @mixed
// CHECK-NEXT:    %[[S:.*]] = aicc.constant dense<[2.000000e+00, 1.000000e+00]> : tensor<2xf32>
// CHECK-NEXT:    %[[M:.*]] = aicc.constant dense<1.100000e+01> : tensor<1x1xf32>
// CHECK-NEXT:    func.return %[[S]], %[[M]]
func.func @mixed() -> (tensor<2xf32>, tensor<1x1xf32>) {
  %a = aicc.constant dense<[[1.0, -1.0], [1.0, 1.0]]> : tensor<2x2xf32>
  %z = aicc.constant dense<0.0> : tensor<f32>
  %p = aicc.compare "gt", %a, %z : tensor<2x2xf32>, tensor<f32> -> tensor<2x2xi1>
  %r = aicc.select %p, %a, %z : tensor<2x2xi1>, tensor<2x2xf32>, tensor<f32> -> tensor<2x2xf32>
  %s = aicc.reduce_sum %r {axes = array<i64: 0>, keepdims = false} : tensor<2x2xf32> -> tensor<2xf32>
  %u = aicc.constant dense<[[1.0, 2.0]]> : tensor<1x2xf32>
  %v = aicc.constant dense<[[3.0], [4.0]]> : tensor<2x1xf32>
  %m = aicc.matmul %u, %v : tensor<1x2xf32>, tensor<2x1xf32> -> tensor<1x1xf32>
  func.return %s, %m : tensor<2xf32>, tensor<1x1xf32>
}

// -----
// The size limit: broadcasting a constant 8-vector to 8x8 stores 56 more elements. It folds
// under the default limit (4096) but stays a broadcast with growth-limit=16.
// CHECK-LABEL: func.func @growth
// CHECK-NEXT:    aicc.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 5.000000e+00, 6.000000e+00, 7.000000e+00, 8.000000e+00], [1.000000e+00
// CHECK-NOT:     aicc.broadcast_to
// LIMIT-LABEL: func.func @growth
// LIMIT-NEXT:    %[[V:.*]] = aicc.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 5.000000e+00, 6.000000e+00, 7.000000e+00, 8.000000e+00]> : tensor<8xf32>
// LIMIT-NEXT:    aicc.broadcast_to %[[V]] : tensor<8xf32> -> tensor<8x8xf32>
func.func @growth() -> tensor<8x8xf32> {
  %v = aicc.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<8xf32>
  %b = aicc.broadcast_to %v : tensor<8xf32> -> tensor<8x8xf32>
  func.return %b : tensor<8x8xf32>
}

// -----
// Ops with a non-constant operand are left alone.
// CHECK-LABEL: func.func @not_constant
// CHECK:         aicc.exp
// CHECK:         aicc.mul
func.func @not_constant(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = aicc.constant dense<2.0> : tensor<f32>
  %e = aicc.exp %x : tensor<4xf32>
  %m = aicc.mul %e, %c : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  func.return %m : tensor<4xf32>
}
