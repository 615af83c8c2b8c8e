// RUN: aicc-opt %s -p tensor-to-linalg,bufferize,lower-qgemm-gpu | filecheck %s
// RUN: aicc-opt %s -p tensor-to-linalg,bufferize,lower-qgemm-gpu,linalg-to-loops,map-to-gpu | filecheck %s --check-prefix=MAP
// RUN: aicc-opt %s -p tensor-to-linalg,bufferize,lower-qgemm-gpu,linalg-to-loops,map-to-gpu -t cuda | filecheck %s --check-prefix=CUDA
// The int8 GEMM on the cuda target: matmul_integer's marked generic (and its zero fill)
// becomes one gpu_map.qgemm, which map-to-gpu gives a "qgemm" kernel of its own, printed with
// __dp4a on words of 4 bytes of k and int32 accumulators.

// CHECK-LABEL: func.func @qgemm
// CHECK-SAME:    (%[[A:.*]]: memref<7x129xi8>, %[[W:.*]]: memref<5x129xi8>, %[[C:.*]]: memref<7x5xi32>)
// CHECK-NOT:     linalg
// CHECK:         gpu_map.qgemm %[[A]], %[[W]], %[[C]] {zp = -3 : i64} : memref<7x129xi8>, memref<5x129xi8>, memref<7x5xi32>
// CHECK-NOT:     linalg
// MAP-LABEL: func.func @qgemm
// MAP:         gpu_map.kernel "qgemm_k0" "qgemm" attributes {grid = array<i64: 1, 1>, block = array<i64: 16, 16>, tile = array<i64: 64, 64, 32>} {
// MAP-NEXT:      gpu_map.qgemm
// MAP-NEXT:    }
// MAP-NOT:     gpu_map.kernel
// CUDA-LABEL: // qgemm_k0: qgemm, grid 1 x 1, block 16 x 16
// CUDA:       void __launch_bounds__(256) qgemm_k0(const signed char* __restrict__ [[A:p[0-9]+]], const signed char* __restrict__ [[B:p[0-9]+]], int* __restrict__ [[C:p[0-9]+]])
// CUDA:         const int row0 = (int)blockIdx.x * 64, col0 = (int)blockIdx.y * 64;
// CUDA:         const int zp = -3;
// CUDA:         word |= ((unsigned)(unsigned char)[[A]][gr * 129 + gk + t]) << (8 * t);
// CUDA:         word |= ((unsigned)(unsigned char)[[B]][gc * 129 + gk + t]) << (8 * t);
// CUDA:         cs[j] = __dp4a(b[j], 0x01010101, cs[j]);
// CUDA:         acc[i][j] = __dp4a(a[i], b[j], acc[i][j]);
// CUDA:         [[C]][r * 5 + c] = (int)((unsigned)acc[i][j] - (unsigned)zp * (unsigned)cs[j]);
func.func @qgemm(%a: tensor<7x129xi8>, %w: tensor<5x129xi8>) -> tensor<7x5xi32> {
  %y = aicc.matmul_integer %a, %w {lhs_zero_point = -3 : i64, transpose_rhs} : tensor<7x129xi8>, tensor<5x129xi8> -> tensor<7x5xi32>
  func.return %y : tensor<7x5xi32>
}

// Dynamic quantization: a float A quantized as the tile is staged (IEEE division, rint),
// the run-time zero point from the params.
// CHECK-LABEL: func.func @dqgemm
// CHECK:         gpu_map.qgemm %{{.*}}, %{{.*}}, %{{.*}} quantize %{{.*}} : memref<2xf32> {zp = 0 : i64} : memref<2x9x37xf32>, memref<6x37xi8>, memref<2x9x6xi32>
// MAP-LABEL: func.func @dqgemm
// MAP:         gpu_map.kernel "dqgemm_k0" "qgemm" attributes {grid = array<i64: 1, 1>
// CUDA-LABEL: // dqgemm_k0: qgemm
// CUDA:       dqgemm_k0(const float* __restrict__ [[A:p[0-9]+]], const signed char* __restrict__ {{p[0-9]+}}, int* __restrict__ {{p[0-9]+}}, const float* __restrict__ [[P:p[0-9]+]])
// CUDA:         const float qscale = [[P]][0], qzp = [[P]][1];
// CUDA:         const int zp = (int)qzp;
// CUDA:         float q = rintf(__fdiv_rn([[A]][gr * 37 + gk + t], qscale)) + qzp;
// CUDA:         q = fminf(fmaxf(q, -128.0f), 127.0f);
// CUDA:         acc[i][j] = __dp4a(a[i], b[j], acc[i][j]);
func.func @dqgemm(%a: tensor<2x9x37xf32>, %w: tensor<6x37xi8>, %p: tensor<2xf32>) -> tensor<2x9x6xi32> {
  %y = aicc.dynamic_matmul_integer %a, %w, %p : tensor<2x9x37xf32>, tensor<6x37xi8>, tensor<2xf32> -> tensor<2x9x6xi32>
  func.return %y : tensor<2x9x6xi32>
}

// Zero point 0: no column sums.
// CUDA-LABEL: // zp0_k0: qgemm, grid 3 x 2, block 16 x 16
// CUDA-NOT:     0x01010101
// CUDA:         acc[i][j] = __dp4a(a[i], b[j], acc[i][j]);
func.func @zp0(%a: tensor<129x8xi8>, %w: tensor<65x8xi8>) -> tensor<129x65xi32> {
  %y = aicc.matmul_integer %a, %w {lhs_zero_point = 0 : i64, transpose_rhs} : tensor<129x8xi8>, tensor<65x8xi8> -> tensor<129x65xi32>
  func.return %y : tensor<129x65xi32>
}
