// RUN: aicc-opt %s -p 'tensor-to-linalg{conv-packed=true}' | filecheck %s --check-prefix=ALL
// RUN: aicc-opt %s -p 'tensor-to-linalg{conv-packed=true conv-packed-1x1=small}' | filecheck %s --check-prefix=SMALL
// RUN: aicc-opt %s -p 'tensor-to-linalg{conv-packed=true conv-packed-1x1=none}' | filecheck %s --check-prefix=NONE
// RUN: not aicc-opt %s -p 'tensor-to-linalg{conv-packed=true conv-packed-1x1=bogus}' 2>&1 | filecheck %s --check-prefix=BAD
// tensor-to-linalg's conv-packed-1x1: which of choose_conv_lowering's rules for the packed
// kernel hold for unstrided 1x1 convs on the target's machine (the cpu target's
// packed_1x1_rule: "none" on Intel cores with AVX-512, "small" with AVX2, "all" elsewhere).
// "all" packs small images (up to 64 pixels), narrowing convs up to 256 pixels, and narrowing
// ones to at most 128 channels on any image; "small" the first alone; "none" none of them,
// each a matmul on the input viewed as (N, IC, H*W). A strided 1x1 conv (a shortcut) keeps
// every rule, since the matmul would need an im2col copy first.

// ALL-LABEL:    func.func @small
// ALL:            aicc.conv_lowering = "packed"
// ALL-LABEL:    func.func @narrowing
// ALL:            aicc.conv_lowering = "packed"
// ALL-LABEL:    func.func @narrowing_large
// ALL:            aicc.conv_lowering = "packed"
// ALL-LABEL:    func.func @strided
// ALL:            aicc.conv_lowering = "packed"

// SMALL-LABEL:  func.func @small
// SMALL:          aicc.conv_lowering = "packed"
// SMALL-LABEL:  func.func @narrowing
// SMALL:          aicc.conv_lowering = "matmul"
// SMALL-LABEL:  func.func @narrowing_large
// SMALL:          aicc.conv_lowering = "matmul"
// SMALL-LABEL:  func.func @strided
// SMALL:          aicc.conv_lowering = "packed"

// NONE-LABEL:   func.func @small
// NONE-NOT:       aicc.conv_lowering = "packed"
// NONE:           aicc.conv_lowering = "matmul"
// NONE-LABEL:   func.func @narrowing
// NONE:           aicc.conv_lowering = "matmul"
// NONE-LABEL:   func.func @narrowing_large
// NONE:           aicc.conv_lowering = "matmul"
// NONE-LABEL:   func.func @strided
// NONE:           aicc.conv_lowering = "packed"

// BAD: conv-packed-1x1 'bogus': expected one of all, small, none

func.func @small(%x: tensor<1x16x7x7xf32>) -> tensor<1x32x7x7xf32> {
  %w = aicc.constant dense<0.5> : tensor<32x16x1x1xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x16x7x7xf32>, tensor<32x16x1x1xf32> -> tensor<1x32x7x7xf32>
  func.return %c : tensor<1x32x7x7xf32>
}

func.func @narrowing(%x: tensor<1x32x12x12xf32>) -> tensor<1x16x12x12xf32> {
  %w = aicc.constant dense<0.5> : tensor<16x32x1x1xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x32x12x12xf32>, tensor<16x32x1x1xf32> -> tensor<1x16x12x12xf32>
  func.return %c : tensor<1x16x12x12xf32>
}

func.func @narrowing_large(%x: tensor<1x64x20x20xf32>) -> tensor<1x16x20x20xf32> {
  %w = aicc.constant dense<0.5> : tensor<16x64x1x1xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x64x20x20xf32>, tensor<16x64x1x1xf32> -> tensor<1x16x20x20xf32>
  func.return %c : tensor<1x16x20x20xf32>
}

func.func @strided(%x: tensor<1x8x16x16xf32>) -> tensor<1x32x8x8xf32> {
  %w = aicc.constant dense<0.5> : tensor<32x8x1x1xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x8x16x16xf32>, tensor<32x8x1x1xf32> -> tensor<1x32x8x8xf32>
  func.return %c : tensor<1x32x8x8xf32>
}
