// fuse-elementwise builds a linalg.generic that does not verify from two chained slices
// feeding an add (torchvision's Swin crops the window padding off as x[:, :H, :, :] then
// x[:, :, :W, :], SwinTransformerBlock at a feature map smaller than its window):
//
//   aicc-opt repro/fuse_elementwise_slice_of_slice.mlir -p tensor-to-linalg,fuse-elementwise
//   aicc-opt: error: inferred input/output operand #1 has shape's dimension #1 to be 2, but found 4
builtin.module {
  func.func @forward(%0: tensor<1x2x2x8xf32>, %1: tensor<1x4x4x8xf32>) -> tensor<1x2x2x8xf32> {
    %3 = aicc.slice %1 {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : tensor<1x4x4x8xf32> -> tensor<1x2x4x8xf32>
    %4 = aicc.slice %3 {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : tensor<1x2x4x8xf32> -> tensor<1x2x2x8xf32>
    %5 = aicc.add %0, %4 : tensor<1x2x2x8xf32>, tensor<1x2x2x8xf32> -> tensor<1x2x2x8xf32>
    func.return %5 : tensor<1x2x2x8xf32>
  }
}
