// RUN: aicc-opt %s -p dynamic-quantize-matmul,cse --split-input-file | filecheck %s
// RUN: aicc-opt %s -p 'dynamic-quantize-matmul{per_channel=false}' --split-input-file | filecheck %s --check-prefix=TENSOR
// RUN: aicc-opt %s -p dynamic-quantize-matmul,cse,tensor-to-linalg,fuse-elementwise,canonicalize,cse --split-input-file | filecheck %s --check-prefix=LINALG

// Two linear layers of one activation: int8 (N, K) weights with one scale per output column
// (max |w| / 127), one dynamic_quant_params of x that both share (after CSE), and the float
// epilogue: x's scale times the weights' scales, times the i32 sums, plus the bias.
// CHECK-LABEL: func.func @linears
// CHECK-NEXT:    %[[P:.*]] = aicc.dynamic_quant_params %x : tensor<4x8xf32> -> tensor<2xf32>
// CHECK-NEXT:    %[[W:.*]] = aicc.constant dense<{{\[}}[6, 23, 40, -58, 75, 92, 110, -127], [-11, 28, 44, 61, -77, 94, 110, 127], [3, -6, 9, 12, 15, -18, 21, 127]]> : tensor<3x8xi8>
// CHECK-NEXT:    %[[I:.*]] = aicc.dynamic_matmul_integer %x, %[[W]], %[[P]] {aicc.quantized = "matmul"} : tensor<4x8xf32>, tensor<3x8xi8>, tensor<2xf32> -> tensor<4x3xi32>
// CHECK-NEXT:    %[[F:.*]] = aicc.cast %[[I]] : tensor<4x3xi32> -> tensor<4x3xf32>
// CHECK-NEXT:    %[[S:.*]] = aicc.slice %[[P]] {starts = array<i64: 0>, steps = array<i64: 1>} : tensor<2xf32> -> tensor<1xf32>
// CHECK-NEXT:    %[[WS:.*]] = aicc.constant dense<[0.0173228346, 0.0181102362, 1.000000e-01]> : tensor<3xf32>
// CHECK-NEXT:    %[[M:.*]] = aicc.mul %[[S]], %[[WS]] : tensor<1xf32>, tensor<3xf32> -> tensor<3xf32>
// CHECK-NEXT:    %[[Y:.*]] = aicc.mul %[[F]], %[[M]]
// CHECK-NEXT:    %[[Z:.*]] = aicc.add %[[Y]], %b
// CHECK-NEXT:    %[[V:.*]] = aicc.constant dense<{{\[}}[16, 32, 48, 64, 79, 95, 111, 127], [-10, -20, -30, -40, -50, -60, -70, -127]]> : tensor<2x8xi8>
// CHECK-NEXT:    aicc.dynamic_matmul_integer %x, %[[V]], %[[P]]
// CHECK-NOT:     aicc.dynamic_quant_params
// CHECK-NOT:     aicc.matmul
// Per tensor: one weight scale, max |w| / 127 over the whole weight.
// TENSOR-LABEL: func.func @linears
// TENSOR:         aicc.constant dense<{{\[}}[1, 4, 7, -10, 13, 16, 19, -22], [-2, 5, 8, 11, -14, 17, 20, 23], [3, -6, 9, 12, 15, -18, 21, 127]]> : tensor<3x8xi8>
// TENSOR:         aicc.constant dense<1.000000e-01> : tensor<1xf32>
// In linalg: one pass over x for its minimum and maximum (a generic with two 0-d results),
// the scalar formula, and the int8 matmul generic, whose body quantizes x as it reads it,
// clamp(rne(x / scale) + zp, -128, 127) - zp, [scale, zp] read through constant maps; it is
// marked for the target's int8 GEMM kernel and keeps its operands (nothing fused into it).
// LINALG-LABEL: func.func @linears
// LINALG:         %{{.*}}, %{{.*}} = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> ()>], iterator_types = ["reduction", "reduction"]}
// LINALG-NEXT:    ^{{.*}}(%[[X:.*]]: f32, %[[LO:.*]]: f32, %[[HI:.*]]: f32):
// LINALG-NEXT:      arith.minimumf %[[LO]], %[[X]] : f32
// LINALG-NEXT:      arith.maximumf %[[HI]], %[[X]] : f32
// LINALG:         math.roundeven
// LINALG:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (0)>, affine_map<(d0, d1, d2) -> (1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %{{.*}}, %[[PR:.*]], %[[PR]] : tensor<4x8xf32>, tensor<3x8xi8>, tensor<2xf32>, tensor<2xf32>) outs(%{{.*}} : tensor<4x3xi32>) attrs =  {aicc.qgemm = 0 : i64, aicc.qgemm_dynamic}
// LINALG-NEXT:    ^{{.*}}(%[[A:.*]]: f32, %[[B:.*]]: i8, %[[SC:.*]]: f32, %[[ZP:.*]]: f32, %[[C:.*]]: i32):
// LINALG-NEXT:      %[[D:.*]] = arith.divf %[[A]], %[[SC]] : f32
// LINALG-NEXT:      %[[R:.*]] = math.roundeven %[[D]] : f32
// LINALG-NEXT:      %[[Q:.*]] = arith.addf %[[R]], %[[ZP]] : f32
// LINALG:           arith.maximumf %[[Q]]
// LINALG:           arith.minimumf
// LINALG:           arith.subf %{{.*}}, %[[ZP]] : f32
// LINALG:           arith.fptosi %{{.*}} : f32 to i32
// LINALG:           arith.extsi %[[B]] : i8 to i32
// LINALG:         } -> tensor<4x3xi32>
func.func @linears(%x: tensor<4x8xf32>, %b: tensor<3xf32>) -> (tensor<4x3xf32>, tensor<4x2xf32>) {
  %w = aicc.constant dense<[[0.1, -0.2, 0.3], [0.4, 0.5, -0.6], [0.7, 0.8, 0.9], [-1.0, 1.1, 1.2], [1.3, -1.4, 1.5], [1.6, 1.7, -1.8], [1.9, 2.0, 2.1], [-2.2, 2.3, 12.7]]> : tensor<8x3xf32>
  %y = aicc.matmul %x, %w : tensor<4x8xf32>, tensor<8x3xf32> -> tensor<4x3xf32>
  %z = aicc.add %y, %b : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  %v = aicc.constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0, -12.7]]> : tensor<2x8xf32>
  %u = aicc.matmul %x, %v {transpose_rhs} : tensor<4x8xf32>, tensor<2x8xf32> -> tensor<4x2xf32>
  func.return %z, %u : tensor<4x3xf32>, tensor<4x2xf32>
}

// -----
// A fused bias stays the epilogue's add; batch dims of the activation stay (rows of the GEMM).
// CHECK-LABEL: func.func @bias_batched
// CHECK:         aicc.dynamic_matmul_integer %x, %{{.*}}, %{{.*}} {aicc.quantized = "matmul"} : tensor<2x5x4xf32>, tensor<3x4xi8>, tensor<2xf32> -> tensor<2x5x3xi32>
// CHECK:         %[[Y:.*]] = aicc.mul %{{.*}}, %{{.*}} : tensor<2x5x3xf32>, tensor<3xf32> -> tensor<2x5x3xf32>
// CHECK-NEXT:    aicc.add %[[Y]], %b : tensor<2x5x3xf32>, tensor<3xf32> -> tensor<2x5x3xf32>
func.func @bias_batched(%x: tensor<2x5x4xf32>, %b: tensor<3xf32>) -> tensor<2x5x3xf32> {
  %w = aicc.constant dense<[[1.0, 2.0, 3.0, 4.0], [0.5, 0.25, 0.125, 1.0], [-1.0, 1.0, -1.0, 1.0]]> : tensor<3x4xf32>
  %y = aicc.matmul %x, %w bias %b {transpose_rhs} : tensor<2x5x4xf32>, tensor<3x4xf32>, tensor<3xf32> -> tensor<2x5x3xf32>
  func.return %y : tensor<2x5x3xf32>
}

// -----
// Left in float: a weight that is not a constant, a transposed activation, a 3-D weight, a
// float64 matmul.
// CHECK-LABEL: func.func @unchanged
// CHECK-NOT:     aicc.dynamic
// CHECK-COUNT-4: aicc.matmul
// CHECK-NOT:     aicc.dynamic
func.func @unchanged(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>, %xt: tensor<8x4xf32>, %x3: tensor<2x4x8xf32>, %i: tensor<4x8xf64>) -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<2x4x3xf32>, tensor<4x3xf64>) {
  %c = aicc.constant dense<1.0> : tensor<8x3xf32>
  %y = aicc.matmul %x, %w : tensor<4x8xf32>, tensor<8x3xf32> -> tensor<4x3xf32>
  %t = aicc.matmul %xt, %c {transpose_lhs} : tensor<8x4xf32>, tensor<8x3xf32> -> tensor<4x3xf32>
  %c3 = aicc.constant dense<1.0> : tensor<2x8x3xf32>
  %b = aicc.matmul %x3, %c3 : tensor<2x4x8xf32>, tensor<2x8x3xf32> -> tensor<2x4x3xf32>
  %ci = aicc.constant dense<1.0> : tensor<8x3xf64>
  %n = aicc.matmul %i, %ci : tensor<4x8xf64>, tensor<8x3xf64> -> tensor<4x3xf64>
  func.return %y, %t, %b, %n : tensor<4x3xf32>, tensor<4x3xf32>, tensor<2x4x3xf32>, tensor<4x3xf64>
}
