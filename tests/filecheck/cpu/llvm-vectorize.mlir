// RUN: aicc-opt %s -p linalg-to-loops | filecheck %s --check-prefix=LOOPS
// RUN: aicc-opt %s -p linalg-to-loops | aicc-opt -t llvm | filecheck %s --check-prefix=LLVM
// aicc.vectorize on a generic (Winograd's F(4x4) input transform sets it): linalg-to-loops
// copies it onto the scf.parallel of its loops, and the LLVM emitter puts
// llvm.loop.vectorize.enable and .width on the innermost loop only, so that LLVM vectorizes
// these strided reads 8 lanes wide, whatever its cost model says.
// LOOPS-LABEL: func.func @vectorize
// LOOPS:         "scf.parallel"
// LOOPS:           memref.load %x[%{{.*}}, %{{.*}}] : memref<2x40xf32>
// LOOPS:         }) {aicc.vectorize = 8 : i64}
// LLVM-LABEL:  define void @"vectorize"
// LLVM:          icmp slt i64 %{{.*}}, 10
// LLVM-NEXT:     br i1 %{{.*}}, label %{{.*}}, label %{{.*}}, !llvm.loop ![[LOOP:[0-9]+]]
// LLVM:          icmp slt i64 %{{.*}}, 2
// LLVM-NEXT:     br i1 %{{.*}}, label %{{.*}}, label %{{[^,]*}}{{$}}
// LLVM-DAG:    ![[ENABLE:[0-9]+]] = !{ !"llvm.loop.vectorize.enable", i1 1 }
// LLVM-DAG:    ![[WIDTH:[0-9]+]] = !{ !"llvm.loop.vectorize.width", i32 8 }
// LLVM-DAG:    ![[LOOP]] = !{ ![[LOOP]], ![[ENABLE]], ![[WIDTH]] }
func.func @vectorize(%x: memref<2x40xf32>, %y: memref<2x10xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, (d1 * 4))>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<2x40xf32>) outs(%y : memref<2x10xf32>) attrs = {aicc.vectorize = 8 : i64} {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  }
  func.return
}
