// RUN: aicc-opt %s -p fuse-linear-bias --split-input-file | filecheck %s
// RUN: aicc-opt %s -p fuse-linear-bias,tensor-to-linalg --split-input-file | filecheck %s --check-prefix=LINALG

// x @ w + b: the bias becomes the matmul's bias operand. In linalg, the broadcast bias is
// the accumulator's initial value: no zero fill, no separate add.
// CHECK-LABEL: func.func @linear
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x16xf32>, %[[B:.*]]: tensor<16xf32>)
// CHECK-NEXT:    %[[Y:.*]] = aicc.matmul %[[X]], %[[W]] bias %[[B]] : tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    func.return %[[Y]]
// LINALG-LABEL: func.func @linear
// LINALG-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x16xf32>, %[[B:.*]]: tensor<16xf32>)
// LINALG-NEXT:    %[[E:.*]] = tensor.empty() : tensor<4x16xf32>
// LINALG-NEXT:    %[[I:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%[[B]] : tensor<16xf32>) outs(%[[E]] : tensor<4x16xf32>)
// LINALG-NEXT:    ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// LINALG-NEXT:      linalg.yield %[[IN]] : f32
// LINALG:         linalg.matmul ins(%[[X]], %[[W]] : tensor<4x8xf32>, tensor<8x16xf32>) outs(%[[I]] : tensor<4x16xf32>)
// LINALG-NOT:     linalg.fill
// LINALG-NOT:     arith.addf
func.func @linear(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %0 = aicc.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %1 = aicc.add %0, %b : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  func.return %1 : tensor<4x16xf32>
}

// -----
// The bias first, a transposed weight (torch's linear), a batched matmul and a full residual.
// CHECK-LABEL: func.func @variants
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<16x8xf32>, %[[B:.*]]: tensor<16xf32>, %[[R:.*]]: tensor<2x4x16xf32>)
// CHECK-NEXT:    %[[Y:.*]] = aicc.matmul %[[X]], %[[W]] bias %[[B]] {transpose_rhs} : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<16xf32> -> tensor<2x4x16xf32>
// CHECK-NEXT:    %[[Z:.*]] = aicc.matmul %[[X]], %[[W]] bias %[[R]] {transpose_rhs} : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>
// CHECK-NEXT:    func.return %[[Y]], %[[Z]]
// The batched matmuls become 2-D ones over the (2*4, 8) rows; the bias, broadcast along the
// rows, and the residual, as rows, start the accumulators.
// LINALG-LABEL: func.func @variants
// LINALG:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%{{.*}} : tensor<16xf32>) outs(%{{.*}} : tensor<8x16xf32>)
// LINALG:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.*}}, %{{.*}} : tensor<8x8xf32>, tensor<16x8xf32>) outs(%{{.*}} : tensor<8x16xf32>)
// LINALG:         tensor.expand_shape %{{.*}} output_shape [8, 16] : tensor<128xf32> into tensor<8x16xf32>
// LINALG:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%{{.*}} : tensor<8x16xf32>) outs(%{{.*}} : tensor<8x16xf32>)
func.func @variants(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>, %r: tensor<2x4x16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>) {
  %0 = aicc.matmul %x, %w {transpose_rhs} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %1 = aicc.add %b, %0 : tensor<16xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  %2 = aicc.matmul %x, %w {transpose_rhs} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %3 = aicc.add %2, %r : tensor<2x4x16xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  func.return %1, %3 : tensor<2x4x16xf32>, tensor<2x4x16xf32>
}

// -----
// Not fused: the matmul has another use, the add broadcasts the matmul to a bigger shape, or
// the matmul has a bias already.
// CHECK-LABEL: func.func @not_fused
// CHECK:         aicc.matmul %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    aicc.add
// CHECK-NEXT:    aicc.matmul %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    aicc.add
// CHECK-NEXT:    aicc.matmul %{{.*}}, %{{.*}} bias
// CHECK-NEXT:    aicc.add
func.func @not_fused(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>, %big: tensor<3x4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<3x4x16xf32>, tensor<4x16xf32>) {
  %0 = aicc.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %1 = aicc.add %0, %b : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  %2 = aicc.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %3 = aicc.add %2, %big : tensor<4x16xf32>, tensor<3x4x16xf32> -> tensor<3x4x16xf32>
  %4 = aicc.matmul %x, %w bias %b : tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  %5 = aicc.add %4, %b : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  func.return %0, %1, %3, %5 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<3x4x16xf32>, tensor<4x16xf32>
}
