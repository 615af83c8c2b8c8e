// RUN: aicc-opt %s -t llvm | filecheck %s
// A parallel loop big enough for threads is outlined into a body function whose pointer parameters are noalias where
// each points at its own object. Views of plan-memory's workspace at byte ranges that do not
// overlap count as such (buffers live at once get disjoint ranges), so a copy between two of
// them vectorizes without run-time overlap checks; views whose ranges overlap stay plain
// pointers.

// CHECK-LABEL: define internal void @"copy.par0.body"(ptr captures(none) noalias %{{.*}}, ptr captures(none) noalias %{{.*}}, i64 %{{.*}}, i64 %{{.*}})
// CHECK-LABEL: define internal void @"copy.par1.body"(ptr %{{.*}}, ptr %{{.*}}, i64 %{{.*}}, i64 %{{.*}})

func.func @copy(%ws: memref<1048576xi8>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c1024 = arith.constant 1024 : index
  %o0 = arith.constant 0 : index
  %o1 = arith.constant 262144 : index
  %o2 = arith.constant 131072 : index
  %a = memref.view %ws[%o0][] : memref<1048576xi8> to memref<64x1024xf32>
  %b = memref.view %ws[%o1][] : memref<1048576xi8> to memref<64x1024xf32>
  %c = memref.view %ws[%o2][] : memref<1048576xi8> to memref<64x1024xf32>
  "scf.parallel"(%c0, %c0, %c64, %c1024, %c1, %c1) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%i: index, %j: index):
    %v = memref.load %a[%i, %j] : memref<64x1024xf32>
    memref.store %v, %b[%i, %j] : memref<64x1024xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  "scf.parallel"(%c0, %c0, %c64, %c1024, %c1, %c1) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%i: index, %j: index):
    %v = memref.load %a[%i, %j] : memref<64x1024xf32>
    memref.store %v, %c[%i, %j] : memref<64x1024xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  func.return
}
