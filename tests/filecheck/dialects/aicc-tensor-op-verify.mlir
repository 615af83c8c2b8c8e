// RUN: aicc-opt %s --split-input-file --verify-diagnostics | filecheck %s
// The verifier of aicc.tensor_op re-parses its expression and checks shapes and ranges.

func.func @bad_range(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>) -> tensor<4x5xf32> {
  %0 = aicc.tensor_op "out[i, j] = sum[k](in0[i, k] * in1[k, j])"(%a, %b) {ranges = {i = 4 : i64, j = 5 : i64, k = 2 : i64}} : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  func.return %0 : tensor<4x5xf32>
}
// CHECK: aicc.tensor_op: index 'k' has size 2 from ranges= but size 3 from 'in0' dim 1

// -----
func.func @out_of_bounds(%x: tensor<2x7xf32>) -> tensor<2x4xf32> {
  %0 = aicc.tensor_op "out[c, i] = max[k](in0[c, 2 * i + k])"(%x) {ranges = {c = 2 : i64, i = 4 : i64, k = 2 : i64}} : (tensor<2x7xf32>) -> tensor<2x4xf32>
  func.return %0 : tensor<2x4xf32>
}
// CHECK: aicc.tensor_op: subscript '2 * i + k' of 'in0' (dim 1, size 7) reaches 7, out of bounds with ranges {i: 4, k: 2}

// -----
func.func @nested(%x: tensor<2x7xf32>) -> tensor<2x7xf32> {
  %0 = aicc.tensor_op "out[i, j] = exp(in0[i, j] - max[k](in0[i, k]))"(%x) {ranges = {i = 2 : i64, j = 7 : i64, k = 7 : i64}} : (tensor<2x7xf32>) -> tensor<2x7xf32>
  func.return %0 : tensor<2x7xf32>
}
// CHECK: aicc.tensor_op: nested reductions must be split into a chain of tensor_ops

// -----
func.func @syntax(%x: tensor<7xf32>) -> tensor<7xf32> {
  %0 = aicc.tensor_op "out[i] = in0[i] +* 2.0"(%x) {ranges = {i = 7 : i64}} : (tensor<7xf32>) -> tensor<7xf32>
  func.return %0 : tensor<7xf32>
}
// CHECK: aicc.tensor_op: syntax error: unexpected '*' at line 1, column 18

// -----
func.func @result(%x: tensor<7xf32>) -> tensor<6xf32> {
  %0 = aicc.tensor_op "out[i] = in0[i]"(%x) {ranges = {i = 7 : i64}} : (tensor<7xf32>) -> tensor<6xf32>
  func.return %0 : tensor<6xf32>
}
// CHECK: aicc.tensor_op: the result has shape (6,), the output indices range over (7,)

// -----
func.func @integer_arithmetic(%x: tensor<7xi8>) -> tensor<7xi8> {
  %0 = aicc.tensor_op "out[i] = in0[i] + in0[i]"(%x) {ranges = {i = 7 : i64}} : (tensor<7xi8>) -> tensor<7xi8>
  func.return %0 : tensor<7xi8>
}
// CHECK: aicc.tensor_op: the result must be a float tensor (or the expression a plain read, out[...] = in0[...], or the max or min of one), got tensor<7xi8>

// -----
// An integer sum is not a max or min of a plain read.
func.func @integer_sum(%x: tensor<7xi8>) -> tensor<1xi8> {
  %0 = aicc.tensor_op "out[z] = sum[i](in0[i])"(%x) {ranges = {z = 1 : i64, i = 7 : i64}} : (tensor<7xi8>) -> tensor<1xi8>
  func.return %0 : tensor<1xi8>
}
// CHECK: aicc.tensor_op: the result must be a float tensor (or the expression a plain read, out[...] = in0[...], or the max or min of one), got tensor<1xi8>
