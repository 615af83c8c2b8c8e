// RUN: aicc-opt %s -p map-to-gpu --split-input-file | filecheck %s
// Grouping: one kernel runs several loop nests (the loop IR inside is unchanged; the emitter
// fuses them into one launch). Inputs are the loop IR the cuda pipeline produces.

// A matmul takes the fill of its output before it and the bias+relu epilogue after it; the
// pure host ops between them (the global holding 0.0) move above the kernel.
// CHECK-LABEL: func.func @matmul_bias_relu
// CHECK:       %[[T:.*]] = memref.view %workspace
// CHECK:       memref.get_global @__constant_0
// CHECK-NEXT:  gpu_map.kernel "matmul_bias_relu_k0" "matmul" attributes {grid = array<i64: 3, 2, 1>, block = array<i64: 16, 16>, tile = array<i64: 64, 64, 16>} {
// CHECK-NEXT:    "scf.parallel"
// CHECK-NEXT:    ^{{.*}}(%[[I:.*]]: index, %[[J:.*]]: index):
// CHECK-NEXT:      memref.store %{{.*}}, %[[T]][%[[I]], %[[J]]]
// CHECK:         scf.for
// CHECK:           scf.for
// CHECK:             arith.mulf
// CHECK:         "scf.parallel"
// CHECK:           arith.maximumf
// CHECK:       }
// CHECK-NOT:   gpu_map.kernel
// CHECK:       func.return
"memref.global"() <{sym_name = "__constant_0", type = memref<f32>, initial_value = dense<0.000000e+00> : tensor<f32>, sym_visibility = "private", constant}> : () -> ()
func.func @matmul_bias_relu(%0: memref<70x20xf32>, %1: memref<20x130xf32>, %2: memref<130xf32>, %3: memref<70x130xf32>, %workspace: memref<36416xi8>) attributes {aicc.workspace_bytes = 36416 : i64} {
  %4 = arith.constant 0.000000e+00 : f32
  %5 = arith.constant 0 : index
  %6 = memref.view %workspace[%5][] : memref<36416xi8> to memref<70x130xf32>
  %7 = arith.constant 1 : index
  %8 = arith.constant 70 : index
  %9 = arith.constant 130 : index
  "scf.parallel"(%5, %5, %8, %9, %7, %7) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%10: index, %11: index):
    memref.store %4, %6[%10, %11] : memref<70x130xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  %12 = arith.constant 20 : index
  "scf.parallel"(%5, %8, %7) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%13: index):
    scf.for %14 = %5 to %12 step %7 {
      scf.for %15 = %5 to %9 step %7 {
        %16 = memref.load %0[%13, %14] : memref<70x20xf32>
        %17 = memref.load %1[%14, %15] : memref<20x130xf32>
        %18 = memref.load %6[%13, %15] : memref<70x130xf32>
        %19 = arith.mulf %16, %17 : f32
        %20 = arith.addf %19, %18 : f32
        memref.store %20, %6[%13, %15] : memref<70x130xf32>
      }
    }
    scf.reduce
  }) : (index, index, index) -> ()
  %21 = memref.get_global @__constant_0 : memref<f32>
  "scf.parallel"(%5, %5, %8, %9, %7, %7) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%22: index, %23: index):
    %24 = memref.load %6[%22, %23] : memref<70x130xf32>
    %25 = memref.load %2[%23] : memref<130xf32>
    %26 = memref.load %21[] : memref<f32>
    %27 = arith.addf %24, %25 : f32
    %28 = arith.maximumf %27, %26 : f32
    memref.store %28, %3[%22, %23] : memref<70x130xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  func.return
}

// -----

// A batched matmul whose B broadcasts over the batch dims: the batch (2x3) goes on grid z.
// CHECK-LABEL: func.func @bmm_broadcast
// CHECK:       gpu_map.kernel "bmm_broadcast_k0" "matmul" attributes {grid = array<i64: 1, 1, 6>, block = array<i64: 16, 16>, tile = array<i64: 64, 64, 16>} {
// CHECK-NEXT:    "scf.parallel"
// CHECK:         "scf.parallel"
// CHECK:             memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<12x28xf32>
// CHECK-NOT:   gpu_map.kernel
func.func @bmm_broadcast(%0: memref<2x3x20x12xf32>, %1: memref<12x28xf32>, %2: memref<2x3x20x28xf32>) {
  %3 = arith.constant 0.000000e+00 : f32
  %4 = arith.constant 0 : index
  %5 = arith.constant 1 : index
  %6 = arith.constant 2 : index
  %7 = arith.constant 3 : index
  %8 = arith.constant 20 : index
  %9 = arith.constant 28 : index
  "scf.parallel"(%4, %4, %4, %4, %6, %7, %8, %9, %5, %5, %5, %5) <{operandSegmentSizes = array<i32: 4, 4, 4, 0>}> ({
  ^bb0(%10: index, %11: index, %12: index, %13: index):
    memref.store %3, %2[%10, %11, %12, %13] : memref<2x3x20x28xf32>
    scf.reduce
  }) : (index, index, index, index, index, index, index, index, index, index, index, index) -> ()
  %14 = arith.constant 12 : index
  "scf.parallel"(%4, %4, %4, %6, %7, %8, %5, %5, %5) <{operandSegmentSizes = array<i32: 3, 3, 3, 0>}> ({
  ^bb0(%15: index, %16: index, %17: index):
    scf.for %18 = %4 to %14 step %5 {
      scf.for %19 = %4 to %9 step %5 {
        %20 = memref.load %0[%15, %16, %17, %18] : memref<2x3x20x12xf32>
        %21 = memref.load %1[%18, %19] : memref<12x28xf32>
        %22 = memref.load %2[%15, %16, %17, %19] : memref<2x3x20x28xf32>
        %23 = arith.mulf %20, %21 : f32
        %24 = arith.addf %22, %23 : f32
        memref.store %24, %2[%15, %16, %17, %19] : memref<2x3x20x28xf32>
      }
    }
    scf.reduce
  }) : (index, index, index, index, index, index, index, index, index) -> ()
  func.return
}

// -----

// Softmax's six nests (fill, max, exp, fill, sum, divide) over the same 5 rows of 37 become one
// kernel: a block of 32 threads per row, each keeping 2 elements of the row in registers.
// CHECK-LABEL: func.func @softmax
// CHECK:       gpu_map.kernel "softmax_k0" "row_reduce" attributes {grid = array<i64: 5>, block = array<i64: 32>, tile = array<i64: 2>} {
// CHECK-COUNT-6: "scf.parallel"
// CHECK-NOT:   gpu_map.kernel
// CHECK:       func.return
func.func @softmax(%0: memref<5x37xf32>, %1: memref<5x37xf32>, %workspace: memref<832xi8>) attributes {aicc.workspace_bytes = 832 : i64} {
  %2 = arith.constant 0xff800000 : f32
  %3 = arith.constant 768 : index
  %4 = memref.view %workspace[%3][] : memref<832xi8> to memref<5x1xf32>
  %5 = arith.constant 0 : index
  %6 = arith.constant 1 : index
  %7 = arith.constant 5 : index
  "scf.parallel"(%5, %5, %7, %6, %6, %6) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%8: index, %9: index):
    memref.store %2, %4[%8, %9] : memref<5x1xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  %10 = arith.constant 37 : index
  "scf.parallel"(%5, %7, %6) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%11: index):
    %12 = memref.load %4[%11, %5] : memref<5x1xf32>
    %13 = scf.for %14 = %5 to %10 step %6 iter_args(%15 = %12) -> (f32) {
      %16 = memref.load %0[%11, %14] : memref<5x37xf32>
      %17 = arith.maximumf %15, %16 fastmath<reassoc> : f32
      scf.yield %17 : f32
    }
    memref.store %13, %4[%11, %5] : memref<5x1xf32>
    scf.reduce
  }) : (index, index, index) -> ()
  %18 = memref.view %workspace[%5][] : memref<832xi8> to memref<5x37xf32>
  "scf.parallel"(%5, %5, %7, %10, %6, %6) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%19: index, %20: index):
    %21 = memref.load %0[%19, %20] : memref<5x37xf32>
    %22 = memref.load %4[%19, %5] : memref<5x1xf32>
    %23 = arith.subf %21, %22 : f32
    %24 = math.exp %23 : f32
    memref.store %24, %18[%19, %20] : memref<5x37xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  %25 = arith.constant 0.000000e+00 : f32
  "scf.parallel"(%5, %5, %7, %6, %6, %6) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%26: index, %27: index):
    memref.store %25, %4[%26, %27] : memref<5x1xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  "scf.parallel"(%5, %7, %6) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%28: index):
    %29 = memref.load %4[%28, %5] : memref<5x1xf32>
    %30 = scf.for %31 = %5 to %10 step %6 iter_args(%32 = %29) -> (f32) {
      %33 = memref.load %18[%28, %31] : memref<5x37xf32>
      %34 = arith.addf %32, %33 fastmath<reassoc> : f32
      scf.yield %34 : f32
    }
    memref.store %30, %4[%28, %5] : memref<5x1xf32>
    scf.reduce
  }) : (index, index, index) -> ()
  "scf.parallel"(%5, %5, %7, %10, %6, %6) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%35: index, %36: index):
    %37 = memref.load %18[%35, %36] : memref<5x37xf32>
    %38 = memref.load %4[%35, %5] : memref<5x1xf32>
    %39 = arith.divf %37, %38 : f32
    memref.store %39, %1[%35, %36] : memref<5x37xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  func.return
}

// -----

// A row too long for registers (20000): the fill and the reduction still share a kernel, and
// the threads stride over the row (no tile).
// CHECK-LABEL: func.func @row_sum_long
// CHECK:       gpu_map.kernel "row_sum_long_k0" "row_reduce" attributes {grid = array<i64: 3>, block = array<i64: 1024>} {
// CHECK-COUNT-2: "scf.parallel"
// CHECK-NOT:   gpu_map.kernel
func.func @row_sum_long(%0: memref<3x20000xf32>, %1: memref<3xf32>) {
  %2 = arith.constant 0.000000e+00 : f32
  %3 = arith.constant 0 : index
  %4 = arith.constant 1 : index
  %5 = arith.constant 3 : index
  "scf.parallel"(%3, %5, %4) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%6: index):
    memref.store %2, %1[%6] : memref<3xf32>
    scf.reduce
  }) : (index, index, index) -> ()
  %7 = arith.constant 20000 : index
  "scf.parallel"(%3, %5, %4) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%8: index):
    %9 = memref.load %1[%8] : memref<3xf32>
    %10 = scf.for %11 = %3 to %7 step %4 iter_args(%12 = %9) -> (f32) {
      %13 = memref.load %0[%8, %11] : memref<3x20000xf32>
      %14 = arith.addf %12, %13 fastmath<reassoc> : f32
      scf.yield %14 : f32
    }
    memref.store %10, %1[%8] : memref<3xf32>
    scf.reduce
  }) : (index, index, index) -> ()
  func.return
}

// -----

// A column mean: the reduction over axis 0 is a top-level scf.for nest (no parallel band). It
// becomes a col_reduce: 8 threads over the 7 kept columns, 128 splitting the 300 rows, with
// the fill before it and the scaling after it.
// CHECK-LABEL: func.func @column_mean
// CHECK:       memref.get_global
// CHECK-NEXT:  gpu_map.kernel "column_mean_k0" "col_reduce" attributes {grid = array<i64: 1>, block = array<i64: 8, 128>} {
// CHECK-NEXT:    "scf.parallel"
// CHECK:         scf.for
// CHECK-NEXT:      scf.for
// CHECK:         "scf.parallel"
// CHECK:           arith.mulf
// CHECK-NOT:   gpu_map.kernel
"memref.global"() <{sym_name = "__constant_0", type = memref<f32>, initial_value = dense<0.00333333341> : tensor<f32>, sym_visibility = "private", constant}> : () -> ()
func.func @column_mean(%0: memref<300x7xf32>, %1: memref<7xf32>, %workspace: memref<64xi8>) attributes {aicc.workspace_bytes = 64 : i64} {
  %2 = arith.constant 0.000000e+00 : f32
  %3 = arith.constant 0 : index
  %4 = memref.view %workspace[%3][] : memref<64xi8> to memref<7xf32>
  %5 = arith.constant 1 : index
  %6 = arith.constant 7 : index
  "scf.parallel"(%3, %6, %5) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%7: index):
    memref.store %2, %4[%7] : memref<7xf32>
    scf.reduce
  }) : (index, index, index) -> ()
  %8 = arith.constant 300 : index
  scf.for %9 = %3 to %8 step %5 {
    scf.for %10 = %3 to %6 step %5 {
      %11 = memref.load %0[%9, %10] : memref<300x7xf32>
      %12 = memref.load %4[%10] : memref<7xf32>
      %13 = arith.addf %12, %11 : f32
      memref.store %13, %4[%10] : memref<7xf32>
    }
  }
  %14 = memref.get_global @__constant_0 : memref<f32>
  "scf.parallel"(%3, %6, %5) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%15: index):
    %16 = memref.load %4[%15] : memref<7xf32>
    %17 = memref.load %14[] : memref<f32>
    %18 = arith.mulf %16, %17 : f32
    memref.store %18, %1[%15] : memref<7xf32>
    scf.reduce
  }) : (index, index, index) -> ()
  func.return
}

// -----

// Attention: Q @ Kᵀ (B read transposed), softmax in one row kernel, then P @ V with softmax's
// division inlined into the matmul's A operand. The row sums are read by that matmul, and
// plan-memory placed them over the scores the row kernel reads; sharing bytes between blocks
// of one launch would race, so map-to-gpu gives the sums an allocation of their own.
// CHECK-LABEL: func.func @attention
// CHECK:       gpu_map.kernel "attention_k0" "matmul" attributes {grid = array<i64: 1, 1, 2>
// CHECK:       %[[S:.*]] = memref.alloc() : memref<2x17x1xf32>
// CHECK-NEXT:  gpu_map.kernel "attention_k1" "row_reduce" attributes {grid = array<i64: 34>, block = array<i64: 32>, tile = array<i64: 1>} {
// CHECK-COUNT-5: "scf.parallel"
// CHECK:       gpu_map.kernel "attention_k2" "matmul"
// CHECK:             arith.divf
// CHECK:             arith.mulf
// CHECK:       memref.dealloc %[[S]]
// CHECK-NEXT:  func.return
func.func @attention(%0: memref<2x17x8xf32>, %1: memref<2x11x8xf32>, %2: memref<2x11x8xf32>, %3: memref<2x17x8xf32>, %workspace: memref<3264xi8>) attributes {aicc.workspace_bytes = 3264 : i64} {
  %4 = arith.constant 0.000000e+00 : f32
  %5 = arith.constant 0 : index
  %6 = memref.view %workspace[%5][] : memref<3264xi8> to memref<2x17x11xf32>
  %7 = arith.constant 1 : index
  %8 = arith.constant 2 : index
  %9 = arith.constant 17 : index
  %10 = arith.constant 11 : index
  "scf.parallel"(%5, %5, %5, %8, %9, %10, %7, %7, %7) <{operandSegmentSizes = array<i32: 3, 3, 3, 0>}> ({
  ^bb0(%11: index, %12: index, %13: index):
    memref.store %4, %6[%11, %12, %13] : memref<2x17x11xf32>
    scf.reduce
  }) : (index, index, index, index, index, index, index, index, index) -> ()
  %14 = arith.constant 8 : index
  "scf.parallel"(%5, %5, %8, %9, %7, %7) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%15: index, %16: index):
    scf.for %17 = %5 to %14 step %7 {
      scf.for %18 = %5 to %10 step %7 {
        %19 = memref.load %0[%15, %16, %17] : memref<2x17x8xf32>
        %20 = memref.load %1[%15, %18, %17] : memref<2x11x8xf32>
        %21 = memref.load %6[%15, %16, %18] : memref<2x17x11xf32>
        %22 = arith.mulf %19, %20 : f32
        %23 = arith.addf %21, %22 : f32
        memref.store %23, %6[%15, %16, %18] : memref<2x17x11xf32>
      }
    }
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  %24 = arith.constant 0xff800000 : f32
  %25 = arith.constant 3072 : index
  %26 = memref.view %workspace[%25][] : memref<3264xi8> to memref<2x17x1xf32>
  "scf.parallel"(%5, %5, %5, %8, %9, %7, %7, %7, %7) <{operandSegmentSizes = array<i32: 3, 3, 3, 0>}> ({
  ^bb0(%27: index, %28: index, %29: index):
    memref.store %24, %26[%27, %28, %29] : memref<2x17x1xf32>
    scf.reduce
  }) : (index, index, index, index, index, index, index, index, index) -> ()
  "scf.parallel"(%5, %5, %8, %9, %7, %7) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%30: index, %31: index):
    %32 = memref.load %26[%30, %31, %5] : memref<2x17x1xf32>
    %33 = scf.for %34 = %5 to %10 step %7 iter_args(%35 = %32) -> (f32) {
      %36 = memref.load %6[%30, %31, %34] : memref<2x17x11xf32>
      %37 = arith.maximumf %35, %36 fastmath<reassoc> : f32
      scf.yield %37 : f32
    }
    memref.store %33, %26[%30, %31, %5] : memref<2x17x1xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  %38 = arith.constant 1536 : index
  %39 = memref.view %workspace[%38][] : memref<3264xi8> to memref<2x17x11xf32>
  "scf.parallel"(%5, %5, %5, %8, %9, %10, %7, %7, %7) <{operandSegmentSizes = array<i32: 3, 3, 3, 0>}> ({
  ^bb0(%40: index, %41: index, %42: index):
    %43 = memref.load %6[%40, %41, %42] : memref<2x17x11xf32>
    %44 = memref.load %26[%40, %41, %5] : memref<2x17x1xf32>
    %45 = arith.subf %43, %44 : f32
    %46 = math.exp %45 : f32
    memref.store %46, %39[%40, %41, %42] : memref<2x17x11xf32>
    scf.reduce
  }) : (index, index, index, index, index, index, index, index, index) -> ()
  %47 = memref.view %workspace[%5][] : memref<3264xi8> to memref<2x17x1xf32>
  "scf.parallel"(%5, %5, %5, %8, %9, %7, %7, %7, %7) <{operandSegmentSizes = array<i32: 3, 3, 3, 0>}> ({
  ^bb0(%48: index, %49: index, %50: index):
    memref.store %4, %47[%48, %49, %50] : memref<2x17x1xf32>
    scf.reduce
  }) : (index, index, index, index, index, index, index, index, index) -> ()
  "scf.parallel"(%5, %5, %8, %9, %7, %7) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%51: index, %52: index):
    %53 = memref.load %47[%51, %52, %5] : memref<2x17x1xf32>
    %54 = scf.for %55 = %5 to %10 step %7 iter_args(%56 = %53) -> (f32) {
      %57 = memref.load %39[%51, %52, %55] : memref<2x17x11xf32>
      %58 = arith.addf %56, %57 fastmath<reassoc> : f32
      scf.yield %58 : f32
    }
    memref.store %54, %47[%51, %52, %5] : memref<2x17x1xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  "scf.parallel"(%5, %5, %5, %8, %9, %14, %7, %7, %7) <{operandSegmentSizes = array<i32: 3, 3, 3, 0>}> ({
  ^bb0(%59: index, %60: index, %61: index):
    memref.store %4, %3[%59, %60, %61] : memref<2x17x8xf32>
    scf.reduce
  }) : (index, index, index, index, index, index, index, index, index) -> ()
  "scf.parallel"(%5, %5, %8, %9, %7, %7) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%62: index, %63: index):
    scf.for %64 = %5 to %10 step %7 {
      scf.for %65 = %5 to %14 step %7 {
        %66 = memref.load %39[%62, %63, %64] : memref<2x17x11xf32>
        %67 = memref.load %47[%62, %63, %5] : memref<2x17x1xf32>
        %68 = memref.load %2[%62, %64, %65] : memref<2x11x8xf32>
        %69 = memref.load %3[%62, %63, %65] : memref<2x17x8xf32>
        %70 = arith.divf %66, %67 : f32
        %71 = arith.mulf %70, %68 : f32
        %72 = arith.addf %69, %71 : f32
        memref.store %72, %3[%62, %63, %65] : memref<2x17x8xf32>
      }
    }
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  func.return
}
