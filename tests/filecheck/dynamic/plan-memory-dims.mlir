// RUN: aicc-opt %s -p 'plan-memory{workspace-arg=true}' | filecheck %s

// Dynamic sizes: the three n x 8 temporaries are 32 * n bytes each, one monomial (n), so they
// are placed by first-fit in units of n after the static part (the 4x4 buffer, 64 bytes): %a
// and %c, never live at once, share the slot [0, 64) n-units, %b takes [64, 128). The arena is
// a memref<?xi8> of 64 + 128 * n bytes, which the runtime computes per call.
// CHECK-LABEL: func.func @two
// CHECK-SAME:    %[[WS:[a-z]+]]: memref<?xi8>) attributes {aicc.arg_dims = ["n", "n"], aicc.workspace_dynamic = "n*128+64", aicc.workspace_bytes = 64 : i64}
// CHECK:         %[[N:.*]] = memref.dim
// CHECK:         %[[A:.*]] = memref.view %[[WS]][%{{.*}}][%{{.*}}] {aicc.arena_slot = array<i64: 0, 0, 64>} : memref<?xi8> to memref<?x8xf32>
// CHECK:         memref.view %[[WS]][%{{.*}}][] : memref<?xi8> to memref<4x4xf32>
// CHECK:         %[[B:.*]] = memref.view %[[WS]][%{{.*}}][%{{.*}}] {aicc.arena_slot = array<i64: 0, 64, 128>} : memref<?xi8> to memref<?x8xf32>
// CHECK:         %[[C:.*]] = memref.view %[[WS]][%{{.*}}][%{{.*}}] {aicc.arena_slot = array<i64: 0, 0, 64>} : memref<?xi8> to memref<?x8xf32>
// CHECK-NOT:     memref.alloc
// CHECK-NOT:     memref.dealloc
func.func @two(%x: memref<?x8xf32>, %out: memref<?x8xf32>) attributes {aicc.arg_dims = ["n", "n"]} {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?x8xf32>
  %a = memref.alloc(%n) {alignment = 64 : i64} : memref<?x8xf32>
  %t = memref.alloc() {alignment = 64 : i64} : memref<4x4xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<?x8xf32>) outs(%a : memref<?x8xf32>) {
  ^bb0(%i: f32, %o: f32):
    %e = math.exp %i : f32
    linalg.yield %e : f32
  }
  %b = memref.alloc(%n) {alignment = 64 : i64} : memref<?x8xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a : memref<?x8xf32>) outs(%b : memref<?x8xf32>) {
  ^bb0(%i: f32, %o: f32):
    %e = math.exp %i : f32
    linalg.yield %e : f32
  }
  memref.dealloc %a : memref<?x8xf32>
  %c = memref.alloc(%n) {alignment = 64 : i64} : memref<?x8xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%b : memref<?x8xf32>) outs(%c : memref<?x8xf32>) {
  ^bb0(%i: f32, %o: f32):
    %e = math.exp %i : f32
    linalg.yield %e : f32
  }
  memref.dealloc %b : memref<?x8xf32>
  "memref.copy"(%c, %out) : (memref<?x8xf32>, memref<?x8xf32>) -> ()
  memref.dealloc %c : memref<?x8xf32>
  memref.dealloc %t : memref<4x4xf32>
  func.return
}
