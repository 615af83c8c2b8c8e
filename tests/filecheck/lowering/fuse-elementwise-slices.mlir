// RUN: aicc-opt %s -p tensor-to-linalg,fuse-elementwise | filecheck %s
// A slice of the first 6 of 7 elements reads %x at d0 + 0, which composes to a plain d0. It is
// not fused into a pad, whose copy writes at d0 + 1: the fused loop would take its range, 7,
// from %x instead of 6. (Written from aicc ops: the parser folds `d0 + 0` to `d0`.)
// CHECK-LABEL: func.func @prefix_slice_into_pad
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0) -> ((d0 + 0))>, affine_map<(d0) -> (d0)>]
// CHECK-SAME:      outs(%{{.*}} : tensor<6xf32>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ((d0 + 1))>]
// CHECK-SAME:      ins(%{{.*}} : tensor<6xf32>)
func.func @prefix_slice_into_pad(%x: tensor<7xf32>) -> tensor<7xf32> {
  %s = aicc.slice %x {starts = array<i64: 0>, steps = array<i64: 1>} : tensor<7xf32> -> tensor<6xf32>
  %p = aicc.pad %s {low = array<i64: 1>, high = array<i64: 0>, value = 0.0 : f64} : tensor<6xf32> -> tensor<7xf32>
  func.return %p : tensor<7xf32>
}

// A prefix slice read as the second input of an add: fused, the add would read %x plainly at
// d1 with 4 elements where its loop has 2 (the first input's), which the verifier rejects.
// The slice stays its own generic (a YOLOv8-style detection head split its channels so).
// CHECK-LABEL: func.func @prefix_slice_into_add
// CHECK:         %[[S:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ((d0 + 0), (d1 + 0))>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%{{.*}}, %[[S]] : tensor<2x2xf32>, tensor<2x2xf32>)
func.func @prefix_slice_into_add(%x: tensor<2x4xf32>, %a: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %s = aicc.slice %x {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<2x4xf32> -> tensor<2x2xf32>
  %y = aicc.add %a, %s : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  func.return %y : tensor<2x2xf32>
}
