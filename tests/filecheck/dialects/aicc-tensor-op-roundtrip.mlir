// RUN: aicc-opt %s | aicc-opt | filecheck %s
// aicc.tensor_op keeps its index notation as canonical text (operands in0, in1, ... by
// position, a 0-d operand bare, the result `out`) and the range of every index.

// CHECK-LABEL: func.func @tensor_ops
func.func @tensor_ops(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>, %s: tensor<f32>, %x: tensor<2x7xf32>, %v: tensor<9xf32>, %w: tensor<3xf32>) -> tensor<4x5xf32> {
  // CHECK: %[[MM:.*]] = aicc.tensor_op "out[i, j] = sum[k](in0[i, k] * in1[k, j])"(%{{.*}}, %{{.*}}) {ranges = {i = 4 : i64, j = 5 : i64, k = 3 : i64}} : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %0 = aicc.tensor_op "out[i, j] = sum[k](in0[i, k] * in1[k, j])"(%a, %b) {ranges = {i = 4 : i64, j = 5 : i64, k = 3 : i64}} : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  // CHECK: aicc.tensor_op "out[i, j] = where(in0[i, j] > 0.0, in0[i, j] * in1, -in0[i, j])"(%[[MM]], %{{.*}}) {ranges = {i = 4 : i64, j = 5 : i64}} : (tensor<4x5xf32>, tensor<f32>) -> tensor<4x5xf32>
  %1 = aicc.tensor_op "out[i, j] = where(in0[i, j] > 0.0, in0[i, j] * in1, -in0[i, j])"(%0, %s) {ranges = {i = 4 : i64, j = 5 : i64}} : (tensor<4x5xf32>, tensor<f32>) -> tensor<4x5xf32>
  // CHECK: aicc.tensor_op "out[c, i] = max[k](in0[c, 2 * i + k])"(%{{.*}}) {ranges = {c = 2 : i64, i = 3 : i64, k = 2 : i64}} : (tensor<2x7xf32>) -> tensor<2x3xf32>
  %2 = aicc.tensor_op "out[c, i] = max[k](in0[c, 2 * i + k])"(%x) {ranges = {c = 2 : i64, i = 3 : i64, k = 2 : i64}} : (tensor<2x7xf32>) -> tensor<2x3xf32>
  // The scatter form of gradients: affine output subscripts, accumulated into zeros.
  // CHECK: aicc.tensor_op "out[i + k] += in0[i] * in1[k]"(%{{.*}}, %{{.*}}) {ranges = {i = 7 : i64, k = 3 : i64}} : (tensor<7xf32>, tensor<3xf32>) -> tensor<9xf32>
  %g = "test.op"() : () -> tensor<7xf32>
  %3 = aicc.tensor_op "out[i + k] += in0[i] * in1[k]"(%g, %w) {ranges = {i = 7 : i64, k = 3 : i64}} : (tensor<7xf32>, tensor<3xf32>) -> tensor<9xf32>
  // CHECK: aicc.tensor_op "out[] = sum[i](in0[i])"(%{{.*}}) {ranges = {i = 9 : i64}} : (tensor<9xf32>) -> tensor<f32>
  %4 = aicc.tensor_op "out[] = sum[i](in0[i])"(%v) {ranges = {i = 9 : i64}} : (tensor<9xf32>) -> tensor<f32>
  // A plain read (a gather, as the int8 im2col) takes any element type.
  // CHECK: aicc.tensor_op "out[p, i, c] = in0[p + i, c]"(%{{.*}}) {ranges = {p = 3 : i64, i = 2 : i64, c = 5 : i64}} : (tensor<4x5xi8>) -> tensor<3x2x5xi8>
  %q = "test.op"() : () -> tensor<4x5xi8>
  %5 = aicc.tensor_op "out[p, i, c] = in0[p + i, c]"(%q) {ranges = {p = 3 : i64, i = 2 : i64, c = 5 : i64}} : (tensor<4x5xi8>) -> tensor<3x2x5xi8>
  func.return %1 : tensor<4x5xf32>
}
