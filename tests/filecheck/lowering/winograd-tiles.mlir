// RUN: aicc-opt %s -p 'tensor-to-linalg{conv-packed=true conv-vector-bits=256}' | filecheck %s --check-prefix=DEF
// RUN: aicc-opt %s -p 'tensor-to-linalg{conv-packed=true conv-vector-bits=256 conv-winograd4-min-tiles=16}' | filecheck %s --check-prefix=AMD
// tensor-to-linalg's conv-winograd4-min-tiles: from how many 4x4 tiles of its output the
// heuristic takes F(4x4, 3x3) for a Winograd conv, else F(2x2, 3x3) (conv_lowering's
// winograd_tile). The cpu target's winograd4_rule: 32 (the default) on Intel cores and generic
// CPU names, 16 on AMD's. A 14x14 output is 16 tiles (resnet50's 256ch stage), 28x28 49, 8x8 4.

// DEF-LABEL:  func.func @tiles16
// DEF:          aicc.conv_lowering = "winograd"
// DEF-LABEL:  func.func @tiles49
// DEF:          aicc.conv_lowering = "winograd4"
// DEF-LABEL:  func.func @tiles4
// DEF:          aicc.conv_lowering = "winograd"

// AMD-LABEL:  func.func @tiles16
// AMD:          aicc.conv_lowering = "winograd4"
// AMD-LABEL:  func.func @tiles49
// AMD:          aicc.conv_lowering = "winograd4"
// AMD-LABEL:  func.func @tiles4
// AMD:          aicc.conv_lowering = "winograd"

func.func @tiles16(%x: tensor<1x32x16x16xf32>) -> tensor<1x32x14x14xf32> {
  %w = aicc.constant dense<0.5> : tensor<32x32x3x3xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x32x16x16xf32>, tensor<32x32x3x3xf32> -> tensor<1x32x14x14xf32>
  func.return %c : tensor<1x32x14x14xf32>
}

func.func @tiles49(%x: tensor<1x32x30x30xf32>) -> tensor<1x32x28x28xf32> {
  %w = aicc.constant dense<0.5> : tensor<32x32x3x3xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x32x30x30xf32>, tensor<32x32x3x3xf32> -> tensor<1x32x28x28xf32>
  func.return %c : tensor<1x32x28x28xf32>
}

func.func @tiles4(%x: tensor<1x32x10x10xf32>) -> tensor<1x32x8x8xf32> {
  %w = aicc.constant dense<0.5> : tensor<32x32x3x3xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x32x10x10xf32>, tensor<32x32x3x3xf32> -> tensor<1x32x8x8xf32>
  func.return %c : tensor<1x32x8x8xf32>
}
