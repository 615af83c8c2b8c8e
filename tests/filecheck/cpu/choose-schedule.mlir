// RUN: aicc-opt %s -p 'choose-schedule{vector-bits=512 threads=1 l1-bytes=49152 l2-bytes=2097152}' --split-input-file | filecheck %s --check-prefix=AVX512
// RUN: aicc-opt %s -p 'choose-schedule{vector-bits=256 threads=1 l1-bytes=32768 l2-bytes=1048576}' --split-input-file | filecheck %s --check-prefix=AVX2
// RUN: aicc-opt %s -p 'choose-schedule{vector-bits=512 threads=1 overrides="mr=6,kc=64,pack_b=false"}' --split-input-file | filecheck %s --check-prefix=OVERRIDE
// RUN: not aicc-opt %s -p 'choose-schedule{overrides="mr=4,nr=20"}' --split-input-file 2>&1 | filecheck %s --check-prefix=BAD
// RUN: aicc-opt %s -p 'choose-schedule{vector-bits=512 threads=1 l2-prefetch=true}' --split-input-file | filecheck %s --check-prefix=L2PF
// RUN: aicc-opt %s -p 'choose-schedule{vector-bits=256 threads=1 l1-bytes=32768 l2-bytes=1048576 k-unroll=8}' --split-input-file | filecheck %s --check-prefix=KU8

// A schedule per matmul, chosen for its shape and the target: AVX-512 holds a 14 x 2-vector
// register tile of 16 lanes, AVX2 a 6 x 2-vector tile of 8 lanes. K = 1024 puts A's rows
// 4 KiB apart, on the same L1 sets, so A is packed too. Overrides fix fields and the
// heuristic fills in the rest around them.
// AVX512-LABEL: func.func @matmul
// AVX512:         linalg.matmul {aicc.schedule = {mr = 14 : i64, nr = 32 : i64, vw = 16 : i64, kc = 512 : i64, mc = 210 : i64, nc = 256 : i64, ku = 4 : i64, pack_a = true, pack_b = true, parallel = "bmn", order = "mn", pf = 32 : i64}}
// AVX2-LABEL:   func.func @matmul
// AVX2:           linalg.matmul {aicc.schedule = {mr = 6 : i64, nr = 16 : i64, vw = 8 : i64, kc = 512 : i64, mc = 210 : i64, nc = 128 : i64, ku = 4 : i64, pack_a = true, pack_b = true, parallel = "bmn", order = "mn", pf = 32 : i64}}
// k-unroll (the machine's k_unroll_rule: 8 for AVX2 code on an Intel core) sets the kernels'
// k-loop unroll, the rest as before.
// KU8-LABEL:    func.func @matmul
// KU8:            linalg.matmul {aicc.schedule = {mr = 6 : i64, nr = 16 : i64, vw = 8 : i64, kc = 512 : i64, mc = 210 : i64, nc = 128 : i64, ku = 8 : i64, pack_a = true, pack_b = true, parallel = "bmn", order = "mn", pf = 32 : i64}}
// With l2-prefetch (an Intel core's l2_prefetch_rule), l2pf only where an operand is a
// constant, packed at compile time (@weights below); these operands are run-time values.
// L2PF-LABEL: func.func @matmul
// L2PF:         linalg.matmul {aicc.schedule = {{{.*}}pf = 32 : i64}}
// OVERRIDE-LABEL: func.func @matmul
// OVERRIDE:       linalg.matmul {aicc.schedule = {mr = 6 : i64, nr = 32 : i64, vw = 16 : i64, kc = 64 : i64, {{.*}}, pack_b = false, {{.*}}}}
// BAD: aicc-opt: error: matmul schedule mr=4,nr=20,{{.*}}: nr = 20 must be a multiple of vw = 16
func.func @matmul(%a: tensor<1024x1024xf32>, %b: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {
  %e = tensor.empty() : tensor<1024x1024xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
  %r = linalg.matmul ins(%a, %b : tensor<1024x1024xf32>, tensor<1024x1024xf32>) outs(%f : tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
  func.return %r : tensor<1024x1024xf32>
}

// -----
// M = 32 rows are split evenly over the register tiles: 3 tiles of 11 rows with AVX-512, not
// 14 + 14 + 4. K = 784: the rows of A are 3136 bytes apart, and A is read in place.
// AVX512-LABEL: func.func @batch32
// AVX512:         linalg.matmul {aicc.schedule = {mr = 11 : i64, nr = 32 : i64, {{.*}}pack_a = false, pack_b = true
// AVX2-LABEL:   func.func @batch32
// AVX2:           linalg.matmul {aicc.schedule = {mr = 6 : i64, nr = 16 : i64, {{.*}}pack_a = false, pack_b = true
func.func @batch32(%a: tensor<32x784xf32>, %b: tensor<784x512xf32>) -> tensor<32x512xf32> {
  %e = tensor.empty() : tensor<32x512xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<32x512xf32>) -> tensor<32x512xf32>
  %r = linalg.matmul ins(%a, %b : tensor<32x784xf32>, tensor<784x512xf32>) outs(%f : tensor<32x512xf32>) -> tensor<32x512xf32>
  func.return %r : tensor<32x512xf32>
}

// -----
// A batched matmul (a linalg.generic with a broadcast batch dim) is recognized too; a row
// vector (m = 1) gets a wide 1 x 7-vector tile (n = 100) and reads B in place, in short K
// blocks without prefetch.
// AVX512-LABEL: func.func @batched_rowvec
// AVX512:         linalg.generic {{.*}}aicc.schedule = {mr = 1 : i64, nr = 112 : i64, vw = 16 : i64, kc = 40 : i64, {{.*}}pack_b = false, {{.*}}pf = 0 : i64}
// An elementwise generic gets no schedule.
// AVX512:         linalg.generic
// AVX512-NOT:     aicc.schedule
// AVX512:         func.return
func.func @batched_rowvec(%a: tensor<3x1x40xf32>, %b: tensor<40x100xf32>, %acc: tensor<3x1x100xf32>) -> tensor<3x1x100xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%a, %b : tensor<3x1x40xf32>, tensor<40x100xf32>) outs(%acc : tensor<3x1x100xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<3x1x100xf32>
  %e = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%r : tensor<3x1x100xf32>) outs(%acc : tensor<3x1x100xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = arith.maximumf %x, %x : f32
    linalg.yield %m : f32
  } -> tensor<3x1x100xf32>
  func.return %e : tensor<3x1x100xf32>
}

// -----
// A matmul operand produced by a transpose (and used only there) is read in place: the
// matmul becomes a generic with B's map (n, k), and packing does the transpose. A
// transposed B is always packed.
// AVX512-LABEL: func.func @transposed_b
// AVX512-NOT:     affine_map<(d0, d1) -> (d1, d0)>
// AVX512:         %[[R:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.*}}, %[[W:.*]] : tensor<8x32xf32>, tensor<24x32xf32>) outs(%{{.*}} : tensor<8x24xf32>) attrs = {aicc.schedule = {mr = 8 : i64, {{.*}}pack_b = true
// AVX512:           arith.mulf
// AVX512:           arith.addf
// AVX512:         func.return %[[R]]
func.func @transposed_b(%x: tensor<8x32xf32>, %w: tensor<24x32xf32>) -> tensor<8x24xf32> {
  %e = tensor.empty() : tensor<32x24xf32>
  %t = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<24x32xf32>) outs(%e : tensor<32x24xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<32x24xf32>
  %e2 = tensor.empty() : tensor<8x24xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e2 : tensor<8x24xf32>) -> tensor<8x24xf32>
  %r = linalg.matmul ins(%x, %t : tensor<8x32xf32>, tensor<32x24xf32>) outs(%f : tensor<8x24xf32>) -> tensor<8x24xf32>
  func.return %r : tensor<8x24xf32>
}

// -----
// A constant B (a layer's weight), packed at compile time: with l2-prefetch the kernels of a
// block fetch the next block of it into L2 (l2pf = 1, see tile-matmul-l2pf.mlir). The first
// block comes from memory on demand, so with few rows (M = 64) the blocks are 64 columns
// wide, not 512.
// AVX512-LABEL: func.func @weights
// AVX512:         linalg.matmul {aicc.schedule = {{{.*}}nc = 512 : i64, {{.*}}pack_b = true, {{.*}}pf = 32 : i64}}
// L2PF-LABEL:   func.func @weights
// L2PF:           linalg.matmul {aicc.schedule = {{{.*}}nc = 64 : i64, {{.*}}pack_b = true, {{.*}}pf = 32 : i64, l2pf = 1 : i64}}
func.func @weights(%x: tensor<64x256xf32>) -> tensor<64x512xf32> {
  %w = arith.constant dense<0.5> : tensor<256x512xf32>
  %e = tensor.empty() : tensor<64x512xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<64x512xf32>) -> tensor<64x512xf32>
  %r = linalg.matmul ins(%x, %w : tensor<64x256xf32>, tensor<256x512xf32>) outs(%f : tensor<64x512xf32>) -> tensor<64x512xf32>
  func.return %r : tensor<64x512xf32>
}
