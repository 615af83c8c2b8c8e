// RUN: aicc-opt %s -p fold-conv-input-scale --split-input-file | filecheck %s

// An SE block's gate: x (1, 96, 56, 56) times s (1, 96, 1, 1), into a 1x1 conv of 24 output
// channels. 24 < 56 * 56: the gate moves onto the weight (24 x 96 multiplies instead of 96 x
// 56 x 56), the conv reads x itself.
// CHECK-LABEL: func.func @se_gate
// CHECK-SAME:    (%[[X:.*]]: tensor<1x96x56x56xf32>, %[[S:.*]]: tensor<1x96x1x1xf32>, %[[W:.*]]: tensor<24x96x1x1xf32>)
// CHECK-NEXT:    %[[WS:.*]] = aicc.mul %[[W]], %[[S]] : tensor<24x96x1x1xf32>, tensor<1x96x1x1xf32> -> tensor<24x96x1x1xf32>
// CHECK-NEXT:    %[[Y:.*]] = aicc.conv2d %[[X]], %[[WS]] {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x96x56x56xf32>, tensor<24x96x1x1xf32> -> tensor<1x24x56x56xf32>
// CHECK-NEXT:    func.return %[[Y]]
func.func @se_gate(%x: tensor<1x96x56x56xf32>, %s: tensor<1x96x1x1xf32>, %w: tensor<24x96x1x1xf32>) -> tensor<1x24x56x56xf32> {
  %g = aicc.mul %x, %s : tensor<1x96x56x56xf32>, tensor<1x96x1x1xf32> -> tensor<1x96x56x56xf32>
  %y = aicc.conv2d %g, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x96x56x56xf32>, tensor<24x96x1x1xf32> -> tensor<1x24x56x56xf32>
  func.return %y : tensor<1x24x56x56xf32>
}

// -----
// The scale first, of shape (96, 1, 1), and a stride-2 conv: reshaped to (1, 96, 1, 1) for
// the weight's broadcast.
// CHECK-LABEL: func.func @scale_first_rank3
// CHECK-SAME:    (%[[X:.*]]: tensor<1x96x14x14xf32>, %[[S:.*]]: tensor<96x1x1xf32>, %[[W:.*]]: tensor<40x96x1x1xf32>)
// CHECK-NEXT:    %[[S4:.*]] = aicc.reshape %[[S]] : tensor<96x1x1xf32> -> tensor<1x96x1x1xf32>
// CHECK-NEXT:    %[[WS:.*]] = aicc.mul %[[W]], %[[S4]]
// CHECK-NEXT:    %[[Y:.*]] = aicc.conv2d %[[X]], %[[WS]] {strides = array<i64: 2, 2>
func.func @scale_first_rank3(%x: tensor<1x96x14x14xf32>, %s: tensor<96x1x1xf32>, %w: tensor<40x96x1x1xf32>) -> tensor<1x40x7x7xf32> {
  %g = aicc.mul %s, %x : tensor<96x1x1xf32>, tensor<1x96x14x14xf32> -> tensor<1x96x14x14xf32>
  %y = aicc.conv2d %g, %w {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x96x14x14xf32>, tensor<40x96x1x1xf32> -> tensor<1x40x7x7xf32>
  func.return %y : tensor<1x40x7x7xf32>
}

// -----
// Left alone: more output channels than pixels (a last stage: 320 >= 7 * 7, the weight
// is the bigger operand), two images (one gate each), a 3x3 conv, a scale that varies over
// H, and a gated x that something else reads too.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-5: aicc.mul %{{.*}}, %{{.*}} : tensor<
// CHECK-NOT:     aicc.mul
// CHECK:         func.return
func.func @kept(%x7: tensor<1x96x7x7xf32>, %s: tensor<1x96x1x1xf32>, %w320: tensor<320x96x1x1xf32>,
                %x2: tensor<2x96x14x14xf32>, %s2: tensor<2x96x1x1xf32>, %w: tensor<24x96x1x1xf32>,
                %x: tensor<1x96x14x14xf32>, %w3: tensor<24x96x3x3xf32>, %sh: tensor<1x96x14x1xf32>)
    -> (tensor<1x320x7x7xf32>, tensor<2x24x14x14xf32>, tensor<1x24x12x12xf32>, tensor<1x24x14x14xf32>, tensor<1x24x14x14xf32>, tensor<1x96x14x14xf32>) {
  %g0 = aicc.mul %x7, %s : tensor<1x96x7x7xf32>, tensor<1x96x1x1xf32> -> tensor<1x96x7x7xf32>
  %y0 = aicc.conv2d %g0, %w320 {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x96x7x7xf32>, tensor<320x96x1x1xf32> -> tensor<1x320x7x7xf32>
  %g1 = aicc.mul %x2, %s2 : tensor<2x96x14x14xf32>, tensor<2x96x1x1xf32> -> tensor<2x96x14x14xf32>
  %y1 = aicc.conv2d %g1, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<2x96x14x14xf32>, tensor<24x96x1x1xf32> -> tensor<2x24x14x14xf32>
  %g2 = aicc.mul %x, %s : tensor<1x96x14x14xf32>, tensor<1x96x1x1xf32> -> tensor<1x96x14x14xf32>
  %y2 = aicc.conv2d %g2, %w3 {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x96x14x14xf32>, tensor<24x96x3x3xf32> -> tensor<1x24x12x12xf32>
  %g3 = aicc.mul %x, %sh : tensor<1x96x14x14xf32>, tensor<1x96x14x1xf32> -> tensor<1x96x14x14xf32>
  %y3 = aicc.conv2d %g3, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x96x14x14xf32>, tensor<24x96x1x1xf32> -> tensor<1x24x14x14xf32>
  %g4 = aicc.mul %s, %x : tensor<1x96x1x1xf32>, tensor<1x96x14x14xf32> -> tensor<1x96x14x14xf32>
  %y4 = aicc.conv2d %g4, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x96x14x14xf32>, tensor<24x96x1x1xf32> -> tensor<1x24x14x14xf32>
  func.return %y0, %y1, %y2, %y3, %y4, %g4 : tensor<1x320x7x7xf32>, tensor<2x24x14x14xf32>, tensor<1x24x12x12xf32>, tensor<1x24x14x14xf32>, tensor<1x24x14x14xf32>, tensor<1x96x14x14xf32>
}
