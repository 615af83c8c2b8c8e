// RUN: aicc-opt %s -p fuse-elementwise --split-input-file | filecheck %s

// x * w + b with broadcast w and b: the mul producer is folded into the add consumer; the
// consumer now reads x, w and b directly, w and b through the broadcast map (d1).
// CHECK-LABEL: func.func @mul_add
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK-NEXT:    %{{.*}} = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x, %w, %b : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) outs(%[[E]] : tensor<4x8xf32>) {
// CHECK-NEXT:    ^bb0(%[[X:.*]]: f32, %[[W:.*]]: f32, %[[B:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[X]], %[[W]] : f32
// CHECK-NEXT:      %[[A:.*]] = arith.addf %[[M]], %[[B]] : f32
// CHECK-NEXT:      linalg.yield %[[A]] : f32
// CHECK-NOT:     linalg.generic
func.func @mul_add(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %e0 = tensor.empty() : tensor<4x8xf32>
  %0 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x, %w : tensor<4x8xf32>, tensor<8xf32>) outs(%e0 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %m = arith.mulf %a, %c : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%0, %b : tensor<4x8xf32>, tensor<8xf32>) outs(%e1 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  func.return %1 : tensor<4x8xf32>
}

// -----
// A transposing consumer composes maps: y = exp(x)^T reads x at (d1, d0).
// CHECK-LABEL: func.func @exp_transpose
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>]{{.*}} ins(%x : tensor<3x5xf32>)
// CHECK:           math.exp
// CHECK-NOT:     linalg.generic
func.func @exp_transpose(%x: tensor<3x5xf32>) -> tensor<5x3xf32> {
  %e0 = tensor.empty() : tensor<3x5xf32>
  %0 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<3x5xf32>) outs(%e0 : tensor<3x5xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = math.exp %a : f32
    linalg.yield %m : f32
  } -> tensor<3x5xf32>
  %e1 = tensor.empty() : tensor<5x3xf32>
  %1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%0 : tensor<3x5xf32>) outs(%e1 : tensor<5x3xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<5x3xf32>
  func.return %1 : tensor<5x3xf32>
}

// -----
// exp(x) has two users (the sum and the divide): it is not fused, so it is computed once.
// CHECK-LABEL: func.func @shared_producer
// CHECK:         math.exp
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK-NOT:       math.exp
// CHECK:         arith.divf
func.func @shared_producer(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e0 = tensor.empty() : tensor<4x8xf32>
  %0 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%e0 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = math.exp %a : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<4x1xf32>
  %f = linalg.fill ins(%z : f32) outs(%e1 : tensor<4x1xf32>) -> tensor<4x1xf32>
  %1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>], iterator_types = ["parallel", "reduction"]} ins(%0 : tensor<4x8xf32>) outs(%f : tensor<4x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  } -> tensor<4x1xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%0, %1 : tensor<4x8xf32>, tensor<4x1xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %d = arith.divf %a, %c : f32
    linalg.yield %d : f32
  } -> tensor<4x8xf32>
  func.return %2 : tensor<4x8xf32>
}

// -----
// A strided producer (a slice) is not fused into a consumer that writes at an offset (a
// concat): the fused op would read d1 only as d1 * 2 and write it as d1 + 4, so no operand
// would define the range of d1.
// CHECK-LABEL: func.func @slice_into_offset_write
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, (d1 * 2))>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, (d1 + 4))>]
func.func @slice_into_offset_write(%x: tensor<4x16xf32>, %dst: tensor<4x12xf32>) -> tensor<4x12xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1 * 2)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x16xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<4x8xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1 + 4)>], iterator_types = ["parallel", "parallel"]} ins(%s : tensor<4x8xf32>) outs(%dst : tensor<4x12xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<4x12xf32>
  func.return %c : tensor<4x12xf32>
}

// -----
// A matmul reads (k / c)^T through a map without its row dim d0, so each element of the
// quotient is read by every row: the division (with the transpose fused into it) stays its
// own loop, once per element rather than once per row, and the matmul keeps its multiply-add
// body, which tile-matmul takes.
// CHECK-LABEL: func.func @no_recompute_into_matmul
// CHECK:         %[[Q:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK:           arith.divf
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %[[Q]] : tensor<3x4xf32>, tensor<4x5xf32>)
// CHECK-NEXT:    ^{{.*}}(%{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32):
// CHECK-NEXT:      arith.mulf
// CHECK-NEXT:      arith.addf
func.func @no_recompute_into_matmul(%a: tensor<3x4xf32>, %k: tensor<5x4xf32>) -> tensor<3x5xf32> {
  %c = arith.constant 8.0 : f32
  %e0 = tensor.empty() : tensor<5x4xf32>
  %0 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%k : tensor<5x4xf32>) outs(%e0 : tensor<5x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %d = arith.divf %x, %c : f32
    linalg.yield %d : f32
  } -> tensor<5x4xf32>
  %e1 = tensor.empty() : tensor<4x5xf32>
  %1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%0 : tensor<5x4xf32>) outs(%e1 : tensor<4x5xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<4x5xf32>
  %z = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<3x5xf32>
  %f = linalg.fill ins(%z : f32) outs(%e2 : tensor<3x5xf32>) -> tensor<3x5xf32>
  %2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %1 : tensor<3x4xf32>, tensor<4x5xf32>) outs(%f : tensor<3x5xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<3x5xf32>
  func.return %2 : tensor<3x5xf32>
}

// -----
// Attention scores with the heads split off, as BERT writes them: q (1, 8, 2, 4) (batch,
// row, head, feature) is transposed to (1, 2, 8, 4). Fused into the batched matmul, the
// transpose would leave it reading q[b, i, h, d]: the head, a batch dim, between the row and
// feature dims, which no matmul schedule takes. So q's transpose stays its own loop. k is
// already head-major (1, 2, 8, 4); its transpose to (1, 2, 4, 8) keeps the matrix dims
// innermost (k^T, as in q @ k^T), and fuses.
// CHECK-LABEL: func.func @head_split_transpose_stays_out_of_matmul
// CHECK:         %[[QT:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<1x8x2x4xf32>)
// CHECK-NEXT:    ^{{.*}}(%[[X:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      linalg.yield %[[X]] : f32
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%[[QT]], %k : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>)
// CHECK-NOT:     linalg.generic
func.func @head_split_transpose_stays_out_of_matmul(%q: tensor<1x8x2x4xf32>, %k: tensor<1x2x8x4xf32>) -> tensor<1x2x8x8xf32> {
  %e0 = tensor.empty() : tensor<1x2x8x4xf32>
  %qt = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<1x8x2x4xf32>) outs(%e0 : tensor<1x2x8x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<1x2x8x4xf32>
  %e1 = tensor.empty() : tensor<1x2x4x8xf32>
  %kt = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%k : tensor<1x2x8x4xf32>) outs(%e1 : tensor<1x2x4x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<1x2x4x8xf32>
  %z = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<1x2x8x8xf32>
  %f = linalg.fill ins(%z : f32) outs(%e2 : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%qt, %kt : tensor<1x2x8x4xf32>, tensor<1x2x4x8xf32>) outs(%f : tensor<1x2x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %x, %y : f32
    %a = arith.addf %o, %m : f32
    linalg.yield %a : f32
  } -> tensor<1x2x8x8xf32>
  func.return %s : tensor<1x2x8x8xf32>
}

// -----
// Nothing fuses into the copy of a zero padding that a packed depthwise conv reads: tile-conv
// reads that padding through, from the copy's source, so the relu stays a generic of its own
// (fused, it would be computed into the padded buffer, which would then have to be kept).
// CHECK-LABEL: func.func @relu_pad_dw
// CHECK:         %[[R:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<1x4x6x9xf32>)
// CHECK:           arith.maximumf
// CHECK:         %[[P:.*]] = linalg.generic {{.*}} ins(%[[R]] : tensor<1x4x6x9xf32>) outs(%{{.*}} : tensor<1x4x8x11xf32>)
// CHECK-NEXT:    ^{{.*}}(%[[A:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      linalg.yield %[[A]] : f32
func.func @relu_pad_dw(%x: tensor<1x4x6x9xf32>, %w: tensor<4x1x1x3x3xf32>) -> tensor<1x4x1x6x9xf32> {
  %0 = tensor.empty() : tensor<1x4x6x9xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x : tensor<1x4x6x9xf32>) outs(%0 : tensor<1x4x6x9xf32>) {
  ^bb0(%1: f32, %2: f32):
    %3 = arith.constant 0.000000e+00 : f32
    %4 = arith.maximumf %1, %3 : f32
    linalg.yield %4 : f32
  } -> tensor<1x4x6x9xf32>
  %5 = tensor.empty() : tensor<1x4x8x11xf32>
  %6 = arith.constant 0.000000e+00 : f32
  %7 = linalg.fill ins(%6 : f32) outs(%5 : tensor<1x4x8x11xf32>) -> tensor<1x4x8x11xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> ((d0 + 0), (d1 + 0), (d2 + 1), (d3 + 1))>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%r : tensor<1x4x6x9xf32>) outs(%7 : tensor<1x4x8x11xf32>) {
  ^bb0(%8: f32, %9: f32):
    linalg.yield %8 : f32
  } -> tensor<1x4x8x11xf32>
  %10 = tensor.collapse_shape %p [[0, 1, 2, 3]] : tensor<1x4x8x11xf32> into tensor<352xf32>
  %11 = tensor.expand_shape %10 [[0, 1, 2, 3, 4]] output_shape [1, 4, 1, 8, 11] : tensor<352xf32> into tensor<1x4x1x8x11xf32>
  %14 = tensor.empty() : tensor<1x4x1x6x9xf32>
  %16 = linalg.fill ins(%6 : f32) outs(%14 : tensor<1x4x1x6x9xf32>) -> tensor<1x4x1x6x9xf32>
  %17 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, (d3 + d6), (d4 + d7))>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%11, %w : tensor<1x4x1x8x11xf32>, tensor<4x1x1x3x3xf32>) outs(%16 : tensor<1x4x1x6x9xf32>) attrs =  {aicc.conv_lowering = "packed"} {
  ^bb0(%18: f32, %19: f32, %20: f32):
    %21 = arith.mulf %18, %19 : f32
    %22 = arith.addf %20, %21 : f32
    linalg.yield %22 : f32
  } -> tensor<1x4x1x6x9xf32>
  func.return %17 : tensor<1x4x1x6x9xf32>
}

// -----
// SiLU, x * sigmoid(x): the sigmoid generic (1 / (1 + exp(-x))) fuses into the multiply, and
// in the fused body x * (1 / d) becomes x / d: one rounding, one multiply less.
// CHECK-LABEL: func.func @silu
// CHECK:         linalg.generic {{.*}} ins(%[[X:.*]] : tensor<7x129xf32>)
// CHECK-NEXT:    ^{{.*}}(%[[A:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[N:.*]] = arith.negf %[[A]] : f32
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[N]] fastmath<afn> : f32
// CHECK-NEXT:      %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      %[[D:.*]] = arith.addf %[[E]], %[[ONE]] : f32
// CHECK-NEXT:      %[[Y:.*]] = arith.divf %[[A]], %[[D]] : f32
// CHECK-NEXT:      linalg.yield %[[Y]] : f32
// CHECK-NOT:     linalg.generic
func.func @silu(%x: tensor<7x129xf32>) -> tensor<7x129xf32> {
  %e0 = tensor.empty() : tensor<7x129xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<7x129xf32>) outs(%e0 : tensor<7x129xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.negf %a : f32
    %e = math.exp %n fastmath<afn> : f32
    %one = arith.constant 1.000000e+00 : f32
    %d = arith.addf %e, %one : f32
    %r = arith.divf %one, %d : f32
    linalg.yield %r : f32
  } -> tensor<7x129xf32>
  %e1 = tensor.empty() : tensor<7x129xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x, %s : tensor<7x129xf32>, tensor<7x129xf32>) outs(%e1 : tensor<7x129xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<7x129xf32>
  func.return %y : tensor<7x129xf32>
}
