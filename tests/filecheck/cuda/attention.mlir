// RUN: aicc-opt %s -p map-to-gpu --split-input-file | filecheck %s --check-prefix=MAP
// RUN: aicc-opt %s -p map-to-gpu --split-input-file -t cuda | filecheck %s --check-prefix=CUDA
// Fused attention for the cuda target. The aicc_fused.attention op (on memrefs; the CUDA pipeline does not
// run lower-attention) becomes one "attention" kernel holding the op, printed as a
// flash-attention __global__ with online softmax.

// Causal attention over 2 heads, q and k read out of a (L, H, E) = (5, 2, 16) layout: one block
// per head (32 query rows, one thread each), tile = [BQ, KB, T] = [32, 16, 1].
// MAP-LABEL: func.func @causal
// MAP:         gpu_map.kernel "causal_k0" "attention" attributes {grid = array<i64: 2>, block = array<i64: 32>, tile = array<i64: 32, 16, 1>} {
// MAP-NEXT:      aicc_fused.attention ins(
// MAP-SAME:        causal
// MAP-NEXT:    }
// MAP-NEXT:    func.return

// CUDA-LABEL: // causal_k0: attention, grid 2, block 32
// CUDA-NEXT:  // from: aicc_fused.attention
// CUDA-NEXT:  extern "C" __global__ void __launch_bounds__(32, 1) causal_k0(const float* __restrict__ [[Q:p[0-9]+]], const float* __restrict__ [[K:p[0-9]+]], const float* __restrict__ [[V:p[0-9]+]], float* __restrict__ [[O:p[0-9]+]])
// CUDA-NEXT:    // aicc_fused.attention: softmax(0.25 * q @ kᵀ, causal) @ v, batch [2], L 5, S 5, E 16, F 16
// CUDA:         __shared__ __align__(16) float Ks[16][16];
// CUDA:         __shared__ __align__(16) float Vs[16][16];
// q's row in registers, read through q's permutation (row stride H * E = 32, head stride E).
// CUDA:         float q[16], acc[16];
// CUDA:         q[g * 4 + u] = [[Q]][qrow * 32 + [[B:i[0-9]+]] * 16 + d];
// Causal: the key sweep ends after the block's last row, and each warp's after its own.
// CUDA:         const int kend = qb * 32 + 32 < 5 ? qb * 32 + 32 : 5;
// CUDA:         for (int j0 = 0; j0 < kend; j0 += 16) {
// CUDA:           Ks[c][d] = (j < 5) ? [[K]][j * 32 + [[B]] * 16 + d] : 0.0f;
// CUDA:           Vs[c][d] = (j < 5) ? [[V]][[[B]] * 80 + j * 16 + d] : 0.0f;
// CUDA:           __syncthreads();
// CUDA:           if (wlast - j0 + 1 < cend) cend = wlast - j0 + 1;
// Scores 16 keys at a time: scale, then the keys past S or above the diagonal drop out.
// CUDA:             float x = dot * 0.25f;
// CUDA-NEXT:        if (j >= 5 || j > qrow) x = -INFINITY;
// Online softmax: the new max, exp(old - new) rescales the running sum and the accumulator.
// CUDA:           const float mn = aicc_max(m, mx);
// CUDA-NEXT:      const float ms = mn == -INFINITY ? 0.0f : mn;
// CUDA-NEXT:      const float alpha = __expf(m - ms);
// CUDA:           for (int c = 0; c < 16; ++c) { s[c] = __expf(s[c] - ms); ps += s[c]; }
// CUDA-NEXT:      l = l * alpha + ps;
// CUDA:           for (int i = 0; i < 16; ++i) acc[i] *= alpha;
// CUDA:             acc[g * 4] = fmaf(s[c], vv.x, acc[g * 4]);
// CUDA:           m = mn;
// The result: the accumulator over the sum, real rows only.
// CUDA:         if (row >= 5) return;
// CUDA:           [[O]][[[B]] * 80 + row * 16 + d] = acc[g * 4 + u] / l;
func.func @causal(%q: memref<5x2x16xf32>, %k: memref<5x2x16xf32>, %v: memref<2x5x16xf32>, %out: memref<2x5x16xf32>) {
  aicc_fused.attention ins(%q, %k, %v : memref<5x2x16xf32>, memref<5x2x16xf32>, memref<2x5x16xf32>) outs(%out : memref<2x5x16xf32>) {scale = 2.500000e-01 : f64, causal, q_perm = array<i64: 1, 0, 2>, k_perm = array<i64: 1, 0, 2>}
  func.return
}

// -----

// A boolean mask (true keeps the score, masked ones become the fill), head dim 64: two threads
// per row, each holding 32 of q's and of the output's elements, their dot products summed by a
// shuffle. 70 query rows: two blocks of 64.
// MAP-LABEL: func.func @masked
// MAP:         gpu_map.kernel "masked_k0" "attention" attributes {grid = array<i64: 2>, block = array<i64: 128>, tile = array<i64: 64, 48, 2>} {

// CUDA-LABEL: // masked_k0: attention, grid 2, block 128
// CUDA:         // aicc_fused.attention: softmax(0.125 * q @ kᵀ where mask) @ v, batch [], L 70, S 33, E 64, F 64
// CUDA:         const int tid = threadIdx.x, lane = tid % 2, r = tid / 2;
// CUDA:         float q[32], acc[32];
// CUDA:             dot += __shfl_xor_sync(0xffffffffu, dot, 1);
// CUDA:             float x = dot * 0.125f;
// CUDA-NEXT:        x = [[M:p[0-9]+]][qrow * 33 + (j < 33 ? j : 32)] ? x : (-INFINITY);
// CUDA-NEXT:        if (j >= 33) x = -INFINITY;
func.func @masked(%q: memref<70x64xf32>, %k: memref<33x64xf32>, %v: memref<33x64xf32>, %mask: memref<70x33xi1>, %out: memref<70x64xf32>) {
  aicc_fused.attention ins(%q, %k, %v, %mask : memref<70x64xf32>, memref<33x64xf32>, memref<33x64xf32>, memref<70x33xi1>) outs(%out : memref<70x64xf32>) {scale = 1.250000e-01 : f64, mask = "keep", fill = 0xFFF0000000000000 : f64}
  func.return
}
