// RUN: aicc-opt %s -p plan-memory --split-input-file | filecheck %s
// RUN: aicc-opt %s -p "plan-memory{workspace-arg=true}" --split-input-file | filecheck %s --check-prefix=WS

// %a and %b are live together; %c starts after both are freed, so it reuses %a's bytes
// (offset 0). The 1 KiB %b sits above the 4 KiB %a, one cache line past its end: from 4 KiB
// on, a buffer of an even number of 64-byte lines takes one more, so that buffers side by side
// start in different L1 sets (not 4 KiB apart).
// CHECK-LABEL: func.func @reuse
// CHECK-NEXT:    %[[ARENA:.*]] = memref.alloc() {alignment = 64 : i64} : memref<5184xi8>
// CHECK:         %[[A:.*]] = memref.view %[[ARENA]][%{{.*}}][] : memref<5184xi8> to memref<1024xf32>
// CHECK:         %[[OB:.*]] = arith.constant 4160 : index
// CHECK-NEXT:    %[[B:.*]] = memref.view %[[ARENA]][%[[OB]]][] : memref<5184xi8> to memref<256xf32>
// CHECK:         %[[OC:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[C:.*]] = memref.view %[[ARENA]][%[[OC]]][] : memref<5184xi8> to memref<1024xf32>
// CHECK-NOT:     memref.dealloc %[[A]]
// CHECK:         memref.dealloc %[[ARENA]] : memref<5184xi8>
// CHECK-NEXT:    func.return

// With workspace-arg, the arena is the caller's: a trailing argument, its size on the function.
// WS-LABEL: func.func @reuse
// WS-SAME:    %workspace: memref<5184xi8>) attributes {aicc.workspace_bytes = 5184 : i64}
// WS-NOT:     memref.alloc
// WS-NOT:     memref.dealloc
func.func @reuse(%x: memref<1024xf32>, %o: memref<1024xf32>) {
  %a = memref.alloc() {alignment = 64 : i64} : memref<1024xf32>
  %b = memref.alloc() {alignment = 64 : i64} : memref<256xf32>
  "memref.copy"(%x, %a) : (memref<1024xf32>, memref<1024xf32>) -> ()
  "memref.copy"(%a, %o) : (memref<1024xf32>, memref<1024xf32>) -> ()
  memref.dealloc %b : memref<256xf32>
  memref.dealloc %a : memref<1024xf32>
  %c = memref.alloc() {alignment = 64 : i64} : memref<1024xf32>
  "memref.copy"(%o, %c) : (memref<1024xf32>, memref<1024xf32>) -> ()
  "memref.copy"(%c, %o) : (memref<1024xf32>, memref<1024xf32>) -> ()
  memref.dealloc %c : memref<1024xf32>
  func.return
}
