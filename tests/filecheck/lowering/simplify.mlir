// RUN: aicc-opt %s -p simplify --split-input-file | filecheck %s
// RUN: aicc-opt %s -p 'simplify{fast-math=true}' --split-input-file | filecheck %s --check-prefix=FAST
// RUN: aicc-opt %s -p 'simplify{transpose-matmul=false}' --split-input-file | filecheck %s --check-prefix=NOMM

// x * 1, 1 * x, x + 0, 0 + x, x - 0, x / 1 and -(-x) are all x.
// CHECK-LABEL: func.func @identities
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT:    func.return %[[X]] : tensor<4x8xf32>
func.func @identities(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %one = aicc.constant dense<1.0> : tensor<f32>
  %zero = aicc.constant dense<0.0> : tensor<8xf32>
  %0 = aicc.mul %x, %one : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %1 = aicc.mul %one, %0 : tensor<f32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %2 = aicc.add %1, %zero : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %3 = aicc.add %zero, %2 : tensor<8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %4 = aicc.sub %3, %zero : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %5 = aicc.div %4, %one : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %6 = aicc.neg %5 : tensor<4x8xf32>
  %7 = aicc.neg %6 : tensor<4x8xf32>
  func.return %7 : tensor<4x8xf32>
}

// -----
// x + 0 keeps the broadcast result shape: x broadcast, not x.
// CHECK-LABEL: func.func @broadcasting_zero
// CHECK-SAME:    (%[[X:.*]]: tensor<8xf32>)
// CHECK-NEXT:    %[[B:.*]] = aicc.broadcast_to %[[X]] : tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %[[B]]
func.func @broadcasting_zero(%x: tensor<8xf32>) -> tensor<4x8xf32> {
  %zero = aicc.constant dense<0.0> : tensor<4x8xf32>
  %0 = aicc.add %x, %zero : tensor<8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----
// x - x and x * 0 are NaN for x = Inf or NaN: folded to 0 only under fast-math.
// CHECK-LABEL: func.func @nan_sensitive
// CHECK:         aicc.sub %[[X:.*]], %[[X]]
// CHECK:         aicc.mul
// FAST-LABEL:  func.func @nan_sensitive
// FAST-NEXT:     %[[Z0:.*]] = aicc.constant dense<0.000000e+00> : tensor<4xf32>
// FAST-NEXT:     %[[Z1:.*]] = aicc.constant dense<0.000000e+00> : tensor<4xf32>
// FAST-NEXT:     func.return %[[Z0]], %[[Z1]]
func.func @nan_sensitive(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %zero = aicc.constant dense<0.0> : tensor<f32>
  %0 = aicc.sub %x, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %1 = aicc.mul %x, %zero : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  func.return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----
// Division by powers of two is exactly a multiplication by the reciprocal; by 3 only under
// fast-math (1/3 rounds).
// CHECK-LABEL: func.func @div_by_constant
// CHECK-SAME:    (%[[X:.*]]: tensor<4xf32>)
// CHECK:         %[[R:.*]] = aicc.constant dense<[5.000000e-01, 2.000000e+00, 2.500000e-01, -1.250000e-01]> : tensor<4xf32>
// CHECK-NEXT:    aicc.mul %[[X]], %[[R]]
// CHECK:         aicc.div %[[X]], %{{.*}} : tensor<4xf32>, tensor<f32>
// FAST-LABEL:  func.func @div_by_constant
// FAST:          aicc.constant dense<0.333333343> : tensor<f32>
// FAST-NEXT:     aicc.mul
// FAST-NOT:      aicc.div
func.func @div_by_constant(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %c = aicc.constant dense<[2.0, 0.5, 4.0, -8.0]> : tensor<4xf32>
  %d = aicc.constant dense<3.0> : tensor<f32>
  %0 = aicc.div %x, %c : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %1 = aicc.div %x, %d : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  func.return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----
// Integer division truncates, so x / 4 is no multiplication by 1/4 (which is 0 in integers),
// not even under fast-math; x / 1 is still x.
// CHECK-LABEL: func.func @int_div_by_constant
// CHECK-SAME:    (%[[X:.*]]: tensor<4xi64>)
// CHECK:         %[[Q:.*]] = aicc.div %[[X]], %{{.*}} : tensor<4xi64>, tensor<i64>
// CHECK-NEXT:    func.return %[[Q]], %[[X]]
// FAST-LABEL:  func.func @int_div_by_constant
// FAST:          %[[Q:.*]] = aicc.div %{{.*}}, %{{.*}} : tensor<4xi64>, tensor<i64>
// FAST-NEXT:     func.return %[[Q]]
func.func @int_div_by_constant(%x: tensor<4xi64>) -> (tensor<4xi64>, tensor<4xi64>) {
  %c = aicc.constant dense<4> : tensor<i64>
  %one = aicc.constant dense<1> : tensor<i64>
  %0 = aicc.div %x, %c : tensor<4xi64>, tensor<i64> -> tensor<4xi64>
  %1 = aicc.div %x, %one : tensor<4xi64>, tensor<i64> -> tensor<4xi64>
  func.return %0, %1 : tensor<4xi64>, tensor<4xi64>
}

// -----
// transpose(transpose(x, p), q) is one transpose by p∘q, or x when that is the identity.
// CHECK-LABEL: func.func @double_transpose
// CHECK-SAME:    (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT:    %[[T:.*]] = aicc.transpose %[[X]] {permutation = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
// CHECK-NEXT:    func.return %[[T]], %[[X]]
func.func @double_transpose(%x: tensor<2x3x4xf32>) -> (tensor<4x2x3xf32>, tensor<2x3x4xf32>) {
  %0 = aicc.transpose %x {permutation = array<i64: 1, 2, 0>} : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
  %1 = aicc.transpose %0 {permutation = array<i64: 1, 2, 0>} : tensor<3x4x2xf32> -> tensor<4x2x3xf32>
  %2 = aicc.transpose %0 {permutation = array<i64: 2, 0, 1>} : tensor<3x4x2xf32> -> tensor<2x3x4xf32>
  func.return %1, %2 : tensor<4x2x3xf32>, tensor<2x3x4xf32>
}

// -----
// A reshape chain is one reshape; reshape, broadcast_to and cast to the same type are x.
// CHECK-LABEL: func.func @shape_ops
// CHECK-SAME:    (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT:    %[[R:.*]] = aicc.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT:    func.return %[[R]], %[[X]], %[[X]], %[[X]]
func.func @shape_ops(%x: tensor<2x3x4xf32>) -> (tensor<6x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %0 = aicc.reshape %x : tensor<2x3x4xf32> -> tensor<24xf32>
  %1 = aicc.reshape %0 : tensor<24xf32> -> tensor<6x4xf32>
  %2 = aicc.reshape %x : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %3 = aicc.broadcast_to %x : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %4 = aicc.cast %x : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  func.return %1, %2, %3, %4 : tensor<6x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// -----
// A broadcast scalar constant is a splat constant.
// CHECK-LABEL: func.func @broadcast_scalar
// CHECK-NEXT:    %[[C:.*]] = aicc.constant dense<2.500000e+00> : tensor<3x5xf32>
// CHECK-NEXT:    func.return %[[C]]
func.func @broadcast_scalar() -> tensor<3x5xf32> {
  %c = aicc.constant dense<2.5> : tensor<1xf32>
  %0 = aicc.broadcast_to %c : tensor<1xf32> -> tensor<3x5xf32>
  func.return %0 : tensor<3x5xf32>
}

// -----
// A splat operand that the result shape does not need becomes a rank-0 constant (read
// broadcast, one element stored); one that sets the result shape stays.
// CHECK-LABEL: func.func @splat_operand
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[V:.*]]: tensor<8xf32>)
// CHECK-NEXT:    %[[K:.*]] = aicc.constant dense<3.000000e+00> : tensor<4x8xf32>
// CHECK-NEXT:    %[[S:.*]] = aicc.constant dense<3.000000e+00> : tensor<f32>
// CHECK-NEXT:    aicc.mul %[[X]], %[[S]] : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
// CHECK-NEXT:    aicc.mul %[[V]], %[[K]] : tensor<8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
func.func @splat_operand(%x: tensor<4x8xf32>, %v: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %c = aicc.constant dense<3.0> : tensor<4x8xf32>
  %0 = aicc.mul %x, %c : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %1 = aicc.mul %v, %c : tensor<8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %0, %1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----
// Transposes of the last two dims fold into the matmul's flags (never materialized); a
// transpose that moves a batch dim does not.
// CHECK-LABEL: func.func @matmul_transposes
// CHECK-SAME:    (%[[A:.*]]: tensor<2x8x4xf32>, %[[B:.*]]: tensor<16x8xf32>, %[[C:.*]]: tensor<4x3xf32>)
// CHECK-NEXT:    %[[M0:.*]] = aicc.matmul %[[A]], %[[B]] {transpose_lhs, transpose_rhs} : tensor<2x8x4xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
// CHECK-NEXT:    %[[M1:.*]] = aicc.matmul %[[A]], %[[A]] {transpose_rhs} : tensor<2x8x4xf32>, tensor<2x8x4xf32> -> tensor<2x8x8xf32>
// CHECK-NEXT:    %[[T:.*]] = aicc.transpose %[[A]] {permutation = array<i64: 1, 0, 2>}
// CHECK-NEXT:    aicc.matmul %[[T]], %[[C]] : tensor<8x2x4xf32>, tensor<4x3xf32> -> tensor<8x2x3xf32>
// CHECK-NOT:     aicc.transpose
// Without transpose-matmul the transposes stay.
// NOMM-LABEL:  func.func @matmul_transposes
// NOMM:          aicc.transpose
// NOMM:          aicc.transpose
// NOMM:          aicc.matmul %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<8x16xf32>
func.func @matmul_transposes(%a: tensor<2x8x4xf32>, %b: tensor<16x8xf32>, %c: tensor<4x3xf32>) -> (tensor<2x4x16xf32>, tensor<2x8x8xf32>, tensor<8x2x3xf32>) {
  %at = aicc.transpose %a {permutation = array<i64: 0, 2, 1>} : tensor<2x8x4xf32> -> tensor<2x4x8xf32>
  %bt = aicc.transpose %b {permutation = array<i64: 1, 0>} : tensor<16x8xf32> -> tensor<8x16xf32>
  %0 = aicc.matmul %at, %bt : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %1 = aicc.matmul %a, %at : tensor<2x8x4xf32>, tensor<2x4x8xf32> -> tensor<2x8x8xf32>
  %ab = aicc.transpose %a {permutation = array<i64: 1, 0, 2>} : tensor<2x8x4xf32> -> tensor<8x2x4xf32>
  %2 = aicc.matmul %ab, %c : tensor<8x2x4xf32>, tensor<4x3xf32> -> tensor<8x2x3xf32>
  func.return %0, %1, %2 : tensor<2x4x16xf32>, tensor<2x8x8xf32>, tensor<8x2x3xf32>
}

// -----
// A transposed matmul operand that is transposed again cancels the flag.
// CHECK-LABEL: func.func @flag_toggles
// CHECK-SAME:    (%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8x16xf32>)
// CHECK-NEXT:    aicc.matmul %[[A]], %[[B]] : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
func.func @flag_toggles(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %bt = aicc.transpose %b {permutation = array<i64: 1, 0>} : tensor<8x16xf32> -> tensor<16x8xf32>
  %0 = aicc.matmul %a, %bt {transpose_rhs} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  func.return %0 : tensor<4x16xf32>
}

// -----
// x ** 1 is x and x ** 2 is x * x (both round the exact square once); x ** 3 stays a pow.
// CHECK-LABEL: func.func @small_powers
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT:    %[[THREE:.*]] = aicc.constant dense<3.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[SQ:.*]] = aicc.mul %[[X]], %[[X]] : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %[[CUBE:.*]] = aicc.pow %[[SQ]], %[[THREE]]
// CHECK-NEXT:    func.return %[[CUBE]]
func.func @small_powers(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %one = aicc.constant dense<1.0> : tensor<f32>
  %two = aicc.constant dense<2.0> : tensor<f32>
  %three = aicc.constant dense<3.0> : tensor<f32>
  %0 = aicc.pow %x, %one : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %1 = aicc.pow %0, %two : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %2 = aicc.pow %1, %three : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  func.return %2 : tensor<4x8xf32>
}

// -----
// exp(x - max(x)) / sum(exp(x - max(x))) over one axis with keepdims, as NumPy code writes a
// softmax, is aicc.softmax (which lowers with its exp marked afn: only entries below 2^-126
// change, to 0).
// CHECK-LABEL: func.func @numpy_softmax
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT:    %[[S:.*]] = aicc.softmax %[[X]] {axis = 1 : i64} : tensor<4x8xf32>
// CHECK-NEXT:    func.return %[[S]]
func.func @numpy_softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %m = aicc.reduce_max %x {axes = array<i64: 1>, keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %d = aicc.sub %x, %m : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %e = aicc.exp %d : tensor<4x8xf32>
  %s = aicc.reduce_sum %e {axes = array<i64: 1>, keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %y = aicc.div %e, %s : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// -----
// Not a softmax: the sum runs over another axis than the max, or the exp is read elsewhere too.
// CHECK-LABEL: func.func @not_softmax
// CHECK-NOT:     aicc.softmax
// CHECK:         func.return
func.func @not_softmax(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %m = aicc.reduce_max %x {axes = array<i64: 1>, keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %d = aicc.sub %x, %m : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %e = aicc.exp %d : tensor<4x8xf32>
  %s0 = aicc.reduce_sum %e {axes = array<i64: 0>, keepdims = true} : tensor<4x8xf32> -> tensor<1x8xf32>
  %y0 = aicc.div %e, %s0 : tensor<4x8xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
  %e1 = aicc.exp %d : tensor<4x8xf32>
  %s1 = aicc.reduce_sum %e1 {axes = array<i64: 1>, keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %y1 = aicc.div %e1, %s1 : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  func.return %y0, %y1, %e1 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
