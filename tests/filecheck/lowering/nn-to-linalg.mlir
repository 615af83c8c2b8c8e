// RUN: aicc-opt %s -p tensor-to-linalg --split-input-file | filecheck %s
// The NN ops (compiler/lowering/nn_to_linalg.py): windows and offsets in the indexing maps.

// Padding fills the result, then copies the input in at an offset.
// CHECK-LABEL: func.func @pad
// CHECK:         %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<1x1x6x7xf32>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> ((d0 + 0), (d1 + 0), (d2 + 1), (d3 + 2))>]
// CHECK-SAME:    outs(%[[F]] : tensor<1x1x6x7xf32>)
func.func @pad(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x6x7xf32> {
  %0 = aicc.pad %x {low = array<i64: 0, 0, 1, 2>, high = array<i64: 0, 0, 1, 1>, value = 0.0 : f64} : tensor<1x1x4x4xf32> -> tensor<1x1x6x7xf32>
  func.return %0 : tensor<1x1x6x7xf32>
}

// -----
// Strided, dilated, grouped convolution: loops (n, g, oc, oh, ow, ic, kh, kw).
// CHECK-LABEL: func.func @conv2d_grouped
// CHECK:         tensor.expand_shape {{.*}} into tensor<1x2x2x5x5xf32>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, ((d3 * 2) + (d6 * 2)), ((d4 * 2) + (d7 * 2)))>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
// CHECK:           arith.mulf
// CHECK:           arith.addf
// CHECK-NOT:     aicc.
func.func @conv2d_grouped(%x: tensor<1x4x5x5xf32>, %w: tensor<6x2x2x2xf32>) -> tensor<1x6x2x2xf32> {
  %0 = aicc.conv2d %x, %w {strides = array<i64: 2, 2>, dilations = array<i64: 2, 2>, groups = 2 : i64} : tensor<1x4x5x5xf32>, tensor<6x2x2x2xf32> -> tensor<1x6x2x2xf32>
  func.return %0 : tensor<1x6x2x2xf32>
}

// -----
// CHECK-LABEL: func.func @max_pool
// CHECK:         linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<1x2x2x2xf32>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, ((d2 * 2) + d4), ((d3 * 2) + d5))>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d4, d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>]
// CHECK:           arith.maximumf
func.func @max_pool(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32> {
  %0 = aicc.pool2d %x {kind = "max", kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>} : tensor<1x2x4x4xf32> -> tensor<1x2x2x2xf32>
  func.return %0 : tensor<1x2x2x2xf32>
}

// -----
// One copy per operand into the same destination, offset along the axis.
// CHECK-LABEL: func.func @concat
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<2x5xf32>
// CHECK:         %[[A:.*]] = linalg.generic {{.*}} affine_map<(d0, d1) -> (d0, (d1 + 0))>{{.*}} outs(%[[E]] : tensor<2x5xf32>)
// CHECK:         linalg.generic {{.*}} affine_map<(d0, d1) -> (d0, (d1 + 2))>{{.*}} outs(%[[A]] : tensor<2x5xf32>)
func.func @concat(%a: tensor<2x2xf32>, %b: tensor<2x3xf32>) -> tensor<2x5xf32> {
  %0 = aicc.concat %a, %b {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x3xf32>) -> tensor<2x5xf32>
  func.return %0 : tensor<2x5xf32>
}

// -----
// CHECK-LABEL: func.func @slice_negative_step
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ((d0 + 1), ((d1 * -2) + 7))>, affine_map<(d0, d1) -> (d0, d1)>]
func.func @slice_negative_step(%x: tensor<4x8xf32>) -> tensor<2x4xf32> {
  %0 = aicc.slice %x {starts = array<i64: 1, 7>, steps = array<i64: 1, -2>} : tensor<4x8xf32> -> tensor<2x4xf32>
  func.return %0 : tensor<2x4xf32>
}

// -----
// Gather reduces over the table's rows, selecting the row whose index matches (or index + 10).
// CHECK-LABEL: func.func @gather
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0)>, affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK:           arith.cmpi eq
// CHECK:           arith.ori
// CHECK:           arith.select
func.func @gather(%t: tensor<10x4xf32>, %ids: tensor<3xi64>) -> tensor<3x4xf32> {
  %0 = aicc.gather %t, %ids {axis = 0 : i64} : tensor<10x4xf32>, tensor<3xi64> -> tensor<3x4xf32>
  func.return %0 : tensor<3x4xf32>
}

// -----
// A table of more than 16 rows (an embedding) is gathered by loads at the run-time index, not
// by a select over every row: one aicc_fused.gather into an empty destination.
// CHECK-LABEL: func.func @gather_table
// CHECK:         %[[INIT:.*]] = tensor.empty() : tensor<2x3x8xf32>
// CHECK-NEXT:    %{{.*}} = aicc_fused.gather ins(%{{.*}}, %{{.*}} : tensor<1000x8xf32>, tensor<2x3xi32>) outs(%[[INIT]] : tensor<2x3x8xf32>) {axis = 0 : i64} -> tensor<2x3x8xf32>
// CHECK-NOT:     linalg.generic
func.func @gather_table(%t: tensor<1000x8xf32>, %ids: tensor<2x3xi32>) -> tensor<2x3x8xf32> {
  %0 = aicc.gather %t, %ids {axis = 0 : i64} : tensor<1000x8xf32>, tensor<2x3xi32> -> tensor<2x3x8xf32>
  func.return %0 : tensor<2x3x8xf32>
}

// -----
// gather_elements over an axis of more than 16 entries: aicc_fused.gather_elements.
// CHECK-LABEL: func.func @gather_elements_long
// CHECK:         %[[INIT:.*]] = tensor.empty() : tensor<3x5xf32>
// CHECK-NEXT:    %{{.*}} = aicc_fused.gather_elements ins(%{{.*}}, %{{.*}} : tensor<4x100xf32>, tensor<3x5xi64>) outs(%[[INIT]] : tensor<3x5xf32>) {axis = 1 : i64} -> tensor<3x5xf32>
// CHECK-NOT:     linalg.generic
func.func @gather_elements_long(%x: tensor<4x100xf32>, %ids: tensor<3x5xi64>) -> tensor<3x5xf32> {
  %0 = aicc.gather_elements %x, %ids {axis = 1 : i64} : tensor<4x100xf32>, tensor<3x5xi64> -> tensor<3x5xf32>
  func.return %0 : tensor<3x5xf32>
}

// -----
// gather_elements: the same select-reduction as gather over the data's axis (d2); off the axis
// the data is read at d0 + 0 so that the indices' (smaller) shape gives the loop ranges.
// CHECK-LABEL: func.func @gather_elements
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> ((d0 + 0), d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK:           arith.cmpi eq
// CHECK:           arith.select
func.func @gather_elements(%x: tensor<4x8xf32>, %ids: tensor<3x2xi64>) -> tensor<3x2xf32> {
  %0 = aicc.gather_elements %x, %ids {axis = 1 : i64} : tensor<4x8xf32>, tensor<3x2xi64> -> tensor<3x2xf32>
  func.return %0 : tensor<3x2xf32>
}

// -----
// argmax: the max along the axis, then the smallest k (an iota constant) where x == max or x is NaN.
// CHECK-LABEL: func.func @argmax
// CHECK:         arith.maximumf
// CHECK:         %[[INIT:.*]] = arith.constant 8 : i64
// CHECK:         linalg.fill ins(%[[INIT]] : i64)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
// CHECK:           arith.cmpf oeq
// CHECK:           arith.cmpf uno
// CHECK:           arith.select
// CHECK:           arith.minsi
func.func @argmax(%x: tensor<4x8xf32>) -> tensor<4xi64> {
  %0 = aicc.argmax %x {axis = 1 : i64, keepdims = false, select_last_index = false} : tensor<4x8xf32> -> tensor<4xi64>
  func.return %0 : tensor<4xi64>
}

// -----
// cumsum over 5 elements: rounds k = 1, 2, 4, each y[i] + y[i - k] into positions k.. (an
// axis loop over 5 - k, whose range a bool constant gives), then y copied into positions 0..k-1.
// CHECK-LABEL: func.func @cumsum
// CHECK:         %[[R1:.*]] = linalg.generic {indexing_maps = [affine_map<(d0) -> ((d0 + 1))>, affine_map<(d0) -> ((d0 + 0))>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> ((d0 + 1))>]{{.*}} ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<5xf32>, tensor<5xf32>, tensor<4xi1>)
// CHECK:           arith.addf
// CHECK:         %[[Y1:.*]] = linalg.generic {indexing_maps = [affine_map<(d0) -> ((d0 + 0))>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> ((d0 + 0))>]{{.*}} tensor<1xi1>) outs(%[[R1]] : tensor<5xf32>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0) -> ((d0 + 2))>, {{.*}} ins(%[[Y1]], %[[Y1]], %{{.*}} : tensor<5xf32>, tensor<5xf32>, tensor<3xi1>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0) -> ((d0 + 4))>, {{.*}} tensor<1xi1>)
// CHECK-NOT:     aicc.
func.func @cumsum(%x: tensor<5xf32>) -> tensor<5xf32> {
  %0 = aicc.cumsum %x {axis = 0 : i64, exclusive = false, reverse = false} : tensor<5xf32>
  func.return %0 : tensor<5xf32>
}

// -----
// Bilinear x2 (4 -> 8), half_pixel: the clamped first and last outputs, then the even and the
// odd outputs o = 2i + r, each reading the input at i + s with fixed weights: 4 generics into
// one destination. A bool constant of the piece's length gives the axis loop its range.
// CHECK-LABEL: func.func @resample_bilinear
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<2x8xf32>
// CHECK:         %[[A:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, ((d1 * 2) + 0))>]{{.*}} outs(%[[E]] : tensor<2x8xf32>)
// CHECK:         %[[B:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, (d1 + 0))>, affine_map<(d0, d1) -> (d0, (d1 + 1))>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, ((d1 * 2) + 2))>]{{.*}} outs(%[[A]] : tensor<2x8xf32>)
// CHECK:           arith.mulf
// CHECK:           arith.addf
// CHECK:         %[[C:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, (d1 + 0))>, affine_map<(d0, d1) -> (d0, (d1 + 1))>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, ((d1 * 2) + 1))>]{{.*}} outs(%[[B]] : tensor<2x8xf32>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, 3)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, ((d1 * 2) + 7))>]{{.*}} outs(%[[C]] : tensor<2x8xf32>)
// CHECK-NOT:     aicc.
func.func @resample_bilinear(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %0 = aicc.resample %x {axis = 1 : i64, indices = array<i64: 0, 0, 0, 1, 0, 1, 1, 2, 1, 2, 2, 3, 2, 3, 3, 3>, weights = array<f64: 1.0, 0.0, 0.75, 0.25, 0.25, 0.75, 0.75, 0.25, 0.25, 0.75, 0.75, 0.25, 0.25, 0.75, 1.0, 0.0>} : tensor<2x4xf32> -> tensor<2x8xf32>
  func.return %0 : tensor<2x8xf32>
}

// -----
// Reflect padding of 3 by 2 on both sides reads 2 1 0 1 2 1 0: greedy runs 2 1 0 | 1 2 | 1 0,
// with steps -1, +1, -1.
// CHECK-LABEL: func.func @resample_reflect
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0) -> (((d0 * -1) + 2))>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> ((d0 + 0))>]{{.*}} tensor<3xi1>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0) -> ((d0 + 1))>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> ((d0 + 3))>]{{.*}} tensor<2xi1>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0) -> (((d0 * -1) + 1))>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> ((d0 + 5))>]{{.*}} tensor<2xi1>
func.func @resample_reflect(%x: tensor<3xi64>) -> tensor<7xi64> {
  %0 = aicc.resample %x {axis = 0 : i64, indices = array<i64: 2, 1, 0, 1, 2, 1, 0>} : tensor<3xi64> -> tensor<7xi64>
  func.return %0 : tensor<7xi64>
}

// -----
// conv_transpose2d, stride 2, kernel 3, pads 1, a 5x5 result: the 3x3 input scattered to rows
// and columns 2h + 1 of a zero 7x7 buffer (5 + 2), then a stride-1 conv2d with the weight's
// channel dims swapped and its window flipped (a slice with steps -1).
// CHECK-LABEL: func.func @conv_transpose2d
// CHECK:         %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<1x2x7x7xf32>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, ((d2 * 2) + 1), ((d3 * 2) + 1))>]{{.*}} outs(%[[Z]] : tensor<1x2x7x7xf32>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d1, d3, d4)>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> ((d0 + 0), (d1 + 0), ((d2 * -1) + 2), ((d3 * -1) + 2))>
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]
// CHECK-NOT:     aicc.
func.func @conv_transpose2d(%x: tensor<1x2x3x3xf32>, %w: tensor<2x4x3x3xf32>) -> tensor<1x4x5x5xf32> {
  %0 = aicc.conv_transpose2d %x, %w {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, groups = 1 : i64, pads = array<i64: 1, 1>} : tensor<1x2x3x3xf32>, tensor<2x4x3x3xf32> -> tensor<1x4x5x5xf32>
  func.return %0 : tensor<1x4x5x5xf32>
}
