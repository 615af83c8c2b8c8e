// RUN: aicc-opt %s -p tile-matmul,canonicalize,cse --split-input-file | filecheck %s

// l2pf = 1 with a constant B (packed into 16-wide panels at compile time): each kernel call
// also fetches into L2 a share of the next block of B. Here 2 K blocks of kc = 32 rows and
// N blocks of nc = 32 (P = 2 panels), 2 slivers of mr = 4 rows per block. The next block of
// panel p is kc rows on in the same panel (offset + kc * nr = 512), or after the tile's last
// K block ((pc + kc) / K = 1) the first rows of the panel P panels on: offset + P * K * nr
// - pc * nr (+ 1536 - pc * 16 + 512 = 2048 - pc * 16). Sliver i takes the i-th share: 8
// unrolled k steps x 2 lines x 16 floats = 256 floats on. l2pf_rate: 2 lines per 4 k steps,
// so that the 2 slivers' shares cover a panel's K block (32 rows x 16 floats = 32 lines).
// CHECK-LABEL: func.func @weights
// CHECK-DAG:     %[[C256:.*]] = arith.constant 256 : index
// CHECK-DAG:     %[[C512:.*]] = arith.constant 512 : index
// CHECK-DAG:     %[[C1536:.*]] = arith.constant 1536 : index
// CHECK-DAG:     %[[C64:.*]] = arith.constant 64 : index
// CHECK-DAG:     %[[C32:.*]] = arith.constant 32 : index
// CHECK-DAG:     %[[C16:.*]] = arith.constant 16 : index
// CHECK-DAG:     %[[C4:.*]] = arith.constant 4 : index
// CHECK:         %[[W:.*]] = memref.get_global @w_panels16 : memref<4096xf32>
// CHECK:         scf.for %[[PC:.*]] = %{{.*}} to %[[C64]] step %[[C32]] {
// CHECK:           scf.for %[[IR:.*]] = %{{.*}} step %[[C4]] {
// CHECK:             scf.for %{{.*}} step %[[C16]] {
// CHECK:               %[[PCNR:.*]] = arith.muli %[[PC]], %[[C16]] : index
// CHECK:               %[[BOFF:.*]] = arith.addi %{{.*}}, %[[PCNR]] : index
// CHECK:               %[[NEXTPC:.*]] = arith.addi %[[PC]], %[[C32]] : index
// CHECK:               %[[LAST:.*]] = arith.divui %[[NEXTPC]], %[[C64]] : index
// CHECK:               %[[BACK:.*]] = arith.subi %[[C1536]], %[[PCNR]] : index
// CHECK:               %[[JUMP:.*]] = arith.muli %[[LAST]], %[[BACK]] : index
// CHECK:               %[[STEP:.*]] = arith.addi %[[JUMP]], %[[C512]] : index
// CHECK:               %[[NEXT:.*]] = arith.addi %[[BOFF]], %[[STEP]] : index
// CHECK:               %[[I:.*]] = arith.divui %[[IR]], %[[C4]] : index
// CHECK:               %[[SHARE:.*]] = arith.muli %[[I]], %[[C256]] : index
// CHECK:               %[[PF:.*]] = arith.addi %[[NEXT]], %[[SHARE]] : index
// CHECK:               aicc_cpu.microkernel %{{.*}}[%{{.*}}], %[[W]][%[[BOFF]]], %{{.*}}[%{{.*}}] k %{{.*}} rows %{{.*}} cols %{{.*}} accumulate %{{.*}} l2pf %[[W]][%[[PF]]] : memref<4096xf32> {{{.*}}ku = 4 : i64, l2pf_rate = 2 : i64}
"memref.global"() <{sym_name = "w", type = memref<64x64xf32>, initial_value = dense<1.0> : tensor<64x64xf32>, sym_visibility = "private", constant}> : () -> ()
func.func @weights(%x: memref<8x64xf32>, %c: memref<8x64xf32>) {
  %w = memref.get_global @w : memref<64x64xf32>
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%c : memref<8x64xf32>)
  linalg.matmul {aicc.schedule = {mr = 4 : i64, nr = 16 : i64, vw = 8 : i64, kc = 32 : i64, mc = 8 : i64, nc = 32 : i64, ku = 4 : i64, pack_a = false, pack_b = true, parallel = "", order = "mn", pf = 0 : i64, l2pf = 1 : i64}} ins(%x, %w : memref<8x64xf32>, memref<64x64xf32>) outs(%c : memref<8x64xf32>)
  func.return
}

// -----
// l2pf = 1 with a constant A (a conv's weight, packed into 4-row slivers at compile time):
// the calls on a sliver fetch the next sliver (K * mr = 256 floats on), the call on panel
// j its j-th share (16 unrolled k steps x 1 line x 16 floats = 256 floats on).
// CHECK-LABEL: func.func @constant_a
// CHECK-DAG:     %[[C256:.*]] = arith.constant 256 : index
// CHECK-DAG:     %[[C16:.*]] = arith.constant 16 : index
// CHECK:         %[[W:.*]] = memref.get_global @wa_slivers4 : memref<512xf32>
// CHECK:         scf.for
// CHECK:           %[[AOFF:.*]] = arith.muli %{{.*}}, %[[C256]] : index
// CHECK:           scf.for %[[JR:.*]] = %{{.*}} step %[[C16]] {
// CHECK:             %[[J:.*]] = arith.divui %[[JR]], %[[C16]] : index
// CHECK:             %[[SHARE:.*]] = arith.muli %[[J]], %[[C256]] : index
// CHECK:             %[[NEXT:.*]] = arith.addi %[[AOFF]], %[[C256]] : index
// CHECK:             %[[PF:.*]] = arith.addi %[[NEXT]], %[[SHARE]] : index
// CHECK:             aicc_cpu.microkernel %[[W]][%[[AOFF]]], {{.*}} l2pf %[[W]][%[[PF]]] : memref<512xf32> {{{.*}}l2pf_rate = 1 : i64}
"memref.global"() <{sym_name = "wa", type = memref<8x64xf32>, initial_value = dense<1.0> : tensor<8x64xf32>, sym_visibility = "private", constant}> : () -> ()
func.func @constant_a(%x: memref<64x48xf32>, %c: memref<8x48xf32>) {
  %w = memref.get_global @wa : memref<8x64xf32>
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%c : memref<8x48xf32>)
  linalg.matmul {aicc.schedule = {mr = 4 : i64, nr = 16 : i64, vw = 8 : i64, kc = 64 : i64, mc = 8 : i64, nc = 48 : i64, ku = 4 : i64, pack_a = true, pack_b = false, parallel = "", order = "mn", pf = 0 : i64, l2pf = 1 : i64}} ins(%w, %x : memref<8x64xf32>, memref<64x48xf32>) outs(%c : memref<8x48xf32>)
  func.return
}

// -----
// B packed at run time (not a constant) is in cache after its packing: no l2pf operand.
// CHECK-LABEL: func.func @runtime_b
// CHECK:         aicc_cpu.microkernel
// CHECK-NOT:     l2pf
func.func @runtime_b(%x: memref<8x64xf32>, %w: memref<64x64xf32>, %c: memref<8x64xf32>) {
  linalg.matmul {aicc.schedule = {mr = 4 : i64, nr = 16 : i64, vw = 8 : i64, kc = 32 : i64, mc = 8 : i64, nc = 32 : i64, ku = 4 : i64, pack_a = false, pack_b = true, parallel = "", order = "mn", pf = 0 : i64, l2pf = 1 : i64}} ins(%x, %w : memref<8x64xf32>, memref<64x64xf32>) outs(%c : memref<8x64xf32>)
  func.return
}
