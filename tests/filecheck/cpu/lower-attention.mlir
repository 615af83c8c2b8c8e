// RUN: aicc-opt %s -p lower-attention,canonicalize,cse | filecheck %s
// RUN: aicc-opt %s -p 'lower-attention{vector-bits=512}',canonicalize,cse | filecheck %s --check-prefix=WIDE

// Causal attention over 2 heads, q and k read out of a (L, H, E) = (5, 2, 10) layout, v and the
// result (H, L, F) = (2, 5, 3).
// First k^T, once for all query blocks: a buffer of (head, key block) tiles of E x 16 keys
// (2 x 1 tiles of 10 x 16), filled by a parallel loop over the tiles; keys past the end (5..15)
// repeat key 4 (they are masked).
// Then one scf.parallel over (heads x query blocks): 2 x 1 tasks. Per task: stack buffers for
// the 6 x 16 score tile, and the block's accumulators, running max and sum (6 rows: 5 rounded
// up to the row tile).
// CHECK-LABEL: func.func @causal
// CHECK-SAME:    (%[[Q:.*]]: memref<5x2x10xf32>, %[[K:.*]]: memref<5x2x10xf32>, %[[V:.*]]: memref<2x5x3xf32>, %[[OUT:.*]]: memref<2x5x3xf32>)
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2 : index
// CHECK-DAG:     %[[C4:.*]] = arith.constant 4 : index
// CHECK-DAG:     %[[C10:.*]] = arith.constant 10 : index
// CHECK:         %[[KT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<320xf32>
// CHECK:         "scf.parallel"(%{{.*}}, %[[C2]], %{{.*}})
// CHECK-NEXT:    ^bb0(%[[TILE:.*]]: index):
// CHECK:           scf.for %[[E:.*]] = %{{.*}} to %[[C10]]
// CHECK:             scf.for
// CHECK:               %[[J:.*]] = arith.minsi %{{.*}}, %[[C4]] : index
// CHECK:               %[[KV:.*]] = memref.load %[[K]][%[[J]], %[[TILE]], %[[E]]] : memref<5x2x10xf32>
// CHECK:               memref.store %[[KV]], %[[KT]][%{{.*}}] : memref<320xf32>
// CHECK:         }) {aicc.kernel = "attention-transpose-k"}
// CHECK:         "scf.parallel"(%{{.*}}, %[[C2]], %{{.*}})
// CHECK-NEXT:    ^bb0(%[[T:.*]]: index):
// CHECK-DAG:       %[[ACC:.*]] = memref.alloca() {alignment = 64 : i64} : memref<6x3xf32>
// CHECK-DAG:       %[[M:.*]] = memref.alloca() {alignment = 64 : i64} : memref<6xf32>
// CHECK-DAG:       %[[L:.*]] = memref.alloca() {alignment = 64 : i64} : memref<6xf32>
// Causal: the key sweep ends after the block's last row.
// CHECK:           %[[NEG:.*]] = arith.constant 0xff800000 : f32
// CHECK:           %[[KEND:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// CHECK:           %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// CHECK:           scf.for %[[J0:.*]] = %{{.*}} to %[[KEND]] step %{{.*}} {
// The block's keys: cols = min(16, kend - j0).
// CHECK:             %[[COLS:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// Row tiles start at the first one that reaches this key block.
// CHECK:             arith.maxsi
// CHECK:             scf.for
// Causal: a row tile's keys end after its last row, min(cols, last row - j0 + 1); its score
// tile is computed up to the next multiple of 16 keys past them.
// CHECK:               %[[TCOLS:.*]] = arith.minsi %[[COLS]], %{{.*}} : index
// CHECK:               arith.divui
// CHECK:               %[[CEND:.*]] = arith.muli
// The scores: six rows x 16 keys of sums carried through the loop over e (registers), one
// multiply-add of a q element and a k^T row (from the buffer) each per e, 4 values of e per
// iteration (e < 8), then a loop of the rest (e = 8, 9); stored once after it.
// CHECK:               scf.for %{{.*}} = %{{.*}} to %[[CEND]] step
// CHECK:               scf.for %[[E4:.*]] = %{{.*}} to %{{.*}} step %[[C4]] iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, {{.*}}) {
// CHECK:                 memref.load %[[Q]][%{{.*}}, %{{.*}}, %[[E4]]] : memref<5x2x10xf32>
// CHECK:                 memref.load %[[KT]]
// CHECK:                 arith.mulf {{.*}} fastmath<contract>
// CHECK:                 arith.addf {{.*}} fastmath<contract>
// CHECK-COUNT-18:        memref.load %[[Q]]
// CHECK:                 scf.yield
// CHECK:               scf.for %{{.*}} = %{{.*}} to %[[C10]] step %{{.*}} iter_args({{.*}}) -> (f32, {{.*}}) {
// CHECK:                 scf.yield
// CHECK:               memref.store
// Only a block some row does not see whole pays for the mask.
// CHECK:               scf.if %{{.*}} -> (f32, f32, f32, f32, f32, f32) {
// CHECK:                 arith.mulf %{{.*}}, %[[HALF]] : f32
// CHECK:                 arith.select %{{.*}}, %[[NEG]], %{{.*}} : f32
// The block max: one maximumf per score, marked nnan nsz (one vmaxps, no NaN or signed-zero
// fix-ups) and reassoc (a vector reduction along the keys).
// CHECK:               arith.maximumf %{{.*}}, %{{.*}} fastmath<reassoc,nnan,nsz> : f32
// CHECK:               } else {
// CHECK-NOT:             arith.select
// CHECK:               }
// Online softmax: the new max, exp(old - new) rescales the sum and the accumulators. Both
// exps are marked afn (their arguments are never above 0: results below 2^-126 may be 0) and
// aicc.nonpositive_arg (no upper clamp).
// CHECK:               memref.load %[[M]]
// CHECK:               arith.maximumf
// CHECK:               math.exp %{{.*}} fastmath<afn> {aicc.nonpositive_arg}
// CHECK:               memref.store %{{.*}}, %[[M]]
// CHECK:               math.exp %{{.*}} fastmath<afn> {aicc.nonpositive_arg}
// CHECK:               memref.store %{{.*}}, %[[L]]
// p @ v into the accumulators, over the tile's keys.
// CHECK:               scf.for %{{.*}} = %{{.*}} to %[[TCOLS]] step
// CHECK:               memref.load %[[V]][%[[T]], %{{.*}}, %{{.*}}] : memref<2x5x3xf32>
// CHECK:               memref.store %{{.*}}, %[[ACC]]
// The result: accumulators over the sums, for the block's real rows only.
// CHECK:           scf.for
// CHECK:             arith.divf
// CHECK:             memref.store %{{.*}}, %[[OUT]][%[[T]], %{{.*}}, %{{.*}}] : memref<2x5x3xf32>
// CHECK:         }) {aicc.kernel = "attention"}
// CHECK-NEXT:    memref.dealloc %[[KT]] : memref<320xf32>
// CHECK-NOT:     aicc_fused.attention
// With AVX-512's 32 vector registers: tiles of 8 rows x 32 keys, 8 x 32 = 256 sums carried
// through the loop over e (16 vectors of 16 floats), and the score tile holds 32 keys.
// WIDE-LABEL: func.func @causal
// WIDE:         memref.alloc() {alignment = 64 : i64} : memref<640xf32>
// WIDE:         }) {aicc.kernel = "attention-transpose-k"}
// WIDE:           memref.alloca() {alignment = 64 : i64} : memref<8x32xf32>
// WIDE:           memref.alloca() {alignment = 64 : i64} : memref<8x3xf32>
// WIDE:               scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args({{.*}}) -> ({{(f32, ){255}f32}}) {
// WIDE:         }) {aicc.kernel = "attention"}
func.func @causal(%q: memref<5x2x10xf32>, %k: memref<5x2x10xf32>, %v: memref<2x5x3xf32>, %out: memref<2x5x3xf32>) {
  aicc_fused.attention ins(%q, %k, %v : memref<5x2x10xf32>, memref<5x2x10xf32>, memref<2x5x3xf32>) outs(%out : memref<2x5x3xf32>) {scale = 5.000000e-01 : f64, causal, q_perm = array<i64: 1, 0, 2>, k_perm = array<i64: 1, 0, 2>}
  func.return
}

// -----
// p @ v with F = 16: the six rows' accumulators are loaded and rescaled once per key block,
// carried through the loop over the block's keys (registers), 4 keys per iteration, then a
// loop of the rest (the block's key count is known at run time), and stored once after it.
// CHECK-LABEL: func.func @pv_in_registers
// CHECK-SAME:    (%{{.*}}: memref<2x8x4xf32>, %{{.*}}: memref<2x8x4xf32>, %[[V:.*]]: memref<2x8x16xf32>, %{{.*}}: memref<2x8x16xf32>)
// CHECK:         math.exp
// CHECK:         memref.load %[[ACC:.*]][%{{.*}}, %{{.*}}] : memref<12x16xf32>
// CHECK:         arith.mulf
// CHECK:         scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, {{.*}}) {
// CHECK:           memref.load %[[V]]
// CHECK:           arith.mulf {{.*}} fastmath<contract>
// CHECK:           arith.addf {{.*}} fastmath<contract>
// CHECK-COUNT-4:   memref.load %[[V]]
// CHECK:           scf.yield
// CHECK:         scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args({{.*}}) -> (f32, {{.*}}) {
// CHECK:           memref.load %[[V]]
// CHECK:           scf.yield
// CHECK:         memref.store %{{.*}}, %[[ACC]]
func.func @pv_in_registers(%q: memref<2x8x4xf32>, %k: memref<2x8x4xf32>, %v: memref<2x8x16xf32>, %out: memref<2x8x16xf32>) {
  aicc_fused.attention ins(%q, %k, %v : memref<2x8x4xf32>, memref<2x8x4xf32>, memref<2x8x16xf32>) outs(%out : memref<2x8x16xf32>) {scale = 5.000000e-01 : f64}
  func.return
}
