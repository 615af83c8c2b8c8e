// RUN: aicc-opt %s -p 'tensor-to-linalg{conv-vector-bits=256}' | filecheck %s
// The "winograd4" conv lowering (compiler/lowering/winograd.py): F(4x4, 3x3) of a 3x3
// stride-1 conv asked for by its aicc.conv_lowering attribute, for a target of 256-bit
// vectors. A 42x42 input, 2 -> 3 channels: a 40x40 output, 10 x 10 tiles of 4x4.
//
// Input transform: one generic reading the 36 elements x[4ty + i, 4tx + j] of a tile's 6x6
// window (stride 4) and yielding the 36 V_ab = (Bt d B)[a, b]; factored, Bt d first: its first
// element is 4 d[0][0] - 5 d[2][0] + d[4][0]. Marked
// aicc.vectorize = 4: LLVM vectorizes it 4 lanes wide (a row of 10 tiles is in the range
// where that was measured to pay, WINOGRAD4_VECTORIZE_TILES).
// CHECK-LABEL: func.func @wg4
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, (d2 * 4), (d3 * 4))>, affine_map<(d0, d1, d2, d3) -> (d0, d1, (d2 * 4), ((d3 * 4) + 1))>
// CHECK-SAME:      affine_map<(d0, d1, d2, d3) -> (d0, d1, ((d2 * 4) + 5), ((d3 * 4) + 5))>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-SAME:      attrs = {{ *}}{aicc.vectorize = 4 : i64}
// CHECK-NEXT:    ^{{.*}}(%[[D00:[a-z0-9_]+]]: f32,
// CHECK-NEXT:      %[[FOUR:.*]] = arith.constant 4.000000e+00 : f32
// CHECK-NEXT:      %[[A:.*]] = arith.mulf %[[D00]], %[[FOUR]] : f32
// CHECK-NEXT:      %[[FIVE:.*]] = arith.constant 5.000000e+00 : f32
// CHECK-NEXT:      %[[B:.*]] = arith.mulf %{{.*}}, %[[FIVE]] : f32
// CHECK-NEXT:      %[[C:.*]] = arith.subf %[[A]], %[[B]] : f32
// CHECK-NEXT:      arith.addf %[[C]], %{{.*}} : f32
// CHECK:           linalg.yield
// CHECK-NEXT:    } -> (tensor<1x2x10x10xf32>, tensor<1x2x10x10xf32>,
// Each V_ab is copied into its slice of one (36, N, C, TH, TW) V (forward-copies, after
// bufferize, has the transform write there itself).
// CHECK:         linalg.generic {{.*}}affine_map<(d0, d1, d2, d3) -> (0, d0, d1, d2, d3)>{{.*}} outs(%{{.*}} : tensor<36x1x2x10x10xf32>)
// CHECK:         linalg.generic {{.*}}affine_map<(d0, d1, d2, d3) -> (35, d0, d1, d2, d3)>{{.*}} outs(%{{.*}} : tensor<36x1x2x10x10xf32>)
// Then one matmul M[ab, n] = U[ab] @ V[ab, n] over the 36 (a, b) and the images, U = G g Gt
// of the all-0.5 weight transformed at compile time (0.5 * (1/4)^2 = 0.03125 at (0, 0)),
// marked winograd4 for choose-schedule (a constant this large prints as hex: 0x3D000000 is
// 0.03125).
// CHECK:         arith.constant dense<"0x0000003D0000003D
// CHECK:         ins(%{{.*}}, %{{.*}} : tensor<36x3x2xf32>, tensor<36x1x2x100xf32>) outs(%{{.*}} : tensor<36x1x3x100xf32>) attrs = {{ *}}{aicc.conv_lowering = "winograd4"}
// CHECK-NOT:     aicc.conv_lowering
// Output transform: one generic reading the 36 M[ab] and the bias, yielding the 16 planes
// P[r, s] = bias + (At M A)[r, s]; each copied into its slice of the (4, 4, N, OC, 4, 4)
// planes, then interleaved into the output viewed as (N, OC, 10, 4, 10, 4).
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (0, d0, d1, d2, d3)>, {{.*}}affine_map<(d0, d1, d2, d3) -> (35, d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d1)>
// CHECK-NOT:     aicc.vectorize
// CHECK:         } -> (tensor<1x3x10x10xf32>, tensor<1x3x10x10xf32>,
// CHECK:         linalg.generic {{.*}}affine_map<(d0, d1, d2, d3) -> (0, 0, d0, d1, d2, d3)>
// CHECK:         linalg.generic {{.*}}affine_map<(d0, d1, d2, d3) -> (3, 3, d0, d1, d2, d3)>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d3, d5, d0, d1, d2, d4)>, {{.*}} ins(%{{.*}} : tensor<4x4x1x3x10x10xf32>) outs(%{{.*}} : tensor<1x3x10x4x10x4xf32>)
// CHECK:         tensor.expand_shape {{.*}} output_shape [1, 3, 40, 40]
// CHECK-NEXT:    func.return
func.func @wg4(%x: tensor<1x2x42x42xf32>, %b: tensor<3x1x1xf32>) -> tensor<1x3x40x40xf32> {
  %w = aicc.constant dense<0.5> : tensor<3x2x3x3xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64, aicc.conv_lowering = "winograd4"} : tensor<1x2x42x42xf32>, tensor<3x2x3x3xf32> -> tensor<1x3x40x40xf32>
  %y = aicc.add %c, %b : tensor<1x3x40x40xf32>, tensor<3x1x1xf32> -> tensor<1x3x40x40xf32>
  func.return %y : tensor<1x3x40x40xf32>
}

// A 6x6 output is not a multiple of 4: the 8x8 input copied into a zero 10x10 one (2 x 2
// tiles), and the 8x8 result cut to 6x6 at the end (+ 0 kept in the maps, so that the loop
// ranges come from the smaller operand). Rows of 2 tiles: no aicc.vectorize.
// CHECK-LABEL: func.func @wg4_pad
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, (d2 + 0), (d3 + 0))>]{{.*}} ins(%x : tensor<1x2x8x8xf32>) outs(%{{.*}} : tensor<1x2x10x10xf32>)
// CHECK-NOT:     aicc.vectorize
// CHECK:         tensor.expand_shape {{.*}} output_shape [1, 3, 8, 8]
// CHECK-NEXT:    %[[Y:.*]] = tensor.empty() : tensor<1x3x6x6xf32>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, (d2 + 0), (d3 + 0))>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>]{{.*}} outs(%[[Y]] : tensor<1x3x6x6xf32>)
func.func @wg4_pad(%x: tensor<1x2x8x8xf32>) -> tensor<1x3x6x6xf32> {
  %w = aicc.constant dense<0.5> : tensor<3x2x3x3xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64, aicc.conv_lowering = "winograd4"} : tensor<1x2x8x8xf32>, tensor<3x2x3x3xf32> -> tensor<1x3x6x6xf32>
  func.return %c : tensor<1x3x6x6xf32>
}

// 8 -> 8 channels on a 32x64 output: 8 x 16 = 128 tiles, so each (a, b)'s slice of V and of M
// would be 4 KiB, all 36 in one L1 set while the transforms write or read them at once. Both
// get a ninth row (stagger_rows): V's is zeros, written before the transform (U's ninth
// column is zero too), and M's is not read.
// CHECK-LABEL: func.func @wg4_stagger
// CHECK:         %[[V:.*]] = tensor.empty() : tensor<36x1x9x8x16xf32>
// CHECK-NEXT:    %[[Z:.*]] = arith.constant dense<0.000000e+00> : tensor<36x1x1x8x16xf32>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, (d2 + 8), d3, d4)>]{{.*}} ins(%[[Z]] : {{.*}}) outs(%[[V]] : {{.*}})
// CHECK:         linalg.generic {{.*}}affine_map<(d0, d1, d2, d3) -> (0, d0, (d1 + 0), d2, d3)>{{.*}} ins(%{{.*}} : tensor<1x8x8x16xf32>) outs(%{{.*}} : tensor<36x1x9x8x16xf32>)
// CHECK:         ins(%{{.*}}, %{{.*}} : tensor<36x9x9xf32>, tensor<36x1x9x128xf32>) outs(%{{.*}} : tensor<36x1x9x128xf32>) attrs = {{ *}}{aicc.conv_lowering = "winograd4"}
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (0, d0, (d1 + 0), d2, d3)>
func.func @wg4_stagger(%x: tensor<1x8x34x66xf32>) -> tensor<1x8x32x64xf32> {
  %w = aicc.constant dense<0.5> : tensor<8x8x3x3xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64, aicc.conv_lowering = "winograd4"} : tensor<1x8x34x66xf32>, tensor<8x8x3x3xf32> -> tensor<1x8x32x64xf32>
  func.return %c : tensor<1x8x32x64xf32>
}
