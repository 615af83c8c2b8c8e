// RUN: aicc-opt %s -p map-to-gpu | filecheck %s

// An elementwise band: flattened over 256-thread blocks.
// CHECK-LABEL: func.func @relu
// CHECK:       gpu_map.kernel "relu_k0" "elementwise" attributes {grid = array<i64: 2>, block = array<i64: 256>} {
// CHECK-NEXT:    "scf.parallel"
// CHECK:           arith.maximumf
// CHECK:       func.return
func.func @relu(%x: memref<7x65xf32>, %y: memref<7x65xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c7 = arith.constant 7 : index
  %c65 = arith.constant 65 : index
  %zero = arith.constant 0.0 : f32
  "scf.parallel"(%c0, %c0, %c7, %c65, %c1, %c1) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%i: index, %j: index):
    %v = memref.load %x[%i, %j] : memref<7x65xf32>
    %r = arith.maximumf %v, %zero : f32
    memref.store %r, %y[%i, %j] : memref<7x65xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  func.return
}

// -----

// A row reduction (one scf.for with one iter_arg in the band): one block per row, 32 threads
// each holding 2 of the row's 37 elements in registers.
// CHECK-LABEL: func.func @row_max
// CHECK:       gpu_map.kernel "row_max_k0" "row_reduce" attributes {grid = array<i64: 5>, block = array<i64: 32>, tile = array<i64: 2>} {
// CHECK:         scf.for {{.*}} iter_args
// CHECK:           arith.maximumf
func.func @row_max(%x: memref<5x37xf32>, %m: memref<5x1xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %c37 = arith.constant 37 : index
  "scf.parallel"(%c0, %c5, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%i: index):
    %init = memref.load %m[%i, %c0] : memref<5x1xf32>
    %r = scf.for %k = %c0 to %c37 step %c1 iter_args(%acc = %init) -> (f32) {
      %v = memref.load %x[%i, %k] : memref<5x37xf32>
      %n = arith.maximumf %acc, %v : f32
      scf.yield %n : f32
    }
    memref.store %r, %m[%i, %c0] : memref<5x1xf32>
    scf.reduce
  }) : (index, index, index) -> ()
  func.return
}

// -----

// The i{k{j}} matmul nest: 64x64x16 tiles, 16x16 threads; grid (ceil(N/64), ceil(M/64), batch).
// Too few blocks for the 128-wide tiles to fill a GPU: the 64x64 tile is chosen.
// CHECK-LABEL: func.func @matmul
// CHECK:       gpu_map.kernel "matmul_k0" "matmul" attributes {grid = array<i64: 1, 2, 1>, block = array<i64: 16, 16>, tile = array<i64: 64, 64, 16>} {
func.func @matmul(%a: memref<67x33xf32>, %b: memref<33x45xf32>, %c: memref<67x45xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c67 = arith.constant 67 : index
  %c33 = arith.constant 33 : index
  %c45 = arith.constant 45 : index
  "scf.parallel"(%c0, %c67, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%i: index):
    scf.for %k = %c0 to %c33 step %c1 {
      scf.for %j = %c0 to %c45 step %c1 {
        %x = memref.load %a[%i, %k] : memref<67x33xf32>
        %y = memref.load %b[%k, %j] : memref<33x45xf32>
        %z = memref.load %c[%i, %j] : memref<67x45xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %p, %z : f32
        memref.store %s, %c[%i, %j] : memref<67x45xf32>
      }
    }
    scf.reduce
  }) : (index, index, index) -> ()
  func.return
}

// -----

// The (i,j){k} nest with the accumulator in iter_args is a matmul too, not a row reduction.
// CHECK-LABEL: func.func @matmul_acc
// CHECK:       gpu_map.kernel "matmul_acc_k0" "matmul"
func.func @matmul_acc(%a: memref<64x512xf32>, %b: memref<512x10xf32>, %c: memref<64x10xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c10 = arith.constant 10 : index
  %c512 = arith.constant 512 : index
  "scf.parallel"(%c0, %c0, %c64, %c10, %c1, %c1) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%i: index, %j: index):
    %init = memref.load %c[%i, %j] : memref<64x10xf32>
    %r = scf.for %k = %c0 to %c512 step %c1 iter_args(%acc = %init) -> (f32) {
      %x = memref.load %a[%i, %k] : memref<64x512xf32>
      %y = memref.load %b[%k, %j] : memref<512x10xf32>
      %p = arith.mulf %x, %y : f32
      %s = arith.addf %acc, %p : f32
      scf.yield %s : f32
    }
    memref.store %r, %c[%i, %j] : memref<64x10xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  func.return
}

// -----

// Code outside any scf.parallel (a full reduction to rank 0) runs in a one-thread kernel;
// buffer management stays on the host.
// CHECK-LABEL: func.func @total
// CHECK:       memref.alloc
// CHECK:       gpu_map.kernel "total_k0" "single" attributes {grid = array<i64: 1>, block = array<i64: 1>} {
// CHECK-NEXT:    scf.for
// CHECK:       memref.copy
// CHECK:       memref.dealloc
func.func @total(%x: memref<9xf32>, %out: memref<f32>) {
  %t = memref.alloc() : memref<f32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c9 = arith.constant 9 : index
  %zero = arith.constant 0.0 : f32
  %r = scf.for %k = %c0 to %c9 step %c1 iter_args(%acc = %zero) -> (f32) {
    %v = memref.load %x[%k] : memref<9xf32>
    %s = arith.addf %acc, %v : f32
    scf.yield %s : f32
  }
  memref.store %r, %t[] : memref<f32>
  "memref.copy"(%t, %out) : (memref<f32>, memref<f32>) -> ()
  memref.dealloc %t : memref<f32>
  func.return
}

// -----

// A large matmul: 128x128 tiles give 16 x 16 = 256 blocks, enough for a GPU's 132 SMs, so
// 16x16 threads each compute an 8x8 register tile.
// CHECK-LABEL: func.func @matmul_large
// CHECK:       gpu_map.kernel "matmul_large_k0" "matmul" attributes {grid = array<i64: 16, 16, 1>, block = array<i64: 16, 16>, tile = array<i64: 128, 128, 8>} {
func.func @matmul_large(%a: memref<2048x512xf32>, %b: memref<512x2048xf32>, %c: memref<2048x2048xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cm = arith.constant 2048 : index
  %ck = arith.constant 512 : index
  "scf.parallel"(%c0, %cm, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%i: index):
    scf.for %k = %c0 to %ck step %c1 {
      scf.for %j = %c0 to %cm step %c1 {
        %x = memref.load %a[%i, %k] : memref<2048x512xf32>
        %y = memref.load %b[%k, %j] : memref<512x2048xf32>
        %z = memref.load %c[%i, %j] : memref<2048x2048xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %p, %z : f32
        memref.store %s, %c[%i, %j] : memref<2048x2048xf32>
      }
    }
    scf.reduce
  }) : (index, index, index) -> ()
  func.return
}
