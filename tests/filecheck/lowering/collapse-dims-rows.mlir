// RUN: aicc-opt %s -p 'tensor-to-linalg{conv-vector-bits=256},bufferize,forward-copies,collapse-dims' | filecheck %s
// forward-copies and collapse-dims on slices with extra rows: Winograd F(4x4, 3x3) of 8 -> 8
// channels on a 32x64 output (128 tiles a channel), whose (36, N, C, T) V and (36, N, OC, T)
// products M get a ninth row in each slice (winograd.stagger_rows) so that the 36 slices
// start on different L1 sets.
//
// forward-copies: the input transform reads at stride 4, so its loops would not merge anyway
// (collapse-dims), and its 36 results go into their slices of V at any size: the transform
// writes V itself (`d + 0` on the channel dim: V's slices hold 9 rows, the loop 8), after the
// generic writing V's zero rows.
// CHECK-LABEL: func.func @wg4_stagger
// CHECK:         %[[V:.*]] = memref.alloc() {{.*}} : memref<36x1x9x8x16xf32>
// CHECK-NEXT:    linalg.generic {{.*}} -> (d0, d1, (d2 + 8), d3, d4)>]{{.*}} outs(%[[V]] : memref<36x1x9x8x16xf32>)
// CHECK:         linalg.generic {{.*}}affine_map<(d0, d1, d2, d3) -> (0, d0, (d1 + 0), d2, d3)>, affine_map<(d0, d1, d2, d3) -> (1, d0, (d1 + 0), d2, d3)>
// CHECK-SAME:      outs(%[[V]], %[[V]],
// collapse-dims: the output transform reads M's 36 slices at rows 0-7 of 9: the row dim
// merges with the tile dim after it (a row's 128 tiles are whole), the unit image dim drops,
// so each slice is one run of 1024 products read at `d0 + 0` of its 1152; the planes are
// written (forwarded into their slices of the 4 x 4 planes) as runs of 1024 too.
// CHECK:         %[[MC:.*]] = memref.collapse_shape %{{.*}} {{\[}}[0 : i64, 1 : i64], [2 : i64, 3 : i64, 4 : i64]] : memref<36x1x9x8x16xf32> into memref<36x1152xf32>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0) -> (0, (d0 + 0))>, affine_map<(d0) -> (1, (d0 + 0))>,
// CHECK-SAME:      iterator_types = ["parallel"]
// CHECK-SAME:      ins(%[[MC]], %{{.*}} : memref<36x1152xf32>, memref<36x1152xf32>,
// CHECK-SAME:      outs({{.*}} : memref<4x4x1024xf32>,
func.func @wg4_stagger(%x: tensor<1x8x34x66xf32>) -> tensor<1x8x32x64xf32> {
  %w = aicc.constant dense<0.5> : tensor<8x8x3x3xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64, aicc.conv_lowering = "winograd4"} : tensor<1x8x34x66xf32>, tensor<8x8x3x3xf32> -> tensor<1x8x32x64xf32>
  func.return %c : tensor<1x8x32x64xf32>
}
