// RUN: aicc-opt %s -p 'tensor-to-linalg' | filecheck %s
// The "winograd" conv lowering (compiler/lowering/winograd.py): F(2x2, 3x3) of a 3x3 stride-1
// conv asked for by its aicc.conv_lowering attribute. A 6x6 input, 2 -> 3 channels: a 4x4
// output, 2 x 2 tiles of 2x2.
//
// Input transform: 16 generics, each writing its slice V[ab] of one (16, N, C, TH, TW) V: the
// +-sum of the 4 input elements with Bt[a, i] * Bt[b, j] != 0, read in place at stride 2.
// (a, b) = (0, 0): x[2ty, 2tx] - x[2ty, 2tx + 2] - x[2ty + 2, 2tx] + x[2ty + 2, 2tx + 2].
// CHECK-LABEL: func.func @wg
// CHECK:         tensor.empty() : tensor<16x1x2x2x2xf32>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, (d2 * 2), (d3 * 2))>, affine_map<(d0, d1, d2, d3) -> (d0, d1, (d2 * 2), ((d3 * 2) + 2))>, affine_map<(d0, d1, d2, d3) -> (d0, d1, ((d2 * 2) + 2), (d3 * 2))>, affine_map<(d0, d1, d2, d3) -> (d0, d1, ((d2 * 2) + 2), ((d3 * 2) + 2))>, affine_map<(d0, d1, d2, d3) -> (0, d0, d1, d2, d3)>]
// CHECK-NEXT:    ^{{.*}}(%[[A:.*]]: f32, %[[B:.*]]: f32, %[[C:.*]]: f32, %[[D:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[S1:.*]] = arith.subf %[[A]], %[[B]] : f32
// CHECK-NEXT:      %[[S2:.*]] = arith.subf %[[S1]], %[[C]] : f32
// CHECK-NEXT:      %[[S3:.*]] = arith.addf %[[S2]], %[[D]] : f32
// CHECK-NEXT:      linalg.yield %[[S3]] : f32
// CHECK-NEXT:    } -> tensor<16x1x2x2x2xf32>
// CHECK:         -> (15, d0, d1, d2, d3)>]
// Then one matmul M[ab, n] = U[ab] @ V[ab, n], batched over the 16 (a, b) and the images, the
// weight transformed at compile time: U = G g Gt of the all-0.5 weight is 0.5 at (0, 0),
// 0.75 at (0, 1) (a row of G times g times a row of G) ... A matmul generic (loops ab, n, m,
// p | k) that choose-schedule and tile-matmul take, marked winograd; its batch is what the
// threads split.
// CHECK:         %[[U:.*]] = arith.constant dense<{{\[\[\[}}5.000000e-01, 5.000000e-01], {{.*}}{{\]\]}}, {{\[\[}}7.500000e-01,
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%[[U]], %{{.*}} : tensor<16x3x2xf32>, tensor<16x1x2x4xf32>) outs(%{{.*}} : tensor<16x1x3x4xf32>) attrs = {{ *}}{aicc.conv_lowering = "winograd"}
// CHECK-NOT:     aicc.conv_lowering
// Output transform: plane (r, s) = (0, 0) is the bias plus the 9 M[ab] with a, b < 3, written
// into its slice of the (2, 2, N, OC, 2, 2) planes through an offset map (+ 0 kept, so the
// loop ranges come from the inputs); the last plane, (1, 1), at + 1, + 1.
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (0, d0, d1, d2, d3, d4, d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (1, d0, d1, d2, d3, d4, d5)>
// CHECK-SAME:      affine_map<(d0, d1, d2, d3, d4, d5) -> (d3)>, affine_map<(d0, d1, d2, d3, d4, d5) -> ((d0 + 0), (d1 + 0), d2, d3, d4, d5)>]
// CHECK-COUNT-8:   arith.addf
// CHECK:         linalg.generic {{.*}} -> ((d0 + 1), (d1 + 1), d2, d3, d4, d5)>]
// Then the planes interleaved into the output viewed as (N, OC, OH/2, 2, OW/2, 2).
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d3, d5, d0, d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4, d5)>]{{.*}} ins(%{{.*}} : tensor<2x2x1x3x2x2xf32>) outs(%{{.*}} : tensor<1x3x2x2x2x2xf32>)
// CHECK:         tensor.expand_shape {{.*}} output_shape [1, 3, 4, 4]
// CHECK-NEXT:    func.return

func.func @wg(%x: tensor<1x2x6x6xf32>, %b: tensor<3x1x1xf32>) -> tensor<1x3x4x4xf32> {
  %w = aicc.constant dense<0.5> : tensor<3x2x3x3xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64, aicc.conv_lowering = "winograd"} : tensor<1x2x6x6xf32>, tensor<3x2x3x3xf32> -> tensor<1x3x4x4xf32>
  %y = aicc.add %c, %b : tensor<1x3x4x4xf32>, tensor<3x1x1xf32> -> tensor<1x3x4x4xf32>
  func.return %y : tensor<1x3x4x4xf32>
}

// 8 -> 8 channels on a 32x16 output: 16 x 8 = 128 tiles, so each (a, b)'s slice of M (8 rows
// of 128) would be 4 KiB, all 16 in one L1 set while the output transform reads 9 of them at
// once. M gets a ninth row (U a zero one, stagger_rows), which the output transform does not
// read (d + 0: the range comes from the planes).
// CHECK-LABEL: func.func @wg_stagger
// CHECK:         -> tensor<16x1x8x16x8xf32>
// CHECK:         linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<16x9x8xf32>, tensor<16x1x8x128xf32>) outs(%{{.*}} : tensor<16x1x9x128xf32>) attrs = {{ *}}{aicc.conv_lowering = "winograd"}
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (0, d0, d1, d2, (d3 + 0), d4, d5)>
func.func @wg_stagger(%x: tensor<1x8x34x18xf32>) -> tensor<1x8x32x16xf32> {
  %w = aicc.constant dense<0.5> : tensor<8x8x3x3xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64, aicc.conv_lowering = "winograd"} : tensor<1x8x34x18xf32>, tensor<8x8x3x3xf32> -> tensor<1x8x32x16xf32>
  func.return %c : tensor<1x8x32x16xf32>
}
