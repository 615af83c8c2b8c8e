// RUN: aicc-opt %s -p tile-matmul,canonicalize,cse --split-input-file | filecheck %s

// B packed into nr-wide panels (the parallel loop runs over blocks of rows of B; the last,
// 8-column panel is zero-padded to 16), then the tiles of C on threads ("mn": 3 M blocks x
// 2 N blocks), K blocks, an A sliver outside the B panels, one micro-kernel per register
// tile. The zero fill of C is gone: the first K block overwrites C (accumulate = pc != 0).
// CHECK-LABEL: func.func @matmul
// CHECK-SAME:      (%[[A:.*]]: memref<20x24xf32>, %[[B:.*]]: memref<24x40xf32>, %[[C:.*]]: memref<20x40xf32>)
// CHECK-NOT:     linalg.fill
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C4:.*]] = arith.constant 4 : index
// CHECK-DAG:     %[[C6:.*]] = arith.constant 6 : index
// CHECK-DAG:     %[[C16:.*]] = arith.constant 16 : index
// CHECK-DAG:     %[[C24:.*]] = arith.constant 24 : index
// CHECK-DAG:     %[[AF:.*]] = memref.collapse_shape %[[A]] {{\[\[}}0 : i64, 1 : i64]] : memref<20x24xf32> into memref<480xf32>
// CHECK-DAG:     %[[CF:.*]] = memref.collapse_shape %[[C]] {{\[\[}}0 : i64, 1 : i64]] : memref<20x40xf32> into memref<800xf32>
// CHECK-DAG:     %[[BP:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1152xf32>
// CHECK-DAG:     %[[BF:.*]] = memref.collapse_shape %[[B]] {{\[\[}}0 : i64, 1 : i64]] : memref<24x40xf32> into memref<960xf32>
// CHECK:         "scf.parallel"
// CHECK:           memref.load %[[BF]]
// CHECK:           memref.store %{{.*}}, %[[BP]]
// CHECK:           memref.store %{{.*}}, %[[BP]]
// CHECK:           scf.reduce
// CHECK:         "scf.parallel"(%[[C0]], %[[C6]], %{{.*}})
// CHECK:           scf.for %[[PC:.*]] = %[[C0]] to %[[C24]] step %[[C16]] {
// CHECK:             %[[FIRST:.*]] = arith.cmpi ne, %[[PC]], %[[C0]] : index
// CHECK:             scf.for %{{.*}} = %[[C0]] to %{{.*}} step %[[C4]] {
// CHECK:               scf.for %{{.*}} = %[[C0]] to %{{.*}} step %[[C16]] {
// CHECK:                 aicc_cpu.microkernel %[[AF]][%{{.*}}], %[[BP]][%{{.*}}], %[[CF]][%{{.*}}] k %{{.*}} rows %{{.*}} cols %{{.*}} accumulate %[[FIRST]] {mr = 4 : i64, nr = 16 : i64, vw = 8 : i64, a_rs = 24 : i64, a_ks = 1 : i64, b_ks = 16 : i64, ldc = 40 : i64, ku = 2 : i64} : memref<480xf32>, memref<1152xf32>, memref<800xf32>
// The tile loop records the matmul it replaced, for statistics: 2 * 20 * 40 * 24 flops.
// CHECK:         }) {aicc.tiled = {op = "matmul", flops = 38400 : i64}} : (index, index, index) -> ()
// CHECK:         memref.dealloc %[[BP]] : memref<1152xf32>
func.func @matmul(%a: memref<20x24xf32>, %b: memref<24x40xf32>, %c: memref<20x40xf32>) {
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%c : memref<20x40xf32>)
  linalg.matmul {aicc.schedule = {mr = 4 : i64, nr = 16 : i64, vw = 8 : i64, kc = 16 : i64, mc = 8 : i64, nc = 32 : i64, ku = 2 : i64, pack_a = false, pack_b = true, parallel = "mn", order = "mn", pf = 0 : i64}} ins(%a, %b : memref<20x24xf32>, memref<24x40xf32>) outs(%c : memref<20x40xf32>)
  func.return
}

// -----
// Constant weights are packed at compile time into a global in the panel layout
// (panel 0: columns 0-15 of each row; panel 1: columns 16-19, zero-padded); nothing packs
// them at run time and the original global goes away. No parallel loops: parallel = "".
// CHECK-NOT:   sym_name = "w",
// CHECK:       "memref.global"() <{sym_name = "w_panels16", type = memref<96xf32>, initial_value = dense<[1.000000e+00, 2.000000e+00, {{.*}}, 1.600000e+01, 2.100000e+01, {{.*}}, 5.600000e+01, 1.700000e+01, 1.800000e+01, 1.900000e+01, 2.000000e+01, 0.000000e+00, {{.*}}]> : tensor<96xf32>, sym_visibility = "private", constant}>
// CHECK-LABEL: func.func @weights
// CHECK-NOT:     scf.parallel
// CHECK:         %[[W:.*]] = memref.get_global @w_panels16 : memref<96xf32>
// CHECK-NOT:     memref.store
// CHECK:         aicc_cpu.microkernel %{{.*}}, %[[W]][%{{.*}}], %{{.*}} {mr = 5 : i64, nr = 16 : i64, vw = 8 : i64, a_rs = 3 : i64, a_ks = 1 : i64, b_ks = 16 : i64, ldc = 20 : i64, ku = 1 : i64}
"memref.global"() <{sym_name = "w", type = memref<3x20xf32>, initial_value = dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0], [21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0, 33.0, 34.0, 35.0, 36.0, 37.0, 38.0, 39.0, 40.0], [41.0, 42.0, 43.0, 44.0, 45.0, 46.0, 47.0, 48.0, 49.0, 50.0, 51.0, 52.0, 53.0, 54.0, 55.0, 56.0, 57.0, 58.0, 59.0, 60.0]]> : tensor<3x20xf32>, sym_visibility = "private", constant}> : () -> ()
func.func @weights(%x: memref<10x3xf32>, %c: memref<10x20xf32>) {
  %w = memref.get_global @w : memref<3x20xf32>
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%c : memref<10x20xf32>)
  linalg.matmul {aicc.schedule = {mr = 5 : i64, nr = 16 : i64, vw = 8 : i64, kc = 3 : i64, mc = 10 : i64, nc = 32 : i64, ku = 1 : i64, pack_a = false, pack_b = true, parallel = "", order = "mn", pf = 0 : i64}} ins(%x, %w : memref<10x3xf32>, memref<3x20xf32>) outs(%c : memref<10x20xf32>)
  func.return
}

// -----
// A constant A read through reshapes (a conv's weight viewed as its matmul's matrix) is packed
// at compile time into mr-row slivers, k-major (sliver 0: rows 0-3; sliver 1: row 4, then
// zeros); the original global and its views go. B, read in place, is 20 columns: a 16-wide
// panel, then the last 4 columns by a kernel one vector (8 columns) wide, not 16. The fifth
// row (M % mr = 1) takes kernels of one row (mr = 1) on the second sliver, not 4-row kernels
// whose 3 other rows are dropped.
// CHECK-NOT:   sym_name = "wa",
// CHECK:       "memref.global"() <{sym_name = "wa_slivers4", type = memref<24xf32>, initial_value = dense<[1.000000e+00, 4.000000e+00, 7.000000e+00, 1.000000e+01, 2.000000e+00, {{.*}}, 1.200000e+01, 1.300000e+01, 0.000000e+00, 0.000000e+00, 0.000000e+00, 1.400000e+01, {{.*}}]> : tensor<24xf32>, sym_visibility = "private", constant}>
// CHECK-LABEL: func.func @constant_a
// CHECK-DAG:     %[[C12:.*]] = arith.constant 12 : index
// CHECK-DAG:     %[[C80:.*]] = arith.constant 80 : index
// CHECK-DAG:     %[[C96:.*]] = arith.constant 96 : index
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG:     %[[C4:.*]] = arith.constant 4 : index
// CHECK-NOT:     memref.expand_shape
// CHECK:         %[[W:.*]] = memref.get_global @wa_slivers4 : memref<24xf32>
// CHECK-NOT:     memref.store
// CHECK-NOT:     scf.for
// CHECK:         aicc_cpu.microkernel %[[W]][%[[C0]]], %{{.*}}[%{{.*}}], %{{.*}}[%[[C0]]] k %{{.*}} rows %[[C4]] cols %{{.*}} accumulate %{{.*}} {{{.*}}mr = 4 : i64, nr = 16 : i64, vw = 8 : i64, a_rs = 1 : i64, a_ks = 4 : i64, b_ks = 20 : i64, ldc = 20 : i64, ku = 1 : i64, b_masked = true}
// CHECK-NEXT:    aicc_cpu.microkernel %[[W]][%[[C0]]], {{.*}} rows %[[C4]] {{.*}} {mr = 4 : i64, nr = 8 : i64, vw = 8 : i64, a_rs = 1 : i64, a_ks = 4 : i64, b_ks = 20 : i64, ldc = 20 : i64, ku = 1 : i64, b_masked = true}
// CHECK-NEXT:    aicc_cpu.microkernel %[[W]][%[[C12]]], %{{.*}}[%[[C0]]], %{{.*}}[%[[C80]]] k %{{.*}} rows %[[C1]] {{.*}} {mr = 1 : i64, nr = 16 : i64, {{.*}}}
// CHECK-NEXT:    aicc_cpu.microkernel %[[W]][%[[C12]]], {{.*}}[%[[C96]]] k %{{.*}} rows %[[C1]] {{.*}} {mr = 1 : i64, nr = 8 : i64, {{.*}}}
// CHECK-NOT:     aicc_cpu.microkernel
"memref.global"() <{sym_name = "wa", type = memref<5x1x3xf32>, initial_value = dense<[[[1.0, 2.0, 3.0]], [[4.0, 5.0, 6.0]], [[7.0, 8.0, 9.0]], [[10.0, 11.0, 12.0]], [[13.0, 14.0, 15.0]]]> : tensor<5x1x3xf32>, sym_visibility = "private", constant}> : () -> ()
func.func @constant_a(%x: memref<3x20xf32>, %c: memref<5x20xf32>) {
  %w = memref.get_global @wa : memref<5x1x3xf32>
  %wf = memref.collapse_shape %w [[0, 1, 2]] : memref<5x1x3xf32> into memref<15xf32>
  %wm = memref.expand_shape %wf [[0, 1]] output_shape [5, 3] : memref<15xf32> into memref<5x3xf32>
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%c : memref<5x20xf32>)
  linalg.matmul {aicc.schedule = {mr = 4 : i64, nr = 16 : i64, vw = 8 : i64, kc = 3 : i64, mc = 8 : i64, nc = 32 : i64, ku = 1 : i64, pack_a = true, pack_b = false, parallel = "", order = "mn", pf = 0 : i64}} ins(%wm, %x : memref<5x3xf32>, memref<3x20xf32>) outs(%c : memref<5x20xf32>)
  func.return
}

// -----
// A batched matmul with a broadcast B, order "nm" (a B panel outside the A slivers) and A
// packed into k-major 4-row slivers (the last, 1-row sliver zero-padded). B is read in
// place: its edge tiles mask their loads (b_masked). The fill with 1.0 stays, so every K
// block accumulates. The batch loop is the parallel one.
// CHECK-LABEL: func.func @batched
// CHECK:         linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : memref<2x9x12xf32>)
// CHECK-DAG:     %[[TRUE:.*]] = arith.constant true
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2 : index
// CHECK:         %[[AP:.*]] = memref.alloc() {alignment = 64 : i64} : memref<192xf32>
// CHECK:         "scf.parallel"
// CHECK:           scf.if
// CHECK:           } else {
// CHECK:         %[[BF:.*]] = memref.collapse_shape %{{.*}} : memref<8x12xf32> into memref<96xf32>
// CHECK:         "scf.parallel"(%{{.*}}, %[[C2]], %{{.*}})
// CHECK:           aicc_cpu.microkernel %[[AP]][%{{.*}}], %[[BF]][%{{.*}}], %{{.*}} accumulate %[[TRUE]] {mr = 4 : i64, nr = 8 : i64, vw = 8 : i64, a_rs = 1 : i64, a_ks = 4 : i64, b_ks = 12 : i64, ldc = 12 : i64, ku = 1 : i64, b_masked = true}
// CHECK:         memref.dealloc %[[AP]]
func.func @batched(%a: memref<2x9x8xf32>, %b: memref<8x12xf32>, %c: memref<2x9x12xf32>) {
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%one : f32) outs(%c : memref<2x9x12xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%a, %b : memref<2x9x8xf32>, memref<8x12xf32>) outs(%c : memref<2x9x12xf32>) attrs = {aicc.schedule = {mr = 4 : i64, nr = 8 : i64, vw = 8 : i64, kc = 8 : i64, mc = 8 : i64, nc = 16 : i64, ku = 1 : i64, pack_a = true, pack_b = false, parallel = "b", order = "nm", pf = 0 : i64}} {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }
  func.return
}

// -----
// Without a schedule, tile-matmul chooses the default one (AVX-512 unless told otherwise).
// CHECK-LABEL: func.func @default
// Here all tile loops have one trip: the kernel is the outermost op and carries the
// aicc.tiled record of the matmul it replaced (2 * 7 * 3 * 5 flops, for statistics).
// CHECK:         aicc_cpu.microkernel {{.*}} {aicc.tiled = {op = "matmul", flops = 210 : i64}, mr = 7 : i64, nr = 16 : i64, vw = 16 : i64,
func.func @default(%a: memref<7x5xf32>, %b: memref<5x3xf32>, %c: memref<7x3xf32>) {
  linalg.matmul ins(%a, %b : memref<7x5xf32>, memref<5x3xf32>) outs(%c : memref<7x3xf32>)
  func.return
}

// -----
// Transposed operands (A stored [k, m], B stored [n, k]): A is read in place with unit row
// stride (a_rs = 1, a_ks = m); B is packed even though pack_b = false (the kernel reads B
// along n), the pack reading B^T with stride k.
// CHECK-LABEL: func.func @transposed
// CHECK-DAG:     %[[C6:.*]] = arith.constant 6 : index
// CHECK-DAG:     %[[BP:.*]] = memref.alloc() {alignment = 64 : i64} : memref<96xf32>
// CHECK-DAG:     %[[BF:.*]] = memref.collapse_shape %{{.*}} : memref<16x6xf32> into memref<96xf32>
// CHECK:         scf.for %[[K:.*]] = %{{.*}} to %[[C6]]
// CHECK:           scf.for %[[J:.*]] =
// CHECK-NEXT:        %[[JK:.*]] = arith.muli %[[J]], %[[C6]] : index
// CHECK-NEXT:        %[[SRC:.*]] = arith.addi %[[K]], %[[JK]] : index
// CHECK-NEXT:        memref.load %[[BF]][%[[SRC]]] : memref<96xf32>
// CHECK:         aicc_cpu.microkernel {{.*}}, %[[BP]][{{.*}} {mr = 4 : i64, nr = 16 : i64, vw = 16 : i64, a_rs = 1 : i64, a_ks = 8 : i64, b_ks = 16 : i64, ldc = 16 : i64, ku = 1 : i64}
func.func @transposed(%at: memref<6x8xf32>, %bt: memref<16x6xf32>, %c: memref<8x16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%at, %bt : memref<6x8xf32>, memref<16x6xf32>) outs(%c : memref<8x16xf32>) attrs = {aicc.schedule = {mr = 4 : i64, nr = 16 : i64, vw = 16 : i64, kc = 6 : i64, mc = 8 : i64, nc = 16 : i64, ku = 1 : i64, pack_a = false, pack_b = false, parallel = "", order = "mn", pf = 0 : i64}} {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }
  func.return
}

// -----
// A copy of a bias into C right before the matmul (fuse-linear-bias's accumulator start) is
// folded into the kernels: the first K block reads the bias (init_rs = 0: one row for all
// rows of the tile) instead of C, and the copy disappears.
// CHECK-LABEL: func.func @bias
// CHECK-SAME:      %[[BIAS:[^:]*]]: memref<16xf32>
// CHECK-NOT:     linalg.generic
// CHECK-DAG:     %[[FALSE:.*]] = arith.constant false
// CHECK:         aicc_cpu.microkernel {{.*}} accumulate %[[FALSE]] init %[[BIAS]][%{{.*}}] : memref<16xf32> {{{.*}}init_rs = 0 : i64}
func.func @bias(%x: memref<6x5xf32>, %w: memref<5x16xf32>, %bias: memref<16xf32>, %c: memref<6x16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%bias : memref<16xf32>) outs(%c : memref<6x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.matmul {aicc.schedule = {mr = 6 : i64, nr = 16 : i64, vw = 16 : i64, kc = 5 : i64, mc = 6 : i64, nc = 16 : i64, ku = 1 : i64, pack_a = false, pack_b = false, parallel = "", order = "mn", pf = 0 : i64}} ins(%x, %w : memref<6x5xf32>, memref<5x16xf32>) outs(%c : memref<6x16xf32>)
  func.return
}

// -----
// An epilogue: relu(C + bias) right after the matmul, C a temporary read by nothing else.
// C goes: the matmul accumulates in the result %d, and after the last K block of each
// tile (K = 24 in blocks of 16) a loop nest over the tile's rows and columns applies the
// epilogue's body in place. No loop nest of its own remains, and the tile loop names the
// fused ops (its flops: 2 * 20 * 40 * 24 + 2 * 20 * 40).
// CHECK-LABEL: func.func @epilogue
// CHECK-SAME:      (%[[A:.*]]: memref<20x24xf32>, %[[B:.*]]: memref<24x40xf32>, %[[BIAS:.*]]: memref<40xf32>, %[[D:.*]]: memref<20x40xf32>)
// CHECK-NOT:     memref.alloc() {alignment = 64 : i64} : memref<20x40xf32>
// CHECK:         %[[DF:.*]] = memref.collapse_shape %[[D]]
// CHECK:         "scf.parallel"
// CHECK:         "scf.parallel"
// CHECK:           scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:             aicc_cpu.microkernel %{{.*}}, %{{.*}}, %[[DF]][%{{.*}}]
// CHECK:           }
// CHECK:           scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:             scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:               %[[ROW:.*]] = arith.addi %{{.*}}, %[[I]] : index
// CHECK:               %[[COL:.*]] = arith.addi %{{.*}}, %[[J]] : index
// CHECK:               %[[X:.*]] = memref.load %[[D]][%[[ROW]], %[[COL]]] : memref<20x40xf32>
// CHECK:               %[[BV:.*]] = memref.load %[[BIAS]][%[[COL]]] : memref<40xf32>
// CHECK:               %[[S:.*]] = arith.addf %[[X]], %[[BV]] : f32
// CHECK:               %[[R:.*]] = arith.maximumf %[[S]], %{{.*}} : f32
// CHECK:               memref.store %[[R]], %[[D]][%[[ROW]], %[[COL]]] : memref<20x40xf32>
// CHECK:         }) {aicc.tiled = {op = "matmul", flops = 40000 : i64, epilogue = "arith.addf,arith.maximumf"}} : (index, index, index) -> ()
// CHECK-NOT:     linalg.generic
func.func @epilogue(%a: memref<20x24xf32>, %b: memref<24x40xf32>, %bias: memref<40xf32>, %d: memref<20x40xf32>) {
  %z = arith.constant 0.0 : f32
  %c = memref.alloc() {alignment = 64 : i64} : memref<20x40xf32>
  linalg.fill ins(%z : f32) outs(%c : memref<20x40xf32>)
  linalg.matmul {aicc.schedule = {mr = 4 : i64, nr = 16 : i64, vw = 8 : i64, kc = 16 : i64, mc = 8 : i64, nc = 32 : i64, ku = 2 : i64, pack_a = false, pack_b = true, parallel = "mn", order = "mn", pf = 0 : i64}} ins(%a, %b : memref<20x24xf32>, memref<24x40xf32>) outs(%c : memref<20x40xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%c, %bias : memref<20x40xf32>, memref<40xf32>) outs(%d : memref<20x40xf32>) {
  ^bb0(%x: f32, %bv: f32, %o: f32):
    %s = arith.addf %x, %bv : f32
    %r = arith.maximumf %s, %z : f32
    linalg.yield %r : f32
  }
  memref.dealloc %c : memref<20x40xf32>
  func.return
}

// -----
// An epilogue of C's value alone (SiLU, x / (1 + exp(-x))) and one K block (K = 24, kc =
// 32): each micro-kernel call finishes its part of C, so it applies the epilogue, as its
// `epilogue` region, to the values in registers before their store; no loop over the tile
// follows, and the tile loop still names the fused ops. The constant 1.0, defined outside
// the generic's body (as the ONNX frontend's are), is cloned into the region.
// CHECK-LABEL: func.func @epilogue_in_kernel
// CHECK-SAME:      (%{{.*}}: memref<20x24xf32>, %{{.*}}: memref<24x40xf32>, %[[D:.*]]: memref<20x40xf32>)
// CHECK-NOT:     memref.alloc() {alignment = 64 : i64} : memref<20x40xf32>
// CHECK:         %[[DF:.*]] = memref.collapse_shape %[[D]]
// CHECK:         aicc_cpu.microkernel %{{.*}}, %{{.*}}, %[[DF]][%{{.*}}] k %{{.*}} rows %{{.*}} cols %{{.*}} accumulate %{{.*}} epilogue {
// CHECK-NEXT:    ^{{.*}}(%[[X:.*]]: f32):
// CHECK-NEXT:      %[[N:.*]] = arith.negf %[[X]] : f32
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[N]] : f32
// CHECK-NEXT:      %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      %[[P:.*]] = arith.addf %[[E]], %[[ONE]] : f32
// CHECK-NEXT:      %[[Y:.*]] = arith.divf %[[X]], %[[P]] : f32
// CHECK-NEXT:      aicc_cpu.yield %[[Y]] : f32
// CHECK-NEXT:    } {mr = 4 : i64
// CHECK-NOT:       memref.load %[[D]]
// CHECK:         }) {aicc.tiled = {op = "matmul", flops = 41600 : i64, epilogue = "arith.negf,math.exp,arith.addf,arith.divf"}} : (index, index, index) -> ()
// CHECK-NOT:     linalg.generic
func.func @epilogue_in_kernel(%a: memref<20x24xf32>, %b: memref<24x40xf32>, %d: memref<20x40xf32>) {
  %z = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %c = memref.alloc() {alignment = 64 : i64} : memref<20x40xf32>
  linalg.fill ins(%z : f32) outs(%c : memref<20x40xf32>)
  linalg.matmul {aicc.schedule = {mr = 4 : i64, nr = 16 : i64, vw = 8 : i64, kc = 32 : i64, mc = 8 : i64, nc = 32 : i64, ku = 2 : i64, pack_a = false, pack_b = true, parallel = "mn", order = "mn", pf = 0 : i64}} ins(%a, %b : memref<20x24xf32>, memref<24x40xf32>) outs(%c : memref<20x40xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%c : memref<20x40xf32>) outs(%d : memref<20x40xf32>) {
  ^bb0(%x: f32, %o: f32):
    %n = arith.negf %x : f32
    %e = math.exp %n : f32
    %p = arith.addf %e, %one : f32
    %y = arith.divf %x, %p : f32
    linalg.yield %y : f32
  }
  memref.dealloc %c : memref<20x40xf32>
  func.return
}

// -----
// An epilogue on a reshape of C (a conv's (OC, OH*OW) read as (OC, OH, OW)) whose operands
// are all read elementwise: it indexes views of them in C's shape, the same (row, column) as
// the kernel's tile, with no division to split a flat index into (OH, OW).
// CHECK-LABEL: func.func @epilogue_reshaped
// CHECK-SAME:      (%{{.*}}: memref<20x24xf32>, %{{.*}}: memref<24x40xf32>, %[[RES:.*]]: memref<20x5x8xf32>, %[[D:.*]]: memref<20x5x8xf32>)
// CHECK:         %[[RESF:.*]] = memref.collapse_shape %[[RES]]
// CHECK:         %[[RES2:.*]] = memref.expand_shape %[[RESF]] {{.*}} into memref<20x40xf32>
// CHECK:         "scf.parallel"
// CHECK:           aicc_cpu.microkernel
// CHECK-NOT:       arith.divui
// CHECK:               memref.load %{{.*}}[%[[ROW:.*]], %[[COL:.*]]] : memref<20x40xf32>
// CHECK:               memref.load %[[RES2]][%[[ROW]], %[[COL]]] : memref<20x40xf32>
// CHECK:               memref.store %{{.*}}, %{{.*}}[%[[ROW]], %[[COL]]] : memref<20x40xf32>
// CHECK:         }) {aicc.tiled = {op = "matmul", flops = 40000 : i64, epilogue = "arith.addf,arith.maximumf"}}
func.func @epilogue_reshaped(%a: memref<20x24xf32>, %b: memref<24x40xf32>, %res: memref<20x5x8xf32>, %d: memref<20x5x8xf32>) {
  %z = arith.constant 0.0 : f32
  %c = memref.alloc() {alignment = 64 : i64} : memref<20x40xf32>
  linalg.fill ins(%z : f32) outs(%c : memref<20x40xf32>)
  linalg.matmul {aicc.schedule = {mr = 4 : i64, nr = 16 : i64, vw = 8 : i64, kc = 16 : i64, mc = 8 : i64, nc = 32 : i64, ku = 2 : i64, pack_a = false, pack_b = true, parallel = "mn", order = "mn", pf = 0 : i64}} ins(%a, %b : memref<20x24xf32>, memref<24x40xf32>) outs(%c : memref<20x40xf32>)
  %cv = memref.expand_shape %c [[0], [1, 2]] output_shape [20, 5, 8] : memref<20x40xf32> into memref<20x5x8xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%cv, %res : memref<20x5x8xf32>, memref<20x5x8xf32>) outs(%d : memref<20x5x8xf32>) {
  ^bb0(%x: f32, %r: f32, %o: f32):
    %s = arith.addf %x, %r : f32
    %m = arith.maximumf %s, %z : f32
    linalg.yield %m : f32
  }
  memref.dealloc %c : memref<20x40xf32>
  func.return
}

// -----
// The copy folded into the kernels reads a view of a temporary (OPT's residual: a
// 1x6x16 result read as 6x16 rows): the temporary's dealloc moves after the kernels,
// which now read it (left before them, plan-memory gave its memory to the packed A).
// CHECK-LABEL: func.func @bias_view
// CHECK:         %[[R:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x6x16xf32>
// CHECK:         %[[V:.*]] = memref.collapse_shape %[[R]]
// CHECK-NOT:     memref.dealloc %[[R]]
// CHECK:         %[[AP:.*]] = memref.alloc() {alignment = 64 : i64} : memref<30xf32>
// CHECK-NOT:     memref.dealloc %[[R]]
// CHECK:         %[[VF:.*]] = memref.collapse_shape %[[V]]
// CHECK:         aicc_cpu.microkernel %[[AP]][%{{.*}}], {{.*}} init %[[VF]][%{{.*}}]
// CHECK:         memref.dealloc %[[AP]]
// CHECK:         memref.dealloc %[[R]]
func.func @bias_view(%x: memref<6x5xf32>, %w: memref<5x16xf32>, %t: memref<6x16xf32>, %c: memref<6x16xf32>) {
  %r = memref.alloc() {alignment = 64 : i64} : memref<1x6x16xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%t : memref<6x16xf32>) outs(%r : memref<1x6x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %e = math.exp %in : f32
    linalg.yield %e : f32
  }
  %v = memref.collapse_shape %r [[0, 1], [2]] : memref<1x6x16xf32> into memref<6x16xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%v : memref<6x16xf32>) outs(%c : memref<6x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  memref.dealloc %r : memref<1x6x16xf32>
  linalg.matmul {aicc.schedule = {mr = 6 : i64, nr = 16 : i64, vw = 16 : i64, kc = 5 : i64, mc = 6 : i64, nc = 16 : i64, ku = 1 : i64, pack_a = true, pack_b = false, parallel = "", order = "mn", pf = 0 : i64}} ins(%x, %w : memref<6x5xf32>, memref<5x16xf32>) outs(%c : memref<6x16xf32>)
  func.return
}

// -----
// Between the copy and the matmul, the buffer behind the copied view is written through
// itself, not through the view: the copy's value is gone by the time the matmul runs, so
// the copy stays and the kernels accumulate on C (no init).
// CHECK-LABEL: func.func @bias_view_overwritten
// CHECK:         linalg.generic
// CHECK:         linalg.generic
// CHECK:         linalg.fill
// CHECK-NOT:     init
// CHECK:         aicc_cpu.microkernel
// CHECK-NOT:     init
// CHECK:         func.return
func.func @bias_view_overwritten(%x: memref<6x5xf32>, %w: memref<5x16xf32>, %t: memref<6x16xf32>, %c: memref<6x16xf32>) {
  %r = memref.alloc() {alignment = 64 : i64} : memref<1x6x16xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%t : memref<6x16xf32>) outs(%r : memref<1x6x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %e = math.exp %in : f32
    linalg.yield %e : f32
  }
  %v = memref.collapse_shape %r [[0, 1], [2]] : memref<1x6x16xf32> into memref<6x16xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%v : memref<6x16xf32>) outs(%c : memref<6x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%r : memref<1x6x16xf32>)
  linalg.matmul {aicc.schedule = {mr = 6 : i64, nr = 16 : i64, vw = 16 : i64, kc = 5 : i64, mc = 6 : i64, nc = 16 : i64, ku = 1 : i64, pack_a = true, pack_b = false, parallel = "", order = "mn", pf = 0 : i64}} ins(%x, %w : memref<6x5xf32>, memref<5x16xf32>) outs(%c : memref<6x16xf32>)
  memref.dealloc %r : memref<1x6x16xf32>
  func.return
}

// -----
// M = 14 rows, mr = 6, A read in place: 2 rows are left past 2 whole slivers, 4 FMA chains
// in a 2-row kernel (too few to hide the FMA latency), so the last sliver and those rows
// run as two kernels of 4 rows (rows 6-9 and 10-13), each of exactly its rows: no kernel
// computes rows that are dropped, and none clamps its rows of A.
// CHECK-LABEL: func.func @split_tail
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C4:.*]] = arith.constant 4 : index
// CHECK-DAG:     %[[C6:.*]] = arith.constant 6 : index
// CHECK-DAG:     %[[C48:.*]] = arith.constant 48 : index
// CHECK-DAG:     %[[C80:.*]] = arith.constant 80 : index
// CHECK:         scf.for
// CHECK:           aicc_cpu.microkernel %{{.*}}[%[[C0]]], {{.*}} rows %[[C6]] {{.*}}mr = 6 : i64, nr = 16 : i64
// CHECK:         scf.for
// CHECK:           aicc_cpu.microkernel %{{.*}}[%[[C48]]], {{.*}} rows %[[C4]] {{.*}} {mr = 4 : i64, nr = 16 : i64
// CHECK:         scf.for
// CHECK:           aicc_cpu.microkernel %{{.*}}[%[[C80]]], {{.*}} rows %[[C4]] {{.*}} {mr = 4 : i64, nr = 16 : i64
// CHECK-NOT:     a_clamp
func.func @split_tail(%a: memref<14x8xf32>, %b: memref<8x32xf32>, %c: memref<14x32xf32>) {
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%c : memref<14x32xf32>)
  linalg.matmul {aicc.schedule = {mr = 6 : i64, nr = 16 : i64, vw = 8 : i64, kc = 8 : i64, mc = 18 : i64, nc = 32 : i64, ku = 4 : i64, pack_a = false, pack_b = false, parallel = "", order = "mn", pf = 0 : i64}} ins(%a, %b : memref<14x8xf32>, memref<8x32xf32>) outs(%c : memref<14x32xf32>)
  func.return
}

// -----
// The same M in blocks of mc = 6 rows over the threads: blocks 0 and 1 are whole slivers,
// the last block the 2 rows left. A block runs its whole slivers (mcv - mcv % 6 rows: the
// rows left are 0, or 2 in the last block), then, if rows are left, a kernel of 2 rows.
// CHECK-LABEL: func.func @dynamic_tail
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2 : index
// CHECK-DAG:     %[[C6:.*]] = arith.constant 6 : index
// CHECK:         "scf.parallel"
// CHECK:           %[[MCV:.*]] = arith.minsi %[[C6]], %{{.*}} : index
// CHECK:           %[[REM:.*]] = arith.remui %[[MCV]], %[[C6]] : index
// CHECK:           %[[AT:.*]] = arith.divui %[[REM]], %[[C2]] : index
// CHECK:           %[[TAIL:.*]] = arith.muli %[[AT]], %[[C2]] : index
// CHECK:           %[[END:.*]] = arith.subi %[[MCV]], %[[TAIL]] : index
// CHECK:           scf.for %{{.*}} = %[[C0]] to %[[END]] step %[[C6]] {
// CHECK:             aicc_cpu.microkernel {{.*}} rows %[[C6]] {{.*}} {mr = 6 : i64,
// CHECK:           %[[LEFT:.*]] = arith.cmpi ne, %[[REM]], %[[C0]] : index
// CHECK:           scf.if %[[LEFT]] {
// CHECK:             aicc_cpu.microkernel {{.*}} rows %[[C2]] {{.*}} {mr = 2 : i64,
// CHECK-NOT:     a_clamp
func.func @dynamic_tail(%a: memref<14x8xf32>, %b: memref<8x32xf32>, %c: memref<14x32xf32>) {
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%c : memref<14x32xf32>)
  linalg.matmul {aicc.schedule = {mr = 6 : i64, nr = 16 : i64, vw = 8 : i64, kc = 8 : i64, mc = 6 : i64, nc = 32 : i64, ku = 4 : i64, pack_a = false, pack_b = false, parallel = "m", order = "mn", pf = 0 : i64}} ins(%a, %b : memref<14x8xf32>, memref<8x32xf32>) outs(%c : memref<14x32xf32>)
  func.return
}
