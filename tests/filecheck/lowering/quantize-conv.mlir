// RUN: aicc-opt %s -p quantize-matmul,dce --split-input-file | filecheck %s

// Two QDQ convs (quantize_static's format) with a max pool between: each becomes an int8
// im2col on NHWC (the input transposed once, padded with its zero point) times the
// (O, KH*KW*C) weight in matmul_integer; the first, followed by a quantize, requantizes as
// ONNX Runtime does (int32 bias 0.0015 / (0.05 * 0.01) = 3, float32(acc + bias) times
// 0.05 * w_scale / 0.125, relu, rounded with the zero point: a quantize of scale 1). The
// NHWC -> NCHW transposes sink past dequantize, the pool (an NHWC tensor_op), quantize, the
// second conv's bias add and the pad, so the only transposes left are the input's and the
// result's; the QDQ max pool (dequantize, max, quantize with the same parameters) becomes a
// max pool of the int8 values. The second conv has a float result: float32(acc) * 0.125 * 0.5, then its bias.
// CHECK-LABEL: func.func @qdq_convs
// CHECK:         %[[Q:.*]] = aicc.quantize %x {{.*}} -> tensor<1x2x5x4xi8>
// CHECK-NEXT:    %[[T:.*]] = aicc.transpose %[[Q]] {permutation = array<i64: 0, 2, 3, 1>} : tensor<1x2x5x4xi8> -> tensor<1x5x4x2xi8>
// CHECK-NEXT:    %[[P:.*]] = aicc.pad %[[T]] {low = array<i64: 0, 1, 1, 0>, high = array<i64: 0, 1, 1, 0>, value = -3.000000e+00 : f64} : tensor<1x5x4x2xi8> -> tensor<1x7x6x2xi8>
// CHECK-NEXT:    %[[C:.*]] = aicc.tensor_op "out[n, p, q, i, j, c] = in0[n, p + i, q + j, c]"(%[[P]])
// CHECK-NEXT:    %[[R:.*]] = aicc.reshape %[[C]] : tensor<1x6x5x2x2x2xi8> -> tensor<30x8xi8>
// CHECK-NEXT:    %[[W:.*]] = aicc.constant dense<{{\[}}[1, 5, -2, 6, 3, -7, 4, 8], [9, 13, 10, 14, 11, 15, -12, 16], [-1, 5, 2, 6, 3, 7, 4, 127]]> : tensor<3x8xi8>
// CHECK-NEXT:    %[[I:.*]] = aicc.matmul_integer %[[R]], %[[W]] {lhs_zero_point = -3 : i64, transpose_rhs, aicc.quantized = "conv2d"} : tensor<30x8xi8>, tensor<3x8xi8> -> tensor<30x3xi32>
// CHECK-NEXT:    %[[B:.*]] = aicc.constant dense<[3, -3, 3]> : tensor<3xi32>
// CHECK-NEXT:    %[[IB:.*]] = aicc.add %[[I]], %[[B]] : tensor<30x3xi32>, tensor<3xi32> -> tensor<30x3xi32>
// CHECK-NEXT:    %[[F:.*]] = aicc.cast %[[IB]] : tensor<30x3xi32> -> tensor<30x3xf32>
// CHECK-NEXT:    %[[M:.*]] = aicc.constant dense<[4.000000e-03, 8.000000e-03, 1.200000e-02]> : tensor<3xf32>
// CHECK-NEXT:    %[[FM:.*]] = aicc.mul %[[F]], %[[M]]
// CHECK-NEXT:    %[[RL:.*]] = aicc.relu %[[FM]]
// CHECK-NEXT:    %[[Y:.*]] = aicc.quantize %[[RL]] {scale = array<f64: 1.000000e+00>, zero_point = array<i64: -128>, axis = -1 : i64} : tensor<30x3xf32> -> tensor<30x3xi8>
// CHECK-NEXT:    %[[YN:.*]] = aicc.reshape %[[Y]] : tensor<30x3xi8> -> tensor<1x6x5x3xi8>
// CHECK-NEXT:    %[[MQ:.*]] = aicc.tensor_op "out[n, p, q, c] = max[i, j](in0[n, 2 * p + i, 2 * q + j, c])"(%[[YN]]) {{.*}} : (tensor<1x6x5x3xi8>) -> tensor<1x3x2x3xi8>
// CHECK-NEXT:    %[[C2:.*]] = aicc.tensor_op "out[n, p, q, i, j, c] = in0[n, p + i, q + j, c]"(%[[MQ]])
// CHECK-NEXT:    %[[R2:.*]] = aicc.reshape %[[C2]] : tensor<1x2x1x2x2x3xi8> -> tensor<2x12xi8>
// CHECK-NEXT:    %[[W2:.*]] = aicc.constant
// CHECK-NEXT:    %[[I2:.*]] = aicc.matmul_integer %[[R2]], %[[W2]] {lhs_zero_point = -128 : i64, transpose_rhs, aicc.quantized = "conv2d"} : tensor<2x12xi8>, tensor<3x12xi8> -> tensor<2x3xi32>
// CHECK-NEXT:    %[[F2:.*]] = aicc.cast %[[I2]] : tensor<2x3xi32> -> tensor<2x3xf32>
// CHECK-NEXT:    %[[S2:.*]] = aicc.constant dense<6.250000e-02> : tensor<3xf32>
// CHECK-NEXT:    %[[Y2:.*]] = aicc.mul %[[F2]], %[[S2]]
// CHECK-NEXT:    %[[Y2N:.*]] = aicc.reshape %[[Y2]] : tensor<2x3xf32> -> tensor<1x2x1x3xf32>
// CHECK-NEXT:    %[[B2:.*]] = aicc.constant dense<{{\[\[\[\[}}5.000000e-01, 2.500000e-01, -1.000000e+00]]]]> : tensor<1x1x1x3xf32>
// CHECK-NEXT:    %[[A2:.*]] = aicc.add %[[Y2N]], %[[B2]] : tensor<1x2x1x3xf32>, tensor<1x1x1x3xf32> -> tensor<1x2x1x3xf32>
// CHECK-NEXT:    %[[PD:.*]] = aicc.pad %[[A2]] {low = array<i64: 0, 0, 0, 0>, high = array<i64: 0, 0, 1, 0>, value = 0.000000e+00 : f64} : tensor<1x2x1x3xf32> -> tensor<1x2x2x3xf32>
// CHECK-NEXT:    %[[OUT:.*]] = aicc.transpose %[[PD]] {permutation = array<i64: 0, 3, 1, 2>, aicc.nhwc} : tensor<1x2x2x3xf32> -> tensor<1x3x2x2xf32>
// CHECK-NEXT:    func.return %[[OUT]]
func.func @qdq_convs(%x: tensor<1x2x5x4xf32>) -> tensor<1x3x2x2xf32> {
  %q = aicc.quantize %x {scale = array<f64: 0.05>, zero_point = array<i64: -3>, axis = -1 : i64} : tensor<1x2x5x4xf32> -> tensor<1x2x5x4xi8>
  %d = aicc.dequantize %q {scale = array<f64: 0.05>, zero_point = array<i64: -3>, axis = -1 : i64} : tensor<1x2x5x4xi8> -> tensor<1x2x5x4xf32>
  %p = aicc.pad %d {low = array<i64: 0, 0, 1, 1>, high = array<i64: 0, 0, 1, 1>, value = 0.0 : f64} : tensor<1x2x5x4xf32> -> tensor<1x2x7x6xf32>
  %qw = aicc.constant dense<[[[[1, -2], [3, 4]], [[5, 6], [-7, 8]]], [[[9, 10], [11, -12]], [[13, 14], [15, 16]]], [[[-1, 2], [3, 4]], [[5, 6], [7, 127]]]]> : tensor<3x2x2x2xi8>
  %w = aicc.dequantize %qw {scale = array<f64: 0.01, 0.02, 0.03>, zero_point = array<i64: 0, 0, 0>, axis = 0 : i64} : tensor<3x2x2x2xi8> -> tensor<3x2x2x2xf32>
  %c = aicc.conv2d %p, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x2x7x6xf32>, tensor<3x2x2x2xf32> -> tensor<1x3x6x5xf32>
  %b = aicc.constant dense<[[[0.0015]], [[-0.003]], [[0.0045]]]> : tensor<3x1x1xf32>
  %cb = aicc.add %c, %b : tensor<1x3x6x5xf32>, tensor<3x1x1xf32> -> tensor<1x3x6x5xf32>
  %r = aicc.relu %cb : tensor<1x3x6x5xf32>
  %y = aicc.quantize %r {scale = array<f64: 0.125>, zero_point = array<i64: -128>, axis = -1 : i64} : tensor<1x3x6x5xf32> -> tensor<1x3x6x5xi8>
  %yd = aicc.dequantize %y {scale = array<f64: 0.125>, zero_point = array<i64: -128>, axis = -1 : i64} : tensor<1x3x6x5xi8> -> tensor<1x3x6x5xf32>
  %m = aicc.pool2d %yd {kind = "max", kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>} : tensor<1x3x6x5xf32> -> tensor<1x3x3x2xf32>
  %mq = aicc.quantize %m {scale = array<f64: 0.125>, zero_point = array<i64: -128>, axis = -1 : i64} : tensor<1x3x3x2xf32> -> tensor<1x3x3x2xi8>
  %md = aicc.dequantize %mq {scale = array<f64: 0.125>, zero_point = array<i64: -128>, axis = -1 : i64} : tensor<1x3x3x2xi8> -> tensor<1x3x3x2xf32>
  %qw2 = aicc.constant dense<[[[[1, 2], [3, 4]], [[5, 6], [7, 8]], [[9, 10], [11, 12]]], [[[1, 1], [1, 1]], [[1, 1], [1, 1]], [[1, 1], [1, 1]]], [[[-1, 2], [3, -4]], [[5, 6], [7, 8]], [[0, 0], [0, 1]]]]> : tensor<3x3x2x2xi8>
  %w2 = aicc.dequantize %qw2 {scale = array<f64: 0.5>, zero_point = array<i64: 0>, axis = -1 : i64} : tensor<3x3x2x2xi8> -> tensor<3x3x2x2xf32>
  %c2 = aicc.conv2d %md, %w2 {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x3x2xf32>, tensor<3x3x2x2xf32> -> tensor<1x3x2x1xf32>
  %b2 = aicc.constant dense<[[[0.5]], [[0.25]], [[-1.0]]]> : tensor<3x1x1xf32>
  %y2 = aicc.add %c2, %b2 : tensor<1x3x2x1xf32>, tensor<3x1x1xf32> -> tensor<1x3x2x1xf32>
  %out = aicc.pad %y2 {low = array<i64: 0, 0, 0, 0>, high = array<i64: 0, 0, 0, 1>, value = 0.0 : f64} : tensor<1x3x2x1xf32> -> tensor<1x3x2x2xf32>
  func.return %out : tensor<1x3x2x2xf32>
}

// -----
// A depthwise conv (groups 2): a float32 conv2d of the exact integers q - 7 and qw (every
// partial sum below 2^24), converted to int32, then the same requantization
// (0.5 * w_scale / 0.75 per channel), in NCHW.
// CHECK-LABEL: func.func @depthwise
// CHECK:         %[[Z:.*]] = aicc.constant dense<7.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[F:.*]] = aicc.cast %q : tensor<2x2x3x3xi8> -> tensor<2x2x3x3xf32>
// CHECK-NEXT:    %[[S:.*]] = aicc.sub %[[F]], %[[Z]]
// CHECK-NEXT:    %[[P:.*]] = aicc.pad %[[S]] {low = array<i64: 0, 0, 1, 1>, high = array<i64: 0, 0, 1, 1>, value = 0.000000e+00 : f64}
// CHECK-NEXT:    %[[W:.*]] = aicc.constant dense<{{.*}}> : tensor<2x1x3x3xf32>
// CHECK-NEXT:    %[[C:.*]] = aicc.conv2d %[[P]], %[[W]] {{{.*}}groups = 2 : i64, aicc.quantized = "conv2d"}
// CHECK-NEXT:    %[[I:.*]] = aicc.cast %[[C]] : tensor<2x2x3x3xf32> -> tensor<2x2x3x3xi32>
// CHECK-NEXT:    %[[IF:.*]] = aicc.cast %[[I]] : tensor<2x2x3x3xi32> -> tensor<2x2x3x3xf32>
// CHECK-NEXT:    %[[M:.*]] = aicc.constant dense<{{\[\[\[}}0.166666672]], {{\[\[}}0.0833333358]]]> : tensor<2x1x1xf32>
// CHECK-NEXT:    %[[Y:.*]] = aicc.mul %[[IF]], %[[M]]
// CHECK-NEXT:    %[[Q:.*]] = aicc.quantize %[[Y]] {scale = array<f64: 1.000000e+00>, zero_point = array<i64: 1>, axis = -1 : i64}
// CHECK-NEXT:    func.return %[[Q]]
func.func @depthwise(%q: tensor<2x2x3x3xi8>) -> tensor<2x2x3x3xi8> {
  %d = aicc.dequantize %q {scale = array<f64: 0.5>, zero_point = array<i64: 7>, axis = -1 : i64} : tensor<2x2x3x3xi8> -> tensor<2x2x3x3xf32>
  %p = aicc.pad %d {low = array<i64: 0, 0, 1, 1>, high = array<i64: 0, 0, 1, 1>, value = 0.0 : f64} : tensor<2x2x3x3xf32> -> tensor<2x2x5x5xf32>
  %qw = aicc.constant dense<[[[[1, 2, 3], [4, 5, 6], [7, 8, 9]]], [[[-1, -2, -3], [4, 5, 6], [7, 8, -128]]]]> : tensor<2x1x3x3xi8>
  %w = aicc.dequantize %qw {scale = array<f64: 0.25, 0.125>, zero_point = array<i64: 0, 0>, axis = 0 : i64} : tensor<2x1x3x3xi8> -> tensor<2x1x3x3xf32>
  %c = aicc.conv2d %p, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 2 : i64} : tensor<2x2x5x5xf32>, tensor<2x1x3x3xf32> -> tensor<2x2x3x3xf32>
  %y = aicc.quantize %c {scale = array<f64: 0.75>, zero_point = array<i64: 1>, axis = -1 : i64} : tensor<2x2x3x3xf32> -> tensor<2x2x3x3xi8>
  func.return %y : tensor<2x2x3x3xi8>
}

// -----
// A weight with a zero point, or an activation quantized per channel: the conv stays float.
// CHECK-LABEL: func.func @unchanged
// CHECK-NOT:     aicc.matmul_integer
// CHECK-COUNT-2: aicc.conv2d %{{.*}} {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} :
// CHECK-NOT:     aicc.matmul_integer
func.func @unchanged(%q: tensor<1x2x3x3xi8>) -> (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) {
  %d = aicc.dequantize %q {scale = array<f64: 0.5>, zero_point = array<i64: 7>, axis = -1 : i64} : tensor<1x2x3x3xi8> -> tensor<1x2x3x3xf32>
  %dc = aicc.dequantize %q {scale = array<f64: 0.5, 0.25>, zero_point = array<i64: 0, 0>, axis = 1 : i64} : tensor<1x2x3x3xi8> -> tensor<1x2x3x3xf32>
  %qw = aicc.constant dense<[[[[1, 2], [3, 4]], [[5, 6], [7, 8]]]]> : tensor<1x2x2x2xi8>
  %w = aicc.dequantize %qw {scale = array<f64: 0.25>, zero_point = array<i64: 1>, axis = -1 : i64} : tensor<1x2x2x2xi8> -> tensor<1x2x2x2xf32>
  %w0 = aicc.dequantize %qw {scale = array<f64: 0.25>, zero_point = array<i64: 0>, axis = -1 : i64} : tensor<1x2x2x2xi8> -> tensor<1x2x2x2xf32>
  %c = aicc.conv2d %d, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x2x3x3xf32>, tensor<1x2x2x2xf32> -> tensor<1x1x2x2xf32>
  %c2 = aicc.conv2d %dc, %w0 {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x2x3x3xf32>, tensor<1x2x2x2xf32> -> tensor<1x1x2x2xf32>
  func.return %c, %c2 : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>
}

// -----
// A QDQ max pool of a graph input (NCHW, no conv before it): a max of the int8 values. A
// quantize with other parameters than the dequantize's keeps the float pool.
// CHECK-LABEL: func.func @int8_max_pool
// CHECK-NEXT:    %[[D:.*]] = aicc.dequantize %q
// CHECK-NEXT:    %[[F:.*]] = aicc.pool2d %[[D]]
// CHECK-NEXT:    %[[P:.*]] = aicc.tensor_op "out[n, c, p, q] = max[i, j](in0[n, c, 2 * p + i, 2 * q + j])"(%q) {{.*}} : (tensor<1x2x5x4xi8>) -> tensor<1x2x2x2xi8>
// CHECK-NEXT:    %[[Q:.*]] = aicc.quantize %[[F]] {scale = array<f64: 2.000000e-01>
// CHECK-NEXT:    func.return %[[P]], %[[Q]]
func.func @int8_max_pool(%q: tensor<1x2x5x4xi8>) -> (tensor<1x2x2x2xi8>, tensor<1x2x2x2xi8>) {
  %d = aicc.dequantize %q {scale = array<f64: 0.1>, zero_point = array<i64: 3>, axis = -1 : i64} : tensor<1x2x5x4xi8> -> tensor<1x2x5x4xf32>
  %m = aicc.pool2d %d {kind = "max", kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>} : tensor<1x2x5x4xf32> -> tensor<1x2x2x2xf32>
  %y = aicc.quantize %m {scale = array<f64: 0.1>, zero_point = array<i64: 3>, axis = -1 : i64} : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xi8>
  %y2 = aicc.quantize %m {scale = array<f64: 0.2>, zero_point = array<i64: 3>, axis = -1 : i64} : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xi8>
  func.return %y, %y2 : tensor<1x2x2x2xi8>, tensor<1x2x2x2xi8>
}

// -----
// A padded QDQ max pool (ResNet's stem: a pad of -inf between the dequantize and the max):
// the int8 input is padded with -128, the least int8, and pooled as int8. A pad of another
// value (0 here) could be above the input's values: that pool stays in float.
// CHECK-LABEL: func.func @int8_max_pool_padded
// CHECK-NEXT:    %[[D:.*]] = aicc.dequantize %q
// CHECK-NEXT:    %[[QP:.*]] = aicc.pad %q {low = array<i64: 0, 0, 1, 1>, high = array<i64: 0, 0, 1, 1>, value = -1.280000e+02 : f64} : tensor<1x2x5x5xi8> -> tensor<1x2x7x7xi8>
// CHECK-NEXT:    %[[P:.*]] = aicc.tensor_op "out[n, c, p, q] = max[i, j](in0[n, c, 2 * p + i, 2 * q + j])"(%[[QP]]) {{.*}} : (tensor<1x2x7x7xi8>) -> tensor<1x2x3x3xi8>
// CHECK-NEXT:    %[[Z:.*]] = aicc.pad %[[D]] {{.*}} value = 0.000000e+00 : f64}
// CHECK-NEXT:    %[[F:.*]] = aicc.pool2d %[[Z]]
// CHECK-NEXT:    %[[Q:.*]] = aicc.quantize %[[F]]
// CHECK-NEXT:    func.return %[[P]], %[[Q]]
func.func @int8_max_pool_padded(%q: tensor<1x2x5x5xi8>) -> (tensor<1x2x3x3xi8>, tensor<1x2x3x3xi8>) {
  %d = aicc.dequantize %q {scale = array<f64: 0.1>, zero_point = array<i64: 3>, axis = -1 : i64} : tensor<1x2x5x5xi8> -> tensor<1x2x5x5xf32>
  %p = aicc.pad %d {low = array<i64: 0, 0, 1, 1>, high = array<i64: 0, 0, 1, 1>, value = 0xFFF0000000000000 : f64} : tensor<1x2x5x5xf32> -> tensor<1x2x7x7xf32>
  %m = aicc.pool2d %p {kind = "max", kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>} : tensor<1x2x7x7xf32> -> tensor<1x2x3x3xf32>
  %y = aicc.quantize %m {scale = array<f64: 0.1>, zero_point = array<i64: 3>, axis = -1 : i64} : tensor<1x2x3x3xf32> -> tensor<1x2x3x3xi8>
  %z = aicc.pad %d {low = array<i64: 0, 0, 1, 1>, high = array<i64: 0, 0, 1, 1>, value = 0.0 : f64} : tensor<1x2x5x5xf32> -> tensor<1x2x7x7xf32>
  %m2 = aicc.pool2d %z {kind = "max", kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>} : tensor<1x2x7x7xf32> -> tensor<1x2x3x3xf32>
  %y2 = aicc.quantize %m2 {scale = array<f64: 0.1>, zero_point = array<i64: 3>, axis = -1 : i64} : tensor<1x2x3x3xf32> -> tensor<1x2x3x3xi8>
  func.return %y, %y2 : tensor<1x2x3x3xi8>, tensor<1x2x3x3xi8>
}
