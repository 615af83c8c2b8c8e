// RUN: aicc-opt %s -p 'tensor-to-linalg,choose-schedule{vector-bits=512 threads=1}' --split-input-file | filecheck %s
// RUN: aicc-opt %s -p 'tensor-to-linalg{conv-lowering=direct}' --split-input-file | filecheck %s --check-prefix=DIRECT
// conv2d through the packed matmul (compiler/lowering/nn_to_linalg.py), as choose_conv_lowering
// picks per shape, or one direct generic when forced.

// 3x3 with a per-channel bias: an im2col copy col[n, ic, kh, kw, oh, ow] = x[n, ic, oh + kh,
// ow + kw], the bias broadcast into the accumulator (no add after), and a batched matmul
// out[n] (OC x OH*OW) = W (OC x IC*KH*KW) @ col[n] with the weight broadcast over the batch,
// which gets a conv's schedule: B (the copy) read in place, not packed.
// CHECK-LABEL: func.func @conv3x3_bias
// CHECK:         %[[COL:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, (d5 + d3), (d6 + d4))>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3, d4, d5, d6)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%{{.*}} : tensor<2x1x3x9x9xf32>) outs(%{{.*}} : tensor<2x1x3x3x3x7x7xf32>)
// CHECK:         %[[B:.*]] = tensor.expand_shape {{.*}} into tensor<2x27x49xf32>
// CHECK:         %[[ACC:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1, 0)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>]
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%{{.*}}, %[[B]] : tensor<32x27xf32>, tensor<2x27x49xf32>) outs(%[[ACC]] : tensor<2x32x49xf32>) attrs = {aicc.conv_lowering = "im2col", aicc.schedule = {mr = 11 : i64, nr = 32 : i64, {{.*}}, pack_b = false
// CHECK:           arith.addf
// CHECK-NOT:     arith.addf
// CHECK:         tensor.expand_shape {{.*}} into tensor<2x32x7x7xf32>
// DIRECT-LABEL:  func.func @conv3x3_bias
// DIRECT:          linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d1, d2, 0, 0)>
// DIRECT:          linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]
// DIRECT-NOT:      aicc.schedule
func.func @conv3x3_bias(%x: tensor<2x3x9x9xf32>, %w: tensor<32x3x3x3xf32>, %b: tensor<1x32x1x1xf32>) -> tensor<2x32x7x7xf32> {
  %0 = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<2x3x9x9xf32>, tensor<32x3x3x3xf32> -> tensor<2x32x7x7xf32>
  %1 = aicc.add %0, %b : tensor<2x32x7x7xf32>, tensor<1x32x1x1xf32> -> tensor<2x32x7x7xf32>
  func.return %1 : tensor<2x32x7x7xf32>
}

// -----
// 1x1 stride 1: no copy, the input viewed as (N, IC, H*W) is the matmul's B.
// CHECK-LABEL: func.func @conv1x1
// CHECK:         %[[X:.*]] = tensor.expand_shape {{.*}} into tensor<1x32x64xf32>
// CHECK-NEXT:    tensor.collapse_shape %{{.*}} : tensor<8x32x1x1xf32>
// CHECK:         linalg.fill
// CHECK-NEXT:    linalg.generic {{.*}} ins(%{{.*}}, %[[X]] : tensor<8x32xf32>, tensor<1x32x64xf32>) outs(%{{.*}} : tensor<1x8x64xf32>) attrs = {aicc.conv_lowering = "matmul", aicc.schedule
func.func @conv1x1(%x: tensor<1x32x8x8xf32>, %w: tensor<8x32x1x1xf32>) -> tensor<1x8x8x8xf32> {
  %0 = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x32x8x8xf32>, tensor<8x32x1x1xf32> -> tensor<1x8x8x8xf32>
  func.return %0 : tensor<1x8x8x8xf32>
}

// -----
// Groups: a batch dim of the matmul, the weight (G, OC/G, K) following it. The attribute
// overrides the heuristic (which would go direct: 2 input channels per group).
// CHECK-LABEL: func.func @grouped
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>]{{.*}} ins(%{{.*}}, %{{.*}} : tensor<2x3x18xf32>, tensor<1x2x18x9xf32>) {{.*}}aicc.schedule
func.func @grouped(%x: tensor<1x4x5x5xf32>, %w: tensor<6x2x3x3xf32>) -> tensor<1x6x3x3xf32> {
  %0 = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 2 : i64, aicc.conv_lowering = "im2col"} : tensor<1x4x5x5xf32>, tensor<6x2x3x3xf32> -> tensor<1x6x3x3xf32>
  func.return %0 : tensor<1x6x3x3xf32>
}

// -----
// Depthwise: direct, no schedule.
// CHECK-LABEL: func.func @depthwise
// CHECK:         linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]
// CHECK-NOT:     aicc.schedule
func.func @depthwise(%x: tensor<1x32x16x16xf32>, %w: tensor<32x1x3x3xf32>) -> tensor<1x32x14x14xf32> {
  %0 = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 32 : i64} : tensor<1x32x16x16xf32>, tensor<32x1x3x3xf32> -> tensor<1x32x14x14xf32>
  func.return %0 : tensor<1x32x14x14xf32>
}
